// Read-only SQL for users (POST /api/v1/query, `headlab query`). Read-only by
// construction, three times over: the connection is opened SQLITE_OPEN_READONLY, an
// authorizer allows only reads (SELECT, reading columns, functions, read-only PRAGMAs),
// and SQLITE_DBCONFIG_DEFENSIVE is on. A progress handler stops a query after the limit.
#pragma once

#include <chrono>
#include <string>

#include "common/json.h"
#include "common/status.h"

namespace headlab::coord {

struct QueryLimits {
  std::chrono::milliseconds time{5000};
  size_t max_rows = 100000;
};

// Runs one SQL statement on `db_path` and returns {columns: [...], rows: [[...]],
// truncated: bool}. Writes, ATTACH, write PRAGMAs and multiple statements are
// InvalidArgument starting "read-only"; a statement over the time limit is
// InvalidArgument naming the limit; SQL errors are InvalidArgument with SQLite's message.
StatusOr<Json> RunReadOnlyQuery(const std::string& db_path, const std::string& sql,
                                const QueryLimits& limits = QueryLimits());

}  // namespace headlab::coord
