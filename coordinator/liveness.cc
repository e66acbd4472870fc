// Liveness: dead workers, expired leases and our heartbeats to workers (the timers of
// Core::Tick). A worker silent for wire::kLiveness is dead and its attempts are lost; an
// attempt whose lease was not renewed for wire::kLiveness is lost; either way the run is
// requeued as attempt+1 (store.cc, Store::LoseAttempt) up to max_attempts.
#include "common/log.h"
#include "common/wire.h"
#include "coordinator/core.h"
#include "coordinator/messages.h"

namespace headlab::coord {

void Core::ExpireDeadWorkers(Clock::time_point now) {
  for (const std::string& id : workers_.Expired(now)) {
    DropWorker(id, "dead",
               "worker " + id + " silent for " + std::to_string(wire::kLiveness.count()) + " ms");
  }
}

void Core::ExpireLeases(Clock::time_point now) {
  for (const AttemptRef& ref : leases_.Expired(now)) {
    Lease* l = leases_.Find(ref);
    std::string why = "lease expired: worker " + (l ? l->worker_id : std::string("?")) +
                      " did not report it for " + std::to_string(wire::kLiveness.count()) + " ms";
    AttemptOutcome o = store_->LoseAttempt(ref, why);
    LogWarn(RefString(ref) + " lost: " + why + (o.requeued ? "; requeued" : ""));
    AfterAttemptEnd(ref, o);
    leases_.Release(ref);  // also when the row was already terminal
  }
}

void Core::SendHeartbeats(Clock::time_point now) {
  for (auto& [id, w] : workers_.all()) {
    if (w.heartbeat_at <= now) {
      SendTo(w, wire::kHeartbeat, Json::object());
      w.heartbeat_at = now + wire::kHeartbeatInterval;
    }
  }
}

void Core::DropWorker(const std::string& id, const std::string& state, const std::string& why) {
  std::vector<AttemptRef> held = leases_.HeldBy(id);
  for (const AttemptRef& ref : held) {
    AttemptOutcome o = store_->LoseAttempt(ref, why);
    AfterAttemptEnd(ref, o);
  }
  workers_.Remove(id);
  Status st = store_->SetWorkerState(id, state);
  if (!st.ok()) LogError("worker row for " + id + ": " + st.message());
  LogWarn(why + ": " + std::to_string(held.size()) + " attempts lost");
}

}  // namespace headlab::coord
