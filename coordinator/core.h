// The coordinator's state machine: worker messages in, state changes written to the Store,
// replies (ASSIGN, ACK, ...) out. Owned and called only by the loop thread (router.h).
//
// Write-before-act: every handler writes through the Store inside the current batch's
// transaction and only appends replies to the outbox; the router sends the outbox after
// Commit. So a reply never announces a state the database does not have, and a kill -9
// at any point restarts from a state the workers were told about or will be told again.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "common/grid.h"
#include "common/json.h"
#include "common/status.h"
#include "coordinator/lease_table.h"
#include "coordinator/scheduler.h"
#include "coordinator/store.h"
#include "coordinator/worker_registry.h"

namespace headlab::coord {

// A message for one worker: [identity, "HLW1", command, body].
struct OutMessage {
  std::string identity;
  std::string command;
  std::string body;
};

class Core {
 public:
  // `store` must be open and outlive the Core; `token` authenticates READY.
  Core(Store* store, std::string token);

  // Loads the queue and gives every running attempt a fresh lease (restart recovery).
  void Recover(Clock::time_point now);

  // Batch lifecycle. Handlers may only be called between BeginBatch and CommitBatch.
  Status BeginBatch();
  // Commits; on success the outbox may be sent and after-commit hooks have run.
  Status CommitBatch();

  // Handles one validated-frame message from `identity`; bad bodies are logged and dropped.
  void HandleMessage(const std::string& identity, const std::string& command,
                     const std::string& body, Clock::time_point now);
  // Timers: worker and lease expiry, heartbeats, dispatch, finished experiments' stats.
  void Tick(Clock::time_point now);
  // Assigns queued runs to workers with free capacity (dispatch.cc, scheduler.h).
  void Dispatch(Clock::time_point now);

  // --- User requests (HTTP), run inside a batch ---
  StatusOr<SubmitResult> Submit(const Grid& grid, const std::vector<std::string>& sets,
                                bool rerun);
  StatusOr<Json> CancelRun(int64_t run);
  StatusOr<Json> CancelExperiment(int64_t experiment);
  StatusOr<Json> RetryRun(int64_t run);
  // [{id,name,host,devices,last_heartbeat_age_s,state,running,slots}] (schema/http_api.md).
  Json WorkersJson(Clock::time_point now);

  // Runs `fn` after the current batch commits (e.g. to answer an HTTP request).
  void AfterCommit(std::function<void()> fn) { after_commit_.push_back(std::move(fn)); }
  // Returns and clears the messages to send.
  std::vector<OutMessage> TakeOutbox();
  // Returns the earliest time Tick has work to do (next heartbeat or expiry).
  Clock::time_point NextDeadline(Clock::time_point now) const;

  size_t queued() const { return queue_.size(); }
  size_t leases() const { return leases_.size(); }
  WorkerRegistry& workers() { return workers_; }

 private:
  void Send(const std::string& identity, const char* command, const Json& body);
  void OnReady(const std::string& id, const Json& body, Clock::time_point now);
  void OnHeartbeat(WorkerInfo* w, const Json& body, Clock::time_point now);
  void OnAccept(WorkerInfo* w, const Json& body, Clock::time_point now);
  void OnReject(WorkerInfo* w, const Json& body);
  void OnMetrics(WorkerInfo* w, const std::string& body, Clock::time_point now);
  void OnArtifact(WorkerInfo* w, const Json& body, Clock::time_point now);
  void OnProvenance(WorkerInfo* w, const Json& body);
  void OnDone(WorkerInfo* w, const Json& body);
  void OnDisconnect(WorkerInfo* w);
  // liveness.cc: workers silent for kLiveness, leases not renewed, our heartbeats.
  void ExpireDeadWorkers(Clock::time_point now);
  void ExpireLeases(Clock::time_point now);
  void SendHeartbeats(Clock::time_point now);
  // The worker is gone: its attempts are lost (and requeued), the worker forgotten.
  void DropWorker(const std::string& id, const std::string& state, const std::string& why);
  // Releases the lease and slot of an ended attempt and applies the outcome.
  void AfterAttemptEnd(const AttemptRef& ref, const AttemptOutcome& o);
  // Renews the lease iff `w` holds `ref`.
  void Renew(WorkerInfo* w, const AttemptRef& ref, Clock::time_point now);
  void Ack(const std::string& id, const AttemptRef& ref, const char* what, int64_t seq);
  void FinishExperiments();
  // Puts runs parked waiting for a parent back into the queue (dispatch.cc).
  void UnparkAll();
  Json ChangesJson(const std::vector<RunChange>& changes, const char* verb);
  void ApplyCancel(const RunChange& c);

  // Constant after construction.
  Store* const store_;
  const std::string token_;

  WorkerRegistry workers_;
  LeaseTable leases_;
  Scheduler queue_;  // queued runs and where they go (scheduler.h)
  std::vector<int64_t> parked_;  // queued runs whose parent run has not finished
  std::vector<OutMessage> outbox_;
  std::vector<std::function<void()>> after_commit_;
  std::set<int64_t> finished_experiments_;  // to recompute paired_stats for
  Clock::time_point next_timer_{};          // next expiry scan / heartbeat round
};

}  // namespace headlab::coord
