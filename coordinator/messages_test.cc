#include "coordinator/messages.h"

#include <catch2/catch.hpp>

namespace headlab::coord {

TEST_CASE("METRICS parses points and the highest seq") {
  auto m = ParseMetricsText(
      R"({"run": 3, "attempt": 2, "extra": {"x": [1, {"y": 2}]},
          "points": [[0, 10, "train.loss", 2.5, 1.25], [7, 11, "eval.ppl", null, 2],
                     [3, -1, "k", 4, 1e9]]})");
  REQUIRE(m.ok());
  CHECK(m->ref.run == 3);
  CHECK(m->ref.attempt == 2);
  REQUIRE(m->points.size() == 3);
  CHECK(m->points[0].key == "train.loss");
  CHECK(*m->points[0].value == 2.5);
  CHECK(m->points[0].time_s == 1.25);
  CHECK_FALSE(m->points[1].value);
  CHECK(m->points[1].time_s == 2.0);
  CHECK(m->points[2].step == -1);
  CHECK(*m->points[2].value == 4.0);
  CHECK(m->max_seq == 7);
  auto empty = ParseMetricsText(R"({"points": [], "attempt": 1, "run": 1})");
  REQUIRE(empty.ok());
  CHECK(empty->max_seq == -1);
}

TEST_CASE("bad METRICS bodies are refused with the field named") {
  for (const char* bad : {
           "",
           "{",
           "[]",
           "null",
           "7",
           R"({"run": 1, "attempt": 1})",
           R"({"run": "1", "attempt": 1, "points": []})",
           R"({"run": 0, "attempt": 1, "points": []})",
           R"({"run": 1, "attempt": 1.5, "points": []})",
           R"({"run": 1, "attempt": 1, "points": {}})",
           R"({"run": 1, "attempt": 1, "points": [1]})",
           R"({"run": 1, "attempt": 1, "points": [[0, 1, "k", 1]]})",
           R"({"run": 1, "attempt": 1, "points": [[0, 1, "k", 1, 2, 3]]})",
           R"({"run": 1, "attempt": 1, "points": [[-1, 1, "k", 1, 2]]})",
           R"({"run": 1, "attempt": 1, "points": [[0, 1.5, "k", 1, 2]]})",
           R"({"run": 1, "attempt": 1, "points": [[0, 1, "", 1, 2]]})",
           R"({"run": 1, "attempt": 1, "points": [[0, 1, 5, 1, 2]]})",
           R"({"run": 1, "attempt": 1, "points": [[0, 1, "k", "1", 2]]})",
           R"({"run": 1, "attempt": 1, "points": [[0, 1, "k", 1, null]]})",
           R"({"run": 1, "attempt": 1, "points": [[0, 1, "k", [1], 2]]})",
           R"({"run": 1, "attempt": 1, "points": [[0, 1, "k", 1, 2]]} trailing)",
       }) {
    INFO(bad);
    auto m = ParseMetricsText(bad);
    CHECK_FALSE(m.ok());
    CHECK(m.status().message().rfind("METRICS", 0) == 0);
  }
}

TEST_CASE("READY, DONE and ARTIFACT validation") {
  Json ready = {{"id", "worker-h-5"},
                {"name", "n"},
                {"host", "h"},
                {"pid", 5},
                {"version", "v"},
                {"slots", 2},
                {"work_dir", "/w"},
                {"devices", {{{"index", 1}, {"kind", "cuda"}}, {{"index", 0}, {"kind", "cpu"}}}},
                {"running", {{{"run", 4}, {"attempt", 2}}}}};
  auto r = ParseReady(ready);
  REQUIRE(r.ok());
  CHECK(r->cuda_devices == std::vector<int>{1});
  CHECK(r->running.size() == 1);
  Json bad = ready;
  bad["devices"][0]["kind"] = "tpu";
  CHECK_FALSE(ParseReady(bad).ok());
  bad = ready;
  bad.erase("slots");
  CHECK(ParseReady(bad).status().message() == "READY.slots: expected an integer");
  bad = ready;
  bad["work_dir"] = "relative";
  CHECK(ParseReady(bad).status().message() == "READY.work_dir: expected an absolute path");
  for (const char* id : {"", "a b", "tab\t", "\x7f"}) {
    bad = ready;
    bad["id"] = id;
    CHECK_FALSE(ParseReady(bad).ok());
  }
  CHECK(ParseReady(ready)->session.empty());
  ready["session"] = "k";
  CHECK(ParseReady(ready)->session == "k");

  Json done = {
      {"run", 1},        {"attempt", 1},         {"status", "failed"},          {"exit_code", 1},
      {"error", "boom"}, {"stderr_tail", "..."}, {"summary", {{"eval.ppl", 3}}}};
  REQUIRE(ParseDone(done).ok());
  done["summary"]["x"] = "str";
  CHECK_FALSE(ParseDone(done).ok());
  done["summary"] = nullptr;
  CHECK(ParseDone(done)->summary.empty());
  done["status"] = "exploded";
  CHECK_FALSE(ParseDone(done).ok());

  Json art = {{"run", 1},     {"attempt", 1},   {"seq", 0},   {"kind", "checkpoint"},
              {"path", "/p"}, {"sha256", "ab"}, {"bytes", 3}, {"step", 10}};
  REQUIRE(ParseArtifact(art).ok());
  art.erase("sha256");
  CHECK_FALSE(ParseArtifact(art).ok());
  CHECK_FALSE(ParseReject({{"run", 1}, {"attempt", 1}}).ok());
  CHECK(ParseReject({{"run", 1}, {"attempt", 1}, {"reason", "no GPU"}})->reason == "no GPU");
  CHECK_FALSE(ParseReject({{"run", 1}, {"attempt", 1}, {"reason", "x"}})->busy);
  CHECK(ParseReject({{"run", 1}, {"attempt", 1}, {"reason", "x"}, {"busy", true}})->busy);
  CHECK_FALSE(ParseReject({{"run", 1}, {"attempt", 1}, {"reason", "x"}, {"busy", 1}}).ok());
  CHECK(ParseAccept({{"run", 1}, {"attempt", 1}})->resume.is_null());
  Json resume = {{"path", "/c"}, {"sha256", "ab"}, {"step", 3}};
  CHECK(ParseAccept({{"run", 1}, {"attempt", 1}, {"resume", resume}})->resume == resume);
  CHECK_FALSE(ParseAccept({{"run", 1}, {"attempt", 1}, {"resume", {{"path", "/c"}}}}).ok());
}

TEST_CASE("PathInside compares normalised absolute paths") {
  CHECK(PathInside("/w/runs/1-1/c.pt", "/w/runs/1-1"));
  CHECK(PathInside("/w/runs/1-1/sub/../c.pt", "/w/runs/1-1/"));
  CHECK_FALSE(PathInside("/w/runs/1-1/../1-2/c.pt", "/w/runs/1-1"));
  CHECK_FALSE(PathInside("/w/runs/1-10/c.pt", "/w/runs/1-1"));
  CHECK_FALSE(PathInside("/w/runs/1-1", "/w/runs/1-1"));
  CHECK_FALSE(PathInside("/etc/passwd", "/w/runs/1-1"));
  CHECK_FALSE(PathInside("runs/1-1/c.pt", "/w/runs/1-1"));
  CHECK(PrintableBytes("worker-a-1") == "worker-a-1");
  CHECK(PrintableBytes(std::string("\0\x80\x01", 3)) == "0x008001");
}

}  // namespace headlab::coord
