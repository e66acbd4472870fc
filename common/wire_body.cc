// Size- and depth-bounded JSON bodies.
#include "common/wire_body.h"

#include "common/wire.h"

namespace headlab {
namespace {

// Thrown by the parser callback to stop a parse that nests too deep.
struct TooDeep {};

}  // namespace

StatusOr<Json> ParseWireBody(const std::string& command, const std::string& text,
                             size_t max_bytes) {
  std::string what = command.substr(0, 16);
  for (char& c : what)
    if (c < ' ' || c > '~') c = '?';
  if (text.size() > max_bytes)
    return Status::InvalidArgument(what + ": body of " + std::to_string(text.size()) +
                                   " bytes is over the limit of " + std::to_string(max_bytes));
  // The callback sees each object's and array's depth (0 for the body itself) before it
  // is built: kMaxBodyDepth levels in all.
  Json::parser_callback_t bound = [](int depth, Json::parse_event_t ev, Json&) {
    if ((ev == Json::parse_event_t::object_start || ev == Json::parse_event_t::array_start) &&
        depth >= wire::kMaxBodyDepth)
      throw TooDeep{};
    return true;
  };
  Json j;
  try {
    j = Json::parse(text, bound, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const TooDeep&) {
    return Status::InvalidArgument(what + ": body nested deeper than " +
                                   std::to_string(wire::kMaxBodyDepth) + " levels");
  } catch (const Json::exception& e) {
    // e.what() may quote the offending bytes: keep only its printable part.
    std::string why = std::string(e.what()).substr(0, 160);
    for (char& c : why)
      if (c < ' ' || c > '~') c = '?';
    return Status::InvalidArgument(what + ": invalid JSON body (" + why + ")");
  }
  if (!j.is_object()) return Status::InvalidArgument(what + ": body is not a JSON object");
  return j;
}

}  // namespace headlab
