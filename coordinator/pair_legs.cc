// Paired timing legs: sequence order and worker pinning at dispatch.
#include "coordinator/pair_legs.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "common/paired_estimators.h"

namespace headlab::coord {
namespace {

std::string GroupOf(const Json& config) {
  const Json* pair = config.is_object() && config.contains("pair") ? &config["pair"] : nullptr;
  if (!pair || !pair->is_object()) return "";
  auto it = pair->find("group");
  return it != pair->end() && it->is_string() ? it->get<std::string>() : "";
}

bool Finished(const std::string& status) { return status != "queued" && status != "running"; }

}  // namespace

std::vector<PairLeg> PairLegSequence(Db* db, int64_t experiment, const std::string& group) {
  std::vector<PairLeg> legs;
  // json_extract keeps the scan in SQLite; groups are a handful of runs per experiment.
  Stmt s = db->MustPrepare(
      "SELECT id, arm, COALESCE(json_extract(config_json, '$.pair.rep'), 0), idx, status "
      "FROM runs WHERE experiment_id=? AND json_extract(config_json, '$.pair.group')=?");
  s.Bind(1, experiment).Bind(2, group);
  std::set<std::string> arm_set;
  while (s.Step()) {
    legs.push_back({s.Int(0), s.Text(1), s.Int(2), s.Int(3), s.Text(4)});
    arm_set.insert(s.Text(1));
  }
  const std::vector<std::string> arms(arm_set.begin(), arm_set.end());  // lexicographic
  auto key = [&](const PairLeg& l) {
    const int a = int(std::find(arms.begin(), arms.end(), l.arm) - arms.begin());
    return std::make_tuple(l.rep, paired::AbbaPosition(a, int(arms.size()), l.rep), l.idx);
  };
  std::sort(legs.begin(), legs.end(),
            [&](const PairLeg& x, const PairLeg& y) { return key(x) < key(y); });
  return legs;
}

PairLegDecision ResolvePairLeg(Db* db, int64_t experiment, int64_t run, const Json& config) {
  PairLegDecision d;
  d.group = GroupOf(config);
  if (d.group.empty()) return d;
  std::vector<PairLeg> legs = PairLegSequence(db, experiment, d.group);
  for (const PairLeg& l : legs) {
    if (l.run == run) break;
    if (!Finished(l.status)) {
      d.state = PairLegDecision::State::kWait;
      return d;
    }
  }
  // The group's first attempt (by assignment order) fixes the worker and devices.
  Stmt a = db->MustPrepare(
      "SELECT a.worker_id, a.devices_json FROM attempts a JOIN runs r ON r.id = a.run_id "
      "WHERE r.experiment_id=? AND json_extract(r.config_json, '$.pair.group')=? "
      "ORDER BY a.assigned_at, a.rowid LIMIT 1");
  a.Bind(1, experiment).Bind(2, d.group);
  if (!a.Step()) {
    d.state = PairLegDecision::State::kAny;
    return d;
  }
  d.state = PairLegDecision::State::kPinned;
  d.worker_id = a.Text(0);
  auto devices = ParseJson(a.Text(1), "attempts.devices_json");
  if (devices.ok() && devices->is_array())
    for (const Json& v : *devices)
      if (v.is_number_integer()) d.devices.push_back(v.get<int>());
  return d;
}

}  // namespace headlab::coord
