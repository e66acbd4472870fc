// Read models for the HTTP API's GET routes (schema/http_api.md): each function runs a
// few SELECTs on a connection (a read-only one on HTTP threads) and returns the JSON body.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "coordinator/db.h"

namespace headlab::coord {

// Returns the SQLite JSON path of a dotted config key, each component quoted:
// "params.my-key" -> $."params"."my-key".
std::string ConfigJsonPath(const std::string& dotted);

// A column of the current row as JSON (NULL -> null, a non-finite REAL -> null).
Json ColumnJson(const Stmt& s, int col);
// Steps `s` to the end; one object per row, keys = column names.
Json RowsJson(Stmt& s);
// Binds a JSON string, number or bool (as 0/1) at `at`; anything else as NULL.
void BindJson(Stmt& s, int at, const Json& v);
// SQL of the varying config values of run row `r` (json_extract with the paths bound at
// first_bind, first_bind + 1, ...), or NULL when there are none; VaryingParams turns the
// column into {key: value}.
std::string VaryingValuesSql(size_t n, int first_bind);
Json VaryingParams(const Json& extracted, const std::vector<std::string>& varying);

// {experiments: N, runs_by_status: {status: n}}; the caller adds the live workers.
Json StatusView(Db* db);
// Every worker row: [{id,name,host,pid,version,slots,devices,state,last_seen_at}].
Json WorkerRowsView(Db* db);
// [{id,name,created_at,counts:{queued,running,succeeded,failed,lost,cancelled},total,tags}].
Json ExperimentsView(Db* db);
// {id,name,...,grid,counts,total,varying:[dotted keys the grid varies],tags,note}.
StatusOr<Json> ExperimentView(Db* db, int64_t id);
// [{id,idx,arm,status,attempts,max_attempts,config_hash,pair_key,seed,worker,worker_name,
//   reused_from,error,params:{varying key: value},summary,tags,note?}] in grid order.
StatusOr<Json> ExperimentRunsView(Db* db, int64_t id);
// {id,experiment_id,experiment_name,...,worker_name,config,config_notable,tags,note,
//  attempts:[...{worker_name}],summary,provenance,artifacts,events:[{at,kind,...}]}.
StatusOr<Json> RunView(Db* db, int64_t id);
// Which points of a run GET /runs/ID/metrics returns: seq > after (all attempts unless
// attempt > 0), (attempt, seq) > (cursor_attempt, cursor_seq), at most `limit` of them,
// ordered by (attempt, seq). A run that reuses another's result (reused_from) answers that
// run's points.
struct MetricsPage {
  std::string key;  // "" = every key
  int64_t after = -1;
  int attempt = 0;
  int64_t cursor_attempt = 0, cursor_seq = -1;
  int64_t limit = 0;
};
// Returns the JSON text {points: [[attempt, seq, step, key, value, time_s], ...], next:
// "ATTEMPT:SEQ" | null}, written point by point (never a whole tree in memory); `next`
// is the cursor of the following page when this one is full.
StatusOr<std::string> RunMetricsView(Db* db, int64_t id, const MetricsPage& page);

}  // namespace headlab::coord
