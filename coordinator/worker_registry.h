// The workers the coordinator knows right now (in memory): capacity, running attempts and
// liveness deadlines. Persistent worker rows are the Store's job. Loop thread only.
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/json.h"
#include "coordinator/messages.h"
#include "coordinator/store.h"

namespace headlab::coord {

using Clock = std::chrono::steady_clock;

struct WorkerInfo {
  std::string id;            // DEALER routing identity
  std::string name, host, version;
  int64_t pid = 0;
  int slots = 0;
  Json devices;              // as READY sent them
  std::vector<int> cuda_devices;
  std::map<AttemptRef, std::vector<int>> running;  // attempt -> device indices it holds
  Clock::time_point expiry;        // dead if nothing heard by then
  Clock::time_point heartbeat_at;  // when we next send HEARTBEAT
  Clock::time_point last_heard;

  // GPU workers have one slot per CUDA device; CPU workers have READY.slots.
  int Capacity() const { return cuda_devices.empty() ? slots : int(cuda_devices.size()); }
  // Free slots: CUDA devices no attempt holds (a gang run holds several), or CPU slots.
  int FreeSlots() const;
};

class WorkerRegistry {
 public:
  // Adds or refreshes the worker from READY; keeps attempts it already held.
  WorkerInfo& Register(const std::string& id, const ReadyMsg& ready, Clock::time_point now);
  // Returns the worker or nullptr.
  WorkerInfo* Find(const std::string& id);
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
};

}  // namespace headlab::coord
