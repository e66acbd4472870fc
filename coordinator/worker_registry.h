// The workers the coordinator knows right now (in memory): capacity, running attempts,
// liveness deadlines and each one's session (the key its WELCOME issued, which every later
// message must carry, and the ZeroMQ connection replies go to). Persistent worker rows are
// the Store's job. Loop thread only.
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/json.h"
#include "coordinator/messages.h"
#include "coordinator/store.h"

namespace headlab::coord {

using Clock = std::chrono::steady_clock;

struct WorkerInfo {
  std::string id;        // READY.id: the worker's name in messages and in the database
  std::string route;     // ZeroMQ routing identity of its current connection
  std::string session;   // WELCOME.session: proves a message comes from this worker
  std::string work_dir;  // READY.work_dir: its attempts write under work_dir/runs/
  std::string name, host, version;
  int64_t pid = 0;
  int slots = 0;
  Json devices;  // as READY sent them
  std::vector<int> cuda_devices;
  std::map<AttemptRef, std::vector<int>> running;  // attempt -> device indices it holds
  Clock::time_point expiry;                        // dead if nothing heard by then
  Clock::time_point heartbeat_at;                  // when we next send HEARTBEAT
  Clock::time_point last_heard;

  // GPU workers have one slot per CUDA device; CPU workers have READY.slots.
  int Capacity() const { return cuda_devices.empty() ? slots : int(cuda_devices.size()); }
  // Free slots: CUDA devices no attempt holds (a gang run holds several), or CPU slots.
  int FreeSlots() const;
};

class WorkerRegistry {
 public:
  // Adds or refreshes the worker ready.id from READY on connection `route` with a new
  // `session` key; keeps attempts it already held. The previous session key stops working.
  WorkerInfo& Register(const std::string& route, const std::string& session, const ReadyMsg& ready,
                       Clock::time_point now);
  // Returns the worker or nullptr.
  WorkerInfo* Find(const std::string& id);
  // Returns the worker whose session key is `session`, or nullptr.
  WorkerInfo* FindBySession(const std::string& session);
  // The worker's messages now arrive on (and replies go to) connection `route`.
  void SetRoute(WorkerInfo* w, const std::string& route) { w->route = route; }
  void Remove(const std::string& id);
  // Pushes the worker's death deadline to now + kLiveness.
  void Touch(WorkerInfo* w, Clock::time_point now);
  // Returns the ids of workers silent past their expiry.
  std::vector<std::string> Expired(Clock::time_point now) const;
  // Removes `ref` from whichever worker holds it.
  void ReleaseAttempt(const std::string& worker_id, const AttemptRef& ref);
  std::map<std::string, WorkerInfo>& all() { return workers_; }
  size_t size() const { return workers_.size(); }

 private:
  std::map<std::string, WorkerInfo> workers_;
  std::unordered_map<std::string, std::string> by_session_;  // session key -> worker id
};

}  // namespace headlab::coord
