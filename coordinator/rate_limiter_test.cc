#include "coordinator/rate_limiter.h"

#include <catch2/catch.hpp>

namespace headlab::coord {

TEST_CASE("RateLimiter: a burst, then the average rate") {
  using std::chrono::milliseconds;
  RateLimiter r(/*per_second=*/100, /*burst=*/10);
  RateLimiter::Clock::time_point t0 = RateLimiter::Clock::now();
  int allowed = 0;
  for (int i = 0; i < 1000; ++i) allowed += r.Take(t0);
  CHECK(allowed == 10);
  // Over the next second, asked 50 times every 10 ms: one per 10 ms, 100 in all.
  allowed = 0;
  for (int k = 1; k <= 100; ++k)
    for (int i = 0; i < 50; ++i) allowed += r.Take(t0 + milliseconds(10 * k));
  CHECK(allowed == 100);
}

}  // namespace headlab::coord
