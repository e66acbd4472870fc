// Size- and depth-bounded JSON bodies.
#include "common/wire_body.h"

#include "common/wire.h"

namespace headlab {

StatusOr<Json> ParseWireBody(const std::string& command, const std::string& text,
                             size_t max_bytes) {
  std::string what = command.substr(0, 16);
  for (char& c : what)
    if (c < ' ' || c > '~') c = '?';
  // Strict JSON; the size and the depth are checked before nlohmann parses (common/json.h).
  auto j = ParseJsonBounded(text, what + " body",
                            JsonLimits{size_t(wire::kMaxBodyDepth), max_bytes, /*comments=*/false});
  if (!j.ok()) return j.status();
  if (!j->is_object()) return Status::InvalidArgument(what + ": body is not a JSON object");
  return j;
}

}  // namespace headlab
