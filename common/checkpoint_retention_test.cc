#include "common/checkpoint_retention.h"

#include <algorithm>
#include <random>

#include <catch2/catch.hpp>

#include "common/run_config.h"

namespace headlab {
namespace {

// The schedule's steps read off its definition one step at a time (no arithmetic shared
// with Count/Writes): multiples of `every` strictly between start and the final step, and
// the final step max(start, last).
std::vector<int64_t> ListSteps(int64_t start, int64_t last, int64_t every) {
  std::vector<int64_t> out;
  const int64_t final_step = std::max(start, last);
  for (int64_t s = start + 1; s < final_step; ++s)
    if (every > 0 && s % every == 0) out.push_back(s);
  out.push_back(final_step);
  return out;
}

// What the worker does, simulated: write each step, then delete every checkpoint on disk
// that is neither pinned nor among the newest `keep` written. Returns the steps left and
// the most on disk at once (those present while one is being written, plus it).
std::pair<std::set<int64_t>, int64_t> Simulate(const std::vector<int64_t>& steps, int64_t keep,
                                               const std::set<int64_t>& pinned) {
  std::set<int64_t> disk;
  int64_t peak = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    peak = std::max<int64_t>(peak, int64_t(disk.size()) + 1);
    disk.insert(steps[i]);
    if (keep == 0) continue;
    std::set<int64_t> newest(steps.begin() + std::max<int64_t>(0, int64_t(i) + 1 - keep),
                             steps.begin() + int64_t(i) + 1);
    for (auto it = disk.begin(); it != disk.end();)
      it = (pinned.count(*it) || newest.count(*it)) ? std::next(it) : disk.erase(it);
  }
  return {disk, peak};
}

}  // namespace

TEST_CASE("KeptCheckpoints keeps the newest N and the pinned steps, every one for N = 0") {
  RetentionPolicy p;
  p.keep_last = 2;
  p.pinned = {20};
  CHECK(KeptCheckpoints({10, 20, 30, 40, 50}, p) ==
        std::vector<bool>{false, true, false, true, true});
  p.keep_last = 0;
  CHECK(KeptCheckpoints({10, 20, 30}, p) == std::vector<bool>{true, true, true});
  p.keep_last = 5;
  CHECK(KeptCheckpoints({10, 20}, p) == std::vector<bool>{true, true});
  CHECK(KeptCheckpoints({}, p).empty());
}

TEST_CASE("Retention matches a simulation of the worker over many schedules, N and pins") {
  std::mt19937 rng(7);
  int cases = 0;
  for (int64_t start = 0; start <= 6; start += 3)
    for (int64_t last = 0; last <= 25; ++last)
      for (int64_t every = 0; every <= 7; ++every)
        for (int64_t keep = 0; keep <= 4; ++keep)
          for (int trial = 0; trial < 3; ++trial) {
            RetentionPolicy p;
            p.keep_last = keep;
            const int pins = int(rng() % 4);
            for (int k = 0; k < pins; ++k) p.pinned.insert(1 + int64_t(rng() % 26));
            const std::vector<int64_t> steps = ListSteps(start, last, every);
            CheckpointSchedule s{start, last, every};
            INFO("start " << start << " last " << last << " every " << every << " keep " << keep);
            REQUIRE(s.Count() == int64_t(steps.size()));
            for (int64_t step = 0; step <= 30; ++step)
              REQUIRE(s.Writes(step) == std::binary_search(steps.begin(), steps.end(), step));
            auto [left, peak] = Simulate(steps, keep, p.pinned);
            const std::vector<bool> kept = KeptCheckpoints(steps, p);
            std::set<int64_t> rule;
            for (size_t i = 0; i < steps.size(); ++i)
              if (kept[i]) rule.insert(steps[i]);
            REQUIRE(rule == left);
            REQUIRE(left.count(steps.back()) == 1);  // the newest is never deleted
            for (int64_t pin : p.pinned)
              if (s.Writes(pin)) REQUIRE(left.count(pin) == 1);
            REQUIRE(PeakCheckpointsOnDisk(s, p) == peak);
            ++cases;
          }
  CHECK(cases == 3 * 26 * 8 * 5 * 3);
}

TEST_CASE("PeakCheckpointsOnDisk stays arithmetic for long runs") {
  // 10^8 updates with a checkpoint each: keep 2 and two pins -> 2 + 2 + the one written.
  RetentionPolicy p;
  p.keep_last = 2;
  p.pinned = {1500, 2500, 100000001};  // the last is never written
  CHECK(PeakCheckpointsOnDisk(CheckpointSchedule{0, 100000000, 1}, p) == 5);
  // SAF's parent: 5,000 updates, every 500, continuations from 1,500 and 2,500.
  CHECK(PeakCheckpointsOnDisk(CheckpointSchedule{0, 5000, 500}, p) == 5);
  p.keep_last = 0;
  CHECK(PeakCheckpointsOnDisk(CheckpointSchedule{0, 5000, 500}, p) == 10);
}

TEST_CASE("RetentionOf reads the config's keys and the coordinator's pins") {
  Json c = DefaultRunConfig();
  CHECK(c["train"]["keep_checkpoints"] == 2);
  c["train"]["keep_steps"] = "1500, 2500";
  auto p = RetentionOf(c, Json::array({20, 1500}));
  REQUIRE(p.ok());
  CHECK(p->keep_last == 2);
  CHECK(p->pinned == std::set<int64_t>{20, 1500, 2500});
  CHECK(RetentionOf(c, nullptr)->pinned == std::set<int64_t>{1500, 2500});
  CHECK(!RetentionOf(c, Json::array({0})).ok());
  CHECK(!RetentionOf(c, Json("20")).ok());
  c["train"]["keep_steps"] = "15x";
  CHECK(RetentionOf(c, nullptr).status().message().find("train.keep_steps") != std::string::npos);
}

TEST_CASE("ScheduleOf starts at parent.step and counts mqar.updates past it") {
  Json c = DefaultRunConfig();
  c["train"]["steps"] = 40;
  c["train"]["checkpoint_every"] = 10;
  c["parent"]["step"] = 20;
  CHECK(ScheduleOf(c).Count() == 2);  // 30, 40
  c["kind"] = "mqar";
  c["mqar"]["updates"] = 25;
  CheckpointSchedule s = ScheduleOf(c);
  CHECK(s.last_step == 45);
  CHECK(s.Count() == 3);  // 30, 40, 45
}

TEST_CASE("A malformed train.keep_steps is refused at validation, naming the key") {
  auto r = NormalizeRunConfig(Json::parse(R"({"train": {"keep_steps": "100,-5"}})"), "g.jsonc");
  REQUIRE(!r.ok());
  CHECK(r.status().message().find("g.jsonc: $.train.keep_steps") != std::string::npos);
  CHECK(NormalizeRunConfig(Json::parse(R"({"train": {"keep_steps": "100, 200"}})"), "g").ok());
}

}  // namespace headlab
