#include "cli/args.h"

#include <catch2/catch.hpp>

using headlab::CommandSpec;
using headlab::ParseArgs;

namespace {

CommandSpec Spec() {
  return {"submit",
          "FILE",
          "Submit a grid.",
          {{"--set", "", "KEY=V", "axis", true},
           {"--json", "", "", "json"},
           {"--output", "-o", "FILE", "out"}},
          1,
          1};
}

}  // namespace

TEST_CASE("Options, repeated options, inline values and positionals") {
  auto a = ParseArgs(Spec(), {"submit", "g.jsonc", "--set", "seed=1,2", "--set=train.lr=0.1",
                              "--json", "-o", "out.csv", "--url", "http://h:1"});
  REQUIRE(a.ok());
  CHECK(a->positional() == std::vector<std::string>{"g.jsonc"});
  CHECK(a->All("--set") == std::vector<std::string>{"seed=1,2", "train.lr=0.1"});
  CHECK(a->Has("--json"));
  CHECK(a->Get("--output") == "out.csv");
  CHECK(a->Get("--url") == "http://h:1");
  CHECK(a->Get("--data-dir", "dflt") == "dflt");
  CHECK(!a->help());
  auto b = ParseArgs(Spec(), {"submit", "--", "--weird-file"});
  REQUIRE(b.ok());
  CHECK(b->positional() == std::vector<std::string>{"--weird-file"});
}

TEST_CASE("Bad arguments are InvalidArgument naming the command") {
  auto unknown = ParseArgs(Spec(), {"submit", "g", "--bogus"});
  REQUIRE(!unknown.ok());
  CHECK(unknown.status().message() ==
        "headlab submit: unknown option --bogus (see headlab submit --help)");
  auto missing_value = ParseArgs(Spec(), {"submit", "g", "--set"});
  REQUIRE(!missing_value.ok());
  CHECK(missing_value.status().message() == "headlab submit: --set needs a value KEY=V");
  auto missing_pos = ParseArgs(Spec(), {"submit"});
  REQUIRE(!missing_pos.ok());
  CHECK(missing_pos.status().message().find("missing FILE") != std::string::npos);
  auto extra = ParseArgs(Spec(), {"submit", "a", "b"});
  REQUIRE(!extra.ok());
  CHECK(extra.status().message() == "headlab submit: unexpected argument \"b\"");
  auto flag_value = ParseArgs(Spec(), {"submit", "a", "--json=1"});
  REQUIRE(!flag_value.ok());
  auto twice = ParseArgs(Spec(), {"submit", "a", "-o", "x", "--output", "y"});
  REQUIRE(!twice.ok());
  CHECK(twice.status().code() == headlab::Status::Code::kInvalidArgument);
}

TEST_CASE("--help skips the positional check; usage lists every option") {
  auto h = ParseArgs(Spec(), {"submit", "--help"});
  REQUIRE(h.ok());
  CHECK(h->help());
  std::string u = headlab::Usage(Spec());
  CHECK(u.rfind("usage: headlab submit FILE [OPTIONS]\n", 0) == 0);
  for (const char* o : {"--set KEY=V", "--json", "-o, --output FILE", "--url URL", "--data-dir DIR",
                        "--token-file FILE", "--help", "(repeatable)"})
    CHECK(u.find(o) != std::string::npos);
}

TEST_CASE("Negative numbers and '-' are positional") {
  CommandSpec s{"x", "A B", "", {}, 2, 2};
  auto a = ParseArgs(s, {"x", "-1", "-"});
  REQUIRE(a.ok());
  CHECK(a->positional() == std::vector<std::string>{"-1", "-"});
}
