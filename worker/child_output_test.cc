#include "worker/child_output.h"

#include <vector>

#include <catch2/catch.hpp>

namespace headlab {

TEST_CASE("LineSplitter joins lines split across reads") {
  LineSplitter s;
  std::vector<std::string> lines;
  auto add = [&](const std::string& l) { lines.push_back(l); };
  s.Append("ab", 2, add);
  s.Append("c\nde\n\nf", 7, add);
  REQUIRE(lines == std::vector<std::string>{"abc", "de", ""});
  s.Finish(add);
  REQUIRE(lines.back() == "f");
  CHECK(lines.size() == 4);
}

TEST_CASE("LineSplitter discards over-long lines and resumes after them") {
  LineSplitter s(4);
  std::vector<std::string> lines;
  auto add = [&](const std::string& l) { lines.push_back(l); };
  s.Append("ok\n12", 5, add);
  s.Append("345678", 6, add);  // now over-long: dropped
  s.Append("9\nyes\n", 6, add);
  CHECK(lines == std::vector<std::string>{"ok", "yes"});
  CHECK(s.discarded() == 1);
  s.Append("12345\n", 6, add);  // over-long within one read
  CHECK(s.discarded() == 2);
  CHECK(lines.size() == 2);
}

TEST_CASE("TailBuffer keeps the last bytes") {
  TailBuffer t(5);
  t.Append("abc", 3);
  CHECK(t.str() == "abc");
  t.Append("defg", 4);
  CHECK(t.str() == "cdefg");
  t.Append("0123456789", 10);
  CHECK(t.str() == "56789");
}

}  // namespace headlab
