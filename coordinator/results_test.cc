#include "coordinator/results.h"

#include <catch2/catch.hpp>
#include <cmath>

#include "coordinator/store.h"
#include "coordinator/test_util.h"

namespace headlab::coord {

TEST_CASE("mean and SE on hand-computed numbers") {
  // Ratios 0.9633, 0.6653, 1.0732: mean 0.9006; deviations 0.0627, -0.2353, 0.1726;
  // sum of squares 0.08916; sd = sqrt(0.08916 / 2) = 0.2111; SE = 0.2111 / sqrt(3) = 0.1219.
  MeanSe m = MeanAndSe({0.9633, 0.6653, 1.0732});
  CHECK(m.n == 3);
  CHECK(m.mean == Approx(0.9006).margin(5e-4));
  CHECK(m.se == Approx(0.1219).margin(5e-4));
  MeanSe two = MeanAndSe({1.0, 3.0});  // sd = sqrt(2), SE = 1
  CHECK(two.mean == 2.0);
  CHECK(two.se == Approx(1.0));
  CHECK(std::isnan(MeanAndSe({5.0}).se));
  CHECK(MeanAndSe({}).n == 0);
}

TEST_CASE("pair values") {
  CHECK(*PairValue("delta_pct", 20.0, 21.0) == Approx(5.0));
  CHECK(*PairValue("diff", 20.0, 21.0) == Approx(1.0));
  CHECK(*PairValue("ratio", 20.0, 21.0) == Approx(1.05));
  CHECK_FALSE(PairValue("ratio", 0.0, 1.0));
  CHECK_FALSE(PairValue("median", 1.0, 1.0));
}

TEST_CASE("results pair runs by pair_key and store paired_stats") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto e = s.InsertExperiment(TestGrid({"base", "treat"}, 3), {}, false);
  REQUIRE(e.ok());
  // base ppl 10, 20, 30; treat ppl 9.633, 13.306, 32.196 -> ratios .9633 .6653 1.0732.
  const double base[] = {10, 20, 30}, treat[] = {9.633, 13.306, 32.196};
  for (int i = 0; i < 6; ++i) {
    int64_t run = e->queued[i];
    REQUIRE(s.StartAttempt({run, 1}, "w", {}, nullptr).ok());
    double v = i < 3 ? base[i] : treat[i - 3];
    s.FinishAttempt({run, 1}, "succeeded", 0, "", "", {{"eval.ppl", v}, {"eval.loss", std::log(v)}});
  }
  auto r = ComputeResults(s.db(), e->experiment_id);
  REQUIRE(r.ok());
  const Json& arms = (*r)["arms"];
  REQUIRE(arms.size() == 2);
  CHECK(arms[0]["arm"] == "base");
  CHECK(arms[0]["n"] == 3);
  CHECK(arms[0]["succeeded"] == 3);
  CHECK(arms[0]["metrics"]["eval.ppl"]["mean"].get<double>() == Approx(20.0));
  CHECK(arms[0]["metrics"]["eval.ppl"]["se"].get<double>() == Approx(10.0 / std::sqrt(3.0)));
  const Json& c = (*r)["comparisons"][0];
  CHECK(c["n"] == 3);
  CHECK(c["mean"].get<double>() == Approx(0.9006).margin(5e-4));
  CHECK(c["se"].get<double>() == Approx(0.1219).margin(5e-4));
  CHECK(c["per_pair"].size() == 3);
  REQUIRE(SavePairedStats(s.db(), e->experiment_id, *r).ok());
  Stmt q = s.db()->MustPrepare("SELECT n, mean, se, estimator FROM paired_stats");
  REQUIRE(q.Step());
  CHECK(q.Int(0) == 3);
  CHECK(q.Real(1) == Approx(0.9006).margin(5e-4));
  CHECK(q.Text(3) == kPairedEstimator);
  CHECK(ComputeResults(s.db(), 999).status().code() == Status::Code::kNotFound);
}

}  // namespace headlab::coord
