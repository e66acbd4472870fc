// Per-arm aggregates and paired comparisons.
#include "coordinator/results.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>

#include "common/grid.h"
#include "common/metric_catalog.h"
#include "common/metric_names.h"
#include "common/run_config.h"
#include "common/suggest.h"
#include "coordinator/paired_sources.h"
#include "coordinator/views.h"

namespace headlab::coord {
namespace {

// JSON has no NaN: non-finite numbers become null.
Json Num(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

struct RunSummary {
  int64_t id = 0;
  std::string arm;
  std::string pair_key;
  std::string status;
  std::map<std::string, double> metrics;
  Json config;
  Json by = Json::object();  // the strata keys' values
};

// The runs of one stratum (one combination of the strata keys' values), in grid order.
using RunSet = std::vector<const RunSummary*>;

// The config value at `pointer`, or `fallback` when absent or of another type.
template <typename T>
T ConfigValue(const Json& config, const char* pointer, T fallback) {
  const Json::json_pointer ptr(pointer);
  if (!config.contains(ptr)) return fallback;
  const Json& v = config.at(ptr);
  if constexpr (std::is_same_v<T, std::string>)
    return v.is_string() ? v.get<std::string>() : fallback;
  else
    return v.is_number() ? v.get<T>() : fallback;
}

bool IsPairedLeg(const RunSummary& r) {
  return !ConfigValue<std::string>(r.config, "/pair/group", "").empty();
}

struct Pair {
  const RunSummary* b;
  const RunSummary* t;
};

// Pairs runs of arms `base` and `treat` of one stratum by pair_key. Every axis outside
// pair_by is a strata key, so a pair_key names one run per arm; should several share one
// (arms of unequal size), they appear in the same axis order in every arm (schema/grid.md,
// expansion) and the k-th of the baseline pairs with the k-th of the treatment.
std::vector<Pair> PairRuns(const RunSet& runs, const std::string& base, const std::string& treat) {
  std::map<std::pair<std::string, int>, const RunSummary*> b_runs, t_runs;
  std::map<std::string, int> b_count, t_count;
  for (const RunSummary* rs : runs) {
    if (rs->arm == base) b_runs[{rs->pair_key, b_count[rs->pair_key]++}] = rs;
    if (rs->arm == treat) t_runs[{rs->pair_key, t_count[rs->pair_key]++}] = rs;
  }
  std::vector<Pair> out;
  for (const auto& [key, br] : b_runs) {
    auto it = t_runs.find(key);
    if (it != t_runs.end()) out.push_back({br, it->second});
  }
  return out;
}

// The within-pair values of `stat` on `metric` over the pairs that have both.
struct PairValues {
  std::vector<double> values, baseline, treatment;
  Json per_pair = Json::array();
};
PairValues ValuesOf(const std::vector<Pair>& pairs, const std::string& metric,
                    const std::string& stat);

// Median for paired timing legs that each ran on at most one device (docs/DESIGN.md: median for
// single-GPU timing); mean +- SE otherwise (multi-GPU timing, seeds, finetuning).
std::string ChooseEstimator(Db* db, const std::string& stat, const std::vector<Pair>& pairs) {
  if (stat != "ratio" && stat != "speedup") return paired::kMeanSe;
  if (pairs.empty()) return paired::kMeanSe;
  for (const Pair& p : pairs)
    for (const RunSummary* r : {p.b, p.t})
      if (!IsPairedLeg(*r) || LoadRunPlacement(db, r->id).device_count > 1) return paired::kMeanSe;
  return paired::kMedian;
}

// The distinct device labels of the pairs' runs, joined with " | ".
std::string DevicesOf(Db* db, const std::vector<Pair>& pairs) {
  std::set<std::string> labels;
  for (const Pair& p : pairs)
    for (const RunSummary* r : {p.b, p.t}) {
      std::string d = LoadRunPlacement(db, r->id).device;
      if (!d.empty()) labels.insert(d);
    }
  std::string out;
  for (const std::string& d : labels) out += (out.empty() ? "" : " | ") + d;
  return out.empty() ? "unknown" : out;
}

Json SummaryJson(const paired::PairedSummary& s) {
  return {{"estimator", s.estimator},
          {"n", s.n},
          {"value", Num(s.value)},
          {"se", Num(s.se)},
          {"spread",
           {{"kind", s.estimator == paired::kMedian ? "range" : "mean_pm_se"},
            {"lo", Num(s.lo)},
            {"hi", Num(s.hi)}}}};
}

// The zero-replacement control (runs with pair.control = 1 in an arm other than the two
// compared): its within-pair value against the same baseline must stay within
// pair.tolerance of 1.00x, else the comparison is contended. Only for ratio and speedup.
void AddControl(const RunSet& runs, const std::string& base, const std::string& treat,
                const std::string& metric, const std::string& stat, const std::string& estimator,
                Json* c) {
  (*c)["control"] = nullptr;
  (*c)["contended"] = nullptr;
  if (stat != "ratio" && stat != "speedup") return;
  std::set<std::string> controls;
  for (const RunSummary* r : runs)
    if (r->arm != base && r->arm != treat &&
        ConfigValue<int64_t>(r->config, "/pair/control", 0) == 1)
      controls.insert(r->arm);
  if (controls.empty()) return;
  Json all = Json::array();
  bool contended = false;
  for (const std::string& arm : controls) {
    std::vector<Pair> pairs = PairRuns(runs, base, arm);
    PairValues v = ValuesOf(pairs, metric, stat);
    paired::PairedSummary s = paired::Summarise(v.values, estimator);
    double tolerance = 0.05;
    if (!pairs.empty())
      tolerance = ConfigValue<double>(pairs[0].t->config, "/pair/tolerance", 0.05);
    const bool within = paired::WithinControlTolerance(s.value, tolerance);
    contended = contended || !within;
    Json j = SummaryJson(s);
    j["arm"] = arm;
    j["tolerance"] = tolerance;
    j["within_tolerance"] = within;
    j["per_pair"] = v.per_pair;
    all.push_back(j);
  }
  (*c)["control"] = all.size() == 1 ? all[0] : all;
  (*c)["contended"] = contended;
}

// Paired differences of per-token log-probabilities (treatment - baseline) from the runs'
// logprobs artifacts: per row (one held-out sequence) means, a bootstrap 95% CI over rows
// per pair (seeded by the pair's seed) and over all pairs' rows (seed 0).
Json LogProbDiff(Db* db, const std::vector<Pair>& pairs) {
  std::vector<double> all_rows;
  Json per_pair = Json::array();
  for (const Pair& p : pairs) {
    auto b = LoadLogProbs(db, p.b->id);
    auto t = LoadLogProbs(db, p.t->id);
    if (!b.ok() || !t.ok()) return {{"unavailable", (!b.ok() ? b.status() : t.status()).message()}};
    const int64_t row_len = ConfigValue<int64_t>(p.b->config, "/model/context", 0);
    if (b->size() != t->size() || row_len <= 0 || b->size() % size_t(row_len))
      return {{"unavailable", "logprobs of runs " + std::to_string(p.b->id) + " and " +
                                  std::to_string(p.t->id) + " differ in length (" +
                                  std::to_string(b->size()) + " vs " + std::to_string(t->size()) +
                                  ") or are not whole rows of model.context"}};
    std::vector<double> rows =
        paired::RowMeanDifferences(b->data(), t->data(), b->size(), size_t(row_len));
    const uint64_t seed = uint64_t(ConfigValue<int64_t>(p.b->config, "/seed", 0));
    paired::BootstrapCi ci = paired::BootstrapMeanCi(rows, kBootstrapResamples, seed);
    per_pair.push_back({{"pair_key", p.b->pair_key},
                        {"n_rows", ci.n},
                        {"mean", Num(ci.mean)},
                        {"lo", Num(ci.lo)},
                        {"hi", Num(ci.hi)},
                        {"seed", seed}});
    all_rows.insert(all_rows.end(), rows.begin(), rows.end());
  }
  paired::BootstrapCi ci = paired::BootstrapMeanCi(all_rows, kBootstrapResamples, 0);
  return {{"estimator", paired::kBootstrap},
          {"n_pairs", per_pair.size()},
          {"n_rows", ci.n},
          {"mean", Num(ci.mean)},
          {"lo", Num(ci.lo)},
          {"hi", Num(ci.hi)},
          {"resamples", ci.resamples},
          {"seed", ci.seed},
          {"per_pair", per_pair}};
}

// Measured Total and Attention FLOPs Ratios, treatment / baseline (AAH §5.10: method /
// pure), each the median over the pairs of the per-run counts; "unmeasured" with the
// reason when any run lacks the count. Never an estimate.
Json FlopsRatios(Db* db, const std::vector<Pair>& pairs) {
  Json out = Json::object();
  std::string reason;
  for (const auto& [key, metric] :
       {std::pair{metric::kFlopsTotalRatio, metric::kFlopsTotal},
        std::pair{metric::kFlopsAttentionRatio, metric::kFlopsAttention}}) {
    std::vector<double> ratios;
    bool all = !pairs.empty();
    for (const Pair& p : pairs) {
      auto b = p.b->metrics.find(metric), t = p.t->metrics.find(metric);
      if (b == p.b->metrics.end() || t == p.t->metrics.end() || b->second <= 0) {
        all = false;
        for (const RunSummary* r : {p.b, p.t})
          if (reason.empty()) reason = LoadFlopsReason(db, r->id);
        continue;
      }
      ratios.push_back(t->second / b->second);
    }
    out[key] = all ? Num(paired::Median(ratios)) : Json("unmeasured");
  }
  if (out[metric::kFlopsTotalRatio].is_string() || out[metric::kFlopsAttentionRatio].is_string())
    out["reason"] = !reason.empty() ? reason
                                    : "no flops counts for these runs (they come from the "
                                      "flops run kind's CUPTI counters on a GPU)";
  return out;
}

}  // namespace

std::optional<double> PairValue(const std::string& stat, double b, double t) {
  if (stat == "diff") return t - b;
  if (b == 0) return std::nullopt;
  if (stat == "ratio") return t / b;
  if (stat == "delta_pct") return 100.0 * (t / b - 1.0);
  if (stat == "speedup") return t == 0 ? std::nullopt : std::optional<double>(b / t);
  return std::nullopt;
}

namespace {

PairValues ValuesOf(const std::vector<Pair>& pairs, const std::string& metric,
                    const std::string& stat) {
  PairValues out;
  for (const Pair& p : pairs) {
    auto bm = p.b->metrics.find(metric);
    auto tm = p.t->metrics.find(metric);
    if (bm == p.b->metrics.end() || tm == p.t->metrics.end()) continue;
    auto v = PairValue(stat, bm->second, tm->second);
    if (!v || !std::isfinite(*v)) continue;
    out.values.push_back(*v);
    out.baseline.push_back(bm->second);
    out.treatment.push_back(tm->second);
    out.per_pair.push_back({{"pair_key", p.b->pair_key},
                            {"baseline_run", p.b->id},
                            {"treatment_run", p.t->id},
                            {"baseline", bm->second},
                            {"treatment", tm->second},
                            {"value", *v}});
  }
  return out;
}

Json CiJson(const paired::Interval& ci, const MeanSe& m, double level) {
  return {{"lo", ci.lo}, {"hi", ci.hi}, {"level", level}, {"method", "student_t"}, {"df", m.n - 1}};
}

// How to read a comparison (schema/http_api.md, "Reading a comparison"): its unit, which
// side of "no difference" favours the treatment, the CI of the mean at `level` (Student's
// t; `ci95` always at 95%) and what the interval says.
void AddReading(const std::string& metric, const std::string& stat, const std::string& estimator,
                const std::vector<double>& values, double level, Json* c) {
  const double neutral = stat == "ratio" || stat == "speedup" ? 1.0 : 0.0;
  (*c)["unit"] = stat == "delta_pct" ? "%" : stat == "diff" ? "" : "x";
  (*c)["neutral"] = neutral;
  int d = BetterDirection(metric);
  if (stat == "speedup") d = -d;  // baseline / treatment: above 1 when the treatment is lower
  (*c)["better"] = d < 0 ? Json("lower") : d > 0 ? Json("higher") : Json(nullptr);
  MeanSe m = MeanAndSe(values);
  const bool mean_se = estimator == paired::kMeanSe;
  paired::Interval ci95 = paired::MeanCi(m, 0.95), ci = paired::MeanCi(m, level);
  (*c)["ci95"] = mean_se && std::isfinite(ci95.lo) ? CiJson(ci95, m, 0.95) : Json(nullptr);
  (*c)["ci"] = mean_se && std::isfinite(ci.lo) ? CiJson(ci, m, level) : Json(nullptr);
  // The interval the verdict reads: the CI of the mean, or every pair's range for medians.
  double lo = ci.lo, hi = ci.hi;
  if (estimator == paired::kMedian && values.size() >= 2) {
    lo = *std::min_element(values.begin(), values.end());
    hi = *std::max_element(values.begin(), values.end());
  }
  if (!std::isfinite(lo) || !std::isfinite(hi)) {
    (*c)["verdict"] = nullptr;
    return;
  }
  const std::string n = neutral == 1.0 ? "1" : "0";
  const bool ranged = estimator == paired::kMedian;
  std::string side = lo > neutral ? "higher" : hi < neutral ? "lower" : "";
  std::string why =
      side.empty()
          ? (ranged ? "pairs on both sides of " : paired::LevelLabel(level) + " CI includes ") + n
          : (ranged ? std::string("every pair ") + (side == "higher" ? "above " : "below ")
                    : paired::LevelLabel(level) + " CI excludes ") +
                n;
  std::string verdict = side.empty()                   ? "no clear difference"
                        : d == 0                       ? "treatment " + side
                        : (side == "lower") == (d < 0) ? "treatment better"
                                                       : "treatment worse";
  (*c)["verdict"] = verdict + " (" + why + ")";
}

// "2 failed, 1 cancelled": the counts of `statuses` other than succeeded.
std::string OtherStatuses(const std::map<std::string, int>& statuses) {
  std::string out;
  for (const auto& [status, n] : statuses)
    if (status != "succeeded") out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + status;
  return out;
}

// Why a comparison has no pairs: none complete yet (runs in flight), an arm with no
// succeeded run (and what became of its runs), or the arms' runs lack the metric.
std::string NoPairsNote(const RunSet& runs, const std::vector<Pair>& pairs, const std::string& base,
                        const std::string& treat, const std::string& metric) {
  if (pairs.empty()) {
    std::map<std::string, std::map<std::string, int>> by_arm;  // arm -> status -> count
    int ok = 0, all = 0, live = 0;
    for (const RunSummary* r : runs)
      if (r->arm == base || r->arm == treat) {
        ++all;
        ++by_arm[r->arm][r->status];
        ok += r->status == "succeeded";
        live += r->status == "queued" || r->status == "running";
      }
    if (live > 0)
      return "no complete pair yet (" + std::to_string(ok) + " of " + std::to_string(all) +
             " runs of the two arms succeeded; " + std::to_string(live) + " queued or running)";
    for (const std::string& arm : {treat, base})
      if (by_arm[arm]["succeeded"] == 0)
        return "no pair: no run of arm \"" + arm + "\" succeeded" +
               (by_arm[arm].empty() ? std::string(" (it has no runs)")
                                    : " (" + OtherStatuses(by_arm[arm]) + ")");
    return "no pair: no pair_by value has a succeeded run in both arms (" + std::to_string(ok) +
           " of " + std::to_string(all) + " runs of the two arms succeeded)";
  }
  for (const std::string& arm : {base, treat}) {
    std::vector<std::string> reported;
    bool has = false;
    for (const Pair& p : pairs) {
      const RunSummary* r = arm == base ? p.b : p.t;
      has = has || r->metrics.count(metric);
      for (const auto& [k, v] : r->metrics)
        if (std::find(reported.begin(), reported.end(), k) == reported.end()) reported.push_back(k);
    }
    if (has) continue;
    return "no succeeded run of arm \"" + arm + "\" reports " + metric +
           DidYouMean(metric, reported) + " (" + std::to_string(reported.size()) +
           " summary metrics reported)";
  }
  return "";
}

// The keys arms and comparisons are broken down by: `requested` (in order), then the
// grid's strata keys (common/grid.h StrataKeys).
std::vector<std::string> ResultStrata(const Json& grid, const Json& pair_by,
                                      const std::vector<std::string>& requested) {
  std::vector<std::string> paired;
  if (pair_by.is_array())
    for (const Json& k : pair_by)
      if (k.is_string()) paired.push_back(k.get<std::string>());
  std::vector<std::string> keys = requested;
  for (const std::string& k : StrataKeys(grid, paired))
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  return keys;
}

// "train.lr=0.001 seed=2": a stratum's values as a label.
std::string StratumLabel(const std::vector<std::string>& keys, const Json& by) {
  std::string out;
  for (const std::string& k : keys)
    out += (out.empty() ? "" : " ") + k + "=" + (by.contains(k) ? by[k].dump() : "null");
  return out;
}

// The runs grouped by stratum, in the order each stratum first appears in the grid.
std::vector<RunSet> Strata(const std::vector<RunSummary>& runs) {
  std::vector<RunSet> out;
  std::map<std::string, size_t> index;
  for (const RunSummary& r : runs) {
    auto [it, fresh] = index.emplace(CanonicalJson(r.by), out.size());
    if (fresh) out.emplace_back();
    out[it->second].push_back(&r);
  }
  return out;
}

// One arm's entry of one stratum: n, succeeded, mean ± SE of each summary metric, and the
// precision and attention paths its runs computed with.
Json ArmJson(Db* db, const std::string& arm, const RunSet& stratum, const Json& by) {
  int n = 0, ok = 0;
  std::map<std::string, std::vector<double>> values;
  std::set<std::string> precisions, paths;  // what the arm's runs computed in and on
  for (const RunSummary* rs : stratum) {
    if (rs->arm != arm) continue;
    ++n;
    if (rs->status != "succeeded") continue;
    ++ok;
    for (const auto& [k, v] : rs->metrics) values[k].push_back(v);
    RunExecution e = LoadRunExecution(db, rs->id);
    if (!e.precision.empty()) precisions.insert(e.precision);
    paths.insert(e.attention_paths.begin(), e.attention_paths.end());
  }
  Json metrics = Json::object();
  for (const auto& [k, vs] : values) {
    MeanSe m = MeanAndSe(vs);
    metrics[k] = {{"mean", Num(m.mean)}, {"se", Num(m.se)}, {"n", m.n}};
  }
  return {{"arm", arm},
          {"by", by},
          {"n", n},
          {"succeeded", ok},
          {"metrics", metrics},
          {"precision", Json(precisions)},
          {"attention_paths", Json(paths)}};
}

// One comparison of the grid within one stratum.
Json ComparisonJson(Db* db, const Json& c, const RunSet& stratum, const Json& by,
                    const std::string& label, double level) {
  std::string name = c.value("name", ""), base = c.value("baseline", ""),
              treat = c.value("treatment", ""), metric = c.value("metric", ""),
              stat = c.value("stat", "");
  std::vector<Pair> all_pairs = PairRuns(stratum, base, treat);
  std::vector<Pair> pairs;  // of succeeded runs: the only ones with summaries
  for (const Pair& p : all_pairs)
    if (p.b->status == "succeeded" && p.t->status == "succeeded") pairs.push_back(p);
  PairValues v = ValuesOf(pairs, metric, stat);
  const std::string estimator = ChooseEstimator(db, stat, pairs);
  paired::PairedSummary summary = paired::Summarise(v.values, estimator);
  MeanSe m = MeanAndSe(v.values);
  Json out = SummaryJson(summary);
  out.update({{"name", label.empty() ? name : name + " [" + label + "]"},
              {"comparison", name},
              {"by", by},
              {"baseline", base},
              {"treatment", treat},
              {"metric", metric},
              {"stat", stat},
              {"mean", Num(m.mean)},
              {"se", Num(m.se)},
              {"median", Num(paired::Median(v.values))},
              {"device", DevicesOf(db, pairs)},
              {"per_pair", v.per_pair}});
  if (stat == "speedup" || stat == "ratio")
    out["ratio_of_means"] = Num(stat == "speedup" ? paired::RatioOfMeans(v.baseline, v.treatment)
                                                  : paired::RatioOfMeans(v.treatment, v.baseline));
  AddReading(metric, stat, estimator, v.values, level, &out);
  if (v.values.empty()) out["note"] = NoPairsNote(stratum, pairs, base, treat, metric);
  AddControl(stratum, base, treat, metric, stat, estimator, &out);
  if (metric.rfind("eval.", 0) == 0) out["logprob_diff"] = LogProbDiff(db, pairs);
  out["flops"] = FlopsRatios(db, pairs);
  return out;
}

}  // namespace

StatusOr<ResultsOptions> ParseResultsOptions(const std::string& by, const std::string& level) {
  ResultsOptions o;
  size_t start = 0;
  while (!by.empty()) {
    size_t comma = by.find(',', start);
    std::string key = by.substr(start, comma == std::string::npos ? comma : comma - start);
    if (!IsRunConfigKey(key)) return UnknownRunConfigKey("results", "by", key);
    if (std::find(o.by.begin(), o.by.end(), key) == o.by.end()) o.by.push_back(key);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (!level.empty()) {
    char* end = nullptr;
    o.level = std::strtod(level.c_str(), &end);
    if (*end || !paired::IsConfidenceLevel(o.level))
      return Status::InvalidArgument(
          "results: level: expected a confidence level in (0, 1) "
          "such as 0.95 or 0.99, got \"" +
          level + "\"");
  }
  return o;
}

StatusOr<Json> ComputeResults(Db* db, int64_t experiment, const ResultsOptions& options) {
  Stmt e = db->MustPrepare(
      "SELECT arms_json, comparisons_json, grid_json, pair_by_json FROM experiments WHERE id=?");
  e.Bind(1, experiment);
  if (!e.Step()) return Status::NotFound("experiment " + std::to_string(experiment) + " not found");
  auto arms_j = ParseJson(e.Text(0), "experiments.arms_json");
  auto comps_j = ParseJson(e.Text(1), "experiments.comparisons_json");
  auto grid_j = ParseJson(e.Text(2), "experiments.grid_json");
  auto pair_by_j = ParseJson(e.Text(3), "experiments.pair_by_json");
  if (!arms_j.ok()) return arms_j.status();
  if (!comps_j.ok()) return comps_j.status();
  if (!grid_j.ok()) return grid_j.status();
  if (!pair_by_j.ok()) return pair_by_j.status();
  for (const std::string& k : options.by)
    if (!IsRunConfigKey(k)) return UnknownRunConfigKey("results", "by", k);
  const std::vector<std::string> keys = ResultStrata(*grid_j, *pair_by_j, options.by);

  // Runs in grid order, with their summaries.
  std::vector<RunSummary> runs;
  std::map<int64_t, size_t> pos;
  // Only the config keys read here (ConfigValue's pointers and the strata keys) are
  // extracted, in SQL: parsing every whole config took seconds and gigabytes for a
  // 100,000-run experiment.
  std::string paths = "'$.pair', '$.model.context', '$.seed'";
  for (size_t i = 0; i < keys.size(); ++i) paths += ", ?";
  Stmt r = db->MustPrepare("SELECT id, arm, pair_key, status, json_extract(config_json, " + paths +
                           ") FROM runs WHERE experiment_id=? ORDER BY idx");
  for (size_t i = 0; i < keys.size(); ++i) r.Bind(int(i) + 1, ConfigJsonPath(keys[i]));
  r.Bind(int(keys.size()) + 1, experiment);
  std::map<std::string, int> status_counts;
  while (r.Step()) {
    pos[r.Int(0)] = runs.size();
    auto values = ParseJson(r.Text(4), "runs.config_json keys");
    Json config = Json::object(), by = Json::object();
    if (values.ok() && values->is_array() && values->size() == 3 + keys.size()) {
      if (!(*values)[0].is_null()) config["pair"] = (*values)[0];
      if (!(*values)[1].is_null()) config["model"] = {{"context", (*values)[1]}};
      if (!(*values)[2].is_null()) config["seed"] = (*values)[2];
      for (size_t i = 0; i < keys.size(); ++i) by[keys[i]] = (*values)[3 + i];
    }
    ++status_counts[r.Text(3)];
    runs.push_back(
        {r.Int(0), r.Text(1), r.Text(2), r.Text(3), {}, std::move(config), std::move(by)});
  }
  Stmt s = db->MustPrepare(
      "SELECT s.run_id, s.key, s.value FROM summaries s JOIN runs r ON r.id = s.run_id "
      "WHERE r.experiment_id=? AND r.status='succeeded' AND s.value IS NOT NULL");
  s.Bind(1, experiment);
  while (s.Step()) runs[pos[s.Int(0)]].metrics[s.Text(1)] = s.Real(2);
  const std::vector<RunSet> strata = Strata(runs);

  // Arms: every arm of the grid, in its (lexicographic) order, then any others seen; within
  // an arm, its strata in grid order.
  std::vector<std::string> arm_names;
  for (const Json& a : *arms_j)
    if (a.is_string()) arm_names.push_back(a.get<std::string>());
  for (const RunSummary& rs : runs)
    if (std::find(arm_names.begin(), arm_names.end(), rs.arm) == arm_names.end())
      arm_names.push_back(rs.arm);
  Json arms = Json::array();
  for (const std::string& arm : arm_names) {
    bool any = false;
    for (const RunSet& stratum : strata)
      for (const RunSummary* rs : stratum)
        if (rs->arm == arm) {
          arms.push_back(ArmJson(db, arm, stratum, stratum.front()->by));
          any = true;
          break;
        }
    if (!any) arms.push_back(ArmJson(db, arm, {}, Json::object()));
  }

  // Comparisons: within-pair values of the pairs (PairRuns) that have the metric, one
  // entry per stratum holding runs of either arm.
  Json comparisons = Json::array();
  for (const Json& c : *comps_j) {
    bool any = false;
    for (const RunSet& stratum : strata) {
      bool has = false;
      for (const RunSummary* rs : stratum)
        has = has || rs->arm == c.value("baseline", "") || rs->arm == c.value("treatment", "");
      if (!has) continue;
      const Json& by = stratum.front()->by;
      comparisons.push_back(
          ComparisonJson(db, c, stratum, by, StratumLabel(keys, by), options.level));
      any = true;
    }
    if (!any) comparisons.push_back(ComparisonJson(db, c, {}, Json::object(), "", options.level));
  }
  return Json{{"experiment", experiment},       {"by", keys},   {"level", options.level},
              {"status_counts", status_counts}, {"arms", arms}, {"comparisons", comparisons}};
}

Status SavePairedStats(Db* db, int64_t experiment, const Json& results) {
  Stmt del = db->MustPrepare("DELETE FROM paired_stats WHERE experiment_id=?");
  del.Bind(1, experiment);
  HEADLAB_RETURN_IF_ERROR(del.Exec());
  Stmt ins = db->MustPrepare(
      "INSERT OR REPLACE INTO paired_stats(experiment_id, name, baseline, treatment, metric, "
      "stat, estimator, n, mean, se, per_pair_json, computed_at, value, device, details_json) "
      "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  for (const Json& c : results.value("comparisons", Json::array())) {
    ins.Bind(1, experiment)
        .Bind(2, c.value("name", ""))
        .Bind(3, c.value("baseline", ""))
        .Bind(4, c.value("treatment", ""))
        .Bind(5, c.value("metric", ""))
        .Bind(6, c.value("stat", ""))
        .Bind(7, c.value("estimator", kPairedEstimator))
        .Bind(8, c.value("n", 0));
    if (c["mean"].is_number())
      ins.Bind(9, c["mean"].get<double>());
    else
      ins.BindNull(9);
    if (c["se"].is_number())
      ins.Bind(10, c["se"].get<double>());
    else
      ins.BindNull(10);
    ins.Bind(11, c["per_pair"].dump()).Bind(12, NowIso());
    if (c["value"].is_number())
      ins.Bind(13, c["value"].get<double>());
    else
      ins.BindNull(13);
    ins.Bind(14, c.value("device", ""));
    Json details = Json::object();
    for (const char* k :
         {"spread", "ratio_of_means", "control", "contended", "logprob_diff", "flops", "ci95", "ci",
          "unit", "better", "verdict", "note", "by", "comparison"})
      if (c.contains(k)) details[k] = c[k];
    ins.Bind(15, CanonicalJson(details));
    HEADLAB_RETURN_IF_ERROR(ins.Exec());
  }
  return Status::Ok();
}

}  // namespace headlab::coord
