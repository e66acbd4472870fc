#include "coordinator/run_search.h"

#include <catch2/catch.hpp>

#include "coordinator/annotations.h"
#include "coordinator/test_util.h"

namespace headlab::coord {

TEST_CASE("conditions and filters parse; bad ones name what is wrong") {
  auto c = ParseCondition("train.lr<=1e-3");
  REQUIRE(c.ok());
  CHECK(c->key == "train.lr");
  CHECK(c->op == "<=");
  CHECK(c->value == 1e-3);
  CHECK(ParseCondition("params.act=gelu")->value == "gelu");
  CHECK(ParseCondition("seed!=2")->op == "!=");
  CHECK(ParseCondition("seed==2")->op == "=");
  CHECK(ParseCondition("train.lrr=1").status().message() ==
        "where \"train.lrr=1\": unknown config key \"train.lrr\" (did you mean \"train.lr\"?)");
  CHECK(!ParseCondition("seed").ok());
  // Spaces around the parts, as the dashboard's own placeholder has them.
  auto spaced = ParseCondition(" train.lr <= 1e-3 ");
  REQUIRE(spaced.ok());
  CHECK(spaced->key == "train.lr");
  CHECK(spaced->op == "<=");
  CHECK(spaced->value == 1e-3);
  CHECK(ParseCondition("params.act = \"a b\"")->value == "a b");
  auto placeholder =
      ParseRunFilter("where=train.lr%3C%3D1e-3%3B%20seed%3D1");  // "train.lr<=1e-3; seed=1"
  REQUIRE(placeholder.ok());
  REQUIRE(placeholder->where.size() == 2);
  CHECK(placeholder->where[1].key == "seed");
  CHECK(placeholder->where[1].value == 1);
  auto f = ParseRunFilter(
      "experiment=3&status=failed,lost&tag=good&where=seed%3D1;train.lr%3E0&limit=5");
  REQUIRE(f.ok());
  CHECK(f->experiment == 3);
  CHECK(f->statuses == std::vector<std::string>{"failed", "lost"});
  CHECK(f->tags == std::vector<std::string>{"good"});
  CHECK(f->where.size() == 2);
  CHECK(f->limit == 5);
  CHECK(ParseRunFilter("status=done").status().message().rfind("status: expected queued", 0) == 0);
  CHECK(!ParseRunFilter("limit=0").ok());
}

TEST_CASE("search across experiments by status, tag and config value") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto e1 = s.InsertExperiment(TestGrid({"a", "b"}, 2, "one"), {}, false);
  auto e2 = s.InsertExperiment(TestGrid({"a"}, 3, "two"), {}, false);
  REQUIRE(e1.ok());
  REQUIRE(e2.ok());
  // e1: runs a1 a2 b1 b2; e2: a1 a2 a3. Succeed e1's seed-1 runs, fail e2's first run.
  for (int64_t run : {e1->queued[0], e1->queued[2], e2->queued[0]})
    REQUIRE(s.StartAttempt({run, 1}, "w", {}, nullptr).ok());
  s.FinishAttempt({e1->queued[0], 1}, "succeeded", 0, "", "", {{"eval.ppl", 10.0}});
  s.FinishAttempt({e1->queued[2], 1}, "succeeded", 0, "", "", {{"eval.ppl", 12.0}});
  s.FinishAttempt({e2->queued[0], 1}, "failed", 1, "exit 1", "", Json::object());
  auto ids = [&](const std::string& q) {
    auto f = ParseRunFilter(q);
    REQUIRE(f.ok());
    auto r = SearchRunsView(s.db(), *f);
    REQUIRE(r.ok());
    std::vector<int64_t> out;
    for (const Json& run : (*r)["runs"]) out.push_back(run["id"]);
    return out;
  };
  CHECK(ids("status=succeeded") == std::vector<int64_t>{e1->queued[0], e1->queued[2]});
  CHECK(ids("status=failed") == std::vector<int64_t>{e2->queued[0]});
  CHECK(ids("where=seed%3D1") == std::vector<int64_t>{e1->queued[0], e1->queued[2], e2->queued[0]});
  CHECK(ids("where=seed%3E2") == std::vector<int64_t>{e2->queued[2]});
  CHECK(ids("experiment=" + std::to_string(e2->experiment_id) + "&where=kind%3Dnoop;seed%3C3") ==
        std::vector<int64_t>{e2->queued[0], e2->queued[1]});
  CHECK(ids("experiment=" + std::to_string(e1->experiment_id) + "&status=queued").size() == 2);
  // A tag matches on the run or on its experiment.
  REQUIRE(UpdateTags(&s, "run", e1->queued[1], Json{{"add", {"good"}}}).ok());
  REQUIRE(UpdateTags(&s, "experiment", e2->experiment_id, Json{{"add", {"good"}}}).ok());
  CHECK(ids("tag=good").size() == 4);
  CHECK(ids("tag=good&status=failed") == std::vector<int64_t>{e2->queued[0]});
  auto f = ParseRunFilter("limit=2");
  auto r = SearchRunsView(s.db(), *f);
  REQUIRE(r.ok());
  CHECK((*r)["runs"].size() == 2);
  CHECK((*r)["truncated"] == true);
  auto one = SearchRunsView(s.db(), *ParseRunFilter("status=succeeded&limit=1"));
  CHECK((*one)["runs"][0]["summary"]["eval.ppl"] == 10.0);
  CHECK((*one)["runs"][0]["experiment_name"] == "test");
}

}  // namespace headlab::coord
