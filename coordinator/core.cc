// Worker message handlers, timers and dispatch. See core.h for the write-before-act rule.
#include "coordinator/core.h"

#include <algorithm>

#include "common/log.h"
#include "common/wire.h"
#include "coordinator/head_maps.h"
#include "coordinator/messages.h"
#include "coordinator/results.h"
#include "coordinator/scheduler_lookup.h"
#include "coordinator/token.h"

namespace headlab::coord {
namespace {

// Timer work (expiry scans, heartbeats) runs at most this often; dispatch runs every batch.
constexpr std::chrono::milliseconds kTimerPeriod{50};


}  // namespace

Core::Core(Store* store, std::string token) : store_(store), token_(std::move(token)) {}

void Core::Recover(Clock::time_point now) {
  queue_.Clear();
  for (int64_t id : store_->QueuedRuns()) queue_.Push(id);
  int n = 0;
  for (const RunningAttempt& a : store_->RunningAttempts()) {
    leases_.Grant(a.ref, a.worker_id, a.devices, now);
    ++n;
  }
  if (n || !queue_.empty())
    LogInfo("recovered " + std::to_string(queue_.size()) + " queued runs and " +
            std::to_string(n) + " running attempts (leased for " +
            std::to_string(wire::kLiveness.count()) + " ms until their workers re-register)");
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

void Core::Send(const std::string& identity, const char* command, const Json& body) {
  outbox_.push_back({identity, command, body.dump()});
}

void Core::Ack(const std::string& id, const AttemptRef& ref, const char* what, int64_t seq) {
  Send(id, wire::kAck, {{"run", ref.run}, {"attempt", ref.attempt}, {"what", what}, {"seq", seq}});
}

void Core::HandleMessage(const std::string& identity, const std::string& command,
                         const std::string& body, Clock::time_point now) {
  WorkerInfo* w = workers_.Find(identity);
  if (!w && command != wire::kReady) {
    // E.g. after a coordinator restart: the worker must READY again (listing its attempts).
    if (command != wire::kDisconnect) Send(identity, wire::kReregister, Json::object());
    return;
  }
  if (w) workers_.Touch(w, now);
  // METRICS is the bulk of the traffic: parsed straight into points, no JSON tree.
  if (command == wire::kMetrics) return OnMetrics(w, body, now);
  auto parsed = ParseJson(body, "HLW1 " + command + " body from " + identity);
  if (!parsed.ok()) {
    LogWarn("dropped message: " + parsed.status().message());
    return;
  }
  const Json& j = *parsed;
  if (!j.is_object()) {
    LogWarn("dropped " + command + " from " + identity + ": body is not a JSON object");
    return;
  }
  if (command == wire::kReady) return OnReady(identity, j, now);
  if (command == wire::kHeartbeat) return OnHeartbeat(w, j, now);
  if (command == wire::kAccept) return OnAccept(w, j, now);
  if (command == wire::kReject) return OnReject(w, j);
  if (command == wire::kArtifact) return OnArtifact(w, j, now);
  if (command == wire::kProvenance) return OnProvenance(w, j);
  if (command == wire::kDone) return OnDone(w, j);
  if (command == wire::kDisconnect) return OnDisconnect(w);
  LogWarn("dropped unknown command '" + command + "' from " + identity);
}

void Core::OnReady(const std::string& id, const Json& body, Clock::time_point now) {
  auto tok = body.find("token");
  if (tok == body.end() || !tok->is_string() || !TokenEquals(tok->get<std::string>(), token_)) {
    LogWarn("refused worker " + id + ": bad token");
    Send(id, wire::kRefuse, {{"reason", "bad token"}});
    return;
  }
  auto m = ParseReady(body);
  if (!m.ok()) {
    LogWarn("refused worker " + id + ": " + m.status().message());
    Send(id, wire::kRefuse, {{"reason", m.status().message()}});
    return;
  }
  bool known = workers_.Find(id) != nullptr;
  WorkerInfo& w = workers_.Register(id, *m, now);
  Json stored = body;
  stored.erase("token");
  Status st = store_->UpsertWorker(id, stored);
  if (!st.ok()) LogError("worker row for " + id + ": " + st.message());
  int adopted = 0;
  for (const AttemptRef& ref : m->running) {
    Lease* l = leases_.Find(ref);
    if (l && (l->worker_id == id || !workers_.Find(l->worker_id))) {
      l->worker_id = id;
      leases_.Renew(ref, id, now);
      w.running[ref] = l->devices;
      ++adopted;
    } else {
      // Lost and requeued (or unknown) while the worker was away: its result will not be used.
      Send(id, wire::kCancel, RefJson(ref));
      // Until the worker's DONE for it (or a HEARTBEAT without it) its devices stay busy:
      // offered to another run now, they would be REJECTed as "no free slot".
      if (auto devices = AttemptDevices(store_->db(), ref)) w.running[ref] = *devices;
    }
  }
  Send(id, wire::kWelcome, {{"worker_id", id}, {"heartbeat_ms", wire::kHeartbeatInterval.count()}});
  LogInfo(std::string(known ? "re-registered" : "registered") + " worker " + id + " (" +
          m->host + ", " + std::to_string(w.Capacity()) + " slots, " +
          std::to_string(m->cuda_devices.size()) + " GPUs, " + std::to_string(adopted) +
          " running attempts adopted)");
}

void Core::Renew(WorkerInfo* w, const AttemptRef& ref, Clock::time_point now) {
  leases_.Renew(ref, w->id, now);
}

void Core::OnHeartbeat(WorkerInfo* w, const Json& body, Clock::time_point now) {
  auto refs = ParseHeartbeat(body);
  if (!refs.ok()) {
    LogWarn("dropped HEARTBEAT from " + w->id + ": " + refs.status().message());
    return;
  }
  for (const AttemptRef& ref : *refs) {
    if (!leases_.Renew(ref, w->id, now)) Send(w->id, wire::kCancel, RefJson(ref));
  }
  // An attempt kept only for its devices (cancelled at READY) is gone once the worker
  // stops naming it.
  for (auto it = w->running.begin(); it != w->running.end();) {
    Lease* l = leases_.Find(it->first);
    bool held = (l && l->worker_id == w->id) ||
                std::find(refs->begin(), refs->end(), it->first) != refs->end();
    it = held ? std::next(it) : w->running.erase(it);
  }
}

void Core::OnAccept(WorkerInfo* w, const Json& body, Clock::time_point now) {
  auto ref = ParseRef(body, wire::kAccept);
  if (!ref.ok()) {
    LogWarn("dropped ACCEPT from " + w->id + ": " + ref.status().message());
    return;
  }
  if (!leases_.Renew(*ref, w->id, now)) {
    LogWarn("ACCEPT from " + w->id + " for " + RefString(*ref) + " it does not hold; cancelling");
    Send(w->id, wire::kCancel, RefJson(*ref));
    return;
  }
  Status st = store_->MarkAccepted(*ref);
  if (!st.ok()) LogError("ACCEPT " + RefString(*ref) + ": " + st.message());
}

void Core::OnReject(WorkerInfo* w, const Json& body) {
  auto m = ParseReject(body);
  if (!m.ok()) {
    LogWarn("dropped REJECT from " + w->id + ": " + m.status().message());
    return;
  }
  Lease* l = leases_.Find(m->ref);
  if (!l || l->worker_id != w->id) {
    LogWarn("REJECT from " + w->id + " for " + RefString(m->ref) + " it does not hold; ignored");
    return;
  }
  AttemptOutcome o = store_->RejectAttempt(m->ref, "rejected by " + w->id + ": " + m->reason);
  LogInfo("worker " + w->id + " rejected " + RefString(m->ref) + ": " + m->reason);
  AfterAttemptEnd(m->ref, o);
}

void Core::OnMetrics(WorkerInfo* w, const std::string& body, Clock::time_point now) {
  auto m = ParseMetricsText(body);
  if (!m.ok()) {
    LogWarn("dropped METRICS from " + w->id + ": " + m.status().message());
    return;
  }
  Status st = store_->CheckAttempt(m->ref);
  if (st.ok()) st = store_->InsertMetrics(m->ref, m->points);
  // Unknown attempts are acknowledged too, so the worker stops resending them.
  if (!st.ok()) LogWarn("METRICS from " + w->id + " not stored: " + st.message());
  Renew(w, m->ref, now);
  Ack(w->id, m->ref, wire::kMetrics, m->max_seq);
}

void Core::OnArtifact(WorkerInfo* w, const Json& body, Clock::time_point now) {
  auto m = ParseArtifact(body);
  if (!m.ok()) {
    LogWarn("dropped ARTIFACT from " + w->id + ": " + m.status().message());
    return;
  }
  Status st = store_->CheckAttempt(m->ref);
  if (st.ok())
    st = store_->InsertArtifact(m->ref, m->seq, m->kind, m->path, m->sha256, m->bytes, m->step);
  if (!st.ok()) LogWarn("ARTIFACT from " + w->id + " not stored: " + st.message());
  if (st.ok() && IsHeadMapKind(m->kind)) {
    auto rows = LoadHeadMapArtifact(m->path, m->sha256);
    if (rows.ok()) st = store_->InsertHeadMaps(m->ref, *rows);
    Status hm = rows.ok() ? st : rows.status();
    if (!hm.ok()) LogWarn("head map of " + RefString(m->ref) + " not stored: " + hm.message());
  }
  Renew(w, m->ref, now);
  Ack(w->id, m->ref, wire::kArtifact, m->seq);
}

void Core::OnProvenance(WorkerInfo* w, const Json& body) {
  auto ref = ParseProvenance(body);
  if (!ref.ok()) {
    LogWarn("dropped PROVENANCE from " + w->id + ": " + ref.status().message());
    return;
  }
  Status st = store_->CheckAttempt(*ref);
  if (st.ok()) st = store_->UpsertProvenance(*ref, body["fields"]);
  if (!st.ok()) LogWarn("PROVENANCE from " + w->id + " not stored: " + st.message());
  Ack(w->id, *ref, wire::kProvenance, 0);
}

void Core::OnDone(WorkerInfo* w, const Json& body) {
  auto m = ParseDone(body);
  if (!m.ok()) {
    LogWarn("dropped DONE from " + w->id + ": " + m.status().message());
    return;
  }
  AttemptOutcome o = store_->FinishAttempt(m->ref, m->status, m->exit_code, m->error,
                                           m->stderr_tail, m->summary);
  if (!o.known) LogWarn("DONE from " + w->id + " for unknown " + RefString(m->ref));
  if (o.changed) {
    LogInfo(RefString(m->ref) + " " + m->status + " on " + w->id +
            (o.run_finished ? "" : " (not the run's current attempt; result not used)"));
    AfterAttemptEnd(m->ref, o);
  }
  // The worker is done with it whatever we thought: free its slot.
  w->running.erase(m->ref);
  Lease* l = leases_.Find(m->ref);
  if (l && l->worker_id == w->id) leases_.Release(m->ref);
  Ack(w->id, m->ref, wire::kDone, 0);
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

void Core::Tick(Clock::time_point now) {
  if (now >= next_timer_) {
    next_timer_ = now + kTimerPeriod;
    ExpireDeadWorkers(now);  // liveness.cc
    ExpireLeases(now);       // liveness.cc
    SendHeartbeats(now);     // liveness.cc
  }
  Dispatch(now);  // dispatch.cc
  FinishExperiments();
}

void Core::FinishExperiments() {
  for (int64_t exp : finished_experiments_) {
    if (!exp || !store_->ExperimentFinished(exp)) continue;
    auto res = ComputeResults(store_->db(), exp);
    Status st = res.ok() ? SavePairedStats(store_->db(), exp, *res) : res.status();
    if (!st.ok()) LogError("paired stats of experiment " + std::to_string(exp) + ": " + st.message());
  }
  finished_experiments_.clear();
}

StatusOr<SubmitResult> Core::Submit(const Grid& grid, const std::vector<std::string>& sets,
                                    bool rerun) {
  auto res = store_->InsertExperiment(grid, sets, rerun);
  if (!res.ok()) return res;
  for (int64_t id : res->queued) queue_.Push(id);
  if (res->queued.empty()) finished_experiments_.insert(res->experiment_id);
  LogInfo("experiment " + std::to_string(res->experiment_id) + " (" + grid.name + "): " +
          std::to_string(res->runs) + " runs, " + std::to_string(res->reused) + " reused");
  return res;
}

void Core::ApplyCancel(const RunChange& c) {
  queue_.Remove(c.run);
  UnparkAll();  // children of a cancelled parent fail at their next dispatch
  if (c.running && workers_.Find(c.worker_id))
    Send(c.worker_id, wire::kCancel, RefJson(*c.running));
  finished_experiments_.insert(c.experiment_id);
}

Json Core::ChangesJson(const std::vector<RunChange>& changes, const char* verb) {
  Json runs = Json::array();
  for (const RunChange& c : changes) runs.push_back({{"run", c.run}, {"was", c.old_status}});
  return {{verb, runs}, {"count", changes.size()}};
}

StatusOr<Json> Core::CancelRun(int64_t run) {
  auto c = store_->CancelRun(run);
  if (!c.ok()) return c.status();
  ApplyCancel(*c);
  return Json{{"run", run}, {"was", c->old_status}, {"status", "cancelled"}};
}

StatusOr<Json> Core::CancelExperiment(int64_t experiment) {
  auto cs = store_->CancelExperiment(experiment);
  if (!cs.ok()) return cs.status();
  for (const RunChange& c : *cs) ApplyCancel(c);
  finished_experiments_.insert(experiment);
  Json out = ChangesJson(*cs, "cancelled");
  out["experiment"] = experiment;
  return out;
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
    out.push_back({{"id", id}, {"name", w.name}, {"host", w.host}, {"pid", w.pid},
                   {"version", w.version}, {"devices", w.devices}, {"slots", w.Capacity()},
                   {"free_slots", w.FreeSlots()}, {"last_heartbeat_age_s", age},
                   {"state", "alive"}, {"running", running}});
  }
  return out;
}

Clock::time_point Core::NextDeadline(Clock::time_point now) const {
  return std::max(now, next_timer_);
}

}  // namespace headlab::coord
