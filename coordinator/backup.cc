// Online backup and restore of the coordinator's database.
#include "coordinator/backup.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common/files.h"
#include "common/flags.h"
#include "coordinator/data_dir_guard.h"
#include "coordinator/db.h"

namespace headlab {
namespace {

const FlagsSpec& BackupSpec() {
  static const FlagsSpec kSpec{
      "headlab backup",
      {{"--data-dir", "", "DIR", "the coordinator's data directory (default .headlab)"},
       {"--output", "-o", "FILE",
        "where the copy goes (default DIR/backups/headlab-<UTC time>.db)"},
       {"--restore", "", "FILE",
        "put the backup FILE back as DIR/headlab.db (the coordinator\n"
        "must be stopped); the replaced file is kept beside it"}},
      /*args=*/"",
      /*min_positional=*/0,
      /*max_positional=*/0};
  return kSpec;
}

// Returns "2026-12-07T10-15-00Z": NowIso without the characters file names avoid.
std::string FileStamp() {
  std::string s = coord::NowIso();
  s.erase(s.find('.'), 4);  // milliseconds
  for (char& c : s)
    if (c == ':') c = '-';
  return s;
}

Status SqliteError(const std::string& what, sqlite3* db) {
  return Status::IoError(what + ": " + (db ? sqlite3_errmsg(db) : "out of memory"));
}

}  // namespace

Status BackupDatabase(const std::string& db_path, const std::string& out) {
  if (!PathExists(db_path)) return Status::NotFound(db_path + ": no database to back up");
  coord::Db src;
  HEADLAB_RETURN_IF_ERROR(src.Open(db_path, coord::Db::Mode::kReadOnly));
  const std::string tmp = out + ".partial";
  ::unlink(tmp.c_str());
  sqlite3* dest = nullptr;
  if (sqlite3_open_v2(tmp.c_str(), &dest, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    Status st = SqliteError(tmp, dest);
    sqlite3_close_v2(dest);
    return st;
  }
  // One step over every page: the copy is one read snapshot of the source, which in WAL
  // mode never blocks the coordinator's writes (smaller steps would restart whenever the
  // coordinator commits, and might never finish under load).
  sqlite3_backup* b = sqlite3_backup_init(dest, "main", src.raw(), "main");
  Status st;
  if (!b) {
    st = SqliteError("backup of " + db_path, dest);
  } else {
    int rc;
    while ((rc = sqlite3_backup_step(b, -1)) == SQLITE_BUSY || rc == SQLITE_LOCKED)
      sqlite3_sleep(50);
    if (rc != SQLITE_DONE) st = Status::IoError("backup of " + db_path + ": " + sqlite3_errstr(rc));
    sqlite3_backup_finish(b);
  }
  sqlite3_close_v2(dest);
  if (st.ok()) st = coord::CheckDatabaseIntegrity(tmp);
  if (st.ok() && std::rename(tmp.c_str(), out.c_str()) != 0)
    st = Status::IoError(out + ": cannot rename the copy into place");
  if (!st.ok()) ::unlink(tmp.c_str());
  return st;
}

Status RestoreDatabase(const std::string& backup, const std::string& data_dir) {
  if (!PathExists(backup)) return Status::NotFound(backup + ": no such backup");
  HEADLAB_RETURN_IF_ERROR(MakeDirs(data_dir));
  // The lock first: restoring under a running coordinator would swap the file it writes.
  auto lock = coord::DataDirLock::Acquire(data_dir);
  if (!lock.ok()) return lock.status();
  HEADLAB_RETURN_IF_ERROR(coord::CheckDatabaseIntegrity(backup));
  const std::string db = data_dir + "/headlab.db";
  // Copied through the backup API (not a file copy): the result is a whole database even
  // if the backup was taken of a file in WAL mode.
  const std::string tmp = db + ".restoring";
  HEADLAB_RETURN_IF_ERROR(BackupDatabase(backup, tmp));
  for (const char* suffix : {"", "-wal", "-shm"}) {
    const std::string from = db + suffix, to = db + ".replaced" + suffix;
    if (PathExists(from) && std::rename(from.c_str(), to.c_str()) != 0)
      return Status::IoError(from + ": cannot move it aside to " + to);
  }
  if (std::rename(tmp.c_str(), db.c_str()) != 0)
    return Status::IoError(db + ": cannot move the restored copy into place");
  return Status::Ok();
}

int BackupMain(int argc, char** argv) {
  auto args = ParseFlags(BackupSpec(), std::vector<std::string>(argv, argv + argc));
  if (!args.ok()) {
    std::fprintf(stderr, "%s\n", args.status().message().c_str());
    return 2;
  }
  if (args->help()) {
    std::fputs(HelpText(BackupSpec(),
                        "Copies the coordinator's database while it runs (SQLite's online backup:\n"
                        "one consistent snapshot; the coordinator keeps serving and writing), or\n"
                        "with --restore puts such a copy back while the coordinator is stopped.\n",
                        "Exit 0 done, 1 failed (the message says why), 2 bad arguments.\n")
                   .c_str(),
               stdout);
    return 0;
  }
  const std::string dir = args->Get("--data-dir", ".headlab");
  if (args->Has("--restore")) {
    if (args->Has("--output")) {
      std::fprintf(stderr, "headlab backup: --restore and --output do not go together\n");
      return 2;
    }
    Status st = RestoreDatabase(args->Get("--restore"), dir);
    if (!st.ok()) {
      std::fprintf(stderr, "headlab backup: %s\n", st.message().c_str());
      return 1;
    }
    std::fprintf(stderr,
                 "restored %s as %s/headlab.db (the one it replaced: %s/headlab.db.replaced)\n",
                 args->Get("--restore").c_str(), dir.c_str(), dir.c_str());
    return 0;
  }
  std::string out = args->Get("--output");
  if (out.empty()) {
    Status st = MakeDirs(dir + "/backups");
    if (!st.ok()) {
      std::fprintf(stderr, "headlab backup: %s\n", st.message().c_str());
      return 1;
    }
    out = dir + "/backups/headlab-" + FileStamp() + ".db";
  }
  Status st = BackupDatabase(dir + "/headlab.db", out);
  if (!st.ok()) {
    std::fprintf(stderr, "headlab backup: %s\n", st.message().c_str());
    return 1;
  }
  std::printf("%s\n", out.c_str());
  return 0;
}

}  // namespace headlab
