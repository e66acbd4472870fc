// Run search across experiments (GET /api/v1/runs, schema/http_api.md): by experiment,
// status, tag (on the run or on its experiment) and config value.
//
//    query := [experiment=ID] [&status=S1,S2] [&tag=T1,T2] [&where=COND;COND...] [&limit=N]
//    COND  := KEY OP VALUE     KEY a config key ("train.lr", "params.hidden");
//             OP one of = != < <= > >=; VALUE a JSON number/bool/string literal, else text
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "coordinator/db.h"

namespace headlab::coord {

inline constexpr int64_t kDefaultSearchLimit = 1000;
inline constexpr int64_t kMaxSearchLimit = 100000;

struct ConfigCondition {
  std::string key;  // dotted
  std::string op;   // = != < <= > >=
  Json value;       // number, bool or string
};

struct RunFilter {
  int64_t experiment = 0;  // 0 = every experiment
  std::vector<std::string> statuses;
  std::vector<std::string> tags;  // all must match (each on the run or its experiment)
  std::vector<ConfigCondition> where;
  int64_t limit = kDefaultSearchLimit;
};

// Parses a comma list of run statuses; InvalidArgument names the unknown one.
StatusOr<std::vector<std::string>> ParseStatusList(const std::string& list);

// Parses "train.lr<=1e-3". InvalidArgument names the condition and what is wrong.
StatusOr<ConfigCondition> ParseCondition(const std::string& text);

// Parses the query string (the grammar above).
StatusOr<RunFilter> ParseRunFilter(const std::string& query);

// Returns {runs: [{id, experiment_id, experiment_name, idx, arm, status, attempts,
// config_hash, pair_key, seed, worker, worker_name, error, updated_at, tags, summary}],
// truncated} ordered by run id, at most filter.limit runs.
StatusOr<Json> SearchRunsView(Db* db, const RunFilter& filter);

}  // namespace headlab::coord
