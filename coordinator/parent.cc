// Shared-parent resolution: the parent's status decides wait/fail; its checkpoint artifact
// of the requested step (of the attempt that succeeded, if several wrote one) is the start.
#include "coordinator/parent.h"

#include <vector>

namespace headlab::coord {

int64_t FindRunBySeed(Db* db, int64_t experiment, const std::string& arm, int64_t seed,
                      int64_t parent_run, const std::string& what, std::string* error) {
  Stmt q = db->MustPrepare(
      "SELECT id FROM runs WHERE experiment_id=? AND (?='' OR arm=?) AND seed=? "
      "AND (?=0 OR json_extract(config_json, '$.parent.run')=?) ORDER BY id");
  q.Bind(1, experiment)
      .Bind(2, arm)
      .Bind(3, arm)
      .Bind(4, seed)
      .Bind(5, parent_run)
      .Bind(6, parent_run);
  std::vector<int64_t> ids;
  while (q.Step()) ids.push_back(q.Int(0));
  if (ids.size() == 1) return ids[0];
  const std::string which =
      "experiment " + std::to_string(experiment) + (arm.empty() ? "" : " arm \"" + arm + "\"");
  *error = ids.empty() ? what + ": " + which + " has no run of seed " + std::to_string(seed)
                       : what + ": " + which + " has " + std::to_string(ids.size()) +
                             " runs of seed " + std::to_string(seed) + ": set " + what + ".arm";
  return 0;
}

ParentResolution ResolveParent(Db* db, const Json& config) {
  ParentResolution out;
  const Json* p = config.contains("parent") ? &config["parent"] : nullptr;
  if (!p || !p->is_object()) return out;
  int64_t parent = p->value("run", int64_t{0});
  const int64_t experiment = p->value("experiment", int64_t{0});
  if (parent == 0 && experiment > 0) {
    parent = FindRunBySeed(db, experiment, p->value("arm", std::string()),
                           config.value("seed", int64_t{0}), 0, "parent", &out.error);
    if (parent == 0) {
      out.state = ParentResolution::State::kFail;
      return out;
    }
  }
  if (parent == 0) return out;
  const int64_t step = p->value("step", int64_t{0});
  const std::string name = "parent run " + std::to_string(parent);

  Stmt run =
      db->MustPrepare("SELECT status, COALESCE(reused_from, id), error FROM runs WHERE id=?");
  run.Bind(1, parent);
  if (!run.Step()) {
    out.state = ParentResolution::State::kFail;
    out.error = name + " does not exist";
    return out;
  }
  const std::string status = run.Text(0);
  const int64_t source = run.Int(1);
  if (status == "queued" || status == "running") {
    out.state = ParentResolution::State::kWait;
    return out;
  }
  if (status != "succeeded") {
    out.state = ParentResolution::State::kFail;
    out.error = name + " " + status + (run.Text(2).empty() ? "" : " (" + run.Text(2) + ")") +
                ": no checkpoint to continue from";
    return out;
  }
  // Prefer the succeeded (latest) attempt's artifact: an earlier lost attempt may have
  // written a checkpoint of the same step with other bytes. Deleted ones (checkpoint
  // retention) stay listed but are gone.
  Stmt ck = db->MustPrepare(
      "SELECT path, sha256, step, deleted_at IS NOT NULL FROM artifacts WHERE run_id=? "
      "AND kind='checkpoint' AND (?=0 OR step=?) "
      "ORDER BY deleted_at IS NULL DESC, step DESC, attempt DESC, seq DESC LIMIT 1");
  ck.Bind(1, source).Bind(2, step).Bind(3, step);
  const bool found = ck.Step();
  const bool deleted = found && ck.Int(3) != 0;
  if (!found || deleted) {
    out.state = ParentResolution::State::kFail;
    out.error = name + (deleted ? "'s checkpoint" : " has no checkpoint") +
                (step ? " of step " + std::to_string(step) : std::string()) +
                (deleted ? " was deleted by checkpoint retention (list the step in the parent's "
                           "train.keep_steps, or submit continuations before the parent starts)"
                         : " (train.checkpoint_every decides which steps are saved)");
    return out;
  }
  out.state = ParentResolution::State::kReady;
  out.checkpoint = {
      {"run", parent}, {"path", ck.Text(0)}, {"sha256", ck.Text(1)}, {"step", ck.Int(2)}};
  return out;
}

Json PinnedSteps(Db* db, int64_t run) {
  Stmt r = db->MustPrepare("SELECT experiment_id, arm, seed FROM runs WHERE id=?");
  r.Bind(1, run);
  Json steps = Json::array();
  if (!r.Step()) return steps;
  // Both lookups go through the expression indexes of schema/005_checkpoint_retention.sql.
  Stmt q = db->MustPrepare(
      "SELECT DISTINCT json_extract(config_json, '$.parent.step') AS s FROM runs "
      "WHERE json_extract(config_json, '$.parent.run') = ?1 AND s > 0 "
      "UNION SELECT json_extract(config_json, '$.parent.step') AS s FROM runs "
      "WHERE json_extract(config_json, '$.parent.experiment') = ?2 AND seed = ?4 "
      "AND json_extract(config_json, '$.parent.arm') IN ('', ?3) AND s > 0 ORDER BY s");
  q.Bind(1, run).Bind(2, r.Int(0)).Bind(3, r.Text(1)).Bind(4, r.Int(2));
  while (q.Step()) steps.push_back(q.Int(0));
  return steps;
}

Status FailQueuedRun(Db* db, int64_t run, const std::string& error) {
  Stmt s = db->MustPrepare(
      "UPDATE runs SET status='failed', error=?, updated_at=? WHERE id=? AND status='queued'");
  s.Bind(1, error).Bind(2, NowIso()).Bind(3, run);
  return s.Exec();
}

}  // namespace headlab::coord
