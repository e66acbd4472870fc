// A token bucket: at most `burst` events at once and `per_second` on average. The
// coordinator spends it on replies to peers that have not authenticated (REFUSE,
// REREGISTER), so a flood of bad messages cannot make the loop answer each one.
// Loop thread only.
#pragma once

#include <algorithm>
#include <chrono>

namespace headlab::coord {

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  RateLimiter(double per_second, double burst)
      : per_second_(per_second), burst_(burst), tokens_(burst) {}

  // Returns true iff an event may happen at `now` (and counts it).
  bool Take(Clock::time_point now) {
    if (last_ != Clock::time_point{}) {
      double dt = std::chrono::duration<double>(now - last_).count();
      if (dt > 0) tokens_ = std::min(burst_, tokens_ + dt * per_second_);
    }
    last_ = now;
    if (tokens_ < 1) return false;
    tokens_ -= 1;
    return true;
  }

 private:
  // Constant after construction.
  const double per_second_;
  const double burst_;

  double tokens_;
  Clock::time_point last_{};
};

}  // namespace headlab::coord
