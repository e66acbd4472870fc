#include "cli/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "cli/test_util.h"

using headlab::HttpClient;
using headlab::Json;
using headlab::Status;

namespace {

// A one-connection HTTP server on a raw loopback socket: accepts once, records the
// request, answers `response` (or nothing when empty: a server that hangs).
class TinyServer {
 public:
  explicit TinyServer(std::string response) : response_(std::move(response)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    REQUIRE(::listen(fd_, 4) == 0);
    socklen_t len = sizeof(addr);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~TinyServer() {
    thread_.join();
    ::close(fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string https_url() const { return "https://127.0.0.1:" + std::to_string(port_); }
  const std::string& request() const { return request_; }  // valid after the client returns

 private:
  void Serve() {
    int c = ::accept(fd_, nullptr, nullptr);
    if (c < 0) return;
    char buf[4096];
    while (true) {  // read the head, then Content-Length bytes of body
      ssize_t n = ::read(c, buf, sizeof(buf));
      if (n <= 0) break;
      request_.append(buf, size_t(n));
      size_t head = request_.find("\r\n\r\n");
      if (head == std::string::npos) continue;
      size_t cl = request_.find("Content-Length: ");
      size_t body = cl == std::string::npos ? 0 : std::stoul(request_.substr(cl + 16));
      if (request_.size() >= head + 4 + body) break;
    }
    if (response_.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(600));  // outlast the client
    } else {
      ::write(c, response_.data(), response_.size());
    }
    ::close(c);
  }

  std::string response_;
  int fd_ = -1;
  int port_ = 0;
  std::string request_;
  std::thread thread_;
};

std::string Response(int code, const std::string& body) {
  return "HTTP/1.1 " + std::to_string(code) +
         " X\r\nContent-Type: application/json\r\n"
         "Content-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

}  // namespace

TEST_CASE("GET returns the parsed JSON body") {
  TinyServer server(Response(200, R"({"ok": true, "version": "1"})"));
  HttpClient client(server.url(), "");
  auto r = client.Call("GET", "/api/v1/health");
  REQUIRE(r.ok());
  CHECK(r.value()["ok"] == true);
  CHECK(server.request().rfind("GET /api/v1/health HTTP/1.1\r\n", 0) == 0);
  CHECK(server.request().find("Authorization") == std::string::npos);
}

TEST_CASE("POST sends the JSON body and the bearer token") {
  TinyServer server(Response(200, R"({"experiment": 7, "runs": 6})"));
  HttpClient client(server.url() + "/", "s3cret");
  Json body = {{"sql", "SELECT 1"}};
  auto r = client.Call("POST", "/api/v1/query", &body);
  REQUIRE(r.ok());
  CHECK(r.value()["experiment"] == 7);
  const std::string& req = server.request();
  CHECK(req.rfind("POST /api/v1/query HTTP/1.1\r\n", 0) == 0);
  CHECK(req.find("Authorization: Bearer s3cret\r\n") != std::string::npos);
  CHECK(req.find("Content-Type: application/json\r\n") != std::string::npos);
  CHECK(req.substr(req.find("\r\n\r\n") + 4) == body.dump());
}

TEST_CASE("API errors map to Status codes with the server's message") {
  {
    TinyServer server(Response(400, R"({"error": "g.jsonc: $.axes.seed: empty axis"})"));
    auto r = HttpClient(server.url(), "t").Call("GET", "/x");
    REQUIRE(!r.ok());
    CHECK(r.status().code() == Status::Code::kInvalidArgument);
    CHECK(r.status().message() == "g.jsonc: $.axes.seed: empty axis");
  }
  {
    TinyServer server(Response(404, R"({"error": "no run 99"})"));
    auto r = HttpClient(server.url(), "t").Call("GET", "/x");
    REQUIRE(!r.ok());
    CHECK(r.status().code() == Status::Code::kNotFound);
  }
  {
    TinyServer server(Response(401, R"({"error": "missing token"})"));
    auto r = HttpClient(server.url(), "").Call("GET", "/x");
    REQUIRE(!r.ok());
    CHECK(r.status().code() == Status::Code::kPermissionDenied);
  }
  {
    TinyServer server(Response(500, "not json"));
    auto r = HttpClient(server.url(), "").Call("GET", "/x");
    REQUIRE(!r.ok());
    CHECK(r.status().code() == Status::Code::kInternal);
    CHECK(r.status().message().find("not json") != std::string::npos);
  }
}

TEST_CASE("An unreachable or silent coordinator is Unavailable naming the URL") {
  std::string url = headlab::DeadLoopbackUrl();
  auto r = HttpClient(url, "").Call("GET", "/api/v1/health");
  REQUIRE(!r.ok());
  CHECK(r.status().code() == Status::Code::kUnavailable);
  CHECK(r.status().message().find("cannot reach the coordinator at " + url) == 0);

  TinyServer silent("");
  auto t0 = std::chrono::steady_clock::now();
  auto s = HttpClient(silent.url(), "", std::chrono::milliseconds(200)).Call("GET", "/x");
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(!s.ok());
  CHECK(s.status().code() == Status::Code::kUnavailable);
  CHECK(took < 2.0);
}

TEST_CASE("URLs are parsed strictly") {
  auto u = headlab::ParseHttpUrl("http://127.0.0.1:8321/base/");
  REQUIRE(u.ok());
  CHECK(u->host == "127.0.0.1");
  CHECK(u->port == "8321");
  CHECK(u->base_path == "/base");
  CHECK(headlab::ParseHttpUrl("http://localhost")->port == "80");
  CHECK(headlab::ParseHttpUrl("http://[::1]:9")->host == "::1");
  CHECK(!headlab::ParseHttpUrl("http://[::1]:9")->tls);
  auto s = headlab::ParseHttpUrl("https://lab.example.org/headlab");
  REQUIRE(s.ok());
  CHECK(s->tls);
  CHECK(s->host == "lab.example.org");
  CHECK(s->port == "443");
  CHECK(s->base_path == "/headlab");
  CHECK(headlab::ParseHttpUrl("https://[::1]")->port == "443");
  CHECK(headlab::ParseHttpUrl("https://h:8443")->port == "8443");
  CHECK(!headlab::ParseHttpUrl("ftp://x:1").ok());
  CHECK(!headlab::ParseHttpUrl("https:/x").ok());
  CHECK(!headlab::ParseHttpUrl("http://x:port").ok());
  CHECK(!headlab::ParseHttpUrl("127.0.0.1:8321").ok());
}

TEST_CASE("An https URL never sends the request in clear") {
  // A plain server behind an https URL: the client's first bytes are a TLS handshake
  // record (content type 22), and no HTTP request follows when the handshake fails.
  TinyServer plain("");
  auto r =
      HttpClient(plain.https_url(), "s3cret", std::chrono::milliseconds(300)).Call("GET", "/x");
  REQUIRE(!r.ok());
  CHECK(r.status().code() == Status::Code::kUnavailable);
  CHECK(r.status().message().find(plain.https_url()) != std::string::npos);
  REQUIRE(!plain.request().empty());
  CHECK(plain.request()[0] == '\x16');
  CHECK(plain.request().find("GET /x") == std::string::npos);
  CHECK(plain.request().find("s3cret") == std::string::npos);
}

TEST_CASE("An unusable CA file is InvalidArgument naming the file, before any connection") {
  const std::string missing = "/nonexistent/headlab-ca.pem";
  HttpClient client(headlab::DeadLoopbackUrl().replace(0, 4, "https"), "");
  client.set_ca_file(missing);
  auto r = client.Call("GET", "/api/v1/health");
  REQUIRE(!r.ok());
  CHECK(r.status().code() == Status::Code::kInvalidArgument);
  CHECK(r.status().message().find(missing) != std::string::npos);
}
