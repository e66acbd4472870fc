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

// Returns the workers' own token, DATA_DIR/worker_token, creating it (mode 0600) when
// missing. It authenticates READY on the worker port only: over HTTP it grants nothing, so
// a worker host (or anyone who reads its credentials) cannot act as a user.
StatusOr<std::string> LoadOrCreateWorkerToken(const std::string& data_dir);
constexpr const char* kWorkerTokenFile = "worker_token";

// Returns `bytes` bytes from the kernel's random source as lowercase hex (the token, and
// the workers' session keys), or IoError.
StatusOr<std::string> RandomHex(size_t bytes);

// Returns true iff a == b, in time independent of where they differ.
bool TokenEquals(const std::string& a, const std::string& b);

}  // namespace headlab::coord
