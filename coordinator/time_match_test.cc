#include "coordinator/time_match.h"

#include <catch2/catch.hpp>

#include "coordinator/store.h"
#include "coordinator/test_util.h"

namespace headlab::coord {
namespace {

using State = TimeMatchResolution::State;

// Logs time.elapsed_s = 10 * step at steps 1..steps of `ref` (and a loss beside it).
void LogElapsed(Store& s, const AttemptRef& ref, int64_t steps) {
  std::vector<MetricPoint> points;
  for (int64_t step = 1; step <= steps; ++step) {
    points.push_back({int64_t(points.size()), step, "train.loss", 1.0 / double(step), 0});
    points.push_back({int64_t(points.size()), step, "time.elapsed_s", 10.0 * double(step), 0});
  }
  REQUIRE(s.InsertMetrics(ref, points).ok());
}

}  // namespace

TEST_CASE(
    "ResolveTimeMatch: the reference of this seed's measured time, waiting until it is done") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto e = s.InsertExperiment(TestGrid({"ordinary", "saf"}, 2), {}, false);  // o1 o2 s1 s2
  REQUIRE(e.ok());
  const int64_t o1 = e->queued[0], o2 = e->queued[1];
  auto run = [&](int64_t seed, const std::string& arm) {
    return Json{{"kind", "train"},
                {"seed", seed},
                {"time_match", {{"experiment", e->experiment_id}, {"arm", arm}}}};
  };
  CHECK(ResolveTimeMatch(s.db(), Json{{"kind", "train"}}, 0).state == State::kNone);
  CHECK(ResolveTimeMatch(s.db(), run(1, "ordinary"), 0).state == State::kWait);  // queued
  REQUIRE(s.StartAttempt({o1, 1}, "w", {}, nullptr).ok());
  LogElapsed(s, {o1, 1}, 7);
  CHECK(ResolveTimeMatch(s.db(), run(1, "ordinary"), 0).state == State::kWait);  // running
  s.FinishAttempt({o1, 1}, "succeeded", 0, "", "", Json::object());
  TimeMatchResolution ready = ResolveTimeMatch(s.db(), run(1, "ordinary"), 0);
  REQUIRE(ready.state == State::kReady);
  CHECK(ready.budget_s == 70.0);  // time.elapsed_s at its last step, 7
  CHECK(ready.reference == o1);

  // A reference that resumed after a lost attempt has no single measurement.
  REQUIRE(s.StartAttempt({o2, 1}, "w", {}, nullptr).ok());
  s.LoseAttempt({o2, 1}, "worker gone");
  REQUIRE(s.StartAttempt({o2, 2}, "w", {}, nullptr).ok());
  LogElapsed(s, {o2, 2}, 3);
  s.FinishAttempt({o2, 2}, "succeeded", 0, "", "", Json::object());
  TimeMatchResolution resumed = ResolveTimeMatch(s.db(), run(2, "ordinary"), 0);
  CHECK(resumed.state == State::kFail);
  CHECK(resumed.error.find("ran 2 attempts") != std::string::npos);

  // -1: the run's own experiment.
  Json own = run(1, "ordinary");
  own["time_match"]["experiment"] = -1;
  CHECK(ResolveTimeMatch(s.db(), own, e->experiment_id).budget_s == 70.0);
  TimeMatchResolution none = ResolveTimeMatch(s.db(), run(3, "ordinary"), 0);
  CHECK(none.state == State::kFail);
  CHECK(none.error.find("time_match: experiment") != std::string::npos);
  CHECK(none.error.find("has no run of seed 3") != std::string::npos);
}

TEST_CASE("ResolveTimeMatch: a failed reference or one without a time fails the run") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto e = s.InsertExperiment(TestGrid({"a"}, 2, "t", /*max_attempts=*/1), {}, false);
  REQUIRE(e.ok());
  auto run = [&](int64_t seed) {
    return Json{{"seed", seed}, {"time_match", {{"experiment", e->experiment_id}, {"arm", ""}}}};
  };
  REQUIRE(s.StartAttempt({e->queued[0], 1}, "w", {}, nullptr).ok());
  s.FinishAttempt({e->queued[0], 1}, "failed", 1, "diverged", "", Json::object());
  TimeMatchResolution failed = ResolveTimeMatch(s.db(), run(1), 0);
  CHECK(failed.state == State::kFail);
  CHECK(failed.error.find("failed") != std::string::npos);
  REQUIRE(s.StartAttempt({e->queued[1], 1}, "w", {}, nullptr).ok());
  s.FinishAttempt({e->queued[1], 1}, "succeeded", 0, "", "", Json::object());
  TimeMatchResolution untimed = ResolveTimeMatch(s.db(), run(2), 0);
  CHECK(untimed.state == State::kFail);
  CHECK(untimed.error.find("logged no time.elapsed_s") != std::string::npos);
}

}  // namespace headlab::coord
