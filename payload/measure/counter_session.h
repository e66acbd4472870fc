// CUPTI Range Profiler (user ranges, user replay): counter values per named range.
// Torch-free; compiled to an Unavailable stub where CUPTI is absent.
//
// One session collects one metric list. The body runs once per replay pass until CUPTI has
// scheduled every pass (metrics that do not fit one pass, and each nesting level, need
// their own); `reset` restores whatever the body changed (e.g. weights after an optimiser
// step) so every pass sees the same work. Ranges are opened through RangeMarker (the
// session installs itself as the active marker while the body runs), so ScopedRange inside
// the measured code lands here.
//
// Thread use: one thread calls Open/Run; Push/Pop may come from other threads while Run's
// body executes, ordered as the body orders them.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "payload/measure/range_marker.h"

namespace headlab::measure {

struct CounterOptions {
  std::vector<std::string> metrics;
  size_t max_ranges = 256;      // range occurrences per pass the counter image holds
  uint16_t nesting_levels = 4;  // deepest range nesting profiled (step/forward/attention/L)
  int max_passes = 64;          // refuse metric sets that need more replays than this
};

// Counter values of one range occurrence, by metric.
struct RangeCounters {
  std::string path;  // "step/forward/attention"
  std::map<std::string, double> values;
};

struct CounterRun {
  std::vector<RangeCounters> ranges;  // in the order the counter image holds them
  int passes = 0;                     // times the body ran (replay passes)
  double profiled_s = 0;              // wall time of all passes, resets included
  size_t dropped_ranges = 0;          // occurrences beyond max_ranges (values lost)
};

class CounterSession : public RangeMarker {
 public:
  // Opens a session on the current device. Unavailable("no GPU: ...") without a device,
  // PermissionDenied("no counter permission: ...") when the driver refuses counters,
  // Unavailable("CUPTI ...") for other CUPTI errors (a metric the chip lacks included).
  static StatusOr<std::unique_ptr<CounterSession>> Open(const CounterOptions& options);
  ~CounterSession() override;

  // Runs `body` under replay until every pass is submitted, calling `reset` before each
  // pass after the first (either may be empty), then decodes the counters.
  StatusOr<CounterRun> Run(const std::function<Status()>& body,
                           const std::function<Status()>& reset);

  void Push(const std::string& name) override;
  void Pop() override;

  struct Impl;

 private:
  explicit CounterSession(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace headlab::measure
