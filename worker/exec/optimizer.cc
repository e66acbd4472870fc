// AdamW with decoupled weight decay on matrices only.
#include "worker/exec/optimizer.h"

namespace headlab {

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

}  // namespace headlab
