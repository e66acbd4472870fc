// Read-only SQL for users (POST /api/v1/query, `headlab query`). Read-only by
// construction, three times over: the connection is opened SQLITE_OPEN_READONLY, an
// authorizer allows only reads (SELECT, reading columns, read-only PRAGMAs and the
// functions of an allow-list), and SQLITE_DBCONFIG_DEFENSIVE is on. Bounded: a progress
// handler and the row loop stop a query after the time limit, which covers building the
// answer; the answer stops at a row and a byte cap. The progress handler runs between VM
// steps, never inside one function call, so what a single call can cost is bounded by its
// inputs: no string or blob longer than kMaxQueryValueBytes (SQLITE_LIMIT_LENGTH; the
// quadratic functions, instr(X, Y) and replace(X, Y, Z), then stay near a second on any
// input) and no LIKE or GLOB pattern longer than kMaxQueryPatternBytes. Functions outside the
// allow-list (those that expose SQLite's internals, e.g. fts3_tokenizer, which returns a pointer
// into the library, or sqlite_compileoption_get, load_extension) are refused as "read-only:
// function F".
#pragma once

#include <chrono>
#include <string>

#include "common/json.h"
#include "common/status.h"

namespace headlab::coord {

// The longest string or blob a query may make or read (a longer stored value is an error
// naming the limit), and the longest LIKE/GLOB pattern.
constexpr int kMaxQueryValueBytes = 256 << 10;
constexpr int kMaxQueryPatternBytes = 1000;

struct QueryLimits {
  std::chrono::milliseconds time{5000};
  size_t max_rows = 100000;
  size_t max_bytes = size_t(32) << 20;  // of the answer's JSON, about
};

// Returns true iff the query endpoint lets SQL call function `name` (case-insensitive).
bool IsAllowedQueryFunction(const std::string& name);

// Runs one SQL statement on `db_path` and returns {columns: [...], rows: [[...]],
// truncated: bool, truncated_by: "rows" | "bytes" | null}. Writes, ATTACH, write PRAGMAs and
// multiple statements are InvalidArgument starting "read-only"; a statement over the time limit is
// InvalidArgument naming the limit; SQL errors are InvalidArgument with SQLite's message.
StatusOr<Json> RunReadOnlyQuery(const std::string& db_path, const std::string& sql,
                                const QueryLimits& limits = QueryLimits());

}  // namespace headlab::coord
