// Schema migrations: schema/NNN_*.sql, embedded in the binary, applied in order; the
// database's version is PRAGMA user_version (= the number of migrations applied).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "coordinator/db.h"

namespace headlab::coord {

struct Migration {
  int version;       // user_version after applying it
  const char* file;  // schema/ file it was copied from
  const char* sql;
};

// Returns every migration, in order (the embedded copies of schema/*.sql).
const std::vector<Migration>& Migrations();
// Returns the version a fully migrated database has.
int LatestSchemaVersion();
// Brings `db` to LatestSchemaVersion(), one transaction per migration. A database newer
// than this binary is refused (Corruption) rather than touched.
Status Migrate(Db* db);
// Returns PRAGMA user_version.
int SchemaVersion(Db* db);

}  // namespace headlab::coord
