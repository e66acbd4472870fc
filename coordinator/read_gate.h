// A gate that long reads pass through, which the WAL checkpointer can close. In WAL mode a
// checkpoint copies frames back only up to the oldest open read transaction, and the log
// restarts from its beginning only when no reader still uses it: queries that overlap one
// another without pause (each within its time limit) can keep the log growing for as long
// as they come. When the log has grown past a bound and a checkpoint cannot finish, the
// checkpointer closes the gate, waits (at most a query's lifetime) for the reads inside,
// checkpoints, and opens it again; reads wait at the gate meanwhile. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace headlab::coord {

class ReadGate {
 public:
  // Waits while the gate is closed, then counts the caller in.
  void Enter() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [this] { return !closed_; });
    ++inside_;
  }
  void Leave() {
    std::lock_guard<std::mutex> l(mu_);
    --inside_;
    cv_.notify_all();
  }
  // Closes the gate and waits until no read is inside or `timeout` passed; returns true
  // iff none is. The gate stays closed until Open.
  bool Drain(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> l(mu_);
    closed_ = true;
    return cv_.wait_for(l, timeout, [this] { return inside_ == 0; });
  }
  void Open() {
    std::lock_guard<std::mutex> l(mu_);
    closed_ = false;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  // Guarded by mu_.
  int inside_ = 0;
  bool closed_ = false;
};

// Enter on construction, Leave on destruction; a null gate does nothing.
class ReadGatePass {
 public:
  explicit ReadGatePass(ReadGate* gate) : gate_(gate) {
    if (gate_) gate_->Enter();
  }
  ~ReadGatePass() {
    if (gate_) gate_->Leave();
  }
  ReadGatePass(const ReadGatePass&) = delete;
  ReadGatePass& operator=(const ReadGatePass&) = delete;

 private:
  ReadGate* const gate_;
};

}  // namespace headlab::coord
