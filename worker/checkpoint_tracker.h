// The checkpoints one attempt has written, and which of them retention deletes as newer
// ones complete (common/checkpoint_retention.h; docs/DESIGN.md, "Checkpoint retention").
// The attempt reports each deletion as ARTIFACT_DELETED so that the coordinator never
// offers a file that is gone (schema/protocol.md).
//
// Safety: a checkpoint is known here only once exec reported it, i.e. after its atomic
// write completed (payload/exec/run_setup.h SaveCheckpoint), so one being written is never
// a candidate; the newest is always kept; and only regular files directly inside the
// attempt's own directory are ever unlinked (a `command` run may report any path).
// Driven by the worker's main loop thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/checkpoint_retention.h"

namespace headlab {

class CheckpointTracker {
 public:
  struct Checkpoint {
    int64_t seq = 0;  // its ARTIFACT seq
    std::string path;
    int64_t step = 0;
    int64_t bytes = 0;
  };

  CheckpointTracker(RetentionPolicy policy, std::string out_dir)
      : policy_(std::move(policy)), out_dir_(std::move(out_dir)) {}

  // Records a completed checkpoint and returns the ones it makes obsolete, already removed
  // from disk where that was safe: every earlier checkpoint retention no longer keeps, and
  // an earlier record of the same path (rewritten in place: its old bytes are gone). A file
  // that is not safe to remove, or that unlink refuses, is logged, no longer tracked and
  // not returned.
  std::vector<Checkpoint> Add(Checkpoint c);

  // Returns the bytes of the tracked checkpoints (on disk now).
  int64_t bytes_held() const;

 private:
  // Unlinks `path` if it is a regular file directly inside out_dir_; true when it is gone.
  bool Remove(const std::string& path) const;

  const RetentionPolicy policy_;
  const std::string out_dir_;
  std::vector<Checkpoint> held_;  // ascending step
};

}  // namespace headlab
