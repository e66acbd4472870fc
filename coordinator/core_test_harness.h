// Test-only: drives a Core one batch at a time with a fake clock (core_test.cc,
// core_wire_test.cc). Not linked into the daemon.
#pragma once

#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "common/wire.h"
#include "coordinator/core.h"
#include "coordinator/test_util.h"

namespace headlab::coord::core_harness {

using std::chrono::milliseconds;

inline constexpr char kToken[] = "secret";

// READY.work_dir of the test workers: their attempts write under /wd/runs/<run>-<attempt>/.
inline constexpr char kWorkDir[] = "/wd";

// READY; Harness::Batch fills in "id" (the route's name) when it is missing.
inline Json Ready(int slots, Json running = Json::array(), Json devices = Json::array()) {
  return {
      {"name", "w"},    {"host", "h"},        {"pid", 1},           {"version", wire::kProtocol},
      {"slots", slots}, {"devices", devices}, {"running", running}, {"work_dir", kWorkDir}};
}

// The path of a file attempt (run, attempt) of a test worker may report.
inline std::string InAttemptDir(int64_t run, int attempt, const std::string& name) {
  return std::string(kWorkDir) + "/runs/" + std::to_string(run) + "-" + std::to_string(attempt) +
         "/" + name;
}

// Drives a Core one batch at a time with a fake clock. Each test worker's connection
// (route) is named like the worker; Batch sends READY with the token and every other
// message with the session key of the route's last WELCOME.
struct Harness {
  TempDir dir;
  Store store;
  std::unique_ptr<Core> core;
  Clock::time_point now = Clock::now();
  std::map<std::string, std::string> sessions;  // route -> WELCOME.session

  Harness() { Reopen(); }
  void Reopen() {
    core.reset();
    store.Close();
    REQUIRE(store.Open(dir.path() + "/h.db").ok());
    core = std::make_unique<Core>(&store, kToken);
    core->Recover(now);
  }
  std::string AuthFor(const std::string& route, const std::string& cmd) {
    return cmd == wire::kReady ? std::string(kToken) : sessions[route];
  }
  // One message with the harness's auth (Raw: the caller's).
  void Handle(const std::string& route, const std::string& cmd, Json body) {
    if (cmd == wire::kReady && body.is_object() && !body.contains("id")) body["id"] = route;
    core->HandleMessage(route, cmd, AuthFor(route, cmd), body.dump(), now);
  }
  std::vector<OutMessage> Finish() {
    core->Tick(now);
    REQUIRE(core->CommitBatch().ok());
    std::vector<OutMessage> out = core->TakeOutbox();
    for (const OutMessage& m : out)
      if (m.command == wire::kWelcome) sessions[m.identity] = Json::parse(m.body)["session"];
    return out;
  }
  // One batch: the messages, then Tick; returns what would be sent.
  std::vector<OutMessage> Batch(std::vector<std::tuple<std::string, std::string, Json>> msgs = {}) {
    REQUIRE(core->BeginBatch().ok());
    for (auto& [route, cmd, body] : msgs) Handle(route, cmd, body);
    return Finish();
  }
  // One batch of messages with raw auth frames and bodies: (route, command, auth, body).
  std::vector<OutMessage> RawBatch(
      const std::vector<std::tuple<std::string, std::string, std::string, std::string>>& msgs) {
    REQUIRE(core->BeginBatch().ok());
    for (auto& [route, cmd, auth, body] : msgs) core->HandleMessage(route, cmd, auth, body, now);
    return Finish();
  }
  SubmitResult Submit(const Grid& g) {
    REQUIRE(core->BeginBatch().ok());
    auto r = core->Submit(g, {}, false);
    REQUIRE(r.ok());
    REQUIRE(core->CommitBatch().ok());
    return *r;
  }
  int64_t Count(const std::string& sql) {
    Stmt q = store.db()->MustPrepare(sql);
    return q.Step() ? q.Int(0) : -1;
  }
};

inline std::vector<Json> Of(const std::vector<OutMessage>& out, const std::string& cmd,
                            const std::string& to = "") {
  std::vector<Json> r;
  for (const OutMessage& m : out)
    if (m.command == cmd && (to.empty() || m.identity == to)) r.push_back(Json::parse(m.body));
  return r;
}

}  // namespace headlab::coord::core_harness
