// One optimiser update of the language model, as every run kind that trains does it (train,
// bench-update, flops, the task kinds): gradient accumulation over micro-batches, fp16 loss
// scaling, clipping, AdamW. On CUDA nothing in it waits for the device: the loss and the
// gradient norm stay device tensors until a caller reads them to log. Included only by
// LibTorch translation units.
#pragma once

#include <vector>

#include <torch/torch.h>

#include "worker/exec/exec_config.h"
#include "worker/exec/model.h"
#include "worker/exec/optimizer.h"
#include "worker/exec/precision.h"

namespace headlab {

// Runs updates of `model` with `optimizer` (both outlive it) under train.* of `t`.
// Single-threaded.
class Updater {
 public:
  Updater(Gpt& model, torch::optim::AdamW& optimizer, const TrainConfig& t, Precision precision,
          const torch::Device& device);

  // Starts an update: clears every gradient.
  void Begin();
  // One micro-batch of the update (x, y: [B, T] tokens): forward in the run's precision
  // (GptImpl::forward), loss / grad_accum, backward (scaled for fp16). Returns that part of
  // the loss, detached (fp32, on the device).
  torch::Tensor Accumulate(const torch::Tensor& x, const torch::Tensor& y);
  // Backward of a loss the caller computed (already divided by grad_accum), scaled for
  // fp16: for kinds whose loss is not the language-model loss (MQAR's query positions).
  void Backward(const torch::Tensor& loss_part);
  // The tensors the optimiser updates, in its group order (data-parallel averaging and
  // clipping cover exactly these).
  std::vector<torch::Tensor> Trained() const;
  // Finishes the update: unscales (fp16; an update with inf/NaN gradients is skipped),
  // clips to t.grad_clip (0: only measures), steps AdamW. Returns the gradient norm before
  // clipping (device scalar).
  torch::Tensor Apply();

  LossScaler& scaler() { return scaler_; }

 private:
  Gpt& model_;
  torch::optim::AdamW& optimizer_;
  const TrainConfig& t_;
  AdamWStepper stepper_;
  LossScaler scaler_;
};

}  // namespace headlab
