// One page of an experiment's runs, sorted and filtered in SQL (GET
// /api/v1/experiments/ID/runs?limit=N..., schema/http_api.md "Runs pages"), so that a
// dashboard showing 100,000 runs moves only the rows in view.
//
//    query  := limit=N [&offset=O] [&sort=KEY] [&desc=1] [&status=S1,S2] [&q=TERM;TERM...]
//              [&keys=1]
//    KEY    := id | idx | arm | status | attempts | worker | pair | device | tags
//            | param:CONFIG_KEY | summary:METRIC_KEY
//    TERM   := CONFIG_KEY OP VALUE     (as in run search: train.lr<=1e-3; spaces allowed)
//            | TEXT                    (case-insensitive substring of #id, arm, status,
//                                       worker, pair key, config hash, the varying values
//                                       as KEY=VALUE, tags and note)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "coordinator/db.h"
#include "coordinator/run_search.h"

namespace headlab::coord {

// The largest page: a client never moves more than this many rows in one answer.
inline constexpr int64_t kMaxRunsPage = 1000;

struct RunsPageRequest {
  int64_t offset = 0;
  int64_t limit = 100;
  std::string sort = "idx";
  bool desc = false;
  std::vector<std::string> statuses;
  std::vector<ConfigCondition> where;  // TERMs with an operator
  std::vector<std::string> text;       // the other TERMs, lower-cased
  bool keys = false;                   // also list the experiment's summary keys
};

// Returns true iff `query` asks for a page (has limit or offset): without either the
// route answers the whole list as before.
bool WantsRunsPage(const std::string& query);

// Parses the query string (the grammar above). InvalidArgument names the parameter.
StatusOr<RunsPageRequest> ParseRunsPage(const std::string& query);

// {runs: [rows as ExperimentRunsView's, plus devices], total (runs of the experiment),
//  matched (runs passing the filter), offset, limit, summary_keys? (keys=1)}.
StatusOr<Json> RunsPageView(Db* db, int64_t experiment, const RunsPageRequest& req);

}  // namespace headlab::coord
