#include "coordinator/core.h"

#include <catch2/catch.hpp>

#include "common/wire.h"
#include "coordinator/core_test_harness.h"

namespace headlab::coord {

using namespace core_harness;  // NOLINT: the harness is this file's vocabulary

TEST_CASE("READY: right token -> WELCOME, wrong token -> REFUSE, unknown -> REREGISTER") {
  Harness h;
  auto out = h.Batch({{"w1", "READY", Ready(2)}});
  CHECK(Of(out, "WELCOME", "w1").size() == 1);
  // The token travels in the auth frame: a body that names it changes nothing.
  Json bad = Ready(2);
  bad["id"] = "w2";
  bad["token"] = kToken;
  out = h.RawBatch({{"w2", "READY", "nope", bad.dump()}});
  CHECK(Of(out, "REFUSE", "w2").size() == 1);
  CHECK(h.core->workers().Find("w2") == nullptr);
  out = h.Batch({{"w3", "HEARTBEAT", {{"running", Json::array()}}}});
  CHECK(Of(out, "REREGISTER", "w3").size() == 1);
  CHECK(h.Count("SELECT count(*) FROM workers") == 1);
  auto welcome = Of(h.Batch({{"w4", "READY", Ready(1)}}), "WELCOME", "w4");
  REQUIRE(welcome.size() == 1);
  CHECK(welcome[0]["worker_id"] == "w4");
  CHECK(welcome[0]["session"].get<std::string>().size() == wire::kSessionKeyChars);
  CHECK(welcome[0]["session"] != Json(h.sessions["w1"]));
  // The same connection READYing again (a slow WELCOME) keeps its key: what it sent
  // meanwhile still counts.
  const std::string key = h.sessions["w4"];
  welcome = Of(h.Batch({{"w4", "READY", Ready(1)}}), "WELCOME", "w4");
  REQUIRE(welcome.size() == 1);
  CHECK(welcome[0]["session"] == key);
  CHECK(h.core->workers().FindBySession(key) != nullptr);
}

TEST_CASE("dispatch: FIFO, one slot per GPU with its device index, ACK on ingestion") {
  Harness h;
  auto e = h.Submit(TestGrid({"a"}, 3));
  Json gpus = Json::array({{{"index", 0}, {"kind", "cuda"}, {"name", "H200"}},
                           {{"index", 1}, {"kind", "cuda"}, {"name", "H200"}}});
  auto out = h.Batch({{"g", "READY", Ready(8, Json::array(), gpus)}});
  auto assigns = Of(out, "ASSIGN", "g");
  REQUIRE(assigns.size() == 2);  // 2 GPUs -> 2 slots, not 8
  CHECK(assigns[0]["run"] == e.queued[0]);
  CHECK(assigns[0]["attempt"] == 1);
  CHECK(assigns[0]["devices"] == Json::array({0}));
  CHECK(assigns[1]["devices"] == Json::array({1}));
  CHECK(assigns[0]["config"]["kind"] == "noop");
  CHECK(assigns[0]["resume"].is_null());
  // The attempt rows were committed before ASSIGN left.
  CHECK(h.Count("SELECT count(*) FROM attempts WHERE status='running'") == 2);

  int64_t run = e.queued[0];
  Json metrics = {{"run", run},
                  {"attempt", 1},
                  {"points", {{0, 1, "train.loss", 2.5, 1.0}, {1, 2, "train.loss", 2.4, 2.0}}}};
  Json done = {
      {"run", run},  {"attempt", 1},      {"status", "succeeded"},         {"exit_code", 0},
      {"error", ""}, {"stderr_tail", ""}, {"summary", {{"eval.ppl", 7.5}}}};
  out = h.Batch({{"g", "ACCEPT", {{"run", run}, {"attempt", 1}}},
                 {"g", "METRICS", metrics},
                 {"g", "METRICS", metrics},
                 {"g", "DONE", done},
                 {"g", "DONE", done}});
  auto acks = Of(out, "ACK", "g");
  REQUIRE(acks.size() == 4);
  CHECK(acks[0]["what"] == "METRICS");
  CHECK(acks[0]["seq"] == 1);
  CHECK(acks[3]["what"] == "DONE");
  CHECK(h.Count("SELECT count(*) FROM metrics") == 2);
  CHECK(h.Count("SELECT count(*) FROM attempts WHERE status='succeeded'") == 1);
  // The freed GPU took the third run, on device 0 again.
  auto next = Of(out, "ASSIGN", "g");
  REQUIRE(next.size() == 1);
  CHECK(next[0]["run"] == e.queued[2]);
  CHECK(next[0]["devices"] == Json::array({0}));
}

TEST_CASE("a silent worker's attempt is lost and requeued as attempt+1 with resume") {
  Harness h;
  auto e = h.Submit(TestGrid({"a"}, 1));
  int64_t run = e.queued[0];
  auto out = h.Batch({{"w1", "READY", Ready(1)}});
  REQUIRE(Of(out, "ASSIGN", "w1").size() == 1);
  h.Batch({{"w1",
            "ARTIFACT",
            {{"run", run},
             {"attempt", 1},
             {"seq", 0},
             {"kind", "checkpoint"},
             {"path", InAttemptDir(run, 1, "100.pt")},
             {"sha256", "abc"},
             {"bytes", 10},
             {"step", 100}}}});
  // Heartbeats keep it alive past the liveness window.
  for (int i = 0; i < 4; ++i) {
    h.now += milliseconds(1000);
    h.Batch({{"w1", "HEARTBEAT", {{"running", {{{"run", run}, {"attempt", 1}}}}}}});
  }
  CHECK(h.Count("SELECT count(*) FROM attempts WHERE status='running'") == 1);
  // Then silence: dead after kLiveness; a second worker gets attempt 2 resuming at step 100.
  h.now += wire::kLiveness + milliseconds(100);
  out = h.Batch({{"w2", "READY", Ready(1)}});
  CHECK(h.Count("SELECT count(*) FROM attempts WHERE attempt=1 AND status='lost'") == 1);
  auto a = Of(out, "ASSIGN", "w2");
  REQUIRE(a.size() == 1);
  CHECK(a[0]["attempt"] == 2);
  CHECK(a[0]["resume"] ==
        Json({{"path", InAttemptDir(run, 1, "100.pt")}, {"sha256", "abc"}, {"step", 100}}));
  CHECK(h.core->workers().Find("w1") == nullptr);
  // w1 comes back: told to re-register, then told to cancel its stale attempt.
  out = h.Batch({{"w1", "HEARTBEAT", {{"running", {{{"run", run}, {"attempt", 1}}}}}}});
  CHECK(Of(out, "REREGISTER", "w1").size() == 1);
  out = h.Batch({{"w1", "READY", Ready(1, {{{"run", run}, {"attempt", 1}}})}});
  CHECK(Of(out, "CANCEL", "w1").size() == 1);
}

TEST_CASE("max_attempts bounds the requeues") {
  Harness h;
  h.Submit(TestGrid({"a"}, 1, "t", /*max_attempts=*/2));
  for (int i = 0; i < 3; ++i) {
    h.Batch({{"w" + std::to_string(i), "READY", Ready(1)}});
    h.now += wire::kLiveness + milliseconds(100);
    h.Batch();
  }
  CHECK(h.Count("SELECT count(*) FROM attempts") == 2);
  CHECK(h.Count("SELECT count(*) FROM runs WHERE status='failed'") == 1);
  CHECK(h.core->queued() == 0);
}

TEST_CASE("restart: running attempts keep running if their worker re-registers") {
  Harness h;
  auto e = h.Submit(TestGrid({"a"}, 2));
  auto out = h.Batch({{"w1", "READY", Ready(1)}, {"w2", "READY", Ready(1)}});
  REQUIRE(Of(out, "ASSIGN").size() == 2);
  REQUIRE(Of(out, "ASSIGN", "w1").size() == 1);
  const int64_t mine = Of(out, "ASSIGN", "w1")[0]["run"];
  const int64_t other = Of(out, "ASSIGN", "w2")[0]["run"];
  h.Reopen();  // like kill -9 and a restart: only the database survives
  CHECK(h.core->leases() == 2);
  out = h.Batch({{"w1", "HEARTBEAT", {{"running", {{{"run", mine}, {"attempt", 1}}}}}}});
  CHECK(Of(out, "REREGISTER", "w1").size() == 1);
  h.now += milliseconds(500);
  out = h.Batch({{"w1", "READY", Ready(1, {{{"run", mine}, {"attempt", 1}}})}});
  CHECK(Of(out, "CANCEL").empty());
  CHECK(Of(out, "ASSIGN").empty());  // w1's slot is still taken by its adopted attempt
  // w2 never comes back: its attempt is lost after the window and goes to w1 when free.
  for (int i = 0; i < 4; ++i) {
    h.now += milliseconds(1000);
    out = h.Batch({{"w1", "HEARTBEAT", {{"running", {{{"run", mine}, {"attempt", 1}}}}}}});
  }
  CHECK(h.Count("SELECT count(*) FROM attempts WHERE status='running'") == 1);
  CHECK(h.Count("SELECT count(*) FROM attempts WHERE status='lost'") == 1);
  out = h.Batch({{"w1",
                  "DONE",
                  {{"run", mine},
                   {"attempt", 1},
                   {"status", "succeeded"},
                   {"exit_code", 0},
                   {"summary", Json::object()}}}});
  auto a = Of(out, "ASSIGN", "w1");
  REQUIRE(a.size() == 1);
  CHECK(a[0]["run"] == other);
  CHECK(a[0]["attempt"] == 2);
  (void)e;
}

TEST_CASE("restart: a worker cannot adopt another worker's attempt") {
  Harness h;
  h.Submit(TestGrid({"a"}, 2));
  auto out = h.Batch({{"w1", "READY", Ready(1)}, {"w2", "READY", Ready(1)}});
  const int64_t of_w2 = Of(out, "ASSIGN", "w2").at(0)["run"];
  h.Reopen();
  // w1 claims w2's attempt while w2 is away: told to cancel it, the lease stays w2's.
  out = h.Batch({{"w1", "READY", Ready(1, {{{"run", of_w2}, {"attempt", 1}}})}});
  CHECK(Of(out, "CANCEL", "w1").size() == 1);
  out = h.Batch({{"w2", "READY", Ready(1, {{{"run", of_w2}, {"attempt", 1}}})}});
  CHECK(Of(out, "CANCEL", "w2").empty());
  h.Batch({{"w2",
            "DONE",
            {{"run", of_w2},
             {"attempt", 1},
             {"status", "succeeded"},
             {"exit_code", 0},
             {"summary", Json::object()}}}});
  CHECK(h.Count("SELECT count(*) FROM runs WHERE status='succeeded'") == 1);
}

TEST_CASE("cancel of a running run sends CANCEL; retry requeues") {
  Harness h;
  auto e = h.Submit(TestGrid({"a"}, 1));
  int64_t run = e.queued[0];
  h.Batch({{"w1", "READY", Ready(1)}});
  REQUIRE(h.core->BeginBatch().ok());
  auto c = h.core->CancelRun(run);
  REQUIRE(c.ok());
  REQUIRE(h.core->CommitBatch().ok());
  auto out = h.core->TakeOutbox();
  REQUIRE(Of(out, "CANCEL", "w1").size() == 1);
  out = h.Batch({{"w1",
                  "DONE",
                  {{"run", run},
                   {"attempt", 1},
                   {"status", "cancelled"},
                   {"exit_code", -15},
                   {"summary", nullptr}}}});
  CHECK(h.Count("SELECT count(*) FROM attempts WHERE status='cancelled'") == 1);
  REQUIRE(h.core->BeginBatch().ok());
  REQUIRE(h.core->RetryRun(run).ok());
  h.core->Tick(h.now);
  REQUIRE(h.core->CommitBatch().ok());
  auto a = Of(h.core->TakeOutbox(), "ASSIGN", "w1");
  REQUIRE(a.size() == 1);
  CHECK(a[0]["attempt"] == 2);
}

TEST_CASE("malformed bodies are dropped without effect") {
  Harness h;
  auto e = h.Submit(TestGrid({"a"}, 1));
  h.Batch({{"w1", "READY", Ready(1)}});
  REQUIRE(h.core->BeginBatch().ok());
  for (const char* body :
       {"", "{", "[]", "null", "42", "\"x\"", "{\"run\":\"1\"}", "{\"run\":1,\"attempt\":0}",
        "{\"run\":-1,\"attempt\":1}", "{\"run\":1,\"attempt\":1,\"points\":[[0]]}",
        "{\"run\":1,\"attempt\":1,\"points\":\"x\"}",
        "{\"run\":1,\"attempt\":1,\"status\":\"weird\",\"exit_code\":0}",
        "{\"running\":[{\"run\":\"a\"}]}", "\xff\xfe garbage"}) {
    for (const char* cmd : {"METRICS", "DONE", "HEARTBEAT", "ACCEPT", "REJECT", "ARTIFACT",
                            "PROVENANCE", "NOPE", "READY"})
      h.core->HandleMessage("w1", cmd, cmd == std::string("READY") ? kToken : h.sessions["w1"],
                            body, h.now);
  }
  REQUIRE(h.core->CommitBatch().ok());
  // DONE for an unknown run is acknowledged (the worker may forget it) and stores nothing.
  auto out =
      h.Batch({{"w1",
                "DONE",
                {{"run", 12345}, {"attempt", 1}, {"status", "succeeded"}, {"exit_code", 0}}}});
  CHECK(Of(out, "ACK", "w1").size() == 1);
  CHECK(h.Count("SELECT count(*) FROM metrics") == 0);
  CHECK(h.Count("SELECT count(*) FROM runs WHERE status='running'") == 1);
  CHECK(h.Count("SELECT count(*) FROM attempts") == 1);
  (void)e;
}

TEST_CASE("dispatch: a continuation waits for its parent, then gets its checkpoint in ASSIGN") {
  Harness h;
  auto p = h.Submit(TestGrid({"p"}, 1, "parent"));
  const int64_t parent = p.queued[0];
  Grid child = TestGrid({"c"}, 1, "child");
  child.runs[0].config["parent"] = {{"run", parent}, {"step", 0}};
  auto c = h.Submit(child);

  auto out = h.Batch({{"w1", "READY", Ready(2)}});
  auto assigns = Of(out, "ASSIGN", "w1");
  REQUIRE(assigns.size() == 1);  // the child stays queued beside a free slot
  CHECK(assigns[0]["run"] == parent);
  CHECK(h.Count("SELECT count(*) FROM runs WHERE status='queued' AND id=" +
                std::to_string(c.queued[0])) == 1);

  out = h.Batch({{"w1",
                  "ARTIFACT",
                  {{"run", parent},
                   {"attempt", 1},
                   {"seq", 0},
                   {"kind", "checkpoint"},
                   {"path", InAttemptDir(parent, 1, "20.pt")},
                   {"sha256", "abc"},
                   {"bytes", 10},
                   {"step", 20}}},
                 {"w1",
                  "DONE",
                  {{"run", parent},
                   {"attempt", 1},
                   {"status", "succeeded"},
                   {"exit_code", 0},
                   {"error", ""},
                   {"stderr_tail", ""},
                   {"summary", Json::object()}}}});
  assigns = Of(out, "ASSIGN", "w1");
  REQUIRE(assigns.size() == 1);
  CHECK(assigns[0]["run"] == c.queued[0]);
  CHECK(assigns[0]["resume"].is_null());
  CHECK(assigns[0]["parent"] == Json({{"run", parent},
                                      {"path", InAttemptDir(parent, 1, "20.pt")},
                                      {"sha256", "abc"},
                                      {"step", 20}}));
}

TEST_CASE("dispatch: a continuation of a missing parent fails without an attempt") {
  Harness h;
  Grid child = TestGrid({"c"}, 1, "orphan");
  child.runs[0].config["parent"] = {{"run", 4242}, {"step", 0}};
  auto c = h.Submit(child);
  auto out = h.Batch({{"w1", "READY", Ready(1)}});
  CHECK(Of(out, "ASSIGN", "w1").empty());
  CHECK(h.Count("SELECT count(*) FROM runs WHERE status='failed' AND error LIKE "
                "'%parent run 4242 does not exist%'") == 1);
  CHECK(h.Count("SELECT count(*) FROM attempts") == 0);
  CHECK(h.Count("SELECT count(*) FROM events WHERE kind='parent_failed'") == 1);
}

}  // namespace headlab::coord

namespace headlab::coord {

using namespace core_harness;  // NOLINT

// A finished experiment's results are stored once (computed on the loop
// without a sink, handed to the sink after the commit with one), and a run retried after
// that makes them stale.
TEST_CASE("finished experiments' results: stored once, or handed to the sink after the commit") {
  for (bool with_sink : {false, true}) {
    Harness h;
    std::vector<int64_t> handed;
    if (with_sink) h.core->SetFinishedSink([&](int64_t exp) { handed.push_back(exp); });
    auto e = h.Submit(TestGrid({"base", "treat"}, 1));
    h.Batch({{"w", "READY", Ready(2)}});
    const double ppl[] = {10, 12};
    std::vector<std::tuple<std::string, std::string, Json>> done;
    for (int i = 0; i < 2; ++i)
      done.push_back({"w",
                      "DONE",
                      {{"run", e.queued[i]},
                       {"attempt", 1},
                       {"status", "succeeded"},
                       {"exit_code", 0},
                       {"summary", {{"eval.ppl", ppl[i]}}}}});
    h.Batch({done[0]});
    CHECK(handed.empty());
    CHECK(h.Count("SELECT count(*) FROM results") == 0);  // not finished yet
    h.Batch({done[1]});
    if (with_sink) {
      CHECK(handed == std::vector<int64_t>{e.experiment_id});
      CHECK(h.Count("SELECT count(*) FROM results") == 0);  // the sink's thread computes
      continue;
    }
    CHECK(HasCurrentResults(h.store.db(), e.experiment_id));
    CHECK(h.Count("SELECT count(*) FROM paired_stats WHERE n = 1 AND abs(mean - 1.2) < 1e-9") == 1);
    // A later batch that finishes nothing computes nothing: the stored row stays as it is.
    const int64_t stored_at = h.Count("SELECT inputs FROM results");
    h.Batch();
    CHECK(h.Count("SELECT inputs FROM results") == stored_at);
  }
}

}  // namespace headlab::coord
