#include "common/paired_estimators.h"

#include <catch2/catch.hpp>
#include <cmath>

namespace headlab::paired {

// SAF App. C.4, SST-2 at 25%: speedups 0.9633, 0.6653, 1.0732 -> 0.901 +- 0.122, while the
// ratio of mean times is 0.861; replaced update times span 46.23-77.15 ms. The paper gives
// only the extremes: the middle replaced time (48.864 ms) and the pairing of times to
// ratios are the ones that reproduce both published numbers (of the six pairings, two
// do; this is one of them), and t_ord = ratio * t_rep.
TEST_CASE("SAF App. C.4 example: mean of within-pair ratios vs ratio of mean times") {
  const std::vector<double> t_rep = {46.23, 77.15, 48.864};
  const std::vector<double> t_ord = {0.9633 * 46.23, 0.6653 * 77.15, 1.0732 * 48.864};
  std::vector<double> s = SpeedupRatios(t_ord, t_rep);
  REQUIRE(s.size() == 3);
  CHECK(s[0] == Approx(0.9633));
  CHECK(s[1] == Approx(0.6653));
  CHECK(s[2] == Approx(1.0732));
  PairedSummary m = Summarise(s, kMeanSe);
  CHECK(m.estimator == kMeanSe);
  CHECK(m.n == 3);
  // mean 0.9006; deviations .0627, -.2353, .1726; SS .08916; sd .2111; SE .2111/sqrt 3.
  CHECK(m.value == Approx(0.901).margin(5e-4));
  CHECK(m.se == Approx(0.122).margin(5e-4));
  CHECK(m.lo == Approx(m.value - m.se));
  CHECK(RatioOfMeans(t_ord, t_rep) == Approx(0.861).margin(5e-4));
  // The single-GPU estimator: the median and the range.
  PairedSummary med = Summarise(s, kMedian);
  CHECK(med.estimator == kMedian);
  CHECK(med.value == Approx(0.9633));
  CHECK(std::isnan(med.se));
  CHECK(med.lo == Approx(0.6653));
  CHECK(med.hi == Approx(1.0732));
}

TEST_CASE("median, mean and SE edge cases") {
  CHECK(Median({3, 1, 2}) == 2);
  CHECK(Median({4, 1, 3, 2}) == 2.5);
  CHECK(std::isnan(Median({})));
  MeanSe two = MeanAndSe({1.0, 3.0});  // sd sqrt 2, SE 1
  CHECK(two.mean == 2.0);
  CHECK(two.se == Approx(1.0));
  CHECK(std::isnan(MeanAndSe({5.0}).se));
  PairedSummary empty = Summarise({}, kMedian);
  CHECK(empty.n == 0);
  CHECK(std::isnan(empty.value));
  CHECK(SpeedupRatios({1, 2}, {0, 4}) == std::vector<double>{0.5});  // zero skipped
}

TEST_CASE("delta PPL percent per seed, then mean +- SE") {
  // p_ord 20, 25, 40; p_rep 21, 25.5, 40 -> 5, 2, 0 %: mean 7/3, SE sqrt(19/3 / 3).
  std::vector<double> d = DeltaPct({20, 25, 40}, {21, 25.5, 40});
  REQUIRE(d.size() == 3);
  CHECK(d[0] == Approx(5.0));
  CHECK(d[1] == Approx(2.0));
  CHECK(d[2] == Approx(0.0));
  MeanSe m = MeanAndSe(d);
  CHECK(m.mean == Approx(7.0 / 3.0));
  // deviations 8/3, -1/3, -7/3: SS = (64 + 1 + 49) / 9 = 114/9; var = 57/9; SE = sqrt(57/27).
  CHECK(m.se == Approx(std::sqrt(57.0 / 27.0)));
}

TEST_CASE("row mean differences of per-token log-probabilities") {
  const float b[] = {-1, -2, -3, -4, -5, -6};
  const float t[] = {-1, -1, -3, -3, -6, -6};
  std::vector<double> rows = RowMeanDifferences(b, t, 6, 2);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0] == Approx(0.5));
  CHECK(rows[1] == Approx(0.5));
  CHECK(rows[2] == Approx(-0.5));
}

TEST_CASE("bootstrap CI is deterministic per seed and brackets the mean") {
  std::vector<double> units;
  for (int i = 0; i < 64; ++i) units.push_back(std::sin(double(i) * 1.7) + 0.1);
  BootstrapCi a = BootstrapMeanCi(units, 2000, 7);
  BootstrapCi b = BootstrapMeanCi(units, 2000, 7);
  BootstrapCi c = BootstrapMeanCi(units, 2000, 8);
  CHECK(a.lo == b.lo);
  CHECK(a.hi == b.hi);
  CHECK((a.lo != c.lo || a.hi != c.hi));
  CHECK(a.n == 64);
  CHECK(a.lo < a.mean);
  CHECK(a.mean < a.hi);
  // The percentile CI of a mean is close to mean +- 1.96 SE (SE with n in the denominator,
  // as the bootstrap's plug-in estimate); within 15% in width for 64 units.
  MeanSe m = MeanAndSe(units);
  const double se_plugin = m.se * std::sqrt(63.0 / 64.0);
  CHECK((a.hi - a.lo) == Approx(2 * 1.96 * se_plugin).epsilon(0.15));
  // No spread, no interval.
  BootstrapCi flat = BootstrapMeanCi({2, 2, 2}, 100, 1);
  CHECK(flat.lo == 2);
  CHECK(flat.hi == 2);
  CHECK(std::isnan(BootstrapMeanCi({}, 100, 1).mean));
}

TEST_CASE("ABBA order") {
  CHECK(AbbaOrder(2, 4) == std::vector<int>{0, 1, 1, 0, 0, 1, 1, 0});
  CHECK(AbbaOrder(3, 2) == std::vector<int>{0, 1, 2, 2, 1, 0});
  CHECK(AbbaOrder(2, 0).empty());
  // Over each two repetitions every arm's positions sum to the same total, so a linear
  // drift adds equally to every arm.
  for (int arms = 1; arms <= 4; ++arms) {
    std::vector<int> sum(size_t(arms), 0);
    std::vector<int> order = AbbaOrder(arms, 2);
    for (size_t i = 0; i < order.size(); ++i) sum[size_t(order[i])] += int(i);
    for (int a = 0; a < arms; ++a) CHECK(sum[size_t(a)] == sum[0]);
    for (int a = 0; a < arms; ++a)
      for (int r = 0; r < 2; ++r) CHECK(order[size_t(r * arms + AbbaPosition(a, arms, r))] == a);
  }
}

TEST_CASE("control tolerance") {
  CHECK(WithinControlTolerance(1.03, 0.05));
  CHECK(WithinControlTolerance(0.95, 0.05));
  CHECK_FALSE(WithinControlTolerance(1.2, 0.05));
  CHECK_FALSE(WithinControlTolerance(std::nan(""), 0.05));
}

}  // namespace headlab::paired

namespace headlab::paired {

// At n = 2 a mean +- SE alone misleads; the 95% CI is mean +- t(1) * SE.
TEST_CASE("MeanCi uses Student's t with n - 1 degrees of freedom") {
  MeanSe m = MeanAndSe({-0.344, -0.058});  // mean -0.201, SE 0.143
  CHECK(m.mean == Approx(-0.201));
  CHECK(m.se == Approx(0.143));
  Interval ci = MeanCi(m, 0.95);
  CHECK(ci.lo == Approx(-0.201 - 12.706 * 0.143).epsilon(1e-4));
  CHECK(ci.hi == Approx(-0.201 + 12.706 * 0.143).epsilon(1e-4));
  CHECK(ci.lo == Approx(-2.018).margin(0.001));
  Interval ci99 = MeanCi(m, 0.99);  // t(0.995; 1) = 63.657
  CHECK(ci99.hi == Approx(-0.201 + 63.657 * 0.143).epsilon(1e-4));
  CHECK(std::isnan(MeanCi(MeanAndSe({1.0}), 0.95).lo));
  CHECK(std::isnan(MeanCi(m, 1.0).lo));
  CHECK(std::isnan(MeanCi(m, 0.0).lo));
  CHECK(std::isnan(MeanCi(m, -0.5).hi));
}

// Published two-sided critical values of Student's t (e.g. NIST/SEMATECH e-Handbook of
// Statistical Methods, Table 1.3.6.7.2; any textbook table), three decimals: the one-sided
// upper quantiles 0.95, 0.975 and 0.995 (90%, 95% and 99% two-sided intervals).
TEST_CASE("StudentTQuantile matches the published t table at df 1, 2, 30, 40, 60, 120") {
  struct Row {
    int64_t df;
    double q95, q975, q995;
  };
  const Row table[] = {{1, 6.314, 12.706, 63.657}, {2, 2.920, 4.303, 9.925},
                       {30, 1.697, 2.042, 2.750},  {40, 1.684, 2.021, 2.704},
                       {60, 1.671, 2.000, 2.660},  {120, 1.658, 1.980, 2.617}};
  for (const Row& r : table) {
    INFO("df " << r.df);
    CHECK(StudentTQuantile(0.95, r.df) == Approx(r.q95).margin(0.0005));
    CHECK(StudentTQuantile(0.975, r.df) == Approx(r.q975).margin(0.0005));
    CHECK(StudentTQuantile(0.995, r.df) == Approx(r.q995).margin(0.0005));
    // The distribution is symmetric: the lower quantile is the negated upper one.
    CHECK(StudentTQuantile(0.025, r.df) == Approx(-StudentTQuantile(0.975, r.df)));
  }
  // df 1 is the Cauchy distribution: t(p) = tan(pi (p - 1/2)), a closed form.
  CHECK(StudentTQuantile(0.9, 1) == Approx(std::tan(M_PI * 0.4)).epsilon(1e-12));
  // Far out it tends to the normal quantile 1.959964.
  CHECK(StudentTQuantile(0.975, 1000000) == Approx(1.959964).margin(1e-5));
  CHECK(std::isnan(StudentTQuantile(0.975, 0)));
  CHECK(std::isnan(StudentTQuantile(1.0, 5)));
}

}  // namespace headlab::paired
