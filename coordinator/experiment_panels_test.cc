#include "coordinator/experiment_panels.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>

#include "coordinator/http_api.h"
#include "coordinator/http_policy.h"
#include "coordinator/panel_cache.h"
#include "coordinator/store.h"
#include "coordinator/test_util.h"

namespace headlab::coord {
namespace {

// Run i of the experiment logs train.loss = i + step at steps 1..3 and reports
// eval.ppl = 10 * i; runs 0..7 finish (run 3 fails, without points), 8 and 9 stay queued
// unless `finish_all`.
struct Fixture {
  TempDir dir;
  Store s;
  int64_t experiment = 0;
  std::vector<int64_t> runs;

  explicit Fixture(bool finish_all) {
    REQUIRE(s.Open(dir.path() + "/h.db").ok());
    auto e = s.InsertExperiment(TestGrid({"a", "b"}, 5), {}, false);  // a1..a5, b1..b5
    REQUIRE(e.ok());
    experiment = e->experiment_id;
    runs = e->queued;
    for (int i = 0; i < (finish_all ? 10 : 8); ++i) {
      REQUIRE(s.StartAttempt({runs[i], 1}, "w", {}, nullptr).ok());
      if (i == 3) {
        s.FinishAttempt({runs[i], 1}, "failed", 1, "exit 1", "", Json::object());
        continue;
      }
      std::vector<MetricPoint> pts;
      for (int step = 1; step <= 3; ++step)
        pts.push_back({step - 1, step, "train.loss", double(i + step), double(step)});
      REQUIRE(s.InsertMetrics({runs[i], 1}, pts).ok());
      s.FinishAttempt({runs[i], 1}, "succeeded", 0, "", "", {{"eval.ppl", 10.0 * i}});
    }
  }

  Json Panel(const std::string& panel, const std::string& query) {
    auto req = ParsePanelRequest(panel, query);
    REQUIRE(req.ok());
    auto r = PanelView(s.db(), experiment, *req);
    REQUIRE(r.ok());
    return *r;
  }
};

}  // namespace

TEST_CASE("panel sample: distinct positions, an equal share of every period dividing N") {
  const std::vector<int64_t> p = SampledPositions(100, 40);
  REQUIRE(p.size() == 40);
  CHECK(std::set<int64_t>(p.begin(), p.end()).size() == 40);
  for (int64_t d : {2, 4, 5, 10}) {
    std::map<int64_t, int> share;
    for (int64_t x : p) ++share[x % d];
    CHECK(share.size() == size_t(d));
    for (const auto& kv : share) CHECK(kv.second == 40 / d);
  }
  // As the dashboard's sample.js: k * 2654435761 mod N.
  CHECK(p[1] == 2654435761 % 100);
  CHECK(p[39] == (39 * 2654435761LL) % 100);
  // A sample as large as the grid is the whole grid.
  std::vector<int64_t> all = SampledPositions(7, 5000);
  std::sort(all.begin(), all.end());
  CHECK(all == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6});
  CHECK(SampledPositions(0, 10).empty());
}

TEST_CASE("panel requests: bad input is InvalidArgument naming the parameter") {
  auto msg = [](const std::string& panel, const std::string& q) {
    auto r = ParsePanelRequest(panel, q);
    REQUIRE(!r.ok());
    CHECK(r.status().code() == Status::Code::kInvalidArgument);
    return r.status().message();
  };
  CHECK(msg("heatmap", "") == "panel: expected overlay, arms or scatter, got \"heatmap\"");
  CHECK(msg("arms", "runs=10") == "key: expected a metric key like train.loss, got \"\"");
  CHECK(msg("arms", "key=train.loss&runs=5001") == "runs: expected 1..5000, got \"5001\"");
  CHECK(msg("arms", "key=train.loss&runs=0").rfind("runs: expected", 0) == 0);
  CHECK(msg("arms", "key=train.loss&runs=12x").rfind("runs: expected", 0) == 0);
  CHECK(msg("arms", "key=train.loss&runs=99999999999999999999").rfind("runs: expected", 0) == 0);
  CHECK(msg("arms", "key=train.loss'%20OR%201").rfind("key: expected", 0) == 0);
  CHECK(msg("scatter", "x=a..b&y=eval.ppl").rfind("x: expected a config key", 0) == 0);
  CHECK(msg("scatter", "x=train.%22lr&y=eval.ppl").rfind("x: expected a config key", 0) == 0);
  CHECK(msg("scatter", "x=seed").rfind("y: expected", 0) == 0);
  CHECK(msg("scatter", "x=seed&y=eval.ppl&by=a,b,c,d,e") == "by: at most 4 keys, got 5");
  CHECK(msg("scatter", "x=seed&y=eval.ppl&by=train.lr,%24x").rfind("by: expected", 0) == 0);
  CHECK(msg("overlay", "n=21") == "n: expected 1..20, got \"21\"");
  auto ok = ParsePanelRequest("scatter", "x=seed&y=eval.ppl&n=100&by=seed,arm,seed");
  REQUIRE(ok.ok());
  CHECK(ok->by == std::vector<std::string>{"seed", "arm"});
  CHECK(ok->n == 100);
}

TEST_CASE("arm panel: mean, mean of squares and n per arm and step, by config values") {
  Fixture f(true);
  // Every position sampled: arm a holds runs 0, 1, 2, 4 (3 failed, no points), b 5..9.
  Json a = f.Panel("arms", "key=train.loss&runs=5000");
  CHECK(a["sampled"] == 10);
  CHECK(a["positions"] == 10);
  CHECK(a["truncated"] == false);
  REQUIRE(a["rows"].size() == 6);  // 2 arms x 3 steps
  // Brute force: the mean of i + step over the arm's runs.
  auto expect = [](std::vector<int> is, int step) {
    double m = 0, sq = 0;
    for (int i : is) m += i + step, sq += double(i + step) * (i + step);
    return std::make_pair(m / is.size(), sq / is.size());
  };
  for (const Json& r : a["rows"]) {
    const bool in_a = r["arm"] == "a";
    const std::vector<int> is =
        in_a ? std::vector<int>{0, 1, 2, 4} : std::vector<int>{5, 6, 7, 8, 9};
    auto [mean, sq] = expect(is, r["step"].get<int>());
    CHECK(r["mean"].get<double>() == Approx(mean));
    CHECK(r["sq"].get<double>() == Approx(sq));
    CHECK(r["n"] == is.size());
  }
  // By seed: one run per (arm, seed) at each step; the group value is the config's.
  Json by = f.Panel("arms", "key=train.loss&runs=5000&by=seed");
  REQUIRE(by["rows"].size() == 27);  // 9 runs with points x 3 steps
  for (const Json& r : by["rows"]) {
    const int seed = r["g0"], i = (r["arm"] == "a" ? 0 : 5) + seed - 1;
    CHECK(r["mean"].get<double>() == Approx(i + r["step"].get<int>()));
    CHECK(r["n"] == 1);
  }
  // A sample of 4 positions (0, 1, 2, 3 mod 10: 2654435761 = 1 mod 10): runs 0, 1, 2, 3.
  Json four = f.Panel("arms", "key=train.loss&runs=4");
  CHECK(four["sampled"] == 4);
  REQUIRE(four["rows"].size() == 3);
  CHECK(four["rows"][0]["n"] == 3);
  CHECK(four["rows"][0]["mean"].get<double>() == Approx((1 + 2 + 3) / 3.0));
  CHECK(f.Panel("arms", "key=eval.nothing")["rows"].empty());
}

TEST_CASE("scatter and overlay panels; an unknown experiment is NotFound") {
  Fixture f(false);
  Json sc = f.Panel("scatter", "x=seed&y=eval.ppl&n=5000&by=arm");
  // Runs with an eval.ppl: 0, 1, 2, 4, 5, 6, 7 (3 failed; 8 and 9 are queued).
  REQUIRE(sc["rows"].size() == 7);
  std::map<double, Json> by_y;
  for (const Json& r : sc["rows"]) by_y[r["y"].get<double>()] = r;
  for (int i : {0, 1, 2, 4, 5, 6, 7}) {
    REQUIRE(by_y.count(10.0 * i));
    CHECK(by_y[10.0 * i]["x"] == i % 5 + 1);
    CHECK(by_y[10.0 * i]["arm"] == (i < 5 ? "a" : "b"));
    CHECK(by_y[10.0 * i]["g0"] == by_y[10.0 * i]["arm"]);  // config "arm" = the arm
  }
  // Overlay: no run is running, so succeeded first (by id), then failed, then queued.
  Json ov = f.Panel("overlay", "n=8");
  REQUIRE(ov["rows"].size() == 8);
  std::vector<int64_t> ids;
  for (const Json& r : ov["rows"]) ids.push_back(r["id"]);
  CHECK(ids == std::vector<int64_t>{f.runs[0], f.runs[1], f.runs[2], f.runs[4], f.runs[5],
                                    f.runs[6], f.runs[7], f.runs[3]});
  CHECK(ov["rows"][0]["keys"] == Json::array({"train.loss"}));
  CHECK(ov["rows"][0]["config"]["seed"] == 1);
  CHECK(ov["rows"][7]["status"] == "failed");
  CHECK(ov["rows"][7]["keys"] == Json::array());
  CHECK(f.Panel("overlay", "n=20")["rows"].size() == 10);

  auto req = ParsePanelRequest("overlay", "");
  REQUIRE(req.ok());
  CHECK(PanelView(f.s.db(), 999, *req).status().code() == Status::Code::kNotFound);
}

TEST_CASE("panel cache: a finished experiment's answers are kept until it changes") {
  Fixture f(false);
  PanelCache cache;
  int computed = 0;
  auto answer = [&](const std::string& key) {
    auto r = cache.Answer(f.s.db(), f.experiment, key, [&]() -> StatusOr<std::string> {
      ++computed;
      auto req = ParsePanelRequest("scatter", "x=seed&y=eval.ppl&n=5000");
      auto v = PanelView(f.s.db(), f.experiment, *req);
      if (!v.ok()) return v.status();
      return std::to_string((*v)["rows"].size());
    });
    REQUIRE(r.ok());
    return *r;
  };
  // Unfinished (runs 8 and 9 queued): computed on every read.
  CHECK(answer("k") == "7");
  CHECK(answer("k") == "7");
  CHECK(computed == 2);
  CHECK(cache.hits() == 0);
  // Finished: computed once, then from memory; another key is another answer.
  for (int i : {8, 9}) {
    REQUIRE(f.s.StartAttempt({f.runs[i], 1}, "w", {}, nullptr).ok());
    f.s.FinishAttempt({f.runs[i], 1}, "succeeded", 0, "", "", {{"eval.ppl", 1.0}});
  }
  CHECK(answer("k") == "9");
  CHECK(answer("k") == "9");
  CHECK(answer("other") == "9");
  CHECK(computed == 4);
  CHECK(cache.hits() == 1);
  // A change to what the panels read (a summary gone) moves the stamp: read again.
  REQUIRE(f.s.db()->Exec("DELETE FROM summaries WHERE run_id = " + std::to_string(f.runs[9])).ok());
  CHECK(answer("k") == "8");
  CHECK(computed == 5);
  CHECK(answer("k") == "8");
  CHECK(computed == 5);
}

TEST_CASE("panel routes: reads under the read policy; bad input is a 4xx") {
  Fixture f(true);
  CHECK(RequiredAccess("GET", "/api/v1/experiments/1/panels/arms?key=train.loss") == Access::kRead);
  CHECK(IsPooledRead("GET", "/api/v1/experiments/1/panels/scatter?x=seed&y=eval.ppl"));
  HttpApi::Options o;
  o.db_path = f.dir.path() + "/h.db";
  o.token = "tok";
  o.read_token = "viewer";
  o.open_reads = false;
  HttpApi api(o, nullptr);
  auto get = [&](const std::string& target, const std::string& auth = "Bearer viewer") {
    return api.Handle({"GET", target, auth, ""});
  };
  const std::string base = "/api/v1/experiments/" + std::to_string(f.experiment) + "/panels/";
  CHECK(get(base + "overlay", "").status == 401);
  CHECK(get(base + "overlay", "Bearer wrong").status == 401);
  auto ok = get(base + "arms?key=train.loss&runs=600&by=seed");
  REQUIRE(ok.status == 200);
  CHECK(Json::parse(ok.body)["rows"].size() == 27);
  CHECK(get(base + "arms?key=train.loss&runs=600&by=seed").body == ok.body);  // from memory
  auto bad = get(base + "arms?key=&runs=600");
  CHECK(bad.status == 400);
  CHECK(Json::parse(bad.body)["error"] == "key: expected a metric key like train.loss, got \"\"");
  CHECK(get(base + "scatter?x=seed&y=eval.ppl&n=-1").status == 400);
  CHECK(get(base + "nope").status == 400);
  CHECK(get(base + "overlay%00").status == 400);
  CHECK(get("/api/v1/experiments/999/panels/overlay").status == 404);
  CHECK(get("/api/v1/experiments/x/panels/overlay").status == 400);
  CHECK(get(base + "arms/extra?key=train.loss").status == 404);
}

// The sample is read first and runs looked up by (experiment_id, idx): with runs outside
// and the sample inside, a panel read every run against the whole sample (20 s at 10^5
// runs). Counted in SQLite VM steps (a progress callback every 1000), not in time.
TEST_CASE("panel reads look up the sample's runs, not every run against the sample") {
  TempDir dir;
  Store s;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  auto e = s.InsertExperiment(TestGrid({"a", "b"}, 2000), {}, false);
  REQUIRE(e.ok());
  int64_t ticks = 0;
  sqlite3_progress_handler(
      s.db()->raw(), 1000, [](void* n) { return ++*static_cast<int64_t*>(n), 0; }, &ticks);
  for (const char* q : {"x=seed&y=eval.ppl&n=200", "key=train.loss&runs=200"}) {
    ticks = 0;
    auto req = ParsePanelRequest(q[0] == 'x' ? "scatter" : "arms", q);
    REQUIRE(req.ok());
    REQUIRE(PanelView(s.db(), e->experiment_id, *req).ok());
    // 200 index lookups are a few hundred thousand steps at most; 4000 runs x 200 positions
    // are millions.
    CHECK(ticks < 500);
  }
  sqlite3_progress_handler(s.db()->raw(), 0, nullptr, nullptr);
}

}  // namespace headlab::coord
