// Embedded migrations: CMake generates each literal from its schema/ file at configure time
// (migrations_test.cc checks the bytes match), so schema/ is both the spec and what runs.
#include "coordinator/migrations.h"

#include <string>

namespace headlab::coord {
namespace {

const char kMigration001[] =
#include "schema/001_init.sql.inc"
    ;
const char kMigration002[] =
#include "schema/002_paired_details.sql.inc"
    ;
const char kMigration003[] =
#include "schema/003_annotations.sql.inc"
    ;
const char kMigration004[] =
#include "schema/004_results.sql.inc"
    ;
const char kMigration005[] =
#include "schema/005_checkpoint_retention.sql.inc"
    ;

}  // namespace

const std::vector<Migration>& Migrations() {
  static const std::vector<Migration> kAll = {
      {1, "schema/001_init.sql", kMigration001},
      {2, "schema/002_paired_details.sql", kMigration002},
      {3, "schema/003_annotations.sql", kMigration003},
      {4, "schema/004_results.sql", kMigration004},
      {5, "schema/005_checkpoint_retention.sql", kMigration005},
  };
  return kAll;
}

int LatestSchemaVersion() { return Migrations().back().version; }

int SchemaVersion(Db* db) {
  Stmt s = db->MustPrepare("PRAGMA user_version");
  return s.Step() ? int(s.Int(0)) : 0;
}

Status Migrate(Db* db) {
  int have = SchemaVersion(db);
  if (have > LatestSchemaVersion())
    return Status::Corruption("database schema version " + std::to_string(have) +
                              " is newer than this binary's " +
                              std::to_string(LatestSchemaVersion()));
  for (const Migration& m : Migrations()) {
    if (m.version <= have) continue;
    Transaction txn(db);
    HEADLAB_RETURN_IF_ERROR(txn.begin_status());
    Status st = db->Exec(m.sql);
    if (!st.ok()) return Status::Internal(std::string(m.file) + ": " + st.message());
    HEADLAB_RETURN_IF_ERROR(db->Exec("PRAGMA user_version = " + std::to_string(m.version)));
    HEADLAB_RETURN_IF_ERROR(txn.Commit());
  }
  return Status::Ok();
}

}  // namespace headlab::coord
