// SQL for every state change. The run/attempt state machine lives here because each
// transition is a few statements that must commit together.
#include "coordinator/store.h"

#include "common/log.h"
#include "coordinator/migrations.h"

namespace headlab::coord {
namespace {

Json ComparisonsJson(const std::vector<Comparison>& cs) {
  Json out = Json::array();
  for (const Comparison& c : cs)
    out.push_back({{"name", c.name}, {"baseline", c.baseline}, {"treatment", c.treatment},
                   {"metric", c.metric}, {"stat", c.stat}});
  return out;
}

std::string DevicesJson(const std::vector<int>& d) { return Json(d).dump(); }

// Provenance fields copied into named columns (column, then accepted field names).
struct ProvColumn {
  const char* column;
  std::vector<const char*> fields;
};
const std::vector<ProvColumn>& ProvColumns() {
  static const std::vector<ProvColumn> k = {
      {"git_commit", {"git_commit"}},
      {"git_dirty", {"git_dirty"}},
      {"git_diff_sha256", {"git_diff_sha256"}},
      {"binary_sha256", {"binary_sha256"}},
      {"host", {"host"}},
      {"devices", {"devices", "device"}},
      {"driver_version", {"driver_version"}},
      {"cuda_version", {"cuda_version"}},
      {"libtorch_version", {"libtorch_version"}},
      {"dataset_path", {"dataset_path"}},
      {"dataset_sha256", {"dataset_sha256"}},
      {"parent_run", {"parent_run"}},
      {"parent_checkpoint_sha256", {"parent_checkpoint_sha256", "resume_sha256"}},
  };
  return k;
}

// Rows per multi-row metrics INSERT (7 parameters each; SQLite allows 32766).
constexpr int kMetricRowsPerInsert = 64;

bool IsTerminalAttempt(const std::string& s) { return s != "running"; }

}  // namespace

Status Store::Open(const std::string& path) {
  HEADLAB_RETURN_IF_ERROR(db_.Open(path, Db::Mode::kReadWrite));
  HEADLAB_RETURN_IF_ERROR(Migrate(&db_));
  insert_metric_ = db_.MustPrepare(
      "INSERT OR IGNORE INTO metrics(run_id, attempt, seq, step, key, value, time_s) "
      "VALUES (?,?,?,?,?,?,?)");
  {
    std::string sql =
        "INSERT OR IGNORE INTO metrics(run_id, attempt, seq, step, key, value, time_s) VALUES ";
    for (int k = 0; k < kMetricRowsPerInsert; ++k) sql += k ? ",(?,?,?,?,?,?,?)" : "(?,?,?,?,?,?,?)";
    insert_metrics_chunk_ = db_.MustPrepare(sql);
  }
  insert_attempt_ = db_.MustPrepare(
      "INSERT INTO attempts(run_id, attempt, worker_id, devices_json, status, assigned_at, "
      "resume_json) VALUES (?,?,?,?,'running',?,?)");
  run_started_ = db_.MustPrepare(
      "UPDATE runs SET status='running', attempts=?, worker_id=?, error='', updated_at=? "
      "WHERE id=?");
  load_run_ = db_.MustPrepare(
      "SELECT id, experiment_id, status, attempts, max_attempts, config_json FROM runs "
      "WHERE id=?");
  latest_ckpt_ = db_.MustPrepare(
      "SELECT path, sha256, step FROM artifacts WHERE run_id=? AND kind='checkpoint' "
      "AND deleted_at IS NULL ORDER BY step DESC, attempt DESC, seq DESC LIMIT ?");
  is_checkpoint_ = db_.MustPrepare(
      "SELECT 1 FROM artifacts WHERE run_id=? AND kind='checkpoint' AND path=? AND sha256=? "
      "AND step=? LIMIT 1");
  attempt_row_ = db_.MustPrepare(
      "SELECT a.status, a.exit_code IS NULL, r.status, r.attempts, r.max_attempts, "
      "r.experiment_id FROM attempts a JOIN runs r ON r.id = a.run_id "
      "WHERE a.run_id=? AND a.attempt=?");
  set_attempt_end_ = db_.MustPrepare(
      "UPDATE attempts SET status=?, finished_at=?, exit_code=?, error=?, stderr_tail=? "
      "WHERE run_id=? AND attempt=?");
  set_run_status_ = db_.MustPrepare(
      "UPDATE runs SET status=?, error=?, updated_at=? WHERE id=?");
  insert_event_ = db_.MustPrepare(
      "INSERT INTO events(at, kind, experiment_id, run_id, attempt, worker_id, detail_json) "
      "VALUES (?,?,?,?,?,?,?)");
  mark_accepted_ = db_.MustPrepare(
      "UPDATE attempts SET accepted_at=coalesce(accepted_at, ?), resume_json=? "
      "WHERE run_id=? AND attempt=?");
  insert_artifact_ = db_.MustPrepare(
      "INSERT OR IGNORE INTO artifacts(run_id, attempt, seq, kind, path, sha256, bytes, step, "
      "created_at) VALUES (?,?,?,?,?,?,?,?,?)");
  upsert_provenance_ = db_.MustPrepare(
      "INSERT OR REPLACE INTO provenance(run_id, attempt, git_commit, git_dirty, "
      "git_diff_sha256, binary_sha256, host, devices, driver_version, cuda_version, "
      "libtorch_version, dataset_path, dataset_sha256, parent_run, parent_checkpoint_sha256, "
      "fields_json, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  insert_summary_ = db_.MustPrepare(
      "INSERT OR REPLACE INTO summaries(run_id, key, value, attempt) VALUES (?,?,?,?)");
  attempt_worker_ = db_.MustPrepare("SELECT worker_id FROM attempts WHERE run_id=? AND attempt=?");
  unfinished_in_exp_ = db_.MustPrepare(
      "SELECT count(*) FROM runs WHERE experiment_id=? AND status IN ('queued','running')");
  HEADLAB_RETURN_IF_ERROR(DeleteUnfinishedSubmissions());
  return RepairWorkerIds();
}

Status Store::RepairWorkerIds() {
  std::vector<std::string> bad;
  {
    Stmt s = db_.MustPrepare("SELECT id FROM workers");
    while (s.Step()) {
      std::string id = s.Text(0);
      bool printable = !id.empty();
      for (unsigned char c : id) printable = printable && c > ' ' && c <= '~';
      if (!printable) bad.push_back(id);
    }
  }
  if (bad.empty()) return Status::Ok();
  static const char kHex[] = "0123456789abcdef";
  Transaction txn(&db_);
  HEADLAB_RETURN_IF_ERROR(txn.begin_status());
  for (const std::string& id : bad) {
    std::string fixed = "0x";
    for (unsigned char c : id) {
      fixed += kHex[c >> 4];
      fixed += kHex[c & 15];
    }
    for (const char* sql : {"UPDATE OR REPLACE workers SET id=?1 WHERE id=?2",
                            "UPDATE attempts SET worker_id=?1 WHERE worker_id=?2",
                            "UPDATE runs SET worker_id=?1 WHERE worker_id=?2",
                            "UPDATE events SET worker_id=?1 WHERE worker_id=?2"}) {
      Stmt u = db_.MustPrepare(sql);
      sqlite3_bind_text(u.raw(), 1, fixed.data(), int(fixed.size()), SQLITE_TRANSIENT);
      sqlite3_bind_blob(u.raw(), 2, id.data(), int(id.size()), SQLITE_TRANSIENT);
      HEADLAB_RETURN_IF_ERROR(u.Exec());
      // Stored as TEXT by older versions: match that too.
      Stmt t = db_.MustPrepare(sql);
      t.Bind(1, fixed).Bind(2, id);
      HEADLAB_RETURN_IF_ERROR(t.Exec());
    }
    LogWarn("worker id " + fixed + " was not printable (a ZeroMQ-generated identity); stored as hex");
  }
  return txn.Commit();
}

void Store::Close() {
  if (in_batch_) Rollback();
  insert_metric_ = Stmt();
  insert_metrics_chunk_ = Stmt();
  insert_attempt_ = Stmt();
  run_started_ = Stmt();
  load_run_ = Stmt();
  latest_ckpt_ = Stmt();
  attempt_row_ = Stmt();
  set_attempt_end_ = Stmt();
  set_run_status_ = Stmt();
  insert_event_ = Stmt();
  mark_accepted_ = Stmt();
  insert_artifact_ = Stmt();
  upsert_provenance_ = Stmt();
  insert_summary_ = Stmt();
  attempt_worker_ = Stmt();
  is_checkpoint_ = Stmt();
  unfinished_in_exp_ = Stmt();
  db_.Close();
}

Status Store::Begin() {
  HEADLAB_RETURN_IF_ERROR(db_.Exec("BEGIN IMMEDIATE"));
  in_batch_ = true;
  return Status::Ok();
}

Status Store::Commit() {
  in_batch_ = false;
  Status st = db_.Exec("COMMIT");
  if (!st.ok()) db_.Exec("ROLLBACK");
  if (st.ok() && feed_) feed_->Publish(live_);
  live_.clear();
  return st;
}

void Store::Rollback() {
  in_batch_ = false;
  live_.clear();
  db_.Exec("ROLLBACK");
}

std::vector<int64_t> Store::QueuedRuns() {
  std::vector<int64_t> out;
  Stmt s = db_.MustPrepare(
      "SELECT id FROM runs WHERE status='queued' ORDER BY experiment_id, idx");
  while (s.Step()) out.push_back(s.Int(0));
  return out;
}

std::vector<RunningAttempt> Store::RunningAttempts() {
  std::vector<RunningAttempt> out;
  Stmt s = db_.MustPrepare(
      "SELECT run_id, attempt, worker_id, devices_json FROM attempts WHERE status='running' "
      "ORDER BY run_id, attempt");
  while (s.Step()) {
    RunningAttempt a;
    a.ref = {s.Int(0), int(s.Int(1))};
    a.worker_id = s.Text(2);
    auto d = ParseJson(s.Text(3), "attempts.devices_json");
    if (d.ok() && d->is_array())
      for (const Json& x : *d)
        if (x.is_number_integer()) a.devices.push_back(x.get<int>());
    out.push_back(std::move(a));
  }
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
                                               const std::vector<std::string>& sets,
                                               bool rerun) {
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

StatusOr<int64_t> Store::InsertExperimentRow(const Grid& grid,
                                             const std::vector<std::string>& sets, bool rerun) {
  Stmt ins_exp = db_.MustPrepare(
      "INSERT INTO experiments(name, description, file, grid_json, sets_json, arms_json, "
      "pair_by_json, comparisons_json, max_attempts, rerun, created_at) "
      "VALUES (?,?,?,?,?,?,?,?,?,?,?)");
  ins_exp.Bind(1, grid.name).Bind(2, grid.description).Bind(3, grid.file)
      .Bind(4, CanonicalJson(grid.source)).Bind(5, Json(sets).dump())
      .Bind(6, Json(grid.arms).dump()).Bind(7, Json(grid.pair_by).dump())
      .Bind(8, ComparisonsJson(grid.comparisons).dump()).Bind(9, grid.max_attempts)
      .Bind(10, rerun ? 1 : 0).Bind(11, NowIso());
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
    ins_run.Bind(1, res->experiment_id).Bind(2, r.index).Bind(3, r.arm).Bind(4, r.config_json)
        .Bind(5, r.config_hash).Bind(6, r.pair_key).Bind(7, r.seed)
        .Bind(8, reuse ? "succeeded" : "queued").Bind(9, max_attempts);
    if (reuse) ins_run.Bind(10, reuse); else ins_run.BindNull(10);
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

Status Store::FinishSubmission(const Grid& grid, const std::vector<std::string>& sets,
                               bool rerun, const SubmitResult& res) {
  return AddEvent("submit", res.experiment_id, 0, 0, "",
                  {{"name", grid.name}, {"file", grid.file}, {"runs", res.runs},
                   {"reused", res.reused}, {"rerun", rerun}, {"sets", sets}});
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
  Stmt last = db_.MustPrepare(
      "SELECT coalesce(max(experiment_id), 0) FROM events WHERE kind='submit'");
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
  load_run_.Bind(1, run);
  Status st;
  if (!load_run_.Step(&st)) {
    load_run_.Reset();
    return st.ok() ? Status::NotFound("run " + std::to_string(run)) : st;
  }
  RunForAssign r;
  r.id = load_run_.Int(0);
  r.experiment_id = load_run_.Int(1);
  r.status = load_run_.Text(2);
  r.attempts = int(load_run_.Int(3));
  r.max_attempts = int(load_run_.Int(4));
  r.config_json = load_run_.Text(5);
  load_run_.Reset();
  return r;
}

Json Store::Checkpoints(int64_t run, int limit) {
  latest_ckpt_.Bind(1, run).Bind(2, limit);
  Json out = Json::array();
  while (latest_ckpt_.Step())
    out.push_back({{"path", latest_ckpt_.Text(0)}, {"sha256", latest_ckpt_.Text(1)},
                   {"step", latest_ckpt_.Int(2)}});
  latest_ckpt_.Reset();
  return out;
}

Status Store::StartAttempt(const AttemptRef& ref, const std::string& worker_id,
                           const std::vector<int>& devices, const Json& offered,
                           int64_t experiment_id) {
  std::string now = NowIso();
  insert_attempt_.Bind(1, ref.run).Bind(2, ref.attempt).Bind(3, worker_id)
      .Bind(4, DevicesJson(devices)).Bind(5, now).Bind(6, "null");
  HEADLAB_RETURN_IF_ERROR(insert_attempt_.Exec());
  run_started_.Bind(1, ref.attempt).Bind(2, worker_id).Bind(3, now).Bind(4, ref.run);
  HEADLAB_RETURN_IF_ERROR(run_started_.Exec());
  Json detail = {{"devices", devices}};
  if (!offered.is_null() && !offered.empty()) detail["resume_offered"] = offered;
  return AddEvent("assign", experiment_id, ref.run, ref.attempt, worker_id, detail);
}

Status Store::UpsertWorker(const std::string& id, const Json& ready) {
  std::string now = NowIso();
  Stmt s = db_.MustPrepare(
      "INSERT INTO workers(id, name, host, pid, version, slots, devices_json, state, "
      "first_seen_at, last_seen_at) VALUES (?,?,?,?,?,?,?,'alive',?,?) "
      "ON CONFLICT(id) DO UPDATE SET name=excluded.name, host=excluded.host, "
      "pid=excluded.pid, version=excluded.version, slots=excluded.slots, "
      "devices_json=excluded.devices_json, state='alive', last_seen_at=excluded.last_seen_at");
  s.Bind(1, id).Bind(2, ready.value("name", "")).Bind(3, ready.value("host", ""))
      .Bind(4, ready.value("pid", int64_t(0))).Bind(5, ready.value("version", ""))
      .Bind(6, ready.value("slots", 0)).Bind(7, CanonicalJson(ready.value("devices", Json::array())))
      .Bind(8, now).Bind(9, now);
  HEADLAB_RETURN_IF_ERROR(s.Exec());
  return AddEvent("worker_ready", 0, 0, 0, id, {{"slots", ready.value("slots", 0)}});
}

Status Store::SetWorkerState(const std::string& id, const std::string& state) {
  Stmt s = db_.MustPrepare("UPDATE workers SET state=?, last_seen_at=? WHERE id=?");
  s.Bind(1, state).Bind(2, NowIso()).Bind(3, id);
  HEADLAB_RETURN_IF_ERROR(s.Exec());
  return AddEvent("worker_" + state, 0, 0, 0, id, Json::object());
}

Status Store::CheckAttempt(const AttemptRef& ref) {
  if (!AttemptWorker(ref))
    return Status::NotFound("unknown attempt (run " + std::to_string(ref.run) + ", attempt " +
                            std::to_string(ref.attempt) + ")");
  return Status::Ok();
}

std::optional<std::string> Store::AttemptWorker(const AttemptRef& ref) {
  attempt_worker_.Bind(1, ref.run).Bind(2, ref.attempt);
  std::optional<std::string> out;
  if (attempt_worker_.Step()) out = attempt_worker_.Text(0);
  attempt_worker_.Reset();
  return out;
}

Status Store::MarkAccepted(const AttemptRef& ref, const Json& resume) {
  Json recorded = nullptr;
  if (resume.is_object()) {
    is_checkpoint_.Bind(1, ref.run).Bind(2, resume.value("path", "")).Bind(3, resume.value("sha256", ""))
        .Bind(4, resume.value("step", int64_t(-1)));
    bool known = is_checkpoint_.Step();
    is_checkpoint_.Reset();
    if (known) recorded = resume;
    else LogWarn("run " + std::to_string(ref.run) + " attempt " + std::to_string(ref.attempt) +
                 " reports resuming from " + resume.dump() +
                 ", which is not a checkpoint of the run; recorded as no resume");
  }
  mark_accepted_.Bind(1, NowIso()).Bind(2, recorded.dump()).Bind(3, ref.run).Bind(4, ref.attempt);
  return mark_accepted_.Exec();
}

Status Store::InsertMetrics(const AttemptRef& ref, const std::vector<MetricPoint>& points) {
  // Full chunks go through one multi-row INSERT (one statement execution per
  // kMetricRowsPerInsert points: about 3x faster than one per point); the rest one by one.
  size_t i = 0;
  for (; i + kMetricRowsPerInsert <= points.size(); i += kMetricRowsPerInsert) {
    Stmt& s = insert_metrics_chunk_;
    int col = 1;
    for (size_t k = i; k < i + kMetricRowsPerInsert; ++k) {
      const MetricPoint& p = points[k];
      sqlite3_bind_int64(s.raw(), col++, ref.run);
      sqlite3_bind_int64(s.raw(), col++, ref.attempt);
      sqlite3_bind_int64(s.raw(), col++, p.seq);
      sqlite3_bind_int64(s.raw(), col++, p.step);
      sqlite3_bind_text(s.raw(), col++, p.key.data(), int(p.key.size()), SQLITE_STATIC);
      if (p.value) sqlite3_bind_double(s.raw(), col++, *p.value);
      else sqlite3_bind_null(s.raw(), col++);
      sqlite3_bind_double(s.raw(), col++, p.time_s);
    }
    HEADLAB_RETURN_IF_ERROR(s.Exec());
  }
  for (; i < points.size(); ++i) {
    const MetricPoint& p = points[i];
    insert_metric_.Bind(1, ref.run).Bind(2, ref.attempt).Bind(3, p.seq).Bind(4, p.step)
        .Bind(5, p.key);
    if (p.value) insert_metric_.Bind(6, *p.value); else insert_metric_.BindNull(6);
    insert_metric_.Bind(7, p.time_s);
    HEADLAB_RETURN_IF_ERROR(insert_metric_.Exec());
  }
  if (feed_ && feed_->active())
    for (const MetricPoint& p : points)
      live_.push_back({ref.run, ref.attempt, p.seq, p.step, p.key,
                       p.value ? Json(*p.value) : Json(), p.time_s});
  return Status::Ok();
}

Status Store::InsertArtifact(const AttemptRef& ref, int64_t seq, const std::string& kind,
                             const std::string& path, const std::string& sha256,
                             int64_t bytes, int64_t step) {
  insert_artifact_.Bind(1, ref.run).Bind(2, ref.attempt).Bind(3, seq).Bind(4, kind)
      .Bind(5, path).Bind(6, sha256).Bind(7, bytes).Bind(8, step).Bind(9, NowIso());
  return insert_artifact_.Exec();
}

Status Store::MarkArtifactDeleted(const AttemptRef& ref, int64_t seq, const std::string& path) {
  Stmt s = db_.MustPrepare(
      "UPDATE artifacts SET deleted_at=? WHERE run_id=? AND attempt=? AND seq=? AND path=? "
      "AND deleted_at IS NULL");
  s.Bind(1, NowIso()).Bind(2, ref.run).Bind(3, ref.attempt).Bind(4, seq).Bind(5, path);
  return s.Exec();
}

Status Store::UpsertProvenance(const AttemptRef& ref, const Json& fields) {
  // The worker and exec each send some fields for the same attempt: merge, newest wins.
  Json merged = Json::object();
  {
    Stmt old = db_.MustPrepare("SELECT fields_json FROM provenance WHERE run_id=? AND attempt=?");
    old.Bind(1, ref.run).Bind(2, ref.attempt);
    if (old.Step()) {
      auto j = ParseJson(old.Text(0), "provenance.fields_json");
      if (j.ok() && j->is_object()) merged = *j;
    }
  }
  for (auto it = fields.begin(); it != fields.end(); ++it) merged[it.key()] = it.value();
  Stmt& s = upsert_provenance_;
  s.Bind(1, ref.run).Bind(2, ref.attempt);
  int col = 3;
  for (const ProvColumn& c : ProvColumns()) {
    const Json* v = nullptr;
    for (const char* f : c.fields) {
      auto it = merged.find(f);
      if (it != merged.end() && !it->is_null()) { v = &*it; break; }
    }
    if (!v) s.BindNull(col);
    else if (v->is_string()) s.Bind(col, v->get<std::string>());
    else if (v->is_boolean()) s.Bind(col, v->get<bool>() ? 1 : 0);
    else if (v->is_number_integer()) s.Bind(col, v->get<int64_t>());
    else if (v->is_number()) s.Bind(col, v->get<double>());
    else s.Bind(col, CanonicalJson(*v));
    ++col;
  }
  s.Bind(col, CanonicalJson(merged)).Bind(col + 1, NowIso());
  return s.Exec();
}

Status Store::InsertHeadMaps(const AttemptRef& ref, const std::vector<HeadMapRow>& rows) {
  Stmt s = db_.MustPrepare(
      "INSERT OR REPLACE INTO head_maps(run_id, attempt, layer, head, role, score, window) "
      "VALUES (?,?,?,?,?,?,?)");
  for (const HeadMapRow& r : rows) {
    s.Bind(1, ref.run).Bind(2, ref.attempt).Bind(3, r.layer).Bind(4, r.head).Bind(5, r.role);
    if (r.score) s.Bind(6, *r.score); else s.BindNull(6);
    if (r.window) s.Bind(7, *r.window); else s.BindNull(7);
    HEADLAB_RETURN_IF_ERROR(s.Exec());
  }
  return Status::Ok();
}

AttemptOutcome Store::FinishAttempt(const AttemptRef& ref, const std::string& status,
                                    int exit_code, const std::string& error,
                                    const std::string& stderr_tail, const Json& summary) {
  AttemptOutcome out;
  attempt_row_.Bind(1, ref.run).Bind(2, ref.attempt);
  if (!attempt_row_.Step()) {
    attempt_row_.Reset();
    return out;
  }
  out.known = true;
  std::string a_status = attempt_row_.Text(0);
  bool no_exit_yet = attempt_row_.Int(1) != 0;
  std::string r_status = attempt_row_.Text(2);
  int r_attempts = int(attempt_row_.Int(3));
  out.experiment_id = attempt_row_.Int(5);
  attempt_row_.Reset();
  std::string now = NowIso();

  if (IsTerminalAttempt(a_status)) {
    // Duplicate DONE, or a DONE that arrives after the lease expired: note the worker's
    // report on the attempt row once, change nothing else.
    if (no_exit_yet) {
      std::string note = error.empty() ? "" : error + "; ";
      note += "DONE(" + status + ") arrived after the attempt was " + a_status + "; ignored";
      set_attempt_end_.Bind(1, a_status).Bind(2, now).Bind(3, exit_code).Bind(4, note)
          .Bind(5, stderr_tail).Bind(6, ref.run).Bind(7, ref.attempt);
      set_attempt_end_.Exec();
    }
    return out;
  }
  bool current = r_status == "running" && r_attempts == ref.attempt;
  std::string a_new = status;
  std::string a_error = error;
  if (!current && status == "succeeded") {
    // The run was cancelled or retried meanwhile: this attempt does not count as its result.
    a_new = "cancelled";
    a_error = "succeeded after the run became " + r_status + "; result not used";
  }
  set_attempt_end_.Bind(1, a_new).Bind(2, now).Bind(3, exit_code).Bind(4, a_error)
      .Bind(5, stderr_tail).Bind(6, ref.run).Bind(7, ref.attempt);
  set_attempt_end_.Exec();
  out.changed = true;
  if (current) {
    if (status == "succeeded" && summary.is_object()) {
      for (auto it = summary.begin(); it != summary.end(); ++it) {
        insert_summary_.Bind(1, ref.run).Bind(2, it.key());
        if (it->is_number()) insert_summary_.Bind(3, it->get<double>());
        else insert_summary_.BindNull(3);
        insert_summary_.Bind(4, ref.attempt);
        insert_summary_.Exec();
      }
    }
    SetRunStatus(ref.run, status, status == "succeeded" ? "" : error);
    out.run_finished = true;
  }
  AddEvent("done", out.experiment_id, ref.run, ref.attempt, "",
           {{"status", status}, {"exit_code", exit_code}, {"current", current}});
  return out;
}

AttemptOutcome Store::LoseAttempt(const AttemptRef& ref, const std::string& reason) {
  return EndAttempt(ref, "lost", reason, "lost");
}

AttemptOutcome Store::RejectAttempt(const AttemptRef& ref, const std::string& reason,
                                    bool busy) {
  return EndAttempt(ref, "rejected", reason, "reject", /*charged=*/!busy);
}

AttemptOutcome Store::EndAttempt(const AttemptRef& ref, const std::string& attempt_status,
                                 const std::string& reason, const char* event, bool charged) {
  AttemptOutcome out;
  attempt_row_.Bind(1, ref.run).Bind(2, ref.attempt);
  if (!attempt_row_.Step()) {
    attempt_row_.Reset();
    return out;
  }
  out.known = true;
  std::string a_status = attempt_row_.Text(0);
  std::string r_status = attempt_row_.Text(2);
  int r_attempts = int(attempt_row_.Int(3));
  int r_max = int(attempt_row_.Int(4));
  out.experiment_id = attempt_row_.Int(5);
  attempt_row_.Reset();
  if (IsTerminalAttempt(a_status)) return out;
  set_attempt_end_.Bind(1, attempt_status).Bind(2, NowIso()).BindNull(3).Bind(4, reason)
      .Bind(5, "").Bind(6, ref.run).Bind(7, ref.attempt);
  set_attempt_end_.Exec();
  out.changed = true;
  if (r_status == "running" && r_attempts == ref.attempt) {
    if (!charged) {
      // Attempt numbers stay unique and increasing; the budget grows by the one not charged.
      Stmt u = db_.MustPrepare("UPDATE runs SET max_attempts = max_attempts + 1 WHERE id=?");
      u.Bind(1, ref.run);
      u.Exec();
      SetRunStatus(ref.run, "queued", "");
      out.requeued = true;
    } else if (r_attempts >= r_max) {
      SetRunStatus(ref.run, "failed",
                   "attempt " + std::to_string(ref.attempt) + " " + attempt_status + " (" +
                       reason + "); max_attempts " + std::to_string(r_max) + " reached");
      out.run_finished = true;
    } else {
      SetRunStatus(ref.run, "queued", "");
      out.requeued = true;
    }
  }
  AddEvent(event, out.experiment_id, ref.run, ref.attempt, "",
           {{"reason", reason}, {"requeued", out.requeued}, {"charged", charged}});
  return out;
}

Status Store::SetRunStatus(int64_t run, const std::string& status, const std::string& error) {
  set_run_status_.Bind(1, status).Bind(2, error).Bind(3, NowIso()).Bind(4, run);
  return set_run_status_.Exec();
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
    if (!e.Step()) return Status::NotFound("experiment " + std::to_string(experiment) + " not found");
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
        (c.old_status == "succeeded" ? " (to run a succeeded config again, resubmit its grid with --rerun)"
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
  unfinished_in_exp_.Bind(1, experiment);
  bool finished = unfinished_in_exp_.Step() && unfinished_in_exp_.Int(0) == 0;
  unfinished_in_exp_.Reset();
  return finished;
}

Status Store::AddEvent(const std::string& kind, int64_t experiment, int64_t run, int attempt,
                       const std::string& worker, const Json& detail) {
  Stmt& s = insert_event_;
  s.Bind(1, NowIso()).Bind(2, kind);
  if (experiment) s.Bind(3, experiment); else s.BindNull(3);
  if (run) s.Bind(4, run); else s.BindNull(4);
  if (attempt) s.Bind(5, attempt); else s.BindNull(5);
  if (!worker.empty()) s.Bind(6, worker); else s.BindNull(6);
  s.Bind(7, CanonicalJson(detail));
  return s.Exec();
}

}  // namespace headlab::coord
