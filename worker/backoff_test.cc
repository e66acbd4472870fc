#include "worker/backoff.h"

#include <catch2/catch.hpp>

namespace headlab {

TEST_CASE("Backoff doubles from 250 ms to the 8 s cap and resets") {
  using std::chrono::milliseconds;
  Backoff b;
  const int expect[] = {250, 500, 1000, 2000, 4000, 8000, 8000, 8000};
  for (int ms : expect) CHECK(b.Next() == milliseconds(ms));
  b.Reset();
  CHECK(b.Next() == milliseconds(250));
  CHECK(b.Next() == milliseconds(500));
}

TEST_CASE("Backoff caps at a max that is not a power-of-two multiple") {
  using std::chrono::milliseconds;
  Backoff b(milliseconds(100), milliseconds(300));
  CHECK(b.Next() == milliseconds(100));
  CHECK(b.Next() == milliseconds(200));
  CHECK(b.Next() == milliseconds(300));
  CHECK(b.Next() == milliseconds(300));
}

}  // namespace headlab
