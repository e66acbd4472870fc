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

}  // namespace headlab::coord
