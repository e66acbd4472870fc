#include "coordinator/pair_legs.h"

#include <catch2/catch.hpp>

#include "common/grid.h"
#include "coordinator/store.h"
#include "coordinator/test_util.h"

namespace headlab::coord {
namespace {

// Arms a (reference) and b (method), reps 0..3, paired by rep: 8 legs, ABBA order
// a0 b0 | b1 a1 | a2 b2 | b3 a3.
constexpr const char* kGrid = R"({
  "name": "abba", "base": {"kind": "noop", "pair": {"group": "g"}},
  "axes": {"pair.rep": [0, 1, 2, 3]},
  "arms": {"a": {}, "b": {"noop.duration_ms": 1}},
  "pair_by": ["pair.rep"]})";

}  // namespace

TEST_CASE("paired legs run in ABBA order, one at a time, pinned to the first worker") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto grid = ExpandGrid(kGrid, "abba.jsonc", {});
  INFO(grid.status().message());
  REQUIRE(grid.ok());
  auto e = s.InsertExperiment(*grid, {}, false);
  REQUIRE(e.ok());
  const int64_t exp = e->experiment_id;
  // Expansion order: a rep 0..3, then b rep 0..3.
  std::vector<PairLeg> seq = PairLegSequence(s.db(), exp, "g");
  REQUIRE(seq.size() == 8);
  std::string order;
  for (const PairLeg& l : seq) order += l.arm + std::to_string(l.rep) + " ";
  CHECK(order == "a0 b0 b1 a1 a2 b2 b3 a3 ");

  auto decide = [&](int64_t run) {
    auto r = s.LoadRunForAssign(run);
    REQUIRE(r.ok());
    auto config = ParseJson(r->config_json, "config");
    REQUIRE(config.ok());
    return ResolvePairLeg(s.db(), exp, run, *config);
  };
  // Only the first leg may start, on any worker; the others wait.
  CHECK(decide(seq[0].run).state == PairLegDecision::State::kAny);
  for (size_t i = 1; i < seq.size(); ++i)
    CHECK(decide(seq[i].run).state == PairLegDecision::State::kWait);
  REQUIRE(s.StartAttempt({seq[0].run, 1}, "w1", {3}, nullptr, exp).ok());
  CHECK(decide(seq[1].run).state == PairLegDecision::State::kWait);  // leg 0 still running
  s.FinishAttempt({seq[0].run, 1}, "succeeded", 0, "", "", Json::object());
  PairLegDecision next = decide(seq[1].run);
  CHECK(next.state == PairLegDecision::State::kPinned);
  CHECK(next.worker_id == "w1");
  CHECK(next.devices == std::vector<int>{3});
  CHECK(decide(seq[2].run).state == PairLegDecision::State::kWait);
  // A failed leg does not block the rest of the sequence.
  REQUIRE(s.StartAttempt({seq[1].run, 1}, "w1", {3}, nullptr, exp).ok());
  s.FinishAttempt({seq[1].run, 1}, "failed", 1, "boom", "", Json::object());
  CHECK(decide(seq[2].run).state == PairLegDecision::State::kPinned);
}

TEST_CASE("runs without a pair group are not legs") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto e = s.InsertExperiment(TestGrid({"a", "b"}, 2), {}, false);
  REQUIRE(e.ok());
  CHECK(ResolvePairLeg(s.db(), e->experiment_id, e->queued[0], Json{{"kind", "noop"}}).state ==
        PairLegDecision::State::kNone);
  CHECK(PairLegSequence(s.db(), e->experiment_id, "g").empty());
}

}  // namespace headlab::coord
