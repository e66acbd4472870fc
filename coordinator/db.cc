// SQLite RAII wrappers.
#include "coordinator/db.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "common/log.h"

namespace headlab::coord {

Stmt& Stmt::operator=(Stmt&& o) noexcept {
  if (this != &o) {
    Release();
    db_ = o.db_;
    s_ = o.s_;
    in_use_ = o.in_use_;
    o.s_ = nullptr;
    o.in_use_ = nullptr;
  }
  return *this;
}

void Stmt::Release() {
  if (!in_use_) {
    sqlite3_finalize(s_);
  } else if (s_) {
    Reset();
    *in_use_ = false;
  }
  s_ = nullptr;
  in_use_ = nullptr;
}

bool Stmt::Step(Status* st) {
  int rc = sqlite3_step(s_);
  if (rc == SQLITE_ROW) return true;
  if (rc != SQLITE_DONE && st)
    *st = Status::Internal(std::string("sqlite: ") + sqlite3_errmsg(db_));
  return false;
}

Status Stmt::Exec() {
  int rc = sqlite3_step(s_);
  Status st;
  if (rc != SQLITE_DONE && rc != SQLITE_ROW)
    st = Status::Internal(std::string("sqlite: ") + sqlite3_errmsg(db_) + " in " + sqlite3_sql(s_));
  Reset();
  return st;
}

std::string Stmt::Text(int col) const {
  const unsigned char* p = sqlite3_column_text(s_, col);
  if (!p) return std::string();
  return std::string(reinterpret_cast<const char*>(p), size_t(sqlite3_column_bytes(s_, col)));
}

Db::~Db() { Close(); }

void Db::Close() {
  for (auto& [sql, c] : cache_) sqlite3_finalize(c.stmt);
  cache_.clear();
  if (db_) sqlite3_close_v2(db_);
  db_ = nullptr;
}

Status Db::Open(const std::string& path, Mode mode) {
  // Memory statistics take a global mutex on every allocation; nobody reads them. Only
  // effective before SQLite initialises (the first Open), harmless after.
  static const bool kConfigured = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) == SQLITE_OK;
  (void)kConfigured;
  Close();
  int flags =
      mode == Mode::kReadOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  flags |= SQLITE_OPEN_NOMUTEX;
  int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    Close();
    return Status::IoError(path + ": cannot open database (" + msg + ")");
  }
  sqlite3_busy_timeout(db_, 5000);
  if (mode == Mode::kReadWrite) {
    // WAL: readers never block the writer; synchronous=NORMAL: commits do not fsync (a
    // power cut may lose the last transactions, never corrupt), checkpoints do.
    Status st = Exec(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
        "PRAGMA foreign_keys=ON; PRAGMA temp_store=MEMORY;");
    if (!st.ok()) {
      Close();
      return Status::IoError(path + ": " + st.message());
    }
  }
  return Status::Ok();
}

Status Db::Exec(const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    return Status::Internal("sqlite: " + msg);
  }
  return Status::Ok();
}

StatusOr<Stmt> Db::Prepare(const std::string& sql) {
  sqlite3_stmt* s = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.c_str(), int(sql.size()), &s, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(s);
    return Status::InvalidArgument(std::string(sqlite3_errmsg(db_)));
  }
  return Stmt(db_, s);
}

Stmt Db::MustPrepare(const std::string& sql) {
  auto s = Prepare(sql);
  if (!s.ok()) {
    LogError("internal SQL does not compile: " + s.status().message() + " in: " + sql);
    std::abort();
  }
  return std::move(s.value());
}

Stmt Db::Cached(const std::string& sql) {
  CachedStmt& c = cache_[sql];
  if (c.in_use) return MustPrepare(sql);  // nested use of the same statement
  if (!c.stmt) {
    // PERSISTENT: SQLite's hint for a statement kept and reused (lookaside memory is
    // left to short-lived ones).
    int rc = sqlite3_prepare_v3(db_, sql.c_str(), int(sql.size()), SQLITE_PREPARE_PERSISTENT,
                                &c.stmt, nullptr);
    if (rc != SQLITE_OK) {
      sqlite3_finalize(c.stmt);
      c.stmt = nullptr;
      return MustPrepare(sql);  // aborts with the error
    }
  }
  c.in_use = true;
  return Stmt(db_, c.stmt, &c.in_use);
}

Transaction::Transaction(Db* db) : db_(db) { begin_ = db_->Exec("BEGIN IMMEDIATE"); }

Transaction::~Transaction() {
  if (!done_ && begin_.ok()) db_->Exec("ROLLBACK");
}

Status Transaction::Commit() {
  done_ = true;
  if (!begin_.ok()) return begin_;
  Status st = db_->Exec("COMMIT");
  if (!st.ok()) db_->Exec("ROLLBACK");
  return st;
}

std::string NowIso() {
  auto now = std::chrono::system_clock::now();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  std::time_t t = std::time_t(ms / 1000);
  std::tm tm;
  gmtime_r(&t, &tm);
  char buf[40];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", int(ms % 1000));
  return buf;
}

double NowUnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace headlab::coord
