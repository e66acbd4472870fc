// SimWorker against a fake coordinator (a ROUTER socket in the test): the message
// sequences of schema/protocol.md for each mode.
#include "bench/sim_worker.h"

#include <optional>
#include <zmq_addon.hpp>

#include "common/json.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::bench {
namespace {

struct Msg {
  std::string identity, command, auth;
  Json body;
};

// Receives the next message within `ms`, skipping HEARTBEATs if `skip_heartbeats`.
std::optional<Msg> TryNext(zmq::socket_t& router, int ms, bool skip_heartbeats = true) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    zmq::pollitem_t item{router.handle(), 0, ZMQ_POLLIN, 0};
    if (left.count() <= 0 || zmq::poll(&item, 1, left) == 0) return std::nullopt;
    std::vector<zmq::message_t> f;
    REQUIRE(zmq::recv_multipart(router, std::back_inserter(f)));
    REQUIRE(f.size() == 5);
    REQUIRE(f[1].to_string() == "HLW2");
    if (skip_heartbeats && f[2].to_string() == "HEARTBEAT") continue;
    return Msg{f[0].to_string(), f[2].to_string(), f[3].to_string(), Json::parse(f[4].to_string())};
  }
}

// Receives the next message that is not a HEARTBEAT (2 s limit).
Msg Next(zmq::socket_t& router) {
  auto m = TryNext(router, 2000);
  REQUIRE(m.has_value());
  return *m;
}

void SendTo(zmq::socket_t& router, const std::string& id, const std::string& cmd, const Json& b) {
  std::vector<zmq::const_buffer> f = {zmq::buffer(id), zmq::str_buffer("HLW2"), zmq::buffer(cmd)};
  std::string body = b.dump();
  f.push_back(zmq::buffer(body));
  REQUIRE(zmq::send_multipart(router, f));
}

template <typename F>
bool Eventually(F f) {
  for (int i = 0; i < 200 && !f(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return f();
}

Json Assign(int64_t run, int metrics) {
  return {{"run", run},
          {"attempt", 1},
          {"experiment", 1},
          {"config", {{"kind", "noop"}, {"noop", {{"duration_ms", 0}, {"metrics", metrics}}}}},
          {"resume", nullptr}};
}

// A fake coordinator: a ROUTER bound to an inproc endpoint, and options to reach it.
struct FakeCoordinator {
  explicit FakeCoordinator(const std::string& endpoint) {
    router.bind(endpoint);
    o.endpoint = endpoint;
  }
  zmq::context_t ctx;
  zmq::socket_t router{ctx, zmq::socket_type::router};
  SimWorker::Options o;
};

}  // namespace

TEST_CASE("sim worker: READY, noop and ingest runs, DISCONNECT") {
  FakeCoordinator fake("inproc://sim-worker-test");
  auto& ctx = fake.ctx;
  auto& router = fake.router;
  auto& o = fake.o;
  o.token = "secret";
  o.identity = "worker-sim-1";
  o.name = "sim1";
  o.batches = 3;
  o.batch_points = 10;
  o.window = 2;
  SimWorker w(&ctx, o);
  w.Start();

  Msg ready = Next(router);
  CHECK(ready.body["id"] == "worker-sim-1");
  CHECK(ready.command == "READY");
  CHECK(ready.auth == "secret");
  CHECK(ready.body["slots"] == 1);
  CHECK(ready.body["devices"].size() == 1);
  const std::string key(32, 'k');
  SendTo(router, ready.identity, "WELCOME",
         {{"worker_id", "worker-sim-1"}, {"heartbeat_ms", 1000}, {"session", key}});
  CHECK(Eventually([&] { return w.welcomed(); }));

  // No-op mode: ACCEPT, METRICS with config.noop.metrics points, DONE.
  SendTo(router, ready.identity, "ASSIGN", Assign(7, 3));
  Msg m = Next(router);
  CHECK(m.command == "ACCEPT");
  CHECK(m.auth == key);
  CHECK(m.body == Json({{"run", 7}, {"attempt", 1}}));
  m = Next(router);
  REQUIRE(m.command == "METRICS");
  REQUIRE(m.body["points"].size() == 3);
  CHECK(m.body["points"][2][0] == 2);  // seq
  CHECK(m.body["points"][2][2] == "train.loss");
  m = Next(router);
  CHECK(m.command == "DONE");
  CHECK(m.body["status"] == "succeeded");
  SendTo(router, ready.identity, "ACK",
         {{"run", 7}, {"attempt", 1}, {"what", "DONE"}, {"seq", -1}});
  CHECK(Eventually([&] { return w.runs_done() == 1; }));

  // Ingest mode: at most `window` batches in flight; DONE after the last ACK.
  w.set_mode(SimWorker::Mode::kIngest);
  SendTo(router, ready.identity, "ASSIGN", Assign(8, 30));
  CHECK(Next(router).command == "ACCEPT");
  m = Next(router);
  CHECK(m.command == "METRICS");
  CHECK(m.body["points"][0][0] == 0);
  m = Next(router);
  CHECK(m.body["points"][9][0] == 19);
  CHECK_FALSE(TryNext(router, 100).has_value());  // the window is full
  SendTo(router, ready.identity, "ACK",
         {{"run", 8}, {"attempt", 1}, {"what", "METRICS"}, {"seq", 19}});
  m = Next(router);
  CHECK(m.command == "METRICS");
  CHECK(m.body["points"][0][0] == 20);
  SendTo(router, ready.identity, "ACK",
         {{"run", 8}, {"attempt", 1}, {"what", "METRICS"}, {"seq", 29}});
  m = Next(router);
  CHECK(m.command == "DONE");
  CHECK(m.body["run"] == 8);
  CHECK(w.points_acked() == 30);

  w.Stop();
  CHECK(Next(router).command == "DISCONNECT");
  CHECK(w.error().empty());
}

TEST_CASE("sim worker: silent after accept sends nothing more") {
  FakeCoordinator fake("inproc://sim-worker-silent");
  auto& router = fake.router;
  auto& o = fake.o;
  o.token = "t";
  o.identity = "worker-sim-2";
  o.mode = SimWorker::Mode::kSilentAfterAccept;
  SimWorker w(&fake.ctx, o);
  w.Start();
  Msg ready = Next(router);
  SendTo(router, ready.identity, "ASSIGN", Assign(9, 0));
  CHECK(Next(router).command == "ACCEPT");
  auto hb = TryNext(router, 2000, false);
  REQUIRE(hb.has_value());
  CHECK(hb->command == "HEARTBEAT");
  CHECK(hb->body["running"] == Json::array({{{"run", 9}, {"attempt", 1}}}));
  CHECK(Eventually([&] { return w.silent(); }));
  CHECK(w.last_heartbeat() != Clock::time_point{});
  SendTo(router, ready.identity, "ASSIGN", Assign(10, 0));
  CHECK(Eventually([&] { return w.assignments().size() == 2; }));
  w.Stop();  // no DISCONNECT either
  CHECK_FALSE(TryNext(router, 100, false).has_value());
}

}  // namespace headlab::bench
