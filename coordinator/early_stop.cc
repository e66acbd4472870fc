// The median stopping rule applied to a run's stored points.
#include "coordinator/early_stop.h"

#include "common/metric_catalog.h"

namespace headlab::coord {
namespace {

// The points of `key` of one attempt, by step.
std::vector<StepValue> PointsOf(Db* db, int64_t run, int64_t attempt, const std::string& key) {
  Stmt s = db->MustPrepare(
      "SELECT step, value FROM metrics WHERE run_id=? AND attempt=? AND key=? AND value IS NOT "
      "NULL "
      "ORDER BY seq");
  s.Bind(1, run).Bind(2, attempt).Bind(3, key);
  std::vector<StepValue> out;
  while (s.Step()) out.push_back({s.Int(0), s.Real(1)});
  return out;
}

}  // namespace

const std::optional<EarlyStop>& EarlyStopper::RuleOf(Db* db, int64_t experiment) {
  auto it = rules_.find(experiment);
  if (it != rules_.end()) return it->second;
  std::optional<EarlyStop> rule;
  Stmt s = db->MustPrepare("SELECT grid_json FROM experiments WHERE id=?");
  s.Bind(1, experiment);
  if (s.Step()) {
    auto grid = ParseJson(s.Text(0), "experiments.grid_json");
    auto spec = grid.ok() ? ParseSearch(*grid, "experiments.grid_json")
                          : StatusOr<SearchSpec>(grid.status());
    if (spec.ok()) rule = spec->early_stop;
  }
  return rules_.emplace(experiment, rule).first->second;
}

std::vector<std::pair<int64_t, std::string>> EarlyStopper::Check(
    Db* db, const AttemptRef& ref, const std::vector<MetricPoint>& points) {
  std::vector<std::pair<int64_t, std::string>> out;
  Stmt r = db->MustPrepare("SELECT experiment_id, arm, idx, status FROM runs WHERE id=?");
  r.Bind(1, ref.run);
  if (!r.Step() || r.Text(3) != "running") return out;
  const int64_t experiment = r.Int(0), idx = r.Int(2);
  const std::string arm = r.Text(1);
  const std::optional<EarlyStop>& rule = RuleOf(db, experiment);
  if (!rule) return out;
  bool relevant = false;
  for (const MetricPoint& p : points) relevant = relevant || p.key == rule->metric;
  if (!relevant) return out;

  // The completed runs of the same arm: their current (succeeded) attempt's points.
  std::vector<std::vector<StepValue>> completed;
  Stmt c = db->MustPrepare(
      "SELECT id, attempts FROM runs WHERE experiment_id=? AND arm=? AND status='succeeded' "
      "AND reused_from IS NULL");
  c.Bind(1, experiment).Bind(2, arm);
  while (c.Step()) {
    auto pts = PointsOf(db, c.Int(0), c.Int(1), rule->metric);
    if (!pts.empty()) completed.push_back(std::move(pts));
  }
  const bool lower_better = BetterDirection(rule->metric) <= 0;  // losses, times: lower
  auto reason = MedianStoppingReason(*rule, PointsOf(db, ref.run, ref.attempt, rule->metric),
                                     completed, lower_better);
  if (!reason) return out;

  // The run and its counterparts: every arm expands the same points in the same order, so
  // they share idx modulo the runs per arm.
  Stmt n = db->MustPrepare("SELECT count(*), count(DISTINCT arm) FROM runs WHERE experiment_id=?");
  n.Bind(1, experiment);
  if (!n.Step() || n.Int(1) == 0) return out;
  const int64_t per_arm = n.Int(0) / n.Int(1);
  Stmt p = db->MustPrepare(
      "SELECT id FROM runs WHERE experiment_id=?1 AND idx % ?2 = ?3 % ?2 AND "
      "status IN ('queued','running') ORDER BY idx");
  p.Bind(1, experiment).Bind(2, per_arm).Bind(3, idx);
  while (p.Step())
    out.emplace_back(p.Int(0), p.Int(0) == ref.run ? *reason
                                                   : *reason + " (stopped with its pair: run " +
                                                         std::to_string(ref.run) + ")");
  return out;
}

}  // namespace headlab::coord
