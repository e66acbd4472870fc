// Run kind "noop": the declared no-op run used by orchestration benchmarks and tests. It
// trains nothing: it emits noop.metrics metric events (key "noop.value"), waits
// noop.duration_ms, and emits a summary.
#pragma once

#include "common/status.h"
#include "payload/exec/events.h"
#include "payload/exec/exec_config.h"

namespace headlab {

inline constexpr const char* kNoopMetricKey = "noop.value";

// Returns Ok, or Cancelled when a stop was requested during the wait.
Status RunNoop(const ExecConfig& config, EventSink* events);

}  // namespace headlab
