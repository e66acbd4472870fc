// Db's statement cache: one compiled statement reused, reset between uses, never shared by
// two live users.
#include "coordinator/db.h"

#include <catch2/catch.hpp>

#include "coordinator/test_util.h"

namespace headlab::coord {
namespace {

constexpr const char* kSquare = "SELECT ?1 * ?1";

TEST_CASE("Cached statements are compiled once and come back reset") {
  TempDir dir;
  Db db;
  REQUIRE(db.Open(dir.path() + "/t.db", Db::Mode::kReadWrite).ok());
  sqlite3_stmt* first = nullptr;
  for (int64_t x : {3, 7, 12}) {
    Stmt s = db.Cached(kSquare);
    if (!first) first = s.raw();
    CHECK(s.raw() == first);
    s.Bind(1, x);
    REQUIRE(s.Step());
    CHECK(s.Int(0) == x * x);
  }
  // Left mid-result: reset (no read transaction stays open to hold back checkpoints), and
  // the next user starts from the first row with no binding (NULL).
  {
    Stmt s = db.Cached(kSquare);
    s.Bind(1, int64_t(5));
    REQUIRE(s.Step());
    CHECK(sqlite3_stmt_busy(first));
  }
  CHECK(!sqlite3_stmt_busy(first));
  Stmt again = db.Cached(kSquare);
  REQUIRE(again.Step());
  CHECK(again.IsNull(0));
}

TEST_CASE("A cached statement in use is not handed out twice") {
  TempDir dir;
  Db db;
  REQUIRE(db.Open(dir.path() + "/t.db", Db::Mode::kReadWrite).ok());
  REQUIRE(db.Exec("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2), (3)").ok());
  const std::string rows = "SELECT x FROM t WHERE x >= ? ORDER BY x";
  Stmt outer = db.Cached(rows);
  outer.Bind(1, int64_t(1));
  int64_t sum = 0;
  while (outer.Step()) {
    Stmt inner = db.Cached(rows);  // nested: a private copy, the outer cursor untouched
    CHECK(inner.raw() != outer.raw());
    inner.Bind(1, outer.Int(0));
    while (inner.Step()) sum += inner.Int(0);
  }
  CHECK(sum == (1 + 2 + 3) + (2 + 3) + 3);
  // Moved, the statement is still the cache's: handed back once, by its last owner.
  sqlite3_stmt* raw = outer.raw();
  Stmt moved = std::move(outer);
  Stmt other;
  other = std::move(moved);
  CHECK(other.raw() == raw);
  other = Stmt();  // handed back
  CHECK(db.Cached(rows).raw() == raw);
}

}  // namespace
}  // namespace headlab::coord
