// The coordinator's state machine: worker messages in, state changes written to the Store,
// replies (ASSIGN, ACK, ...) out. Owned and called only by the loop thread (router.h).
//
// Trust (schema/protocol.md, Sessions): READY must carry the token; its WELCOME issues a
// random session key that every later message of that worker must carry, so a peer
// without the key can neither speak for a worker nor take its identity over. A message
// that writes (ACCEPT, REJECT, METRICS, ARTIFACT, PROVENANCE, DONE) is applied only to an
// attempt its sender owns. Input a peer controls is logged through a LogThrottle and
// answered, when unauthenticated, only within a RateLimiter.
//
// Write-before-act: every handler writes through the Store inside the current batch's
// transaction and only appends replies to the outbox; the router sends the outbox after
// Commit. So a reply never announces a state the database does not have, and a kill -9
// at any point restarts from a state the workers were told about or will be told again.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/grid.h"
#include "common/json.h"
#include "common/log_throttle.h"
#include "common/status.h"
#include "coordinator/early_stop.h"
#include "coordinator/lease_table.h"
#include "coordinator/rate_limiter.h"
#include "coordinator/results_store.h"
#include "coordinator/scheduler.h"
#include "coordinator/store.h"
#include "coordinator/worker_registry.h"

namespace headlab::coord {

// A submission in progress (Core::SubmitStep): the grid without its runs, and the runs
// with their configs serialised.
struct SubmitState {
  Grid meta;
  std::vector<std::string> sets;
  bool rerun = false;
  std::vector<PlannedRun> runs;
  size_t next = 0;      // runs[next...] are still to insert
  size_t queued = 0;    // result.queued[queued...] are still to hand to the scheduler
  bool stored = false;  // every run is stored and the experiment complete
  SubmitResult result;  // experiment_id 0 until the experiment row exists
};

// A cancel of an experiment in progress (Core::CancelExperimentStep).
struct CancelState {
  int64_t experiment = 0;
  Store::CancelCursor cursor;
  Json cancelled = Json::array();  // [{run, was}] so far
};

// A message for one connection: [identity, "HLW2", command, body].
struct OutMessage {
  std::string identity;  // ZeroMQ routing identity (WorkerInfo::route)
  std::string command;
  std::string body;
};

class Core {
 public:
  // `store` must be open and outlive the Core; `worker_token` (the workers' own, never the
  // user's: a worker host must not hold what writes as a user) authenticates READY.
  Core(Store* store, std::string worker_token);

  // Loads the queue and gives every running attempt a fresh lease (restart recovery).
  void Recover(Clock::time_point now);

  // Batch lifecycle. Handlers may only be called between BeginBatch and CommitBatch.
  Status BeginBatch();
  // Commits; on success the outbox may be sent and after-commit hooks have run.
  Status CommitBatch();

  // Handles one message from connection `route`: `auth` is the token (READY) or a session
  // key (every other command). Unauthenticated, foreign and bad messages are logged
  // (throttled) and dropped; nothing of them is stored.
  void HandleMessage(const std::string& route, const std::string& command, const std::string& auth,
                     const std::string& body, Clock::time_point now);
  // Timers: worker and lease expiry, heartbeats, dispatch, finished experiments' stats.
  // `input_pending`: the batch stopped at its bound with messages still waiting; expiries
  // are then held back (at most kLiveness), since those messages may renew what expires.
  void Tick(Clock::time_point now, bool input_pending = false);
  // Assigns queued runs to workers with free capacity (dispatch.cc, scheduler.h).
  void Dispatch(Clock::time_point now);

  // --- User requests (HTTP), run inside a batch ---
  // Large ones go in steps, one per batch (router.h, SteppedRequest), so that no batch
  // holds the loop for long: a 100,000-run grid is tens of steps, not one of seconds.
  // Returns the state of a submission; callable on any thread (it serialises the configs).
  static SubmitState PlanSubmission(Grid grid, std::vector<std::string> sets, bool rerun);
  // Stores what fits before `deadline` (the experiment row, then runs); returns the result
  // once all are stored, when they are queued. An experiment is complete only with its
  // last step (Store::FinishSubmission): one a crash interrupted is deleted on restart.
  std::optional<StatusOr<SubmitResult>> SubmitStep(SubmitState* s, Clock::time_point deadline);
  // The whole submission at once (small grids, tests).
  StatusOr<SubmitResult> Submit(const Grid& grid, const std::vector<std::string>& sets, bool rerun);
  StatusOr<Json> CancelRun(int64_t run);
  // Cancels the experiment's queued and running runs in id order until `deadline`;
  // returns the answer once none is left (each step's cancels are final on their own).
  std::optional<StatusOr<Json>> CancelExperimentStep(CancelState* s, Clock::time_point deadline);
  StatusOr<Json> CancelExperiment(int64_t experiment);
  StatusOr<Json> RetryRun(int64_t run);
  // [{id,name,host,devices,last_heartbeat_age_s,state,running,slots}] (schema/http_api.md).
  Json WorkersJson(Clock::time_point now);

  // Where finished experiments' results and paired statistics are computed: without a
  // sink here, on the loop thread (tests); the server hands them (after the commit) to a
  // PairedStatsWorker, which reads the experiment off the loop and calls StoreResultsOf
  // through it.
  void SetFinishedSink(std::function<void(int64_t experiment)> sink) {
    finished_sink_ = std::move(sink);
  }
  // Stores an experiment's results and paired statistics (results_store.h StoreResults:
  // only if nothing they were computed from has changed since).
  void StoreResultsOf(const ComputedResults& results);

  // Runs `fn` after the current batch commits (e.g. to answer an HTTP request).
  void AfterCommit(std::function<void()> fn) { after_commit_.push_back(std::move(fn)); }
  // Returns and clears the messages to send.
  std::vector<OutMessage> TakeOutbox();
  // Returns the earliest time Tick has work to do (next heartbeat or expiry).
  Clock::time_point NextDeadline(Clock::time_point now) const;

  size_t queued() const { return queue_.size(); }
  size_t leases() const { return leases_.size(); }
  WorkerRegistry& workers() { return workers_; }
  // Log lines written and suppressed about peers' bad input (throttled).
  const LogThrottle& throttle() const { return throttle_; }
  // The store, for user writes that need no state machine (tags and notes, annotations.h).
  Store* store() { return store_; }

 private:
  // Who holds an attempt, as seen from a worker writing to it.
  enum class Owner { kSelf, kOther, kNone };

  void Send(const std::string& route, const char* command, const Json& body);
  void SendTo(const WorkerInfo& w, const char* command, const Json& body) {
    Send(w.route, command, body);
  }
  // Answers a peer that has not authenticated, within unauthenticated_replies_.
  void ReplyUnauthenticated(const std::string& route, const char* command, const Json& body,
                            Clock::time_point now);
  // A throttled warning about a peer's input.
  void Drop(const char* category, const std::string& msg, Clock::time_point now) {
    throttle_.Warn(category, msg, now);
  }
  // Returns whether `w` owns `ref` (its lease, else the attempt row's worker).
  Owner OwnerOf(const WorkerInfo& w, const AttemptRef& ref);
  // Returns true iff `w` may write to `ref`: logs (throttled) a write to another
  // worker's attempt. `*ack` is set iff the worker should still get an ACK (unknown
  // attempt: nothing to store, but the worker may forget it).
  bool MayWrite(const WorkerInfo& w, const AttemptRef& ref, const char* command,
                Clock::time_point now, bool* ack);
  void OnReady(const std::string& route, const std::string& auth, const std::string& body,
               Clock::time_point now);
  void OnHeartbeat(WorkerInfo* w, const Json& body, Clock::time_point now);
  void OnAccept(WorkerInfo* w, const Json& body, Clock::time_point now);
  void OnReject(WorkerInfo* w, const Json& body, Clock::time_point now);
  void OnMetrics(WorkerInfo* w, const std::string& body, Clock::time_point now);
  void OnArtifact(WorkerInfo* w, const Json& body, Clock::time_point now);
  void OnArtifactDeleted(WorkerInfo* w, const Json& body, Clock::time_point now);
  void OnProvenance(WorkerInfo* w, const Json& body, Clock::time_point now);
  void OnDone(WorkerInfo* w, const Json& body, Clock::time_point now);
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
  void Ack(const WorkerInfo& w, const AttemptRef& ref, const char* what, int64_t seq);
  void FinishExperiments();
  // Puts runs parked waiting for a parent back into the queue (dispatch.cc).
  void UnparkAll();
  // Dispatch's checks of one placement (dispatch.cc), in order. Each returns true to go
  // on, or false once it has dealt with the placement itself: handed it back to the
  // queue, parked the run, failed it or re-pinned it.
  struct Candidate;
  bool StillQueued(Candidate* c);      // loads the run; false if no longer queued
  bool ParentReady(Candidate* c);      // parent.run / parent.experiment (parent.h)
  bool TimeBudgetReady(Candidate* c);  // time_match.* (time_match.h)
  bool PairLegReady(Candidate* c, std::set<int64_t>* repinned);  // pair.* (pair_legs.h)
  // Writes the attempt and queues its ASSIGN; false when the store refused (the run is
  // requeued and the pass should stop).
  bool StartAttempt(const Candidate& c, Clock::time_point now);
  void ApplyCancel(const RunChange& c);

  // Constant after construction.
  Store* const store_;
  const std::string worker_token_;

  WorkerRegistry workers_;
  LeaseTable leases_;
  Scheduler queue_;              // queued runs and where they go (scheduler.h)
  std::vector<int64_t> parked_;  // queued runs whose parent run has not finished
  std::vector<OutMessage> outbox_;
  std::vector<std::function<void()>> after_commit_;
  std::set<int64_t> finished_experiments_;  // to recompute paired_stats for
  std::function<void(int64_t)> finished_sink_;
  Clock::time_point next_timer_{};     // next expiry scan / heartbeat round
  Clock::time_point backlog_since_{};  // input pending at every tick since (or {})
  LogThrottle throttle_;               // warnings about peers' input
  EarlyStopper early_stop_;            // random search's stopping rule (early_stop.h)
  RateLimiter unauthenticated_replies_{/*per_second=*/50, /*burst=*/100};
};

}  // namespace headlab::coord
