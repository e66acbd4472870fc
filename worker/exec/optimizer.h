// The optimiser of the training loop, shared by run kinds that must time or run exactly
// the same update (train, bench-update). Included only by LibTorch translation units.
#pragma once

#include <memory>

#include <torch/torch.h>

#include "worker/exec/exec_config.h"
#include "worker/exec/model.h"

namespace headlab {

// AdamW with weight decay on matrices (dim >= 2: embeddings, projections) only; vectors
// (LayerNorm gains and biases) are not decayed.
std::unique_ptr<torch::optim::AdamW> MakeOptimizer(Gpt& model, const TrainConfig& t);

}  // namespace headlab
