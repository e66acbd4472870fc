#include "cli/diff.h"

#include <catch2/catch.hpp>

namespace headlab {

TEST_CASE("diff: the dotted keys whose values differ, a key only one run has included") {
  Json a = Json::parse(R"({"seed": 1, "train": {"lr": 0.001, "steps": 10}, "arm": "x",
                           "model": {"head_modes": ""}})");
  Json b = Json::parse(R"({"seed": 1, "train": {"lr": 0.003, "steps": 10}, "arm": "y",
                           "params": {"b": 1}, "model": {"head_modes": ""}})");
  std::vector<KeyDiff> d = DiffObjects(a, b);
  REQUIRE(d.size() == 3);
  CHECK(d[0].key == "arm");
  CHECK(d[1].key == "params.b");
  CHECK(d[1].a.is_null());
  CHECK(d[1].b == 1);
  CHECK(d[2].key == "train.lr");
  CHECK(d[2].a == 0.001);
  CHECK(d[2].b == 0.003);
  CHECK(DiffObjects(a, a).empty());
  CHECK(DiffObjects(Json(), Json::object()).empty());
}

}  // namespace headlab
