#include "payload/methods/aah/scorer.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::aah {

TEST_CASE("aah enriched input is 29-dimensional with a zero parent difference at the top") {
  Vec g = {1, 2, 3, 4, 5, 6, 7, 8, 9}, mean(9, 1.0f);
  Vec u = EnrichedInput(g, 0.5f, g, mean, 0.25f);
  REQUIRE(u.size() == size_t(kEnrichedDim));
  CHECK(kEnrichedDim == 29);
  CHECK(u[9] == 0.5f);                                        // eta_r
  for (int i = 10; i < 19; ++i) CHECK(u[size_t(i)] == 0.0f);  // g - p with p = g
  CHECK(u[19] == 0.0f);                                       // g - g_bar, first entry: 1 - 1
  CHECK(u[27] == 8.0f);                                       // 9 - 1
  CHECK(u[28] == 0.25f);                                      // s_i
  CHECK(LevelCoordinate(0, 1) == 0.0f);
  CHECK(LevelCoordinate(3, 4) == 1.0f);
}

TEST_CASE("aah joint sibling scorer is order-sensitive") {
  Rng rng(7);
  JointSiblingScorer joint(4, 16, &rng);
  Vec ua(29), ub(29);
  for (int i = 0; i < 29; ++i)
    ua[size_t(i)] = 0.1f * float(i), ub[size_t(i)] = 0.05f * float(29 - i);
  auto [za, zb] = joint.Logits(ua, ub);
  auto [zb2, za2] = joint.Logits(ub, ua);  // siblings swapped: slot 0 is now b's
  REQUIRE(za.size() == 4);
  REQUIRE(zb.size() == 4);
  // j_ab is not symmetric: the swapped pair is a different input, and each slot scores the
  // sibling placed in it rather than a fixed one.
  CHECK(za != za2);
  CHECK(za != zb2);
  // Identical siblings still get distinct slot logits (complementary choices possible).
  auto [s0, s1] = joint.Logits(ua, ua);
  CHECK(s0 != s1);
}

TEST_CASE("aah scorer weights are seeded and survive a JSON round trip") {
  Rng r1(42), r2(42), r3(43);
  Mlp a(29, 8, 4, &r1), b(29, 8, 4, &r2), c(29, 8, 4, &r3);
  Vec x(29, 0.3f);
  CHECK(a.Forward(x) == b.Forward(x));
  CHECK(a.Forward(x) != c.Forward(x));
  REQUIRE(c.FromJson(a.ToJson(), "test").ok());
  CHECK(c.Forward(x) == a.Forward(x));
  Mlp wrong(30, 8, 4, &r3);
  CHECK(wrong.FromJson(a.ToJson(), "test").code() == Status::Code::kCorruption);
  CHECK(Argmax(std::vector<float>{1, 3, 3, 2}.data(), 4) == 1);
}

}  // namespace headlab::aah
