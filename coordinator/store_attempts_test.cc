// The run/attempt state machine: losses requeue until max_attempts, one success per run.
#include "coordinator/store.h"

#include <catch2/catch.hpp>

#include "coordinator/test_util.h"

namespace headlab::coord {

TEST_CASE("a lost attempt requeues the run until max_attempts, then fails it") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto e = s.InsertExperiment(TestGrid({"a"}, 1, "t", /*max_attempts=*/2), {}, false);
  int64_t run = e->queued[0];
  REQUIRE(s.StartAttempt({run, 1}, "w1", {0}, nullptr).ok());
  REQUIRE(s.InsertArtifact({run, 1}, 0, "checkpoint", "/c/50", "h50", 1, 50).ok());
  REQUIRE(s.InsertArtifact({run, 1}, 1, "checkpoint", "/c/100", "h100", 1, 100).ok());
  AttemptOutcome o = s.LoseAttempt({run, 1}, "worker silent");
  CHECK(o.changed);
  CHECK(o.requeued);
  CHECK(RunStatus(s, run) == "queued");
  CHECK(s.QueuedRuns() == std::vector<int64_t>{run});
  // The next attempt is offered the latest checkpoint first, then the older ones.
  Json offered = s.Checkpoints(run, 4);
  CHECK(offered == Json::array({{{"path", "/c/100"}, {"sha256", "h100"}, {"step", 100}},
                                {{"path", "/c/50"}, {"sha256", "h50"}, {"step", 50}}}));
  CHECK(s.Checkpoints(run, 1).size() == 1);
  auto r = s.LoadRunForAssign(run);
  REQUIRE(r.ok());
  CHECK(r->attempts == 1);
  REQUIRE(s.StartAttempt({run, 2}, "w2", {}, offered).ok());
  // resume_json is what ACCEPT reports, not what was offered.
  CHECK(Count(s, "SELECT count(*) FROM attempts WHERE attempt=2 AND resume_json='null'") == 1);
  REQUIRE(s.MarkAccepted({run, 2}, offered[0]).ok());
  CHECK(Count(s, "SELECT count(*) FROM attempts WHERE resume_json LIKE '%h100%'") == 1);
  // Losing it twice is harmless; losing the last allowed attempt fails the run.
  o = s.LoseAttempt({run, 2}, "worker silent");
  CHECK(o.run_finished);
  CHECK_FALSE(o.requeued);
  CHECK(RunStatus(s, run) == "failed");
  o = s.LoseAttempt({run, 2}, "again");
  CHECK_FALSE(o.changed);
  // Retry gives a fresh budget.
  auto rt = s.RetryRun(run);
  REQUIRE(rt.ok());
  CHECK(RunStatus(s, run) == "queued");
  CHECK(Count(s, "SELECT max_attempts FROM runs") == 4);
  CHECK(s.RetryRun(run).status().code() == Status::Code::kUnavailable);
}

TEST_CASE("exactly one successful attempt per run") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto e = s.InsertExperiment(TestGrid({"a"}, 1), {}, false);
  int64_t run = e->queued[0];
  REQUIRE(s.StartAttempt({run, 1}, "w1", {}, nullptr).ok());
  s.LoseAttempt({run, 1}, "silent");
  REQUIRE(s.StartAttempt({run, 2}, "w2", {}, nullptr).ok());
  // The lost attempt's worker comes back and reports success: recorded, not used.
  AttemptOutcome late = s.FinishAttempt({run, 1}, "succeeded", 0, "", "tail", {{"eval.ppl", 9.0}});
  CHECK(late.known);
  CHECK_FALSE(late.changed);
  CHECK(RunStatus(s, run) == "running");
  AttemptOutcome ok = s.FinishAttempt({run, 2}, "succeeded", 0, "", "", {{"eval.ppl", 4.0}});
  CHECK(ok.run_finished);
  AttemptOutcome dup = s.FinishAttempt({run, 2}, "succeeded", 0, "", "", {{"eval.ppl", 4.0}});
  CHECK_FALSE(dup.changed);
  CHECK(RunStatus(s, run) == "succeeded");
  CHECK(Count(s, "SELECT count(*) FROM attempts WHERE status='succeeded'") == 1);
  CHECK(Count(s, "SELECT count(*) FROM attempts WHERE status='lost' AND exit_code = 0") == 1);
  Stmt q = s.db()->MustPrepare("SELECT value, attempt FROM summaries WHERE key='eval.ppl'");
  REQUIRE(q.Step());
  CHECK(q.Real(0) == 4.0);
  CHECK(q.Int(1) == 2);
  CHECK(s.ExperimentFinished(e->experiment_id));
  // Unknown attempts are reported as such.
  CHECK_FALSE(s.FinishAttempt({run, 7}, "succeeded", 0, "", "", Json::object()).known);
  CHECK(s.CheckAttempt({run, 7}).code() == Status::Code::kNotFound);
}

}  // namespace headlab::coord
