// Read-only query execution.
#include "coordinator/query.h"

#include <cctype>
#include <cmath>
#include <cstring>
#include <set>

#include "coordinator/db.h"

namespace headlab::coord {
namespace {

// PRAGMAs that only read (with or without an argument naming a table or index).
const std::set<std::string>& ReadOnlyPragmas() {
  static const std::set<std::string> k = {
      "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
      "foreign_key_list", "collation_list", "function_list", "database_list"};
  return k;
}
// PRAGMAs that read when given no argument and write when given one.
const std::set<std::string>& ReadOnlyWithoutArgPragmas() {
  static const std::set<std::string> k = {"user_version", "schema_version", "page_count",
                                          "page_size", "journal_mode", "encoding"};
  return k;
}

struct AuthState {
  std::string denied;  // first refused action, for the error message
};

int Authorize(void* user, int action, const char* a1, const char* a2, const char*, const char*) {
  auto* st = static_cast<AuthState*>(user);
  switch (action) {
    case SQLITE_SELECT:
    case SQLITE_READ:
    case SQLITE_FUNCTION:
    case SQLITE_RECURSIVE:
      return SQLITE_OK;
    case SQLITE_PRAGMA: {
      std::string name = a1 ? a1 : "";
      for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
      if (ReadOnlyPragmas().count(name)) return SQLITE_OK;
      if (!a2 && ReadOnlyWithoutArgPragmas().count(name)) return SQLITE_OK;
      if (st->denied.empty()) st->denied = "PRAGMA " + name + (a2 ? " with an argument" : "");
      return SQLITE_DENY;
    }
    default: {
      static const char* kNames[] = {
          "CREATE INDEX", "CREATE TABLE", "CREATE TEMP INDEX", "CREATE TEMP TABLE",
          "CREATE TEMP TRIGGER", "CREATE TEMP VIEW", "CREATE TRIGGER", "CREATE VIEW",
          "DELETE", "DROP INDEX", "DROP TABLE", "DROP TEMP INDEX", "DROP TEMP TABLE",
          "DROP TEMP TRIGGER", "DROP TEMP VIEW", "DROP TRIGGER", "DROP VIEW", "INSERT",
          "PRAGMA", "READ", "SELECT", "TRANSACTION", "UPDATE", "ATTACH", "DETACH",
          "ALTER TABLE", "REINDEX", "ANALYZE", "CREATE VTABLE", "DROP VTABLE", "FUNCTION",
          "SAVEPOINT", "RECURSIVE"};
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

Json ColumnValue(sqlite3_stmt* s, int i) {
  switch (sqlite3_column_type(s, i)) {
    case SQLITE_INTEGER: return Json(sqlite3_column_int64(s, i));
    case SQLITE_FLOAT: {
      double v = sqlite3_column_double(s, i);
      return std::isfinite(v) ? Json(v) : Json(nullptr);
    }
    case SQLITE_NULL: return Json(nullptr);
    case SQLITE_BLOB: return Json("<blob " + std::to_string(sqlite3_column_bytes(s, i)) + " bytes>");
    default: {
      const unsigned char* t = sqlite3_column_text(s, i);
      return Json(std::string(reinterpret_cast<const char*>(t), size_t(sqlite3_column_bytes(s, i))));
    }
  }
}

}  // namespace

StatusOr<Json> RunReadOnlyQuery(const std::string& db_path, const std::string& sql,
                                const QueryLimits& limits) {
  if (OnlyWhitespaceOrComments(sql.c_str())) return Status::InvalidArgument("empty query");
  Db db;
  HEADLAB_RETURN_IF_ERROR(db.Open(db_path, Db::Mode::kReadOnly));
  sqlite3_db_config(db.raw(), SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  AuthState auth;
  sqlite3_set_authorizer(db.raw(), Authorize, &auth);
  Deadline deadline{std::chrono::steady_clock::now() + limits.time};
  sqlite3_progress_handler(db.raw(), 1000, Progress, &deadline);

  sqlite3_stmt* raw = nullptr;
  const char* tail = nullptr;
  int rc = sqlite3_prepare_v2(db.raw(), sql.c_str(), int(sql.size()), &raw, &tail);
  Stmt stmt(db.raw(), raw);
  if (rc != SQLITE_OK) {
    if (!auth.denied.empty())
      return Status::InvalidArgument("read-only: " + auth.denied + " is not allowed");
    if (deadline.hit)
      return Status::InvalidArgument("query exceeded the " +
                                     std::to_string(limits.time.count()) + " ms limit");
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
  bool truncated = false;
  while (true) {
    rc = sqlite3_step(raw);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      if (deadline.hit)
        return Status::InvalidArgument("query exceeded the " +
                                       std::to_string(limits.time.count()) + " ms limit");
      return Status::InvalidArgument(std::string("SQL error: ") + sqlite3_errmsg(db.raw()));
    }
    if (rows.size() >= limits.max_rows) {
      truncated = true;
      break;
    }
    Json row = Json::array();
    for (int i = 0; i < ncol; ++i) row.push_back(ColumnValue(raw, i));
    rows.push_back(std::move(row));
  }
  return Json{{"columns", columns}, {"rows", rows}, {"truncated", truncated}};
}

}  // namespace headlab::coord
