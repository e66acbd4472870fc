// The worker port under attack (docs/BENCHMARKS.md, "Service"): sessions, attempt ownership,
// bounded parsing, protocol versions, worker ids, REJECT accounting, truthful resumes and throttled
// logs. Each case failed before its fix (the finding it covers is named).
#include <unistd.h>

#include <catch2/catch.hpp>

#include <optional>

#include "common/files.h"
#include "common/sha256.h"
#include "common/wire.h"
#include "coordinator/core_test_harness.h"

namespace headlab::coord {

using namespace core_harness;  // NOLINT: the harness is this file's vocabulary

namespace {

Json Ref(int64_t run, int attempt) { return {{"run", run}, {"attempt", attempt}}; }

Json Done(int64_t run, int attempt, const char* status = "succeeded") {
  return {{"run", run},
          {"attempt", attempt},
          {"status", status},
          {"exit_code", 0},
          {"error", ""},
          {"stderr_tail", ""},
          {"summary", {{"eval.ppl", 1.0}}}};
}

Json Metrics(int64_t run, int attempt) {
  return {{"run", run}, {"attempt", attempt}, {"points", {{0, 1, "train.loss", 0.5, 1.0}}}};
}

Json Artifact(int64_t run, int attempt, const std::string& path) {
  return {{"run", run},   {"attempt", attempt}, {"seq", 0},    {"kind", "checkpoint"},
          {"path", path}, {"sha256", "abc"},    {"bytes", 10}, {"step", 100}};
}

Json Provenance(int64_t run, int attempt) {
  return {{"run", run}, {"attempt", attempt}, {"fields", {{"git_commit", "forged"}}}};
}

// Nothing of a forgery may reach these tables.
int64_t Written(Harness& h) {
  return h.Count(
      "SELECT (SELECT count(*) FROM metrics) + (SELECT count(*) FROM artifacts) + "
      "(SELECT count(*) FROM provenance) + (SELECT count(*) FROM summaries) + "
      "(SELECT count(*) FROM attempts WHERE status <> 'running')");
}

// A harness with worker w1 registered and running the one run of a fresh experiment.
struct Running {
  Harness h;
  int64_t run = 0;
  Running() {
    run = h.Submit(TestGrid({"a"}, 1)).queued[0];
    REQUIRE(Of(h.Batch({{"w1", "READY", Ready(1)}}), "ASSIGN", "w1").size() == 1);
    h.Batch({{"w1", "ACCEPT", Ref(run, 1)}});
  }
  bool StillRunning() {
    return h.Count("SELECT count(*) FROM attempts WHERE status='running' AND run_id=" +
                   std::to_string(run)) == 1 &&
           h.core->workers().Find("w1") != nullptr;
  }
};

std::string Nested(int levels) {
  return std::string(size_t(levels), '[') + std::string(size_t(levels), ']');
}

}  // namespace

TEST_CASE("finding 1: deeply nested bodies under a live worker's session do not crash it") {
  Running r;
  const std::string deep = Nested(100000);
  const std::string key = r.h.sessions["w1"];
  const std::string run = std::to_string(r.run);
  auto out = r.h.RawBatch({
      {"w1", "PROVENANCE", key,
       R"({"run":)" + run + R"(,"attempt":1,"fields":{"x":)" + deep + "}}"},
      {"w1", "DONE", key,
       R"({"run":)" + run + R"(,"attempt":1,"status":"failed","exit_code":1,"summary":{"x":)" +
           deep + "}}"},
      {"w1", "METRICS", key, R"({"run":)" + run + R"(,"attempt":1,"points":[],"x":)" + deep + "}"},
      {"w1", "HEARTBEAT", key, R"({"running":)" + deep + "}"},
      {"w1", "READY", kToken, R"({"id":"w1","devices":)" + deep + "}"},
      {"w1", "ARTIFACT", key, deep},
  });
  CHECK(Written(r.h) == 0);
  CHECK(r.StillRunning());
  // Just inside the limit is still parsed (and here refused for its shape, not its depth).
  auto ok = ParseBody("PROVENANCE", R"({"a":)" + Nested(wire::kMaxBodyDepth - 1) + "}");
  CHECK(ok.ok());
  auto too_deep = ParseBody("PROVENANCE", R"({"a":)" + Nested(wire::kMaxBodyDepth) + "}");
  CHECK_FALSE(too_deep.ok());
  // Oversize bodies are refused before they are parsed.
  CHECK_FALSE(ParseBody("DONE", "{\"x\":\"" + std::string(wire::kMaxOtherBytes, 'a') + "\"}").ok());
  CHECK_FALSE(
      ParseBody("READY", "{\"x\":\"" + std::string(wire::kMaxReadyBytes, 'a') + "\"}").ok());
  CHECK_FALSE(ParseMetricsText(R"({"run":1,"attempt":1,"points":)" + Nested(100000) + "}").ok());
}

TEST_CASE("finding 2: messages without the session key are not trusted") {
  Running r;
  const std::string run = std::to_string(r.run);
  // A peer that knows the worker's id and attempt but not its key, on its own connection
  // or (were that possible) on the worker's.
  for (const std::string& route : {std::string("evil"), std::string("w1")}) {
    for (const std::string& key :
         {std::string(""), std::string("secret"), std::string(wire::kSessionKeyChars, '0')}) {
      auto out = r.h.RawBatch(
          {{route, "DONE", key, Done(r.run, 1).dump()},
           {route, "METRICS", key, Metrics(r.run, 1).dump()},
           {route, "PROVENANCE", key, Provenance(r.run, 1).dump()},
           {route, "ARTIFACT", key, Artifact(r.run, 1, InAttemptDir(r.run, 1, "c.pt")).dump()},
           {route, "DISCONNECT", key, "{}"}});
      CHECK(Of(out, "ACK").empty());
    }
  }
  CHECK(Written(r.h) == 0);
  CHECK(r.StillRunning());
  // Identity takeover: READY for the live id from another connection needs the session
  // key besides the token; without it nothing changes, not even the route.
  Json takeover = Ready(1, {Ref(r.run, 1)});
  takeover["id"] = "w1";
  auto out = r.h.RawBatch({{"evil", "READY", "wrong token", takeover.dump()},
                           {"evil", "READY", kToken, takeover.dump()}});
  CHECK(Of(out, "WELCOME").empty());
  CHECK(r.h.core->workers().Find("w1")->route == "w1");
  // The live worker's own messages still count.
  r.h.Batch({{"w1", "METRICS", Metrics(r.run, 1)}});
  CHECK(r.h.Count("SELECT count(*) FROM metrics") == 1);
  // Its owner moves it, proving the key: a reconnect on a new connection.
  takeover["session"] = r.h.sessions["w1"];
  out = r.h.RawBatch({{"w1-reconnected", "READY", kToken, takeover.dump()}});
  REQUIRE(Of(out, "WELCOME", "w1-reconnected").size() == 1);
  CHECK(r.h.core->workers().Find("w1")->route == "w1-reconnected");
  CHECK(Of(out, "CANCEL").empty());  // its attempt is adopted, not cancelled
  // The old key is dead.
  out = r.h.RawBatch({{"w1", "METRICS", r.h.sessions["w1"], Metrics(r.run, 1).dump()}});
  CHECK(Of(out, "REREGISTER", "w1").size() == 1);
  // A message with the current key from yet another connection moves the route (a
  // ZeroMQ-level reconnect keeps the key).
  r.h.sessions["w1-zmq"] = r.h.sessions["w1-reconnected"];
  r.h.Batch({{"w1-zmq", "HEARTBEAT", {{"running", {Ref(r.run, 1)}}}}});
  CHECK(r.h.core->workers().Find("w1")->route == "w1-zmq");
  CHECK(r.StillRunning());
}

TEST_CASE("finding 3: a worker cannot write to another worker's attempt") {
  Harness h;
  auto e = h.Submit(TestGrid({"a"}, 2));
  const int64_t r1 = e.queued[0], r2 = e.queued[1];
  h.Batch({{"w1", "READY", Ready(1)}});
  h.Batch({{"w2", "READY", Ready(1)}});
  CHECK(h.Count("SELECT count(*) FROM attempts WHERE status='running'") == 2);
  // w2 (a registered worker with its own valid session) writes to w1's attempt of r1.
  auto out = h.Batch({{"w2", "DONE", Done(r1, 1)},
                      {"w2", "METRICS", Metrics(r1, 1)},
                      {"w2", "ARTIFACT", Artifact(r1, 1, InAttemptDir(r1, 1, "c.pt"))},
                      {"w2", "PROVENANCE", Provenance(r1, 1)},
                      {"w2", "REJECT", {{"run", r1}, {"attempt", 1}, {"reason", "x"}}},
                      {"w2", "ACCEPT", Ref(r1, 1)}});
  CHECK(Of(out, "ACK").empty());
  CHECK(Written(h) == 0);
  CHECK(h.core->workers().Find("w1")->running.size() == 1);  // w1's slot is still taken
  // The owner's writes are stored; a checkpoint outside its attempt's directory is not.
  out = h.Batch({{"w1", "ARTIFACT", Artifact(r1, 1, "/etc/passwd")},
                 {"w1", "ARTIFACT", Artifact(r1, 1, InAttemptDir(r1, 1, "../2-1/c.pt"))},
                 {"w1", "ARTIFACT", Artifact(r1, 1, InAttemptDir(r2, 1, "c.pt"))}});
  CHECK(Of(out, "ACK", "w1").size() == 3);  // acknowledged (nothing to resend), not stored
  CHECK(h.Count("SELECT count(*) FROM artifacts") == 0);
  out = h.Batch({{"w1", "ARTIFACT", Artifact(r1, 1, InAttemptDir(r1, 1, "c.pt"))},
                 {"w1", "METRICS", Metrics(r1, 1)},
                 {"w1", "DONE", Done(r1, 1)}});
  CHECK(h.Count("SELECT count(*) FROM artifacts") == 1);
  CHECK(h.Count("SELECT count(*) FROM metrics") == 1);
  CHECK(h.Count("SELECT count(*) FROM runs WHERE status='succeeded'") == 1);
  // r2 is untouched and still w2's.
  CHECK(h.Count("SELECT count(*) FROM attempts WHERE status='running' AND worker_id='w2'") == 1);
}

TEST_CASE("finding 3: a head map is read only from inside the attempt's directory") {
  Harness h;
  TempDir wd;
  const int64_t run = h.Submit(TestGrid({"a"}, 1)).queued[0];
  Json ready = Ready(1);
  ready["work_dir"] = wd.path();
  h.Batch({{"w1", "READY", ready}});
  const std::string dir = wd.path() + "/runs/" + std::to_string(run) + "-1";
  REQUIRE(MakeDirs(dir).ok());
  const std::string rows = R"([{"layer":0,"head":1,"role":"streaming"}])";
  REQUIRE(WriteFileAtomic(wd.path() + "/outside.json", rows).ok());
  REQUIRE(::symlink((wd.path() + "/outside.json").c_str(), (dir + "/link.json").c_str()) == 0);
  Json art = {{"run", run},
              {"attempt", 1},
              {"seq", 0},
              {"kind", "aoh_head_maps"},
              {"path", dir + "/link.json"},
              {"sha256", Sha256Hex(rows)},
              {"bytes", rows.size()},
              {"step", 1}};
  h.Batch({{"w1", "ARTIFACT", art}});
  CHECK(h.Count("SELECT count(*) FROM head_maps") == 0);
  REQUIRE(WriteFileAtomic(dir + "/maps.json", rows).ok());
  art["seq"] = 1;
  art["path"] = dir + "/maps.json";
  h.Batch({{"w1", "ARTIFACT", art}});
  CHECK(h.Count("SELECT count(*) FROM head_maps") == 1);
}

TEST_CASE("finding 6: a worker of another protocol version is refused") {
  Harness h;
  h.Submit(TestGrid({"a"}, 1));
  Json old = Ready(1);
  old["version"] = "HLW1";
  auto out = h.Batch({{"w1", "READY", old}});
  auto refuse = Of(out, "REFUSE", "w1");
  REQUIRE(refuse.size() == 1);
  CHECK(refuse[0]["reason"].get<std::string>().find("HLW2") != std::string::npos);
  CHECK(Of(out, "ASSIGN").empty());
  CHECK(h.core->workers().size() == 0);
}

TEST_CASE("finding 6: worker ids are printable, and old binary ids are repaired") {
  Harness h;
  for (const std::string& id : {std::string("\0\x80\x01\x02\x03", 5), std::string("a b"),
                                std::string(200, 'x'), std::string("caf\xc3\xa9")}) {
    Json ready = Ready(1);
    ready["id"] = id;
    auto out = h.RawBatch({{std::string("\0\x80\x01\x02\x03", 5), "READY", kToken,
                            ready.dump(-1, ' ', false, Json::error_handler_t::replace)}});
    CHECK(Of(out, "WELCOME").empty());
  }
  CHECK(h.Count("SELECT count(*) FROM workers") == 0);
  // A database an older version wrote, holding a ZeroMQ-generated identity as a worker id.
  const std::string bad("\0\x80\x01\x02\x03", 5);
  {
    Stmt ins = h.store.db()->MustPrepare(
        "INSERT INTO workers(id, name, host, pid, version, slots, devices_json, state, "
        "first_seen_at, last_seen_at) VALUES (?, 'n', 'h', 1, 'v', 1, '[]', 'dead', 'x', 'x')");
    sqlite3_bind_blob(ins.raw(), 1, bad.data(), int(bad.size()), SQLITE_TRANSIENT);
    REQUIRE(ins.Exec().ok());
    Stmt ins2 = h.store.db()->MustPrepare(
        "INSERT INTO workers(id, name, host, pid, version, slots, devices_json, state, "
        "first_seen_at, last_seen_at) VALUES (?, 'n', 'h', 1, 'v', 1, '[]', 'dead', 'x', 'x')");
    ins2.Bind(1, std::string("\xff\xfeok", 4));
    REQUIRE(ins2.Exec().ok());
  }
  h.Reopen();
  Stmt q = h.store.db()->MustPrepare("SELECT id FROM workers ORDER BY id");
  std::vector<std::string> ids;
  while (q.Step()) ids.push_back(q.Text(0));
  CHECK(ids == std::vector<std::string>{"0x0080010203", "0xfffe6f6b"});
  CHECK_NOTHROW(Json(ids).dump());
}

TEST_CASE("finding 6: results with invalid UTF-8 are refused cleanly") {
  Running r;
  const std::string key = r.h.sessions["w1"];
  const std::string run = std::to_string(r.run);
  const std::string bad = "\xc3\x28";  // an invalid two-byte sequence
  auto out = r.h.RawBatch({
      {"w1", "METRICS", key,
       R"({"run":)" + run + R"(,"attempt":1,"points":[[0,1,")" + bad + R"(",1,1]]})"},
      {"w1", "DONE", key,
       R"({"run":)" + run + R"(,"attempt":1,"status":"failed","exit_code":1,"error":")" + bad +
           R"("})"},
      {"w1", "PROVENANCE", key,
       R"({"run":)" + run + R"(,"attempt":1,"fields":{"host":")" + bad + R"("}})"},
      {"w1", "DONE", key,
       R"({"run":)" + run + R"(,"attempt":1,"status":"failed","exit_code":1,"error":"\udc80"})"},
  });
  CHECK(Of(out, "ACK").empty());
  CHECK(Written(r.h) == 0);
  CHECK(r.StillRunning());
  // Everything the coordinator holds about its workers still serialises.
  CHECK_NOTHROW(r.h.core->WorkersJson(r.h.now).dump());
}

TEST_CASE("finding 6: a busy REJECT is requeued without counting toward max_attempts") {
  Harness h;
  const int64_t run = h.Submit(TestGrid({"a"}, 1, "t", /*max_attempts=*/1)).queued[0];
  h.Batch({{"w1", "READY", Ready(1)}});
  auto out =
      h.Batch({{"w1",
                "REJECT",
                {{"run", run}, {"attempt", 1}, {"reason", "no free slot"}, {"busy", true}}}});
  CHECK(h.Count("SELECT count(*) FROM runs WHERE status='queued' AND max_attempts=2") == 1);
  CHECK(h.Count("SELECT count(*) FROM attempts WHERE status='rejected'") == 1);
  // Not offered straight back: the slot stays taken until the worker's next HEARTBEAT.
  CHECK(Of(out, "ASSIGN").empty());
  out = h.Batch({{"w1", "HEARTBEAT", {{"running", Json::array()}}}});
  auto a = Of(out, "ASSIGN", "w1");
  REQUIRE(a.size() == 1);
  CHECK(a[0]["attempt"] == 2);
  // A REJECT for another reason still counts: the run's budget is spent.
  h.Batch({{"w1", "REJECT", {{"run", run}, {"attempt", 2}, {"reason", "cannot write manifest"}}}});
  CHECK(h.Count("SELECT count(*) FROM runs WHERE status='failed'") == 1);
}

TEST_CASE("finding 6: resume_json records the checkpoint the worker really resumed from") {
  Harness h;
  const int64_t run = h.Submit(TestGrid({"a"}, 1)).queued[0];
  h.Batch({{"w1", "READY", Ready(1)}});
  Json c100 = Artifact(run, 1, InAttemptDir(run, 1, "100.pt"));
  Json c200 = Artifact(run, 1, InAttemptDir(run, 1, "200.pt"));
  c200["seq"] = 1;
  c200["step"] = 200;
  c200["sha256"] = "def";
  h.Batch({{"w1", "ARTIFACT", c100}, {"w1", "ARTIFACT", c200}});
  h.now += wire::kLiveness + milliseconds(100);
  auto out = h.Batch({{"w2", "READY", Ready(1)}});
  auto a = Of(out, "ASSIGN", "w2");
  REQUIRE(a.size() == 1);
  Json want200 = {{"path", c200["path"]}, {"sha256", "def"}, {"step", 200}};
  Json want100 = {{"path", c100["path"]}, {"sha256", "abc"}, {"step", 100}};
  CHECK(a[0]["resume"] == want200);
  CHECK(a[0]["resume_fallbacks"] == Json::array({want100}));
  // Nothing is claimed before the worker says where it resumed from.
  CHECK(h.Count("SELECT count(*) FROM attempts WHERE attempt=2 AND resume_json='null'") == 1);
  // The latest was truncated on disk: the worker fell back to step 100 and says so.
  h.Batch({{"w2", "ACCEPT", {{"run", run}, {"attempt", 2}, {"resume", want100}}}});
  CHECK(
      h.Count(
          "SELECT count(*) FROM attempts WHERE attempt=2 AND resume_json LIKE '%\"step\":100%'") ==
      1);
  // A resume that is no checkpoint of the run is not recorded as one.
  h.Batch({{"w2",
            "ACCEPT",
            {{"run", run},
             {"attempt", 2},
             {"resume", {{"path", "/x"}, {"sha256", "f"}, {"step", 7}}}}}});
  CHECK(h.Count("SELECT count(*) FROM attempts WHERE attempt=2 AND resume_json='null'") == 1);
}

TEST_CASE("finding 4: expiries wait (at most a liveness window) for messages still queued") {
  Running r;
  // The loop fell behind: w1's heartbeats are still in the socket when its deadline passes.
  r.h.now += wire::kLiveness + milliseconds(100);
  REQUIRE(r.h.core->BeginBatch().ok());
  r.h.core->Tick(r.h.now, /*input_pending=*/true);
  REQUIRE(r.h.core->CommitBatch().ok());
  CHECK(r.StillRunning());
  // Caught up, with its heartbeat: nothing was lost.
  r.h.Batch({{"w1", "HEARTBEAT", {{"running", {Ref(r.run, 1)}}}}});
  CHECK(r.StillRunning());
  // A backlog that never clears holds expiries back for one more liveness window only.
  r.h.now += wire::kLiveness + milliseconds(100);
  for (int i = 0; i < 2; ++i) {
    REQUIRE(r.h.core->BeginBatch().ok());
    r.h.core->Tick(r.h.now, /*input_pending=*/true);
    REQUIRE(r.h.core->CommitBatch().ok());
    CHECK(r.StillRunning());
    r.h.now += milliseconds(wire::kLiveness.count() / 2 + 50);
  }
  REQUIRE(r.h.core->BeginBatch().ok());
  r.h.core->Tick(r.h.now, /*input_pending=*/true);
  REQUIRE(r.h.core->CommitBatch().ok());
  CHECK_FALSE(r.StillRunning());
}

TEST_CASE("finding 4: a large submit and cancel go in steps; a crash mid-submit leaves nothing") {
  Harness h;
  h.Batch({{"w1", "READY", Ready(1)}});
  const Clock::time_point past = Clock::now() - std::chrono::seconds(1);
  // Each step with a spent slice still inserts 64 runs: 300 runs take 5 steps.
  SubmitState s = Core::PlanSubmission(TestGrid({"a", "b"}, 150), {}, false);
  int steps = 0;
  std::optional<StatusOr<SubmitResult>> done;
  while (!done) {
    REQUIRE(h.core->BeginBatch().ok());
    done = h.core->SubmitStep(&s, past);
    h.Finish();
    ++steps;
    if (!done) {
      // Stored so far, but nothing is queued or dispatched before the experiment is complete.
      CHECK(h.Count("SELECT count(*) FROM attempts") == 0);
      CHECK(h.core->queued() == 0);
    }
  }
  REQUIRE(done->ok());
  CHECK(steps == 5);
  CHECK((*done)->runs == 300);
  CHECK(h.Count("SELECT count(*) FROM runs") == 300);
  CHECK(h.Count("SELECT count(*) FROM events WHERE kind='submit'") == 1);
  h.Batch();
  CHECK(h.Count("SELECT count(*) FROM attempts") == 1);  // dispatch started

  // A second submission interrupted after two steps (the coordinator killed): on restart
  // it is gone, runs and all; the first stays whole.
  SubmitState t = Core::PlanSubmission(TestGrid({"a"}, 200, "second"), {}, false);
  for (int i = 0; i < 2; ++i) {
    REQUIRE(h.core->BeginBatch().ok());
    REQUIRE_FALSE(h.core->SubmitStep(&t, past).has_value());
    h.Finish();
  }
  CHECK(h.Count("SELECT count(*) FROM runs") == 428);
  h.Reopen();
  CHECK(h.Count("SELECT count(*) FROM experiments") == 1);
  CHECK(h.Count("SELECT count(*) FROM runs") == 300);
  CHECK(h.core->queued() == 299);

  // Cancel in steps of 128 runs with a spent slice: 299 queued + 1 running.
  CancelState c;
  c.experiment = (*done)->experiment_id;
  std::optional<StatusOr<Json>> answer;
  steps = 0;
  while (!answer) {
    REQUIRE(h.core->BeginBatch().ok());
    answer = h.core->CancelExperimentStep(&c, past);
    h.Finish();
    ++steps;
  }
  REQUIRE(answer->ok());
  CHECK(steps == 3);
  CHECK((**answer)["count"] == 300);
  CHECK(h.Count("SELECT count(*) FROM runs WHERE status='cancelled'") == 300);
  CHECK(h.core->queued() == 0);
  CancelState unknown;
  unknown.experiment = 99;
  REQUIRE(h.core->BeginBatch().ok());
  auto missing = h.core->CancelExperimentStep(&unknown, past);
  h.Finish();
  REQUIRE(missing.has_value());
  CHECK(missing->status().code() == Status::Code::kNotFound);
}

TEST_CASE("finding 4 and 6: floods are answered within a rate and logged with throttling") {
  Running r;
  const uint64_t lines_before = r.h.core->throttle().written();
  std::vector<std::tuple<std::string, std::string, std::string, std::string>> flood;
  const std::string big = Json{{"junk", std::string(60000, 'x')}}.dump();
  for (int i = 0; i < 5000; ++i) {
    std::string route = "attacker-" + std::to_string(i % 50);
    flood.push_back({route, "READY", "bad token", big});
    flood.push_back({route, "DONE", "", Done(r.run, 1).dump()});
    flood.push_back({route, "GARBAGE\xff", "", "\xff\xfe"});
  }
  auto out = r.h.RawBatch(flood);
  // Replies to peers that have not authenticated: at most the limiter's burst at one instant.
  CHECK(Of(out, "REFUSE").size() + Of(out, "REREGISTER").size() <= 100);
  // Log lines: a few per category and window, not one per message.
  CHECK(r.h.core->throttle().written() - lines_before <= 20);
  CHECK(r.h.core->throttle().suppressed() >= 14000);
  CHECK(Written(r.h) == 0);
  CHECK(r.StillRunning());
}

}  // namespace headlab::coord
