#include "common/json.h"

#include <catch2/catch.hpp>

#include <functional>
#include <random>

#include "common/utf8.h"

namespace headlab {
namespace {

std::string Nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// The depth of a parsed value, computed on the tree (the oracle for the text scan).
size_t DepthOf(const Json& j) {
  if (!j.is_structured()) return 0;
  size_t d = 0;
  for (const Json& v : j) d = std::max(d, DepthOf(v));
  return d + 1;
}

// A random document up to `budget` levels deep whose strings and comments hold brackets,
// quotes, escapes and comment markers that must not count.
std::string RandomDoc(std::mt19937& rng, int budget) {
  static const char* kStrings[] = {R"("[[{")", R"("a\"[[[")", R"("\\")", R"("//[")", R"("/*[")"};
  static const char* kComments[] = {"// [[{\n", "/* ]]} [[ */", "//x\r", " "};
  std::string s = kComments[rng() % 4];
  int kind = budget > 0 ? int(rng() % 4) : 2 + int(rng() % 2);
  if (kind == 0 || kind == 1) {
    bool array = kind == 0;
    s += array ? "[" : "{";
    int n = int(rng() % 3);
    for (int i = 0; i < n; ++i) {
      if (i) s += ",";
      if (!array) s += "\"k" + std::to_string(i) + "[{\":";  // unique keys: none is dropped
      s += RandomDoc(rng, budget - 1);
    }
    s += array ? "]" : "}";
  } else {
    s += kind == 2 ? kStrings[rng() % 5] : "1.5";
  }
  return s + kComments[rng() % 4];
}

}  // namespace

TEST_CASE("ParseJson refuses a document nested deeper than the limit before parsing it") {
  auto ok = ParseJson(Nested(kMaxJsonDepth), "f.json");
  REQUIRE(ok.ok());
  CHECK(DepthOf(*ok) == kMaxJsonDepth);
  for (size_t depth : {kMaxJsonDepth + 1, size_t(100000)}) {
    auto deep = ParseJson(Nested(depth), "grid.jsonc");
    REQUIRE_FALSE(deep.ok());
    CHECK(deep.status().code() == Status::Code::kInvalidArgument);
    CHECK(deep.status().message() == "grid.jsonc: JSON nested deeper than 64 levels at byte 64");
  }
  // Unclosed nesting is refused just the same (the parser never sees it).
  CHECK_FALSE(ParseJson(std::string(1000000, '{'), "body").ok());
}

TEST_CASE("the depth scan skips strings and comments exactly as the parser does") {
  // 100 brackets inside a string, a line comment, a block comment: depth 1.
  std::string text = "[\"" + std::string(100, '[') + "\\\"" + std::string(100, '{') + "\", // " +
                     std::string(100, '[') + "\n /* " + std::string(100, '{') + " */ 1]";
  CHECK(ParseJsonBounded(text, "t", {1, 1 << 20}).ok());
  // A line comment ends at \r: the brackets after it count.
  auto r = ParseJsonBounded("[ // x\r [[]]]", "t", {2, 1 << 20});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("at byte 9") != std::string::npos);

  std::mt19937 rng(11);
  for (int n = 0; n < 3000; ++n) {
    std::string doc = RandomDoc(rng, 6);
    auto parsed = Json::parse(doc, nullptr, false, /*ignore_comments=*/true);
    INFO(doc);
    REQUIRE_FALSE(parsed.is_discarded());
    size_t depth = DepthOf(parsed);
    CHECK(JsonDepthExceededAt(doc, depth) == std::string::npos);
    if (depth > 0) CHECK(JsonDepthExceededAt(doc, depth - 1) != std::string::npos);
  }
}

TEST_CASE("ParseJsonBounded refuses a text over its size limit and names the source") {
  auto big = ParseJsonBounded("[" + std::string(100, ' ') + "]", "HLW1 METRICS body", {64, 100});
  REQUIRE_FALSE(big.ok());
  CHECK(big.status().message() ==
        "HLW1 METRICS body: JSON text of 102 bytes exceeds the limit of 100 bytes");
  CHECK(ParseJsonBounded("[1]", "s", {64, 3}).ok());
}

TEST_CASE("comments are JSON only where the limits allow them (files, not the wire)") {
  const std::string text = "{\"a\": 1 /* why */} // end";
  CHECK(ParseJsonBounded(text, "grid.jsonc", {}).ok());
  auto strict = ParseJsonBounded(text, "READY body", {32, 1 << 20, /*comments=*/false});
  REQUIRE_FALSE(strict.ok());
  CHECK(strict.status().message().rfind("READY body: invalid JSON at byte", 0) == 0);
}

TEST_CASE("a number beyond the double range is bad input, not an exception") {
  auto r = ParseJson(R"({"train": {"lr": 1e400}})", "g.jsonc");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == Status::Code::kInvalidArgument);
  CHECK(r.status().message().rfind("g.jsonc: invalid JSON", 0) == 0);
  CHECK(r.status().message().find("1e400") != std::string::npos);
}

TEST_CASE("errors about invalid UTF-8 are themselves valid UTF-8 and serialisable") {
  const char kGarbage[] = "{\"a\": 1} \x80\x81 garbage \0\x01";
  for (std::string text : {std::string("{\"name\": \"\xff\xfe\"}"), std::string("\xc3\x28"),
                           std::string(kGarbage, sizeof kGarbage - 1)}) {
    auto r = ParseJson(text, "bad\xff.jsonc");
    REQUIRE_FALSE(r.ok());
    INFO(r.status().message());
    CHECK(IsValidUtf8(r.status().message()));
    CHECK(r.status().message().rfind("bad\\xff.jsonc: ", 0) == 0);
    CHECK_NOTHROW(Json({{"error", r.status().message()}}).dump());
  }
}

TEST_CASE("JsonText serialises strings that are not UTF-8 instead of throwing") {
  Json j = {{"id", std::string("w\xff\x01")}};
  CHECK_THROWS(j.dump());
  CHECK(JsonText(j) == "{\"id\":\"w\xef\xbf\xbd\\u0001\"}");
  CHECK(JsonText(Json{{"a", 1}}) == CanonicalJson(Json{{"a", 1}}));
}

// A trailing comma is the commonest mistake in hand-written JSON with comments: say so,
// where it is, in words rather than as the parser's exception tag.
TEST_CASE("a trailing comma is named with its line and column") {
  auto r =
      ParseJson("{\n  \"name\": \"x\",\n  \"axes\": {\"seed\": [1, 2],}  // why\n}", "g.jsonc");
  REQUIRE_FALSE(r.ok());
  const std::string m = r.status().message();
  INFO(m);
  CHECK(m.rfind("g.jsonc: invalid JSON at byte 44 (line 3, column 27): a trailing comma before '}'",
                0) == 0);
  CHECK(m.find("remove the ',' at line 3, column 26") != std::string::npos);
  CHECK(m.find("json.exception") == std::string::npos);
  auto list = ParseJson("[1,\n // c\n]", "l.json");
  REQUIRE_FALSE(list.ok());
  CHECK(list.status().message().find("a trailing comma before ']' (JSON allows none: remove the "
                                     "',' at line 1, column 3)") != std::string::npos);
  auto other = ParseJson("{\"a\" 1}", "o.json");
  REQUIRE_FALSE(other.ok());
  CHECK(other.status().message().find("json.exception") == std::string::npos);
  CHECK(other.status().message().find("line 1, column") != std::string::npos);
}

}  // namespace headlab
