// The two temporal smoothers of AAH-v3: FeatureEma over per-head base features (AAH §5.3)
// and ResolutionEma over the final per-head window indices (AAH §5.8). Torch-free.
#pragma once

#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "payload/methods/aah/hierarchy.h"

namespace headlab::aah {

// x_bar_t = alpha x_bar_{t-1} + (1 - alpha) x_t, initialised from the first observation
// (x_bar_0 = x_0, AAH §5.3). alpha = 0 is the no-feature-EMA control.
class FeatureEma {
 public:
  explicit FeatureEma(double alpha = 0.9) : alpha_(alpha) {}
  // Folds in one observation per head and returns the smoothed features.
  const std::vector<Vec>& Update(const std::vector<Vec>& x);
  bool initialised() const { return !value_.empty(); }
  const std::vector<Vec>& value() const { return value_; }

  Json ToJson() const { return value_; }
  Status FromJson(const Json& j, const std::string& what);

 private:
  double alpha_;
  std::vector<Vec> value_;  // empty until the first observation
};

// c_tilde_t = round(beta c_tilde_{t-1} + (1 - beta) c_t), initialised at the full-window
// index K - 1 so the first execution is ordinary full-span attention (AAH §5.8); results
// are clamped to [0, K - 1] (the implementation's zero-based indices).
//
// The paper's rule keeps the rounded index as its state. Since c_tilde_{t-1} and c_t lie
// in [0, K - 1], beta c_tilde_{t-1} + (1 - beta) c_t = c_t + beta (c_tilde_{t-1} - c_t) is
// within beta (K - 1) of c_t: when beta (K - 1) < 1/2 (beta = 0.15, K = 4: 0.45) the
// rounded index is always c_t and the smoothing changes nothing (docs/REPRODUCTIONS.md).
// `running` is the named variant that keeps s_t = beta s_{t-1} + (1 - beta) c_t unrounded
// and executes round(s_t) (aah.resolution_state = running); it obeys the same bound, so
// it smooths only when beta (K - 1) >= 1/2.
class ResolutionEma {
 public:
  ResolutionEma(int heads, int windows, double beta, bool running = false)
      : beta_(beta),
        k_(windows),
        running_(running),
        index_(size_t(heads), windows - 1),
        state_(size_t(heads), double(windows - 1)) {}
  // Folds in the per-head decisions c_h and returns the smoothed (executed) indices.
  const std::vector<int>& Update(const std::vector<int>& c);
  const std::vector<int>& index() const { return index_; }
  // The unrounded running state s (equals index() under the paper's rule).
  const std::vector<double>& state() const { return state_; }

  // Rounded: the index array; running: {"index": [...], "state": [...]}.
  Json ToJson() const;
  Status FromJson(const Json& j, const std::string& what);

 private:
  double beta_;
  int k_;
  bool running_;
  std::vector<int> index_;
  std::vector<double> state_;
};

}  // namespace headlab::aah
