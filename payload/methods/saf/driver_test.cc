#include "payload/methods/saf/driver.h"

#include "payload/exec/model.h"
#include "payload/methods/saf/saf_testing.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::saf {
namespace {

constexpr int64_t kT = 16, kSteps = 20;

struct Fixture {
  Gpt gpt{nullptr};
  std::vector<uint16_t> tokens;
  TokenSpan span;
  Fixture() {
    torch::manual_seed(41);
    gpt = Gpt(testing::TinyGptConfig(kT, 2));
    for (int i = 0; i < 2000; ++i) tokens.push_back(uint16_t((i * 7919) % 64));
    span.data = tokens.data();
    span.size = int64_t(tokens.size());
  }
  int64_t Fixed() {
    int64_t n = 0;
    for (int64_t l = 0; l < 2; ++l)
      for (const HeadState& s : gpt->attention(l)->head_states())
        n += s.mode != HeadMode::kOrdinary;
    return n;
  }
};

SafOptions Options(ScheduleKind schedule) {
  SafOptions o;
  o.method = "replace";
  o.rate = 0.5;  // k = 4 of 8
  o.schedule = schedule;
  o.calib_sequences = 4;
  o.calib_batch = 2;
  return o;
}

// A controller active over the whole run, proposing `group` heads at a time.
SafOptions AdaptiveOptions(ScheduleKind schedule, int64_t group) {
  SafOptions o = Options(schedule);
  o.group_heads = group;
  o.tau_start = 0.0;
  o.tau_end = 1.0;
  return o;
}

TEST_CASE("one-time: the driver installs k heads at the midpoint only") {
  Fixture f;
  auto d = SafDriver::Create(Options(ScheduleKind::kOneTime), f.gpt.get(), f.span, kSteps, 1,
                             torch::kCPU);
  REQUIRE(d.ok());
  std::vector<InterventionReport> reports;
  auto no_eval = [] { return 0.0; };
  for (int64_t step = 0; step < kSteps; ++step) {
    REQUIRE((*d)->BeforeUpdate(step, no_eval, &reports).ok());
    CHECK(f.Fixed() == (step >= 10 ? 4 : 0));
  }
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].step == 10);
  CHECK(reports[0].k == 4);
}

TEST_CASE("gradual: the final set goes in nearly equal groups at evenly spaced steps") {
  Fixture f;
  SafOptions o = Options(ScheduleKind::kGradual);
  o.groups = 3;
  o.tau_start = 0.2;
  o.tau_end = 0.6;  // steps 4, 8, 12
  auto d = SafDriver::Create(o, f.gpt.get(), f.span, kSteps, 1, torch::kCPU);
  REQUIRE(d.ok());
  std::vector<InterventionReport> reports;
  std::vector<int64_t> counts;
  for (int64_t step = 0; step < kSteps; ++step) {
    REQUIRE((*d)->BeforeUpdate(
                    step, [] { return 0.0; }, &reports)
                .ok());
    counts.push_back(f.Fixed());
  }
  CHECK(counts[3] == 0);
  CHECK(counts[4] == 2);
  CHECK(counts[8] == 3);
  CHECK(counts[12] == 4);
  CHECK(counts[19] == 4);
  CHECK(reports.size() == 3);
}

TEST_CASE("validation budget: increments are kept while free and undone when over budget") {
  Fixture f;
  SafOptions o = AdaptiveOptions(ScheduleKind::kValidationBudget, 1);
  o.check_every = 2;
  o.budget = 0.01;
  auto d = SafDriver::Create(o, f.gpt.get(), f.span, kSteps, 1, torch::kCPU);
  REQUIRE(d.ok());
  std::vector<InterventionReport> reports;
  int calls = 0;
  // Each pair of evaluations costs 0.4% (after = before + 0.004): two groups fit in 1%.
  auto eval = [&] { return 3.0 + 0.004 * double(calls++ % 2); };
  for (int64_t step = 0; step < kSteps; ++step)
    REQUIRE((*d)->BeforeUpdate(step, eval, &reports).ok());
  CHECK(f.Fixed() == 2);
  CHECK(reports.size() == 3);  // two kept, the third undone
}

TEST_CASE("train loss: a plateau proposes a group; a loss that never recovers undoes it") {
  Fixture f;
  SafOptions o = AdaptiveOptions(ScheduleKind::kTrainLoss, 2);
  o.window = 3;
  auto d = SafDriver::Create(o, f.gpt.get(), f.span, 100, 1, torch::kCPU);
  REQUIRE(d.ok());
  std::vector<InterventionReport> reports;
  int64_t step = 1;
  for (; step <= 6; ++step)
    REQUIRE((*d)->AfterUpdate(step, 3.0 + 0.001 * double(step % 2), &reports).ok());
  CHECK(f.Fixed() == 2);
  REQUIRE(reports.size() == 1);
  for (; step <= 30; ++step) REQUIRE((*d)->AfterUpdate(step, 4.0, &reports).ok());
  CHECK(f.Fixed() == 0);  // undone
}

TEST_CASE("a bad prescribed head list is refused at creation") {
  Fixture f;
  SafOptions o = Options(ScheduleKind::kOneTime);
  o.heads = "0.9";
  CHECK_FALSE(SafDriver::Create(o, f.gpt.get(), f.span, kSteps, 1, torch::kCPU).ok());
}

}  // namespace
}  // namespace headlab::saf
