// Checkpoint retention (schema/grid.md, train.keep_checkpoints and train.keep_steps;
// docs/DESIGN.md, "Checkpoint retention"): which of an attempt's checkpoints stay on disk,
// and how many it holds at once. The worker deletes the others as newer ones complete
// (worker/checkpoint_tracker.h) and sizes its disk check by the peak (worker/disk_check.h).
//
//    kept(steps written so far, ascending) :=
//        every step                                 when keep_last = 0
//      | the newest keep_last steps  U  (steps ∩ pinned)   otherwise
//    pinned := train.keep_steps  U  ASSIGN.keep_steps (continuations' parent.step)
//
// The newest checkpoint is always kept (keep_last >= 1), so a requeued run resumes from it
// and a continuation of the final checkpoint (parent.step 0) always finds it.
#pragma once

#include <cstdint>
#include <set>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace headlab {

struct RetentionPolicy {
  int64_t keep_last = 0;     // the newest N checkpoints stay; 0 = every checkpoint stays
  std::set<int64_t> pinned;  // steps never deleted
};

// Returns the policy of a normalized run config (train.keep_checkpoints, train.keep_steps)
// with the coordinator's pins `assigned` (ASSIGN.keep_steps: an array of steps, or null)
// added. InvalidArgument naming the field when either list is malformed.
StatusOr<RetentionPolicy> RetentionOf(const Json& config, const Json& assigned);

// Returns, for checkpoint steps written in this order (ascending, distinct), which of them
// the policy keeps once all are written.
std::vector<bool> KeptCheckpoints(const std::vector<int64_t>& steps, const RetentionPolicy& p);

// The checkpoints a train run of `config` writes, without listing them (train.steps /
// checkpoint_every can be 10^8): one at every multiple of checkpoint_every after
// `start_step` up to train.steps, and the final one at train.steps.
struct CheckpointSchedule {
  int64_t start_step = 0;  // the step the run starts from (parent.step); none written at it
  int64_t last_step = 0;   // train.steps
  int64_t every = 0;       // train.checkpoint_every; 0 = only the final one
  // Returns the number of checkpoints written.
  int64_t Count() const;
  // Returns true iff a checkpoint of `step` is written.
  bool Writes(int64_t step) const;
};

// Returns the schedule of a normalized run config of kind train or mqar (start = parent.step).
CheckpointSchedule ScheduleOf(const Json& config);

// Returns the most checkpoints on disk at once while `s` is written under `p`: those kept
// before the last write plus the one being written (a checkpoint is deleted only after a
// newer one completed, payload/exec/run_setup.h SaveCheckpoint writes atomically).
int64_t PeakCheckpointsOnDisk(const CheckpointSchedule& s, const RetentionPolicy& p);

}  // namespace headlab
