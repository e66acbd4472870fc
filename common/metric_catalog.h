// Every metric name the built-in run kinds report, read at build time from the headers that
// define them (common/metric_names.h and each method's <m>_metrics.h;
// cmake/metric_names.cmake generates the list), so a grid's comparison on a misspelled
// metric is refused at submit instead of yielding zero pairs.
#pragma once

#include <string>
#include <vector>

namespace headlab {

// Returns the names of the metric headers in header order; prefixes end with '.'
// ("aah.bucket.", "passkey.acc.").
const std::vector<std::string>& BuiltinMetricNames();

// Returns true iff `name` is a built-in metric: a name of the list, a prefix of it
// followed by more ("aah.bucket.64"), or a name followed by '.' and a qualifier
// ("bench.prefill_ms.l16.b1", "bench.update_ms.max").
bool IsBuiltinMetric(const std::string& name);

// Which way a metric improves, from its name: -1 lower is better (losses, perplexities,
// times "_s"/"_ms", bytes, KL divergences, FLOPs), +1 higher is better (accuracies,
// throughput "per_s", MFU, speedups), 0 when the name does not say (counts, ratios of
// routing, settings).
int BetterDirection(const std::string& metric);

}  // namespace headlab
