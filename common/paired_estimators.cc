// Paired estimators: within-pair summaries, ΔPPL%, row bootstrap, ABBA order.
#include "common/paired_estimators.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include <boost/math/distributions/students_t.hpp>

namespace headlab::paired {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Percentile of sorted `xs` by linear interpolation between order statistics (type 7, the
// R and NumPy default), p in [0, 1].
double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return kNaN;
  const double pos = p * double(sorted.size() - 1);
  const size_t lo = size_t(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - double(lo)) * (sorted[hi] - sorted[lo]);
}

}  // namespace

double StudentTQuantile(double p, int64_t df) {
  if (df < 1 || !(p > 0 && p < 1)) return kNaN;
  return boost::math::quantile(boost::math::students_t(double(df)), p);
}

bool IsConfidenceLevel(double level) { return level > 0 && level < 1; }

std::string LevelLabel(double level) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g%%", 100 * level);
  return buf;
}

Interval MeanCi(const MeanSe& m, double level) {
  if (m.n < 2 || !std::isfinite(m.se) || !IsConfidenceLevel(level)) return {kNaN, kNaN};
  const double half = StudentTQuantile(1 - (1 - level) / 2, m.n - 1) * m.se;
  return {m.mean - half, m.mean + half};
}

MeanSe MeanAndSe(const std::vector<double>& xs) {
  MeanSe r;
  r.n = int(xs.size());
  if (xs.empty()) {
    r.mean = r.se = kNaN;
    return r;
  }
  double sum = 0;
  for (double x : xs) sum += x;
  r.mean = sum / r.n;
  if (r.n < 2) {
    r.se = kNaN;
    return r;
  }
  double ss = 0;
  for (double x : xs) ss += (x - r.mean) * (x - r.mean);
  r.se = std::sqrt(ss / (r.n - 1)) / std::sqrt(double(r.n));
  return r;
}

double Median(std::vector<double> xs) {
  if (xs.empty()) return kNaN;
  std::sort(xs.begin(), xs.end());
  const size_t n = xs.size();
  return n % 2 ? xs[n / 2] : 0.5 * (xs[n / 2 - 1] + xs[n / 2]);
}

PairedSummary Summarise(const std::vector<double>& values, const std::string& estimator) {
  PairedSummary s;
  s.n = int(values.size());
  if (values.empty()) {
    s.estimator = estimator == kMedian ? kMedian : kMeanSe;
    s.value = s.se = s.lo = s.hi = kNaN;
    return s;
  }
  if (estimator == kMedian) {
    s.estimator = kMedian;
    s.value = Median(values);
    s.se = kNaN;
    auto [mn, mx] = std::minmax_element(values.begin(), values.end());
    s.lo = *mn;
    s.hi = *mx;
    return s;
  }
  s.estimator = kMeanSe;
  MeanSe m = MeanAndSe(values);
  s.value = m.mean;
  s.se = m.se;
  s.lo = std::isfinite(m.se) ? m.mean - m.se : kNaN;
  s.hi = std::isfinite(m.se) ? m.mean + m.se : kNaN;
  return s;
}

std::vector<double> SpeedupRatios(const std::vector<double>& baseline,
                                  const std::vector<double>& treatment) {
  std::vector<double> out;
  for (size_t i = 0; i < std::min(baseline.size(), treatment.size()); ++i)
    if (treatment[i] != 0) out.push_back(baseline[i] / treatment[i]);
  return out;
}

double RatioOfMeans(const std::vector<double>& baseline, const std::vector<double>& treatment) {
  if (baseline.empty() || treatment.empty()) return kNaN;
  double b = 0, t = 0;
  for (double x : baseline) b += x;
  for (double x : treatment) t += x;
  return (b / double(baseline.size())) / (t / double(treatment.size()));
}

std::vector<double> DeltaPct(const std::vector<double>& reference,
                             const std::vector<double>& method) {
  std::vector<double> out;
  for (size_t i = 0; i < std::min(reference.size(), method.size()); ++i)
    if (reference[i] != 0) out.push_back(100.0 * (method[i] / reference[i] - 1.0));
  return out;
}

std::vector<double> RowMeanDifferences(const float* baseline, const float* treatment, size_t count,
                                       size_t row_len) {
  std::vector<double> rows;
  if (row_len == 0) return rows;
  for (size_t start = 0; start + row_len <= count; start += row_len) {
    double sum = 0;
    for (size_t i = start; i < start + row_len; ++i)
      sum += double(treatment[i]) - double(baseline[i]);
    rows.push_back(sum / double(row_len));
  }
  return rows;
}

BootstrapCi BootstrapMeanCi(const std::vector<double>& units, int resamples, uint64_t seed) {
  BootstrapCi ci;
  ci.n = int(units.size());
  ci.resamples = resamples;
  ci.seed = seed;
  if (units.empty() || resamples < 1) {
    ci.mean = ci.lo = ci.hi = units.empty() ? kNaN : MeanAndSe(units).mean;
    return ci;
  }
  ci.mean = MeanAndSe(units).mean;
  // mt19937_64's output sequence is fixed by the standard; the index is taken by
  // multiply-shift of the top 32 bits (bias < n / 2^32, negligible), not by a
  // std::uniform_int_distribution whose algorithm differs between libraries.
  std::mt19937_64 rng(seed);
  const uint64_t n = units.size();
  std::vector<double> means(static_cast<size_t>(resamples));
  for (int r = 0; r < resamples; ++r) {
    double sum = 0;
    for (uint64_t i = 0; i < n; ++i) sum += units[size_t(((rng() >> 32) * n) >> 32)];
    means[size_t(r)] = sum / double(n);
  }
  std::sort(means.begin(), means.end());
  ci.lo = Percentile(means, 0.025);
  ci.hi = Percentile(means, 0.975);
  return ci;
}

int AbbaPosition(int arm, int arms, int64_t rep) { return rep % 2 == 0 ? arm : arms - 1 - arm; }

std::vector<int> AbbaOrder(int arms, int reps) {
  std::vector<int> order;
  for (int r = 0; r < reps; ++r)
    for (int pos = 0; pos < arms; ++pos) order.push_back(r % 2 == 0 ? pos : arms - 1 - pos);
  return order;
}

bool WithinControlTolerance(double control_ratio, double tolerance) {
  // The 1e-12 slack keeps a ratio printed as exactly 1 +- tolerance inside (0.95 - 1 is
  // -0.05000000000000004 in binary).
  return std::isfinite(control_ratio) && std::fabs(control_ratio - 1.0) <= tolerance + 1e-12;
}

}  // namespace headlab::paired
