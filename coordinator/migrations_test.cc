#include "coordinator/migrations.h"

#include <catch2/catch.hpp>

#include "common/files.h"
#include "common/source_dir.h"
#include "coordinator/test_util.h"

namespace headlab::coord {

TEST_CASE("embedded migrations are identical to schema/ files") {
  for (const Migration& m : Migrations()) {
    auto text = ReadFile(std::string(SourceDir()) + "/" + m.file);
    REQUIRE(text.ok());
    CHECK(*text == std::string(m.sql));
  }
}

TEST_CASE("migrate creates every table and is idempotent") {
  TempDir dir;
  Db db;
  REQUIRE(db.Open(dir.path() + "/h.db", Db::Mode::kReadWrite).ok());
  CHECK(SchemaVersion(&db) == 0);
  REQUIRE(Migrate(&db).ok());
  CHECK(SchemaVersion(&db) == LatestSchemaVersion());
  for (const char* t : {"experiments", "runs", "attempts", "workers", "metrics", "summaries",
                        "artifacts", "provenance", "head_maps", "paired_stats", "events", "tags",
                        "notes", "results", "results_inputs"}) {
    Stmt s = db.MustPrepare("SELECT count(*) FROM sqlite_master WHERE type='table' AND name=?");
    s.Bind(1, t);
    REQUIRE(s.Step());
    CHECK(s.Int(0) == 1);
  }
  REQUIRE(Migrate(&db).ok());  // second run applies nothing
  Stmt j = db.MustPrepare("PRAGMA journal_mode");
  REQUIRE(j.Step());
  CHECK(j.Text(0) == "wal");
}

TEST_CASE("migration 4 counts the inputs of experiments stored before it") {
  TempDir dir;
  Db db;
  REQUIRE(db.Open(dir.path() + "/h.db", Db::Mode::kReadWrite).ok());
  for (const Migration& m : Migrations())
    if (m.version <= 3) REQUIRE(db.Exec(m.sql).ok());
  REQUIRE(db.Exec("PRAGMA user_version = 3").ok());
  REQUIRE(db.Exec("INSERT INTO experiments(name, grid_json, max_attempts, created_at) "
                  "VALUES ('old', '{}', 1, 'x')")
              .ok());
  REQUIRE(Migrate(&db).ok());
  Stmt s = db.MustPrepare("SELECT experiment_id, changes FROM results_inputs");
  REQUIRE(s.Step());
  CHECK(s.Int(0) == 1);
  CHECK(s.Int(1) == 1);
  CHECK_FALSE(s.Step());
}

TEST_CASE("a database newer than the binary is refused") {
  TempDir dir;
  Db db;
  REQUIRE(db.Open(dir.path() + "/h.db", Db::Mode::kReadWrite).ok());
  REQUIRE(db.Exec("PRAGMA user_version = 999").ok());
  Status st = Migrate(&db);
  CHECK(st.code() == Status::Code::kCorruption);
}

}  // namespace headlab::coord
