#include "coordinator/early_stop.h"

#include <catch2/catch.hpp>

#include "common/grid.h"
#include "coordinator/test_util.h"

namespace headlab::coord {
namespace {

// 4 samples x 2 arms, no other axis: arm a runs 0-3, arm b runs 4-7 (sample k at idx k and
// 4 + k). The median rule on train.loss after 1 completed run of the arm, from step 2.
constexpr const char* kSearchGrid = R"({
  "name": "rs", "base": {"kind": "noop"},
  "arms": {"a": {}, "b": {"noop.metrics": 1}},
  "search": {"samples": 4, "space": {"train.lr": {"log_uniform": [1e-4, 1e-2]}},
             "early_stop": {"rule": "median", "metric": "train.loss", "min_step": 2,
                            "min_completed": 1}}})";

std::vector<MetricPoint> Losses(std::vector<double> values) {
  std::vector<MetricPoint> out;
  for (size_t i = 0; i < values.size(); ++i)
    out.push_back({int64_t(i), int64_t(i + 1), "train.loss", values[i], double(i)});
  return out;
}

}  // namespace

TEST_CASE("early stop: a run worse than the median stops with its pair, reason stored") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto grid = ExpandGrid(kSearchGrid, "rs.jsonc", {});
  REQUIRE(grid.ok());
  auto e = s.InsertExperiment(*grid, {}, false);
  REQUIRE(e.ok());
  const std::vector<int64_t>& run = e->queued;
  REQUIRE(run.size() == 8);
  // Run 0 (arm a, sample 0) completes with losses 3, 2, 1: running averages 3, 2.5, 2.
  REQUIRE(s.StartAttempt({run[0], 1}, "w", {}, nullptr).ok());
  REQUIRE(s.InsertMetrics({run[0], 1}, Losses({3, 2, 1})).ok());
  s.FinishAttempt({run[0], 1}, "succeeded", 0, "", "", {{"train.loss", 1.0}});
  // Run 1 (arm a, sample 1) and its pair, run 5 (arm b, sample 1), are running.
  REQUIRE(s.StartAttempt({run[1], 1}, "w", {}, nullptr).ok());
  REQUIRE(s.StartAttempt({run[5], 1}, "w", {}, nullptr).ok());
  EarlyStopper stopper;
  // Step 1 only: before min_step.
  auto p1 = Losses({4});
  REQUIRE(s.InsertMetrics({run[1], 1}, p1).ok());
  CHECK(stopper.Check(s.db(), {run[1], 1}, p1).empty());
  // Step 2: best 2.4 < median 2.5 of run 0's running average up to step 2: goes on.
  std::vector<MetricPoint> p2 = {{1, 2, "train.loss", 2.4, 1.0}};
  REQUIRE(s.InsertMetrics({run[1], 1}, p2).ok());
  CHECK(stopper.Check(s.db(), {run[1], 1}, p2).empty());
  // Another metric's points do not trigger the rule.
  std::vector<MetricPoint> other = {{2, 3, "train.lr", 0.001, 2.0}};
  REQUIRE(s.InsertMetrics({run[1], 1}, other).ok());
  CHECK(stopper.Check(s.db(), {run[1], 1}, other).empty());
  // Step 3: best 2.4 > median 2.0 (average of 3, 2, 1): run 1 stops, and run 5 with it;
  // run 2 and the other samples' runs go on.
  std::vector<MetricPoint> p3 = {{3, 3, "train.loss", 2.6, 3.0}};
  REQUIRE(s.InsertMetrics({run[1], 1}, p3).ok());
  auto stop = stopper.Check(s.db(), {run[1], 1}, p3);
  REQUIRE(stop.size() == 2);
  CHECK(stop[0].first == run[1]);
  CHECK(stop[0].second ==
        "early stop (median rule): train.loss best 2.4 by step 3 is worse "
        "than the median 2 of 1 completed runs' running averages");
  CHECK(stop[1].first == run[5]);
  CHECK(stop[1].second.find("(stopped with its pair: run " + std::to_string(run[1]) + ")") !=
        std::string::npos);
  // Cancelled like any run, with the reason as its error and in the cancel event.
  for (const auto& [id, why] : stop) REQUIRE(s.CancelRun(id, why).ok());
  Stmt q = s.db()->MustPrepare("SELECT status, error FROM runs WHERE id=?");
  q.Bind(1, run[5]);
  REQUIRE(q.Step());
  CHECK(q.Text(0) == "cancelled");
  CHECK(q.Text(1).rfind("early stop (median rule)", 0) == 0);
  Stmt ev = s.db()->MustPrepare(
      "SELECT count(*) FROM events WHERE kind='cancel' AND detail_json LIKE '%median rule%'");
  REQUIRE(ev.Step());
  CHECK(ev.Int(0) == 2);
  // A stopped run is no longer checked.
  CHECK(stopper.Check(s.db(), {run[1], 1}, p3).empty());
}

TEST_CASE("early stop: experiments without the rule are never stopped") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  Grid g = TestGrid({"a", "b"}, 2);
  auto e = s.InsertExperiment(g, {}, false);
  REQUIRE(e.ok());
  REQUIRE(s.StartAttempt({e->queued[0], 1}, "w", {}, nullptr).ok());
  auto p = Losses({9, 9, 9, 9});
  REQUIRE(s.InsertMetrics({e->queued[0], 1}, p).ok());
  CHECK(EarlyStopper().Check(s.db(), {e->queued[0], 1}, p).empty());
}

}  // namespace headlab::coord
