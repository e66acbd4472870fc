// Data-parallel gradient averaging overlapped with the backward pass: the scheme
// of PyTorch's DistributedDataParallel Reducer, written for LibTorch 1.13 and 2.x.
//
//   Buckets    the trained tensors are grouped, in REVERSE order of the model's parameter
//              list (roughly the order backward completes their gradients: the output end
//              of the model first), into flat buckets of at most kGradientBucketBytes; each
//              tensor's gradient IS a view into its bucket (no copy into or out of it).
//   Hooks      a post-hook on each tensor's gradient accumulator (AccumulateGrad) fires
//              once the tensor's gradient of a backward is complete; in the update's last
//              backward, a bucket whose tensors have all fired starts its all-reduce at
//              once (asynchronous), while backward goes on with the earlier layers.
//              Buckets start strictly in bucket order, so every rank issues the same
//              collectives in the same order whatever its timing.
//   Accumulation  the backwards of the earlier micro-batches of an update only accumulate
//              into the buckets; only the last one (ExpectLastBackward) reduces.
//   Unused     tensors the last backward's loss does not reach (found by walking its
//              graph, as DDP's find_unused_parameters does) count as ready from the start,
//              so they hold back no bucket.
//   Finish     after the last backward, every bucket is waited for (any not started yet
//              starts first), and the time this took is the update's exposed
//              communication time.
//   Dtype      fp32: the bucket itself is divided by the world size and summed in place.
//              bf16: a bf16 copy of the bucket (pre-divided) is summed and copied back:
//              half the bytes on the wire, gradients rounded to bf16 once per update.
// A tensor that got no gradient in any backward of the update on this rank keeps an
// undefined gradient after FinishUpdate, as it would in one process (AdamW and clipping
// skip it); its zero slot still takes part in the bucket's all-reduce. Every rank runs the
// same model code, so every rank's tensors get gradients alike.
// LibTorch translation units only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "common/status.h"
#include "payload/exec/dist.h"

namespace torch::autograd {
struct Node;
}

namespace headlab {

// The dtype gradients travel in (train.allreduce_dtype).
enum class ReduceDtype { kFp32, kBf16 };

// "fp32" | "bf16" -> the dtype; InvalidArgument naming train.allreduce_dtype otherwise.
StatusOr<ReduceDtype> ParseReduceDtype(const std::string& name);
const char* ReduceDtypeName(ReduceDtype d);

// Groups the tensors of `params` that require gradients into buckets, in launch order:
// walking `params` from the last to the first, a bucket takes tensors of one dtype and
// device until the next would take it over `bucket_bytes` (a tensor larger than that gets
// a bucket of its own). Returns indices into `params`.
std::vector<std::vector<size_t>> AssignGradientBuckets(const std::vector<torch::Tensor>& params,
                                                       int64_t bucket_bytes);

// Averages the gradients of the optimiser's tensors across the ranks of `group` while the
// last backward of each update runs. The thread that owns the training loop calls every
// public method; the hooks run on autograd threads (guarded by mu_).
class GradientReducer {
 public:
  GradientReducer(ProcessGroup& group, ReduceDtype dtype,
                  int64_t bucket_bytes = kGradientBucketBytes);
  // Removes its hooks from the gradient accumulators.
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Starts an update of `params` (the tensors the optimiser updates, in the model's
  // parameter order; see Updater::InGradientOrder): rebuilds the buckets if the list or a
  // shape changed since the last update (a method added or shrank tensors), zeroes the
  // buckets, makes every gradient its bucket view again and hooks the tensors' gradient
  // accumulators until FinishUpdate.
  void BeginUpdate(const std::vector<torch::Tensor>& params);
  // The next backward, of `loss`, is the update's last: its hooks start the buckets as
  // they fill. Tensors `loss` does not depend on count as ready at once.
  void ExpectLastBackward(const torch::Tensor& loss);
  // Call after the last backward: starts the buckets that have not started, waits for all
  // of them (bf16: copies the sums back) and undefines the gradients of tensors that got
  // none in this update. Afterwards every rank holds the mean gradient.
  void FinishUpdate();

  // Seconds the updates so far spent in FinishUpdate waiting for communication after their
  // last backward (CUDA: between events on the compute stream; reading them waits for the
  // latest update's; CPU: host wall time).
  double exposed_seconds();
  int64_t finished_updates() const { return finished_; }

  // The current buckets (after BeginUpdate): their tensors' indices into `params`, in
  // launch order, and their flat gradient buffers.
  size_t bucket_count() const { return buckets_.size(); }
  const std::vector<size_t>& bucket_params(size_t b) const { return buckets_[b].params; }
  const torch::Tensor& bucket_buffer(size_t b) const { return buckets_[b].flat; }
  // The order buckets started in during the latest update (bucket indices) and whether
  // each started early (in a hook during the backward, or complete before it) rather than
  // in FinishUpdate.
  const std::vector<std::pair<size_t, bool>>& started() const { return started_; }

 private:
  class ReadyHook;
  struct Bucket {
    std::vector<size_t> params;
    torch::Tensor flat;   // the gradients of `params`, back to back
    torch::Tensor comm;   // bf16: what travels; undefined for fp32
    int64_t pending = 0;  // tensors of the last backward not ready yet
    std::unique_ptr<CollectiveWork> work;
  };
  struct Hook {
    std::shared_ptr<torch::autograd::Node> accumulator;  // kept alive: see InstallHooks
    uintptr_t key = 0;
    size_t param = 0;  // index into params_
  };
  struct DeviceTimer;  // CUDA events; defined only in CUDA builds

  bool SameParams(const std::vector<torch::Tensor>& params) const;
  void Rebuild(const std::vector<torch::Tensor>& params);
  void InstallHooks();
  void RemoveHooks();
  // Hook body: tensor `i`'s gradient of the current backward is complete.
  void OnGradientReady(size_t i);
  // The three below: the caller holds mu_. Counts tensor i's gradient as final.
  void MarkReady(size_t i);
  // Starts buckets in order while the next one is complete.
  void StartReadyBuckets(bool early);
  void Start(size_t b, bool early);

  // Constant after construction.
  ProcessGroup& group_;
  const ReduceDtype dtype_;
  const int64_t bucket_bytes_;

  // Rebuilt by BeginUpdate when the tensors change.
  std::vector<torch::Tensor> params_;
  std::vector<std::vector<int64_t>> shapes_;
  std::vector<torch::Tensor> views_;  // params_[i]'s gradient: a view into its bucket
  std::vector<size_t> bucket_of_;     // by index of params_; SIZE_MAX: not reduced
  std::vector<Bucket> buckets_;
  std::vector<Hook> hooks_;  // from BeginUpdate to FinishUpdate

  // Per update.
  std::mutex mu_;  // guards what the hooks touch: the fields down to started_
  bool last_backward_ = false;
  std::vector<char> used_;   // got a gradient in some backward of this update
  std::vector<char> ready_;  // got it in the last backward
  size_t next_start_ = 0;    // the next bucket to start
  std::vector<std::pair<size_t, bool>> started_;

  // Exposed time.
  int64_t finished_ = 0;
  double exposed_s_ = 0;
  std::unique_ptr<DeviceTimer> device_timer_;
};

}  // namespace headlab
