// `headlab backup`: an online copy of a data directory's database (SQLite's backup API, one
// read snapshot: the coordinator keeps running and writing), and its way back in place.
#pragma once

#include <string>

#include "common/status.h"

namespace headlab {

// Copies the database at `db_path` to `out` as of one moment (written to a temporary file,
// checked with quick_check, then renamed over `out`). The source is only read.
Status BackupDatabase(const std::string& db_path, const std::string& out);

// Puts the backup `backup` in place of DATA_DIR/headlab.db: refused while a coordinator
// holds DATA_DIR (Unavailable) and for a backup that fails its integrity check
// (Corruption); the replaced database and its WAL are kept as headlab.db.replaced*.
Status RestoreDatabase(const std::string& backup, const std::string& data_dir);

// argv[0] is "backup". Exit 0 done, 1 failed, 2 bad arguments.
int BackupMain(int argc, char** argv);

}  // namespace headlab
