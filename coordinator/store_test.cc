#include "coordinator/store.h"

#include <catch2/catch.hpp>

#include "coordinator/test_util.h"

namespace headlab::coord {
namespace {

int64_t Count(Store& s, const std::string& sql) {
  Stmt q = s.db()->MustPrepare(sql);
  return q.Step() ? q.Int(0) : -1;
}

std::string RunStatus(Store& s, int64_t run) {
  Stmt q = s.db()->MustPrepare("SELECT status FROM runs WHERE id=?");
  q.Bind(1, run);
  return q.Step() ? q.Text(0) : "";
}

}  // namespace

TEST_CASE("submit inserts the experiment and its runs in one go") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto res = s.InsertExperiment(TestGrid({"a", "b"}, 3), {"seed=1,2,3"}, false);
  REQUIRE(res.ok());
  CHECK(res->runs == 6);
  CHECK(res->reused == 0);
  CHECK(res->queued.size() == 6);
  CHECK(s.QueuedRuns() == res->queued);
  CHECK(Count(s, "SELECT count(*) FROM runs WHERE status='queued' AND seed BETWEEN 1 AND 3") == 6);
  CHECK(Count(s, "SELECT count(*) FROM events WHERE kind='submit'") == 1);
}

TEST_CASE("resubmission reuses succeeded runs unless rerun") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto first = s.InsertExperiment(TestGrid({"a"}, 2), {}, false);
  REQUIRE(first.ok());
  int64_t r1 = first->queued[0];
  REQUIRE(s.StartAttempt({r1, 1}, "w", {}, nullptr).ok());
  auto o = s.FinishAttempt({r1, 1}, "succeeded", 0, "", "", {{"eval.ppl", 3.5}});
  CHECK(o.run_finished);

  auto again = s.InsertExperiment(TestGrid({"a"}, 2), {}, false);
  REQUIRE(again.ok());
  CHECK(again->reused == 1);
  CHECK(again->queued.size() == 1);
  Stmt q = s.db()->MustPrepare(
      "SELECT r.status, r.reused_from, s.value FROM runs r JOIN summaries s ON s.run_id = r.id "
      "WHERE r.experiment_id=? AND s.key='eval.ppl'");
  q.Bind(1, again->experiment_id);
  REQUIRE(q.Step());
  CHECK(q.Text(0) == "succeeded");
  CHECK(q.Int(1) == r1);
  CHECK(q.Real(2) == 3.5);

  auto rerun = s.InsertExperiment(TestGrid({"a"}, 2), {}, true);
  REQUIRE(rerun.ok());
  CHECK(rerun->reused == 0);
  CHECK(rerun->queued.size() == 2);
}

TEST_CASE("metrics ingestion is idempotent per (run, attempt, seq)") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto e = s.InsertExperiment(TestGrid({"a"}, 1), {}, false);
  REQUIRE(e.ok());
  AttemptRef ref{e->queued[0], 1};
  REQUIRE(s.StartAttempt(ref, "w", {}, nullptr).ok());
  std::vector<MetricPoint> pts;
  for (int i = 0; i < 10; ++i) pts.push_back({i, i * 10, "train.loss", 1.0 / (i + 1), 100.0 + i});
  pts.push_back({10, 100, "train.loss", std::nullopt, 111});
  REQUIRE(s.InsertMetrics(ref, pts).ok());
  REQUIRE(s.InsertMetrics(ref, pts).ok());  // a resend
  CHECK(Count(s, "SELECT count(*) FROM metrics") == 11);
  CHECK(Count(s, "SELECT count(*) FROM metrics WHERE value IS NULL") == 1);
  REQUIRE(s.InsertArtifact(ref, 0, "checkpoint", "/x/ckpt", "ab", 10, 100).ok());
  REQUIRE(s.InsertArtifact(ref, 0, "checkpoint", "/x/ckpt", "ab", 10, 100).ok());
  CHECK(Count(s, "SELECT count(*) FROM artifacts") == 1);
}

TEST_CASE("large metric batches (multi-row inserts) keep every point once") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto e = s.InsertExperiment(TestGrid({"a"}, 1), {}, false);
  AttemptRef ref{e->queued[0], 1};
  REQUIRE(s.StartAttempt(ref, "w", {}, nullptr).ok());
  std::vector<MetricPoint> pts;
  for (int i = 0; i < 150; ++i)
    pts.push_back({i, i, i % 2 ? "train.loss" : "eval.loss", double(i), 1000.0 + i});
  REQUIRE(s.InsertMetrics(ref, pts).ok());
  // A resend overlapping the first half, shifted: seqs 75..224.
  for (auto& p : pts) p.seq += 75;
  REQUIRE(s.InsertMetrics(ref, pts).ok());
  CHECK(Count(s, "SELECT count(*) FROM metrics") == 225);
  CHECK(Count(s, "SELECT sum(seq) FROM metrics") == 224 * 225 / 2);
  CHECK(Count(s, "SELECT value FROM metrics WHERE seq = 74") == 74);   // first write kept
  CHECK(Count(s, "SELECT value FROM metrics WHERE seq = 200") == 125);
}

TEST_CASE("provenance from worker and exec merges into one row") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto e = s.InsertExperiment(TestGrid({"a"}, 1), {}, false);
  AttemptRef ref{e->queued[0], 1};
  REQUIRE(s.StartAttempt(ref, "w", {}, nullptr).ok());
  REQUIRE(s.UpsertProvenance(ref, {{"git_commit", "abc"}, {"git_dirty", true}, {"host", "h1"}}).ok());
  REQUIRE(s.UpsertProvenance(ref, {{"libtorch_version", "1.13"}, {"dataset_sha256", "dd"}}).ok());
  Stmt q = s.db()->MustPrepare(
      "SELECT git_commit, git_dirty, host, libtorch_version, dataset_sha256, fields_json "
      "FROM provenance");
  REQUIRE(q.Step());
  CHECK(q.Text(0) == "abc");
  CHECK(q.Int(1) == 1);
  CHECK(q.Text(2) == "h1");
  CHECK(q.Text(3) == "1.13");
  CHECK(q.Text(4) == "dd");
  CHECK(ParseJson(q.Text(5), "x")->size() == 5);
  CHECK_FALSE(q.Step());
}

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

TEST_CASE("cancel: queued and running runs; a success after cancel is not used") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto e = s.InsertExperiment(TestGrid({"a"}, 3), {}, false);
  int64_t r1 = e->queued[0], r2 = e->queued[1], r3 = e->queued[2];
  REQUIRE(s.StartAttempt({r1, 1}, "w1", {}, nullptr).ok());
  REQUIRE(s.FinishAttempt({r1, 1}, "succeeded", 0, "", "", Json::object()).run_finished);
  REQUIRE(s.StartAttempt({r2, 1}, "w1", {}, nullptr).ok());
  auto c = s.CancelExperiment(e->experiment_id);
  REQUIRE(c.ok());
  REQUIRE(c->size() == 2);
  CHECK((*c)[0].run == r2);
  REQUIRE((*c)[0].running);
  CHECK((*c)[0].worker_id == "w1");
  CHECK_FALSE((*c)[1].running);
  CHECK(RunStatus(s, r3) == "cancelled");
  CHECK(s.CancelRun(r1).status().code() == Status::Code::kUnavailable);
  CHECK(s.CancelRun(999).status().code() == Status::Code::kNotFound);
  s.FinishAttempt({r2, 1}, "succeeded", 0, "", "", Json::object());
  CHECK(RunStatus(s, r2) == "cancelled");
  CHECK(Count(s, "SELECT count(*) FROM attempts WHERE status='succeeded'") == 1);
}

TEST_CASE("state survives reopening the database") {
  TempDir dir;
  int64_t exp = 0;
  {
    Store s;
    REQUIRE(s.Open(dir.path() + "/h.db").ok());
    REQUIRE(s.Begin().ok());
    auto e = s.InsertExperiment(TestGrid({"a"}, 3), {}, false);
    exp = e->experiment_id;
    REQUIRE(s.StartAttempt({e->queued[0], 1}, "w1", {2}, nullptr).ok());
    REQUIRE(s.Commit().ok());
    REQUIRE(s.Begin().ok());
    REQUIRE(s.StartAttempt({e->queued[1], 1}, "w1", {}, nullptr).ok());
    s.Rollback();  // never committed: must not exist after reopening
  }
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto running = s.RunningAttempts();
  REQUIRE(running.size() == 1);
  CHECK(running[0].worker_id == "w1");
  CHECK(running[0].devices == std::vector<int>{2});
  CHECK(s.QueuedRuns().size() == 2);
  CHECK_FALSE(s.ExperimentFinished(exp));
}

}  // namespace headlab::coord
