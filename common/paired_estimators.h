// Paired estimators (docs/DESIGN.md, Measurement; SAF §4, App. C.4, C.5, D.3): within-pair
// ratios summarised by their median (single-GPU timing) or mean +- SE (multi-GPU,
// finetuning), ΔPPL% per seed, cluster-bootstrap CIs of paired per-token log-probability
// differences, and the ABBA leg order of paired timing. Torch-free and I/O-free: the
// coordinator (results.cc) and tests call these on plain numbers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace headlab::paired {

// Estimator names as stored in paired_stats.estimator.
inline constexpr const char* kMeanSe = "mean_se_paired";     // mean of within-pair values +- SE
inline constexpr const char* kMedian = "median_paired";      // median of within-pair values
inline constexpr const char* kBootstrap = "bootstrap_rows";  // percentile bootstrap over rows

struct MeanSe {
  double mean = 0;
  double se = 0;  // NaN when n < 2 (a single value has no spread)
  int n = 0;
};

// Returns the mean and its standard error: sample sd with n-1 in the denominator,
// SE = sd / sqrt(n). Empty input gives n = 0 and NaN mean.
MeanSe MeanAndSe(const std::vector<double>& xs);

// Returns the `p` quantile of Student's t with `df` >= 1 degrees of freedom, exact to
// double precision (Boost.Math); NaN for df < 1 or p outside (0, 1).
double StudentTQuantile(double p, int64_t df);

// Returns true iff `level` is a usable two-sided confidence level: 0 < level < 1.
bool IsConfidenceLevel(double level);

// Returns a level as people write it: "95%", "99%", "97.5%".
std::string LevelLabel(double level);

// The two-sided confidence interval of a mean from n paired values at `level` (0.95 for
// the 95% CI): mean +- t(1 - (1 - level) / 2; n - 1) * SE.
struct Interval {
  double lo, hi;
};
// Returns it, or NaNs when n < 2 or `level` is not a confidence level.
Interval MeanCi(const MeanSe& m, double level);

// Returns the median (mean of the middle two for even n); NaN for empty input.
double Median(std::vector<double> xs);

// A summary of n within-pair values: `value` is the estimator's point estimate; `se` is
// the SE (mean_se) or NaN (median); [lo, hi] is the spread shown beside it: mean +- SE for
// mean_se, the smallest and largest value for median (n is small: 3-8 legs).
struct PairedSummary {
  std::string estimator;
  int n = 0;
  double value = 0;
  double se = 0;
  double lo = 0, hi = 0;
};

// Summarises within-pair values with `estimator` (kMeanSe or kMedian; anything else is
// treated as kMeanSe). Empty input: n = 0, NaN everywhere.
PairedSummary Summarise(const std::vector<double>& values, const std::string& estimator);

// Returns baseline[i] / treatment[i] per pair: SAF's speedup t_ord / t_rep (App. C.4:
// s = (1/R) sum_r t_ord,r / t_rep,r). Pairs with a zero treatment are skipped.
std::vector<double> SpeedupRatios(const std::vector<double>& baseline,
                                  const std::vector<double>& treatment);

// Returns sum(baseline) / sum(treatment): the ratio of mean times, which App. C.4 shows
// beside (not instead of) the mean of within-pair ratios. NaN for empty input.
double RatioOfMeans(const std::vector<double>& baseline, const std::vector<double>& treatment);

// Returns 100 * (method[i] / reference[i] - 1) per seed (SAF §4: ΔPPL = 100(p_rep/p_ord - 1)).
std::vector<double> DeltaPct(const std::vector<double>& reference,
                             const std::vector<double>& method);

// Returns, for each row of `row_len` tokens, the mean of treatment - baseline per-token
// log-probabilities (the logprobs artifact: rows in EvalBatch order). The arrays must have
// the same length, a multiple of row_len.
std::vector<double> RowMeanDifferences(const float* baseline, const float* treatment, size_t count,
                                       size_t row_len);

struct BootstrapCi {
  int n = 0;              // resampled units (rows)
  double mean = 0;        // the mean over units
  double lo = 0, hi = 0;  // percentile 95% CI of the mean
  int resamples = 0;
  uint64_t seed = 0;
};

// Percentile bootstrap 95% CI of the mean of `units` (whole rows, since tokens of one
// sequence are correlated), `resamples` resamples drawn by mt19937_64(seed) — the same
// seed gives the same CI on every platform (no std::*_distribution). NaN for empty input.
BootstrapCi BootstrapMeanCi(const std::vector<double>& units, int resamples, uint64_t seed);

// Returns the ABBA leg order of `arms` arms over `reps` repetitions as arm indices:
// repetition r runs the arms in ascending order when r is even and descending when odd
// (A B, B A, A B, ... — for three arms A B C, C B A, ...), so a linear drift in the
// machine's speed adds the same total to every arm over each two repetitions.
std::vector<int> AbbaOrder(int arms, int reps);

// Returns the position of `arm` (0-based) in repetition `rep` of AbbaOrder(arms, ...).
int AbbaPosition(int arm, int arms, int64_t rep);

// Returns true iff a zero-replacement control's ratio stays within `tolerance` of 1.00
// (|ratio - 1| <= tolerance); false (contended) for a NaN ratio.
bool WithinControlTolerance(double control_ratio, double tolerance);

}  // namespace headlab::paired
