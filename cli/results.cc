// `headlab results EXP`: per arm (n, succeeded) its summary metrics as mean ± SE, one
// table per metric group that is never split, then each of the grid's paired comparisons
// as a short block: value with its unit, SE and 95% CI, which side is better and what the
// interval says, the pairs, and the log-prob differences explained.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "cli/cli_context.h"
#include "cli/commands.h"
#include "cli/resolve.h"
#include "cli/table.h"
#include "common/metric_names.h"
#include "common/paired_estimators.h"

namespace headlab {

namespace {

// Pairs listed per comparison; `--json` gives every one.
constexpr size_t kShownPairs = 8;

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
    {"throughput and memory",
     {"train.tokens_per_s", "train.step_s", "train.mfu", "mem.gpu_peak_bytes", "mem.peak_bytes"},
     {}},
    {"pruning", {}, {"prune."}},
    {"tasks", {}, {"mqar.", "passkey."}},
    {"SAF", {}, {"saf."}},
    {"AoH", {}, {"aoh."}},
    {"AAH-v3", {}, {"aah."}},
    {"measurement", {}, {"bench.", "flops.", "timing.", "time.", "kernel.", "dist."}},
};
// A table wider than this is printed with the metrics as rows instead (never split).
constexpr size_t kDefaultWidth = 100;

size_t TerminalWidth() {
  const char* c = std::getenv("COLUMNS");
  long v = c ? std::strtol(c, nullptr, 10) : 0;
  return v >= 40 ? size_t(v) : kDefaultWidth;
}

size_t Widest(const std::string& table) {
  size_t w = 0, line = 0;
  for (unsigned char ch : table) {
    if (ch == '\n') {
      w = std::max(w, line);
      line = 0;
    } else if ((ch & 0xC0) != 0x80) {
      ++line;
    }
  }
  return std::max(w, line);
}

// Returns each group's metric columns present in `arms` (groups with none are left out);
// a metric no group names goes to "other".
std::vector<std::pair<std::string, std::vector<std::string>>> GroupColumns(const Json& arms) {
  std::set<std::string> present, placed;
  for (const Json& a : arms)
    if (a.contains("metrics") && a["metrics"].is_object())
      for (auto& [k, v] : a["metrics"].items()) present.insert(k);
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const MetricGroup& g : kGroups) {
    std::vector<std::string> cols;
    for (const char* m : g.exact)
      if (present.count(m) && placed.insert(m).second) cols.push_back(m);
    for (const std::string& m : present)
      for (const char* p : g.prefixes)
        if (m.rfind(p, 0) == 0 && placed.insert(m).second) cols.push_back(m);
    if (!cols.empty()) out.emplace_back(g.title, cols);
  }
  std::vector<std::string> other;
  for (const std::string& m : present)
    if (!placed.count(m)) other.push_back(m);
  if (!other.empty()) out.emplace_back("other", other);
  return out;
}

// Throughput figures whose 0 means "not measured" (an arm that never trained), never a
// measured zero; shown as "-" (the dashboard's format.js says the same).
bool UnmeasuredAtZero(const std::string& metric, const Json& mean) {
  return (metric == metric::kTrainTokensPerS || metric == metric::kTrainMfu ||
          metric == metric::kTrainStepS) &&
         mean.is_number() && mean.get<double>() == 0;
}

// "mean ± SE" at one precision, in one binary unit for byte metrics.
std::string MetricCell(const std::string& metric, const Json& v) {
  if (!v.is_object()) return Cell(v);
  Json mean = v.value("mean", Json()), se = v.value("se", Json());
  if (UnmeasuredAtZero(metric, mean)) return "-";
  return IsBytesKey(metric) ? FormatBytesMeanSe(mean, se) : FormatMeanSe(mean, se);
}

// "arm" or, for an arm entry of one stratum, "arm train.lr=0.001".
std::string ArmLabel(const Json& a) {
  std::string label = Cell(a.value("arm", Json()));
  const Json by = a.value("by", Json::object());
  if (by.is_object())
    for (auto& [k, v] : by.items()) label += " " + k + "=" + v.dump();
  return label;
}

// One table of `arms` x `metrics`: an arm per row, or a metric per row when that is too
// wide for the terminal.
void PrintArmTable(const Json& arms, const std::vector<std::string>& metrics) {
  TableRow header = {"arm", "n", "ok"};
  for (const auto& m : metrics) header.push_back(m);
  std::vector<TableRow> rows;
  for (const Json& a : arms) {
    TableRow row = {ArmLabel(a), Cell(a.value("n", Json())), Cell(a.value("succeeded", Json()))};
    Json ms = a.value("metrics", Json::object());
    for (const auto& m : metrics)
      row.push_back(MetricCell(m, ms.is_object() ? ms.value(m, Json()) : Json()));
    rows.push_back(row);
  }
  std::string wide = FormatTable(header, rows);
  if (Widest(wide) <= TerminalWidth()) {
    std::printf("%s", wide.c_str());
    return;
  }
  TableRow theader = {"metric"};
  for (const TableRow& r : rows) theader.push_back(r[0] + " (n " + r[1] + ", ok " + r[2] + ")");
  std::vector<TableRow> trows;
  for (size_t m = 0; m < metrics.size(); ++m) {
    TableRow row = {metrics[m]};
    for (const TableRow& r : rows) row.push_back(r[3 + m]);
    trows.push_back(row);
  }
  std::printf("%s", FormatTable(theader, trows).c_str());
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
    const Json precision = a.value("precision", Json::array()),
               paths = a.value("attention_paths", Json::array());
    any = any || !precision.empty() || !paths.empty();
    rows.push_back({ArmLabel(a), joined(precision), joined(paths)});
  }
  if (!any) return;
  std::printf(
      "\nexecution (precision; attention paths of the layers: sdpa, fused kernels, "
      "fixed-pattern GEMM, or dense_reference with why)\n%s",
      FormatTable({"arm", "precision", "attention paths"}, rows).c_str());
}

// A number with the statistic's unit: "-0.201 %", "1.07x", "0.0031".
std::string WithUnit(const Json& v, const std::string& unit) {
  if (!v.is_number()) return "-";
  std::string s = FormatNumber(v.get<double>());
  if (unit == "%") return s + " %";
  if (unit == "x") return s + "x";
  return s;
}

// What the runs' statuses say about the answer: "" when every run finished; else a line
// saying how many are still queued or running.
std::string InFlightLine(const Json& counts) {
  int64_t live = 0, all = 0;
  if (counts.is_object())
    for (auto& [status, n] : counts.items()) {
      if (!n.is_number_integer()) continue;
      all += n.get<int64_t>();
      if (status == "queued" || status == "running") live += n.get<int64_t>();
    }
  if (live == 0) return "";
  return "partial: " + std::to_string(live) + " of " + std::to_string(all) +
         " runs still queued or running (`headlab wait` waits for them)";
}

// "3 cancelled, 1 failed": the counts of every status.
std::string StatusList(const Json& counts) {
  std::string out;
  if (counts.is_object())
    for (auto& [status, n] : counts.items())
      out += (out.empty() ? "" : ", ") + Cell(n) + " " + status;
  return out.empty() ? "no runs" : out;
}

// The formula of a statistic, per pair.
std::string StatFormula(const std::string& stat) {
  if (stat == "delta_pct") return "100 (t/b - 1) per pair, in %";
  if (stat == "diff") return "t - b per pair";
  if (stat == "ratio") return "t / b per pair";
  if (stat == "speedup") return "b / t per pair (above 1: the treatment is faster)";
  return stat;
}

// The first kShownPairs pairs of a comparison `c` ("seed=1: -2 %, ..."), then how many
// there are (n_pairs where the coordinator sent only the first few).
std::string PairList(const Json& c, const std::string& unit,
                     const std::vector<std::string>& pair_by) {
  const Json per_pair = c.value("per_pair", Json::array());
  const size_t total = c.value("n_pairs", per_pair.is_array() ? per_pair.size() : 0);
  std::string s;
  size_t shown = 0;
  for (const Json& p : per_pair) {
    if (++shown > kShownPairs) {
      s += ", ... (" + std::to_string(total) + " pairs; --json for all)";
      break;
    }
    std::string key = Cell(p.value("pair_key", Json()));
    auto parsed = ParseJson(key, "pair_key");
    if (parsed.ok() && parsed->is_array() && parsed->size() == pair_by.size()) {
      key.clear();
      for (size_t i = 0; i < pair_by.size(); ++i)
        key += (i ? " " : "") + pair_by[i] + "=" + Cell((*parsed)[i]);
    }
    s += (s.empty() ? "" : ", ") + key + ": " + WithUnit(p.value("value", Json()), unit);
  }
  return s;
}

void PrintComparison(const Json& c, const std::vector<std::string>& pair_by) {
  const std::string unit = c.value("unit", "");
  const std::string stat = Cell(c.value("stat", Json()));
  std::printf("\n%s: %s vs %s on %s, %s = %s\n", Cell(c.value("name", Json())).c_str(),
              Cell(c.value("treatment", Json())).c_str(), Cell(c.value("baseline", Json())).c_str(),
              Cell(c.value("metric", Json())).c_str(), stat.c_str(), StatFormula(stat).c_str());
  const std::string n = Cell(c.value("n", Json()));
  if (c.value("n", 0) == 0) {
    std::printf("  no pairs: %s\n", c.value("note", std::string("none complete yet")).c_str());
    return;
  }
  const std::string estimator = c.value("estimator", "");
  const Json spread = c.value("spread", Json::object());
  if (estimator == "median_paired") {
    std::printf(
        "  n pairs %s   median %s   range [%s, %s] (median_paired: single-device "
        "timing legs)\n",
        n.c_str(), WithUnit(c.value("value", Json()), unit).c_str(),
        WithUnit(spread.value("lo", Json()), unit).c_str(),
        WithUnit(spread.value("hi", Json()), unit).c_str());
  } else {
    const Json ci = c.contains("ci") ? c.value("ci", Json()) : c.value("ci95", Json());
    const std::string level = paired::LevelLabel(ci.is_object() ? ci.value("level", 0.95) : 0.95);
    std::string se = c.value("se", Json()).is_number()
                         ? " ± " + FormatNumber(c["se"].get<double>()) + " (SE)"
                         : "";
    std::string cis = ci.is_object()
                          ? "   " + level + " CI [" + WithUnit(ci.value("lo", Json()), unit) +
                                ", " + WithUnit(ci.value("hi", Json()), unit) + "] (Student t, " +
                                Cell(ci.value("df", Json())) + " df)"
                          : "   a CI needs 2 pairs or more";
    std::printf("  n pairs %s   mean %s%s%s\n", n.c_str(),
                WithUnit(c.value("mean", Json()), unit).c_str(), se.c_str(), cis.c_str());
  }
  const Json better = c.value("better", Json());
  const Json verdict = c.value("verdict", Json());
  if (better.is_string() || verdict.is_string())
    std::printf("  %s%s\n", better.is_string() ? (Cell(better) + " is better: ").c_str() : "",
                verdict.is_string() ? Cell(verdict).c_str() : "too few pairs to say");
  std::printf("  pairs: %s\n", PairList(c, unit, pair_by).c_str());
  const Json lp = c.value("logprob_diff", Json());
  if (lp.is_object() && !lp.contains("unavailable"))
    std::printf(
        "  log-prob diff %s [%s, %s] nats/token over %s held-out rows (bootstrap 95%% CI):\n"
        "    treatment - baseline per token, so > 0 means the treatment gives the tokens\n"
        "    more probability (lower loss); the opposite sign of a loss or ppl change\n",
        Cell(lp.value("mean", Json())).c_str(), Cell(lp.value("lo", Json())).c_str(),
        Cell(lp.value("hi", Json())).c_str(), Cell(lp.value("n_rows", Json())).c_str());
  const Json ctl = c.value("control", Json());
  if (ctl.is_object())
    std::printf("  zero-replacement control %s: %s (%s ±%s)\n",
                Cell(ctl.value("arm", Json())).c_str(), Cell(ctl.value("value", Json())).c_str(),
                c.value("contended", false) ? "CONTENDED: beyond" : "within",
                Cell(ctl.value("tolerance", Json())).c_str());
  const Json f = c.value("flops", Json::object());
  if (f.is_object() && f.value("flops.total_ratio", Json()).is_number())
    std::printf("  measured FLOPs ratio (treatment / baseline): total %s, attention %s\n",
                Cell(f["flops.total_ratio"]).c_str(),
                Cell(f.value("flops.attention_ratio", Json())).c_str());
  const std::string device = Cell(c.value("device", Json()));
  if (!device.empty() && device != "unknown") std::printf("  device: %s\n", device.c_str());
}

}  // namespace

int RunResults(const CliContext& ctx, const ParsedArgs& args) {
  auto id = ResolveExperiment(ctx, args.positional()[0]);
  if (!id.ok()) return Fail(ctx, id.status());
  const std::string base = "/api/v1/experiments/" + std::to_string(id.value());
  // The pairs too: --json all of them, the text the first few (kShownPairs + 1 says there
  // are more; n_pairs how many).
  std::string query = args.Has("--json")
                          ? "per_pair=1"
                          : "per_pair=1&pair_limit=" + std::to_string(kShownPairs + 1);
  std::string by_keys;
  for (const std::string& k : args.All("--by")) by_keys += (by_keys.empty() ? "" : ",") + k;
  if (!by_keys.empty()) query += "&by=" + UrlQueryEscape(by_keys);
  if (args.Has("--level")) query += "&level=" + UrlQueryEscape(args.Get("--level"));
  auto res = ctx.Client().Call("GET", base + "/results?" + query);
  if (!res.ok()) return Fail(ctx, res.status());
  if (args.Has("--json")) {
    PrintJson(res.value());
    return kExitOk;
  }
  auto exp = ctx.Client().Call("GET", base);
  std::vector<std::string> pair_by;
  std::string name;
  if (exp.ok() && exp->is_object()) {
    name = exp->value("name", "");
    for (const Json& k : exp->value("pair_by", Json::array()))
      if (k.is_string()) pair_by.push_back(k);
  }
  const Json& r = res.value();
  Json arms = r.value("arms", Json::array());
  Json comparisons = r.value("comparisons", Json::array());
  if (!arms.is_array() || !comparisons.is_array())
    return Fail(ctx, Status::Internal("unexpected response: " + r.dump().substr(0, 200)));
  const Json counts = r.value("status_counts", Json::object());
  const bool any_ok = counts.is_object() && counts.value("succeeded", 0) > 0;
  const std::string in_flight = InFlightLine(counts);
  if (!any_ok && counts.is_object()) {  // nothing to show: say why instead of empty tables
    const std::string label = std::to_string(id.value()) + (name.empty() ? "" : " (" + name + ")");
    std::fprintf(stderr, "headlab results: experiment %s has no succeeded run %s(%s)\n",
                 label.c_str(), in_flight.empty() ? "" : "yet ", StatusList(counts).c_str());
    if (!in_flight.empty())
      std::fprintf(stderr, "  `headlab wait %s` waits for them\n", args.positional()[0].c_str());
    return kExitFailed;
  }
  std::printf(
      "experiment %lld%s: arms (summary metrics: mean ± SE over each arm's succeeded runs)\n",
      static_cast<long long>(id.value()), name.empty() ? "" : (" (" + name + ")").c_str());
  if (!in_flight.empty()) std::printf("%s\n", in_flight.c_str());
  std::string strata;
  for (const Json& k : r.value("by", Json::array()))
    strata += (strata.empty() ? "" : ", ") + Cell(k);
  if (!strata.empty())
    std::printf("broken down by %s (axes outside pair_by never pool; --by adds keys)\n",
                strata.c_str());
  for (const auto& [title, columns] : GroupColumns(arms)) {
    std::printf("\n%s\n", title.c_str());
    PrintArmTable(arms, columns);
  }
  PrintExecution(arms);
  std::string paired_by;
  for (const auto& k : pair_by) paired_by += (paired_by.empty() ? "" : ", ") + k;
  std::printf("\ncomparisons (treatment vs baseline, runs paired by %s)\n",
              paired_by.empty() ? "the grid's pair_by" : paired_by.c_str());
  if (comparisons.empty()) {
    std::printf("  (none)\n");
    return kExitOk;
  }
  std::map<std::string, std::vector<std::string>> unmeasured;  // reason -> comparisons
  for (const Json& c : comparisons) {
    PrintComparison(c, pair_by);
    const Json f = c.value("flops", Json::object());
    if (f.is_object() && f.contains("reason"))
      unmeasured[Cell(f["reason"])].push_back(Cell(c.value("name", Json())));
  }
  for (const auto& [reason, names] : unmeasured)
    std::printf("\nFLOPs ratios unmeasured for %s: %s\n",
                names.size() == comparisons.size()
                    ? "every comparison"
                    : (std::to_string(names.size()) + " comparisons").c_str(),
                reason.c_str());
  return kExitOk;
}

}  // namespace headlab
