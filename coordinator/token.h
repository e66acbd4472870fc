// The shared secret that authenticates workers (READY.token) and HTTP writes (Bearer).
#pragma once

#include <string>

#include "common/status.h"
#include "common/token_lookup.h"

namespace headlab::coord {

// Returns the token found by LookUpToken (common/token_lookup.h: `token_file`, else
// $HEADLAB_TOKEN, else DATA_DIR/token); when none is found, creates DATA_DIR/token (mode
// 0600, 32 random bytes from getrandom as hex) and returns it.
StatusOr<std::string> LoadOrCreateToken(const std::string& data_dir, const std::string& token_file);

// Returns `bytes` bytes from the kernel's random source as lowercase hex (the token, and
// the workers' session keys), or IoError.
StatusOr<std::string> RandomHex(size_t bytes);

// Returns true iff a == b, in time independent of where they differ.
bool TokenEquals(const std::string& a, const std::string& b);

}  // namespace headlab::coord
