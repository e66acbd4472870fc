// Matched-time budgets (run config time_match.*, schema/grid.md; SAF App. C.3.3-C.3.4):
// a run whose allowance is another run's measured training time waits until that run has
// succeeded, then starts with train.time_budget_s set to it.
#pragma once

#include <string>

#include "common/json.h"
#include "coordinator/db.h"

namespace headlab::coord {

struct TimeMatchResolution {
  enum class State {
    kNone,   // no time_match: dispatch as usual
    kReady,  // dispatch with train.time_budget_s = budget_s
    kWait,   // the reference has not finished yet: leave the run queued
    kFail,   // no such reference, it failed, or it has no single measured time: `error`
  };
  State state = State::kNone;
  double budget_s = 0;
  int64_t reference = 0;  // kReady: the run whose time was measured
  std::string error;      // kFail
};

// Resolves `config`'s time_match.experiment / time_match.arm (-1 = the run's own
// experiment, `own_experiment`): the reference is that experiment's run of `arm` ("" = any) with
// config's seed, and config's parent.run when it has one (a reused result resolves to the run that
// produced it); its budget is the time.elapsed_s metric of its last training step in the attempt
// that succeeded: process start to the end of its last update, loading, periodic evaluations,
// checkpoints and a method's intervention included, the final evaluation and checkpoint export
// excluded (SAF App. C.3.3). A reference that resumed from a checkpoint (more than one attempt ran)
// has no single measurement: kFail.
TimeMatchResolution ResolveTimeMatch(Db* db, const Json& config, int64_t own_experiment);

}  // namespace headlab::coord
