#include "coordinator/connection_table.h"

#include <catch2/catch.hpp>

#include <vector>

namespace headlab::coord {

TEST_CASE("a full table closes the connection idle longest, never a busy one") {
  ConnectionTable t(3, 1);
  std::vector<int> closed;
  auto admit = [&](int n) { return t.Admit([&closed, n] { closed.push_back(n); }); };
  uint64_t a = admit(1), b = admit(2), c = admit(3);
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(c);
  CHECK(t.size() == 3);
  // All busy: nothing can be evicted, the new connection is refused.
  CHECK(admit(4) == 0);
  CHECK(closed.empty());
  t.SetIdle(b, true);
  t.SetIdle(a, true);  // b has waited longer than a
  uint64_t d = admit(5);
  REQUIRE(d);
  CHECK(closed == std::vector<int>{2});
  CHECK(t.size() == 3);
  CHECK(t.evicted() == 1);
  t.Remove(b);  // the evicted session's own removal is a no-op
  CHECK(t.size() == 3);
  // a becomes busy again, then idle: it is now the youngest idle one.
  t.SetIdle(a, false);
  t.SetIdle(c, true);
  t.SetIdle(a, true);
  REQUIRE(admit(6));
  CHECK(closed == std::vector<int>{2, 3});
  t.Remove(a);
  CHECK(t.size() == 2);
}

TEST_CASE("streams are counted, capped and never evicted") {
  ConnectionTable t(2, 1);
  int closes = 0;
  uint64_t a = t.Admit([&] { ++closes; }), b = t.Admit([&] { ++closes; });
  t.SetIdle(a, true);
  CHECK(t.SetStream(a));
  CHECK(t.streams() == 1);
  CHECK_FALSE(t.SetStream(b));  // at most one stream
  t.SetIdle(a, true);           // a stream never becomes idle
  CHECK(t.Admit([&] { ++closes; }) == 0);
  CHECK(closes == 0);
  t.Remove(a);
  CHECK(t.streams() == 0);
  CHECK(t.SetStream(b));
  CHECK(t.size() == 1);
}

TEST_CASE("a named peer holds at most its share; unnamed (loopback) peers are not counted") {
  ConnectionTable t(10, 1, 2);
  auto admit = [&](const std::string& peer) { return t.Admit([] {}, peer); };
  uint64_t a = admit("10.0.0.1"), b = admit("10.0.0.1");
  REQUIRE(a);
  REQUIRE(b);
  CHECK(admit("10.0.0.1") == 0);
  CHECK(admit("10.0.0.2") != 0);
  for (int i = 0; i < 5; ++i) CHECK(admit("") != 0);
  t.Remove(a);
  uint64_t c = admit("10.0.0.1");
  CHECK(c != 0);
  // An evicted connection gives its peer's share back too.
  ConnectionTable u(2, 1, 1);
  uint64_t x = u.Admit([] {}, "p");
  REQUIRE(x);
  u.SetIdle(x, true);
  REQUIRE(u.Admit([] {}, ""));
  uint64_t q = u.Admit([] {}, "q");  // evicts x
  REQUIRE(q);
  u.SetIdle(q, true);
  CHECK(u.Admit([] {}, "p") != 0);  // evicts q; p's share came back with x
  CHECK(u.evicted() == 2);
}

}  // namespace headlab::coord
