// Matched-time budgets: the reference run's measured training time becomes the allowance.
#include "coordinator/time_match.h"

#include "common/metric_names.h"
#include "coordinator/parent.h"

namespace headlab::coord {

TimeMatchResolution ResolveTimeMatch(Db* db, const Json& config, int64_t own_experiment) {
  TimeMatchResolution out;
  const Json* m = config.contains("time_match") ? &config["time_match"] : nullptr;
  if (!m || !m->is_object() || m->value("experiment", int64_t{0}) == 0) return out;
  const int64_t experiment =
      m->value("experiment", int64_t{0}) < 0 ? own_experiment : m->value("experiment", int64_t{0});
  // A continuation of a --set parent.run list matches the reference of its own parent.
  const Json parent = config.value("parent", Json::object());
  const int64_t run = FindRunBySeed(
      db, experiment, m->value("arm", std::string()), config.value("seed", int64_t{0}),
      parent.is_object() ? parent.value("run", int64_t{0}) : 0, "time_match", &out.error);
  if (run == 0) {
    out.state = TimeMatchResolution::State::kFail;
    return out;
  }
  const std::string name = "time_match: reference run " + std::to_string(run);
  Stmt r = db->MustPrepare("SELECT status, COALESCE(reused_from, id) FROM runs WHERE id=?");
  r.Bind(1, run);
  r.Step();
  const std::string status = r.Text(0);
  if (status == "queued" || status == "running") {
    out.state = TimeMatchResolution::State::kWait;
    return out;
  }
  out.state = TimeMatchResolution::State::kFail;
  if (status != "succeeded") {
    out.error = name + " " + status + ": no measured time to match";
    return out;
  }
  const int64_t source = r.Int(1);
  Stmt attempts = db->MustPrepare(
      "SELECT count(*), max(CASE WHEN status='succeeded' THEN attempt END) FROM attempts "
      "WHERE run_id=?");
  attempts.Bind(1, source);
  attempts.Step();
  if (attempts.Int(0) != 1) {
    out.error = name + " ran " + std::to_string(attempts.Int(0)) +
                " attempts (a resumed run's training time is not one measurement): rerun it";
    return out;
  }
  Stmt t = db->MustPrepare(
      "SELECT value FROM metrics WHERE run_id=? AND attempt=? AND key=? "
      "ORDER BY step DESC, seq DESC LIMIT 1");
  t.Bind(1, source).Bind(2, attempts.Int(1)).Bind(3, std::string(metric::kElapsedS));
  if (!t.Step() || t.IsNull(0) || !(t.Real(0) > 0)) {
    out.error = name + " logged no " + std::string(metric::kElapsedS) + " metric";
    return out;
  }
  out.state = TimeMatchResolution::State::kReady;
  out.budget_s = t.Real(0);
  out.reference = source;
  return out;
}

}  // namespace headlab::coord
