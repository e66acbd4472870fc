#include "coordinator/runs_page.h"

#include <catch2/catch.hpp>

#include <algorithm>

#include "coordinator/annotations.h"
#include "coordinator/test_util.h"
#include "coordinator/views.h"

namespace headlab::coord {
namespace {

std::vector<int64_t> Ids(const Json& page) {
  std::vector<int64_t> out;
  for (const Json& r : page["runs"]) out.push_back(r["id"]);
  return out;
}

}  // namespace

TEST_CASE("runs page parameters parse; bad ones name the parameter") {
  CHECK(!WantsRunsPage(""));
  CHECK(!WantsRunsPage("status=failed"));
  CHECK(WantsRunsPage("limit=5"));
  CHECK(WantsRunsPage("offset=0"));
  auto r = ParseRunsPage(
      "limit=50&offset=100&sort=summary%3Aeval.ppl&desc=1&status=failed,lost"
      "&q=train.lr%20%3C%3D%201e-3%3B%20Good%20&keys=1");
  REQUIRE(r.ok());
  CHECK(r->limit == 50);
  CHECK(r->offset == 100);
  CHECK(r->sort == "summary:eval.ppl");
  CHECK(r->desc);
  CHECK(r->keys);
  CHECK(r->statuses == std::vector<std::string>{"failed", "lost"});
  REQUIRE(r->where.size() == 1);
  CHECK(r->where[0].key == "train.lr");
  CHECK(r->where[0].op == "<=");
  CHECK(r->where[0].value == 1e-3);
  CHECK(r->text == std::vector<std::string>{"good"});
  // The page size is bounded: no client moves more than kMaxRunsPage rows at once.
  CHECK(ParseRunsPage("limit=1001").status().message() == "limit: expected 1..1000, got \"1001\"");
  CHECK(!ParseRunsPage("limit=0").ok());
  CHECK(!ParseRunsPage("offset=-1").ok());
  CHECK(ParseRunsPage("limit=5&sort=color").status().message().rfind("sort: expected id", 0) == 0);
  CHECK(!ParseRunsPage("limit=5&sort=param:train.lrr").ok());
  CHECK(!ParseRunsPage("limit=5&desc=yes").ok());
  CHECK(ParseRunsPage("limit=5&status=done").status().message().rfind("status: expected", 0) == 0);
  // Text with an operator but no config key on its left is text ("a=b" in a note).
  CHECK(ParseRunsPage("limit=5&q=a%3Db")->text == std::vector<std::string>{"a=b"});
}

TEST_CASE("a runs page is the filtered, sorted slice of the whole list") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  Grid g = TestGrid({"a", "b"}, 5);  // a1..a5 then b1..b5 (grid order = id order)
  g.source["axes"] = {{"seed", {1, 2, 3, 4, 5}}};
  auto e = s.InsertExperiment(g, {}, false);
  REQUIRE(e.ok());
  const std::vector<int64_t>& runs = e->queued;
  REQUIRE(runs.size() == 10);
  // eval.ppl = 20 - i for the first six runs (so the sort reverses grid order); the rest
  // have none and sort last either way. Run 2 fails; run 3 is tagged, run 4 has a note.
  for (int i = 0; i < 6; ++i) {
    REQUIRE(s.StartAttempt({runs[i], 1}, "w", {}, nullptr).ok());
    if (i == 2)
      s.FinishAttempt({runs[i], 1}, "failed", 1, "exit 1", "", Json::object());
    else
      s.FinishAttempt({runs[i], 1}, "succeeded", 0, "", "", {{"eval.ppl", 20.0 - i}});
  }
  REQUIRE(UpdateTags(&s, "run", runs[3], Json{{"add", {"Keeper"}}}).ok());
  REQUIRE(SetNote(&s, "run", runs[4], Json{{"text", "odd loss spike"}}).ok());
  auto page = [&](const std::string& q) {
    auto req = ParseRunsPage(q);
    REQUIRE(req.ok());
    auto r = RunsPageView(s.db(), e->experiment_id, *req);
    REQUIRE(r.ok());
    return *r;
  };

  Json p = page("limit=4&offset=2");
  CHECK(Ids(p) == std::vector<int64_t>{runs[2], runs[3], runs[4], runs[5]});
  CHECK(p["total"] == 10);
  CHECK(p["matched"] == 10);
  CHECK(p["runs"][0]["params"]["seed"] == 3);
  CHECK(p["runs"][0]["status"] == "failed");
  CHECK(p["runs"][1]["tags"] == Json::array({"Keeper"}));
  CHECK(p["runs"][2]["note"] == "odd loss spike");
  CHECK(p["runs"][3]["summary"]["eval.ppl"] == 15.0);
  CHECK(!p.contains("summary_keys"));
  CHECK(page("limit=1&keys=1")["summary_keys"] == Json::array({"eval.ppl"}));

  // Sorted by a summary: ascending eval.ppl is runs 5,4,3,1,0 (run 2 has none), then the
  // runs without one in grid order; descending keeps the missing ones last.
  CHECK(Ids(page("limit=20&sort=summary:eval.ppl")) ==
        std::vector<int64_t>{runs[5], runs[4], runs[3], runs[1], runs[0], runs[2], runs[6], runs[7],
                             runs[8], runs[9]});
  CHECK(Ids(page("limit=3&sort=summary:eval.ppl&desc=1")) ==
        std::vector<int64_t>{runs[0], runs[1], runs[3]});
  CHECK(Ids(page("limit=20&sort=id&desc=1")).front() == runs[9]);
  std::vector<int64_t> by_seed = Ids(page("limit=20&sort=param:seed"));
  CHECK(by_seed == std::vector<int64_t>{runs[0], runs[5], runs[1], runs[6], runs[2], runs[7],
                                        runs[3], runs[8], runs[4], runs[9]});

  // Filters: status, a config condition (spaces allowed), text in arm, tag and note.
  Json failed = page("limit=20&status=failed");
  CHECK(Ids(failed) == std::vector<int64_t>{runs[2]});
  CHECK(failed["matched"] == 1);
  CHECK(failed["total"] == 10);
  CHECK(Ids(page("limit=20&q=seed%20%3E%3D%204")) ==
        std::vector<int64_t>{runs[3], runs[4], runs[8], runs[9]});
  CHECK(Ids(page("limit=20&q=keeper")) == std::vector<int64_t>{runs[3]});
  CHECK(Ids(page("limit=20&q=SPIKE")) == std::vector<int64_t>{runs[4]});
  CHECK(Ids(page("limit=20&q=seed%3D5%3B%20odd")) == std::vector<int64_t>{runs[4]});
  const std::vector<int64_t> by_id = Ids(page("limit=20&q=%23" + std::to_string(runs[7])));
  CHECK(std::count(by_id.begin(), by_id.end(), runs[7]) == 1);
  Json none = page("limit=20&status=running");
  CHECK(none["runs"].empty());
  CHECK(none["matched"] == 0);

  // The page's rows are the whole list's rows (same fields, plus devices).
  auto all = ExperimentRunsView(s.db(), e->experiment_id);
  REQUIRE(all.ok());
  Json one = page("limit=1&offset=3")["runs"][0];
  for (const char* k : {"id", "arm", "status", "attempts", "pair_key", "params", "summary", "tags"})
    CHECK(one[k] == (*all)[3][k]);
  CHECK(one["devices"] == Json::array());

  auto missing = RunsPageView(s.db(), 999, *ParseRunsPage("limit=1"));
  CHECK(missing.status().code() == Status::Code::kNotFound);
}

}  // namespace headlab::coord
