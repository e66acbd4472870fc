// The scheduler's DemandLookup over the coordinator database.
#pragma once

#include <optional>
#include <vector>

#include "coordinator/db.h"
#include "coordinator/scheduler.h"
#include "coordinator/store.h"

namespace headlab::coord {

// Returns a lookup reading runs.experiment_id and the config's `resources` and `priority`.
// `db` must outlive it. A missing row is answered with experiment 0; an id it cannot read
// (logged) is left out of the answer.
DemandLookup DbDemandLookup(Db* db);

// Returns the device indices attempt `ref` was assigned, or nullopt when there is no such
// attempt (for slots still held by attempts a worker is cancelling; core.cc OnReady).
std::optional<std::vector<int>> AttemptDevices(Db* db, const AttemptRef& ref);

}  // namespace headlab::coord
