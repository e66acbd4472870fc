// JSON parsing with comments and limits, canonical serialisation.
#include "common/json.h"

#include "common/utf8.h"

namespace headlab {

size_t JsonDepthExceededAt(std::string_view text, size_t max_depth) {
  size_t depth = 0;
  const size_t n = text.size();
  for (size_t i = 0; i < n; ++i) {
    switch (text[i]) {
      case '"':  // a string: to the next quote not escaped by a backslash
        for (++i; i < n && text[i] != '"'; ++i)
          if (text[i] == '\\') ++i;
        break;
      case '[':
      case '{':
        if (++depth > max_depth) return i;
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      case '/':
        // nlohmann's comments: "//" ends at \n, \r or NUL; "/*" at the next "*/". Anything
        // else after '/' is a syntax error the parser reports.
        if (i + 1 < n && text[i + 1] == '/') {
          for (i += 2; i < n && text[i] != '\n' && text[i] != '\r' && text[i] != '\0'; ++i) {
          }
        } else if (i + 1 < n && text[i + 1] == '*') {
          size_t end = text.find("*/", i + 2);
          if (end == std::string_view::npos) return std::string::npos;  // parser: unterminated
          i = end + 1;
        }
        break;
      default:
        break;
    }
  }
  return std::string::npos;
}

StatusOr<Json> ParseJsonBounded(const std::string& text, const std::string& source,
                                const JsonLimits& limits) {
  if (text.size() > limits.max_bytes)
    return Status::InvalidArgument(EscapeForMessage(source) + ": JSON text of " +
                                   std::to_string(text.size()) + " bytes exceeds the limit of " +
                                   std::to_string(limits.max_bytes) + " bytes");
  size_t deep = JsonDepthExceededAt(text, limits.max_depth);
  if (deep != std::string::npos)
    return Status::InvalidArgument(EscapeForMessage(source) + ": JSON nested deeper than " +
                                   std::to_string(limits.max_depth) + " levels at byte " +
                                   std::to_string(deep));
  try {
    return Json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/true,
                       /*ignore_comments=*/limits.comments);
  } catch (const Json::parse_error& e) {
    return Status::InvalidArgument(EscapeForMessage(source + ": invalid JSON at byte " +
                                                    std::to_string(e.byte) + ": " + e.what()));
  } catch (const Json::exception& e) {  // e.g. out_of_range 406: a number beyond double
    return Status::InvalidArgument(EscapeForMessage(source + ": invalid JSON: " + e.what()));
  }
}

StatusOr<Json> ParseJson(const std::string& text, const std::string& source) {
  return ParseJsonBounded(text, source, JsonLimits());
}

// nlohmann::json objects are std::map-backed, so dump() already sorts keys.
std::string CanonicalJson(const Json& j) { return j.dump(); }

std::string JsonText(const Json& j) {
  return j.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

}  // namespace headlab
