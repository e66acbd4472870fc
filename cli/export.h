// The table form of an experiment export (export.cc), separate so it can be unit-tested.
#pragma once

#include <vector>

#include "cli/table.h"
#include "common/json.h"

namespace headlab {

// Builds the CSV table of `runs` (objects with id, arm, status, attempts, config_hash,
// pair_key, config, summary): one row per run; columns are the run fields, then
// "config.<key>" for each run-config key in schema order (keys not in the schema follow,
// sorted), then "summary.<metric>" for every summary metric of any run, sorted.
void ExportTable(const Json& runs, TableRow* header, std::vector<TableRow>* rows);

// Appends one JSON line per metric point to `*out` (the --history export): {"experiment",
// "run", "arm", "attempt", "step", "key", "value", "time_s", "params"} for the points
// [[attempt, seq, step, key, value, time_s], ...] of GET /runs/ID/metrics.
void AppendHistoryLines(int64_t experiment, const Json& run, const Json& points, std::string* out);

}  // namespace headlab
