#include "common/multiplicity.h"

#include <catch2/catch.hpp>

#include <cmath>

namespace headlab::paired {
namespace {

TEST_CASE("Student t two-sided p-values: closed forms and table values") {
  // df = 1 (Cauchy): p = 1 - 2 atan(|t|) / pi; df = 2: p = 1 - |t| / sqrt(2 + t^2).
  for (double t : {0.0, 0.5, 1.0, 3.0, 12.7}) {
    CHECK(StudentTTwoSidedP(t, 1) == Approx(1 - 2 * std::atan(t) / M_PI).margin(1e-12));
    CHECK(StudentTTwoSidedP(-t, 2) == Approx(1 - t / std::sqrt(2 + t * t)).margin(1e-12));
  }
  // Two-sided 5% critical values of the t table.
  CHECK(StudentTTwoSidedP(4.302653, 2) == Approx(0.05).epsilon(1e-5));
  CHECK(StudentTTwoSidedP(2.228139, 10) == Approx(0.05).epsilon(1e-5));
  CHECK(StudentTTwoSidedP(2.570582, 5) == Approx(0.05).epsilon(1e-5));
  CHECK(StudentTTwoSidedP(3.169273, 10) == Approx(0.01).epsilon(1e-5));
  CHECK(std::isnan(StudentTTwoSidedP(1.0, 0)));
}

TEST_CASE("paired t-test p-value on differences") {
  // Differences {1, 2, 3}: mean 2, sd 1, SE 1/sqrt(3), t = 2 sqrt(3), df 2.
  const double t = 2 * std::sqrt(3.0);
  CHECK(PairedTTestP({1, 2, 3}) == Approx(1 - t / std::sqrt(2 + t * t)));
  CHECK(std::isnan(PairedTTestP({1})));
  CHECK(PairedTTestP({0, 0, 0}) == 1.0);
  CHECK(PairedTTestP({0.5, 0.5}) == 0.0);
}

TEST_CASE("Holm adjustment of a hand-computed family") {
  // m = 4; sorted 0.005, 0.01, 0.03, 0.04 -> 4 x 0.005 = 0.02, 3 x 0.01 = 0.03,
  // 2 x 0.03 = 0.06, max(0.06, 1 x 0.04) = 0.06.
  const std::vector<double> adj = HolmAdjusted({0.01, 0.04, 0.03, 0.005});
  REQUIRE(adj.size() == 4);
  CHECK(adj[0] == Approx(0.03));
  CHECK(adj[1] == Approx(0.06));
  CHECK(adj[2] == Approx(0.06));
  CHECK(adj[3] == Approx(0.02));
  // At alpha 0.05 Holm rejects the first and last; unadjusted, all four pass 0.05.
  int rejected = 0;
  for (double a : adj) rejected += a <= 0.05;
  CHECK(rejected == 2);
  // Capped at 1; NaNs are kept and do not count in m.
  const std::vector<double> capped = HolmAdjusted({0.6, NAN, 0.2});
  CHECK(capped[0] == Approx(0.6));
  CHECK(std::isnan(capped[1]));
  CHECK(capped[2] == Approx(0.4));
  CHECK(HolmAdjusted({0.3, 0.9})[1] == Approx(0.9));  // max(2 x 0.3, 1 x 0.9)
}

}  // namespace
}  // namespace headlab::paired
