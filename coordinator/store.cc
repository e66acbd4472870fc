// The write connection: opening (migrations, the prepared statements, repairs of older
// databases), batches and the event log. The parts of Store that write each table are in
// the store_*.cc files beside this one (store.h lists them).
#include "coordinator/store.h"

#include "coordinator/migrations.h"

namespace headlab::coord {

Status Store::Open(const std::string& path) {
  HEADLAB_RETURN_IF_ERROR(db_.Open(path, Db::Mode::kReadWrite));
  HEADLAB_RETURN_IF_ERROR(Migrate(&db_));
  insert_event_ = db_.MustPrepare(
      "INSERT INTO events(at, kind, experiment_id, run_id, attempt, worker_id, detail_json) "
      "VALUES (?,?,?,?,?,?,?)");
  PrepareRuns();
  PrepareAttempts();
  PrepareMetrics();
  PrepareArtifacts();
  HEADLAB_RETURN_IF_ERROR(DeleteUnfinishedSubmissions());
  return RepairWorkerIds();
}

void Store::Close() {
  if (in_batch_) Rollback();
  insert_event_ = Stmt();
  run_sql_ = RunStatements();
  attempt_sql_ = AttemptStatements();
  metric_sql_ = MetricStatements();
  artifact_sql_ = ArtifactStatements();
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

Status Store::AddEvent(const std::string& kind, int64_t experiment, int64_t run, int attempt,
                       const std::string& worker, const Json& detail) {
  Stmt& s = insert_event_;
  s.Bind(1, NowIso()).Bind(2, kind);
  if (experiment)
    s.Bind(3, experiment);
  else
    s.BindNull(3);
  if (run)
    s.Bind(4, run);
  else
    s.BindNull(4);
  if (attempt)
    s.Bind(5, attempt);
  else
    s.BindNull(5);
  if (!worker.empty())
    s.Bind(6, worker);
  else
    s.BindNull(6);
  s.Bind(7, CanonicalJson(detail));
  return s.Exec();
}

}  // namespace headlab::coord
