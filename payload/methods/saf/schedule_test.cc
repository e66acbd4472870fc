#include "payload/methods/saf/schedule.h"

#include <cmath>
#include <random>

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::saf {
namespace {

TEST_CASE("one-time replacement defaults to the midpoint and is clamped") {
  CHECK(OneTimeStep(0.5, 5000) == 2500);
  CHECK(OneTimeStep(0.25, 5000) == 1250);
  CHECK(OneTimeStep(1.0, 200) == 200);  // after training
  CHECK(OneTimeStep(0.0, 200) == 0);
}

TEST_CASE("gradual replacement: five nearly equal groups at evenly spaced updates") {
  CHECK(GradualSteps(0.3, 0.7, 5, 1000) == std::vector<int64_t>{300, 400, 500, 600, 700});
  CHECK(GradualSteps(0.5, 0.9, 1, 100) == std::vector<int64_t>{50});
  std::vector<HeadId> heads;
  for (int64_t i = 0; i < 36; ++i) heads.push_back({i / 12, i % 12});
  auto groups = SplitIntoGroups(heads, 5);
  REQUIRE(groups.size() == 5);
  std::vector<size_t> sizes;
  for (auto& g : groups) sizes.push_back(g.size());
  CHECK(sizes == std::vector<size_t>{8, 7, 7, 7, 7});
  CHECK(groups[1][0] == heads[8]);                          // order preserved
  CHECK(SplitIntoGroups({{0, 0}, {0, 1}}, 5).size() == 2);  // no empty groups
}

ControllerOptions Options() {
  ControllerOptions o;
  o.first_step = 10;
  o.last_step = 100;
  o.group_heads = 2;
  o.max_heads = 5;
  return o;
}

TEST_CASE("validation-budget controller accepts increments while the cumulative cost fits") {
  ValidationBudgetController c(Options(), 0.01, 10);
  CHECK_FALSE(c.ShouldPropose(5));
  CHECK(c.ShouldPropose(10));
  CHECK_FALSE(c.ShouldPropose(15));
  CHECK(c.NextGroupSize() == 2);
  CHECK(c.Report(3.0, 3.004, 2));  // +0.4%
  CHECK(c.spent() == Approx(std::exp(0.004) - 1));
  CHECK(c.ShouldPropose(20));
  CHECK(c.Report(3.0, 3.005, 2));  // cumulative ~0.9%
  CHECK(c.installed() == 4);
  CHECK(c.NextGroupSize() == 1);         // capped by max_heads
  CHECK_FALSE(c.Report(3.0, 3.002, 1));  // would exceed 1%: undo and stop
  CHECK(c.stopped());
  CHECK(c.installed() == 4);
  CHECK_FALSE(c.ShouldPropose(40));
}

// Feeds `n` noisy losses around `level` (slope per step) from `*step` on; returns the first
// non-kNone action, or kNone.
TrainLossController::Action Feed(TrainLossController& c, int64_t* step, int n, double level,
                                 double slope, std::mt19937_64& rng) {
  std::normal_distribution<double> noise(0.0, 0.01);
  for (int i = 0; i < n; ++i) {
    auto a = c.Observe((*step)++, level + slope * i + noise(rng));
    if (a != TrainLossController::Action::kNone) return a;
  }
  return TrainLossController::Action::kNone;
}

TEST_CASE(
    "train-loss controller: no trigger while improving, trigger on a plateau, wait for recovery") {
  std::mt19937_64 rng(1);
  TrainLossController c(Options(), 2.0, 8, 40);
  int64_t step = 0;
  using A = TrainLossController::Action;
  // Steady, clearly significant improvement: never a plateau.
  CHECK(Feed(c, &step, 40, 4.0, -0.01, rng) == A::kNone);
  // Flat: a plateau once the window is full.
  CHECK(Feed(c, &step, 40, 3.6, 0.0, rng) == A::kPropose);
  c.Installed(c.NextGroupSize());
  CHECK(c.waiting_for_recovery());
  // The loss jumps after replacement, then comes back: recovery, no undo.
  CHECK(Feed(c, &step, 10, 3.8, 0.0, rng) == A::kNone);
  CHECK(c.waiting_for_recovery());
  CHECK(Feed(c, &step, 12, 3.6, 0.0, rng) == A::kNone);
  CHECK_FALSE(c.waiting_for_recovery());
  CHECK(c.installed() == 2);
  // Another plateau proposes the next group.
  CHECK(Feed(c, &step, 20, 3.6, 0.0, rng) == A::kPropose);
}

TEST_CASE("train-loss controller undoes an increment that never recovers") {
  std::mt19937_64 rng(2);
  TrainLossController c(Options(), 2.0, 8, 30);
  int64_t step = 0;
  using A = TrainLossController::Action;
  CHECK(Feed(c, &step, 40, 3.6, 0.0, rng) == A::kPropose);
  c.Installed(2);
  CHECK(Feed(c, &step, 60, 3.9, 0.0, rng) == A::kUndo);
  CHECK(c.stopped());
  CHECK(c.installed() == 0);
  CHECK(Feed(c, &step, 40, 3.6, 0.0, rng) == A::kNone);
}

TEST_CASE("train-loss controller respects its window of steps") {
  std::mt19937_64 rng(3);
  ControllerOptions o = Options();
  o.first_step = 1000;
  TrainLossController c(o, 2.0, 8, 30);
  int64_t step = 0;
  CHECK(Feed(c, &step, 100, 3.6, 0.0, rng) == TrainLossController::Action::kNone);
}

}  // namespace
}  // namespace headlab::saf
