// Boost.Beast HTTP server: accept loop and per-connection sessions.
#include "coordinator/http_server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/version.hpp>

#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <deque>
#include <thread>
#include <vector>

#include "common/log.h"
#include "coordinator/connection_table.h"
#include "coordinator/metric_feed.h"
#include "coordinator/read_gate.h"
#include "coordinator/work_pool.h"

namespace headlab::coord {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

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
  // `table_id` is the connection's entry in `table`, removed when the stream ends.
  StreamSession(beast::tcp_stream stream, MetricFeed* feed, std::set<int64_t> runs,
                ConnectionTable* table, uint64_t table_id)
      : stream_(std::move(stream)),
        feed_(feed),
        runs_(std::move(runs)),
        ping_(stream_.get_executor()),
        table_(table),
        table_id_(table_id) {}
  ~StreamSession() {
    if (id_) feed_->Unsubscribe(id_);
    table_->Remove(table_id_);
  }

  void Start() {
    std::weak_ptr<StreamSession> weak = shared_from_this();
    auto executor = stream_.get_executor();
    id_ = feed_->Subscribe(runs_, [weak, executor](const std::vector<LivePoint>& points) {
      net::post(executor, [weak, frame = PointsFrame(points)]() mutable {
        if (auto self = weak.lock()) self->Push(std::move(frame));
      });
    });
    Push(
        "HTTP/1.1 200 OK\r\nServer: headlab-coordinator\r\n"
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
  ConnectionTable* const table_;
  const uint64_t table_id_;
  int64_t id_ = 0;
  std::deque<std::string> queue_;
  size_t queued_bytes_ = 0;
  bool writing_ = false;
  bool closed_ = false;
};

// What every connection of one server shares. Constant after construction except the
// table and the pool, which are thread-safe.
struct ServerState {
  ServerState(HttpApi* a, MetricFeed* f, AccessPolicy p, size_t max_connections)
      : api(a),
        feed(f),
        policy(std::move(p)),
        table(max_connections, kMaxStreams, kMaxConnectionsPerPeer),
        queries(kQueryThreads, kMaxQueuedQueries),
        reads(kReadThreads, kMaxQueuedReads, kPoolNice),
        grids(kGridThreads, kMaxQueuedGrids) {}
  HttpApi* api;
  MetricFeed* feed;
  const AccessPolicy policy;
  ConnectionTable table;
  WorkPool queries;  // threads that wait for SQL children (nice themselves)
  WorkPool reads;
  WorkPool grids;
  ReadGate* read_gate = nullptr;  // set before the threads start
};

HttpResponse JsonError(int status, const std::string& message) {
  return {status, "application/json", JsonText(Json{{"error", message}})};
}

// One connection: reads a request's head, screens it, reads its body, answers, and
// repeats while the client keeps the connection alive. Runs on its strand; a query's
// answer is computed on the query pool and posted back.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, ServerState* state)
      : stream_(std::move(socket)), executor_(stream_.get_executor()), state_(state) {}
  ~Session() {
    if (id_) state_->table.Remove(id_);
  }

  void Start(uint64_t id) {
    id_ = id;
    net::dispatch(executor_, beast::bind_front_handler(&Session::ReadHead, shared_from_this()));
  }

  // Asks the session to close (the table evicted it to admit another). Posted to its strand.
  void Evict() {
    if (!reading_) {  // a request arrived meanwhile: answer it, then close
      close_after_response_ = true;
      return;
    }
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
  }

  const net::any_io_executor& executor() const { return executor_; }

 private:
  void ReadHead() {
    parser_.emplace();
    parser_->header_limit(kMaxHeaderBytes);
    parser_->body_limit(kMaxWriteBodyBytes);  // narrowed once the head says what this is
    reading_ = true;
    state_->table.SetIdle(id_, true);
    stream_.expires_after(kIdleTimeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            beast::bind_front_handler(&Session::OnHead, shared_from_this()));
  }

  void OnHead(beast::error_code ec, std::size_t) {
    reading_ = false;
    state_->table.SetIdle(id_, false);
    if (ec == http::error::end_of_stream) return Shutdown();
    if (ec == http::error::header_limit) return Refuse(431, "request head too large");
    if (ec == http::error::body_limit)  // Content-Length over the largest body of any request
      return Refuse(
          413, "request body too large (limit " + std::to_string(kMaxWriteBodyBytes) + " bytes)");
    if (ec == http::error::partial_message) return;  // the client went away mid-head
    if (ec.category() == http::make_error_code(http::error::bad_target).category())
      return Refuse(400, "malformed request: " + ec.message());
    if (ec) return;  // timeout, reset, eviction: drop the connection
    const auto& req = parser_->get();
    const std::string method(req.method_string()), target(req.target());
    // What a web page could abuse (DNS rebinding, cross-origin reads and simple POSTs) is
    // refused first, before credentials (which a browser may hold in its cookie).
    if (auto refusal = ScreenBrowser(
            state_->policy, method, target, std::string(req[http::field::host]),
            std::string(req[http::field::origin]), std::string(req[http::field::content_type])))
      return Refuse(refusal->status, refusal->message);
    // Credentials are checked here, on the head: a body is never read for a request that
    // would be refused.
    if (auto refusal = ScreenRequest(state_->policy, method, target,
                                     std::string(req[http::field::authorization]),
                                     std::string(req[http::field::cookie])))
      return Refuse(refusal->status, refusal->message);
    const size_t limit = BodyLimitFor(RequiredAccess(method, target));
    if (auto length = parser_->content_length(); length && *length > limit)
      return Refuse(413, "request body too large (limit " + std::to_string(limit) + " bytes)");
    parser_->body_limit(limit);
    if (parser_->is_done()) return OnRead({}, 0);
    // The whole body must arrive within kBodyTimeout (one deadline for every read of it),
    // and while it trickles in the connection can be evicted like an idle one: bodies sent
    // a byte at a time cannot hold the table full.
    stream_.expires_after(kBodyTimeout);
    reading_ = true;
    state_->table.SetIdle(id_, true);
    if (beast::iequals(req[http::field::expect], "100-continue")) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      return net::async_write(stream_, net::buffer(kContinue),
                              [self = shared_from_this()](beast::error_code ec, std::size_t) {
                                if (!ec) self->ReadBody();
                              });
    }
    ReadBody();
  }

  void ReadBody() {
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&Session::OnRead, shared_from_this()));
  }

  void OnRead(beast::error_code ec, std::size_t) {
    if (reading_) {
      reading_ = false;
      state_->table.SetIdle(id_, false);
    }
    if (ec == http::error::body_limit) return Refuse(413, "request body too large");
    if (ec) return;
    http::request<http::string_body> req = parser_->release();
    keep_alive_ = req.keep_alive();
    version_ = req.version();
    head_only_ = req.method() == http::verb::head;
    if (state_->feed && req.method() == http::verb::get && IsStream(req.target()))
      return StartStream(std::string(req.target()));
    HttpRequest r;
    r.method = std::string(req.method_string());
    r.target = std::string(req.target());
    r.authorization = std::string(req[http::field::authorization]);
    r.cookie = std::string(req[http::field::cookie]);
    r.body = std::move(req.body());
    if (IsQueryRequest(r.method, r.target)) {
      // A query the client no longer waits for is stopped (query_child.h).
      auto gone = std::make_shared<std::atomic<bool>>(false);
      r.client_gone = gone;
      WatchForHangUp(std::move(gone));
      return RunOnPool(&state_->queries, "queries", std::move(r), state_->read_gate);
    }
    if (IsPooledRead(r.method, r.target))
      return RunOnPool(&state_->reads, "reads", std::move(r), state_->read_gate);
    if (IsGridRequest(r.method, r.target)) return RunOnPool(&state_->grids, "grids", std::move(r));
    Respond(state_->api->Handle(r));
  }

  // Sets `*gone` when the client closes the connection before the answer is written: a
  // readable socket with nothing to read is one the peer has shut. A pipelined request
  // (bytes to read) ends the watch: the client is still there.
  void WatchForHangUp(std::shared_ptr<std::atomic<bool>> gone) {
    watching_ = true;
    stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this(),
                                                         gone](beast::error_code ec) {
      self->watching_ = false;
      if (ec) return;  // cancelled: the answer is ready
      char c;
      ssize_t n = ::recv(self->stream_.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        gone->store(true);
    });
  }

  // Cancels WatchForHangUp's wait before an answer is written.
  void EndHangUpWatch() {
    if (!watching_) return;
    beast::error_code ec;
    stream_.socket().cancel(ec);
  }

  // Runs a request on `pool`, through `gate` when not null, and answers it from this
  // session's strand.
  void RunOnPool(WorkPool* pool, const char* what, HttpRequest r, ReadGate* gate = nullptr) {
    auto enqueued = std::chrono::steady_clock::now();
    bool queued =
        pool->TryPost([self = shared_from_this(), r = std::move(r), enqueued, what, gate] {
          HttpResponse out;
          if (std::chrono::steady_clock::now() - enqueued > kQueryMaxWait) {
            out = JsonError(
                503, std::string("waited too long for a free thread (") + what + "); retry later");
          } else {
            ReadGatePass pass(gate);
            out = self->state_->api->Handle(r);
          }
          net::post(self->executor(), [self, out = std::move(out)]() mutable {
            self->EndHangUpWatch();
            self->Respond(std::move(out));
          });
        });
    if (!queued) {
      EndHangUpWatch();
      Respond(JsonError(503, std::string("too many ") + what + " waiting; retry later"));
    }
  }

  static bool IsStream(beast::string_view target) {
    return target.substr(0, target.find('?')) == kStreamPath;
  }

  // Hands the connection to a StreamSession, or answers why not (400 bad query, 503 full).
  void StartStream(const std::string& target) {
    size_t q = target.find('?');
    StatusOr<std::set<int64_t>> runs =
        ParseStreamRuns(q == std::string::npos ? "" : target.substr(q + 1));
    keep_alive_ = false;
    if (!runs.ok()) return Respond(JsonError(400, runs.status().message()));
    if (!state_->table.SetStream(id_))
      return Respond(JsonError(
          503, "too many live streams (" + std::to_string(kMaxStreams) + "); re-read over GET"));
    stream_.expires_never();
    auto session = std::make_shared<StreamSession>(std::move(stream_), state_->feed,
                                                   std::move(runs.value()), &state_->table, id_);
    id_ = 0;  // the stream session owns the table entry now
    session->Start();
  }

  void Respond(HttpResponse out) {
    res_ = {};
    res_.version(version_);
    res_.result(http::int_to_status(unsigned(out.status)));
    res_.set(http::field::server, "headlab-coordinator");
    res_.set(http::field::content_type, out.content_type);
    res_.set(http::field::cache_control, out.cache_control);
    if (out.status == 503) res_.set(http::field::retry_after, "1");
    res_.keep_alive(keep_alive_ && !close_after_response_);
    if (!head_only_) res_.body() = std::move(out.body);
    res_.prepare_payload();
    Write();
  }

  // Answers a request whose body was not read, then closes the connection.
  void Refuse(int status, const std::string& message) {
    keep_alive_ = false;
    linger_ = true;
    Respond(JsonError(status, message));
  }

  void Write() {
    http::async_write(stream_, res_,
                      beast::bind_front_handler(&Session::OnWrite, shared_from_this()));
  }

  void OnWrite(beast::error_code ec, std::size_t) {
    if (ec) return;
    if (linger_) return Linger();
    if (!res_.keep_alive()) return Shutdown();
    ReadHead();
  }

  // After a refusal: stop sending, then read and discard what the client is still sending
  // (at most kLingerBytes for at most kLingerTimeout) so that closing the socket with
  // unread data does not reset the connection before the client has read the answer.
  void Linger() {
    Shutdown();
    discard_.resize(16 << 10);
    stream_.expires_after(kLingerTimeout);
    LingerRead();
  }

  void LingerRead() {
    stream_.async_read_some(net::buffer(discard_),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              self->lingered_ += n;
                              if (!ec && self->lingered_ < kLingerBytes) self->LingerRead();
                            });
  }

  void Shutdown() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  beast::tcp_stream stream_;
  const net::any_io_executor executor_;
  ServerState* const state_;
  uint64_t id_ = 0;  // entry in state_->table (0: none, or handed to a stream)
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> res_;
  unsigned version_ = 11;
  bool keep_alive_ = false;
  bool head_only_ = false;
  bool reading_ = false;               // waiting for a request's head or body (evictable)
  bool close_after_response_ = false;  // evicted while handling a request
  bool linger_ = false;
  bool watching_ = false;  // WatchForHangUp's wait is pending
  std::string discard_;
  size_t lingered_ = 0;
};

}  // namespace

struct HttpServer::Impl {
  Impl(HttpApi* a, MetricFeed* f, AccessPolicy p, size_t max_connections)
      : state(a, f, std::move(p), max_connections), acceptor(ioc), accept_retry(ioc) {}

  void Accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket s) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
      if (ec) return RetryAccept(ec);  // e.g. EMFILE: retrying at once would spin
      beast::error_code peer_ec;
      const auto peer = s.remote_endpoint(peer_ec).address();
      // Loopback peers are not counted apart: every local client shares their address.
      const std::string peer_key = peer_ec || peer.is_loopback() ? "" : peer.to_string();
      auto session = std::make_shared<Session>(std::move(s), &state);
      std::weak_ptr<Session> weak = session;
      uint64_t id = state.table.Admit(
          [weak, executor = session->executor()] {
            net::post(executor, [weak] {
              if (auto s = weak.lock()) s->Evict();
            });
          },
          peer_key);
      if (id) session->Start(id);  // else: every connection is busy; this one closes now
      Accept();
    });
  }

  void RetryAccept(const beast::error_code& ec) {
    auto now = std::chrono::steady_clock::now();
    if (now - last_accept_warning > std::chrono::seconds(10)) {
      last_accept_warning = now;
      LogWarn("HTTP accept failed: " + ec.message() + " (" + std::to_string(state.table.size()) +
              " connections open); retrying every " + std::to_string(kAcceptRetry.count()) + " ms");
    }
    accept_retry.expires_after(kAcceptRetry);
    accept_retry.async_wait([this](beast::error_code e) {
      if (!e && acceptor.is_open()) Accept();
    });
  }

  // Destroyed last: sessions destroyed with the io_context remove themselves from it.
  ServerState state;
  net::io_context ioc;
  tcp::acceptor acceptor;
  net::steady_timer accept_retry;
  std::chrono::steady_clock::time_point last_accept_warning{};  // accept handler only
  std::vector<std::thread> threads;
};

HttpServer::HttpServer(HttpApi* api, MetricFeed* feed, AccessPolicy access, size_t max_connections)
    : impl_(std::make_unique<Impl>(api, feed, std::move(access), max_connections)) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Listen(const std::string& address) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size())
    return Status::InvalidArgument("--http: expected ADDR:PORT, got '" + address + "'");
  std::string host = address.substr(0, colon), port_s = address.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
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

void HttpServer::SetReadGate(ReadGate* gate) { impl_->state.read_gate = gate; }

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
  // After the I/O threads: a query still running posts its answer to the stopped
  // io_context, which drops it; the pool must be joined before the io_context goes.
  impl_->state.queries.Stop();
  impl_->state.reads.Stop();
  impl_->state.grids.Stop();
}

size_t HttpServer::connections() const { return impl_->state.table.size(); }

uint64_t HttpServer::evicted_connections() const { return impl_->state.table.evicted(); }

}  // namespace headlab::coord
