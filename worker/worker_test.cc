// Worker against a fake coordinator: an in-process ROUTER on an ephemeral loopback port,
// with the exec payload replaced by a /bin/sh script.
#include "worker/worker.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include <catch2/catch.hpp>
#include <zmq_addon.hpp>

#include "common/files.h"
#include "common/testing/temp_dir.h"

namespace headlab {
namespace {

using std::chrono::milliseconds;

// The payload: reads "mode" from the manifest's config and behaves accordingly.
constexpr const char* kScript = R"SH(#!/bin/sh
test -f "$1" || exit 9
echo "{\"ev\":\"provenance\",\"fields\":{\"cvd\":\"$CUDA_VISIBLE_DEVICES\",\"cvd_set\":\"${CUDA_VISIBLE_DEVICES+yes}\"}}"
mode=$(sed -n 's/.*"mode": *"\([a-z]*\)".*/\1/p' "$1")
case "$mode" in
  ok)
    for s in 0 1 2; do echo "{\"ev\":\"metric\",\"step\":$s,\"key\":\"train.loss\",\"value\":$s,\"t\":1}"; done
    echo '{"ev":"summary","values":{"eval.ppl":2.5}}'
    exit 0 ;;
  sleep)
    echo '{"ev":"metric","step":0,"key":"train.loss","value":1,"t":1}'
    sleep 30 ;;
  stubborn)
    trap '' TERM
    echo '{"ev":"metric","step":0,"key":"train.loss","value":1,"t":1}'
    sleep 30; sleep 30 ;;
  *)
    echo "bad mode" >&2; exit 4 ;;
esac
)SH";

struct Msg {
  std::string identity, command;
  Json body;
};

class FakeCoordinator {
 public:
  FakeCoordinator() : router_(ctx_, zmq::socket_type::router) {
    router_.set(zmq::sockopt::router_handover, 1);  // a reconnecting worker takes over its id
    router_.set(zmq::sockopt::linger, 0);
    router_.bind("tcp://127.0.0.1:*");
    endpoint_ = router_.get(zmq::sockopt::last_endpoint);
  }
  const std::string& endpoint() const { return endpoint_; }
  // While true, Next() sends HEARTBEATs to the worker, keeping it alive.
  bool keepalive = true;
  int heartbeats_seen = 0;
  Json last_heartbeat;

  // Returns the next message that is not a HEARTBEAT, or nullopt after `timeout`.
  std::optional<Msg> Next(milliseconds timeout = milliseconds(5000)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (keepalive && !identity_.empty() &&
          std::chrono::steady_clock::now() >= next_beat_) {
        Send(wire::kHeartbeat, Json::object());
        next_beat_ = std::chrono::steady_clock::now() + milliseconds(50);
      }
      zmq::pollitem_t item{router_.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, milliseconds(20));
      if (!(item.revents & ZMQ_POLLIN)) continue;
      std::vector<zmq::message_t> f;
      REQUIRE(zmq::recv_multipart(router_, std::back_inserter(f)));
      REQUIRE(f.size() == 4);
      REQUIRE(f[1].to_string() == "HLW1");
      Msg m{f[0].to_string(), f[2].to_string(), Json::parse(f[3].to_string())};
      identity_ = m.identity;
      if (m.command == wire::kHeartbeat) {
        ++heartbeats_seen;
        last_heartbeat = m.body;
        continue;
      }
      return m;
    }
    return std::nullopt;
  }
  // Returns the next non-heartbeat message, which must be `command`; an attempt's result
  // stream (METRICS, PROVENANCE) is skipped unless that is what is expected.
  Json Expect(const std::string& command) {
    std::optional<Msg> m = Next();
    while (m && command != m->command &&
           (m->command == wire::kMetrics || m->command == wire::kProvenance))
      m = Next();
    REQUIRE(m.has_value());
    INFO(m->command + " " + m->body.dump());
    REQUIRE(m->command == command);
    return m->body;
  }
  void Send(const std::string& command, const Json& body) {
    SendRaw({identity_, "HLW1", command, body.dump()});
  }
  void SendRaw(const std::vector<std::string>& frames) {
    std::vector<zmq::message_t> f;
    for (const std::string& s : frames) f.emplace_back(s);
    REQUIRE(zmq::send_multipart(router_, f));
  }
  void Assign(int64_t run, const std::string& mode, Json devices = nullptr) {
    Json body{{"run", run}, {"attempt", 0}, {"experiment", 1}, {"config", {{"mode", mode}}},
              {"resume", nullptr}};
    if (!devices.is_null()) body["devices"] = devices;
    Send(wire::kAssign, body);
  }
  const std::string& identity() const { return identity_; }
  // Expects READY and answers WELCOME; returns the READY body.
  Json Register() {
    Json ready = Expect(wire::kReady);
    Send(wire::kWelcome, Json::object());
    return ready;
  }

 private:
  zmq::context_t ctx_;
  zmq::socket_t router_;
  std::string endpoint_;
  std::string identity_;
  std::chrono::steady_clock::time_point next_beat_;
};

// A worker on its own thread, with a temp work dir and the script as payload.
class WorkerUnderTest {
 public:
  // `gpus` > 0 pretends this host has that many GPUs (one slot each).
  explicit WorkerUnderTest(const std::string& endpoint, int slots = 1, int gpus = 0) {
    REQUIRE(!dir.empty());
    std::string script = dir + "/exec.sh";
    REQUIRE(WriteFileAtomic(script, kScript, 0755).ok());
    WorkerOptions o;
    o.connection.endpoint = endpoint;
    o.connection.identity = "worker-test-" + std::to_string(::getpid());
    o.connection.heartbeat_interval = milliseconds(100);
    o.connection.liveness = milliseconds(1000);
    o.connection.reconnect_initial = milliseconds(50);
    o.connection.reconnect_max = milliseconds(200);
    o.attempt.cancel_grace = milliseconds(2000);
    o.token = "tok";
    o.name = "tester";
    o.work_dir = dir + "/work";
    o.inventory.devices.push_back(CpuDevice());
    o.slots = slots;
    o.slot_devices.assign(slots, "");
    if (gpus > 0) {
      o.inventory.devices.clear();
      o.slot_devices.clear();
      for (int i = 0; i < gpus; ++i) {
        Device d;
        d.index = i;
        d.kind = "cuda";
        d.name = "Fake GPU";
        o.inventory.devices.push_back(d);
        o.slot_devices.push_back(std::to_string(i));
      }
      o.inventory.has_gpu = true;
      o.slots = gpus;
    }
    o.exec_command = {"/bin/sh", script};
    o.host_provenance = Json{{"host", "test-host"}};
    worker = std::make_unique<Worker>(std::move(o));
    thread = std::thread([this] { rc = worker->Run(); });
  }
  // Waits for Run to return and returns its exit code.
  int Join() {
    thread.join();
    return rc;
  }
  ~WorkerUnderTest() {
    if (thread.joinable()) {
      worker->RequestStop();
      worker->RequestStop();
      thread.join();
    }
    worker.reset();
  }
  const testing::TempDir tmp{"headlab-worker-test"};  // removed after the worker stopped
  const std::string dir = tmp.path();
  std::unique_ptr<Worker> worker;
  std::thread thread;
  int rc = -1;
};

// Collects messages until DONE; returns them all (DONE last).
std::vector<Msg> UntilDone(FakeCoordinator& c) {
  std::vector<Msg> got;
  for (;;) {
    std::optional<Msg> m = c.Next();
    REQUIRE(m.has_value());
    got.push_back(*m);
    if (m->command == wire::kDone) return got;
  }
}

}  // namespace

TEST_CASE("Worker registers, runs an assignment, relays its results and stops cleanly") {
  FakeCoordinator c;
  WorkerUnderTest w(c.endpoint());
  Json ready = c.Expect(wire::kReady);
  CHECK(ready["token"] == "tok");
  CHECK(ready["name"] == "tester");
  CHECK(ready["version"] == "HLW1");
  CHECK(ready["slots"] == 1);
  CHECK(ready["pid"] == int64_t(::getpid()));
  REQUIRE(ready["devices"].size() == 1);
  CHECK(ready["devices"][0]["kind"] == "cpu");
  CHECK(ready["running"] == Json::array());
  CHECK(c.identity() == "worker-test-" + std::to_string(::getpid()));

  c.Send(wire::kWelcome, Json{{"worker_id", c.identity()}, {"heartbeat_ms", 100}});
  c.Assign(5, "ok");
  Json accept = c.Expect(wire::kAccept);
  CHECK(accept == Json{{"run", 5}, {"attempt", 0}});
  std::vector<Msg> got = UntilDone(c);
  std::vector<Json> points;
  Json provenance;
  for (const Msg& m : got) {
    if (m.command == wire::kMetrics)
      for (const Json& p : m.body["points"]) points.push_back(p);
    if (m.command == wire::kProvenance) provenance = m.body["fields"];
  }
  REQUIRE(points.size() == 3);
  for (int i = 0; i < 3; ++i) CHECK(points[i][0] == i);
  CHECK(provenance["host"] == "test-host");
  CHECK(provenance["worker"] == "tester");
  CHECK(provenance["cvd"] == "");          // CPU-only: CUDA_VISIBLE_DEVICES set and empty
  CHECK(provenance["cvd_set"] == "yes");
  const Json& done = got.back().body;
  CHECK(done["status"] == "succeeded");
  CHECK(done["exit_code"] == 0);
  CHECK(done["summary"]["eval.ppl"] == 2.5);
  CHECK(PathExists(w.dir + "/work/runs/5-0/manifest.json"));
  c.Send(wire::kAck, Json{{"run", 5}, {"attempt", 0}, {"what", "DONE"}});

  // A failing payload is reported, and the worker keeps going.
  c.Assign(6, "bogus");
  c.Expect(wire::kAccept);
  Json failed = UntilDone(c).back().body;
  CHECK(failed["status"] == "failed");
  CHECK(failed["error"] == "exit 4");
  CHECK(failed["stderr_tail"] == "bad mode\n");
  c.Send(wire::kAck, Json{{"run", 6}, {"attempt", 0}, {"what", "DONE"}});

  // With everything acknowledged, a stop says goodbye at once.
  c.Next(milliseconds(100));
  auto t0 = std::chrono::steady_clock::now();
  w.worker->RequestStop();
  c.Expect(wire::kDisconnect);
  CHECK(w.Join() == 0);
  CHECK(std::chrono::steady_clock::now() - t0 < milliseconds(500));
  CHECK(c.heartbeats_seen > 0);
}

TEST_CASE("Worker exits 2 on an endpoint ZeroMQ rejects") {
  WorkerUnderTest w("tcp://no-port");
  CHECK(w.Join() == 2);
}

TEST_CASE("Worker exits 1 when the coordinator refuses it") {
  FakeCoordinator c;
  WorkerUnderTest w(c.endpoint());
  c.Expect(wire::kReady);
  c.Send(wire::kRefuse, Json{{"reason", "bad token"}});
  CHECK(w.Join() == 1);
}

TEST_CASE("Worker cancels on CANCEL, re-accepts a redelivered ASSIGN, rejects without a slot") {
  FakeCoordinator c;
  WorkerUnderTest w(c.endpoint());
  c.Register();
  c.Assign(6, "sleep");
  c.Expect(wire::kAccept);
  c.Assign(6, "sleep");             // at-least-once delivery: same attempt again
  c.Expect(wire::kAccept);
  c.Assign(7, "sleep");
  Json reject = c.Expect(wire::kReject);
  CHECK(reject["run"] == 7);
  CHECK(reject["reason"] == "no free slot");
  // Heartbeats report what runs here.
  c.last_heartbeat = Json::object();
  for (int i = 0; i < 20 && !c.last_heartbeat.contains("running"); ++i) c.Next(milliseconds(50));
  CHECK(c.last_heartbeat["running"] == Json::array({Json{{"run", 6}, {"attempt", 0}}}));

  auto t0 = std::chrono::steady_clock::now();
  c.Send(wire::kCancel, Json{{"run", 6}, {"attempt", 0}});
  Json done = UntilDone(c).back().body;
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
  CHECK(done["status"] == "cancelled");
  CHECK(done["run"] == 6);
  c.Send(wire::kCancel, Json{{"run", 6}, {"attempt", 0}});  // late duplicate: harmless
  c.Send(wire::kAck, Json{{"run", 6}, {"attempt", 0}, {"what", "DONE"}});
  c.Assign(7, "ok");                // the slot is free again
  c.Expect(wire::kAccept);
  CHECK(UntilDone(c).back().body["status"] == "succeeded");
}

TEST_CASE("Worker drops malformed messages and keeps working") {
  FakeCoordinator c;
  WorkerUnderTest w(c.endpoint());
  c.Register();
  const std::string id = c.identity();
  c.SendRaw({id, "garbage"});
  c.SendRaw({id, "HLW9", "ASSIGN", "{}"});
  c.SendRaw({id, "HLW1", "ASSIGN", "not json"});
  c.SendRaw({id, "HLW1", "ASSIGN", R"({"run":1,"attempt":0,"experiment":1})"});
  c.SendRaw({id, "HLW1", "ACK", R"({"run":1})"});
  c.SendRaw({id, "HLW1", "READY", "{}"});
  c.Assign(8, "ok");
  Json accept = c.Expect(wire::kAccept);  // nothing was sent in answer to the bad ones
  CHECK(accept["run"] == 8);
  CHECK(UntilDone(c).back().body["status"] == "succeeded");
}

TEST_CASE("Worker reconnects after coordinator silence and resends unacknowledged results") {
  FakeCoordinator c;
  WorkerUnderTest w(c.endpoint());
  c.Register();
  c.Assign(9, "ok");
  c.Expect(wire::kAccept);
  std::vector<Msg> first = UntilDone(c);  // not acknowledged

  c.keepalive = false;  // go silent: the worker must give up on us and reconnect
  auto t0 = std::chrono::steady_clock::now();
  Json ready = c.Expect(wire::kReady);
  CHECK(std::chrono::steady_clock::now() - t0 >= milliseconds(900));
  // Finished, but its DONE is unacknowledged: listed so its lease holds until the resend.
  CHECK(ready["running"] == Json::array({Json{{"run", 9}, {"attempt", 0}}}));
  c.keepalive = true;
  c.Send(wire::kWelcome, Json::object());
  std::vector<Msg> resent = UntilDone(c);
  // Expected: everything again, except that only the newest PROVENANCE is kept.
  std::vector<Msg> expect;
  for (size_t i = 0; i < first.size(); ++i) {
    bool newer_provenance = false;
    for (size_t j = i + 1; j < first.size(); ++j)
      newer_provenance |= first[j].command == wire::kProvenance;
    if (first[i].command != wire::kProvenance || !newer_provenance) expect.push_back(first[i]);
  }
  REQUIRE(resent.size() == expect.size());
  for (size_t i = 0; i < expect.size(); ++i) {
    CHECK(resent[i].command == expect[i].command);
    CHECK(resent[i].body == expect[i].body);
  }

  // After the ACKs, the next reconnect resends nothing.
  c.Send(wire::kAck, Json{{"run", 9}, {"attempt", 0}, {"what", "DONE"}});
  c.Next(milliseconds(200));
  c.keepalive = false;
  CHECK(c.Expect(wire::kReady)["running"] == Json::array());
  c.keepalive = true;
  c.Send(wire::kWelcome, Json::object());
  CHECK(!c.Next(milliseconds(500)).has_value());

  // REREGISTER asks for READY again, once per loss of registration.
  c.Send(wire::kReregister, Json::object());
  c.Send(wire::kReregister, Json::object());
  c.Expect(wire::kReady);
  c.keepalive = true;
  CHECK(!c.Next(milliseconds(300)).has_value());
  // Alive but never WELCOMEd: READY again after a liveness period (1 s here).
  c.Expect(wire::kReady);
}

TEST_CASE("Worker reports running attempts in READY after a reconnect; stop requeues them") {
  FakeCoordinator c;
  WorkerUnderTest w(c.endpoint());
  c.Register();
  c.Assign(10, "sleep");
  c.Expect(wire::kAccept);
  c.Next(milliseconds(200));
  c.keepalive = false;
  Json ready = c.Expect(wire::kReady);
  CHECK(ready["running"] == Json::array({Json{{"run", 10}, {"attempt", 0}}}));
  c.keepalive = true;
  c.Send(wire::kWelcome, Json::object());

  // Stopping the worker ends the attempt without a DONE (the coordinator requeues it on
  // DISCONNECT), after resending its unacknowledged results once registered again (the
  // WELCOME may arrive after the stop).
  w.worker->RequestStop();
  bool metrics = false;
  for (;;) {
    std::optional<Msg> m = c.Next();
    REQUIRE(m.has_value());
    REQUIRE(m->command != wire::kDone);
    if (m->command == wire::kMetrics) {
      metrics = true;
      c.Send(wire::kAck, Json{{"run", 10}, {"attempt", 0}, {"what", "METRICS"},
                              {"seq", m->body["points"].back()[0]}});
    }
    if (m->command == wire::kProvenance)
      c.Send(wire::kAck, Json{{"run", 10}, {"attempt", 0}, {"what", "PROVENANCE"}, {"seq", 0}});
    if (m->command == wire::kDisconnect) break;
  }
  CHECK(metrics);
  CHECK(w.Join() == 0);
}

TEST_CASE("Worker: a second stop request kills attempts that ignore SIGTERM") {
  FakeCoordinator c;
  WorkerUnderTest w(c.endpoint());  // cancel grace 2 s
  c.Register();
  c.Assign(11, "stubborn");
  c.Expect(wire::kAccept);
  c.Expect(wire::kMetrics);         // the payload is up and ignoring SIGTERM
  auto t0 = std::chrono::steady_clock::now();
  w.worker->RequestStop();
  c.Next(milliseconds(200));
  w.worker->RequestStop();
  for (;;) {
    std::optional<Msg> m = c.Next();
    REQUIRE(m.has_value());
    if (m->command == wire::kDisconnect) break;
  }
  CHECK(w.Join() == 0);
  CHECK(std::chrono::steady_clock::now() - t0 < milliseconds(1500));
}

TEST_CASE("Worker runs each attempt on the GPU the coordinator picked") {
  FakeCoordinator c;
  WorkerUnderTest w(c.endpoint(), 1, /*gpus=*/3);
  Json ready = c.Register();
  CHECK(ready["slots"] == 3);
  CHECK(ready["devices"].size() == 3);
  auto provenance_of = [&](int64_t run) {
    for (;;) {
      std::optional<Msg> m = c.Next();
      REQUIRE(m.has_value());
      if (m->command == wire::kProvenance && m->body["run"] == run &&
          m->body["fields"].contains("cvd"))
        return m->body["fields"];
    }
  };
  c.Assign(1, "sleep", Json::array({2}));
  c.Expect(wire::kAccept);
  Json p = provenance_of(1);
  CHECK(p["cvd"] == "2");
  CHECK(p["cuda_visible_devices"] == "2");
  CHECK(p["devices"] == "cuda:2 Fake GPU");
  c.Assign(2, "sleep", Json::array({2}));
  CHECK(c.Expect(wire::kReject)["reason"] == "GPU 2 is busy");
  c.Assign(2, "sleep", Json::array({7}));
  CHECK(c.Expect(wire::kReject)["reason"] == "no GPU 7 on this worker");
  c.Assign(2, "sleep");  // no devices named: the first free GPU
  c.Expect(wire::kAccept);
  CHECK(provenance_of(2)["cvd"] == "0");
}

}  // namespace headlab
