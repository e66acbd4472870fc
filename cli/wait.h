// The progress display of `headlab wait` (wait.cc), separate so it can be unit-tested.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"

namespace headlab {

struct Progress {
  int64_t total = 0;
  int64_t succeeded = 0, failed = 0, running = 0, queued = 0, lost = 0, cancelled = 0;

  // Returns true iff no run is queued or running (and every run is accounted for).
  bool Finished() const;
  // Returns true iff every run succeeded.
  bool AllSucceeded() const { return total > 0 && succeeded == total; }
};

// Reads {counts:{...}, total} from GET /api/v1/experiments/ID (missing counts are 0; a
// missing total is the sum of the counts).
Progress ProgressFromExperiment(const Json& exp);

// Returns "[#####-----] 3/6 done  succeeded 2  failed 1  running 2  queued 1  12s" with a
// bar of `bar_width` cells (succeeded '#', failed/lost/cancelled 'x', running '>'), then
// "  ETA ≈ 4m10s" when `eta_s` >= 0.
std::string ProgressLine(const Progress& p, double elapsed_s, int bar_width = 30,
                         double eta_s = -1);

// What the ETA is estimated from: the mean duration of the experiment's succeeded attempts
// (< 0 when none yet) and the elapsed seconds of each running attempt.
struct Timing {
  double mean_s = -1;
  std::vector<double> running_elapsed_s;
};

// Returns the estimated seconds until no run is queued or running, as the dashboard
// estimates it: each queued run takes mean_s, each running one what is left of mean_s,
// and the sum is spread over the runs running now. 0 when nothing is left, -1 when no
// attempt has succeeded yet (no rate to go on).
double EstimateRemainingS(const Progress& p, const Timing& t);

// Returns "45s", "4m10s", "2h05m".
std::string FormatDuration(double s);

}  // namespace headlab
