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

}  // namespace headlab
