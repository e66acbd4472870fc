// The write connection: what a batch commits survives reopening, what it rolls back does not.
#include "coordinator/store.h"

#include <catch2/catch.hpp>

#include "coordinator/test_util.h"

namespace headlab::coord {

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
