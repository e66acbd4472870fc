// Shared-parent continuation (run config parent.*, schema/grid.md): which checkpoint a
// queued run starts from, resolved at dispatch time from the parent run's artifacts.
#pragma once

#include <string>

#include "common/json.h"
#include "coordinator/db.h"

namespace headlab::coord {

struct ParentResolution {
  enum class State {
    kNone,   // the run has no parent: dispatch as usual
    kReady,  // dispatch with `checkpoint`
    kWait,   // the parent has not finished yet: leave the run queued
    kFail,   // the parent failed/was cancelled or lacks the checkpoint: fail with `error`
  };
  State state = State::kNone;
  Json checkpoint;    // kReady: {run, path, sha256, step} (ASSIGN.parent)
  std::string error;  // kFail
};

// Resolves `config`'s parent.run / parent.step (step 0 = the parent's final checkpoint), or
// parent.experiment / parent.arm: the parent is that experiment's one run of `arm` ("" =
// any arm) with config's seed (kFail when there is none or more than one). A parent that
// reused another run's result resolves to that run's checkpoints.
ParentResolution ResolveParent(Db* db, const Json& config);

// Returns the one run of `experiment` with `arm` ("" = any arm), seed `seed` and, when
// `parent_run` > 0, that parent.run; 0 with *error ("<what>: experiment E has no run of
// seed S" or "... N runs ...: set <what>.arm") when there is none or more than one.
int64_t FindRunBySeed(Db* db, int64_t experiment, const std::string& arm, int64_t seed,
                      int64_t parent_run, const std::string& what, std::string* error);

// Returns the steps (ascending, > 0) that continuations stored in this coordinator start
// from when they name run `run` as their parent (parent.run, or parent.experiment with
// its arm or "" and its seed): ASSIGN.keep_steps, the checkpoints retention must keep
// (common/checkpoint_retention.h). parent.step 0, the final checkpoint, is always kept.
Json PinnedSteps(Db* db, int64_t run);

// Marks queued run `run` failed with `error` (a continuation whose parent cannot provide
// its checkpoint). The caller records the event.
Status FailQueuedRun(Db* db, int64_t run, const std::string& error);

}  // namespace headlab::coord
