#include "coordinator/parent.h"

#include <catch2/catch.hpp>

#include "coordinator/store.h"
#include "coordinator/test_util.h"

namespace headlab::coord {
namespace {

using State = ParentResolution::State;

Json WithParent(int64_t run, int64_t step) {
  return {{"kind", "noop"}, {"parent", {{"run", run}, {"step", step}}}};
}

}  // namespace

TEST_CASE("ResolveParent: none, wait while queued/running, the checkpoint once succeeded") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto e = s.InsertExperiment(TestGrid({"a"}, 1), {}, false);
  REQUIRE(e.ok());
  const int64_t parent = e->queued[0];

  CHECK(ResolveParent(s.db(), Json{{"kind", "noop"}}).state == State::kNone);
  CHECK(ResolveParent(s.db(), WithParent(0, 0)).state == State::kNone);
  CHECK(ResolveParent(s.db(), WithParent(parent, 0)).state == State::kWait);  // queued
  REQUIRE(s.StartAttempt({parent, 1}, "w", {}, nullptr).ok());
  REQUIRE(s.InsertArtifact({parent, 1}, 0, "checkpoint", "/c/10", "h10", 1, 10).ok());
  CHECK(ResolveParent(s.db(), WithParent(parent, 10)).state == State::kWait);  // running
  REQUIRE(s.InsertArtifact({parent, 1}, 1, "checkpoint", "/c/20", "h20", 1, 20).ok());
  s.FinishAttempt({parent, 1}, "succeeded", 0, "", "", Json::object());

  ParentResolution final_ck = ResolveParent(s.db(), WithParent(parent, 0));
  REQUIRE(final_ck.state == State::kReady);
  CHECK(final_ck.checkpoint ==
        Json({{"run", parent}, {"path", "/c/20"}, {"sha256", "h20"}, {"step", 20}}));
  ParentResolution mid = ResolveParent(s.db(), WithParent(parent, 10));
  REQUIRE(mid.state == State::kReady);
  CHECK(mid.checkpoint["sha256"] == "h10");

  ParentResolution unsaved = ResolveParent(s.db(), WithParent(parent, 15));
  CHECK(unsaved.state == State::kFail);
  CHECK(unsaved.error.find("has no checkpoint of step 15") != std::string::npos);
  ParentResolution missing = ResolveParent(s.db(), WithParent(999, 0));
  CHECK(missing.state == State::kFail);
  CHECK(missing.error.find("parent run 999 does not exist") != std::string::npos);
}

TEST_CASE("ResolveParent: a failed parent fails the child with its reason") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto e = s.InsertExperiment(TestGrid({"a"}, 1, "t", /*max_attempts=*/1), {}, false);
  REQUIRE(e.ok());
  const int64_t parent = e->queued[0];
  REQUIRE(s.StartAttempt({parent, 1}, "w", {}, nullptr).ok());
  s.FinishAttempt({parent, 1}, "failed", 1, "out of memory", "", Json::object());
  ParentResolution r = ResolveParent(s.db(), WithParent(parent, 0));
  CHECK(r.state == State::kFail);
  CHECK(r.error.find("failed") != std::string::npos);
  CHECK(r.error.find("out of memory") != std::string::npos);
}

TEST_CASE("ResolveParent: parent.experiment and parent.arm pick the parent of this run's seed") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto e = s.InsertExperiment(TestGrid({"a", "b"}, 2), {}, false);  // runs a1 a2 b1 b2
  REQUIRE(e.ok());
  const int64_t a2 = e->queued[1], b1 = e->queued[2];
  auto child = [&](int64_t seed, const std::string& arm) {
    return Json{
        {"kind", "noop"},
        {"seed", seed},
        {"parent", {{"run", 0}, {"step", 0}, {"experiment", e->experiment_id}, {"arm", arm}}}};
  };
  CHECK(ResolveParent(s.db(), child(2, "a")).state == State::kWait);  // a2 still queued
  for (int64_t run : {a2, b1}) {
    REQUIRE(s.StartAttempt({run, 1}, "w", {}, nullptr).ok());
    REQUIRE(s.InsertArtifact({run, 1}, 0, "checkpoint", "/c/" + std::to_string(run),
                             "h" + std::to_string(run), 1, 5)
                .ok());
    s.FinishAttempt({run, 1}, "succeeded", 0, "", "", Json::object());
  }
  ParentResolution r = ResolveParent(s.db(), child(2, "a"));
  REQUIRE(r.state == State::kReady);
  CHECK(r.checkpoint["run"] == a2);
  CHECK(r.checkpoint["sha256"] == "h" + std::to_string(a2));
  CHECK(ResolveParent(s.db(), child(1, "b")).checkpoint["run"] == b1);
  ParentResolution none = ResolveParent(s.db(), child(3, "a"));
  CHECK(none.state == State::kFail);
  CHECK(none.error.find("has no run of seed 3") != std::string::npos);
  ParentResolution two = ResolveParent(s.db(), child(1, ""));  // a1 and b1
  CHECK(two.state == State::kFail);
  CHECK(two.error.find("2 runs of seed 1: set parent.arm") != std::string::npos);
}

TEST_CASE("PinnedSteps: the mid-run steps stored continuations start from, per parent run") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto parents = s.InsertExperiment(TestGrid({"a", "b"}, 2), {}, false);  // a1 a2 b1 b2
  REQUIRE(parents.ok());
  const int64_t a1 = parents->queued[0], a2 = parents->queued[1], b1 = parents->queued[2],
                b2 = parents->queued[3], pe = parents->experiment_id;
  Grid g = TestGrid({"c"}, 6, "children");
  const Json children[] = {
      {{"run", a1}, {"step", 30}},                                   // a1 by id
      {{"run", 0}, {"experiment", pe}, {"arm", "a"}, {"step", 40}},  // a, seed 1: a1
      {{"run", 0}, {"experiment", pe}, {"arm", ""}, {"step", 50}},   // any arm, seed 1: a1, b1
      {{"run", 0}, {"experiment", pe}, {"arm", "a"}, {"step", 60}},  // seed 2 (below): a2
      {{"run", 0}, {"experiment", pe}, {"arm", "b"}, {"step", 70}},  // b, seed 1: b1
      {{"run", a1}, {"step", 0}},                                    // the final one: no pin
  };
  for (size_t i = 0; i < g.runs.size(); ++i) {
    g.runs[i].config["parent"] = children[i];
    g.runs[i].config["seed"] = i == 3 ? 2 : 1;
    g.runs[i].config_hash = Sha256Hex(CanonicalJson(g.runs[i].config));
  }
  REQUIRE(s.InsertExperiment(g, {}, false).ok());
  CHECK(PinnedSteps(s.db(), a1) == Json::array({30, 40, 50}));
  CHECK(PinnedSteps(s.db(), a2) == Json::array({60}));
  CHECK(PinnedSteps(s.db(), b1) == Json::array({50, 70}));
  CHECK(PinnedSteps(s.db(), b2) == Json::array());
  CHECK(PinnedSteps(s.db(), 999) == Json::array());
}

TEST_CASE("A checkpoint deleted by retention is no parent and no resume, and says so") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto e = s.InsertExperiment(TestGrid({"a"}, 1), {}, false);
  REQUIRE(e.ok());
  const int64_t parent = e->queued[0];
  REQUIRE(s.StartAttempt({parent, 1}, "w", {}, nullptr).ok());
  REQUIRE(s.InsertArtifact({parent, 1}, 0, "checkpoint", "/c/10", "h10", 1, 10).ok());
  REQUIRE(s.InsertArtifact({parent, 1}, 1, "checkpoint", "/c/20", "h20", 1, 20).ok());
  REQUIRE(s.InsertArtifact({parent, 1}, 2, "checkpoint", "/c/30", "h30", 1, 30).ok());
  REQUIRE(s.MarkArtifactDeleted({parent, 1}, 0, "/c/10").ok());
  REQUIRE(s.MarkArtifactDeleted({parent, 1}, 1, "/c/other").ok());  // not its path: no change
  REQUIRE(s.MarkArtifactDeleted({parent, 1}, 0, "/c/10").ok());     // a resend: no change
  CHECK(s.Checkpoints(parent, 4) == Json::parse(R"([{"path": "/c/30", "sha256": "h30", "step": 30},
      {"path": "/c/20", "sha256": "h20", "step": 20}])"));
  s.FinishAttempt({parent, 1}, "succeeded", 0, "", "", Json::object());
  ParentResolution gone = ResolveParent(s.db(), WithParent(parent, 10));
  CHECK(gone.state == State::kFail);
  CHECK(gone.error == "parent run " + std::to_string(parent) +
                          "'s checkpoint of step 10 was deleted by checkpoint retention (list the "
                          "step in the parent's train.keep_steps, or submit continuations before "
                          "the parent starts)");
  CHECK(ResolveParent(s.db(), WithParent(parent, 20)).checkpoint["sha256"] == "h20");
  CHECK(ResolveParent(s.db(), WithParent(parent, 0)).checkpoint["sha256"] == "h30");
}

}  // namespace headlab::coord
