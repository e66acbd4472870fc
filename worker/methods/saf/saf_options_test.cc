#include "worker/methods/saf/saf_options.h"

#include <catch2/catch.hpp>

namespace headlab::saf {

TEST_CASE("saf options: selection_seed and calib_split are read and range-checked") {
  auto o = SafOptionsFromJson(Json{{"saf", {{"selection_seed", 7}, {"calib_split", "calib"}}}}, "g");
  REQUIRE(o.ok());
  CHECK(o->selection_seed == 7);
  CHECK(o->calib_split == "calib");
  CHECK(SafOptionsFromJson(Json::object(), "g")->selection_seed == -1);  // per run
  auto bad = SafOptionsFromJson(Json{{"saf", {{"selection_seed", -2}}}}, "g");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("$.saf.selection_seed") != std::string::npos);
  CHECK_FALSE(SafOptionsFromJson(Json{{"saf", {{"calib_split", "test"}}}}, "g").ok());
}

TEST_CASE("saf draw seed: the run seed, mixed with the parent run in a continuation") {
  CHECK(DrawSeed(Json::object(), 42) == 42);
  CHECK(DrawSeed(Json{{"parent", {{"run", 0}, {"step", 10}}}}, 42) == 42);
  const uint64_t a = DrawSeed(Json{{"parent", {{"run", 11}, {"step", 10}}}}, 42);
  const uint64_t b = DrawSeed(Json{{"parent", {{"run", 12}, {"step", 10}}}}, 42);
  CHECK(a != 42);
  CHECK(a != b);  // each parent of a --set parent.run list gets its own draws
  CHECK(a == DrawSeed(Json{{"parent", {{"run", 11}, {"step", 20}}}}, 42));  // every arm of it too
  CHECK(a != DrawSeed(Json{{"parent", {{"run", 11}, {"step", 10}}}}, 43));
}

}  // namespace headlab::saf
