// Multiplicity correction for a family of paired comparisons (docs/REPRODUCTIONS.md reads
// each paper's comparisons as one family): two-sided paired t-test p-values and Holm's
// step-down adjustment (Holm 1979), which controls the family-wise error rate at alpha
// without assuming independence. Torch-free and I/O-free.
#pragma once

#include <cstdint>
#include <vector>

namespace headlab::paired {

// Returns the two-sided p-value P(|T| >= |t|) of Student's t with df > 0 degrees of freedom,
// from the regularised incomplete beta function: p = I_{df/(df+t^2)}(df/2, 1/2). NaN for
// NaN input or df <= 0.
double StudentTTwoSidedP(double t, double df);

// Returns the two-sided p-value of the one-sample t-test of mean 0 on paired differences
// (t = mean / SE, df = n - 1; paired_estimators.h MeanAndSe). NaN when n < 2; 0 when
// every difference is the same non-zero value, 1 when all are zero.
double PairedTTestP(const std::vector<double>& differences);

// Holm's adjusted p-values, in the input's order: with p sorted ascending, p_(i) is
// adjusted to max over j <= i of min(1, (m - j + 1) p_(j)) (i, j from 1). A comparison is
// rejected at family-wise level alpha iff its adjusted p <= alpha. NaN inputs stay NaN and
// do not count in m.
std::vector<double> HolmAdjusted(const std::vector<double>& p);

}  // namespace headlab::paired
