// `headlab query "SQL"`: read-only SQL through the coordinator (POST /api/v1/query), as an
// aligned table, CSV or JSON.
#include <cstdio>

#include "cli/commands.h"
#include "cli/table.h"

namespace headlab {

int RunQuery(const CliContext& ctx, const ParsedArgs& args) {
  if (args.Has("--csv") && args.Has("--json"))
    return Fail(ctx, Status::InvalidArgument("give at most one of --csv and --json"));
  Json body = {{"sql", args.positional()[0]}};
  auto res = ctx.Client().Call("POST", "/api/v1/query", &body);
  if (!res.ok()) return Fail(ctx, res.status());
  const Json& r = res.value();
  if (args.Has("--json")) {
    PrintJson(r);
    return kExitOk;
  }
  if (!r.is_object() || !r.contains("columns") || !r["columns"].is_array() || !r.contains("rows") ||
      !r["rows"].is_array())
    return Fail(ctx, Status::Internal("unexpected response: " + r.dump().substr(0, 200)));
  TableRow header;
  for (const Json& c : r["columns"]) header.push_back(Cell(c));
  std::vector<TableRow> rows;
  for (const Json& row : r["rows"]) {
    TableRow cells;
    if (row.is_array())
      for (const Json& v : row) cells.push_back(v.is_number_float() ? v.dump() : Cell(v));
    rows.push_back(cells);
  }
  if (args.Has("--csv")) {
    std::printf("%s", FormatCsv(header, rows).c_str());
  } else {
    std::printf("%s", FormatTable(header, rows).c_str());
    std::fprintf(stderr, "(%zu row%s)\n", rows.size(), rows.size() == 1 ? "" : "s");
  }
  return kExitOk;
}

}  // namespace headlab
