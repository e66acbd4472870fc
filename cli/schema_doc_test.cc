#include "cli/schema_doc.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <limits>
#include <string>

#include "common/method_schema.h"
#include "common/run_config.h"

namespace headlab {
namespace {

// The row of `table` that documents `key` ("| `key` | ... |").
std::string RowOf(const std::string& table, const std::string& key) {
  size_t at = table.find("| `" + key + "` |");
  if (at == std::string::npos) return "";
  return table.substr(at, table.find('\n', at) - at);
}

}  // namespace

TEST_CASE("schema doc: one row per key, with type, default, range and doc") {
  const double inf = std::numeric_limits<double>::infinity();
  std::string t = ConfigKeyTable({
      IntKey("a.layers", 1, 128, 2, "blocks"),
      IntKey("a.steps", 0, 1e8, 200, "updates"),
      IntKey("a.seed", 0, 9007199254740992.0, 0, "the seed"),
      IntKey("a.flag", 0, 1, 0, "on or off"),
      NumKey("a.lr", 0, 1, 3e-3, "peak", /*lo_open=*/true),
      NumKey("a.beta", 0, 1, 0.9, "beta", false, /*hi_open=*/true),
      NumKey("a.base", 0, inf, 10000, "base", /*lo_open=*/true),
      StrKey("a.mode", "x", "x|y", "a | b"),
      StrKey("a.maybe", "", "|on", "empty or on"),
      StrKey("a.path", "", nullptr, "any"),
  });
  CHECK(
      t.rfind(
          "| Key | Type | Default | Range / values | Meaning |\n| --- | --- | --- | --- | --- |\n",
          0) == 0);
  CHECK(RowOf(t, "a.layers") == "| `a.layers` | int | 2 | [1, 128] | blocks |");
  CHECK(RowOf(t, "a.steps") == "| `a.steps` | int | 200 | [0, 10^8] | updates |");
  CHECK(RowOf(t, "a.seed") == "| `a.seed` | int | 0 | >= 0 | the seed |");
  CHECK(RowOf(t, "a.flag") == "| `a.flag` | int | 0 | 0 or 1 | on or off |");
  CHECK(RowOf(t, "a.lr") == "| `a.lr` | number | 0.003 | (0, 1] | peak |");
  CHECK(RowOf(t, "a.beta") == "| `a.beta` | number | 0.9 | [0, 1) | beta |");
  CHECK(RowOf(t, "a.base") == "| `a.base` | number | 10000 | > 0 | base |");
  // A '|' inside a cell is escaped, or it would end the cell.
  CHECK(RowOf(t, "a.mode") == "| `a.mode` | string | `x` | `x`, `y` | a \\| b |");
  CHECK(RowOf(t, "a.maybe") == "| `a.maybe` | string | `\"\"` | `\"\"`, `on` | empty or on |");
  CHECK(RowOf(t, "a.path") == "| `a.path` | string | `\"\"` | text | any |");
  // Header, separator and ten rows.
  CHECK(std::count(t.begin(), t.end(), '\n') == 12);
}

TEST_CASE("schema doc: the reference has every key of the schema, each documented") {
  std::string ref = RunConfigReference();
  for (const std::string& key : RunConfigKeys()) {
    INFO(key);
    std::string row = RowOf(ref, key);
    REQUIRE(!row.empty());
    CHECK(row.substr(row.size() - 4) != "|  |");  // a doc in the last cell
  }
  CHECK(ref.rfind("### Top level\n\n", 0) == 0);
  CHECK(ref.find("### `model`\n\n") != std::string::npos);
  // The docs: schema/grid.md plus one README per method section.
  CHECK(GeneratedDocs().size() == 1 + MethodSchemas().size());
}

TEST_CASE("schema doc: the generated block is replaced between its markers only") {
  const std::string begin = std::string(kGeneratedBegin) + "\n";
  const std::string end = std::string(kGeneratedEnd) + "\n";
  StatusOr<std::string> r =
      ReplaceGeneratedBlock("intro\n" + begin + "old\nrows\n" + end + "outro\n", "new\n", "f.md");
  REQUIRE(r.ok());
  CHECK(*r == "intro\n" + begin + "new\n" + end + "outro\n");
  StatusOr<std::string> missing = ReplaceGeneratedBlock("intro\n" + end + begin, "x\n", "f.md");
  REQUIRE(!missing.ok());
  CHECK(missing.status().message().rfind("f.md: expected a line", 0) == 0);
}

}  // namespace headlab
