// Boost.Beast HTTP server: accept loop and per-connection sessions.
#include "coordinator/http_server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/version.hpp>

#include <deque>
#include <thread>
#include <vector>

#include "common/log.h"
#include "coordinator/metric_feed.h"

namespace headlab::coord {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

// Grids of 10^4 runs are a few hundred KiB; anything near this is a mistake or an attack.
constexpr uint64_t kMaxBodyBytes = 64ull << 20;
constexpr std::chrono::seconds kIdleTimeout{120};
// Live streams: a comment line this often finds closed connections; a client that falls
// this far behind gets a "lag" event (and re-reads over GET) instead of unbounded memory.
constexpr std::chrono::seconds kStreamPing{15};
constexpr size_t kStreamMaxQueuedBytes = 8u << 20;
constexpr const char* kStreamPath = "/api/v1/stream";

// GET /api/v1/stream?runs=1,2,3: server-sent events (schema/http_api.md). Owns the
// connection from the response header on; each MetricFeed delivery becomes one "points"
// event. Runs on its connection's strand; the feed's callback only posts to it.
class StreamSession : public std::enable_shared_from_this<StreamSession> {
 public:
  StreamSession(beast::tcp_stream stream, MetricFeed* feed, std::set<int64_t> runs)
      : stream_(std::move(stream)), feed_(feed), runs_(std::move(runs)),
        ping_(stream_.get_executor()) {}
  ~StreamSession() {
    if (id_) feed_->Unsubscribe(id_);
  }

  void Start() {
    std::weak_ptr<StreamSession> weak = shared_from_this();
    auto executor = stream_.get_executor();
    id_ = feed_->Subscribe(runs_, [weak, executor](const std::vector<LivePoint>& points) {
      net::post(executor, [weak, frame = PointsFrame(points)]() mutable {
        if (auto self = weak.lock()) self->Push(std::move(frame));
      });
    });
    Push("HTTP/1.1 200 OK\r\nServer: headlab-coordinator\r\n"
         "Content-Type: text/event-stream\r\nCache-Control: no-store\r\n"
         "Connection: close\r\n\r\n" +
         SseFrame("hello", {{"runs", Json(std::vector<int64_t>(runs_.begin(), runs_.end()))}}));
    Ping();
  }

 private:
  void Push(std::string frame) {
    if (closed_) return;
    queued_bytes_ += frame.size();
    queue_.push_back(std::move(frame));
    if (queued_bytes_ > kStreamMaxQueuedBytes) {
      // Keep the frame being written (queue_.front() while writing_), drop the rest.
      while (queue_.size() > (writing_ ? 1u : 0u)) {
        queued_bytes_ -= queue_.back().size();
        queue_.pop_back();
      }
      std::string lag = SseFrame("lag", {{"reason", "client too slow; re-read over GET"}});
      queued_bytes_ += lag.size();
      queue_.push_back(std::move(lag));
    }
    if (!writing_) WriteNext();
  }

  void WriteNext() {
    if (queue_.empty() || closed_) return;
    writing_ = true;
    stream_.expires_after(kIdleTimeout);
    net::async_write(stream_, net::buffer(queue_.front()),
                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                       self->writing_ = false;
                       if (ec) return self->Close();
                       self->queued_bytes_ -= self->queue_.front().size();
                       self->queue_.pop_front();
                       self->WriteNext();
                     });
  }

  void Ping() {
    ping_.expires_after(kStreamPing);
    // The pending ping holds the session: it lives until Close cancels the timer.
    ping_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec || self->closed_) return;
      self->Push(": ping\n\n");
      self->Ping();
    });
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    ping_.cancel();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
  }

  beast::tcp_stream stream_;
  MetricFeed* feed_;
  std::set<int64_t> runs_;
  net::steady_timer ping_;
  int64_t id_ = 0;
  std::deque<std::string> queue_;
  size_t queued_bytes_ = 0;
  bool writing_ = false;
  bool closed_ = false;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpApi* api, MetricFeed* feed)
      : stream_(std::move(socket)), api_(api), feed_(feed) {}

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
    if (feed_ && req.method() == http::verb::get && IsStream(req.target()))
      if (StartStream(std::string(req.target()))) return;
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

  static bool IsStream(beast::string_view target) {
    return target.substr(0, target.find('?')) == kStreamPath;
  }

  // Hands the connection to a StreamSession; false (answered as JSON) for a bad query.
  bool StartStream(const std::string& target) {
    size_t q = target.find('?');
    StatusOr<std::set<int64_t>> runs =
        ParseStreamRuns(q == std::string::npos ? "" : target.substr(q + 1));
    if (!runs.ok()) {
      res_ = {};
      res_.result(http::status::bad_request);
      res_.set(http::field::content_type, "application/json");
      res_.body() = Json{{"error", runs.status().message()}}.dump();
      res_.keep_alive(false);
      res_.prepare_payload();
      Write();
      return true;
    }
    stream_.expires_never();
    std::make_shared<StreamSession>(std::move(stream_), feed_, std::move(runs.value()))->Start();
    return true;
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
  MetricFeed* feed_;
};

}  // namespace

struct HttpServer::Impl {
  Impl(HttpApi* a, MetricFeed* f) : api(a), feed(f), acceptor(ioc) {}

  void Accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket s) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
      if (!ec) std::make_shared<Session>(std::move(s), api, feed)->Start();
      Accept();
    });
  }

  HttpApi* api;
  MetricFeed* feed;
  net::io_context ioc;
  tcp::acceptor acceptor;
  std::vector<std::thread> threads;
};

HttpServer::HttpServer(HttpApi* api, MetricFeed* feed)
    : impl_(std::make_unique<Impl>(api, feed)) {}

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
