// The data directory's lock and the integrity check at start.
#include "coordinator/data_dir_guard.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/files.h"
#include "common/json.h"
#include "coordinator/db.h"

namespace headlab::coord {

StatusOr<std::unique_ptr<DataDirLock>> DataDirLock::Acquire(const std::string& data_dir) {
  const std::string path = data_dir + "/coordinator.lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return Status::IoError(path + ": cannot open (" + std::strerror(errno) + ")");
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(fd);
    if (err != EWOULDBLOCK)
      return Status::IoError(path + ": cannot lock (" + std::strerror(err) + ")");
    std::string holder;
    if (auto j = ReadFile(data_dir + "/coordinator.json"); j.ok())
      if (auto parsed = ParseJson(*j, "coordinator.json"); parsed.ok() && parsed->is_object())
        holder = " (pid " + JsonText(parsed->value("pid", Json(nullptr))) + ", HTTP " +
                 parsed->value("http", std::string("?")) + ")";
    return Status::Unavailable("another coordinator" + holder + " is using the data directory " +
                               data_dir + "; stop it first (headlab down --data-dir " + data_dir +
                               ") or give this one another --data-dir");
  }
  return std::unique_ptr<DataDirLock>(new DataDirLock(fd));
}

DataDirLock::~DataDirLock() { ::close(fd_); }  // closing drops the lock

Status CheckDatabaseIntegrity(const std::string& db_path) {
  const std::string what_to_do =
      ". The coordinator will not run on a damaged database. Stop here and restore the newest "
      "backup (headlab backup --restore FILE --data-dir DIR), or salvage what is readable "
      "(sqlite3 " +
      db_path + " .recover | sqlite3 recovered.db) and move it in place of " + db_path;
  Db db;
  // Read-write, not read-only: a read-only connection cannot replay a WAL left by a
  // coordinator that was killed, so it would check an older state than the one served.
  if (Status st = db.Open(db_path, Db::Mode::kReadWrite); !st.ok()) {
    const std::string& m = st.message();
    if (m.find("malformed") != std::string::npos || m.find("not a database") != std::string::npos)
      return Status::Corruption(m + what_to_do);
    return st;
  }
  auto check = db.Prepare("PRAGMA quick_check(5)");
  if (!check.ok())
    return Status::Corruption(db_path + ": damaged (" + check.status().message() + ")" +
                              what_to_do);
  std::string findings;
  Status st;
  while (check->Step(&st)) {
    std::string line = check->Text(0);
    if (line == "ok") return Status::Ok();
    findings += (findings.empty() ? "" : "; ") + line;
  }
  if (!st.ok()) findings += (findings.empty() ? "" : "; ") + st.message();
  return Status::Corruption(db_path + ": fails its integrity check (" + findings + ")" +
                            what_to_do);
}

}  // namespace headlab::coord
