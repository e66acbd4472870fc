// Paired t-test p-values and Holm's step-down adjustment.
#include "common/multiplicity.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/paired_estimators.h"

namespace headlab::paired {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The continued fraction of I_x(a, b) (modified Lentz), valid for x < (a + 1) / (a + b + 2).
double BetaFraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300, kEps = 1e-15;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 300; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double step = d * c;
    h *= step;
    if (std::fabs(step - 1) < kEps) break;
  }
  return h;
}

// The regularised incomplete beta function I_x(a, b), x in [0, 1].
double RegularizedBeta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) +
                                a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * BetaFraction(a, b, x) / a;
  return 1 - front * BetaFraction(b, a, 1 - x) / b;  // the symmetry I_x(a,b) = 1 - I_{1-x}(b,a)
}

}  // namespace

double StudentTTwoSidedP(double t, double df) {
  if (std::isnan(t) || !(df > 0)) return kNaN;
  if (std::isinf(t)) return 0;
  return RegularizedBeta(df / 2, 0.5, df / (df + t * t));
}

double PairedTTestP(const std::vector<double>& differences) {
  const MeanSe m = MeanAndSe(differences);
  if (m.n < 2) return kNaN;
  if (m.se == 0) return m.mean == 0 ? 1.0 : 0.0;
  return StudentTTwoSidedP(m.mean / m.se, double(m.n - 1));
}

std::vector<double> HolmAdjusted(const std::vector<double>& p) {
  std::vector<size_t> idx;
  for (size_t i = 0; i < p.size(); ++i)
    if (!std::isnan(p[i])) idx.push_back(i);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return p[a] < p[b]; });
  std::vector<double> out(p.size(), kNaN);
  const double m = double(idx.size());
  double running = 0;  // the step-down maximum keeps adjusted values monotone
  for (size_t j = 0; j < idx.size(); ++j) {
    running = std::max(running, std::min(1.0, (m - double(j)) * p[idx[j]]));
    out[idx[j]] = running;
  }
  return out;
}

}  // namespace headlab::paired
