// The worker port attacked from outside (docs/BENCHMARKS.md, "Service"):
// a real coordinator (in-process Server on
// loopback ports) whose live simulated workers hold runs, while attackers forge
// identities, write to foreign attempts, forge DONE/METRICS/PROVENANCE/ARTIFACT and flood
// the port. Asserts that nothing is stored, that the live workers keep their leases and
// registrations, and how late the coordinator's heartbeats were. The figures are printed
// (docs/BENCHMARKS.md, "Service").
//
// The short form runs in `make test`; "[stress]" cases (20,000-run submit and cancel,
// longer floods) are hidden and run under the ctest label `stress`.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <thread>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "bench/sim_worker.h"
#include "cli/http_client.h"
#include "common/json.h"
#include "common/testing/temp_dir.h"
#include "common/wire.h"
#include "coordinator/db.h"
#include "coordinator/server.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::bench {
namespace {

using std::chrono::milliseconds;
using Seconds = std::chrono::duration<double>;

const char kToken[] = "worker-port-test-token";
const char kWorkerToken[] = "worker-port-test-worker-token";

// A coordinator on ephemeral loopback ports in a temp dir.
struct Coordinator {
  testing::TempDir dir{"headlab-worker-port"};
  coord::Server server;
  Coordinator() {
    coord::ServerOptions o;
    o.data_dir = dir.path();
    o.workers = "tcp://127.0.0.1:0";
    o.http = "127.0.0.1:0";
    o.token = kToken;
    o.worker_token = kWorkerToken;
    REQUIRE(server.Start(o).ok());
  }
  std::string url() const { return "http://" + server.http_address(); }
  int64_t Count(const std::string& sql) const {
    coord::Db db;
    REQUIRE(db.Open(server.db_path(), coord::Db::Mode::kReadOnly).ok());
    sqlite3_busy_timeout(db.raw(), 5000);
    coord::Stmt s = db.MustPrepare(sql);
    return s.Step() ? s.Int(0) : -1;
  }
  // POSTs a grid of `runs` no-op runs; returns the experiment id.
  int64_t Submit(int runs, double* seconds = nullptr) {
    Json seeds = Json::array();
    for (int i = 0; i < runs; ++i) seeds.push_back(i);
    Json grid = {{"name", "attacked"}, {"base", {{"kind", "noop"}}}, {"axes", {{"seed", seeds}}}};
    Json body = {{"file", "attacked.jsonc"}, {"text", grid.dump()}, {"rerun", true}};
    auto t0 = Clock::now();
    auto r = HttpClient(url(), kToken, std::chrono::seconds(600))
                 .Call("POST", "/api/v1/experiments", &body);
    if (seconds) *seconds = Seconds(Clock::now() - t0).count();
    REQUIRE(r.ok());
    REQUIRE((*r)["runs"] == runs);
    return (*r)["experiment"];
  }
};

// Live simulated workers holding one run each.
struct Fleet {
  zmq::context_t ctx;
  std::vector<std::unique_ptr<SimWorker>> sims;
  Fleet(const Coordinator& c, int n) {
    for (int i = 0; i < n; ++i) {
      SimWorker::Options o;
      o.endpoint = c.server.workers_endpoint();
      o.token = kWorkerToken;
      o.identity = "worker-live-" + std::to_string(i);
      o.name = o.identity;
      o.mode = SimWorker::Mode::kHold;
      sims.push_back(std::make_unique<SimWorker>(&ctx, o));
      sims.back()->Start();
    }
  }
  ~Fleet() {
    for (auto& s : sims) s->Stop();
  }
  bool AllHolding() const {
    for (const auto& s : sims)
      if (s->assignments().size() != 1) return false;
    return true;
  }
  // Checks that every worker kept its registration and its run.
  void CheckUndisturbed() const {
    for (const auto& s : sims) {
      INFO(s->error());
      CHECK(s->error().empty());
      CHECK(s->reregisters() == 0);
      CHECK(s->cancels() == 0);
      CHECK(s->assignments().size() == 1);
    }
  }
  double MaxHeartbeatGapS() const {
    Clock::duration g{};
    for (const auto& s : sims) g = std::max(g, s->max_heartbeat_gap());
    return Seconds(g).count();
  }
};

template <typename F>
bool Eventually(double seconds, F f) {
  auto deadline = Clock::now() + std::chrono::milliseconds(int64_t(seconds * 1000));
  while (!f()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return true;
}

// A raw peer of the worker port: sends whatever frames it is given.
struct Attacker {
  zmq::socket_t sock;
  Attacker(zmq::context_t* ctx, const std::string& endpoint, const std::string& routing_id = "")
      : sock(*ctx, zmq::socket_type::dealer) {
    if (!routing_id.empty()) sock.set(zmq::sockopt::routing_id, routing_id);
    sock.set(zmq::sockopt::linger, 0);
    sock.set(zmq::sockopt::sndhwm, 0);
    sock.set(zmq::sockopt::rcvhwm, 1000);
    sock.connect(endpoint);
  }
  void Send(const std::vector<std::string>& frames) {
    std::vector<zmq::const_buffer> bufs;
    for (const std::string& f : frames) bufs.push_back(zmq::buffer(f));
    zmq::send_multipart(sock, bufs);
  }
  // Returns the commands received within `ms`.
  std::vector<std::string> Drain(int ms) {
    std::vector<std::string> got;
    auto deadline = Clock::now() + milliseconds(ms);
    while (Clock::now() < deadline) {
      zmq::pollitem_t item{sock.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, milliseconds(10));
      std::vector<zmq::message_t> f;
      while (zmq::recv_multipart(sock, std::back_inserter(f), zmq::recv_flags::dontwait)) {
        if (f.size() >= 2) got.push_back(f[1].to_string());
        f.clear();
      }
    }
    return got;
  }
};

std::string Frame(const Json& j) { return j.dump(); }

// The writes a forger sends for attempt (run, attempt): DONE succeeded, one metric point,
// a provenance with a fake commit, a checkpoint at /etc/passwd.
struct Forgeries {
  Json ref, done, metrics, provenance, artifact;
  Forgeries(int64_t run, int attempt) : ref({{"run", run}, {"attempt", attempt}}) {
    done = ref;
    done.update({{"status", "succeeded"}, {"exit_code", 0}, {"summary", {{"eval.ppl", 1}}}});
    metrics = ref;
    metrics["points"] = {{0, 1, "train.loss", 0.1, 1.0}};
    provenance = ref;
    provenance["fields"] = {{"git_commit", "forged"}};
    artifact = ref;
    artifact.update({{"seq", 0},
                     {"kind", "checkpoint"},
                     {"path", "/etc/passwd"},
                     {"sha256", "x"},
                     {"bytes", 1},
                     {"step", 1}});
  }
};

// Everything a forgery could have written (worker-intruder holds the token: its READY
// registers it, and nothing else it sends may count).
int64_t Forged(const Coordinator& c) {
  return c.Count(
      "SELECT (SELECT count(*) FROM metrics) + (SELECT count(*) FROM artifacts) + "
      "(SELECT count(*) FROM provenance WHERE fields_json LIKE '%forged%') + "
      "(SELECT count(*) FROM summaries) + (SELECT count(*) FROM head_maps) + "
      "(SELECT count(*) FROM attempts WHERE status <> 'running') + "
      "(SELECT count(*) FROM workers WHERE id NOT LIKE 'worker-live-%' AND id <> "
      "'worker-intruder')");
}

double RssMb() {
  std::ifstream f("/proc/self/statm");
  long pages = 0, rss = 0;
  f >> pages >> rss;
  return double(rss) * double(sysconf(_SC_PAGESIZE)) / 1e6;
}

}  // namespace

TEST_CASE("worker port: forgeries store nothing and live runs keep their leases") {
  Coordinator c;
  const int kLive = 4;
  c.Submit(kLive);
  Fleet fleet(c, kLive);
  REQUIRE(Eventually(10, [&] { return fleet.AllHolding(); }));
  REQUIRE(c.Count("SELECT count(*) FROM attempts WHERE status='running'") == kLive);
  const std::string ep = c.server.workers_endpoint();
  std::vector<std::pair<int64_t, int>> held;
  for (const auto& s : fleet.sims) held.push_back({s->assignments()[0].run, 1});

  zmq::context_t ctx;
  int sent = 0;
  // 1. Forged identities: a live worker's id as the routing id (no longer trusted), and
  //    READY for a live id with a bad token, and with the token but without its key.
  Attacker spoof(&ctx, ep, "worker-live-0");
  Attacker other(&ctx, ep);
  for (auto& [run, attempt] : held) {
    Forgeries f(run, attempt);
    for (Attacker* a : {&spoof, &other}) {
      for (const std::string& key : {std::string(""), std::string(32, '0'), std::string(kToken)}) {
        a->Send({"HLW2", "DONE", key, Frame(f.done)});
        a->Send({"HLW2", "METRICS", key, Frame(f.metrics)});
        a->Send({"HLW2", "PROVENANCE", key, Frame(f.provenance)});
        a->Send({"HLW2", "ARTIFACT", key, Frame(f.artifact)});
        a->Send({"HLW2", "DISCONNECT", key, "{}"});
        a->Send({"HLW1", "DONE", Frame(f.done)});  // the old, unauthenticated framing
        sent += 6;
      }
    }
  }
  Json takeover = {{"id", "worker-live-1"},
                   {"name", "x"},
                   {"host", "x"},
                   {"pid", 1},
                   {"version", "HLW2"},
                   {"slots", 1},
                   {"devices", Json::array()},
                   {"running", Json::array()},
                   {"work_dir", "/"}};
  other.Send({"HLW2", "READY", "bad token", Frame(takeover)});
  other.Send({"HLW2", "READY", kWorkerToken, Frame(takeover)});
  takeover["session"] = std::string(32, 'a');
  other.Send({"HLW2", "READY", kWorkerToken, Frame(takeover)});
  sent += 3;

  // 2. Foreign attempts: a worker with the token registers properly, then writes to the
  //    live workers' attempts with its own valid session.
  SimWorker::Options o;
  o.endpoint = ep;
  o.token = kWorkerToken;
  o.identity = "worker-intruder";
  o.mode = SimWorker::Mode::kHold;
  Attacker intruder(&ctx, ep);
  Json ready = takeover;
  ready.erase("session");
  ready["id"] = "worker-intruder";
  intruder.Send({"HLW2", "READY", kWorkerToken, Frame(ready)});
  std::string key;
  REQUIRE(Eventually(5, [&] {
    zmq::pollitem_t item{intruder.sock.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, milliseconds(10));
    std::vector<zmq::message_t> f;
    while (zmq::recv_multipart(intruder.sock, std::back_inserter(f), zmq::recv_flags::dontwait)) {
      if (f.size() == 3 && f[1].to_string() == "WELCOME")
        key = Json::parse(f[2].to_string())["session"];
      f.clear();
    }
    return !key.empty();
  }));
  for (auto& [run, attempt] : held) {
    Forgeries f(run, attempt);
    Json reject = f.ref;
    reject["reason"] = "x";
    Json art = f.artifact;
    art["path"] = "/runs/" + std::to_string(run) + "-" + std::to_string(attempt) + "/c.pt";
    intruder.Send({"HLW2", "METRICS", key, Frame(f.metrics)});
    intruder.Send({"HLW2", "PROVENANCE", key, Frame(f.provenance)});
    intruder.Send({"HLW2", "ARTIFACT", key, Frame(art)});
    intruder.Send({"HLW2", "ACCEPT", key, Frame(f.ref)});
    intruder.Send({"HLW2", "REJECT", key, Frame(reject)});
    intruder.Send({"HLW2", "DONE", key, Frame(f.done)});
    sent += 6;
  }
  // Deep bodies under its own valid session (the crash of finding 1).
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  intruder.Send(
      {"HLW2", "PROVENANCE", key, R"({"run":1,"attempt":1,"fields":{"x":)" + deep + "}}"});
  intruder.Send({"HLW2", "HEARTBEAT", key, R"({"running":)" + deep + "}"});
  intruder.Send(
      {"HLW2", "DONE", key,
       R"({"run":1,"attempt":1,"status":"failed","exit_code":1,"summary":)" + deep + "}"});
  sent += 3;

  // 3. A flood: READYs with a bad token and 60 KiB bodies, unauthenticated messages and
  //    garbage frames from 20 connections, for 3 s (the liveness window).
  std::vector<std::unique_ptr<Attacker>> flood;
  for (int i = 0; i < 20; ++i) flood.push_back(std::make_unique<Attacker>(&ctx, ep));
  const std::string big = Frame({{"junk", std::string(60000, 'x')}});
  auto t0 = Clock::now();
  int64_t flood_msgs = 0, flood_bytes = 0;
  while (Clock::now() - t0 < std::chrono::seconds(3)) {
    for (auto& a : flood) {
      a->Send({"HLW2", "READY", "wrong", big});
      a->Send({"HLW2", "HEARTBEAT", std::string(32, 'f'), "{\"running\":[]}"});
      a->Send({"\xff\xfe", "\x01", "\x02", "\x03", "\x04"});
      a->Send({"HLW2", "READY", "wrong", deep});
      flood_msgs += 4;
      flood_bytes += int64_t(big.size() + deep.size() + 60);
    }
    std::this_thread::sleep_for(milliseconds(2));
  }
  double flood_s = Seconds(Clock::now() - t0).count();
  // Answers to unauthenticated peers are rate-limited: far fewer than the messages.
  size_t replies = 0;
  for (auto& a : flood) replies += a->Drain(50).size();
  std::this_thread::sleep_for(milliseconds(1500));  // two more heartbeat rounds after it

  CHECK(Forged(c) == 0);
  CHECK(c.Count("SELECT count(*) FROM attempts WHERE status='running' AND worker_id LIKE "
                "'worker-live-%' AND attempt=1") == kLive);
  CHECK(c.Count("SELECT count(*) FROM runs WHERE status='running'") == kLive);
  fleet.CheckUndisturbed();
  const double gap = fleet.MaxHeartbeatGapS();
  CHECK(gap < 2.0);  // the coordinator sends one per second: < 1 s late
  CHECK(replies < size_t(flood_msgs) / 10);
  auto w = HttpClient(c.url(), "", std::chrono::seconds(10)).Request("GET", "/api/v1/workers");
  REQUIRE(w.ok());
  CHECK(w->status == 200);
  CHECK_FALSE(c.server.loop_ended());
  std::printf(
      "worker port under attack: %d forged messages, %lld flood messages (%.0f MB) in "
      "%.1f s from 20 connections, %zu replies to them; stored 0; %d live runs kept "
      "their leases; max coordinator heartbeat gap %.3f s\n",
      sent, static_cast<long long>(flood_msgs), double(flood_bytes) / 1e6, flood_s, replies, kLive,
      gap);
}

TEST_CASE("worker port: a 20,000-run submit and cancel keep heartbeats on time", "[.][stress]") {
  Coordinator c;
  const int kLive = 8;
  c.Submit(kLive);
  Fleet fleet(c, kLive);
  REQUIRE(Eventually(10, [&] { return fleet.AllHolding(); }));
  for (auto& s : fleet.sims) s->ResetStats();
  const int kCycles = 2, kRuns = 20000;
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    double submit_s = 0;
    int64_t exp = c.Submit(kRuns, &submit_s);
    auto t0 = Clock::now();
    auto r = HttpClient(c.url(), kToken, std::chrono::seconds(600))
                 .Call("POST", "/api/v1/experiments/" + std::to_string(exp) + "/cancel");
    REQUIRE(r.ok());
    CHECK((*r)["count"] == kRuns);
    double cancel_s = Seconds(Clock::now() - t0).count();
    std::printf(
        "20,000-run grid, cycle %d: submit %.1f s, cancel %.1f s, max heartbeat gap "
        "%.3f s, RSS %.0f MB\n",
        cycle + 1, submit_s, cancel_s, fleet.MaxHeartbeatGapS(), RssMb());
  }
  std::this_thread::sleep_for(milliseconds(1500));
  fleet.CheckUndisturbed();
  CHECK(fleet.MaxHeartbeatGapS() < 2.0);
  CHECK(c.Count("SELECT count(*) FROM runs WHERE status='running'") == kLive);
  CHECK(c.Count("SELECT count(*) FROM runs WHERE status='cancelled'") == kCycles * kRuns);
  // Memory goes back after each request: what stays is the process's working set.
  CHECK(RssMb() < 1000);
}

}  // namespace headlab::bench
