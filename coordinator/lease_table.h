// Leases: every running attempt is held by one worker until its lease expires. A lease is
// renewed whenever its worker mentions the attempt (READY.running, HEARTBEAT.running,
// ACCEPT, METRICS, ARTIFACT); one not renewed for kLiveness expires, and the attempt is
// lost (core.cc requeues its run). After a coordinator restart every running attempt gets
// a fresh lease, so its worker has one liveness window to re-register with it.
// Loop thread only.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "coordinator/store.h"

namespace headlab::coord {

struct Lease {
  std::string worker_id;
  std::vector<int> devices;
  std::chrono::steady_clock::time_point expiry;
};

class LeaseTable {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  // Grants (or re-grants) the lease on `ref` to `worker_id` until now + kLiveness.
  void Grant(const AttemptRef& ref, const std::string& worker_id, std::vector<int> devices,
             TimePoint now);
  // Extends the lease iff `worker_id` holds it; returns true iff it did.
  bool Renew(const AttemptRef& ref, const std::string& worker_id, TimePoint now);
  void Release(const AttemptRef& ref);
  // Returns the lease or nullptr.
  Lease* Find(const AttemptRef& ref);
  // Returns the attempts whose lease has run out (they stay in the table until Release).
  std::vector<AttemptRef> Expired(TimePoint now) const;
  // Returns the attempts leased to `worker_id`.
  std::vector<AttemptRef> HeldBy(const std::string& worker_id) const;
  size_t size() const { return leases_.size(); }

 private:
  std::map<AttemptRef, Lease> leases_;
};

}  // namespace headlab::coord
