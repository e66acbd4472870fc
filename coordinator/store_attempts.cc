// Store's writes of attempts: the run/attempt state machine. Each transition is a few
// statements on attempts, runs, summaries and events that commit together.
#include "coordinator/store.h"

#include "common/log.h"

namespace headlab::coord {
namespace {

std::string DevicesJson(const std::vector<int>& d) { return Json(d).dump(); }

bool IsTerminalAttempt(const std::string& s) { return s != "running"; }

// An attempt's status and its run's, as ending an attempt needs them.
struct AttemptRow {
  std::string status;
  bool no_exit_yet = false;  // no exit code recorded yet
  std::string run_status;
  int run_attempts = 0;
  int run_max_attempts = 0;
  int64_t experiment_id = 0;
};

// Reads attempt `ref` through `row` (Store's prepared attempt-row query); nullopt for an
// unknown attempt.
std::optional<AttemptRow> ReadAttemptRow(Stmt& row, const AttemptRef& ref) {
  row.Bind(1, ref.run).Bind(2, ref.attempt);
  if (!row.Step()) {
    row.Reset();
    return std::nullopt;
  }
  AttemptRow r;
  r.status = row.Text(0);
  r.no_exit_yet = row.Int(1) != 0;
  r.run_status = row.Text(2);
  r.run_attempts = int(row.Int(3));
  r.run_max_attempts = int(row.Int(4));
  r.experiment_id = row.Int(5);
  row.Reset();
  return r;
}

}  // namespace

void Store::PrepareAttempts() {
  attempt_sql_.insert = db_.MustPrepare(
      "INSERT INTO attempts(run_id, attempt, worker_id, devices_json, status, assigned_at, "
      "resume_json) VALUES (?,?,?,?,'running',?,?)");
  attempt_sql_.run_started = db_.MustPrepare(
      "UPDATE runs SET status='running', attempts=?, worker_id=?, error='', updated_at=? "
      "WHERE id=?");
  attempt_sql_.row = db_.MustPrepare(
      "SELECT a.status, a.exit_code IS NULL, r.status, r.attempts, r.max_attempts, "
      "r.experiment_id FROM attempts a JOIN runs r ON r.id = a.run_id "
      "WHERE a.run_id=? AND a.attempt=?");
  attempt_sql_.set_end = db_.MustPrepare(
      "UPDATE attempts SET status=?, finished_at=?, exit_code=?, error=?, stderr_tail=? "
      "WHERE run_id=? AND attempt=?");
  attempt_sql_.mark_accepted = db_.MustPrepare(
      "UPDATE attempts SET accepted_at=coalesce(accepted_at, ?), resume_json=? "
      "WHERE run_id=? AND attempt=?");
  attempt_sql_.worker =
      db_.MustPrepare("SELECT worker_id FROM attempts WHERE run_id=? AND attempt=?");
  attempt_sql_.insert_summary = db_.MustPrepare(
      "INSERT OR REPLACE INTO summaries(run_id, key, value, attempt) VALUES (?,?,?,?)");
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

Status Store::StartAttempt(const AttemptRef& ref, const std::string& worker_id,
                           const std::vector<int>& devices, const Json& offered,
                           int64_t experiment_id) {
  std::string now = NowIso();
  Stmt& insert = attempt_sql_.insert;
  insert.Bind(1, ref.run)
      .Bind(2, ref.attempt)
      .Bind(3, worker_id)
      .Bind(4, DevicesJson(devices))
      .Bind(5, now)
      .Bind(6, "null");
  HEADLAB_RETURN_IF_ERROR(insert.Exec());
  Stmt& run_started = attempt_sql_.run_started;
  run_started.Bind(1, ref.attempt).Bind(2, worker_id).Bind(3, now).Bind(4, ref.run);
  HEADLAB_RETURN_IF_ERROR(run_started.Exec());
  Json detail = {{"devices", devices}};
  if (!offered.is_null() && !offered.empty()) detail["resume_offered"] = offered;
  return AddEvent("assign", experiment_id, ref.run, ref.attempt, worker_id, detail);
}

Status Store::CheckAttempt(const AttemptRef& ref) {
  if (!AttemptWorker(ref))
    return Status::NotFound("unknown attempt (run " + std::to_string(ref.run) + ", attempt " +
                            std::to_string(ref.attempt) + ")");
  return Status::Ok();
}

std::optional<std::string> Store::AttemptWorker(const AttemptRef& ref) {
  Stmt& s = attempt_sql_.worker;
  s.Bind(1, ref.run).Bind(2, ref.attempt);
  std::optional<std::string> out;
  if (s.Step()) out = s.Text(0);
  s.Reset();
  return out;
}

Status Store::MarkAccepted(const AttemptRef& ref, const Json& resume) {
  Json recorded = nullptr;
  if (resume.is_object()) {
    if (IsCheckpoint(ref.run, resume))
      recorded = resume;
    else
      LogWarn("run " + std::to_string(ref.run) + " attempt " + std::to_string(ref.attempt) +
              " reports resuming from " + resume.dump() +
              ", which is not a checkpoint of the run; recorded as no resume");
  }
  Stmt& s = attempt_sql_.mark_accepted;
  s.Bind(1, NowIso()).Bind(2, recorded.dump()).Bind(3, ref.run).Bind(4, ref.attempt);
  return s.Exec();
}

AttemptOutcome Store::FinishAttempt(const AttemptRef& ref, const std::string& status, int exit_code,
                                    const std::string& error, const std::string& stderr_tail,
                                    const Json& summary) {
  AttemptOutcome out;
  std::optional<AttemptRow> row = ReadAttemptRow(attempt_sql_.row, ref);
  if (!row) return out;
  out.known = true;
  const std::string& a_status = row->status;
  const std::string& r_status = row->run_status;
  out.experiment_id = row->experiment_id;
  Stmt& set_end = attempt_sql_.set_end;
  std::string now = NowIso();

  if (IsTerminalAttempt(a_status)) {
    // Duplicate DONE, or a DONE that arrives after the lease expired: note the worker's
    // report on the attempt row once, change nothing else.
    if (row->no_exit_yet) {
      std::string note = error.empty() ? "" : error + "; ";
      note += "DONE(" + status + ") arrived after the attempt was " + a_status + "; ignored";
      set_end.Bind(1, a_status)
          .Bind(2, now)
          .Bind(3, exit_code)
          .Bind(4, note)
          .Bind(5, stderr_tail)
          .Bind(6, ref.run)
          .Bind(7, ref.attempt);
      set_end.Exec();
    }
    return out;
  }
  bool current = r_status == "running" && row->run_attempts == ref.attempt;
  std::string a_new = status;
  std::string a_error = error;
  if (!current && status == "succeeded") {
    // The run was cancelled or retried meanwhile: this attempt does not count as its result.
    a_new = "cancelled";
    a_error = "succeeded after the run became " + r_status + "; result not used";
  }
  set_end.Bind(1, a_new)
      .Bind(2, now)
      .Bind(3, exit_code)
      .Bind(4, a_error)
      .Bind(5, stderr_tail)
      .Bind(6, ref.run)
      .Bind(7, ref.attempt);
  set_end.Exec();
  out.changed = true;
  if (current) {
    if (status == "succeeded" && summary.is_object()) {
      Stmt& ins = attempt_sql_.insert_summary;
      for (auto it = summary.begin(); it != summary.end(); ++it) {
        ins.Bind(1, ref.run).Bind(2, it.key());
        if (it->is_number())
          ins.Bind(3, it->get<double>());
        else
          ins.BindNull(3);
        ins.Bind(4, ref.attempt);
        ins.Exec();
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

AttemptOutcome Store::RejectAttempt(const AttemptRef& ref, const std::string& reason, bool busy) {
  return EndAttempt(ref, "rejected", reason, "reject", /*charged=*/!busy);
}

AttemptOutcome Store::EndAttempt(const AttemptRef& ref, const std::string& attempt_status,
                                 const std::string& reason, const char* event, bool charged) {
  AttemptOutcome out;
  std::optional<AttemptRow> row = ReadAttemptRow(attempt_sql_.row, ref);
  if (!row) return out;
  out.known = true;
  int r_max = row->run_max_attempts;
  out.experiment_id = row->experiment_id;
  if (IsTerminalAttempt(row->status)) return out;
  Stmt& set_end = attempt_sql_.set_end;
  set_end.Bind(1, attempt_status)
      .Bind(2, NowIso())
      .BindNull(3)
      .Bind(4, reason)
      .Bind(5, "")
      .Bind(6, ref.run)
      .Bind(7, ref.attempt);
  set_end.Exec();
  out.changed = true;
  if (row->run_status == "running" && row->run_attempts == ref.attempt) {
    if (!charged) {
      // Attempt numbers stay unique and increasing; the budget grows by the one not charged.
      Stmt u = db_.MustPrepare("UPDATE runs SET max_attempts = max_attempts + 1 WHERE id=?");
      u.Bind(1, ref.run);
      u.Exec();
      SetRunStatus(ref.run, "queued", "");
      out.requeued = true;
    } else if (row->run_attempts >= r_max) {
      SetRunStatus(ref.run, "failed",
                   "attempt " + std::to_string(ref.attempt) + " " + attempt_status + " (" + reason +
                       "); max_attempts " + std::to_string(r_max) + " reached");
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

}  // namespace headlab::coord
