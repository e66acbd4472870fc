// Per-arm aggregates and paired comparisons.
#include "coordinator/results.h"

#include <cmath>
#include <limits>
#include <algorithm>
#include <map>

namespace headlab::coord {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// JSON has no NaN: non-finite numbers become null.
Json Num(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

struct RunSummary {
  int64_t id;
  std::string arm;
  std::string pair_key;
  std::string status;
  std::map<std::string, double> metrics;
};

}  // namespace

MeanSe MeanAndSe(const std::vector<double>& xs) {
  MeanSe r;
  r.n = int(xs.size());
  if (xs.empty()) {
    r.mean = r.se = kNaN;
    return r;
  }
  double sum = 0;
  for (double x : xs) sum += x;
  r.mean = sum / r.n;
  if (r.n < 2) {
    r.se = kNaN;
    return r;
  }
  double ss = 0;
  for (double x : xs) ss += (x - r.mean) * (x - r.mean);
  double sd = std::sqrt(ss / (r.n - 1));
  r.se = sd / std::sqrt(double(r.n));
  return r;
}

std::optional<double> PairValue(const std::string& stat, double b, double t) {
  if (stat == "diff") return t - b;
  if (b == 0) return std::nullopt;
  if (stat == "ratio") return t / b;
  if (stat == "delta_pct") return 100.0 * (t / b - 1.0);
  return std::nullopt;
}

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
  Stmt r = db->MustPrepare(
      "SELECT id, arm, pair_key, status FROM runs WHERE experiment_id=? ORDER BY idx");
  r.Bind(1, experiment);
  while (r.Step()) {
    pos[r.Int(0)] = runs.size();
    runs.push_back({r.Int(0), r.Text(1), r.Text(2), r.Text(3), {}});
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
    for (const RunSummary& rs : runs) {
      if (rs.arm != arm) continue;
      ++n;
      if (rs.status != "succeeded") continue;
      ++ok;
      for (const auto& [k, v] : rs.metrics) values[k].push_back(v);
    }
    Json metrics = Json::object();
    for (const auto& [k, vs] : values) {
      MeanSe m = MeanAndSe(vs);
      metrics[k] = {{"mean", Num(m.mean)}, {"se", Num(m.se)}, {"n", m.n}};
    }
    arms.push_back({{"arm", arm}, {"n", n}, {"succeeded", ok}, {"metrics", metrics}});
  }

  // Comparisons: pair runs by pair_key. When other axes vary too, several runs of an arm
  // share a pair_key; they appear in the same axis order in every arm (schema/grid.md,
  // expansion), so the k-th such run of the baseline pairs with the k-th of the treatment.
  Json comparisons = Json::array();
  for (const Json& c : *comps_j) {
    std::string name = c.value("name", ""), base = c.value("baseline", ""),
                treat = c.value("treatment", ""), metric = c.value("metric", ""),
                stat = c.value("stat", "");
    std::map<std::pair<std::string, int>, const RunSummary*> b_runs, t_runs;
    std::map<std::string, int> b_count, t_count;
    for (const RunSummary& rs : runs) {
      if (rs.arm == base) b_runs[{rs.pair_key, b_count[rs.pair_key]++}] = &rs;
      if (rs.arm == treat) t_runs[{rs.pair_key, t_count[rs.pair_key]++}] = &rs;
    }
    std::vector<double> vals;
    Json per_pair = Json::array();
    for (const auto& [key, br] : b_runs) {
      auto it = t_runs.find(key);
      if (it == t_runs.end()) continue;
      const RunSummary* tr = it->second;
      auto bm = br->metrics.find(metric);
      auto tm = tr->metrics.find(metric);
      if (bm == br->metrics.end() || tm == tr->metrics.end()) continue;
      auto v = PairValue(stat, bm->second, tm->second);
      if (!v || !std::isfinite(*v)) continue;
      vals.push_back(*v);
      per_pair.push_back({{"pair_key", key.first}, {"baseline_run", br->id},
                          {"treatment_run", tr->id}, {"baseline", bm->second},
                          {"treatment", tm->second}, {"value", *v}});
    }
    MeanSe m = MeanAndSe(vals);
    comparisons.push_back({{"name", name}, {"baseline", base}, {"treatment", treat},
                           {"metric", metric}, {"stat", stat}, {"estimator", kPairedEstimator},
                           {"n", m.n}, {"mean", Num(m.mean)}, {"se", Num(m.se)},
                           {"per_pair", per_pair}});
  }
  return Json{{"experiment", experiment}, {"arms", arms}, {"comparisons", comparisons}};
}

Status SavePairedStats(Db* db, int64_t experiment, const Json& results) {
  Stmt del = db->MustPrepare("DELETE FROM paired_stats WHERE experiment_id=?");
  del.Bind(1, experiment);
  HEADLAB_RETURN_IF_ERROR(del.Exec());
  Stmt ins = db->MustPrepare(
      "INSERT OR REPLACE INTO paired_stats(experiment_id, name, baseline, treatment, metric, "
      "stat, estimator, n, mean, se, per_pair_json, computed_at) "
      "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)");
  for (const Json& c : results.value("comparisons", Json::array())) {
    ins.Bind(1, experiment).Bind(2, c.value("name", "")).Bind(3, c.value("baseline", ""))
        .Bind(4, c.value("treatment", "")).Bind(5, c.value("metric", ""))
        .Bind(6, c.value("stat", "")).Bind(7, kPairedEstimator).Bind(8, c.value("n", 0));
    if (c["mean"].is_number()) ins.Bind(9, c["mean"].get<double>()); else ins.BindNull(9);
    if (c["se"].is_number()) ins.Bind(10, c["se"].get<double>()); else ins.BindNull(10);
    ins.Bind(11, c["per_pair"].dump()).Bind(12, NowIso());
    HEADLAB_RETURN_IF_ERROR(ins.Exec());
  }
  return Status::Ok();
}

}  // namespace headlab::coord
