#include "common/log_throttle.h"

#include <catch2/catch.hpp>

namespace headlab {

TEST_CASE("LogThrottle: a burst per category and window, the rest counted") {
  using std::chrono::milliseconds;
  LogThrottle t(milliseconds(1000), 3);
  LogThrottle::Clock::time_point t0{};
  int written = 0;
  for (int i = 0; i < 10'000; ++i)
    written += t.Warn("garbage", "bad frame", t0 + milliseconds(i % 900));
  CHECK(written == 3);
  CHECK(t.suppressed() == 9'997);
  // Another category has its own burst.
  CHECK(t.Warn("forged", "foreign attempt", t0));
  // A new window writes again.
  CHECK(t.Warn("garbage", "bad frame", t0 + milliseconds(1000)));
  CHECK(t.written() == 5);
  t.Flush(t0 + milliseconds(5000));
  CHECK(t.Warn("garbage", "bad frame", t0 + milliseconds(5000)));
}

}  // namespace headlab
