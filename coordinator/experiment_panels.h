// The experiment page's panels, answered in the coordinator (GET
// /api/v1/experiments/ID/panels/NAME, schema/http_api.md "Panels"): fixed, bounded reads
// that the dashboard ran before as SQL through POST /query, one child process each. At
// 10^5 runs on a loaded machine a child's start and its nice-10 share of the CPU were most
// of a panel's time; here the same reads run on the read pool's own connection with bound
// parameters, over a sample of grid positions (the (experiment_id, idx) index), and a
// finished experiment's answers are kept in memory (panel_cache.h).
//
//    overlay  ?n=N                      the runs a page overlays first (N <= kMaxOverlayRuns):
//                                       running, then succeeded, failed, lost, cancelled,
//                                       queued, each status an index range; with the
//                                       metric keys each logged (a reused run's: its source's)
//    arms     ?key=METRIC&runs=N[&by=K]* mean, mean of squares and count of METRIC per arm x
//                                       the config values of the keys K, per step, over a
//                                       sample of N grid positions (N <= kMaxPanelSample)
//    scatter  ?x=K&y=METRIC&n=N[&by=K]* the config value K and summary METRIC of a sample
//                                       of N runs, with their arm and group values
//
// Sample: grid positions k * kSamplePrime mod N_idx for k = 0 .. n-1 (N_idx one past the
// largest idx, kSamplePrime a prime larger than any N_idx). They are distinct
// (multiplication by a prime coprime to N_idx permutes 0..N_idx-1), and every period d of
// the grid that divides N_idx gets an equal share, since k * kSamplePrime mod d runs
// through 0..d-1 as k does: with 2 arms x 2 learning rates (period 4) each (arm, rate) has
// a quarter of the sample, where a stride through the grid in order would meet one arm
// and rate only. A 600-run sample draws an arm's mean ± sd as the whole arm's; reading
// the sample through the (experiment_id, idx) index spares a filter over every run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "coordinator/db.h"

namespace headlab::coord {

inline constexpr int64_t kSamplePrime = 2654435761;
// The largest sample a panel reads, the most runs an overlay starts with, the most keys a
// panel breaks arms down by.
inline constexpr int64_t kMaxPanelSample = 5000;
inline constexpr int64_t kMaxOverlayRuns = 20;
inline constexpr size_t kMaxPanelByKeys = 4;
// The most metric points the arm panel reads (past it the answer says truncated: a
// sample of 600 runs of 10^6 points each must not take minutes) and the most rows any
// panel answers.
inline constexpr int64_t kMaxArmPoints = 2000000;
inline constexpr int64_t kMaxPanelRows = 100000;

// The grid positions of a sample of at most `n` of `n_idx` positions (the rule above).
std::vector<int64_t> SampledPositions(int64_t n_idx, int64_t n);

// A parsed panel request: which panel and its parameters (the grammar above).
struct PanelRequest {
  std::string panel;            // overlay | arms | scatter
  int64_t n = 0;                // runs (arms), n (overlay, scatter)
  std::string key;              // arms: the metric
  std::string x, y;             // scatter
  std::vector<std::string> by;  // config keys
  // What names the answer among an experiment's (the cache's key): panel and parameters.
  std::string CacheKey() const;
};

// Parses `panel` and its query string. InvalidArgument names the parameter and what it
// expects (an unknown panel, a missing or malformed key, a size out of range).
StatusOr<PanelRequest> ParsePanelRequest(const std::string& panel, const std::string& query);

// The panel's answer: {experiment, panel, rows: [...], truncated, ...} (schema/http_api.md).
// NotFound for an unknown experiment.
StatusOr<Json> PanelView(Db* db, int64_t experiment, const PanelRequest& req);

}  // namespace headlab::coord
