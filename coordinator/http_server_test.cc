// The HTTP transport against raw sockets: what is refused before a body is read, the
// query pool, the connection cap. Each test starts an HttpServer on 127.0.0.1:0 over a
// read-only HttpApi (no loop).
#include "coordinator/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "coordinator/store.h"
#include "coordinator/test_util.h"

namespace headlab::coord {
namespace {

// The headers every request here carries: a Host the server answers to, a JSON body.
const std::string kHostJson = "Host: 127.0.0.1\r\nContent-Type: application/json\r\n";

using Clock = std::chrono::steady_clock;
constexpr const char* kRunaway =
    R"({"sql": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"})";

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A raw client connection with a receive timeout.
class Conn {
 public:
  explicit Conn(const std::string& addr, int timeout_ms = 5000) {
    size_t colon = addr.rfind(':');
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(uint16_t(std::stoi(addr.substr(colon + 1))));
    inet_pton(AF_INET, addr.substr(0, colon).c_str(), &sa.sin_addr);
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  }
  ~Conn() { ::close(fd_); }
  Conn(const Conn&) = delete;

  void Send(const std::string& bytes) {
    REQUIRE(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == ssize_t(bytes.size()));
  }
  // Reads until `needle` has arrived, the peer closes or the timeout; returns all read.
  std::string ReadUntil(const std::string& needle) {
    char buf[65536];
    while (got_.find(needle) == std::string::npos) {
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      got_.append(buf, size_t(n));
    }
    return got_;
  }
  // Returns true iff the peer has closed the connection (read returns 0 or an error
  // other than the timeout).
  bool PeerClosed() {
    char c;
    ssize_t n = ::recv(fd_, &c, 1, 0);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
  }

 private:
  int fd_ = -1;
  std::string got_;
};

// Status code of the first response in `raw`, 0 if there is none.
int StatusOf(const std::string& raw) {
  return raw.rfind("HTTP/1.1 ", 0) == 0 && raw.size() >= 12 ? std::stoi(raw.substr(9, 3)) : 0;
}

// One request with Connection: close; returns the status (0: no answer in time).
int Request(const std::string& addr, const std::string& method, const std::string& target,
            const std::string& body = "", const std::string& headers = "", int timeout_ms = 5000) {
  Conn c(addr, timeout_ms);
  c.Send(method + " " + target + " HTTP/1.1\r\n" + kHostJson + "Connection: close\r\n" + headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  return StatusOf(c.ReadUntil("\r\n\r\n"));
}

struct Fixture {
  TempDir dir;
  Store store;
  std::unique_ptr<HttpApi> api;
  std::unique_ptr<HttpServer> server;
  std::string addr;
  explicit Fixture(AccessPolicy policy = {"tok", "", true}, size_t max_connections = 64,
                   int threads = 2) {
    REQUIRE(store.Open(dir.path() + "/h.db").ok());
    HttpApi::Options o{dir.path() + "/h.db", policy.write_token, "", "test"};
    o.read_token = policy.read_token;
    o.open_reads = policy.open_reads;
    o.query_limits.time = std::chrono::milliseconds(1500);
    api = std::make_unique<HttpApi>(o, nullptr);
    server = std::make_unique<HttpServer>(api.get(), nullptr, policy, max_connections);
    REQUIRE(server->Listen("127.0.0.1:0").ok());
    server->Start(threads);
    addr = server->address();
  }
};

}  // namespace

TEST_CASE("a request that would be refused is answered from its head, its body unread") {
  Fixture f;
  // 50 MB announced, nothing sent: the token is checked on the head.
  {
    Conn c(f.addr, 3000);
    auto start = Clock::now();
    c.Send("POST /api/v1/experiments HTTP/1.1\r\n" + kHostJson +
           "Content-Length: 50000000\r\n\r\n");
    std::string r = c.ReadUntil("\r\n\r\n");
    CHECK(StatusOf(r) == 401);
    CHECK(SecondsSince(start) < 1.0);
    CHECK(c.ReadUntil("bearer token").find("bearer token") != std::string::npos);
  }
  // Over the limit for what it is: 413 at once, whatever the token.
  {
    Conn c(f.addr, 3000);
    c.Send("POST /api/v1/experiments HTTP/1.1\r\n" + kHostJson +
           "Authorization: Bearer tok\r\n"
           "Content-Length: 70000000\r\n\r\n");
    CHECK(StatusOf(c.ReadUntil("\r\n\r\n")) == 413);  // a write is at most 64 MiB
  }
  {
    Conn c(f.addr, 3000);
    c.Send("POST /api/v1/query HTTP/1.1\r\n" + kHostJson + "Content-Length: 2000000\r\n\r\n");
    CHECK(StatusOf(c.ReadUntil("\r\n\r\n")) == 413);  // a query is at most 1 MiB
  }
  // With the token and Expect: 100-continue the client is told to send the body.
  {
    Conn c(f.addr, 3000);
    std::string body = R"({"sql": "SELECT 41 + 1"})";
    c.Send("POST /api/v1/query HTTP/1.1\r\n" + kHostJson +
           "Expect: 100-continue\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n");
    CHECK(c.ReadUntil("\r\n\r\n").rfind("HTTP/1.1 100 Continue\r\n\r\n", 0) == 0);
    c.Send(body);
    CHECK(c.ReadUntil("[[42]]").find("[[42]]") != std::string::npos);
  }
  // A refused request with Expect: 100-continue never gets the go-ahead.
  {
    Conn c(f.addr, 3000);
    c.Send("POST /api/v1/runs/1/cancel HTTP/1.1\r\n" + kHostJson +
           "Expect: 100-continue\r\n"
           "Content-Length: 1000\r\n\r\n");
    CHECK(StatusOf(c.ReadUntil("\r\n\r\n")) == 401);
  }
  // A head that is not UTF-8 is bad input, not an internal error.
  CHECK(Request(f.addr, "GET", "/api/v1/runs/\xff\xfe") == 400);
}

TEST_CASE("runaway queries wait on their own pool; the rest of the API stays responsive") {
  Fixture f;  // two I/O threads, queries stopped after 1.5 s
  std::vector<std::thread> clients;
  std::atomic<int> answered{0}, limited{0};
  auto start = Clock::now();
  for (int i = 0; i < 8; ++i)
    clients.emplace_back([&] {
      Conn c(f.addr, 20000);
      c.Send("POST /api/v1/query HTTP/1.1\r\n" + kHostJson +
             "Connection: close\r\nContent-Length: " + std::to_string(std::strlen(kRunaway)) +
             "\r\n\r\n" + kRunaway);
      std::string r = c.ReadUntil("limit\"}");
      answered += StatusOf(r) != 0;
      limited += r.find("query exceeded the 1500 ms limit") != std::string::npos;
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let them all arrive
  double worst = 0;
  for (int i = 0; i < 10; ++i) {
    auto t = Clock::now();
    REQUIRE(Request(f.addr, "GET", "/api/v1/health") == 200);
    REQUIRE(Request(f.addr, "GET", "/api/v1/experiments") == 200);
    worst = std::max(worst, SecondsSince(t));
  }
  CHECK(worst < 0.5);
  for (auto& t : clients) t.join();
  // kQueryThreads at a time on the pool: all eight stopped by the limit, one batch after
  // another.
  CHECK(answered == 8);
  CHECK(limited == 8);
  CHECK(SecondsSince(start) > 1.5 * (8 / kQueryThreads) - 0.5);
}

TEST_CASE(
    "idle connections beyond the cap are closed, longest idle first; a new client is served") {
  Fixture f({"tok", "", true}, /*max_connections=*/8);
  std::vector<std::unique_ptr<Conn>> idle;
  for (int i = 0; i < 20; ++i) {
    idle.push_back(std::make_unique<Conn>(f.addr, 2000));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // a definite idle order
  }
  auto start = Clock::now();
  CHECK(Request(f.addr, "GET", "/api/v1/health") == 200);
  CHECK(SecondsSince(start) < 1.0);
  // The oldest idle connections were closed to make room; the newest are still open.
  CHECK(idle.front()->PeerClosed());
  CHECK(f.server->connections() <= 8);
  CHECK(f.server->evicted_connections() >= 13);
  // A connection in the middle of a request is never the one evicted.
  Conn busy(f.addr, 5000);
  busy.Send("POST /api/v1/query HTTP/1.1\r\n" + kHostJson +
            "Connection: close\r\nContent-Length: " + std::to_string(std::strlen(kRunaway)) +
            "\r\n\r\n" + kRunaway);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (int i = 0; i < 10; ++i) CHECK(Request(f.addr, "GET", "/api/v1/health") == 200);
  CHECK(busy.ReadUntil("limit\"}").find("1500 ms limit") != std::string::npos);
}

TEST_CASE("reads need the token when the policy closes them; the dashboard's cookie counts") {
  Fixture f({"tok", "viewer", false});
  CHECK(Request(f.addr, "GET", "/api/v1/health") == 200);
  CHECK(Request(f.addr, "GET", "/api/v1/experiments") == 401);
  CHECK(Request(f.addr, "POST", "/api/v1/query", R"({"sql": "SELECT 1"})") == 401);
  CHECK(Request(f.addr, "GET", "/api/v1/experiments", "", "Authorization: Bearer viewer\r\n") ==
        200);
  CHECK(Request(f.addr, "GET", "/api/v1/experiments", "", "Cookie: headlab_token=tok\r\n") == 200);
  CHECK(Request(f.addr, "POST", "/api/v1/query", R"({"sql": "SELECT 1"})",
                "Authorization: Bearer tok\r\n") == 200);
  CHECK(Request(f.addr, "POST", "/api/v1/runs/1/cancel", "", "Cookie: headlab_token=tok\r\n") ==
        401);
}

}  // namespace headlab::coord
