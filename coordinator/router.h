// The loop thread: a ZeroMQ ROUTER socket for workers (schema/protocol.md) plus a queue of
// requests from other threads (HTTP), served in batches:
//
//   wait (socket, wake-up pipe, next timer) -> BEGIN -> up to kMaxBatch worker messages ->
//   queued requests -> one step of the oldest stepped request -> Core::Tick (expiry,
//   heartbeats, dispatch) -> COMMIT -> send replies
//
// The loop thread is the only writer of the database. A batch is one transaction, so a
// burst of METRICS costs one commit, and replies leave only after their state is durable.
// Every part of a batch is bounded (messages by count and time, a stepped request by its
// slice, dispatch by its budget), so heartbeats and lease expiries keep their deadlines
// whatever arrives.
#pragma once

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include <atomic>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/log_throttle.h"
#include "common/status.h"
#include "coordinator/core.h"
#include "coordinator/rate_limiter.h"

namespace headlab::coord {

// A user request the loop serves in bounded steps, one per batch (large submits and
// cancels: bulk_requests.h). Steps run on the loop thread only.
class SteppedRequest {
 public:
  virtual ~SteppedRequest() = default;
  // Does a share of the work inside the current batch, stopping soon after `deadline`.
  // Returns the answer once the request is complete, nullopt to be called next batch.
  virtual std::optional<StatusOr<Json>> Step(Core& core, Clock::time_point deadline) = 0;
};

class Router {
 public:
  explicit Router(Core* core);
  ~Router();
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // Binds the ROUTER socket ("tcp://ADDR:PORT"; port 0 picks a free one). Unavailable
  // with a clear message if the address is in use. With `curve_secret_key` (Z85) the
  // socket is a CURVE server: only encrypted connections to that key are accepted.
  Status Bind(const std::string& endpoint, const std::string& curve_secret_key = "");
  // Returns the bound endpoint with the actual port.
  const std::string& endpoint() const { return endpoint_; }

  // Runs the loop on the calling thread until Stop(). Returns an error only if the
  // database cannot be written (the process should exit; a restart recovers).
  Status Run();
  // Asks Run to return after the current batch; callable from any thread or a signal
  // handler's helper thread.
  void Stop();

  // Runs fn(core) on the loop thread within a batch; returns its result once the batch
  // has committed, or Unavailable if the loop stopped first. Callable from any thread.
  StatusOr<Json> Call(std::function<StatusOr<Json>(Core&)> fn);
  // Runs `request` on the loop thread a step per batch, after the stepped requests before
  // it; returns its answer once its last step has committed, or Unavailable if the loop
  // stopped first. Callable from any thread.
  StatusOr<Json> CallInSteps(std::unique_ptr<SteppedRequest> request);
  // Runs fn(core) on the loop thread within a batch, without waiting. Any thread.
  void Post(std::function<void(Core&)> fn);

 private:
  void Wake();
  void HandleFrames(std::vector<zmq::message_t>& frames, Clock::time_point now);
  void SendOutbox();

  Core* const core_;
  zmq::context_t ctx_;
  zmq::socket_t sock_;
  std::string endpoint_;
  int wake_[2] = {-1, -1};
  LogThrottle throttle_;                                   // garbage frames (loop thread)
  RateLimiter refusals_{/*per_second=*/10, /*burst=*/20};  // REFUSEs to other versions
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::deque<std::function<void(Core&)>> pending_;  // guarded by mu_
  struct Stepped {
    std::unique_ptr<SteppedRequest> request;
    std::shared_ptr<std::promise<StatusOr<Json>>> answer;
  };
  std::deque<Stepped> stepped_;   // guarded by mu_ (new ones)
  std::deque<Stepped> stepping_;  // loop thread: in progress, FIFO
  bool trim_memory_ = false;      // loop thread: a large request ended
};

}  // namespace headlab::coord
