// Exponential reconnect backoff (schema/protocol.md, Liveness): kReconnectInitial,
// doubling on each failed attempt, capped at kReconnectMax; reset once registered.
#pragma once

#include <algorithm>
#include <chrono>

#include "common/wire.h"

namespace headlab {

class Backoff {
 public:
  explicit Backoff(std::chrono::milliseconds initial = wire::kReconnectInitial,
                   std::chrono::milliseconds max = wire::kReconnectMax)
      : initial_(initial), max_(max), next_(initial) {}
  // Returns the delay before the next reconnect and doubles the one after (up to max).
  std::chrono::milliseconds Next() {
    std::chrono::milliseconds d = next_;
    next_ = std::min(next_ * 2, max_);
    return d;
  }
  // Starts over at the initial delay (the connection proved healthy).
  void Reset() { next_ = initial_; }

 private:
  const std::chrono::milliseconds initial_, max_;
  std::chrono::milliseconds next_;
};

}  // namespace headlab
