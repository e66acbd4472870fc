#include "worker/outbox.h"

#include <vector>

#include <catch2/catch.hpp>

namespace headlab {
namespace {

Json Metrics(int64_t run, int64_t attempt, int64_t first, int64_t n) {
  Json pts = Json::array();
  for (int64_t s = first; s < first + n; ++s) pts.push_back(Json::array({s, s, "k", 1.0, 0.0}));
  return Json{{"run", run}, {"attempt", attempt}, {"points", pts}};
}

std::vector<std::string> Commands(const Outbox& o) {
  std::vector<std::string> c;
  o.ForEach([&](const std::string& cmd, const Json&) { c.push_back(cmd); });
  return c;
}

}  // namespace

TEST_CASE("Outbox keeps everything until acknowledged, in order") {
  Outbox o;
  o.Add("PROVENANCE", Json{{"run", 1}, {"attempt", 0}, {"fields", {{"a", 1}}}});
  o.Add("METRICS", Metrics(1, 0, 0, 3));  // seq 0..2
  o.Add("ARTIFACT", Json{{"run", 1}, {"attempt", 0}, {"seq", 0}});
  o.Add("METRICS", Metrics(1, 0, 3, 3));  // seq 3..5
  o.Add("PROVENANCE", Json{{"run", 1}, {"attempt", 0}, {"fields", {{"a", 1}, {"b", 2}}}});
  o.Add("DONE", Json{{"run", 1}, {"attempt", 0}, {"status", "succeeded"}});
  o.Add("METRICS", Metrics(2, 1, 0, 2));
  CHECK(o.size() == 7 - 1);  // the second PROVENANCE replaced the first
  CHECK(Commands(o) == std::vector<std::string>{"METRICS", "ARTIFACT", "METRICS", "PROVENANCE",
                                                "DONE", "METRICS"});
  CHECK(o.HasDone(Json(1), 0));
  CHECK(!o.HasDone(Json(2), 1));
  CHECK(o.DoneRefs() == Json::array({Json{{"run", 1}, {"attempt", 0}}}));

  // A partial METRICS ack drops only batches entirely at or below the seq.
  CHECK(o.Ack(Json(1), 0, "METRICS", 4) == 1);
  CHECK(o.Ack(Json(1), 0, "METRICS", 4) == 0);  // a duplicate ACK is harmless
  CHECK(o.Ack(Json(1), 0, "ARTIFACT", 7) == 0);
  CHECK(o.Ack(Json(1), 0, "ARTIFACT", 0) == 1);
  CHECK(o.Ack(Json(9), 0, "DONE", 0) == 0);      // unknown attempt
  CHECK(o.Ack(Json(2), 0, "METRICS", 10) == 0);  // same run, other attempt
  CHECK(o.size() == 4);

  // Resend after a reconnect sends what is left, in order.
  CHECK(Commands(o) == std::vector<std::string>{"METRICS", "PROVENANCE", "DONE", "METRICS"});

  // ACK of DONE forgets the attempt entirely.
  CHECK(o.Ack(Json(1), 0, "DONE", 0) == 3);
  CHECK(!o.HasDone(Json(1), 0));
  CHECK(o.size() == 1);
  CHECK(o.Ack(Json(2), 1, "METRICS", 1) == 1);
  CHECK(o.size() == 0);
}

TEST_CASE("Outbox keys string and integer run ids apart") {
  Outbox o;
  o.Add("DONE", Json{{"run", "1"}, {"attempt", 0}});
  CHECK(!o.HasDone(Json(1), 0));
  CHECK(o.HasDone(Json("1"), 0));
}

TEST_CASE("Outbox caps unacknowledged metric points, dropping the oldest batches") {
  Outbox o(/*max_metric_points=*/10);
  o.Add("METRICS", Metrics(1, 0, 0, 4));  // seq 0..3
  o.Add("ARTIFACT", Json{{"run", 1}, {"attempt", 0}, {"seq", 0}});
  o.Add("METRICS", Metrics(1, 0, 4, 4));  // seq 4..7
  CHECK(o.dropped_points() == 0);
  o.Add("METRICS", Metrics(1, 0, 8, 4));  // 12 > 10: the oldest batch goes
  CHECK(o.dropped_points() == 4);
  CHECK(Commands(o) == std::vector<std::string>{"ARTIFACT", "METRICS", "METRICS"});
  // ACKs release room.
  o.Ack(Json(1), 0, "METRICS", 11);
  o.Add("METRICS", Metrics(1, 0, 12, 10));
  CHECK(o.dropped_points() == 4);
  CHECK(o.size() == 2);
}

TEST_CASE("Outbox: ARTIFACT and ARTIFACT_DELETED of one seq are acknowledged apart") {
  Outbox o;
  o.Add("ARTIFACT", Json{{"run", 1}, {"attempt", 0}, {"seq", 3}});
  o.Add("ARTIFACT_DELETED", Json{{"run", 1}, {"attempt", 0}, {"seq", 3}, {"path", "/w/c"}});
  CHECK(o.Ack(Json(1), 0, "ARTIFACT", 3) == 1);
  CHECK(Commands(o) == std::vector<std::string>{"ARTIFACT_DELETED"});
  CHECK(o.Ack(Json(1), 0, "ARTIFACT_DELETED", 2) == 0);
  CHECK(o.Ack(Json(1), 0, "ARTIFACT_DELETED", 3) == 1);
  CHECK(o.size() == 0);
}

}  // namespace headlab
