// The no-op run kind.
#include "payload/exec/noop.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/metric_names.h"
#include "payload/exec/stop_flag.h"

namespace headlab {
namespace {

using Clock = std::chrono::steady_clock;

// Sleeps until `due` in short slices so SIGTERM is honoured promptly; returns false iff
// a stop was requested.
bool WaitUntil(Clock::time_point due) {
  while (!StopRequested()) {
    Clock::time_point now = Clock::now();
    if (now >= due) return true;
    std::this_thread::sleep_for(
        std::min<Clock::duration>(due - now, std::chrono::milliseconds(20)));
  }
  return false;
}

}  // namespace

Status RunNoop(const ExecConfig& config, EventSink* events) {
  const Clock::time_point t0 = Clock::now();
  events->Provenance({{"kind", "noop"}});
  // The metrics are spread over the wait, so a consumer sees a stream, not one burst.
  const int64_t n = config.noop.metrics;
  const auto total = std::chrono::milliseconds(config.noop.duration_ms);
  for (int64_t i = 0; i < n; ++i) {
    if (!WaitUntil(t0 + total * i / n)) return Status::Cancelled("noop stopped by signal");
    events->Metric(i + 1, kNoopMetricKey, double(i + 1));
  }
  if (!WaitUntil(t0 + total)) return Status::Cancelled("noop stopped by signal");
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  events->Summary({{kNoopMetricKey, double(n)}, {metric::kElapsedS, elapsed}});
  return Status::Ok();
}

}  // namespace headlab
