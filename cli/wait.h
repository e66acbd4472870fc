// The progress display of `headlab wait` (wait.cc), separate so it can be unit-tested.
#pragma once

#include <string>

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
// bar of `bar_width` cells (succeeded '#', failed/lost/cancelled 'x', running '>').
std::string ProgressLine(const Progress& p, double elapsed_s, int bar_width = 30);

}  // namespace headlab
