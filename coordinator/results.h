// Results of an experiment: per-arm aggregates of the summary metrics and the grid's
// paired comparisons (docs/DESIGN.md, Measurement: within-pair values, mean +- SE).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/paired_estimators.h"
#include "common/status.h"
#include "coordinator/db.h"

namespace headlab::coord {

// The default estimator's name as stored in paired_stats.estimator (mean +- SE of the
// within-pair values); paired timing legs on one device use paired::kMedian instead.
inline constexpr const char* kPairedEstimator = paired::kMeanSe;

using paired::MeanAndSe;
using paired::MeanSe;

// Bootstrap resamples of the per-token log-probability CIs.
inline constexpr int kBootstrapResamples = 2000;

// The answer format of ComputeResults, stored beside each stored answer
// (coordinator/results_store.h): bump it whenever a change of this code changes the answer
// for the same database, so that answers the older code stored are computed again.
inline constexpr int kResultsFormat = 2;

// What a caller may choose about an answer (GET .../results?by=KEY,KEY&level=L).
struct ResultsOptions {
  // Config keys to break arms and comparisons down by, beyond the grid's axes that pair_by
  // leaves out (those always are: a comparison never pools levels of an axis it does not
  // pair on).
  std::vector<std::string> by;
  double level = 0.95;  // the two-sided confidence level of each comparison's `ci`

  // True for the answer that is stored (results_store.h): no extra keys, 95%.
  bool IsDefault() const { return by.empty() && level == 0.95; }
};

// Parses the `by` (comma-separated config keys) and `level` query parameters; InvalidArgument
// naming the parameter for an unknown key (with the closest known) or a level outside (0, 1).
StatusOr<ResultsOptions> ParseResultsOptions(const std::string& by, const std::string& level);

// Returns the within-pair value of `stat` for baseline b and treatment t:
// delta_pct = 100 * (t / b - 1) (docs/DESIGN.md: dPPL% = 100 * (p_rep / p_ord - 1)),
// diff = t - b, ratio = t / b, speedup = b / t (SAF App. C.4: t_ord / t_rep). nullopt for
// an unknown stat or division by zero.
std::optional<double> PairValue(const std::string& stat, double b, double t);

// Computes {by, status_counts, arms: [...], comparisons: [...]} (schema/http_api.md) from
// `db`, which may be a read-only connection. Arms and comparisons are broken down by the
// strata keys (`by`: options.by, then the grid's axes outside pair_by): one arm entry per
// arm and stratum, one comparison entry per comparison and stratum, each with its `by`
// values; a comparison's name then carries its stratum ("dppl [train.lr=0.001]"). Each comparison
// carries n, the estimator (median for paired timing legs on single devices, else mean +- SE), the
// device(s) from provenance, the spread, the zero-replacement control and contention flag
// (pair.control runs), the bootstrap CI of paired per-token log-probability differences (eval.*
// metrics, from the runs' logprobs artifacts) and the measured FLOPs ratios or "unmeasured".
// NotFound for an unknown experiment.
StatusOr<Json> ComputeResults(Db* db, int64_t experiment, const ResultsOptions& options = {});

// Replaces the experiment's rows in paired_stats with `results.comparisons`
// (schema/002_paired_details.sql says where each field goes).
Status SavePairedStats(Db* db, int64_t experiment, const Json& results);

}  // namespace headlab::coord
