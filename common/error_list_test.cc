#include "common/error_list.h"

#include <catch2/catch.hpp>

namespace headlab {
namespace {

TEST_CASE("an error list reports every problem, led by the file they are about") {
  ErrorList none;
  CHECK(none.ToStatus().ok());
  CHECK(none.Add(Status::Ok()));

  ErrorList one;
  CHECK_FALSE(one.Add(Status::InvalidArgument("g.jsonc: $.a: bad")));
  CHECK(one.ToStatus().message() == "g.jsonc: $.a: bad");

  ErrorList two;
  two.Add(Status::InvalidArgument("g.jsonc: $.a: bad"));
  two.Add(Status::InvalidArgument("g.jsonc: $.b: worse"));
  const Status st = two.ToStatus();
  CHECK(st.code() == Status::Code::kInvalidArgument);
  CHECK(st.message() == "g.jsonc: 2 problems:\n  g.jsonc: $.a: bad\n  g.jsonc: $.b: worse");

  // A list's status joins another list problem by problem: 3, not 2 nested.
  ErrorList outer;
  outer.Add(st);
  outer.Add(Status::InvalidArgument("g.jsonc: $.c: no"));
  CHECK(outer.ToStatus().message().rfind("g.jsonc: 3 problems:\n  g.jsonc: $.a: bad\n", 0) == 0);

  // Problems of different inputs: no common file to lead with.
  ErrorList mixed;
  mixed.Add(Status::InvalidArgument("a.jsonc: $.x: bad"));
  mixed.Add(Status::InvalidArgument("b.jsonc: $.y: bad"));
  CHECK(mixed.ToStatus().message().rfind("2 problems:\n  a.jsonc", 0) == 0);
  ErrorList again;
  again.Add(mixed.ToStatus());
  CHECK(again.ToStatus().message().rfind("2 problems:\n  a.jsonc", 0) == 0);

  // Beyond kMaxShown, a count of the rest.
  ErrorList many;
  for (int i = 0; i < 25; ++i)
    many.Add(Status::InvalidArgument("g.jsonc: $.k" + std::to_string(i) + ": bad"));
  const std::string m = many.ToStatus().message();
  CHECK(m.rfind("g.jsonc: 25 problems:", 0) == 0);
  CHECK(m.find("\n  ... and 5 more") != std::string::npos);
  CHECK(m.find("$.k20") == std::string::npos);
}

}  // namespace
}  // namespace headlab
