// ZeroMQ ROUTER loop.
#include "coordinator/router.h"

#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>

#include "common/log.h"
#include "common/wire.h"
#include "coordinator/messages.h"

namespace headlab::coord {
namespace {

// Messages handled per transaction: large enough to amortise the commit under a metrics
// burst, small enough that one batch stays well under the heartbeat interval.
constexpr int kMaxBatch = 4096;
// ...and at most this long: replies (ACKs) then flow while workers produce the next
// messages, instead of the whole fleet waiting in lockstep on one huge transaction.
constexpr std::chrono::milliseconds kMaxBatchTime{10};
constexpr int kHighWaterMark = 200000;
// The share of a batch the oldest stepped request gets (a large submit inserts about
// 2,000 runs in it on the 2-core development machine).
constexpr std::chrono::milliseconds kStepSlice{20};
// A batch longer than this is logged with where its time went (throttled).
constexpr std::chrono::milliseconds kSlowBatch{250};
// ZMTP heartbeats on every connection: a half-open one (a host gone without a FIN) is
// closed after kLiveness, so a worker that reconnects is never locked out by its own ghost.
constexpr int kZmtpHeartbeatMs = int(wire::kHeartbeatInterval.count());
constexpr int kZmtpTimeoutMs = int(wire::kLiveness.count());

std::string Printable(const zmq::message_t& m, size_t max = 40) {
  return PrintableBytes(std::string(static_cast<const char*>(m.data()), std::min(m.size(), max)),
                        max);
}

}  // namespace

Router::Router(Core* core) : core_(core), ctx_(1), sock_(ctx_, zmq::socket_type::router) {
  sock_.set(zmq::sockopt::linger, 0);
  // No ZMQ_ROUTER_HANDOVER: ZeroMQ names each connection itself, a peer cannot take over
  // another's route, and a worker's identity moves only with its session key (core.h).
  sock_.set(zmq::sockopt::maxmsgsize, int64_t(wire::kMaxFrameBytes));
  sock_.set(zmq::sockopt::heartbeat_ivl, kZmtpHeartbeatMs);
  sock_.set(zmq::sockopt::heartbeat_timeout, kZmtpTimeoutMs);
  sock_.set(zmq::sockopt::sndhwm, kHighWaterMark);
  sock_.set(zmq::sockopt::rcvhwm, kHighWaterMark);
  if (::pipe2(wake_, O_NONBLOCK | O_CLOEXEC) != 0) wake_[0] = wake_[1] = -1;
}

Router::~Router() {
  sock_.close();
  if (wake_[0] >= 0) ::close(wake_[0]);
  if (wake_[1] >= 0) ::close(wake_[1]);
}

Status Router::Bind(const std::string& endpoint, const std::string& curve_secret_key) {
  if (wake_[0] < 0) return Status::Internal("cannot create the wake-up pipe");
  try {
    if (!curve_secret_key.empty()) {
      sock_.set(zmq::sockopt::curve_server, true);
      sock_.set(zmq::sockopt::curve_secretkey, curve_secret_key);
    }
    sock_.bind(endpoint);
  } catch (const zmq::error_t& e) {
    return Status::Unavailable("cannot bind the worker socket to " + endpoint + ": " + e.what());
  }
  endpoint_ = sock_.get(zmq::sockopt::last_endpoint);
  return Status::Ok();
}

void Router::Wake() {
  char b = 1;
  ssize_t ignored = ::write(wake_[1], &b, 1);  // a full pipe already means "wake up"
  (void)ignored;
}

void Router::Stop() {
  stop_ = true;
  Wake();
}

StatusOr<Json> Router::Call(std::function<StatusOr<Json>(Core&)> fn) {
  auto promise = std::make_shared<std::promise<StatusOr<Json>>>();
  std::future<StatusOr<Json>> result = promise->get_future();
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_) return Status::Unavailable("the coordinator is shutting down");
    pending_.push_back([promise, fn = std::move(fn)](Core& core) {
      auto value = std::make_shared<StatusOr<Json>>(fn(core));
      core.AfterCommit([promise, value] { promise->set_value(std::move(*value)); });
    });
  }
  Wake();
  try {
    return result.get();
  } catch (const std::future_error&) {
    return Status::Unavailable("the coordinator stopped before the request was committed");
  }
}

StatusOr<Json> Router::CallInSteps(std::unique_ptr<SteppedRequest> request) {
  auto promise = std::make_shared<std::promise<StatusOr<Json>>>();
  std::future<StatusOr<Json>> result = promise->get_future();
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_) return Status::Unavailable("the coordinator is shutting down");
    stepped_.push_back({std::move(request), promise});
  }
  Wake();
  try {
    return result.get();
  } catch (const std::future_error&) {
    return Status::Unavailable("the coordinator stopped before the request was committed");
  }
}

void Router::Post(std::function<void(Core&)> fn) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_) return;
    pending_.push_back(std::move(fn));
  }
  Wake();
}

void Router::HandleFrames(std::vector<zmq::message_t>& frames, Clock::time_point now) {
  std::string route(static_cast<const char*>(frames[0].data()), frames[0].size());
  size_t first = 1;
  // Tolerate a REQ-style empty delimiter frame after the identity.
  if (frames.size() > 1 && frames[1].size() == 0) first = 2;
  size_t n = frames.size() - first;
  if (n >= 2 && frames[first].to_string_view() != wire::kProtocol) {
    // A worker of another protocol version: its READY is answered in its own framing (a
    // 3-frame HLW1 REFUSE) so that it exits with the reason instead of retrying forever.
    if (n == 3 && frames[first].to_string_view() == "HLW1" &&
        frames[first + 1].to_string_view() == wire::kReady && refusals_.Take(now)) {
      std::string reason =
          std::string("this coordinator speaks ") + wire::kProtocol + "; upgrade the worker";
      try {
        sock_.send(zmq::buffer(route), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
        sock_.send(zmq::str_buffer("HLW1"), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
        sock_.send(zmq::str_buffer("REFUSE"), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
        sock_.send(zmq::buffer(Json{{"reason", reason}}.dump()), zmq::send_flags::dontwait);
      } catch (const zmq::error_t&) {
      }
    }
    throttle_.Warn("unknown protocol",
                   "dropped message from " + Printable(frames[0]) + ": unknown protocol '" +
                       Printable(frames[first]) + "'",
                   now);
    return;
  }
  if (n != 4) {
    throttle_.Warn("bad framing",
                   "dropped message from " + Printable(frames[0]) +
                       ": expected 4 frames (protocol, command, auth, body), got " +
                       std::to_string(n),
                   now);
    return;
  }
  const zmq::message_t& command = frames[first + 1];
  const zmq::message_t& auth = frames[first + 2];
  const zmq::message_t& body = frames[first + 3];
  // Sizes before any copy or parse: a frame past its command's limit costs nothing more.
  if (command.size() > 16 || auth.size() > 256 ||
      body.size() > wire::MaxBodyBytes(command.to_string_view())) {
    throttle_.Warn("oversize",
                   "dropped " + Printable(command) + " from " + Printable(frames[0]) + ": " +
                       std::to_string(body.size()) + "-byte body over its limit",
                   now);
    return;
  }
  std::string cmd = command.to_string();
  try {
    core_->HandleMessage(route, cmd, auth.to_string(), body.to_string(), now);
  } catch (const std::exception& e) {
    // Validation should make this unreachable; if not, one bad message must not end the
    // daemon. Its statements so far stay in the batch (each is individually consistent).
    LogError("internal error handling " + cmd + " from " + Printable(frames[0]) + ": " + e.what());
  }
}

void Router::SendOutbox() {
  for (OutMessage& m : core_->TakeOutbox()) {
    try {
      // ROUTER drops messages to identities it has no connection for; a lost reply is
      // covered by the protocol (leases, resends), so sends never block the loop.
      sock_.send(zmq::buffer(m.identity), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      sock_.send(zmq::buffer(std::string_view(wire::kProtocol)),
                 zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      sock_.send(zmq::buffer(m.command), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      sock_.send(zmq::buffer(m.body), zmq::send_flags::dontwait);
    } catch (const zmq::error_t& e) {
      LogWarn("send " + m.command + " to " + PrintableBytes(m.identity) + " failed: " + e.what());
    }
  }
}

Status Router::Run() {
  Status result;
  while (!stop_) {
    Clock::time_point now = Clock::now();
    auto wait =
        std::chrono::duration_cast<std::chrono::milliseconds>(core_->NextDeadline(now) - now);
    // A stepped request in progress continues at once: between its steps the loop only
    // serves what has arrived.
    long timeout = stepping_.empty() ? std::clamp<long>(long(wait.count()), 0, 50) : 0;
    zmq_pollitem_t items[2] = {{sock_.handle(), 0, ZMQ_POLLIN, 0},
                               {nullptr, wake_[0], ZMQ_POLLIN, 0}};
    if (zmq_poll(items, 2, timeout) < 0 && zmq_errno() != EINTR) {
      result = Status::Internal(std::string("zmq_poll: ") + zmq_strerror(zmq_errno()));
      break;
    }
    if (items[1].revents & ZMQ_POLLIN) {
      char buf[256];
      while (::read(wake_[0], buf, sizeof buf) > 0) {
      }
    }
    now = Clock::now();
    Status st = core_->BeginBatch();
    if (!st.ok()) {
      result = st;
      break;
    }
    std::vector<zmq::message_t> frames;
    bool drained = false;
    for (int n = 0; n < kMaxBatch && Clock::now() - now < kMaxBatchTime; ++n) {
      frames.clear();
      zmq::recv_result_t got;
      try {
        got = zmq::recv_multipart(sock_, std::back_inserter(frames), zmq::recv_flags::dontwait);
      } catch (const zmq::error_t& e) {
        LogWarn(std::string("receive failed: ") + e.what());
        break;
      }
      if (!got) {
        drained = true;
        break;
      }
      HandleFrames(frames, now);
    }
    const Clock::time_point t_messages = Clock::now();
    std::deque<std::function<void(Core&)>> requests;
    {
      std::lock_guard<std::mutex> l(mu_);
      requests.swap(pending_);
      for (Stepped& s : stepped_) stepping_.push_back(std::move(s));
      stepped_.clear();
    }
    for (auto& r : requests) {
      try {
        r(*core_);
      } catch (const std::exception& e) {
        LogError(std::string("internal error in a request: ") + e.what());
      }
    }
    const Clock::time_point t_requests = Clock::now();
    if (!stepping_.empty()) {
      Stepped& s = stepping_.front();
      std::optional<StatusOr<Json>> answer;
      try {
        answer = s.request->Step(*core_, Clock::now() + kStepSlice);
      } catch (const std::exception& e) {
        answer = StatusOr<Json>(Status::Internal(std::string("internal error: ") + e.what()));
      }
      if (answer) {
        auto value = std::make_shared<StatusOr<Json>>(std::move(*answer));
        core_->AfterCommit([p = s.answer, value] { p->set_value(std::move(*value)); });
        // The request (a grid's planned runs) is freed on the loop; its memory goes back
        // to the system with the next trim (Router::Run, after the commit).
        stepping_.pop_front();
        trim_memory_ = true;
      }
    }
    const Clock::time_point t_step = Clock::now();
    core_->Tick(now, /*input_pending=*/!drained);
    throttle_.Flush(now);
    const Clock::time_point t_tick = Clock::now();
    st = core_->CommitBatch();
    if (!st.ok()) {
      LogError("cannot commit to the database: " + st.message());
      result = st;
      break;
    }
    SendOutbox();
    const Clock::time_point t_end = Clock::now();
    if (t_end - now > kSlowBatch) {
      auto ms = [](Clock::duration d) {
        return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
      };
      throttle_.Warn("slow batch",
                     "slow batch: " + ms(t_end - now) + " ms (messages " + ms(t_messages - now) +
                         ", requests " + ms(t_requests - t_messages) + ", step " +
                         ms(t_step - t_requests) + ", timers and dispatch " + ms(t_tick - t_step) +
                         ", commit and send " + ms(t_end - t_tick) + ")",
                     t_end);
    }
    if (trim_memory_) {
      // A large request leaves hundreds of megabytes freed but kept by malloc; without
      // this, two cycles of a 100,000-run grid left the process at 5.4 GB.
      ::malloc_trim(0);
      trim_memory_ = false;
    }
  }
  // Requests that will never run: their callers get Unavailable (broken promise).
  std::lock_guard<std::mutex> l(mu_);
  stop_ = true;
  pending_.clear();
  stepped_.clear();
  stepping_.clear();
  return result;
}

}  // namespace headlab::coord
