// One optimiser update of the language model, as every run kind that trains does it (train,
// bench-update, flops, the task kinds): gradient accumulation over micro-batches, fp16 loss
// scaling, in data-parallel runs the gradient all-reduce overlapped with the last
// micro-batch's backward (grad_reducer.h), clipping, AdamW. On CUDA nothing in it waits for
// the device: the loss and the gradient norm stay device tensors until a caller reads them
// to log. Included only by LibTorch translation units.
#pragma once

#include <vector>

#include <torch/torch.h>

#include "payload/exec/exec_config.h"
#include "payload/exec/grad_reducer.h"
#include "payload/exec/model.h"
#include "payload/exec/optimizer.h"
#include "payload/exec/precision.h"

namespace headlab {

// Runs updates of `model` with `optimizer` (both outlive it) under train.* of `t`.
// Single-threaded.
class Updater {
 public:
  Updater(Gpt& model, torch::optim::AdamW& optimizer, const TrainConfig& t, Precision precision,
          const torch::Device& device);

  // Data-parallel runs: `reducer` (which outlives this) averages every update's gradients
  // across ranks, its all-reduce overlapped with the backward of the update's last
  // (grad_accum-th) micro-batch. Without one the gradients stay this process's.
  void ReduceGradientsWith(GradientReducer* reducer) { reducer_ = reducer; }

  // Starts an update: clears every gradient (data parallel: zeroes the reducer's buckets,
  // which the gradients are views of).
  void Begin();
  // One micro-batch of the update (x, y: [B, T] tokens): forward in the run's precision
  // (GptImpl::forward), loss / grad_accum, backward (scaled for fp16). Returns that part of
  // the loss, detached (fp32, on the device).
  torch::Tensor Accumulate(const torch::Tensor& x, const torch::Tensor& y);
  // Backward of a loss the caller computed (already divided by grad_accum), scaled for
  // fp16: for kinds whose loss is not the language-model loss (MQAR's query positions).
  // The grad_accum-th call since Begin is the update's last backward.
  void Backward(const torch::Tensor& loss_part);
  // Waits until the update's gradients are averaged across ranks (no-op in one process or
  // when done). Apply calls it; a caller that reads gradients before Apply (a method's
  // AfterBackward) calls it first.
  void FinishGradients();
  // The tensors the optimiser updates, in its group order (data-parallel averaging and
  // clipping cover exactly these).
  std::vector<torch::Tensor> Trained() const;
  // The same tensors in the model's parameter order (forward order; tensors the optimiser
  // holds that are not registered parameters, e.g. SAF's trainable patterns, last): the
  // reducer fills its buckets in reverse of this order, as backward completes gradients.
  std::vector<torch::Tensor> InGradientOrder() const;
  // Finishes the update: FinishGradients, unscales (fp16; an update with inf/NaN
  // gradients is skipped), clips to t.grad_clip (0: only measures), steps AdamW. Returns
  // the gradient norm before clipping (device scalar).
  torch::Tensor Apply();

  LossScaler& scaler() { return scaler_; }

 private:
  Gpt& model_;
  torch::optim::AdamW& optimizer_;
  const TrainConfig& t_;
  AdamWStepper stepper_;
  LossScaler scaler_;
  GradientReducer* reducer_ = nullptr;
  int64_t backwards_ = 0;         // since Begin
  bool gradients_final_ = false;  // FinishGradients ran for this update
};

}  // namespace headlab
