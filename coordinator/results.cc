// Per-arm aggregates and paired comparisons.
#include "coordinator/results.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "common/metric_catalog.h"
#include "common/metric_names.h"
#include "common/suggest.h"
#include "coordinator/paired_sources.h"

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
};

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

// Pairs runs of arms `base` and `treat` by pair_key. When other axes vary too, several
// runs of an arm share a pair_key; they appear in the same axis order in every arm
// (schema/grid.md, expansion), so the k-th such run of the baseline pairs with the k-th
// of the treatment.
std::vector<Pair> PairRuns(const std::vector<RunSummary>& runs, const std::string& base,
                           const std::string& treat) {
  std::map<std::pair<std::string, int>, const RunSummary*> b_runs, t_runs;
  std::map<std::string, int> b_count, t_count;
  for (const RunSummary& rs : runs) {
    if (rs.arm == base) b_runs[{rs.pair_key, b_count[rs.pair_key]++}] = &rs;
    if (rs.arm == treat) t_runs[{rs.pair_key, t_count[rs.pair_key]++}] = &rs;
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
  return {{"estimator", s.estimator}, {"n", s.n}, {"value", Num(s.value)}, {"se", Num(s.se)},
          {"spread", {{"kind", s.estimator == paired::kMedian ? "range" : "mean_pm_se"},
                      {"lo", Num(s.lo)}, {"hi", Num(s.hi)}}}};
}

// The zero-replacement control (runs with pair.control = 1 in an arm other than the two
// compared): its within-pair value against the same baseline must stay within
// pair.tolerance of 1.00x, else the comparison is contended. Only for ratio and speedup.
void AddControl(const std::vector<RunSummary>& runs, const std::string& base,
                const std::string& treat, const std::string& metric, const std::string& stat,
                const std::string& estimator, Json* c) {
  (*c)["control"] = nullptr;
  (*c)["contended"] = nullptr;
  if (stat != "ratio" && stat != "speedup") return;
  std::set<std::string> controls;
  for (const RunSummary& r : runs)
    if (r.arm != base && r.arm != treat && ConfigValue<int64_t>(r.config, "/pair/control", 0) == 1)
      controls.insert(r.arm);
  if (controls.empty()) return;
  Json all = Json::array();
  bool contended = false;
  for (const std::string& arm : controls) {
    std::vector<Pair> pairs = PairRuns(runs, base, arm);
    PairValues v = ValuesOf(pairs, metric, stat);
    paired::PairedSummary s = paired::Summarise(v.values, estimator);
    double tolerance = 0.05;
    if (!pairs.empty()) tolerance = ConfigValue<double>(pairs[0].t->config, "/pair/tolerance", 0.05);
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
    if (!b.ok() || !t.ok())
      return {{"unavailable", (!b.ok() ? b.status() : t.status()).message()}};
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
    per_pair.push_back({{"pair_key", p.b->pair_key}, {"n_rows", ci.n}, {"mean", Num(ci.mean)},
                        {"lo", Num(ci.lo)}, {"hi", Num(ci.hi)}, {"seed", seed}});
    all_rows.insert(all_rows.end(), rows.begin(), rows.end());
  }
  paired::BootstrapCi ci = paired::BootstrapMeanCi(all_rows, kBootstrapResamples, 0);
  return {{"estimator", paired::kBootstrap}, {"n_pairs", per_pair.size()}, {"n_rows", ci.n},
          {"mean", Num(ci.mean)}, {"lo", Num(ci.lo)}, {"hi", Num(ci.hi)},
          {"resamples", ci.resamples}, {"seed", ci.seed}, {"per_pair", per_pair}};
}

// Measured Total and Attention FLOPs Ratios, treatment / baseline (AAH §5.10: method /
// pure), each the median over the pairs of the per-run counts; "unmeasured" with the
// reason when any run lacks the count. Never an estimate.
Json FlopsRatios(Db* db, const std::vector<Pair>& pairs) {
  Json out = Json::object();
  std::string reason;
  for (const auto& [key, metric] : {std::pair{metric::kFlopsTotalRatio, metric::kFlopsTotal},
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
    out.per_pair.push_back({{"pair_key", p.b->pair_key}, {"baseline_run", p.b->id},
                            {"treatment_run", p.t->id}, {"baseline", bm->second},
                            {"treatment", tm->second}, {"value", *v}});
  }
  return out;
}

// How to read a comparison (schema/http_api.md, "Reading a comparison"): its unit, which
// side of "no difference" favours the treatment, the 95% CI of the mean (Student's t) and
// what the interval says.
void AddReading(const std::string& metric, const std::string& stat, const std::string& estimator,
                const std::vector<double>& values, Json* c) {
  const double neutral = stat == "ratio" || stat == "speedup" ? 1.0 : 0.0;
  (*c)["unit"] = stat == "delta_pct" ? "%" : stat == "diff" ? "" : "x";
  (*c)["neutral"] = neutral;
  int d = BetterDirection(metric);
  if (stat == "speedup") d = -d;  // baseline / treatment: above 1 when the treatment is lower
  (*c)["better"] = d < 0 ? Json("lower") : d > 0 ? Json("higher") : Json(nullptr);
  MeanSe m = MeanAndSe(values);
  paired::Interval ci = paired::MeanCi95(m);
  (*c)["ci95"] = estimator == paired::kMeanSe && std::isfinite(ci.lo)
                     ? Json{{"lo", ci.lo}, {"hi", ci.hi}, {"method", "student_t"}, {"df", m.n - 1}}
                     : Json(nullptr);
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
  std::string why = side.empty()
                        ? (ranged ? "pairs on both sides of " : "95% CI includes ") + n
                        : (ranged ? std::string("every pair ") + (side == "higher" ? "above " : "below ")
                                  : std::string("95% CI excludes ")) + n;
  std::string verdict = side.empty() ? "no clear difference"
                        : d == 0     ? "treatment " + side
                        : (side == "lower") == (d < 0) ? "treatment better"
                                                       : "treatment worse";
  (*c)["verdict"] = verdict + " (" + why + ")";
}

// Why a comparison has no pairs: none complete yet, or the arms' runs lack the metric.
std::string NoPairsNote(const std::vector<RunSummary>& runs, const std::vector<Pair>& pairs,
                        const std::string& base, const std::string& treat,
                        const std::string& metric) {
  if (pairs.empty()) {
    int ok = 0, all = 0;
    for (const RunSummary& r : runs)
      if (r.arm == base || r.arm == treat) {
        ++all;
        ok += r.status == "succeeded";
      }
    return "no complete pair yet (" + std::to_string(ok) + " of " + std::to_string(all) +
           " runs of the two arms succeeded)";
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

}  // namespace

StatusOr<Json> ComputeResults(Db* db, int64_t experiment) {
  Stmt e = db->MustPrepare("SELECT arms_json, comparisons_json FROM experiments WHERE id=?");
  e.Bind(1, experiment);
  if (!e.Step()) return Status::NotFound("experiment " + std::to_string(experiment) + " not found");
  auto arms_j = ParseJson(e.Text(0), "experiments.arms_json");
  auto comps_j = ParseJson(e.Text(1), "experiments.comparisons_json");
  if (!arms_j.ok()) return arms_j.status();
  if (!comps_j.ok()) return comps_j.status();

  // Runs in grid order, with their summaries.
  std::vector<RunSummary> runs;
  std::map<int64_t, size_t> pos;
  // Only the config keys read here (ConfigValue's pointers) are extracted, in SQL: parsing
  // every whole config took seconds and gigabytes for a 100,000-run experiment.
  Stmt r = db->MustPrepare(
      "SELECT id, arm, pair_key, status, "
      "json_extract(config_json, '$.pair', '$.model.context', '$.seed') FROM runs "
      "WHERE experiment_id=? ORDER BY idx");
  r.Bind(1, experiment);
  while (r.Step()) {
    pos[r.Int(0)] = runs.size();
    auto keys = ParseJson(r.Text(4), "runs.config_json keys");
    Json config = Json::object();
    if (keys.ok() && keys->is_array() && keys->size() == 3) {
      if (!(*keys)[0].is_null()) config["pair"] = (*keys)[0];
      if (!(*keys)[1].is_null()) config["model"] = {{"context", (*keys)[1]}};
      if (!(*keys)[2].is_null()) config["seed"] = (*keys)[2];
    }
    runs.push_back({r.Int(0), r.Text(1), r.Text(2), r.Text(3), {}, std::move(config)});
  }
  Stmt s = db->MustPrepare(
      "SELECT s.run_id, s.key, s.value FROM summaries s JOIN runs r ON r.id = s.run_id "
      "WHERE r.experiment_id=? AND r.status='succeeded' AND s.value IS NOT NULL");
  s.Bind(1, experiment);
  while (s.Step()) runs[pos[s.Int(0)]].metrics[s.Text(1)] = s.Real(2);

  // Arms: every arm of the grid, in its (lexicographic) order, then any others seen.
  std::vector<std::string> arm_names;
  for (const Json& a : *arms_j)
    if (a.is_string()) arm_names.push_back(a.get<std::string>());
  for (const RunSummary& rs : runs)
    if (std::find(arm_names.begin(), arm_names.end(), rs.arm) == arm_names.end())
      arm_names.push_back(rs.arm);
  Json arms = Json::array();
  for (const std::string& arm : arm_names) {
    int n = 0, ok = 0;
    std::map<std::string, std::vector<double>> values;
    std::set<std::string> precisions, paths;  // what the arm's runs computed in and on
    for (const RunSummary& rs : runs) {
      if (rs.arm != arm) continue;
      ++n;
      if (rs.status != "succeeded") continue;
      ++ok;
      for (const auto& [k, v] : rs.metrics) values[k].push_back(v);
      RunExecution e = LoadRunExecution(db, rs.id);
      if (!e.precision.empty()) precisions.insert(e.precision);
      paths.insert(e.attention_paths.begin(), e.attention_paths.end());
    }
    Json metrics = Json::object();
    for (const auto& [k, vs] : values) {
      MeanSe m = MeanAndSe(vs);
      metrics[k] = {{"mean", Num(m.mean)}, {"se", Num(m.se)}, {"n", m.n}};
    }
    arms.push_back({{"arm", arm}, {"n", n}, {"succeeded", ok}, {"metrics", metrics},
                    {"precision", Json(precisions)}, {"attention_paths", Json(paths)}});
  }

  // Comparisons: within-pair values of the pairs (PairRuns) that have the metric.
  Json comparisons = Json::array();
  for (const Json& c : *comps_j) {
    std::string name = c.value("name", ""), base = c.value("baseline", ""),
                treat = c.value("treatment", ""), metric = c.value("metric", ""),
                stat = c.value("stat", "");
    std::vector<Pair> all_pairs = PairRuns(runs, base, treat);
    std::vector<Pair> pairs;  // of succeeded runs: the only ones with summaries
    for (const Pair& p : all_pairs)
      if (p.b->status == "succeeded" && p.t->status == "succeeded") pairs.push_back(p);
    PairValues v = ValuesOf(pairs, metric, stat);
    const std::string estimator = ChooseEstimator(db, stat, pairs);
    paired::PairedSummary summary = paired::Summarise(v.values, estimator);
    MeanSe m = MeanAndSe(v.values);
    Json out = SummaryJson(summary);
    out.update({{"name", name}, {"baseline", base}, {"treatment", treat}, {"metric", metric},
                {"stat", stat}, {"mean", Num(m.mean)}, {"se", Num(m.se)},
                {"median", Num(paired::Median(v.values))}, {"device", DevicesOf(db, pairs)},
                {"per_pair", v.per_pair}});
    if (stat == "speedup" || stat == "ratio")
      out["ratio_of_means"] = Num(stat == "speedup"
                                      ? paired::RatioOfMeans(v.baseline, v.treatment)
                                      : paired::RatioOfMeans(v.treatment, v.baseline));
    AddReading(metric, stat, estimator, v.values, &out);
    if (v.values.empty()) out["note"] = NoPairsNote(runs, pairs, base, treat, metric);
    AddControl(runs, base, treat, metric, stat, estimator, &out);
    if (metric.rfind("eval.", 0) == 0) out["logprob_diff"] = LogProbDiff(db, pairs);
    out["flops"] = FlopsRatios(db, pairs);
    comparisons.push_back(out);
  }
  return Json{{"experiment", experiment}, {"arms", arms}, {"comparisons", comparisons}};
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
    ins.Bind(1, experiment).Bind(2, c.value("name", "")).Bind(3, c.value("baseline", ""))
        .Bind(4, c.value("treatment", "")).Bind(5, c.value("metric", ""))
        .Bind(6, c.value("stat", "")).Bind(7, c.value("estimator", kPairedEstimator))
        .Bind(8, c.value("n", 0));
    if (c["mean"].is_number()) ins.Bind(9, c["mean"].get<double>()); else ins.BindNull(9);
    if (c["se"].is_number()) ins.Bind(10, c["se"].get<double>()); else ins.BindNull(10);
    ins.Bind(11, c["per_pair"].dump()).Bind(12, NowIso());
    if (c["value"].is_number()) ins.Bind(13, c["value"].get<double>()); else ins.BindNull(13);
    ins.Bind(14, c.value("device", ""));
    Json details = Json::object();
    for (const char* k : {"spread", "ratio_of_means", "control", "contended", "logprob_diff",
                          "flops", "ci95", "unit", "better", "verdict", "note"})
      if (c.contains(k)) details[k] = c[k];
    ins.Bind(15, CanonicalJson(details));
    HEADLAB_RETURN_IF_ERROR(ins.Exec());
  }
  return Status::Ok();
}

}  // namespace headlab::coord
