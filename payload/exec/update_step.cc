// One optimiser update: accumulation, loss scaling, clipping, AdamW.
#include "payload/exec/update_step.h"

#include <cmath>
#include <unordered_set>

namespace headlab {

Updater::Updater(Gpt& model, torch::optim::AdamW& optimizer, const TrainConfig& t,
                 Precision precision, const torch::Device& device)
    : model_(model),
      optimizer_(optimizer),
      t_(t),
      stepper_(optimizer),
      scaler_(precision == Precision::kFp16, device) {}

void Updater::Begin() {
  backwards_ = 0;
  gradients_final_ = false;
  if (reducer_)
    reducer_->BeginUpdate(InGradientOrder());
  else
    optimizer_.zero_grad();
}

torch::Tensor Updater::Accumulate(const torch::Tensor& x, const torch::Tensor& y) {
  torch::Tensor part = model_->Loss(x, y) / double(t_.grad_accum);
  Backward(part);
  return part.detach();
}

void Updater::Backward(const torch::Tensor& loss_part) {
  torch::Tensor scaled = scaler_.Scale(loss_part);
  if (reducer_ && ++backwards_ == t_.grad_accum) reducer_->ExpectLastBackward(scaled);
  scaled.backward();
}

void Updater::FinishGradients() {
  if (reducer_ && !gradients_final_) reducer_->FinishUpdate();
  gradients_final_ = true;
}

std::vector<torch::Tensor> Updater::Trained() const {
  std::vector<torch::Tensor> trained;
  for (const auto& group : optimizer_.param_groups())
    trained.insert(trained.end(), group.params().begin(), group.params().end());
  return trained;
}

std::vector<torch::Tensor> Updater::InGradientOrder() const {
  const std::vector<torch::Tensor> trained = Trained();
  std::unordered_set<const void*> pending;
  for (const torch::Tensor& p : trained) pending.insert(p.unsafeGetTensorImpl());
  std::vector<torch::Tensor> ordered;
  ordered.reserve(trained.size());
  for (const torch::Tensor& p : model_->parameters())
    if (pending.erase(p.unsafeGetTensorImpl())) ordered.push_back(p);
  for (const torch::Tensor& p : trained)
    if (pending.erase(p.unsafeGetTensorImpl())) ordered.push_back(p);
  return ordered;
}

torch::Tensor Updater::Apply() {
  FinishGradients();
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
