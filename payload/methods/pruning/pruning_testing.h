// Test helper for the pruning tests (LibTorch translation units only).
#pragma once

#include <memory>
#include <vector>

#include <torch/torch.h>

#include "payload/exec/model.h"

namespace headlab::testing {

// AdamW with the training loop's two groups (matrices decayed, vectors not), so checkpoints
// written by the loop restore into it.
inline std::unique_ptr<torch::optim::AdamW> TwoGroupAdamW(Gpt& model, double lr = 1e-2) {
  std::vector<torch::Tensor> decay, no_decay;
  for (const torch::Tensor& p : model->parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(
                                 torch::optim::AdamWOptions(lr).weight_decay(0.1)));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(
                                    torch::optim::AdamWOptions(lr).weight_decay(0.0)));
  return std::make_unique<torch::optim::AdamW>(groups, torch::optim::AdamWOptions(lr));
}

}  // namespace headlab::testing
