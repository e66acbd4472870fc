// The worker port's CURVE key pair.
#include "coordinator/curve_keys.h"

#include <zmq.h>

#include "common/files.h"
#include "common/token_lookup.h"
#include "coordinator/http_policy.h"

namespace headlab::coord {

StatusOr<CurveKeys> LoadOrCreateCurveKeys(const std::string& data_dir) {
  if (!zmq_has("curve"))
    return Status::Unavailable(
        "this libzmq has no CURVE security; the worker port cannot be "
        "encrypted (install a libzmq built with libsodium)");
  const std::string pub = data_dir + "/" + kCurvePublicFile,
                    sec = data_dir + "/" + kCurveSecretFile;
  if (PathExists(pub) && PathExists(sec)) {
    auto p = ReadTokenFile(pub), s = ReadTokenFile(sec);
    if (!p.ok()) return p.status();
    if (!s.ok()) return s.status();
    if (p->size() != 40 || s->size() != 40)
      return Status::InvalidArgument(sec + ", " + pub + ": expected 40-character Z85 keys");
    return CurveKeys{*p, *s};
  }
  char p[41], s[41];
  if (zmq_curve_keypair(p, s) != 0)
    return Status::Internal(std::string("zmq_curve_keypair: ") + zmq_strerror(zmq_errno()));
  // The secret first: a public key without its secret would be regenerated next time.
  HEADLAB_RETURN_IF_ERROR(WriteFileAtomic(sec, std::string(s) + "\n", 0600));
  HEADLAB_RETURN_IF_ERROR(WriteFileAtomic(pub, std::string(p) + "\n", 0644));
  return CurveKeys{p, s};
}

bool IsLocalEndpoint(const std::string& endpoint) {
  if (endpoint.rfind("ipc://", 0) == 0 || endpoint.rfind("inproc://", 0) == 0) return true;
  const std::string tcp = "tcp://";
  if (endpoint.rfind(tcp, 0) != 0) return false;
  return IsLoopbackListenAddress(endpoint.substr(tcp.size()));
}

}  // namespace headlab::coord
