// Experiments and runs: submission, reuse of succeeded runs, cancel.
#include "coordinator/store.h"

#include <catch2/catch.hpp>

#include "coordinator/test_util.h"

namespace headlab::coord {

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

}  // namespace headlab::coord
