// The optimiser of the training loop, shared by run kinds that must time or run exactly
// the same update (train, bench-update, flops, the task kinds). Included only by LibTorch
// translation units.
#pragma once

#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "payload/exec/exec_config.h"
#include "payload/exec/model.h"

namespace headlab {

// AdamW with weight decay on matrices (dim >= 2: embeddings, projections) only; vectors
// (LayerNorm gains and biases) are not decayed.
std::unique_ptr<torch::optim::AdamW> MakeOptimizer(Gpt& model, const TrainConfig& t);

// Returns `param`'s AdamW state in `optimizer`, or nullptr before its first update.
torch::optim::AdamWParamState* AdamWStateOf(torch::optim::AdamW& optimizer,
                                            const torch::Tensor& param);

// Applies AdamW updates with the semantics of torch::optim::AdamW::step (decoupled weight
// decay p *= 1 - lr wd, bias-corrected moments, eps outside the square root), the state
// kept in the optimiser itself (so checkpoints and physical pruning see it). On CUDA with
// LibTorch >= 2 each parameter group is one multi-tensor kernel (at::_fused_adamw_, what
// torch.optim.AdamW(fused=True) runs) and no host synchronisation; elsewhere
// torch::optim::AdamW::step. Single-threaded.
class AdamWStepper {
 public:
  explicit AdamWStepper(torch::optim::AdamW& optimizer) : opt_(optimizer) {}
  // One update of every parameter that has a gradient.
  void Step();
  // Whether Step runs the fused multi-tensor kernel for parameters on `device`.
  static bool Fused(const torch::Device& device);

 private:
  torch::optim::AdamW& opt_;
  // The fused kernel reads step counts from device tensors: one per parameter, kept equal
  // to the optimiser's own count (re-made from it whenever they differ, e.g. after a
  // checkpoint restore).
  std::unordered_map<void*, std::pair<int64_t, torch::Tensor>> device_steps_;
};

// Scales the gradients of `params` so that their joint L2 norm is at most `max_norm`
// (the rule of torch::nn::utils::clip_grad_norm_: coefficient min(1, max_norm / (norm +
// 1e-6))); max_norm <= 0 or infinite only measures. Returns the norm before clipping as a
// device scalar: no host synchronisation (read it when logging).
torch::Tensor ClipGradNorm(const std::vector<torch::Tensor>& params, double max_norm);

}  // namespace headlab
