// Gate-Taylor head importance (SAF eq. 19) measured through the model's own hybrid-head
// layers, so it holds for any head states and for layers already pruned physically.
// LibTorch translation units only.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "payload/exec/data.h"
#include "payload/exec/model.h"

namespace headlab {

// Returns I[l][h] = mean over the sequences of |dL_n/dxi_lh| at xi = 1, where xi_lh gates
// head h's output in layer l before the output projection (HybridAttentionImpl::head_gate)
// and L_n is sequence n's mean next-token loss. `batches`: token windows [B, T + 1] each.
// Gradients go to the gates only (torch::autograd::grad): parameters' .grad are untouched.
// Eval mode during the pass, the previous mode restored. Removed heads score 0.
std::vector<std::vector<double>> GateTaylorImportance(Gpt& model,
                                                      const std::vector<torch::Tensor>& batches);

// Draws `sequences` calibration windows [<= batch, context + 1] from `split` with a
// BatchSampler of seed `seed` (its own generator: the training sampler does not move).
std::vector<torch::Tensor> CalibrationBatches(const TokenSpan& split, uint64_t seed,
                                              int64_t context, int64_t sequences, int64_t batch,
                                              torch::Device device);

}  // namespace headlab
