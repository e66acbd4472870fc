// Physical head pruning with optimiser state (SAF App. C.3.4: "physically remove the
// Q/K/V rows and output-projection columns and keep the retained AdamW state").
// LibTorch translation units only.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "payload/exec/model.h"
#include "payload/exec/optimizer.h"
#include "payload/methods/pruning/selection.h"

namespace headlab {

struct RemovalCounts {
  int64_t heads = 0;     // query heads removed now
  int64_t kv_heads = 0;  // kv heads removed now (GQA: once all their query heads are gone)
};

// Removes `heads` from `model` (HybridAttentionImpl::RemoveHeads) and, when `optimizer` is
// given, slices each shrunk parameter's AdamW moments (exp_avg, exp_avg_sq, max_exp_avg_sq)
// along the same dimension: the retained rows' moments and the step counts are kept
// bit-identical, so training continues as if the removed rows had never been there. The
// parameters keep their identity, so the optimiser's groups need no rebuilding.
RemovalCounts RemoveHeadsPhysically(Gpt& model, const std::vector<HeadRef>& heads,
                                    torch::optim::AdamW* optimizer);

// Returns the number of scalar parameters of `model`.
int64_t ParameterCount(Gpt& model);

}  // namespace headlab
