// Store's writes of experiments and runs: a submission (whole, or in steps), the reads
// dispatch needs, a run's status, cancel and retry.
#include "coordinator/store.h"

#include "common/log.h"

namespace headlab::coord {
namespace {

Json ComparisonsJson(const std::vector<Comparison>& cs) {
  Json out = Json::array();
  for (const Comparison& c : cs)
    out.push_back({{"name", c.name},
                   {"baseline", c.baseline},
                   {"treatment", c.treatment},
                   {"metric", c.metric},
                   {"stat", c.stat}});
  return out;
}

}  // namespace

void Store::PrepareRuns() {
  run_sql_.load = db_.MustPrepare(
      "SELECT id, experiment_id, status, attempts, max_attempts, config_json FROM runs "
      "WHERE id=?");
  run_sql_.set_status =
      db_.MustPrepare("UPDATE runs SET status=?, error=?, updated_at=? WHERE id=?");
  run_sql_.unfinished_in_exp = db_.MustPrepare(
      "SELECT count(*) FROM runs WHERE experiment_id=? AND status IN ('queued','running')");
}

std::vector<int64_t> Store::QueuedRuns() {
  std::vector<int64_t> out;
  Stmt s = db_.MustPrepare("SELECT id FROM runs WHERE status='queued' ORDER BY experiment_id, idx");
  while (s.Step()) out.push_back(s.Int(0));
  return out;
}

std::vector<PlannedRun> PlanRuns(std::vector<ExpandedRun> runs) {
  std::vector<PlannedRun> out;
  out.reserve(runs.size());
  for (ExpandedRun& r : runs) {
    PlannedRun p;
    p.index = r.index;
    p.arm = std::move(r.arm);
    p.config_json = CanonicalJson(r.config);
    auto it = r.config.find("seed");
    if (it != r.config.end() && it->is_number_integer()) p.seed = it->get<int64_t>();
    r.config = Json();  // freed now, not after the whole grid
    p.config_hash = std::move(r.config_hash);
    p.pair_key = std::move(r.pair_key);
    out.push_back(std::move(p));
  }
  return out;
}

StatusOr<SubmitResult> Store::InsertExperiment(const Grid& grid,
                                               const std::vector<std::string>& sets, bool rerun) {
  std::vector<PlannedRun> runs = PlanRuns(grid.runs);
  HEADLAB_RETURN_IF_ERROR(db_.Exec("SAVEPOINT submit"));
  auto fail = [this](const Status& st) {
    db_.Exec("ROLLBACK TO submit; RELEASE submit");
    return st;
  };
  auto id = InsertExperimentRow(grid, sets, rerun);
  if (!id.ok()) return fail(id.status());
  SubmitResult res;
  res.experiment_id = *id;
  auto next = InsertRuns(runs, 0, grid.max_attempts, rerun,
                         std::chrono::steady_clock::time_point::max(), &res);
  if (!next.ok()) return fail(next.status());
  Status st = FinishSubmission(grid, sets, rerun, res);
  if (!st.ok()) return fail(st);
  HEADLAB_RETURN_IF_ERROR(db_.Exec("RELEASE submit"));
  return res;
}

StatusOr<int64_t> Store::InsertExperimentRow(const Grid& grid, const std::vector<std::string>& sets,
                                             bool rerun) {
  Stmt ins_exp = db_.MustPrepare(
      "INSERT INTO experiments(name, description, file, grid_json, sets_json, arms_json, "
      "pair_by_json, comparisons_json, max_attempts, rerun, created_at) "
      "VALUES (?,?,?,?,?,?,?,?,?,?,?)");
  ins_exp.Bind(1, grid.name)
      .Bind(2, grid.description)
      .Bind(3, grid.file)
      .Bind(4, CanonicalJson(grid.source))
      .Bind(5, Json(sets).dump())
      .Bind(6, Json(grid.arms).dump())
      .Bind(7, Json(grid.pair_by).dump())
      .Bind(8, ComparisonsJson(grid.comparisons).dump())
      .Bind(9, grid.max_attempts)
      .Bind(10, rerun ? 1 : 0)
      .Bind(11, NowIso());
  HEADLAB_RETURN_IF_ERROR(ins_exp.Exec());
  return db_.LastInsertId();
}

StatusOr<size_t> Store::InsertRuns(const std::vector<PlannedRun>& runs, size_t from,
                                   int max_attempts, bool rerun,
                                   std::chrono::steady_clock::time_point deadline,
                                   SubmitResult* res) {
  std::string now = NowIso();
  Stmt find_reuse = db_.MustPrepare(
      "SELECT id, reused_from FROM runs WHERE config_hash=? AND status='succeeded' "
      "ORDER BY id LIMIT 1");
  Stmt ins_run = db_.MustPrepare(
      "INSERT INTO runs(experiment_id, idx, arm, config_json, config_hash, pair_key, seed, "
      "status, attempts, max_attempts, reused_from, created_at, updated_at) "
      "VALUES (?,?,?,?,?,?,?,?,0,?,?,?,?)");
  Stmt copy_summary = db_.MustPrepare(
      "INSERT INTO summaries(run_id, key, value, attempt) "
      "SELECT ?, key, value, attempt FROM summaries WHERE run_id=?");
  size_t i = from;
  for (; i < runs.size(); ++i) {
    // The clock is read every 64 runs: a step overruns its deadline by well under 1 ms.
    if (i > from && (i - from) % 64 == 0 && std::chrono::steady_clock::now() >= deadline) break;
    const PlannedRun& r = runs[i];
    int64_t reuse = 0;
    if (!rerun) {
      find_reuse.Bind(1, r.config_hash);
      if (find_reuse.Step()) reuse = find_reuse.IsNull(1) ? find_reuse.Int(0) : find_reuse.Int(1);
      find_reuse.Reset();
    }
    ins_run.Bind(1, res->experiment_id)
        .Bind(2, r.index)
        .Bind(3, r.arm)
        .Bind(4, r.config_json)
        .Bind(5, r.config_hash)
        .Bind(6, r.pair_key)
        .Bind(7, r.seed)
        .Bind(8, reuse ? "succeeded" : "queued")
        .Bind(9, max_attempts);
    if (reuse)
      ins_run.Bind(10, reuse);
    else
      ins_run.BindNull(10);
    ins_run.Bind(11, now).Bind(12, now);
    HEADLAB_RETURN_IF_ERROR(ins_run.Exec());
    int64_t id = db_.LastInsertId();
    ++res->runs;
    if (reuse) {
      ++res->reused;
      copy_summary.Bind(1, id).Bind(2, reuse);
      HEADLAB_RETURN_IF_ERROR(copy_summary.Exec());
    } else {
      res->queued.push_back(id);
    }
  }
  return i;
}

Status Store::FinishSubmission(const Grid& grid, const std::vector<std::string>& sets, bool rerun,
                               const SubmitResult& res) {
  return AddEvent("submit", res.experiment_id, 0, 0, "",
                  {{"name", grid.name},
                   {"file", grid.file},
                   {"runs", res.runs},
                   {"reused", res.reused},
                   {"rerun", rerun},
                   {"sets", sets}});
}

Status Store::DeleteExperiment(int64_t experiment) {
  for (const char* sql :
       {"DELETE FROM paired_stats WHERE experiment_id=?1",
        "DELETE FROM summaries WHERE run_id IN (SELECT id FROM runs WHERE experiment_id=?1)",
        "DELETE FROM runs WHERE experiment_id=?1", "DELETE FROM events WHERE experiment_id=?1",
        "DELETE FROM experiments WHERE id=?1"}) {
    Stmt s = db_.MustPrepare(sql);
    s.Bind(1, experiment);
    HEADLAB_RETURN_IF_ERROR(s.Exec());
  }
  return Status::Ok();
}

Status Store::DeleteUnfinishedSubmissions() {
  Stmt last =
      db_.MustPrepare("SELECT coalesce(max(experiment_id), 0) FROM events WHERE kind='submit'");
  int64_t complete = last.Step() ? last.Int(0) : 0;
  std::vector<int64_t> partial;
  Stmt q = db_.MustPrepare("SELECT id FROM experiments WHERE id > ? ORDER BY id");
  q.Bind(1, complete);
  while (q.Step()) partial.push_back(q.Int(0));
  if (partial.empty()) return Status::Ok();
  Transaction txn(&db_);
  HEADLAB_RETURN_IF_ERROR(txn.begin_status());
  for (int64_t id : partial) {
    HEADLAB_RETURN_IF_ERROR(DeleteExperiment(id));
    LogWarn("experiment " + std::to_string(id) +
            ": its submission did not finish before the coordinator stopped; deleted");
  }
  return txn.Commit();
}

StatusOr<RunForAssign> Store::LoadRunForAssign(int64_t run) {
  Stmt& s = run_sql_.load;
  s.Bind(1, run);
  Status st;
  if (!s.Step(&st)) {
    s.Reset();
    return st.ok() ? Status::NotFound("run " + std::to_string(run)) : st;
  }
  RunForAssign r;
  r.id = s.Int(0);
  r.experiment_id = s.Int(1);
  r.status = s.Text(2);
  r.attempts = int(s.Int(3));
  r.max_attempts = int(s.Int(4));
  r.config_json = s.Text(5);
  s.Reset();
  return r;
}

Status Store::SetRunStatus(int64_t run, const std::string& status, const std::string& error) {
  Stmt& s = run_sql_.set_status;
  s.Bind(1, status).Bind(2, error).Bind(3, NowIso()).Bind(4, run);
  return s.Exec();
}

StatusOr<RunChange> Store::CancelRun(int64_t run, const std::string& reason) {
  Stmt s = db_.MustPrepare(
      "SELECT status, attempts, coalesce(worker_id, ''), experiment_id FROM runs WHERE id=?");
  s.Bind(1, run);
  if (!s.Step()) return Status::NotFound("run " + std::to_string(run) + " not found");
  RunChange c;
  c.run = run;
  c.old_status = s.Text(0);
  if (c.old_status != "queued" && c.old_status != "running")
    return Status::Unavailable("run " + std::to_string(run) + " is " + c.old_status +
                               "; only queued or running runs can be cancelled");
  if (c.old_status == "running") {
    c.running = AttemptRef{run, int(s.Int(1))};
    c.worker_id = s.Text(2);
  }
  int64_t exp = s.Int(3);
  c.experiment_id = exp;
  HEADLAB_RETURN_IF_ERROR(SetRunStatus(run, "cancelled", reason));
  HEADLAB_RETURN_IF_ERROR(AddEvent("cancel", exp, run, c.running ? c.running->attempt : 0,
                                   c.worker_id, {{"was", c.old_status}, {"reason", reason}}));
  return c;
}

StatusOr<std::vector<RunChange>> Store::CancelExperiment(int64_t experiment) {
  std::vector<RunChange> out;
  CancelCursor cursor;
  for (;;) {
    auto chunk = CancelExperimentRuns(experiment, &cursor, 4096);
    if (!chunk.ok()) return chunk.status();
    if (chunk->empty()) return out;
    out.insert(out.end(), chunk->begin(), chunk->end());
  }
}

StatusOr<std::vector<RunChange>> Store::CancelExperimentRuns(int64_t experiment,
                                                             CancelCursor* cursor, int limit) {
  if (cursor->last < 0) {
    Stmt e = db_.MustPrepare(
        "SELECT (SELECT coalesce(max(id), 0) FROM runs WHERE experiment_id=?1) "
        "FROM experiments WHERE id=?1");
    e.Bind(1, experiment);
    if (!e.Step())
      return Status::NotFound("experiment " + std::to_string(experiment) + " not found");
    cursor->last = e.Int(0);
  }
  // A rowid range (the `+` keeps SQLite off the (experiment_id, status) index, whose
  // plan sorts every remaining run on each call: quadratic over a 100,000-run cancel).
  std::vector<int64_t> ids;
  Stmt s = db_.MustPrepare(
      "SELECT id FROM runs WHERE id > ?2 AND id <= ?3 AND +experiment_id = ?1 "
      "AND +status IN ('queued','running') ORDER BY id LIMIT ?4");
  s.Bind(1, experiment).Bind(2, cursor->after).Bind(3, cursor->last).Bind(4, limit);
  while (s.Step()) ids.push_back(s.Int(0));
  std::vector<RunChange> out;
  for (int64_t id : ids) {
    auto c = CancelRun(id);
    if (!c.ok()) return c.status();
    out.push_back(*c);
    cursor->after = id;
  }
  return out;
}

StatusOr<RunChange> Store::RetryRun(int64_t run) {
  Stmt s = db_.MustPrepare(
      "SELECT r.status, r.attempts, r.experiment_id, e.max_attempts FROM runs r "
      "JOIN experiments e ON e.id = r.experiment_id WHERE r.id=?");
  s.Bind(1, run);
  if (!s.Step()) return Status::NotFound("run " + std::to_string(run) + " not found");
  RunChange c;
  c.run = run;
  c.old_status = s.Text(0);
  if (c.old_status != "failed" && c.old_status != "cancelled" && c.old_status != "lost")
    return Status::Unavailable(
        "run " + std::to_string(run) + " is " + c.old_status +
        "; only failed, cancelled or lost runs can be retried" +
        (c.old_status == "succeeded"
             ? " (to run a succeeded config again, resubmit its grid with --rerun)"
             : ""));
  int attempts = int(s.Int(1));
  int64_t exp = s.Int(2);
  c.experiment_id = exp;
  int budget = int(s.Int(3));
  // A retry gets a fresh budget of the experiment's max_attempts on top of those spent.
  Stmt u = db_.MustPrepare(
      "UPDATE runs SET status='queued', error='', max_attempts=?, updated_at=? WHERE id=?");
  u.Bind(1, attempts + budget).Bind(2, NowIso()).Bind(3, run);
  HEADLAB_RETURN_IF_ERROR(u.Exec());
  HEADLAB_RETURN_IF_ERROR(AddEvent("retry", exp, run, 0, "", {{"was", c.old_status}}));
  return c;
}

bool Store::ExperimentFinished(int64_t experiment) {
  Stmt& s = run_sql_.unfinished_in_exp;
  s.Bind(1, experiment);
  bool finished = s.Step() && s.Int(0) == 0;
  s.Reset();
  return finished;
}

}  // namespace headlab::coord
