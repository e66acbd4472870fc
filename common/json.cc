// JSON parsing with comments and canonical serialisation.
#include "common/json.h"

namespace headlab {

StatusOr<Json> ParseJson(const std::string& text, const std::string& source) {
  try {
    return Json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/true,
                       /*ignore_comments=*/true);
  } catch (const Json::parse_error& e) {
    return Status::InvalidArgument(source + ": invalid JSON at byte " +
                                   std::to_string(e.byte) + ": " + e.what());
  }
}

// nlohmann::json objects are std::map-backed, so dump() already sorts keys.
std::string CanonicalJson(const Json& j) { return j.dump(); }

}  // namespace headlab
