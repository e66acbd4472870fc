// In-process loopback tests: a real Server on 127.0.0.1 ephemeral ports, a ZeroMQ DEALER
// as a fake worker and a minimal HTTP client.
#include "coordinator/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <thread>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "common/files.h"
#include "common/json.h"
#include "common/sha256.h"
#include "coordinator/test_util.h"

namespace headlab::coord {
namespace {

const char kToken[] = "test-token";
const char kWorkerToken[] = "test-worker-token";

struct Reply {
  int status = 0;
  std::string body;
  Json json() const { return Json::parse(body); }
};

// Returns a TCP socket connected to "ADDR:PORT" (IPv4).
int ConnectTo(const std::string& addr) {
  size_t colon = addr.rfind(':');
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(uint16_t(std::stoi(addr.substr(colon + 1))));
  inet_pton(AF_INET, addr.substr(0, colon).c_str(), &sa.sin_addr);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  return fd;
}

// One HTTP/1.1 request with Connection: close to "ADDR:PORT".
Reply Http(const std::string& addr, const std::string& method, const std::string& path,
           const std::string& body = "", const std::string& token = "") {
  int fd = ConnectTo(addr);
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!token.empty()) req += "Authorization: Bearer " + token + "\r\n";
  req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
  REQUIRE(::write(fd, req.data(), req.size()) == ssize_t(req.size()));
  std::string resp;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) resp.append(buf, size_t(n));
  ::close(fd);
  Reply r;
  REQUIRE(resp.size() > 12);
  r.status = std::stoi(resp.substr(9, 3));
  size_t hdr_end = resp.find("\r\n\r\n");
  r.body = hdr_end == std::string::npos ? "" : resp.substr(hdr_end + 4);
  return r;
}

// A fake worker: READY carries `id` (ZeroMQ names the connection), every later message
// the session key of its WELCOME.
struct Dealer {
  zmq::context_t ctx;
  zmq::socket_t sock{ctx, zmq::socket_type::dealer};
  std::string id;
  std::string token = kWorkerToken;
  std::string session;
  Dealer(const std::string& endpoint, const std::string& worker_id) : id(worker_id) {
    sock.set(zmq::sockopt::linger, 0);
    sock.set(zmq::sockopt::rcvtimeo, 5000);
    sock.connect(endpoint);
  }
  void Send(const std::string& cmd, Json body) {
    if (cmd == "READY" && !body.contains("id")) body["id"] = id;
    std::string text = body.dump();
    const std::string& auth = cmd == "READY" ? token : session;
    std::array<zmq::const_buffer, 4> frames = {zmq::str_buffer("HLW2"), zmq::buffer(cmd),
                                               zmq::buffer(auth), zmq::buffer(text)};
    REQUIRE(zmq::send_multipart(sock, frames));
  }
  // Receives until a message with `cmd` arrives (skipping HEARTBEATs etc.).
  Json Expect(const std::string& cmd) {
    for (int i = 0; i < 50; ++i) {
      std::vector<zmq::message_t> frames;
      auto got = zmq::recv_multipart(sock, std::back_inserter(frames));
      REQUIRE(got);
      REQUIRE(frames.size() == 3);
      CHECK(frames[0].to_string() == "HLW2");
      Json body = Json::parse(frames[2].to_string());
      if (frames[1].to_string() == "WELCOME") session = body["session"];
      if (frames[1].to_string() == cmd) return body;
    }
    FAIL("no " + cmd + " received");
    return nullptr;
  }
};

Json ReadyBody(int slots) {
  return {{"name", "fake"},
          {"host", "localhost"},
          {"pid", 42},
          {"version", "HLW2"},
          {"slots", slots},
          {"devices", Json::array()},
          {"running", Json::array()},
          {"work_dir", "/tmp/headlab-fake-worker"}};
}

const char kGrid[] = R"({
  // two arms x two seeds of the no-op run kind
  "name": "loopback",
  "base": {"kind": "noop"},
  "axes": {"seed": [1, 2]},
  "arms": {"base": {}, "treat": {"noop.duration_ms": 1}},
  "comparisons": [{"name": "t vs b", "baseline": "base", "treatment": "treat",
                   "metric": "eval.ppl", "stat": "ratio"}]
})";

std::string Fingerprint(const std::string& db) {
  std::string out;
  for (const std::string& f : {db, db + "-wal"}) {
    auto data = ReadFile(f);
    out += data.ok() ? Sha256Hex(*data) : "absent";
    out += " ";
  }
  return out;
}

struct Running {
  TempDir dir;
  Server server;
  Running() {
    ServerOptions o;
    o.data_dir = dir.path() + "/data";
    o.workers = "tcp://127.0.0.1:0";
    o.http = "127.0.0.1:0";
    o.token = kToken;
    o.worker_token = kWorkerToken;
    o.http_threads = 2;
    REQUIRE(server.Start(o).ok());
  }
};

}  // namespace

TEST_CASE("loopback: submit over HTTP, a fake worker runs the grid, results come back") {
  Running r;
  std::string http = r.server.http_address();
  REQUIRE(Http(http, "GET", "/api/v1/health").json()["ok"] == true);

  Json submit = {{"file", "loopback.jsonc"}, {"text", kGrid}, {"sets", Json::array()}};
  CHECK(Http(http, "POST", "/api/v1/experiments", submit.dump()).status == 401);
  CHECK(Http(http, "POST", "/api/v1/experiments", submit.dump(), "wrong").status == 401);

  // A bad grid: 400 with ExpandGrid's message, and the database files untouched.
  std::string before = Fingerprint(r.server.db_path());
  Json bad = {{"file", "bad.jsonc"}, {"text", R"({"name": "x", "base": {"model": {"heds": 2}}})"}};
  Reply br = Http(http, "POST", "/api/v1/experiments", bad.dump(), kToken);
  CHECK(br.status == 400);
  CHECK(br.json()["error"].get<std::string>().find("bad.jsonc") != std::string::npos);
  CHECK(Http(http, "POST", "/api/v1/experiments", "not json", kToken).status == 400);
  CHECK(Fingerprint(r.server.db_path()) == before);

  Json dry = submit;
  dry["dry_run"] = true;
  Reply d = Http(http, "POST", "/api/v1/experiments", dry.dump(), kToken);
  REQUIRE(d.status == 200);
  CHECK(d.json()["runs"] == 4);
  CHECK(d.json()["configs"].size() == 4);
  CHECK(Fingerprint(r.server.db_path()) == before);

  Reply s = Http(http, "POST", "/api/v1/experiments", submit.dump(), kToken);
  REQUIRE(s.status == 200);
  int64_t exp = s.json()["experiment"];
  CHECK(s.json()["runs"] == 4);

  Dealer w(r.server.workers_endpoint(), "worker-localhost-42");
  w.Send("READY", ReadyBody(1));  // one slot: ASSIGNs come one at a time
  Json welcome = w.Expect("WELCOME");
  CHECK(welcome["worker_id"] == "worker-localhost-42");
  const double ppl[] = {10, 20, 9, 24};  // base s1, base s2, treat s1, treat s2
  for (int done = 0; done < 4; ++done) {
    Json a = w.Expect("ASSIGN");
    int64_t run = a["run"];
    int attempt = a["attempt"];
    CHECK(attempt == 1);
    CHECK(a["experiment"] == exp);
    CHECK(a["config"]["kind"] == "noop");
    w.Send("ACCEPT", {{"run", run}, {"attempt", 1}});
    w.Send("METRICS",
           {{"run", run},
            {"attempt", 1},
            {"points", {{0, 1, "train.loss", 3.0, 1.5}, {1, 2, "train.loss", 2.0, 1.6}}}});
    CHECK(w.Expect("ACK")["seq"] == 1);
    w.Send("PROVENANCE", {{"run", run},
                          {"attempt", 1},
                          {"fields", {{"git_commit", "deadbeef"}, {"dataset_sha256", "d"}}}});
    w.Expect("ACK");
    int idx =
        int(a["config"]["seed"].get<int>() - 1) + (a["config"]["noop"]["duration_ms"] == 1 ? 2 : 0);
    w.Send("DONE", {{"run", run},
                    {"attempt", 1},
                    {"status", "succeeded"},
                    {"exit_code", 0},
                    {"error", ""},
                    {"stderr_tail", ""},
                    {"summary", {{"eval.ppl", ppl[idx]}}}});
    Json ack = w.Expect("ACK");
    CHECK(ack["what"] == "DONE");
    CHECK(ack["run"] == run);
  }

  Reply runs = Http(http, "GET", "/api/v1/experiments/" + std::to_string(exp) + "/runs");
  REQUIRE(runs.status == 200);
  REQUIRE(runs.json().size() == 4);
  for (const Json& run : runs.json()) {
    CHECK(run["status"] == "succeeded");
    CHECK(run["attempts"] == 1);
  }
  Reply res = Http(http, "GET", "/api/v1/experiments/" + std::to_string(exp) + "/results");
  REQUIRE(res.status == 200);
  Json c = res.json()["comparisons"][0];
  CHECK(c["n"] == 2);
  CHECK(c["mean"].get<double>() == Approx((0.9 + 1.2) / 2));

  int64_t run1 = runs.json()[0]["id"];
  Reply one = Http(http, "GET", "/api/v1/runs/" + std::to_string(run1));
  REQUIRE(one.status == 200);
  CHECK(one.json()["provenance"]["git_commit"] == "deadbeef");
  CHECK(one.json()["attempts"].size() == 1);
  Reply m =
      Http(http, "GET", "/api/v1/runs/" + std::to_string(run1) + "/metrics?key=train.loss&after=0");
  REQUIRE(m.status == 200);
  CHECK(m.json()["points"].size() == 1);
  CHECK(Http(http, "GET", "/api/v1/runs/999").status == 404);
  CHECK(Http(http, "GET", "/api/v1/nope").status == 404);
  Reply workers = Http(http, "GET", "/api/v1/workers");
  REQUIRE(workers.json().size() == 1);
  CHECK(workers.json()[0]["state"] == "alive");

  // Query: reads without a token, writes refused with 400 "read-only".
  // (Stored when the experiment finished, computed off the loop: within moments.)
  Reply q;
  for (int i = 0; i < 100; ++i) {
    q = Http(http, "POST", "/api/v1/query",
             Json({{"sql", "SELECT count(*) FROM paired_stats"}}).dump());
    if (q.status != 200 || q.json()["rows"][0][0] == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(q.status == 200);
  CHECK(q.json()["rows"][0][0] == 1);
  // The stored answer is served from then on, equal to the one computed before.
  Reply stored = Http(http, "GET", "/api/v1/experiments/" + std::to_string(exp) + "/results");
  REQUIRE(stored.status == 200);
  CHECK(stored.json()["stored"] == true);
  CHECK(stored.json()["comparisons"] == res.json()["comparisons"]);
  Reply fresh =
      Http(http, "GET", "/api/v1/experiments/" + std::to_string(exp) + "/results?recompute=1");
  REQUIRE(fresh.status == 200);
  CHECK(fresh.json()["stored"] == false);
  CHECK(fresh.json()["arms"] == stored.json()["arms"]);
  CHECK(Http(http, "GET", "/api/v1/experiments/" + std::to_string(exp) + "/results?recompute=yes")
            .status == 400);
  Reply wq = Http(http, "POST", "/api/v1/query", Json({{"sql", "DELETE FROM runs"}}).dump());
  CHECK(wq.status == 400);
  CHECK(wq.json()["error"].get<std::string>().find("read-only") == 0);

  // Cancel and retry.
  Reply rc = Http(http, "POST", "/api/v1/runs/" + std::to_string(run1) + "/cancel", "", kToken);
  CHECK(rc.status == 409);
  CHECK(Http(http, "POST", "/api/v1/runs/" + std::to_string(run1) + "/retry", "", kToken).status ==
        409);

  // Resubmission reuses every run.
  Reply again = Http(http, "POST", "/api/v1/experiments", submit.dump(), kToken);
  REQUIRE(again.status == 200);
  CHECK(again.json()["reused"] == 4);
  w.Send("DISCONNECT", Json::object());
}

TEST_CASE("a live stream delivers a run's metric points as server-sent events") {
  Running r;
  const std::string http = r.server.http_address();
  CHECK(Http(http, "GET", "/api/v1/stream").status == 400);
  CHECK(Http(http, "GET", "/api/v1/stream?runs=x").status == 400);
  Json submit = {{"file", "loopback.jsonc"}, {"text", kGrid}};
  REQUIRE(Http(http, "POST", "/api/v1/experiments", submit.dump(), kToken).status == 200);

  Dealer w(r.server.workers_endpoint(), "worker-localhost-43");
  w.Send("READY", ReadyBody(1));
  w.Expect("WELCOME");
  Json a = w.Expect("ASSIGN");
  const int64_t run = a["run"];
  w.Send("ACCEPT", {{"run", run}, {"attempt", 1}});

  // Open the stream (raw socket: the response never ends) and read its hello.
  int fd = ConnectTo(http);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const std::string req =
      "GET /api/v1/stream?runs=" + std::to_string(run) + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  REQUIRE(::write(fd, req.data(), req.size()) == ssize_t(req.size()));
  std::string got;
  auto read_until = [&](const std::string& needle) {
    char buf[4096];
    while (got.find(needle) == std::string::npos) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) return false;
      got.append(buf, size_t(n));
    }
    return true;
  };
  REQUIRE(read_until("event: hello"));
  CHECK(got.rfind("HTTP/1.1 200", 0) == 0);
  CHECK(got.find("Content-Type: text/event-stream") != std::string::npos);

  w.Send("METRICS", {{"run", run}, {"attempt", 1}, {"points", {{0, 7, "train.loss", 3.25, 1.5}}}});
  REQUIRE(read_until("event: points"));
  REQUIRE(read_until("\n\n"));
  const size_t data = got.find("data: ", got.find("event: points"));
  Json ev = Json::parse(got.substr(data + 6, got.find('\n', data) - data - 6));
  CHECK(ev["points"] ==
        Json::parse("[[" + std::to_string(run) + ",1,0,7,\"train.loss\",3.25,1.5]]"));
  ::close(fd);
  // The closed stream does not disturb the coordinator.
  w.Expect("ACK");
  CHECK(Http(http, "GET", "/api/v1/health").status == 200);
}

TEST_CASE("garbage at the ROUTER is logged and dropped; the coordinator keeps serving") {
  Running r;
  std::string ep = r.server.workers_endpoint();
  // Raw TCP bytes that are not ZMTP at all.
  {
    int fd = ConnectTo("127.0.0.1" + ep.substr(ep.rfind(':')));
    std::string junk = "GET / HTTP/1.0\r\n\r\n\xff\xff\xff\x00\x01garbage";
    junk.append(4096, '\x7f');
    ssize_t ignored = ::write(fd, junk.data(), junk.size());
    (void)ignored;
    ::close(fd);
  }
  Dealer g(ep, "garbage");
  auto send = [&](std::vector<std::string> frames) {
    std::vector<zmq::const_buffer> bufs;
    for (auto& f : frames) bufs.push_back(zmq::buffer(f));
    zmq::send_multipart(g.sock, bufs);
  };
  send({"x"});
  send({"HLW2"});
  send({"HLW2", "READY"});
  send({"HLW2", "READY", kWorkerToken, "{}", "extra"});
  send({"HLW3", "READY", kWorkerToken, ReadyBody(1).dump()});
  send({"HLW2", "READY", kWorkerToken, "{not json"});
  send({"HLW2", "READY", kWorkerToken, "[1,2,3]"});
  send({"HLW2", "READY", kWorkerToken, std::string(100000, '[')});
  send({"HLW2", "METRICS", "", "{\"run\": 1}"});
  send({"HLW2", "DONE", "", std::string(100000, 'x')});
  send({"HLW2", "\x01\x02", "", "{}"});
  send({"", "", "", "", ""});
  // A message without a session key is told to re-register.
  send({"HLW2", "HEARTBEAT", "", "{\"running\": []}"});
  g.Expect("REREGISTER");
  // A READY with the wrong token (or none) is refused.
  g.token = "wrong";
  g.Send("READY", ReadyBody(1));
  CHECK(g.Expect("REFUSE")["reason"] == "bad token");
  // So is one with the user's token: it writes over HTTP, the worker port wants its own.
  g.token = kToken;
  g.Send("READY", ReadyBody(1));
  CHECK(g.Expect("REFUSE")["reason"] == "bad token");
  // A worker of the previous protocol is refused in its own framing, so it exits with why.
  send({"HLW1", "READY", Json{{"token", kWorkerToken}}.dump()});
  {
    std::vector<zmq::message_t> frames;
    REQUIRE(zmq::recv_multipart(g.sock, std::back_inserter(frames)));
    REQUIRE(frames.size() == 3);
    CHECK(frames[0].to_string() == "HLW1");
    CHECK(frames[1].to_string() == "REFUSE");
    CHECK(Json::parse(frames[2].to_string())["reason"].get<std::string>().find("HLW2") !=
          std::string::npos);
  }
  // Still alive: a proper worker registers and HTTP answers.
  Dealer w(ep, "worker-ok");
  w.Send("READY", ReadyBody(1));
  w.Expect("WELCOME");
  CHECK(Http(r.server.http_address(), "GET", "/api/v1/health").status == 200);
  CHECK_FALSE(r.server.loop_ended());
}

TEST_CASE("a port in use is a clear error") {
  Running first;
  TempDir dir;
  Server second;
  ServerOptions o;
  o.data_dir = dir.path();
  o.workers = "tcp://127.0.0.1:0";
  o.http = first.server.http_address();
  o.token = kToken;
  o.worker_token = kWorkerToken;
  Status st = second.Start(o);
  CHECK(st.code() == Status::Code::kUnavailable);
  CHECK(st.message().find(o.http) != std::string::npos);
  Server third;
  o.http = "127.0.0.1:0";
  o.workers = first.server.workers_endpoint();
  st = third.Start(o);
  CHECK(st.code() == Status::Code::kUnavailable);
}

}  // namespace headlab::coord
