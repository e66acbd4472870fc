// Read models for the HTTP API's GET routes (schema/http_api.md): each function runs a
// few SELECTs on a connection (a read-only one on HTTP threads) and returns the JSON body.
#pragma once

#include <cstdint>
#include <string>

#include "common/json.h"
#include "common/status.h"
#include "coordinator/db.h"

namespace headlab::coord {

// {experiments: N, runs_by_status: {status: n}}; the caller adds the live workers.
Json StatusView(Db* db);
// Every worker row: [{id,name,host,pid,version,slots,devices,state,last_seen_at}].
Json WorkerRowsView(Db* db);
// [{id,name,created_at,counts:{queued,running,succeeded,failed,lost,cancelled},total}].
Json ExperimentsView(Db* db);
StatusOr<Json> ExperimentView(Db* db, int64_t id);
// [{id,idx,arm,status,attempts,max_attempts,config_hash,pair_key,seed,worker,reused_from,
//   error,summary}] in grid order.
StatusOr<Json> ExperimentRunsView(Db* db, int64_t id);
// {id,...,config,attempts:[...],summary,provenance,artifacts}.
StatusOr<Json> RunView(Db* db, int64_t id);
// {points: [[attempt, seq, step, key, value, time_s], ...]} with seq > after (all attempts
// unless attempt > 0), at most `limit` points, ordered by (attempt, seq).
StatusOr<Json> RunMetricsView(Db* db, int64_t id, const std::string& key, int64_t after,
                              int attempt, int64_t limit);

}  // namespace headlab::coord
