// The write side of the database: every state change the coordinator makes, as SQL on the
// one read-write connection. Owned and called only by the loop thread (router.h); callers
// group calls into batches (Begin/Commit) so one transaction covers many messages.
//
// One class (one connection, one batch), its definitions split by what they store:
//   store.cc            the connection: open (migrate, prepare), batches, events
//   store_runs.cc       experiments and runs: submission, dispatch reads, cancel, retry
//   store_attempts.cc   attempts: the run/attempt state machine (start, accept, end)
//   store_metrics.cc    what a running attempt reports: metric points, provenance, head maps
//   store_artifacts.cc  artifacts: checkpoints offered and resumed from, deletions
//   store_workers.cc    workers: registration, state, stored ids
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/grid.h"
#include "common/json.h"
#include "common/status.h"
#include "coordinator/db.h"
#include "coordinator/head_maps.h"
#include "coordinator/metric_feed.h"

namespace headlab::coord {

// (run, attempt): names one attempt of one run.
struct AttemptRef {
  int64_t run = 0;
  int attempt = 0;
  bool operator<(const AttemptRef& o) const {
    return run != o.run ? run < o.run : attempt < o.attempt;
  }
  bool operator==(const AttemptRef& o) const { return run == o.run && attempt == o.attempt; }
};

// An attempt the database says is running (recovered at startup).
struct RunningAttempt {
  AttemptRef ref;
  std::string worker_id;
  std::vector<int> devices;
};

// What ASSIGN needs to know about a run.
struct RunForAssign {
  int64_t id = 0;
  int64_t experiment_id = 0;
  std::string status;
  int attempts = 0;
  int max_attempts = 0;
  std::string config_json;
};

// One run of a submission, planned off the loop thread: its config already serialised.
struct PlannedRun {
  int index = 0;
  std::string arm;
  std::string config_json;  // CanonicalJson of the complete config
  std::string config_hash;
  std::string pair_key;
  int64_t seed = 0;
};

// Returns the runs of an expanded grid as PlannedRuns, releasing each config tree as soon
// as it is serialised (a 100,000-run grid's trees take gigabytes, their text a tenth).
std::vector<PlannedRun> PlanRuns(std::vector<ExpandedRun> runs);

struct SubmitResult {
  int64_t experiment_id = 0;
  int runs = 0;
  int reused = 0;
  std::vector<int64_t> queued;  // run ids inserted as queued, ascending
};

// One metric point as METRICS carries it.
struct MetricPoint {
  int64_t seq = 0;
  int64_t step = 0;
  std::string key;
  std::optional<double> value;  // JSON null (e.g. a NaN loss) is stored as NULL
  double time_s = 0;
};

// Result of ending an attempt (DONE, loss, cancel).
struct AttemptOutcome {
  bool known = false;         // the attempt row exists
  bool changed = false;       // this call changed its status (false: duplicate or stale)
  bool requeued = false;      // the run went back to `queued`
  bool run_finished = false;  // the run reached a terminal status
  int64_t experiment_id = 0;
};

// A user request's effect on one run (cancel/retry).
struct RunChange {
  int64_t run = 0;
  int64_t experiment_id = 0;
  std::string old_status;
  std::optional<AttemptRef> running;  // the attempt to send CANCEL for
  std::string worker_id;
};

class Store {
 public:
  Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Opens (creating) the database at `path`, migrates it and prepares the statements.
  Status Open(const std::string& path);
  void Close();
  Db* db() { return &db_; }
  // Live subscribers get each batch's metric points after its commit (null = none).
  void SetMetricFeed(MetricFeed* feed) { feed_ = feed; }

  // Batches: one transaction around many calls; Commit makes them durable (to WAL).
  Status Begin();
  Status Commit();
  void Rollback();
  bool in_batch() const { return in_batch_; }

  // --- Recovery (startup) ---
  // Returns the ids of queued runs in dispatch order (experiment, then grid index).
  std::vector<int64_t> QueuedRuns();
  std::vector<RunningAttempt> RunningAttempts();

  // --- Submission ---
  // Inserts the experiment and its runs; a run whose config_hash matches a succeeded run
  // is inserted as succeeded with reused_from and copied summaries, unless `rerun`. Runs
  // inside a savepoint: on error nothing of it remains.
  StatusOr<SubmitResult> InsertExperiment(const Grid& grid, const std::vector<std::string>& sets,
                                          bool rerun);
  // The same in steps, one per batch, for grids too large for one (core.h, SubmitStep):
  // the experiment row, then runs, then the `submit` event, which marks it complete. An
  // experiment without that event (a crash mid-way) is deleted by Open.
  // Inserts the experiment row (`grid` need not hold its runs); returns its id.
  StatusOr<int64_t> InsertExperimentRow(const Grid& grid, const std::vector<std::string>& sets,
                                        bool rerun);
  // Inserts runs[from...] as above until `deadline` passes (at least one); returns the
  // index of the next run to insert. Counts and queued ids go to *res.
  StatusOr<size_t> InsertRuns(const std::vector<PlannedRun>& runs, size_t from, int max_attempts,
                              bool rerun, std::chrono::steady_clock::time_point deadline,
                              SubmitResult* res);
  // Writes the `submit` event: the experiment is complete.
  Status FinishSubmission(const Grid& grid, const std::vector<std::string>& sets, bool rerun,
                          const SubmitResult& res);
  // Deletes an experiment whose submission could not finish, with its runs.
  Status DeleteExperiment(int64_t experiment);

  // --- Dispatch ---
  StatusOr<RunForAssign> LoadRunForAssign(int64_t run);
  // Returns [{path, sha256, step}] of the run's checkpoint artifacts, newest (highest
  // step) first, at most `limit`: ASSIGN offers the first and falls back to the others.
  Json Checkpoints(int64_t run, int limit);
  // Inserts the attempt row (status running) and marks the run running. `offered` (the
  // checkpoints ASSIGN offers) goes to the assign event; the row's resume_json stays null
  // until ACCEPT reports the one the attempt really resumed from (MarkAccepted).
  Status StartAttempt(const AttemptRef& ref, const std::string& worker_id,
                      const std::vector<int>& devices, const Json& offered,
                      int64_t experiment_id = 0);

  // --- Workers ---
  // `ready` holds name, host, pid, version, slots and devices.
  Status UpsertWorker(const std::string& id, const Json& ready);
  Status SetWorkerState(const std::string& id, const std::string& state);

  // --- Ingestion ---
  // Returns NotFound for an unknown (run, attempt).
  Status CheckAttempt(const AttemptRef& ref);
  // Returns the worker the attempt was assigned to, or nullopt for an unknown attempt.
  std::optional<std::string> AttemptWorker(const AttemptRef& ref);
  // ACCEPT: records when, and the checkpoint the attempt resumed from (null: none). A
  // resume that is not one of the run's checkpoint artifacts is recorded as null.
  Status MarkAccepted(const AttemptRef& ref, const Json& resume = nullptr);
  // INSERT OR IGNORE keyed by (run, attempt, seq): a resend is harmless.
  Status InsertMetrics(const AttemptRef& ref, const std::vector<MetricPoint>& points);
  Status InsertArtifact(const AttemptRef& ref, int64_t seq, const std::string& kind,
                        const std::string& path, const std::string& sha256, int64_t bytes,
                        int64_t step);
  // ARTIFACT_DELETED: sets deleted_at of artifact (run, attempt, seq) once, if its path is
  // `path` (a resend is harmless; a path that does not match changes nothing).
  Status MarkArtifactDeleted(const AttemptRef& ref, int64_t seq, const std::string& path);
  Status UpsertProvenance(const AttemptRef& ref, const Json& fields);
  // Replaces rows with the same (run, attempt, layer, head).
  Status InsertHeadMaps(const AttemptRef& ref, const std::vector<HeadMapRow>& rows);
  // DONE: records the attempt's end. Only the run's current running attempt can make the
  // run succeed (exactly one successful attempt per run); a late or duplicate DONE is
  // recorded on its attempt row at most once and changes nothing else.
  AttemptOutcome FinishAttempt(const AttemptRef& ref, const std::string& status, int exit_code,
                               const std::string& error, const std::string& stderr_tail,
                               const Json& summary);
  // Lease expiry: the attempt becomes `lost`; its run is requeued (attempt+1 comes at the
  // next dispatch) while attempts < max_attempts, else the run is `failed`.
  AttemptOutcome LoseAttempt(const AttemptRef& ref, const std::string& reason);
  // REJECT: like a loss (counts toward max_attempts, so a run every worker rejects ends),
  // unless `busy` (the worker had no free slot or device: the coordinator's view of it was
  // stale, not the run's fault): then the run is requeued and its max_attempts raised by
  // one, so the attempt is not charged.
  AttemptOutcome RejectAttempt(const AttemptRef& ref, const std::string& reason, bool busy = false);

  // --- User requests ---
  // Cancels a queued or running run; NotFound / FailedPrecondition-as-Unavailable if the
  // run is already finished (the HTTP layer maps Unavailable to 409).
  // `reason` becomes the run's error ("cancelled by user", or why a rule stopped it).
  StatusOr<RunChange> CancelRun(int64_t run, const std::string& reason = "cancelled by user");
  // Cancels every queued/running run of the experiment.
  StatusOr<std::vector<RunChange>> CancelExperiment(int64_t experiment);
  // Where a cancel of an experiment in steps has got to.
  struct CancelCursor {
    int64_t after = 0;  // runs up to this id are done
    int64_t last = -1;  // the experiment's highest run id (-1: not looked up yet)
  };
  // Cancels up to `limit` queued/running runs of the experiment past the cursor, in id
  // order, and advances it; returns their changes ([] when none are left). NotFound for
  // an unknown experiment. Each call reads only the runs it passes (rowid order).
  StatusOr<std::vector<RunChange>> CancelExperimentRuns(int64_t experiment, CancelCursor* cursor,
                                                        int limit);
  // failed/cancelled/lost -> queued with a fresh attempt budget.
  StatusOr<RunChange> RetryRun(int64_t run);

  // Returns true iff the experiment has no queued or running runs.
  bool ExperimentFinished(int64_t experiment);
  Status AddEvent(const std::string& kind, int64_t experiment, int64_t run, int attempt,
                  const std::string& worker, const Json& detail);

 private:
  // The statements used on every message, prepared once by Open (each part's Prepare*,
  // in its file) and finalised by Close.
  struct RunStatements {
    Stmt load, set_status, unfinished_in_exp;
  };
  struct AttemptStatements {
    Stmt insert, run_started, row, set_end, mark_accepted, worker, insert_summary;
  };
  struct MetricStatements {
    Stmt insert_one, insert_chunk, upsert_provenance;
  };
  struct ArtifactStatements {
    Stmt insert, latest_checkpoints, is_checkpoint;
  };
  void PrepareRuns();       // store_runs.cc
  void PrepareAttempts();   // store_attempts.cc
  void PrepareMetrics();    // store_metrics.cc
  void PrepareArtifacts();  // store_artifacts.cc

  // Ends a running attempt that did not report DONE (lost, rejected).
  AttemptOutcome EndAttempt(const AttemptRef& ref, const std::string& attempt_status,
                            const std::string& reason, const char* event, bool charged = true);
  // Deletes experiments whose submission never finished (no `submit` event: only the
  // newest can be, as submissions run one at a time).
  Status DeleteUnfinishedSubmissions();
  // Rewrites worker ids that are not printable ASCII (ZeroMQ-generated identities stored
  // by older versions) as hex, so that every stored name is valid UTF-8.
  Status RepairWorkerIds();
  Status SetRunStatus(int64_t run, const std::string& status, const std::string& error);
  // Whether (path, sha256, step) is a checkpoint artifact of the run.
  bool IsCheckpoint(int64_t run, const Json& checkpoint);

  Db db_;
  bool in_batch_ = false;
  MetricFeed* feed_ = nullptr;
  std::vector<LivePoint> live_;  // this batch's points, published after Commit
  Stmt insert_event_;
  RunStatements run_sql_;
  AttemptStatements attempt_sql_;
  MetricStatements metric_sql_;
  ArtifactStatements artifact_sql_;
};

}  // namespace headlab::coord
