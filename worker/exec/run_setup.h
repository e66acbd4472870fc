// What every run kind that builds the model sets up the same way: the precision the model
// computes in (train.precision) and the attention implementation (train.attention), and
// the provenance fields that name them. Included only by LibTorch translation units.
#pragma once

#include <torch/torch.h>

#include "common/json.h"
#include "common/status.h"
#include "worker/exec/exec_config.h"
#include "worker/exec/model.h"

namespace headlab {

// Resolves train.precision for `device` and sets it on `model`; sets the process's
// attention mode from train.attention. InvalidArgument naming the key on bad values.
Status ConfigureExecution(Gpt& model, const TrainConfig& t, const torch::Device& device);

// Provenance of the execution set up above: precision, attention (mode), attention_backend
// and the compute dtype.
Json ExecutionProvenance(const Gpt& model, const torch::Device& device);

// Per-layer attention paths after a forward (attention_cuda.h LayerPathLabel), grouped:
// {"<label>": [layers...]}, e.g. {"sdpa[9] fixed_gemm[3]": [0, 1, ...]}.
Json AttentionPaths(Gpt& model);

// Per-layer measured backend choices (train.attention = auto; attention_cuda.h
// LayerPlanChoices): [{"layer": l, "shape": "B=8 T=4096 BFloat16 fwd+bwd", "chosen": label,
// "candidates_ms": {label: ms, ...}}, ...], layers ascending; [] where nothing was measured.
Json AttentionChoices(Gpt& model);

}  // namespace headlab
