// One optimiser update: accumulation, loss scaling, clipping, AdamW.
#include "worker/exec/update_step.h"

#include <cmath>

namespace headlab {

Updater::Updater(Gpt& model, torch::optim::AdamW& optimizer, const TrainConfig& t,
                 Precision precision, const torch::Device& device)
    : model_(model),
      optimizer_(optimizer),
      t_(t),
      stepper_(optimizer),
      scaler_(precision == Precision::kFp16, device) {}

void Updater::Begin() { optimizer_.zero_grad(); }

torch::Tensor Updater::Accumulate(const torch::Tensor& x, const torch::Tensor& y) {
  torch::Tensor part = model_->Loss(x, y) / double(t_.grad_accum);
  Backward(part);
  return part.detach();
}

void Updater::Backward(const torch::Tensor& loss_part) { scaler_.Scale(loss_part).backward(); }

std::vector<torch::Tensor> Updater::Trained() const {
  std::vector<torch::Tensor> trained;
  for (const auto& group : optimizer_.param_groups())
    trained.insert(trained.end(), group.params().begin(), group.params().end());
  return trained;
}

torch::Tensor Updater::Apply() {
  const std::vector<torch::Tensor> trained = Trained();
  torch::Tensor found_inf;
  if (scaler_.enabled()) {
    std::vector<torch::Tensor> grads;
    for (const torch::Tensor& p : trained) grads.push_back(p.grad());
    found_inf = scaler_.Unscale(grads);
  }
  torch::Tensor norm = ClipGradNorm(trained, t_.grad_clip > 0 ? t_.grad_clip : INFINITY);
  // fp16 only: whether the update may be applied is read on the host (one synchronisation
  // per update), so that AdamW's step counts stay exact.
  if (!found_inf.defined() || found_inf.item<float>() == 0.f) stepper_.Step();
  if (found_inf.defined()) scaler_.Update(found_inf);
  return norm;
}

}  // namespace headlab
