// `headlab results EXP`: per arm (n, succeeded) its summary metrics as mean ± SE, in one
// table per metric group, then the grid's paired comparisons.
#include <algorithm>
#include <cstdio>
#include <set>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "cli/table.h"

namespace headlab {

namespace {

// Arm metrics are shown in groups, one table each: the training figures every run has,
// then each method's and measurement's own (by name prefix, common/metric_names.h), so a
// method's figures appear without this file knowing their names.
struct MetricGroup {
  const char* title;
  std::vector<const char*> exact;     // these names, in this order
  std::vector<const char*> prefixes;  // then every name with one of these prefixes
};
const MetricGroup kGroups[] = {
    {"training", {"eval.ppl", "eval.loss", "train.loss", "time.elapsed_s"}, {}},
    {"throughput and memory", {"train.tokens_per_s", "train.step_s", "train.mfu", "mem.gpu_peak_bytes",
                               "mem.peak_bytes"}, {}},
    {"pruning", {}, {"prune."}},
    {"tasks", {}, {"mqar.", "passkey."}},
    {"SAF", {}, {"saf."}},
    {"AoH", {}, {"aoh."}},
    {"AAH-v3", {}, {"aah."}},
    {"measurement", {}, {"bench.", "flops.", "timing."}},
};
constexpr size_t kColumnsPerTable = 5;

// Returns each group's metric columns present in `arms` (groups with none are left out).
std::vector<std::pair<std::string, std::vector<std::string>>> GroupColumns(const Json& arms) {
  std::set<std::string> present;
  for (const Json& a : arms)
    if (a.contains("metrics") && a["metrics"].is_object())
      for (auto& [k, v] : a["metrics"].items()) present.insert(k);
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const MetricGroup& g : kGroups) {
    std::vector<std::string> cols;
    for (const char* m : g.exact)
      if (present.count(m)) cols.push_back(m);
    for (const std::string& m : present)
      for (const char* p : g.prefixes)
        if (m.rfind(p, 0) == 0) cols.push_back(m);
    if (!cols.empty()) out.emplace_back(g.title, cols);
  }
  return out;
}

// Prints one table of `arms` x `metrics` (mean ± SE cells).
void PrintArmTable(const Json& arms, const std::vector<std::string>& metrics) {
  TableRow header = {"arm", "n", "ok"};
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
  std::printf("%s", FormatTable(header, rows).c_str());
}

// One row per arm: the precision its runs computed in and the attention paths their layers
// took (a dense fallback where a fast path was expected shows here); nothing when no run
// reported either (runs of kinds that build no model).
void PrintExecution(const Json& arms) {
  std::vector<TableRow> rows;
  auto joined = [](const Json& list) {
    std::string out;
    if (list.is_array())
      for (const Json& v : list) out += (out.empty() ? "" : " | ") + Cell(v);
    return out.empty() ? std::string("-") : out;
  };
  bool any = false;
  for (const Json& a : arms) {
    const Json precision = a.value("precision", Json::array()), paths = a.value("attention_paths", Json::array());
    any = any || !precision.empty() || !paths.empty();
    rows.push_back({Cell(a.value("arm", Json())), joined(precision), joined(paths)});
  }
  if (!any) return;
  std::printf("\nexecution (precision; attention paths of the layers: sdpa, fused kernels, "
              "fixed-pattern GEMM, or dense_reference with why)\n%s",
              FormatTable({"arm", "precision", "attention paths"}, rows).c_str());
}

// "v [lo, hi]" for the median estimator, "mean ± SE" otherwise.
std::string ComparisonValue(const Json& c) {
  const Json spread = c.value("spread", Json::object());
  if (c.value("estimator", "") == "median_paired" && spread.is_object())
    return Cell(c.value("value", Json())) + " [" + Cell(spread.value("lo", Json())) + ", " +
           Cell(spread.value("hi", Json())) + "]";
  return FormatMeanSe(c.value("mean", Json()), c.value("se", Json()));
}

// "z_control 0.98 (within ±0.05)" / "... CONTENDED" / "-".
std::string ControlCell(const Json& c) {
  const Json ctl = c.value("control", Json());
  if (!ctl.is_object()) return "-";
  const bool contended = c.value("contended", false);
  return Cell(ctl.value("arm", Json())) + " " + Cell(ctl.value("value", Json())) +
         (contended ? " CONTENDED (beyond ±" : " (within ±") +
         Cell(ctl.value("tolerance", Json())) + ")";
}

std::string FlopsCell(const Json& c, const char* key) {
  const Json f = c.value("flops", Json::object());
  return f.is_object() && f.contains(key) ? Cell(f[key]) : "-";
}

// "mean [lo, hi] over N rows", the reason it is unavailable, or "-".
std::string LogProbCell(const Json& c) {
  const Json lp = c.value("logprob_diff", Json());
  if (!lp.is_object()) return "-";
  if (lp.contains("unavailable")) return "unavailable";
  return Cell(lp.value("mean", Json())) + " [" + Cell(lp.value("lo", Json())) + ", " +
         Cell(lp.value("hi", Json())) + "] over " + Cell(lp.value("n_rows", Json())) + " rows";
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
  std::printf("experiment %s: arms (metrics: mean ± SE over the arm's succeeded runs)\n",
              std::to_string(id.value()).c_str());
  for (const auto& [title, columns] : GroupColumns(arms))
    for (size_t i = 0; i < columns.size(); i += kColumnsPerTable) {
      std::printf("\n%s%s\n", title.c_str(), i ? " (continued)" : "");
      PrintArmTable(arms, std::vector<std::string>(
                              columns.begin() + i,
                              columns.begin() + std::min(columns.size(), i + kColumnsPerTable)));
    }
  PrintExecution(arms);
  std::printf("\ncomparisons (paired by the grid's pair_by; treatment vs baseline; value = the "
              "estimator's: median with [min, max] or mean ± SE)\n");
  std::vector<TableRow> crows, drows;
  for (const Json& c : comparisons) {
    const std::string name = Cell(c.value("name", Json()));
    crows.push_back({name,
                     Cell(c.value("treatment", Json())) + " vs " + Cell(c.value("baseline", Json())),
                     Cell(c.value("metric", Json())), Cell(c.value("stat", Json())),
                     Cell(c.value("estimator", Json())), Cell(c.value("n", Json())),
                     ComparisonValue(c), Cell(c.value("device", Json()))});
    drows.push_back({name, ControlCell(c), FlopsCell(c, "flops.total_ratio"),
                     FlopsCell(c, "flops.attention_ratio"), LogProbCell(c)});
  }
  if (crows.empty()) {
    std::printf("  (none)\n");
    return kExitOk;
  }
  std::printf("%s", FormatTable({"name", "arms", "metric", "stat", "estimator", "n pairs", "value",
                                 "device"}, crows).c_str());
  std::printf("\ncontrols, measured FLOPs ratios (treatment / baseline) and per-token log-prob "
              "differences (bootstrap 95%% CI over held-out rows)\n%s",
              FormatTable({"name", "zero-replacement control", "FLOPs total", "FLOPs attention",
                           "logprob diff"}, drows).c_str());
  for (const Json& c : comparisons) {
    const Json f = c.value("flops", Json::object());
    if (f.is_object() && f.contains("reason"))
      std::printf("  %s: FLOPs unmeasured: %s\n", Cell(c.value("name", Json())).c_str(),
                  Cell(f["reason"]).c_str());
  }
  return kExitOk;
}

}  // namespace headlab
