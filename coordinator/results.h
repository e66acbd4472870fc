// Results of an experiment: per-arm aggregates of the summary metrics and the grid's
// paired comparisons (DESIGN.md, Measurement: within-pair values, mean +- SE).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "coordinator/db.h"

namespace headlab::coord {

// The estimator's name as stored in paired_stats.estimator.
inline constexpr const char* kPairedEstimator = "mean_se_paired";

struct MeanSe {
  double mean = 0;
  double se = 0;   // NaN when n < 2 (a single value has no spread)
  int n = 0;
};

// Returns the mean and its standard error: sample sd with n-1 in the denominator,
// SE = sd / sqrt(n). Empty input gives n = 0 and NaN mean.
MeanSe MeanAndSe(const std::vector<double>& xs);

// Returns the within-pair value of `stat` for baseline b and treatment t:
// delta_pct = 100 * (t / b - 1) (DESIGN.md: dPPL% = 100 * (p_rep / p_ord - 1)),
// diff = t - b, ratio = t / b. nullopt for an unknown stat or division by zero.
std::optional<double> PairValue(const std::string& stat, double b, double t);

// Computes {arms: [...], comparisons: [...]} (schema/http_api.md) from `db`, which may be
// a read-only connection. NotFound for an unknown experiment.
StatusOr<Json> ComputeResults(Db* db, int64_t experiment);

// Replaces the experiment's rows in paired_stats with `results.comparisons`.
Status SavePairedStats(Db* db, int64_t experiment, const Json& results);

}  // namespace headlab::coord
