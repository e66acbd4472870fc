#include "coordinator/query.h"

#include <catch2/catch.hpp>

#include "common/files.h"
#include "coordinator/store.h"
#include "coordinator/test_util.h"

namespace headlab::coord {
namespace {

// A fresh coordinator database (migrated, empty) in a temporary directory.
struct TestDb {
  TempDir dir;
  std::string path = dir.path() + "/h.db";
  Store store;
  TestDb() { REQUIRE(store.Open(path).ok()); }
};

}  // namespace

TEST_CASE("read-only query answers SELECTs and refuses every write") {
  TestDb db;
  const std::string& path = db.path;
  Store& s = db.store;
  REQUIRE(s.InsertExperiment(TestGrid({"a"}, 2), {}, false).ok());

  auto r = RunReadOnlyQuery(path, "SELECT id, arm, seed FROM runs ORDER BY id");
  REQUIRE(r.ok());
  CHECK((*r)["columns"] == Json({"id", "arm", "seed"}));
  CHECK((*r)["rows"].size() == 2);
  CHECK((*r)["rows"][1][2] == 2);
  CHECK(RunReadOnlyQuery(path, "PRAGMA table_info(runs)").ok());
  CHECK(RunReadOnlyQuery(path, "PRAGMA user_version").ok());
  CHECK(RunReadOnlyQuery(path,
                         "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c "
                         "WHERE x < 10) SELECT sum(x) FROM c")
            .ok());

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
  TestDb db;
  const std::string& path = db.path;
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

TEST_CASE("only allow-listed functions may be called") {
  TestDb db;
  const std::string& path = db.path;
  Store& s = db.store;
  REQUIRE(s.InsertExperiment(TestGrid({"a"}, 3), {}, false).ok());
  // fts3_tokenizer('simple') returns a pointer into the SQLite library (an address leak);
  // the others reveal the build or the connection's state, or load code.
  for (const char* bad :
       {"SELECT hex(fts3_tokenizer('simple'))", "SELECT sqlite_compileoption_get(0)",
        "SELECT sqlite_version()", "SELECT sqlite_source_id()",
        "SELECT load_extension('/tmp/x.so')", "SELECT last_insert_rowid()", "SELECT changes()",
        "SELECT total_changes()", "SELECT FTS3_TOKENIZER('simple')"}) {
    INFO(bad);
    auto r = RunReadOnlyQuery(path, bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().rfind("read-only: function ", 0) == 0);
  }
  auto denied = RunReadOnlyQuery(path, "SELECT hex(fts3_tokenizer('simple'))");
  CHECK(denied.status().message() == "read-only: function fts3_tokenizer is not allowed");
  // What the dashboard, the CLI and the docs use keeps working, with the values SQLite
  // computes.
  struct Case {
    const char* sql;
    Json value;
  };
  const Case ok[] = {
      {"SELECT count(*) FROM runs", 3},
      {"SELECT max(seed) - min(seed) FROM runs", 2},
      {"SELECT round(avg(seed), 1) FROM runs", 2.0},
      {"SELECT group_concat(seed, '+') FROM (SELECT seed FROM runs ORDER BY seed)", "1+2+3"},
      {"SELECT printf('%05.1f', 3.14159)", "003.1"},
      {"SELECT json_extract(config_json, '$.seed') FROM runs ORDER BY id LIMIT 1", 1},
      {"SELECT config_json ->> '$.arm' FROM runs ORDER BY id LIMIT 1", "a"},
      {"SELECT sum(x) FROM (SELECT row_number() OVER (ORDER BY id) AS x FROM runs)", 6},
      {"SELECT strftime('%Y', '2026-12-01')", "2026"},
      {"SELECT coalesce(NULL, substr('abcdef', 2, 3))", "bcd"},
      {"SELECT upper(replace(trim('  ab '), 'b', 'c'))", "AC"},
      {"SELECT sqrt(16) + abs(-1)", 5.0},
  };
  for (const Case& c : ok) {
    INFO(c.sql);
    auto r = RunReadOnlyQuery(path, c.sql);
    REQUIRE(r.ok());
    CHECK((*r)["rows"][0][0] == c.value);
  }
  CHECK(IsAllowedQueryFunction("JSON_EXTRACT"));
  CHECK_FALSE(IsAllowedQueryFunction("fts3_tokenizer"));
}

TEST_CASE("answers stop at the byte cap and no value may exceed it") {
  TestDb db;
  const std::string& path = db.path;
  QueryLimits limits;
  limits.max_bytes = 1 << 20;
  // 1,000 rows of 10,000 characters: about 10 MB uncapped. Each row counts its text
  // plus quotes and separators (10,005 bytes), so 104 rows fit in 1 MiB.
  auto r = RunReadOnlyQuery(path,
                            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
                            "WHERE x < 1000) SELECT printf('%.*c', 10000, 'x') FROM c",
                            limits);
  REQUIRE(r.ok());
  CHECK((*r)["rows"].size() == (size_t(1) << 20) / 10005);
  CHECK((*r)["truncated"] == true);
  CHECK((*r)["truncated_by"] == "bytes");
  CHECK(JsonText(*r).size() <= limits.max_bytes);
  auto rows = RunReadOnlyQuery(path, "SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3",
                               QueryLimits{std::chrono::milliseconds(5000), 2});
  REQUIRE(rows.ok());
  CHECK((*rows)["rows"].size() == 2);
  CHECK((*rows)["truncated_by"] == "rows");
  auto all = RunReadOnlyQuery(path, "SELECT 1");
  CHECK((*all)["truncated"] == false);
  CHECK((*all)["truncated_by"].is_null());
  // No value may exceed the cap: SQLite refuses a 1 GB zeroblob and a string of 2 MB
  // (printf answers NULL), each of which would have been one row.
  auto blob = RunReadOnlyQuery(path, "SELECT zeroblob(1000000000)", limits);
  REQUIRE_FALSE(blob.ok());
  CHECK(blob.status().message() == "SQL error: string or blob too big");
  for (const char* big : {"SELECT printf('%.*c', 2000000, 'x')",
                          "SELECT replace(hex(zeroblob(600000)), '0', 'xx')"}) {
    INFO(big);
    auto b = RunReadOnlyQuery(path, big, limits);
    if (b.ok()) {
      CHECK((*b)["rows"][0][0].is_null());
    } else {
      CHECK(b.status().message() == "SQL error: string or blob too big");
    }
  }
}

TEST_CASE("the time limit covers building the answer") {
  TestDb db;
  const std::string& path = db.path;
  QueryLimits limits;
  limits.time = std::chrono::milliseconds(50);
  limits.max_rows = 100000000;
  limits.max_bytes = size_t(1) << 40;
  // Many cheap rows: most of the time goes into building the answer, not into SQLite.
  auto start = std::chrono::steady_clock::now();
  auto r = RunReadOnlyQuery(path,
                            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
                            "WHERE x < 100000000) SELECT x, x, x, x, x, x, x, x FROM c",
                            limits);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == "query exceeded the 50 ms limit");
  CHECK(secs < 1.0);
}

}  // namespace headlab::coord
