// Measured FLOPs per named range: a CounterSession with the FLOP metrics, assembled by the
// formulas of flop_formula.h. Torch-free. The answer is a count or an explicit
// `unmeasured` reason (no GPU, no counter permission, CUPTI refusing), never a guess.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "common/json.h"
#include "common/status.h"
#include "payload/measure/counter_session.h"
#include "payload/measure/flop_formula.h"

namespace headlab::measure {

struct FlopReport {
  std::string unmeasured;                    // why there are no counts; "" when measured
  std::string tensor_metric_set;             // the TensorMetricSet used
  std::map<std::string, FlopCounts> ranges;  // by range path, occurrences summed
  std::map<std::string, int64_t> occurrences;
  int passes = 0;             // replay passes the metrics needed
  double profiled_s = 0;      // wall time of all passes
  size_t dropped_ranges = 0;  // > 0 means the counter image was too small (reported, not hidden)

  bool measured() const { return unmeasured.empty(); }
};

// Runs `body` under counter replay (CounterSession::Run) and returns the FLOPs of every
// range it opened. Unavailable and PermissionDenied from CUPTI become report.unmeasured;
// errors of `body` or `reset` are returned as they are.
StatusOr<FlopReport> MeasureFlops(const std::function<Status()>& body,
                                  const std::function<Status()>& reset,
                                  const TensorMetricSet& tensor, CounterOptions options = {});

// Sums counter values by range path (a range opened N times gives one entry).
std::map<std::string, std::map<std::string, double>> SumByPath(
    const std::vector<RangeCounters>& ranges);

// {"status":"measured"|"unmeasured", "reason"?, "tensor_metric_set", "passes",
//  "profiled_s", "dropped_ranges", "ranges": {path: {fp32, half, fp64, tensor, total,
//  occurrences}}}
Json FlopReportJson(const FlopReport& report);

}  // namespace headlab::measure
