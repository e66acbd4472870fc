#include "bench/figures.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

using headlab::bench::Figure;

TEST_CASE("figures: pass follows the comparison and the measured flag") {
  Figure f{"dispatch", "runs/s", Figure::Cmp::kGreaterEq, 500, true, 500, ""};
  CHECK(f.Pass());
  f.value = 499.9;
  CHECK_FALSE(f.Pass());
  f.cmp = Figure::Cmp::kLess;
  CHECK(f.Pass());
  f.value = 500;
  CHECK_FALSE(f.Pass());  // strictly less
  f.cmp = Figure::Cmp::kLessEq;
  CHECK(f.Pass());
  f.measured = false;
  CHECK_FALSE(f.Pass());
  CHECK(f.RatioToTarget() == 0);
}

TEST_CASE("figures: ratio to target is > 1 when better than the target") {
  Figure up{"ingest", "points/s", Figure::Cmp::kGreaterEq, 200000, true, 400000, ""};
  CHECK(up.RatioToTarget() == Approx(2.0));
  Figure down{"accept", "s", Figure::Cmp::kLess, 2, true, 0.5, ""};
  CHECK(down.RatioToTarget() == Approx(4.0));
}

TEST_CASE("figures: table and JSON show every figure") {
  std::vector<Figure> fs = {
      {"grid accept", "s", Figure::Cmp::kLess, 2, true, 0.25, ""},
      {"requeue latency", "s", Figure::Cmp::kLessEq, 5, false, 0, "no reassignment"}};
  std::string t = headlab::bench::FormatTable(fs);
  CHECK(t.find("grid accept") != std::string::npos);
  CHECK(t.find("0.25 s") != std::string::npos);
  CHECK(t.find("pass") != std::string::npos);
  CHECK(t.find("unmeasured") != std::string::npos);
  CHECK(t.find("FAIL") != std::string::npos);
  auto j = headlab::bench::FiguresJson(fs);
  REQUIRE(j.size() == 2);
  CHECK(j[0]["pass"] == true);
  CHECK(j[1]["value"].is_null());
  CHECK(j[1]["pass"] == false);
  CHECK(j[1]["note"] == "no reassignment");
}
