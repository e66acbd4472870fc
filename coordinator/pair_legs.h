// Paired timing legs (run config pair.*, schema/grid.md "Paired timing"): the runs of one
// experiment that share a non-empty pair.group are legs of one paired measurement. They
// run one at a time, in ABBA order over pair.rep (common/paired_estimators.h AbbaOrder),
// on the worker and devices that took the group's first leg; each leg is its own attempt
// and so its own fresh `headlab exec` process.
//
// The mechanism is the smallest the dispatcher allows: at dispatch, a leg whose
// predecessors in the sequence have not all finished waits (parked like a continuation
// waiting for its parent), and a leg whose group already ran somewhere is offered only to
// that worker. Rejected alternative: one run timing both arms in one process — cheaper to
// schedule, but the second arm would inherit the first's allocator, caches and clocks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "coordinator/db.h"

namespace headlab::coord {

struct PairLegDecision {
  enum class State {
    kNone,    // not a paired leg: dispatch as usual
    kAny,     // the group's first leg: any worker with a free slot
    kPinned,  // dispatch only to `worker_id` on `devices`
    kWait,    // an earlier leg is still queued or running
  };
  State state = State::kNone;
  std::string worker_id;     // kPinned: the worker of the group's first attempt
  std::vector<int> devices;  // kPinned: that attempt's devices ([] = CPU)
  std::string group;         // pair.group (kAny, kPinned, kWait)
};

// One leg's place in its group's sequence: (pair.rep, ABBA position of its arm among the
// group's arms in lexicographic order, grid index). Returned by PairLegSequence in order.
struct PairLeg {
  int64_t run = 0;
  std::string arm;
  int64_t rep = 0;
  int64_t idx = 0;
  std::string status;
};

// Returns the legs of `group` in experiment `experiment`, in the order they run.
std::vector<PairLeg> PairLegSequence(Db* db, int64_t experiment, const std::string& group);

// Decides how queued run `run` (config `config`) of `experiment` may be dispatched now.
PairLegDecision ResolvePairLeg(Db* db, int64_t experiment, int64_t run, const Json& config);

}  // namespace headlab::coord
