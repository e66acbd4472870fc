// `headlab results EXP`: one row per arm (n, succeeded, key summary metrics as mean ± SE),
// then the grid's paired comparisons.
#include <cstdio>
#include <set>

#include "cli/commands.h"
#include "cli/table.h"

namespace headlab {

namespace {

// Metrics shown first when present; any others follow in name order, up to kMaxColumns.
const char* const kPreferred[] = {"eval.ppl", "eval.loss", "train.loss", "time.elapsed_s"};
constexpr size_t kMaxColumns = 4;

std::vector<std::string> MetricColumns(const Json& arms) {
  std::set<std::string> present;
  for (const Json& a : arms)
    if (a.contains("metrics") && a["metrics"].is_object())
      for (auto& [k, v] : a["metrics"].items()) present.insert(k);
  std::vector<std::string> cols;
  for (const char* m : kPreferred)
    if (present.erase(m)) cols.push_back(m);
  for (const auto& m : present)
    if (cols.size() < kMaxColumns) cols.push_back(m);
  if (cols.size() > kMaxColumns) cols.resize(kMaxColumns);
  return cols;
}

}  // namespace

int RunResults(const CliContext& ctx, const ParsedArgs& args) {
  auto id = ParseId(args.positional()[0], "experiment");
  if (!id.ok()) return Fail(ctx, id.status());
  auto res = ctx.Client().Call("GET", "/api/v1/experiments/" + std::to_string(id.value()) + "/results");
  if (!res.ok()) return Fail(ctx, res.status());
  if (args.Has("--json")) {
    PrintJson(res.value());
    return kExitOk;
  }
  const Json& r = res.value();
  Json arms = r.value("arms", Json::array());
  Json comparisons = r.value("comparisons", Json::array());
  if (!arms.is_array() || !comparisons.is_array())
    return Fail(ctx, Status::Internal("unexpected response: " + r.dump().substr(0, 200)));
  std::vector<std::string> metrics = MetricColumns(arms);
  TableRow header = {"arm", "n", "succeeded"};
  for (const auto& m : metrics) header.push_back(m);
  std::vector<TableRow> rows;
  for (const Json& a : arms) {
    TableRow row = {Cell(a.value("arm", Json())), Cell(a.value("n", Json())),
                    Cell(a.value("succeeded", Json()))};
    Json ms = a.value("metrics", Json::object());
    for (const auto& m : metrics) {
      Json v = ms.is_object() ? ms.value(m, Json::object()) : Json::object();
      row.push_back(v.is_object() ? FormatMeanSe(v.value("mean", Json()), v.value("se", Json()))
                                  : Cell(v));
    }
    rows.push_back(row);
  }
  std::printf("experiment %s: arms (metrics: mean ± SE over the arm's succeeded runs)\n%s",
              std::to_string(id.value()).c_str(),
              FormatTable(header, rows).c_str());
  std::printf("\ncomparisons (paired by the grid's pair_by; treatment vs baseline)\n");
  std::vector<TableRow> crows;
  for (const Json& c : comparisons)
    crows.push_back({Cell(c.value("name", Json())),
                     Cell(c.value("treatment", Json())) + " vs " + Cell(c.value("baseline", Json())),
                     Cell(c.value("metric", Json())), Cell(c.value("stat", Json())),
                     Cell(c.value("n", Json())),
                     FormatMeanSe(c.value("mean", Json()), c.value("se", Json()))});
  if (crows.empty()) std::printf("  (none)\n");
  else std::printf("%s", FormatTable({"name", "arms", "metric", "stat", "n pairs", "mean ± SE"},
                                     crows).c_str());
  return kExitOk;
}

}  // namespace headlab
