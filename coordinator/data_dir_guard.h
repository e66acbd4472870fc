// What keeps one data directory's database whole: one coordinator at a time (an exclusive
// lock held for the coordinator's life) and no start on a damaged file (docs/DESIGN.md,
// "Data directory").
#pragma once

#include <memory>
#include <string>

#include "common/status.h"

namespace headlab::coord {

// An exclusive flock on DATA_DIR/coordinator.lock, released when destroyed (or when the
// process dies, however it dies: the kernel drops the lock with the descriptor).
class DataDirLock {
 public:
  // Takes the lock without waiting. Unavailable, naming the holder's pid (from
  // DATA_DIR/coordinator.json when it has one) and what to do, when another process holds it.
  static StatusOr<std::unique_ptr<DataDirLock>> Acquire(const std::string& data_dir);
  ~DataDirLock();
  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;

 private:
  explicit DataDirLock(int fd) : fd_(fd) {}
  int fd_;
};

// Runs PRAGMA quick_check on the database at `db_path` (which must exist). Corruption with
// SQLite's first findings and what to do (restore a backup, or recover) when the file is
// damaged; IoError when it cannot be opened at all.
Status CheckDatabaseIntegrity(const std::string& db_path);

}  // namespace headlab::coord
