// The worker port's ZeroMQ CURVE key pair (docs/DESIGN.md, "Tokens"): beyond loopback the
// worker link is encrypted, so neither tokens nor run configs cross the network in clear.
#pragma once

#include <string>

#include "common/status.h"

namespace headlab::coord {

// Z85 keys of 40 characters.
struct CurveKeys {
  std::string public_key;
  std::string secret_key;
};
constexpr const char* kCurvePublicFile = "curve_server.pub";
constexpr const char* kCurveSecretFile = "curve_server.key";

// Returns the key pair in DATA_DIR/curve_server.{key,pub}, creating both (the secret key
// with mode 0600) when missing. Unavailable when this libzmq has no CURVE.
StatusOr<CurveKeys> LoadOrCreateCurveKeys(const std::string& data_dir);

// Returns true iff the ZeroMQ endpoint ("tcp://127.0.0.1:8322", "ipc://...") only takes
// connections from this machine.
bool IsLocalEndpoint(const std::string& endpoint);

}  // namespace headlab::coord
