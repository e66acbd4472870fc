// Boost.Beast HTTP server: accept loop and per-connection sessions.
#include "coordinator/http_server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/version.hpp>

#include <thread>
#include <vector>

#include "common/log.h"

namespace headlab::coord {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

// Grids of 10^4 runs are a few hundred KiB; anything near this is a mistake or an attack.
constexpr uint64_t kMaxBodyBytes = 64ull << 20;
constexpr std::chrono::seconds kIdleTimeout{120};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpApi* api) : stream_(std::move(socket)), api_(api) {}

  void Start() {
    net::dispatch(stream_.get_executor(), beast::bind_front_handler(&Session::Read, shared_from_this()));
  }

 private:
  void Read() {
    parser_.emplace();
    parser_->body_limit(kMaxBodyBytes);
    stream_.expires_after(kIdleTimeout);
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&Session::OnRead, shared_from_this()));
  }

  void OnRead(beast::error_code ec, std::size_t) {
    if (ec == http::error::end_of_stream) return Close();
    if (ec) {
      if (ec == http::error::body_limit) {
        res_ = {};
        res_.result(http::status::payload_too_large);
        res_.set(http::field::content_type, "application/json");
        res_.body() = R"({"error":"request body too large"})";
        res_.keep_alive(false);
        res_.prepare_payload();
        return Write();
      }
      return;  // timeout, reset, bad request line: drop the connection
    }
    http::request<http::string_body> req = parser_->release();
    HttpRequest r;
    r.method = std::string(req.method_string());
    r.target = std::string(req.target());
    r.authorization = std::string(req[http::field::authorization]);
    r.body = std::move(req.body());
    HttpResponse out = api_->Handle(r);
    res_ = {};
    res_.version(req.version());
    res_.result(http::int_to_status(unsigned(out.status)));
    res_.set(http::field::server, "headlab-coordinator");
    res_.set(http::field::content_type, out.content_type);
    res_.set(http::field::cache_control, "no-store");
    res_.keep_alive(req.keep_alive());
    if (req.method() != http::verb::head) res_.body() = std::move(out.body);
    res_.prepare_payload();
    Write();
  }

  void Write() {
    http::async_write(stream_, res_, beast::bind_front_handler(&Session::OnWrite, shared_from_this()));
  }

  void OnWrite(beast::error_code ec, std::size_t) {
    if (ec) return;
    if (!res_.keep_alive()) return Close();
    Read();
  }

  void Close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> res_;
  HttpApi* api_;
};

}  // namespace

struct HttpServer::Impl {
  explicit Impl(HttpApi* a) : api(a), acceptor(ioc) {}

  void Accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket s) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
      if (!ec) std::make_shared<Session>(std::move(s), api)->Start();
      Accept();
    });
  }

  HttpApi* api;
  net::io_context ioc;
  tcp::acceptor acceptor;
  std::vector<std::thread> threads;
};

HttpServer::HttpServer(HttpApi* api) : impl_(std::make_unique<Impl>(api)) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Listen(const std::string& address) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size())
    return Status::InvalidArgument("--http: expected ADDR:PORT, got '" + address + "'");
  std::string host = address.substr(0, colon), port_s = address.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  char* end = nullptr;
  long port = std::strtol(port_s.c_str(), &end, 10);
  if (*end || port < 0 || port > 65535)
    return Status::InvalidArgument("--http: bad port in '" + address + "'");
  beast::error_code ec;
  tcp::endpoint ep;
  auto ip = net::ip::make_address(host, ec);
  if (ec) {
    if (host != "localhost") return Status::InvalidArgument("--http: bad address '" + host + "'");
    ip = net::ip::make_address("127.0.0.1");
  }
  ep = tcp::endpoint(ip, static_cast<unsigned short>(port));
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    a.close();
    return Status::Unavailable("cannot listen for HTTP on " + address + ": " + ec.message());
  }
  return Status::Ok();
}

std::string HttpServer::address() const {
  beast::error_code ec;
  auto ep = impl_->acceptor.local_endpoint(ec);
  if (ec) return "";
  return ep.address().to_string() + ":" + std::to_string(ep.port());
}

void HttpServer::Start(int threads) {
  impl_->Accept();
  for (int i = 0; i < threads; ++i) impl_->threads.emplace_back([this] { impl_->ioc.run(); });
}

void HttpServer::Stop() {
  if (!impl_) return;
  net::post(impl_->ioc, [this] {
    beast::error_code ec;
    impl_->acceptor.close(ec);
  });
  impl_->ioc.stop();
  for (auto& t : impl_->threads)
    if (t.joinable()) t.join();
  impl_->threads.clear();
}

}  // namespace headlab::coord
