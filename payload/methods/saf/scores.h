// SAF head scores and candidate orders that need no tensors (§3.1, App. A.3): the
// output-aware scores (eq. 10-12) from accumulated sums, the Q/K gradient EMA (eq. 8-9),
// rank-sum and gradient-veto orders. Heads are indexed u = layer * H + head throughout.
// Torch-free; the tensor statistics (eq. 1, eq. 2) live in calibration.h.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace headlab::saf {

// The selection scores of §3.1 and App. A.3; candidates are taken by increasing score.
enum class ScoreKind {
  kVariance,      // eq. 1 (the default)
  kForwardKl,     // eq. 2
  kGradient,      // eq. 8-9
  kRankSum,       // rank(var) + rank(grad)
  kGradientVeto,  // var order, above-median grad last
  kMagnitude,     // projected-output magnitude
  kRedundancy,    // eq. 10
  kResidualCos,   // eq. 11
  kResidualRel,   // eq. 12
  kRandom,        // random heads, per-layer counts matched to the variance selection
  kGateTaylor,    // eq. 19, the pruning criterion (for saf.method prune controls)
  kRandomGlobal,  // random heads over the whole model, no per-layer matching (a control
                  // that can disagree with variance where per-layer matching cannot)
};

// Returns "variance", "forward_kl", "gradient", "rank_sum", "gradient_veto", "magnitude",
// "redundancy", "residual_cos", "residual_rel", "random", "gate_taylor", "random_global".
const char* ScoreKindName(ScoreKind k);
// Parses a ScoreKindName; InvalidArgument listing the known names otherwise.
StatusOr<ScoreKind> ParseScoreKind(const std::string& name);
// Returns true iff the score needs the output-aware pass (CalibrateOutputs).
bool NeedsOutputPass(ScoreKind k);
// SAF eq. 19: s_gate = I_lh / sqrt(sum_h' I_lh'^2) per layer from the importances I
// ([L H]); a layer whose importances are all 0 scores 0.
std::vector<double> NormalizeGateTaylor(const std::vector<double>& importance, int64_t heads);
// Returns true iff the score needs the Q/K gradient EMA from the training loop.
bool NeedsGradientEma(ScoreKind k);

// Sums accumulated by the output-aware pass (App. A.3) over N_f sequences and the sampled
// query positions.
struct OutputStats {
  int64_t layers = 0, heads = 0;
  std::vector<double> sq_norm;  // [L H] sum ||c_lh||^2
  std::vector<int64_t> dims;    // [L H] dim(c_lh)
  std::vector<double> gram;     // [L H H] sum <c_lh, c_lh'>
  std::vector<double> cos_sum;  // [L H] sum_{m,i} (1 - cos(Y, Y~_h))
  std::vector<double> rel_sum;  // [L H] sum_{m,i} ||C~ - C|| / max(||O||, 1e-8)
  int64_t rows = 0;             // (m, i) pairs per head
};

// s_mag = ||c|| / sqrt(dim c) (App. A.3).
std::vector<double> MagnitudeScores(const OutputStats& s);
// SAF eq. 10: s_red = -max_{h' != h} cos(c_lh, c_lh'); a zero vector has cosine 0.
std::vector<double> RedundancyScores(const OutputStats& s);
// SAF eq. 11: E_{m,i}[1 - cos(Y, Y~_h)].
std::vector<double> ResidualCosScores(const OutputStats& s);
// SAF eq. 12: E_{m,i}[||C~ - C|| / max(||O||, 1e-8)].
std::vector<double> ResidualRelScores(const OutputStats& s);

// SAF eq. 8-9: per update, q_lh = ||grad W^Q_lh||_F + ||grad W^K_lh||_F is divided by its
// mean over all heads and folded into an EMA with beta = 0.9, the first update taken as is.
class GradientEma {
 public:
  explicit GradientEma(double beta = 0.9) : beta_(beta) {}
  // Folds one update's q_lh (all L H heads, same length every call).
  void Update(const std::vector<double>& q);
  bool empty() const { return updates_ == 0; }
  int64_t updates() const { return updates_; }
  const std::vector<double>& scores() const { return s_; }
  // Replaces the state with `updates` folds that produced `scores` (a resumed run).
  void Restore(int64_t updates, std::vector<double> scores) {
    updates_ = updates;
    s_ = std::move(scores);
  }

 private:
  double beta_;
  int64_t updates_ = 0;
  std::vector<double> s_;
};

// Returns the indices of `s` by increasing value; ties keep index (layer-major) order.
std::vector<int64_t> IncreasingOrder(const std::vector<double>& s);
// Returns each element's rank by increasing value, 0 for the smallest (ties by index).
std::vector<double> Ranks(const std::vector<double>& s);
// s_sum = rank(s_var) + rank(s_grad) (App. A.3).
std::vector<double> RankSumScores(const std::vector<double>& var, const std::vector<double>& grad);
// The gradient-veto order: by increasing var, with heads whose grad is above the median
// moved after all others (each part keeping var order) (App. A.3).
std::vector<int64_t> GradientVetoOrder(const std::vector<double>& var,
                                       const std::vector<double>& grad);

}  // namespace headlab::saf
