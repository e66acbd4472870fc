// The scheduler's DemandLookup over the coordinator database.
#pragma once

#include "coordinator/db.h"
#include "coordinator/scheduler.h"

namespace headlab::coord {

// Returns a lookup reading runs.experiment_id and the config's `resources` and `priority`.
// `db` must outlive it. A missing row is answered with experiment 0; an id it cannot read
// (logged) is left out of the answer.
DemandLookup DbDemandLookup(Db* db);

}  // namespace headlab::coord
