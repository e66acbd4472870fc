// AdamW with decoupled weight decay on matrices only; its fused multi-tensor update on CUDA;
// gradient clipping without host synchronisation.
#include "payload/exec/optimizer.h"

#include <cmath>
#include <sstream>
#include <string>
#include <type_traits>

#include <torch/version.h>

// at::_fused_adamw_ and the tensor overload of _foreach_mul_ exist from LibTorch 2.1 on.
#define HEADLAB_HAVE_FUSED_ADAMW \
  (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1))

namespace headlab {
namespace {

// The key of a parameter's entry in Optimizer::state(): its TensorImpl address, as a string
// in LibTorch 1.x and as the pointer itself in later versions.
template <typename Map>
typename Map::key_type StateKey(const Map&, const torch::Tensor& p) {
  if constexpr (std::is_same_v<typename Map::key_type, std::string>) {
    // What LibTorch 1.x's c10::guts::to_string does (gone in 2.x): the pointer as printed.
    std::ostringstream key;
    key << p.unsafeGetTensorImpl();
    return key.str();
  } else {
    return static_cast<typename Map::key_type>(p.unsafeGetTensorImpl());
  }
}

#if HEADLAB_HAVE_FUSED_ADAMW  // the fused update's helper (the only caller)
// Returns p's AdamW state, creating it as torch::optim::AdamW::step does on first use.
torch::optim::AdamWParamState& StateFor(torch::optim::AdamW& opt, const torch::Tensor& p,
                                        bool amsgrad) {
  auto& state = opt.state();
  auto key = StateKey(state, p);
  auto it = state.find(key);
  if (it == state.end()) {
    auto s = std::make_unique<torch::optim::AdamWParamState>();
    s->step(0);
    s->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    s->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    if (amsgrad) s->max_exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    it = state.emplace(key, std::move(s)).first;
  }
  return static_cast<torch::optim::AdamWParamState&>(*it->second);
}
#endif

}  // namespace

std::unique_ptr<torch::optim::AdamW> MakeOptimizer(Gpt& model, const TrainConfig& t) {
  std::vector<torch::Tensor> decay, no_decay;
  for (const torch::Tensor& p : model->parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  auto opts = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(t.lr).betas({t.beta1, t.beta2}).eps(1e-8).weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, opts(t.weight_decay));
  groups.emplace_back(no_decay, opts(0.0));
  return std::make_unique<torch::optim::AdamW>(groups, torch::optim::AdamWOptions(t.lr));
}

torch::optim::AdamWParamState* AdamWStateOf(torch::optim::AdamW& optimizer,
                                            const torch::Tensor& param) {
  auto& state = optimizer.state();
  auto it = state.find(StateKey(state, param));
  if (it == state.end()) return nullptr;
  return &static_cast<torch::optim::AdamWParamState&>(*it->second);
}

bool AdamWStepper::Fused(const torch::Device& device) {
#if HEADLAB_HAVE_FUSED_ADAMW
  return device.is_cuda();
#else
  (void)device;
  return false;
#endif
}

void AdamWStepper::Step() {
  const auto& groups = opt_.param_groups();
  bool fused = false;
  for (const auto& g : groups)
    for (const torch::Tensor& p : g.params())
      if (p.grad().defined()) fused = Fused(p.device());
  if (!fused) {
    opt_.step();
    return;
  }
#if HEADLAB_HAVE_FUSED_ADAMW
  torch::NoGradGuard no_grad;
  for (const auto& g : groups) {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(g.options());
    std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps;
    for (const torch::Tensor& p : g.params()) {
      if (!p.grad().defined()) continue;
      TORCH_CHECK(!p.grad().is_sparse(), "AdamW does not support sparse gradients");
      torch::optim::AdamWParamState& s = StateFor(opt_, p, o.amsgrad());
      s.step(s.step() + 1);
      auto& [count, device_step] = device_steps_[p.unsafeGetTensorImpl()];
      if (!device_step.defined() || count != s.step() - 1 || device_step.device() != p.device()) {
        device_step =
            torch::full({}, double(s.step() - 1), torch::dtype(torch::kFloat).device(p.device()));
      }
      count = s.step();
      params.push_back(p);
      grads.push_back(p.grad());
      exp_avgs.push_back(s.exp_avg());
      exp_avg_sqs.push_back(s.exp_avg_sq());
      if (o.amsgrad()) max_sqs.push_back(s.max_exp_avg_sq());
      steps.push_back(device_step);
    }
    if (params.empty()) continue;
    torch::_foreach_add_(steps, 1);
    at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps, o.lr(),
                      std::get<0>(o.betas()), std::get<1>(o.betas()), o.weight_decay(), o.eps(),
                      o.amsgrad(), /*maximize=*/false);
  }
#endif
}

torch::Tensor ClipGradNorm(const std::vector<torch::Tensor>& params, double max_norm) {
  std::vector<torch::Tensor> grads;
  for (const torch::Tensor& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return torch::zeros({}, torch::kFloat);
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> norms = torch::_foreach_norm(grads, 2);
  torch::Tensor total = torch::stack(norms).norm();
  if (max_norm > 0 && std::isfinite(max_norm)) {
    torch::Tensor coef = (max_norm / (total + 1e-6)).clamp_max(1.0);
#if HEADLAB_HAVE_FUSED_ADAMW
    torch::_foreach_mul_(grads, coef);
#else
    for (torch::Tensor& g : grads) g.mul_(coef);
#endif
  }
  return total;
}

}  // namespace headlab
