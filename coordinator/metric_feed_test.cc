#include "coordinator/metric_feed.h"

#include <catch2/catch.hpp>

#include "coordinator/store.h"
#include "coordinator/test_util.h"

namespace headlab::coord {

TEST_CASE("stream query: runs are parsed, bad ones named") {
  CHECK(ParseStreamRuns("runs=3,1,2").value() == std::set<int64_t>{1, 2, 3});
  CHECK(ParseStreamRuns("x=1&runs=7%2C8").value() == std::set<int64_t>{7, 8});
  CHECK(ParseStreamRuns("").status().message().find("runs is required") != std::string::npos);
  CHECK(ParseStreamRuns("runs=").status().code() == Status::Code::kInvalidArgument);
  CHECK(ParseStreamRuns("runs=1,abc").status().message().find("\"abc\"") != std::string::npos);
  CHECK(ParseStreamRuns("runs=0").status().code() == Status::Code::kInvalidArgument);
  CHECK(ParseStreamRuns("runs=1,,2").status().code() == Status::Code::kInvalidArgument);
  std::string many = "runs=1";
  for (size_t i = 2; i <= kMaxStreamRuns + 1; ++i) many += "," + std::to_string(i);
  CHECK(ParseStreamRuns(many).status().message().find("at most") != std::string::npos);
}

TEST_CASE("SSE frames: one event line, one data line of JSON, a blank line") {
  CHECK(SseFrame("hello", {{"a", "x\ny"}}) == "event: hello\ndata: {\"a\":\"x\\ny\"}\n\n");
  LivePoint p{4, 2, 9, 30, "train.loss", Json(1.5), 12.0};
  LivePoint q{4, 2, 10, 30, "eval.loss", Json(), 12.5};
  CHECK(PointsFrame({p, q}) ==
        "event: points\ndata: {\"points\":[[4,2,9,30,\"train.loss\",1.5,12.0],"
        "[4,2,10,30,\"eval.loss\",null,12.5]]}\n\n");
}

TEST_CASE("feed: subscribers get only their runs' points; unsubscribed ones nothing") {
  MetricFeed feed;
  CHECK(!feed.active());
  std::vector<LivePoint> a, b;
  int64_t ia = feed.Subscribe(
      {1}, [&](const std::vector<LivePoint>& p) { a.insert(a.end(), p.begin(), p.end()); });
  int64_t ib = feed.Subscribe(
      {1, 2}, [&](const std::vector<LivePoint>& p) { b.insert(b.end(), p.begin(), p.end()); });
  CHECK(feed.active());
  feed.Publish({{1, 1, 0, 0, "k", 1.0, 0}, {2, 1, 0, 0, "k", 2.0, 0}, {3, 1, 0, 0, "k", 3.0, 0}});
  CHECK(a.size() == 1);
  CHECK(b.size() == 2);
  feed.Unsubscribe(ia);
  feed.Publish({{1, 1, 1, 1, "k", 1.0, 0}});
  CHECK(a.size() == 1);
  CHECK(b.size() == 3);
  feed.Unsubscribe(ib);
  CHECK(!feed.active());
}

TEST_CASE("store: metric points reach the feed after commit, never after a rollback") {
  TempDir dir;
  Store s;
  MetricFeed feed;
  REQUIRE(s.Open(dir.path() + "/h.db").ok());
  s.SetMetricFeed(&feed);
  auto e = s.InsertExperiment(TestGrid({"a"}, 1), {}, false);
  REQUIRE(e.ok());
  AttemptRef ref{e->queued[0], 1};
  REQUIRE(s.StartAttempt(ref, "w", {}, nullptr).ok());
  std::vector<LivePoint> got;
  feed.Subscribe({ref.run}, [&](const std::vector<LivePoint>& p) {
    got.insert(got.end(), p.begin(), p.end());
  });

  REQUIRE(s.Begin().ok());
  REQUIRE(
      s.InsertMetrics(ref, {{0, 5, "train.loss", 2.5, 1.0}, {1, 5, "train.lr", std::nullopt, 1.0}})
          .ok());
  CHECK(got.empty());  // not durable yet
  REQUIRE(s.Commit().ok());
  REQUIRE(got.size() == 2);
  CHECK(got[0].run == ref.run);
  CHECK(got[0].attempt == 1);
  CHECK(got[0].step == 5);
  CHECK(got[0].value == 2.5);
  CHECK(got[1].value.is_null());

  REQUIRE(s.Begin().ok());
  REQUIRE(s.InsertMetrics(ref, {{2, 6, "train.loss", 2.0, 2.0}}).ok());
  s.Rollback();
  REQUIRE(s.Begin().ok());
  REQUIRE(s.Commit().ok());
  CHECK(got.size() == 2);
}

}  // namespace headlab::coord
