// The shared secret that authenticates workers (READY.token) and HTTP writes (Bearer).
#pragma once

#include <string>

#include "common/status.h"

namespace headlab::coord {

// Returns the token: $HEADLAB_TOKEN if set, else the contents of `token_file` if given,
// else DATA_DIR/token, created (mode 0600, 32 random bytes from /dev/urandom as hex) if
// it does not exist. Surrounding whitespace is stripped; an empty token is an error.
StatusOr<std::string> LoadOrCreateToken(const std::string& data_dir, const std::string& token_file);

// Returns `bytes` bytes from the kernel's random source as lowercase hex (the token, and
// the workers' session keys), or IoError.
StatusOr<std::string> RandomHex(size_t bytes);

// Returns the token in `path` with surrounding whitespace stripped; InvalidArgument if
// it is empty, the read error otherwise.
StatusOr<std::string> ReadTokenFile(const std::string& path);

// Returns true iff a == b, in time independent of where they differ.
bool TokenEquals(const std::string& a, const std::string& b);

}  // namespace headlab::coord
