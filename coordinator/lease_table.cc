// Lease grant, renewal and expiry.
#include "coordinator/lease_table.h"

#include "common/wire.h"

namespace headlab::coord {

void LeaseTable::Grant(const AttemptRef& ref, const std::string& worker_id,
                       std::vector<int> devices, TimePoint now) {
  leases_[ref] = Lease{worker_id, std::move(devices), now + wire::kLiveness};
}

bool LeaseTable::Renew(const AttemptRef& ref, const std::string& worker_id, TimePoint now) {
  auto it = leases_.find(ref);
  if (it == leases_.end() || it->second.worker_id != worker_id) return false;
  it->second.expiry = now + wire::kLiveness;
  return true;
}

void LeaseTable::Release(const AttemptRef& ref) { leases_.erase(ref); }

Lease* LeaseTable::Find(const AttemptRef& ref) {
  auto it = leases_.find(ref);
  return it == leases_.end() ? nullptr : &it->second;
}

std::vector<AttemptRef> LeaseTable::Expired(TimePoint now) const {
  // A linear scan: at one check per tick over at most a few thousand running attempts
  // this costs microseconds; a deadline heap would need lazy deletion on every renewal.
  std::vector<AttemptRef> out;
  for (const auto& [ref, lease] : leases_)
    if (lease.expiry <= now) out.push_back(ref);
  return out;
}

std::vector<AttemptRef> LeaseTable::HeldBy(const std::string& worker_id) const {
  std::vector<AttemptRef> out;
  for (const auto& [ref, lease] : leases_)
    if (lease.worker_id == worker_id) out.push_back(ref);
  return out;
}

}  // namespace headlab::coord
