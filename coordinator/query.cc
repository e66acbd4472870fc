// Read-only query execution.
#include "coordinator/query.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>

#include "coordinator/db.h"

namespace headlab::coord {
namespace {

// PRAGMAs that only read (with or without an argument naming a table or index).
const std::set<std::string>& ReadOnlyPragmas() {
  static const std::set<std::string> k = {
      "table_info",  "table_xinfo",      "table_list",     "index_list",    "index_info",
      "index_xinfo", "foreign_key_list", "collation_list", "function_list", "database_list"};
  return k;
}
// PRAGMAs that read when given no argument and write when given one.
const std::set<std::string>& ReadOnlyWithoutArgPragmas() {
  static const std::set<std::string> k = {"user_version", "schema_version", "page_count",
                                          "page_size",    "journal_mode",   "encoding"};
  return k;
}

// Functions SQL may call: SQLite's core scalar, aggregate, window, date/time, math and
// JSON functions, minus those that reveal internals or touch anything outside the
// statement (sqlite_*, fts3_tokenizer, load_extension, changes, last_insert_rowid, ...).
const std::set<std::string>& AllowedFunctions() {
  static const std::set<std::string> k = {
      // core scalar
      "abs", "char", "coalesce", "concat", "concat_ws", "format", "glob", "hex", "ifnull", "iif",
      "instr", "length", "like", "likelihood", "likely", "lower", "ltrim", "max", "min", "nullif",
      "octet_length", "printf", "quote", "random", "randomblob", "replace", "round", "rtrim",
      "sign", "substr", "substring", "trim", "typeof", "unhex", "unicode", "unlikely", "upper",
      "zeroblob",
      // date and time
      "date", "time", "datetime", "julianday", "unixepoch", "strftime", "timediff", "current_date",
      "current_time", "current_timestamp",
      // aggregate
      "avg", "count", "group_concat", "string_agg", "sum", "total", "median", "percentile",
      "percentile_cont", "percentile_disc",
      // window
      "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead",
      "first_value", "last_value", "nth_value",
      // math
      "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "ceil", "ceiling", "cos", "cosh",
      "degrees", "exp", "floor", "ln", "log", "log10", "log2", "mod", "pi", "pow", "power",
      "radians", "sin", "sinh", "sqrt", "tan", "tanh", "trunc",
      // JSON (the tables json_each and json_tree stay refused: their first use in a
      // connection asks the authorizer to update sqlite_master)
      "json", "json_array", "json_array_length", "json_error_position", "json_extract",
      "json_insert", "json_object", "json_patch", "json_quote", "json_remove", "json_replace",
      "json_set", "json_type", "json_valid", "json_group_array", "json_group_object", "->", "->>"};
  return k;
}

std::string Lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

struct AuthState {
  std::string denied;  // first refused action, for the error message
};

int Authorize(void* user, int action, const char* a1, const char* a2, const char*, const char*) {
  auto* st = static_cast<AuthState*>(user);
  switch (action) {
    case SQLITE_SELECT:
    case SQLITE_READ:
    case SQLITE_RECURSIVE:
      return SQLITE_OK;
    case SQLITE_FUNCTION: {
      std::string name = a2 ? a2 : "";
      if (IsAllowedQueryFunction(name)) return SQLITE_OK;
      if (st->denied.empty()) st->denied = "function " + name;
      return SQLITE_DENY;
    }
    case SQLITE_PRAGMA: {
      std::string name = Lower(a1 ? a1 : "");
      if (ReadOnlyPragmas().count(name)) return SQLITE_OK;
      if (!a2 && ReadOnlyWithoutArgPragmas().count(name)) return SQLITE_OK;
      if (st->denied.empty()) st->denied = "PRAGMA " + name + (a2 ? " with an argument" : "");
      return SQLITE_DENY;
    }
    default: {
      static const char* kNames[] = {"CREATE INDEX",
                                     "CREATE TABLE",
                                     "CREATE TEMP INDEX",
                                     "CREATE TEMP TABLE",
                                     "CREATE TEMP TRIGGER",
                                     "CREATE TEMP VIEW",
                                     "CREATE TRIGGER",
                                     "CREATE VIEW",
                                     "DELETE",
                                     "DROP INDEX",
                                     "DROP TABLE",
                                     "DROP TEMP INDEX",
                                     "DROP TEMP TABLE",
                                     "DROP TEMP TRIGGER",
                                     "DROP TEMP VIEW",
                                     "DROP TRIGGER",
                                     "DROP VIEW",
                                     "INSERT",
                                     "PRAGMA",
                                     "READ",
                                     "SELECT",
                                     "TRANSACTION",
                                     "UPDATE",
                                     "ATTACH",
                                     "DETACH",
                                     "ALTER TABLE",
                                     "REINDEX",
                                     "ANALYZE",
                                     "CREATE VTABLE",
                                     "DROP VTABLE",
                                     "FUNCTION",
                                     "SAVEPOINT",
                                     "RECURSIVE"};
      if (st->denied.empty())
        st->denied = action >= 1 && action <= 33 ? kNames[action - 1] : "this statement";
      return SQLITE_DENY;
    }
  }
}

struct Deadline {
  std::chrono::steady_clock::time_point at;
  bool hit = false;
};

int Progress(void* user) {
  auto* d = static_cast<Deadline*>(user);
  if (std::chrono::steady_clock::now() >= d->at) {
    d->hit = true;
    return 1;
  }
  return 0;
}

bool OnlyWhitespaceOrComments(const char* p) {
  while (*p) {
    if (std::isspace(static_cast<unsigned char>(*p)) || *p == ';') {
      ++p;
    } else if (p[0] == '-' && p[1] == '-') {
      while (*p && *p != '\n') ++p;
    } else if (p[0] == '/' && p[1] == '*') {
      const char* e = std::strstr(p + 2, "*/");
      if (!e) return true;
      p = e + 2;
    } else {
      return false;
    }
  }
  return true;
}

// Returns `v`'s serialised size, about: what the answer's byte cap counts.
size_t JsonSizeOf(const Json& v) {
  if (v.is_string()) return v.get_ref<const std::string&>().size() + 3;
  return v.is_null() ? 5 : 25;
}

Json ColumnValue(sqlite3_stmt* s, int i) {
  switch (sqlite3_column_type(s, i)) {
    case SQLITE_INTEGER:
      return Json(sqlite3_column_int64(s, i));
    case SQLITE_FLOAT: {
      double v = sqlite3_column_double(s, i);
      return std::isfinite(v) ? Json(v) : Json(nullptr);
    }
    case SQLITE_NULL:
      return Json(nullptr);
    case SQLITE_BLOB:
      return Json("<blob " + std::to_string(sqlite3_column_bytes(s, i)) + " bytes>");
    default: {
      const unsigned char* t = sqlite3_column_text(s, i);
      return Json(
          std::string(reinterpret_cast<const char*>(t), size_t(sqlite3_column_bytes(s, i))));
    }
  }
}

Status TimeLimitHit(const QueryLimits& limits) {
  return Status::InvalidArgument("query exceeded the " + std::to_string(limits.time.count()) +
                                 " ms limit");
}

}  // namespace

bool IsAllowedQueryFunction(const std::string& name) {
  return AllowedFunctions().count(Lower(name)) > 0;
}

StatusOr<Json> RunReadOnlyQuery(const std::string& db_path, const std::string& sql,
                                const QueryLimits& limits) {
  if (OnlyWhitespaceOrComments(sql.c_str())) return Status::InvalidArgument("empty query");
  Db db;
  HEADLAB_RETURN_IF_ERROR(db.Open(db_path, Db::Mode::kReadOnly));
  sqlite3_db_config(db.raw(), SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  AuthState auth;
  sqlite3_set_authorizer(db.raw(), Authorize, &auth);
  // No single value (printf('%.*c', 1e9, 'x'), zeroblob(1e9), ...) larger than the answer,
  // nor so long that one function call runs past the time limit (query.h).
  sqlite3_limit(db.raw(), SQLITE_LIMIT_LENGTH,
                int(std::min<size_t>({limits.max_bytes, size_t(kMaxQueryValueBytes)})));
  sqlite3_limit(db.raw(), SQLITE_LIMIT_LIKE_PATTERN_LENGTH, kMaxQueryPatternBytes);
  Deadline deadline{std::chrono::steady_clock::now() + limits.time};
  sqlite3_progress_handler(db.raw(), 1000, Progress, &deadline);

  sqlite3_stmt* raw = nullptr;
  const char* tail = nullptr;
  int rc = sqlite3_prepare_v2(db.raw(), sql.c_str(), int(sql.size()), &raw, &tail);
  Stmt stmt(db.raw(), raw);
  if (rc != SQLITE_OK) {
    if (!auth.denied.empty())
      return Status::InvalidArgument("read-only: " + auth.denied + " is not allowed");
    if (deadline.hit) return TimeLimitHit(limits);
    return Status::InvalidArgument(std::string("SQL error: ") + sqlite3_errmsg(db.raw()));
  }
  if (!raw) return Status::InvalidArgument("empty query");
  if (tail && !OnlyWhitespaceOrComments(tail))
    return Status::InvalidArgument("one statement at a time (text after the first ';')");
  if (!sqlite3_stmt_readonly(raw))
    return Status::InvalidArgument("read-only: the statement would write");

  Json columns = Json::array();
  int ncol = sqlite3_column_count(raw);
  for (int i = 0; i < ncol; ++i) columns.push_back(sqlite3_column_name(raw, i));
  Json rows = Json::array();
  const char* truncated_by = nullptr;
  size_t bytes = 0;
  while (true) {
    rc = sqlite3_step(raw);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      if (deadline.hit) return TimeLimitHit(limits);
      return Status::InvalidArgument(std::string("SQL error: ") + sqlite3_errmsg(db.raw()));
    }
    // The progress handler only runs inside SQLite: the time spent here building the
    // answer counts against the same limit.
    if (std::chrono::steady_clock::now() >= deadline.at) return TimeLimitHit(limits);
    if (rows.size() >= limits.max_rows) {
      truncated_by = "rows";
      break;
    }
    Json row = Json::array();
    size_t row_bytes = 2;
    for (int i = 0; i < ncol; ++i) {
      row.push_back(ColumnValue(raw, i));
      row_bytes += JsonSizeOf(row.back());
    }
    if (bytes + row_bytes > limits.max_bytes) {
      truncated_by = "bytes";
      break;
    }
    bytes += row_bytes;
    rows.push_back(std::move(row));
  }
  return Json{{"columns", columns},
              {"rows", rows},
              {"truncated", truncated_by != nullptr},
              {"truncated_by", truncated_by ? Json(truncated_by) : Json(nullptr)}};
}

}  // namespace headlab::coord
