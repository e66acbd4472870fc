// Worker message handlers, timers and dispatch. See core.h for the write-before-act rule.
#include "coordinator/core.h"

#include <algorithm>

#include "common/log.h"
#include "common/wire.h"
#include "coordinator/head_maps.h"
#include "coordinator/messages.h"
#include "coordinator/scheduler_lookup.h"
#include "coordinator/token.h"
#include "coordinator/worker_registry.h"

namespace headlab::coord {
namespace {

// Timer work (expiry scans, heartbeats) runs at most this often; dispatch runs every batch.
constexpr std::chrono::milliseconds kTimerPeriod{50};

}  // namespace

Core::Core(Store* store, std::string worker_token)
    : store_(store), worker_token_(std::move(worker_token)) {}

void Core::Recover(Clock::time_point now) {
  queue_.Clear();
  for (int64_t id : store_->QueuedRuns()) queue_.Push(id);
  int n = 0;
  for (const RunningAttempt& a : store_->RunningAttempts()) {
    leases_.Grant(a.ref, a.worker_id, a.devices, now);
    ++n;
  }
  if (n || !queue_.empty())
    LogInfo("recovered " + std::to_string(queue_.size()) + " queued runs and " + std::to_string(n) +
            " running attempts (leased for " + std::to_string(wire::kLiveness.count()) +
            " ms until their workers re-register)");
}

Status Core::BeginBatch() { return store_->Begin(); }

Status Core::CommitBatch() {
  Status st = store_->Commit();
  if (!st.ok()) {
    // Nothing of this batch happened: announce none of it.
    outbox_.clear();
    after_commit_.clear();
    return st;
  }
  std::vector<std::function<void()>> hooks;
  hooks.swap(after_commit_);
  for (auto& h : hooks) h();
  return Status::Ok();
}

std::vector<OutMessage> Core::TakeOutbox() {
  std::vector<OutMessage> out;
  out.swap(outbox_);
  return out;
}

void Core::Send(const std::string& route, const char* command, const Json& body) {
  outbox_.push_back({route, command, body.dump()});
}

void Core::ReplyUnauthenticated(const std::string& route, const char* command, const Json& body,
                                Clock::time_point now) {
  if (unauthenticated_replies_.Take(now)) Send(route, command, body);
}

void Core::Ack(const WorkerInfo& w, const AttemptRef& ref, const char* what, int64_t seq) {
  SendTo(w, wire::kAck, {{"run", ref.run}, {"attempt", ref.attempt}, {"what", what}, {"seq", seq}});
}

namespace {

bool IsWorkerCommand(const std::string& c) {
  for (const char* k :
       {wire::kReady, wire::kHeartbeat, wire::kAccept, wire::kReject, wire::kMetrics,
        wire::kArtifact, wire::kArtifactDeleted, wire::kProvenance, wire::kDone, wire::kDisconnect})
    if (c == k) return true;
  return false;
}

// The directory an attempt of a worker writes into (worker/attempt_manifest.h, AttemptOutDir).
std::string AttemptDir(const WorkerInfo& w, const AttemptRef& ref) {
  return w.work_dir + "/runs/" + std::to_string(ref.run) + "-" + std::to_string(ref.attempt);
}

}  // namespace

void Core::HandleMessage(const std::string& route, const std::string& command,
                         const std::string& auth, const std::string& body, Clock::time_point now) {
  if (!IsWorkerCommand(command)) {
    Drop("unknown command",
         "dropped unknown command '" + PrintableBytes(command) + "' from " + PrintableBytes(route),
         now);
    return;
  }
  if (command == wire::kReady) return OnReady(route, auth, body, now);
  // Cheap checks first: no body is read before its sender is known.
  WorkerInfo* w = auth.size() == wire::kSessionKeyChars ? workers_.FindBySession(auth) : nullptr;
  if (!w) {
    // E.g. after a coordinator restart: the worker must READY again (listing its attempts).
    Drop("unauthenticated",
         "dropped " + command + " from " + PrintableBytes(route) + ": no session has that key",
         now);
    if (command != wire::kDisconnect)
      ReplyUnauthenticated(route, wire::kReregister, Json::object(), now);
    return;
  }
  if (w->route != route) {
    // Its owner, proven by the key, continues on a new connection (a ZeroMQ reconnect).
    LogInfo("worker " + w->id + " continues on a new connection");
    workers_.SetRoute(w, route);
  }
  workers_.Touch(w, now);
  // METRICS is the bulk of the traffic: parsed straight into points, no JSON tree.
  if (command == wire::kMetrics) return OnMetrics(w, body, now);
  auto parsed = ParseBody(command, body);
  if (!parsed.ok()) {
    Drop("bad body", "dropped " + command + " from " + w->id + ": " + parsed.status().message(),
         now);
    return;
  }
  const Json& j = *parsed;
  if (command == wire::kHeartbeat) return OnHeartbeat(w, j, now);
  if (command == wire::kAccept) return OnAccept(w, j, now);
  if (command == wire::kReject) return OnReject(w, j, now);
  if (command == wire::kArtifact) return OnArtifact(w, j, now);
  if (command == wire::kArtifactDeleted) return OnArtifactDeleted(w, j, now);
  if (command == wire::kProvenance) return OnProvenance(w, j, now);
  if (command == wire::kDone) return OnDone(w, j, now);
  if (command == wire::kDisconnect) return OnDisconnect(w);
}

Core::Owner Core::OwnerOf(const WorkerInfo& w, const AttemptRef& ref) {
  if (const Lease* l = leases_.Find(ref))
    return l->worker_id == w.id ? Owner::kSelf : Owner::kOther;
  std::optional<std::string> holder = store_->AttemptWorker(ref);
  if (!holder) return Owner::kNone;
  return *holder == w.id ? Owner::kSelf : Owner::kOther;
}

bool Core::MayWrite(const WorkerInfo& w, const AttemptRef& ref, const char* command,
                    Clock::time_point now, bool* ack) {
  switch (OwnerOf(w, ref)) {
    case Owner::kSelf:
      *ack = true;
      return true;
    case Owner::kNone:
      // Nothing to store; acknowledged so that the worker stops resending it.
      Drop("unknown attempt",
           std::string(command) + " from " + w.id + " for unknown " + RefString(ref) +
               ": not stored",
           now);
      *ack = true;
      return false;
    case Owner::kOther:
      break;
  }
  Drop("foreign attempt",
       std::string(command) + " from " + w.id + " for " + RefString(ref) +
           ", which another worker holds: refused, nothing stored",
       now);
  *ack = false;
  return false;
}

void Core::OnReady(const std::string& route, const std::string& auth, const std::string& body,
                   Clock::time_point now) {
  // The token comes first and costs one comparison: a flood of READYs with a bad token is
  // never parsed, and is answered only within the rate limit.
  if (worker_token_.empty() || !TokenEquals(auth, worker_token_)) {
    Drop("bad token", "refused READY from " + PrintableBytes(route) + ": bad token", now);
    ReplyUnauthenticated(route, wire::kRefuse, {{"reason", "bad token"}}, now);
    return;
  }
  auto j = ParseBody(wire::kReady, body);
  auto m = j.ok() ? ParseReady(*j) : StatusOr<ReadyMsg>(j.status());
  if (m.ok() && m->version != wire::kProtocol)
    m = Status::InvalidArgument("READY.version \"" + PrintableBytes(m->version) +
                                "\": this coordinator speaks " + wire::kProtocol);
  if (!m.ok()) {
    Drop("bad READY", "refused worker on " + PrintableBytes(route) + ": " + m.status().message(),
         now);
    ReplyUnauthenticated(route, wire::kRefuse, {{"reason", m.status().message()}}, now);
    return;
  }
  WorkerInfo* old = workers_.Find(m->id);
  if (old && old->route != route &&
      !(m->session.size() == wire::kSessionKeyChars && TokenEquals(m->session, old->session))) {
    // The id is live on another connection: only its owner (who holds the session key)
    // may move it. Unanswered, a real worker retries READY after kLiveness, by when a
    // dead registration has expired.
    Drop("identity in use",
         "READY for worker " + m->id +
             " from another connection without its "
             "session key: ignored (the worker is registered and alive)",
         now);
    return;
  }
  // The same connection READYing again (its WELCOME was slow, or lost) keeps its key, so
  // that what it sent meanwhile still counts; any other registration gets a fresh one.
  StatusOr<std::string> session = old && old->route == route
                                      ? StatusOr<std::string>(old->session)
                                      : RandomHex(wire::kSessionKeyChars / 2);
  if (!session.ok()) {
    LogError("cannot make a session key: " + session.status().message());
    return;
  }
  bool known = old != nullptr;
  const std::string id = m->id;
  WorkerInfo& w = workers_.Register(route, *session, *m, now);
  Json row = {{"name", m->name},       {"host", m->host},   {"pid", m->pid},
              {"version", m->version}, {"slots", m->slots}, {"devices", m->devices}};
  Status st = store_->UpsertWorker(id, row);
  if (!st.ok()) LogError("worker row for " + id + ": " + st.message());
  int adopted = 0;
  for (const AttemptRef& ref : m->running) {
    Lease* l = leases_.Find(ref);
    if (l && l->worker_id == id) {
      leases_.Renew(ref, id, now);
      w.running[ref] = l->devices;
      ++adopted;
    } else {
      // Lost and requeued, unknown, or another worker's, while the worker was away: its
      // result will not be used.
      SendTo(w, wire::kCancel, RefJson(ref));
      // Until the worker's DONE for it (or a HEARTBEAT without it) its devices stay busy:
      // offered to another run now, they would be REJECTed as "no free slot".
      if (auto devices = AttemptDevices(store_->db(), ref)) w.running[ref] = *devices;
    }
  }
  SendTo(w, wire::kWelcome,
         {{"worker_id", id},
          {"heartbeat_ms", wire::kHeartbeatInterval.count()},
          {"session", *session}});
  LogInfo(std::string(known ? "re-registered" : "registered") + " worker " + id + " (" + m->host +
          ", " + std::to_string(w.Capacity()) + " slots, " +
          std::to_string(m->cuda_devices.size()) + " GPUs, " + std::to_string(adopted) +
          " running attempts adopted)");
}

void Core::Renew(WorkerInfo* w, const AttemptRef& ref, Clock::time_point now) {
  leases_.Renew(ref, w->id, now);
}

void Core::OnHeartbeat(WorkerInfo* w, const Json& body, Clock::time_point now) {
  auto refs = ParseHeartbeat(body);
  if (!refs.ok()) {
    Drop("bad body", "dropped HEARTBEAT from " + w->id + ": " + refs.status().message(), now);
    return;
  }
  for (const AttemptRef& ref : *refs) {
    if (!leases_.Renew(ref, w->id, now)) SendTo(*w, wire::kCancel, RefJson(ref));
  }
  // An attempt kept only for its devices (cancelled at READY, or REJECTed as busy) is gone
  // once the worker stops naming it.
  for (auto it = w->running.begin(); it != w->running.end();) {
    Lease* l = leases_.Find(it->first);
    bool held = (l && l->worker_id == w->id) ||
                std::find(refs->begin(), refs->end(), it->first) != refs->end();
    it = held ? std::next(it) : w->running.erase(it);
  }
}

void Core::OnAccept(WorkerInfo* w, const Json& body, Clock::time_point now) {
  auto m = ParseAccept(body);
  if (!m.ok()) {
    Drop("bad body", "dropped ACCEPT from " + w->id + ": " + m.status().message(), now);
    return;
  }
  if (!leases_.Renew(m->ref, w->id, now)) {
    Drop("foreign attempt",
         "ACCEPT from " + w->id + " for " + RefString(m->ref) + " it does not hold; cancelling",
         now);
    SendTo(*w, wire::kCancel, RefJson(m->ref));
    return;
  }
  Status st = store_->MarkAccepted(m->ref, m->resume);
  if (!st.ok()) LogError("ACCEPT " + RefString(m->ref) + ": " + st.message());
}

void Core::OnReject(WorkerInfo* w, const Json& body, Clock::time_point now) {
  auto m = ParseReject(body);
  if (!m.ok()) {
    Drop("bad body", "dropped REJECT from " + w->id + ": " + m.status().message(), now);
    return;
  }
  Lease* l = leases_.Find(m->ref);
  if (!l || l->worker_id != w->id) {
    Drop("foreign attempt",
         "REJECT from " + w->id + " for " + RefString(m->ref) + " it does not hold; ignored", now);
    return;
  }
  std::vector<int> devices = l->devices;
  AttemptOutcome o =
      store_->RejectAttempt(m->ref, "rejected by " + w->id + ": " + m->reason, m->busy);
  LogInfo("worker " + w->id + " rejected " + RefString(m->ref) + ": " + m->reason +
          (m->busy ? " (busy: requeued, not counted toward max_attempts)" : ""));
  AfterAttemptEnd(m->ref, o);
  // A busy worker has less room than we thought: its slot stays taken until its next
  // HEARTBEAT says what runs there, so the run is not offered straight back to it.
  if (m->busy) w->running[m->ref] = devices;
}

void Core::OnMetrics(WorkerInfo* w, const std::string& body, Clock::time_point now) {
  auto m = ParseMetricsText(body);
  if (!m.ok()) {
    Drop("bad body", "dropped METRICS from " + w->id + ": " + m.status().message(), now);
    return;
  }
  bool ack = false;
  if (MayWrite(*w, m->ref, wire::kMetrics, now, &ack)) {
    Status st = store_->InsertMetrics(m->ref, m->points);
    if (!st.ok()) LogWarn("METRICS from " + w->id + " not stored: " + st.message());
    Renew(w, m->ref, now);
    // A random search's stopping rule: the run and its pair are cancelled with the reason.
    bool stopped = false;
    for (const auto& [run, why] : early_stop_.Check(store_->db(), m->ref, m->points)) {
      auto c = store_->CancelRun(run, why);
      if (!c.ok()) continue;
      ApplyCancel(*c);
      stopped = true;
    }
    if (stopped) UnparkAll();
  }
  if (ack) Ack(*w, m->ref, wire::kMetrics, m->max_seq);
}

void Core::OnArtifact(WorkerInfo* w, const Json& body, Clock::time_point now) {
  auto m = ParseArtifact(body);
  if (!m.ok()) {
    Drop("bad body", "dropped ARTIFACT from " + w->id + ": " + m.status().message(), now);
    return;
  }
  bool ack = false;
  if (MayWrite(*w, m->ref, wire::kArtifact, now, &ack)) {
    const std::string dir = AttemptDir(*w, m->ref);
    Status st;
    if (!PathInside(m->path, dir)) {
      st = Status::PermissionDenied("path " + m->path + " is outside the attempt's directory " +
                                    dir);
    } else {
      st = store_->InsertArtifact(m->ref, m->seq, m->kind, m->path, m->sha256, m->bytes, m->step);
    }
    if (!st.ok())
      Drop("bad artifact", "ARTIFACT from " + w->id + " not stored: " + st.message(), now);
    if (st.ok() && IsHeadMapKind(m->kind)) {
      // The only file the coordinator reads on a worker's word: it must still be inside
      // the attempt's directory once symbolic links are resolved.
      auto rows = ResolvesInside(m->path, dir)
                      ? LoadHeadMapArtifact(m->path, m->sha256)
                      : StatusOr<std::vector<HeadMapRow>>(
                            Status::PermissionDenied(m->path + " resolves outside " + dir));
      if (rows.ok()) st = store_->InsertHeadMaps(m->ref, *rows);
      Status hm = rows.ok() ? st : rows.status();
      if (!hm.ok()) LogWarn("head map of " + RefString(m->ref) + " not stored: " + hm.message());
    }
    Renew(w, m->ref, now);
  }
  if (ack) Ack(*w, m->ref, wire::kArtifact, m->seq);
}

void Core::OnArtifactDeleted(WorkerInfo* w, const Json& body, Clock::time_point now) {
  auto m = ParseArtifactDeleted(body);
  if (!m.ok()) {
    Drop("bad body", "dropped ARTIFACT_DELETED from " + w->id + ": " + m.status().message(), now);
    return;
  }
  bool ack = false;
  if (MayWrite(*w, m->ref, wire::kArtifactDeleted, now, &ack)) {
    Status st = store_->MarkArtifactDeleted(m->ref, m->seq, m->path);
    if (!st.ok())
      Drop("bad artifact", "ARTIFACT_DELETED from " + w->id + " not stored: " + st.message(), now);
    Renew(w, m->ref, now);
  }
  if (ack) Ack(*w, m->ref, wire::kArtifactDeleted, m->seq);
}

void Core::OnProvenance(WorkerInfo* w, const Json& body, Clock::time_point now) {
  auto ref = ParseProvenance(body);
  if (!ref.ok()) {
    Drop("bad body", "dropped PROVENANCE from " + w->id + ": " + ref.status().message(), now);
    return;
  }
  bool ack = false;
  if (MayWrite(*w, *ref, wire::kProvenance, now, &ack)) {
    Status st = store_->UpsertProvenance(*ref, body["fields"]);
    if (!st.ok()) LogWarn("PROVENANCE from " + w->id + " not stored: " + st.message());
  }
  if (ack) Ack(*w, *ref, wire::kProvenance, 0);
}

void Core::OnDone(WorkerInfo* w, const Json& body, Clock::time_point now) {
  auto m = ParseDone(body);
  if (!m.ok()) {
    Drop("bad body", "dropped DONE from " + w->id + ": " + m.status().message(), now);
    return;
  }
  bool ack = false;
  if (MayWrite(*w, m->ref, wire::kDone, now, &ack)) {
    AttemptOutcome o = store_->FinishAttempt(m->ref, m->status, m->exit_code, m->error,
                                             m->stderr_tail, m->summary);
    if (o.changed) {
      LogInfo(RefString(m->ref) + " " + m->status + " on " + w->id +
              (o.run_finished ? "" : " (not the run's current attempt; result not used)"));
      AfterAttemptEnd(m->ref, o);
    }
    // The worker is done with it whatever we thought: free its slot.
    w->running.erase(m->ref);
    Lease* l = leases_.Find(m->ref);
    if (l && l->worker_id == w->id) leases_.Release(m->ref);
  }
  if (ack) Ack(*w, m->ref, wire::kDone, 0);
}

void Core::OnDisconnect(WorkerInfo* w) {
  std::string id = w->id;
  DropWorker(id, "gone", "worker " + id + " disconnected");
}

void Core::AfterAttemptEnd(const AttemptRef& ref, const AttemptOutcome& o) {
  if (Lease* l = leases_.Find(ref)) {
    workers_.ReleaseAttempt(l->worker_id, ref);
    leases_.Release(ref);
  }
  if (o.requeued) queue_.Push(ref.run);
  if (o.run_finished || o.changed) finished_experiments_.insert(o.experiment_id);
  if (o.run_finished) UnparkAll();  // a parent may have finished
}

void Core::Tick(Clock::time_point now, bool input_pending) {
  // Messages still waiting in the socket may be the very heartbeats that keep workers and
  // leases alive (a backlog after a slow batch, or a burst): expiries wait until the loop
  // has caught up, but never longer than one more liveness window.
  if (!input_pending)
    backlog_since_ = Clock::time_point{};
  else if (backlog_since_ == Clock::time_point{})
    backlog_since_ = now;
  if (now >= next_timer_) {
    next_timer_ = now + kTimerPeriod;
    if (!input_pending || now - backlog_since_ >= wire::kLiveness) {
      ExpireDeadWorkers(now);  // liveness.cc
      ExpireLeases(now);       // liveness.cc
    }
    SendHeartbeats(now);  // liveness.cc
    throttle_.Flush(now);
  }
  Dispatch(now);  // dispatch.cc
  FinishExperiments();
}

void Core::FinishExperiments() {
  for (int64_t exp : finished_experiments_) {
    if (!exp || !store_->ExperimentFinished(exp)) continue;
    if (finished_sink_) {
      // Computed off the loop from the committed state: hand it over after the commit.
      AfterCommit([sink = finished_sink_, exp] { sink(exp); });
      continue;
    }
    if (HasCurrentResults(store_->db(), exp)) continue;
    auto res = ComputeResultsAt(store_->db(), exp);  // the batch is the snapshot
    if (res.ok())
      StoreResultsOf(*res);
    else
      LogError("paired stats of experiment " + std::to_string(exp) + ": " + res.status().message());
  }
  finished_experiments_.clear();
}

void Core::StoreResultsOf(const ComputedResults& results) {
  auto stored = StoreResults(store_->db(), results);
  if (!stored.ok())
    LogError("results of experiment " + std::to_string(results.experiment) + ": " +
             stored.status().message());
}

SubmitState Core::PlanSubmission(Grid grid, std::vector<std::string> sets, bool rerun) {
  SubmitState s;
  s.runs = PlanRuns(std::move(grid.runs));
  grid.runs.clear();
  s.meta = std::move(grid);
  s.sets = std::move(sets);
  s.rerun = rerun;
  return s;
}

std::optional<StatusOr<SubmitResult>> Core::SubmitStep(SubmitState* s, Clock::time_point deadline) {
  auto fail = [&](const Status& st) -> std::optional<StatusOr<SubmitResult>> {
    // Earlier steps are committed: take them back (a crash instead leaves it to Store::Open).
    if (s->result.experiment_id) {
      Status del = store_->DeleteExperiment(s->result.experiment_id);
      if (!del.ok()) LogError("cannot delete the unfinished experiment: " + del.message());
    }
    return StatusOr<SubmitResult>(st);
  };
  if (!s->stored) {
    if (s->result.experiment_id == 0) {
      auto id = store_->InsertExperimentRow(s->meta, s->sets, s->rerun);
      if (!id.ok()) return fail(id.status());
      s->result.experiment_id = *id;
    }
    auto next =
        store_->InsertRuns(s->runs, s->next, s->meta.max_attempts, s->rerun, deadline, &s->result);
    if (!next.ok()) return fail(next.status());
    s->next = *next;
    if (s->next < s->runs.size()) return std::nullopt;
    Status st = store_->FinishSubmission(s->meta, s->sets, s->rerun, s->result);
    if (!st.ok()) return fail(st);
    s->stored = true;
    std::vector<PlannedRun>().swap(s->runs);  // the configs are in the database now
    if (s->result.queued.empty()) finished_experiments_.insert(s->result.experiment_id);
    LogInfo("experiment " + std::to_string(s->result.experiment_id) + " (" + s->meta.name +
            "): " + std::to_string(s->result.runs) + " runs, " + std::to_string(s->result.reused) +
            " reused");
  }
  // The experiment is complete (a restart would queue its runs from the database): its
  // runs go to the scheduler in slices too, dispatch starting on the first ones.
  for (size_t n = 0; s->queued < s->result.queued.size(); ++n) {
    if (n % 1024 == 1023 && Clock::now() >= deadline) return std::nullopt;
    queue_.Push(s->result.queued[s->queued++]);
  }
  return StatusOr<SubmitResult>(s->result);
}

StatusOr<SubmitResult> Core::Submit(const Grid& grid, const std::vector<std::string>& sets,
                                    bool rerun) {
  SubmitState s = PlanSubmission(grid, sets, rerun);
  for (;;)
    if (auto done = SubmitStep(&s, Clock::time_point::max())) return *done;
}

void Core::ApplyCancel(const RunChange& c) {
  queue_.Remove(c.run);
  if (c.running)
    if (const WorkerInfo* w = workers_.Find(c.worker_id))
      SendTo(*w, wire::kCancel, RefJson(*c.running));
  finished_experiments_.insert(c.experiment_id);
}

StatusOr<Json> Core::CancelRun(int64_t run) {
  auto c = store_->CancelRun(run);
  if (!c.ok()) return c.status();
  ApplyCancel(*c);
  UnparkAll();  // children of a cancelled parent fail at their next dispatch
  return Json{{"run", run}, {"was", c->old_status}, {"status", "cancelled"}};
}

std::optional<StatusOr<Json>> Core::CancelExperimentStep(CancelState* s,
                                                         Clock::time_point deadline) {
  // Chunks of kCancelChunk runs until the deadline: each run is a few statements.
  constexpr int kCancelChunk = 128;
  for (;;) {
    auto chunk = store_->CancelExperimentRuns(s->experiment, &s->cursor, kCancelChunk);
    if (!chunk.ok()) return StatusOr<Json>(chunk.status());
    for (const RunChange& c : *chunk) {
      ApplyCancel(c);
      s->cancelled.push_back({{"run", c.run}, {"was", c.old_status}});
    }
    if (!chunk->empty()) UnparkAll();  // children of a cancelled parent fail at their next dispatch
    if (chunk->size() < size_t(kCancelChunk)) break;
    if (Clock::now() >= deadline) return std::nullopt;
  }
  finished_experiments_.insert(s->experiment);
  size_t count = s->cancelled.size();
  return StatusOr<Json>(Json{
      {"experiment", s->experiment}, {"cancelled", std::move(s->cancelled)}, {"count", count}});
}

StatusOr<Json> Core::CancelExperiment(int64_t experiment) {
  CancelState s;
  s.experiment = experiment;
  for (;;)
    if (auto done = CancelExperimentStep(&s, Clock::time_point::max())) return *done;
}

StatusOr<Json> Core::RetryRun(int64_t run) {
  auto c = store_->RetryRun(run);
  if (!c.ok()) return c.status();
  queue_.Push(run);
  return Json{{"run", run}, {"was", c->old_status}, {"status", "queued"}};
}

Json Core::WorkersJson(Clock::time_point now) {
  Json out = Json::array();
  for (const auto& [id, w] : workers_.all()) {
    Json running = Json::array();
    for (const auto& [ref, devs] : w.running) running.push_back(RefJson(ref));
    double age = std::chrono::duration<double>(now - w.last_heard).count();
    out.push_back({{"id", id},
                   {"name", w.name},
                   {"host", w.host},
                   {"pid", w.pid},
                   {"version", w.version},
                   {"devices", w.devices},
                   {"slots", w.Capacity()},
                   {"free_slots", w.FreeSlots()},
                   {"last_heartbeat_age_s", age},
                   {"state", "alive"},
                   {"running", running}});
  }
  return out;
}

Clock::time_point Core::NextDeadline(Clock::time_point now) const {
  return std::max(now, next_timer_);
}

}  // namespace headlab::coord
