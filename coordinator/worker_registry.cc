// Worker capacity and liveness bookkeeping.
#include "coordinator/worker_registry.h"

#include "common/wire.h"

namespace headlab::coord {

int WorkerInfo::FreeSlots() const {
  int held = 0;
  for (const auto& [ref, devs] : running) held += devs.empty() ? 1 : int(devs.size());
  return Capacity() - held;
}

WorkerInfo& WorkerRegistry::Register(const std::string& route, const std::string& session,
                                     const ReadyMsg& m, Clock::time_point now) {
  WorkerInfo& w = workers_[m.id];
  if (!w.session.empty() && w.session != session) by_session_.erase(w.session);
  w.id = m.id;
  w.route = route;
  w.session = session;
  by_session_[session] = m.id;
  w.work_dir = m.work_dir;
  w.name = m.name;
  w.host = m.host;
  w.version = m.version;
  w.pid = m.pid;
  w.slots = m.slots;
  w.devices = m.devices;
  w.cuda_devices = m.cuda_devices;
  w.heartbeat_at = now + wire::kHeartbeatInterval;
  Touch(&w, now);
  return w;
}

WorkerInfo* WorkerRegistry::Find(const std::string& id) {
  auto it = workers_.find(id);
  return it == workers_.end() ? nullptr : &it->second;
}

WorkerInfo* WorkerRegistry::FindBySession(const std::string& session) {
  auto it = by_session_.find(session);
  return it == by_session_.end() ? nullptr : Find(it->second);
}

void WorkerRegistry::Remove(const std::string& id) {
  auto it = workers_.find(id);
  if (it == workers_.end()) return;
  by_session_.erase(it->second.session);
  workers_.erase(it);
}

void WorkerRegistry::Touch(WorkerInfo* w, Clock::time_point now) {
  w->last_heard = now;
  w->expiry = now + wire::kLiveness;
}

std::vector<std::string> WorkerRegistry::Expired(Clock::time_point now) const {
  std::vector<std::string> out;
  for (const auto& [id, w] : workers_)
    if (w.expiry <= now) out.push_back(id);
  return out;
}

void WorkerRegistry::ReleaseAttempt(const std::string& worker_id, const AttemptRef& ref) {
  if (WorkerInfo* w = Find(worker_id)) w->running.erase(ref);
}

}  // namespace headlab::coord
