#include "coordinator/query.h"

#include <catch2/catch.hpp>

#include "common/files.h"
#include "coordinator/store.h"
#include "coordinator/test_util.h"

namespace headlab::coord {

TEST_CASE("read-only query answers SELECTs and refuses every write") {
  TempDir dir;
  std::string path = dir.path() + "/h.db";
  Store s;
  REQUIRE(s.Open(path).ok());
  REQUIRE(s.InsertExperiment(TestGrid({"a"}, 2), {}, false).ok());

  auto r = RunReadOnlyQuery(path, "SELECT id, arm, seed FROM runs ORDER BY id");
  REQUIRE(r.ok());
  CHECK((*r)["columns"] == Json({"id", "arm", "seed"}));
  CHECK((*r)["rows"].size() == 2);
  CHECK((*r)["rows"][1][2] == 2);
  CHECK(RunReadOnlyQuery(path, "PRAGMA table_info(runs)").ok());
  CHECK(RunReadOnlyQuery(path, "PRAGMA user_version").ok());
  CHECK(RunReadOnlyQuery(path, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c "
                               "WHERE x < 10) SELECT sum(x) FROM c").ok());

  for (const char* bad : {
           "INSERT INTO events(at, kind) VALUES ('x', 'y')",
           "UPDATE runs SET status='failed'",
           "DELETE FROM runs",
           "DROP TABLE runs",
           "CREATE TABLE x(a)",
           "ATTACH DATABASE '/tmp/evil.db' AS evil",
           "PRAGMA user_version = 7",
           "PRAGMA journal_mode = DELETE",
           "PRAGMA writable_schema = 1",
           "BEGIN",
           "VACUUM",
           "REPLACE INTO summaries VALUES (1, 'k', 1, 1)",
       }) {
    INFO(bad);
    auto w = RunReadOnlyQuery(path, bad);
    REQUIRE_FALSE(w.ok());
    CHECK(w.status().code() == Status::Code::kInvalidArgument);
    CHECK(w.status().message().rfind("read-only", 0) == 0);
  }
  auto two = RunReadOnlyQuery(path, "SELECT 1; DELETE FROM runs");
  CHECK_FALSE(two.ok());
  CHECK(RunReadOnlyQuery(path, "SELECT count(*) FROM runs")->at("rows")[0][0] == 2);
  auto syntax = RunReadOnlyQuery(path, "SELEC 1");
  CHECK_FALSE(syntax.ok());
  CHECK(syntax.status().message().find("SQL error") != std::string::npos);
}

TEST_CASE("a query over the time limit is stopped") {
  TempDir dir;
  std::string path = dir.path() + "/h.db";
  Store s;
  REQUIRE(s.Open(path).ok());
  QueryLimits limits;
  limits.time = std::chrono::milliseconds(200);
  auto start = std::chrono::steady_clock::now();
  auto r = RunReadOnlyQuery(path,
                            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) "
                            "SELECT count(*) FROM c",
                            limits);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("limit") != std::string::npos);
  CHECK(secs < 2.0);
}

}  // namespace headlab::coord
