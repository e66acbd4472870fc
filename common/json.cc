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

namespace {

// "line 3, column 5" of the 0-based byte `at` of `text`.
std::string LineColumn(std::string_view text, size_t at) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < at && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      ++column;  // a character, not a UTF-8 continuation byte
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

// The parser's message in plain words: nlohmann's "[json.exception.parse_error.101] parse
// error at line L, column C: syntax error while parsing ..." without its tag and position
// (given once, in ours), and a trailing comma (which JSON forbids and JSON-with-comments
// writers often leave) named as such. `byte` is nlohmann's 1-based index of the last
// character read.
std::string ParseErrorText(std::string_view text, size_t byte, const std::string& what) {
  const size_t at = byte > 0 ? byte - 1 : 0;
  std::string detail = what;
  size_t colon = detail.find(": ");
  if (detail.rfind("[json.exception.", 0) == 0 && colon != std::string::npos)
    detail = detail.substr(colon + 2);
  if (detail.rfind("syntax error while ", 0) == 0) detail = detail.substr(19);
  if (at < text.size() && (text[at] == '}' || text[at] == ']')) {
    // Back over whitespace and comments to the previous token.
    size_t i = at;
    while (i > 0) {
      --i;
      const char c = text[i];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
      size_t line_start = text.rfind('\n', i);
      line_start = line_start == std::string_view::npos ? 0 : line_start + 1;
      size_t slashes = text.substr(line_start, i - line_start + 1).find("//");
      if (slashes != std::string_view::npos) {  // inside a // comment: skip to before it
        i = line_start + slashes;
        continue;
      }
      if (c == ',')
        return "a trailing comma before '" + std::string(1, text[at]) +
               "' (JSON allows none: remove the ',' at " + LineColumn(text, i) + ")";
      break;
    }
  }
  return detail;
}

}  // namespace

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
    const size_t at = e.byte > 0 ? e.byte - 1 : 0;
    return Status::InvalidArgument(
        EscapeForMessage(source + ": invalid JSON at byte " + std::to_string(e.byte) + " (" +
                         LineColumn(text, at) + "): " + ParseErrorText(text, e.byte, e.what())));
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
