// Thin RAII layer over the SQLite C API: a connection (Db) and a prepared statement (Stmt).
// A Db is used by one thread at a time; nothing here is synchronised.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <unordered_map>

#include "common/status.h"

namespace headlab::coord {

// A prepared statement. Bind* indices are 1-based (SQLite's convention).
class Stmt {
 public:
  Stmt() = default;
  Stmt(sqlite3* db, sqlite3_stmt* s) : db_(db), s_(s) {}
  // A statement of Db's cache (Db::Cached): reset and handed back, not finalized, when
  // this goes; `*in_use` is true meanwhile.
  Stmt(sqlite3* db, sqlite3_stmt* s, bool* in_use) : db_(db), s_(s), in_use_(in_use) {}
  ~Stmt() { Release(); }
  Stmt(Stmt&& o) noexcept : db_(o.db_), s_(o.s_), in_use_(o.in_use_) {
    o.s_ = nullptr;
    o.in_use_ = nullptr;
  }
  Stmt& operator=(Stmt&& o) noexcept;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  Stmt& Bind(int i, int v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  Stmt& Bind(int i, double v) {
    sqlite3_bind_double(s_, i, v);
    return *this;
  }
  Stmt& Bind(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.data(), int(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Bind(int i, const char* v) { return Bind(i, std::string(v)); }
  Stmt& BindNull(int i) {
    sqlite3_bind_null(s_, i);
    return *this;
  }

  // Advances; returns true iff a row is available. Errors are returned through `st`.
  bool Step(Status* st = nullptr);
  // Runs to completion (for writes); returns the error, if any.
  Status Exec();
  // Resets for re-use and clears the bindings.
  void Reset() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }

  int64_t Int(int col) const { return sqlite3_column_int64(s_, col); }
  double Real(int col) const { return sqlite3_column_double(s_, col); }
  bool IsNull(int col) const { return sqlite3_column_type(s_, col) == SQLITE_NULL; }
  std::string Text(int col) const;
  int Columns() const { return sqlite3_column_count(s_); }
  sqlite3_stmt* raw() const { return s_; }

 private:
  void Release();

  sqlite3* db_ = nullptr;
  sqlite3_stmt* s_ = nullptr;
  bool* in_use_ = nullptr;  // set iff s_ belongs to Db's cache
};

// One SQLite connection.
class Db {
 public:
  enum class Mode { kReadWrite, kReadOnly };
  Db() = default;
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // Opens `path`. kReadWrite creates the file and sets WAL, synchronous=NORMAL,
  // busy_timeout and foreign_keys; kReadOnly opens with SQLITE_OPEN_READONLY.
  Status Open(const std::string& path, Mode mode);
  void Close();
  // Runs one or more statements without results.
  Status Exec(const std::string& sql);
  // Compiles `sql`; the error names the SQL.
  StatusOr<Stmt> Prepare(const std::string& sql);
  // Prepares `sql`; aborts on failure (for the program's own fixed SQL, an invariant).
  Stmt MustPrepare(const std::string& sql);
  // MustPrepare, compiled once per connection and reused: for the program's statements
  // that run once per row of a larger read (a result's per-run provenance), where
  // compiling costs several times what running does. While the returned Stmt lives,
  // asking for the same SQL compiles a private copy. Cached statements are finalized by
  // Close().
  Stmt Cached(const std::string& sql);
  int64_t LastInsertId() const { return sqlite3_last_insert_rowid(db_); }
  int Changes() const { return sqlite3_changes(db_); }
  std::string ErrorMessage() const { return db_ ? sqlite3_errmsg(db_) : "not open"; }
  sqlite3* raw() const { return db_; }
  bool is_open() const { return db_ != nullptr; }

 private:
  struct CachedStmt {
    sqlite3_stmt* stmt = nullptr;
    bool in_use = false;
  };

  sqlite3* db_ = nullptr;
  std::unordered_map<std::string, CachedStmt> cache_;  // by SQL text; nodes never move
};

// RAII transaction: BEGIN IMMEDIATE on construction, ROLLBACK unless Commit() was called.
class Transaction {
 public:
  explicit Transaction(Db* db);
  ~Transaction();
  Status Commit();
  const Status& begin_status() const { return begin_; }

 private:
  Db* db_;
  Status begin_;
  bool done_ = false;
};

// Returns the current UTC time as ISO-8601 with milliseconds ("2026-11-30T02:40:01.123Z").
std::string NowIso();
// Returns the current unix time in seconds.
double NowUnixSeconds();

}  // namespace headlab::coord
