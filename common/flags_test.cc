#include "common/flags.h"

#include <catch2/catch.hpp>

namespace headlab {
namespace {

FlagsSpec Spec() {
  return {
      "headlab tool",
      {{"--set", "", "KEY=V", "", true}, {"--json", "", "", ""}, {"--output", "-o", "FILE", ""}},
      "FILE",
      1,
      1};
}

}  // namespace

TEST_CASE("ParseFlags: values, flags, repeats, inline values, short names, --") {
  auto a = ParseFlags(Spec(),
                      {"tool", "--set", "a=1", "f.jsonc", "--set=b=2", "--json", "-o", "x", "-1"});
  REQUIRE(!a.ok());  // two positionals ("-1" is one)
  CHECK(a.status().message() == "headlab tool: unexpected argument \"-1\"");
  auto b =
      ParseFlags(Spec(), {"tool", "--set", "a=1", "f.jsonc", "--set=b=2", "--json", "-o", "x"});
  REQUIRE(b.ok());
  CHECK(b->All("--set") == std::vector<std::string>{"a=1", "b=2"});
  CHECK(b->Get("--set") == "b=2");
  CHECK(b->Has("--json"));
  CHECK(b->Get("--output") == "x");
  CHECK(b->Get("--missing", "fallback") == "fallback");
  CHECK(b->positional() == std::vector<std::string>{"f.jsonc"});
  auto c = ParseFlags(Spec(), {"tool", "--", "--json"});
  REQUIRE(c.ok());
  CHECK(!c->Has("--json"));
  CHECK(c->positional() == std::vector<std::string>{"--json"});
  auto empty = ParseFlags(Spec(), {"tool", "f", "--output="});
  REQUIRE(empty.ok());
  CHECK(empty->Has("--output"));
  CHECK(empty->Get("--output", "fallback").empty());
}

TEST_CASE("ParseFlags: every error names the program") {
  auto check = [](std::vector<std::string> argv, const std::string& message) {
    auto r = ParseFlags(Spec(), argv);
    REQUIRE(!r.ok());
    CHECK(r.status().code() == Status::Code::kInvalidArgument);
    CHECK(r.status().message() == message);
  };
  check({"tool", "f", "--jsn"},
        "headlab tool: unknown option --jsn; did you mean --json? (see headlab tool --help)");
  check({"tool", "f", "--output"}, "headlab tool: --output needs a value FILE");
  check({"tool", "f", "--json=yes"}, "headlab tool: --json takes no value");
  check({"tool", "f", "-o", "a", "--output", "b"}, "headlab tool: --output given more than once");
  check({"tool"}, "headlab tool: missing FILE (usage: headlab tool FILE [OPTIONS])");
}

TEST_CASE("ParseFlags: --help skips the positional count") {
  auto h = ParseFlags(Spec(), {"tool", "-h"});
  REQUIRE(h.ok());
  CHECK(h->help());
}

TEST_CASE("ParseIntFlag: an integer in range, else the flag and the range") {
  CHECK(*ParseIntFlag("--slots", "4", 1, 1024) == 4);
  CHECK(*ParseIntFlag("--slots", "1024", 1, 1024) == 1024);
  for (const char* bad : {"", "0", "1025", "4x", "x", "-3"}) {
    auto r = ParseIntFlag("--slots", bad, 1, 1024);
    REQUIRE(!r.ok());
    CHECK(r.status().message() ==
          std::string("--slots: expected an integer in [1, 1024], got \"") + bad + "\"");
  }
}

TEST_CASE("HelpText: the usage line and the option list come from the table") {
  FlagsSpec spec{"headlab tool",
                 {{"--alpha", "", "N", "first line\nsecond line"},
                  {"--a-rather-long-option-name", "", "VALUE", "help on its own line"},
                  {"--flag", "-f", "", "a flag", true}},
                 "FILE"};
  const std::string h = HelpText(spec, "Does things.\n", "exit: 0 ok\n");
  CHECK(h.rfind("usage: headlab tool [--alpha N] [--a-rather-long-option-name VALUE] [--flag]",
                0) == 0);
  CHECK(h.find(" FILE\n\nDoes things.\n\noptions:\n") != std::string::npos);
  // Help at column 28; a help's further lines indented to it; long names on their own line.
  CHECK(h.find("  --alpha N                 first line\n" + std::string(28, ' ') +
               "second line\n") != std::string::npos);
  CHECK(h.find("  --a-rather-long-option-name VALUE\n" + std::string(28, ' ') +
               "help on its own line\n") != std::string::npos);
  CHECK(h.find("  -f, --flag                a flag (repeatable)\n") != std::string::npos);
  CHECK(h.find("  -h, --help                show this help\n") != std::string::npos);
  CHECK(h.size() >= 11);
  CHECK(h.compare(h.size() - 11, 11, "exit: 0 ok\n") == 0);
  // The usage line wraps before 90 columns, continuation lines under the program.
  FlagsSpec wide{"headlab wide", {}, ""};
  for (int i = 0; i < 12; ++i)
    wide.options.push_back({"--option-" + std::to_string(i), "", "VALUE", "x"});
  const std::string w = HelpText(wide, "", "");
  const std::string usage = w.substr(0, w.find("\n\n"));
  size_t start = 0, lines = 0;
  for (size_t nl; (nl = usage.find('\n', start)) != std::string::npos || start < usage.size();
       ++lines) {
    const size_t end = nl == std::string::npos ? usage.size() : nl;
    CHECK(end - start <= 90);
    if (lines > 0) CHECK(usage.compare(start, 14, "              ") == 0);
    start = end + 1;
  }
  CHECK(lines == 4);  // three options of 18-19 characters per line after a 19-character head
}

}  // namespace headlab
