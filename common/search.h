// Random search and early stopping in a grid (schema/grid.md, "Search"): the `search`
// section's sample space, the deterministic draws, and the median stopping rule. Torch-
// and I/O-free: grid.cc expands the draws into runs, the coordinator applies the rule.
//
//   "search": {
//     "samples": 8,                                   // the sample budget: points drawn
//     "seed": 0,                                      // the draws' seed (optional, 0)
//     "space": {"train.lr": {"log_uniform": [1e-4, 1e-2]},
//               "train.warmup_steps": {"uniform": [0, 40]},      // integer keys round
//               "model.norm": {"choice": ["layernorm", "rmsnorm"]}},
//     "early_stop": {"rule": "median", "metric": "train.loss",
//                    "min_step": 50, "min_completed": 3}         // optional
//   }
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace headlab {

struct SearchDim {
  enum class Kind { kUniform, kLogUniform, kChoice };
  std::string key;  // a run-config key
  Kind kind = Kind::kUniform;
  double lo = 0, hi = 0;      // uniform, log_uniform: [lo, hi]
  bool integer = false;       // an integer key: draws round to the nearest integer
  std::vector<Json> choices;  // choice: the values (validated)
};

// The median stopping rule (Golovin et al., "Google Vizier", KDD 2017, §3.2.2): a running
// run stops at step s when its best value of `metric` up to s is worse than the median of
// the completed runs' running averages of `metric` up to s.
struct EarlyStop {
  std::string metric;     // a per-step metric the runs log, e.g. "train.loss"
  int64_t min_step = 0;   // no run stops before this step (a grace period)
  int min_completed = 3;  // nor before this many runs of its arm have succeeded
};

struct SearchSpec {
  int samples = 0;  // 0: no search section
  uint64_t seed = 0;
  std::vector<SearchDim> dims;  // in key order
  std::optional<EarlyStop> early_stop;
};

// Parses root["search"] (absent: samples 0) and validates it: every key a run-config key
// and every value of the space valid for it; log_uniform needs 0 < lo. Errors name `file`,
// the JSON path and what was expected.
StatusOr<SearchSpec> ParseSearch(const Json& root, const std::string& file);

// Returns `spec.samples` points, each an object {key: value} of every dim, drawn by
// mt19937_64(spec.seed) with our own mapping of its output to [0, 1) (the standard
// distributions differ between libraries): the same spec gives the same points anywhere.
// uniform: lo + u (hi - lo); log_uniform: exp(log lo + u (log hi - log lo)); integer keys
// round to the nearest integer; choice: one of the values, each equally likely.
std::vector<Json> DrawSamples(const SearchSpec& spec);

struct StepValue {
  int64_t step = 0;
  double value = 0;
};

// The median stopping rule: `current` is a running run's points of the metric, each of
// `completed` a succeeded run's; `lower_better` the metric's direction. Returns why the
// run should stop at the latest step of `current` ("train.loss best 3.1 by step 60 is
// worse than the median 2.4 of 3 completed runs' running averages"), or nullopt.
std::optional<std::string> MedianStoppingReason(
    const EarlyStop& rule, const std::vector<StepValue>& current,
    const std::vector<std::vector<StepValue>>& completed, bool lower_better);

}  // namespace headlab
