// Methods in data-parallel runs: every rank runs the same method hooks
// (train_hooks.h) on the same inputs — the global micro-batch, the averaged gradients, the
// mean loss, the fixed held-out batches, each method's own calibration sampler seeded by
// the run seed — over bitwise-identical weights, so every rank makes the same choices:
// SAF's heads and patterns, AAH's windows, AoH's labels, the pruned heads. ReplicaSync
// makes that an invariant rather than a hope. At each sync point it compares the model's
// head configuration (a fingerprint of every head's state, the physically removed heads,
// the trainable fixed heads and the trained tensors' shapes) across ranks, and fails the
// run naming the step when they differ; whenever the configuration changed, it copies rank
// 0's fixed-pattern values (SAF eq. 3's alpha, rho, logZ, dense patterns, trainable
// alpha/rho) to every rank, so that floating-point differences between GPUs in a fit
// cannot split the replicas (the SAF paper's 1B runs fit on rank 0 and broadcast too).
// LibTorch translation units only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "common/status.h"
#include "payload/exec/dist.h"
#include "payload/exec/model.h"

namespace headlab {

// A 62-bit hash of the head configuration of `model` and the shapes of `trained`: equal on
// two ranks iff (up to hash collisions) they run the same heads in the same states on
// tensors of the same shapes. Host-side only: nothing waits for the device.
uint64_t HeadConfigurationFingerprint(Gpt& model, const std::vector<torch::Tensor>& trained);

// The sync points of one rank. Single-threaded; every rank calls Sync at the same points.
class ReplicaSync {
 public:
  explicit ReplicaSync(ProcessGroup& group) : group_(group) {}

  // One collective of two integers; when the agreed configuration differs from the last
  // one synced (or on the first call), broadcasts from rank 0 the fixed-pattern buffers
  // of every layer that has a fixed head and every trainable alpha/rho. Internal error
  // "... differ across ranks ..." naming `where` and `step` when the fingerprints differ.
  Status Sync(Gpt& model, const std::vector<torch::Tensor>& trained, const std::string& where,
              int64_t step);

 private:
  ProcessGroup& group_;
  std::optional<uint64_t> synced_;
};

}  // namespace headlab
