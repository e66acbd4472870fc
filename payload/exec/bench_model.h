// The model a bench leg times: the run config's architecture and model.head_modes, plus
// bench.fixed_heads made fixed (SAF) heads, on the leg's device, in the precision and with
// the attention implementation of train.precision / train.attention (run_setup.h).
// Included only by LibTorch translation units.
#pragma once

#include <torch/torch.h>

#include "common/status.h"
#include "payload/exec/bench_settings.h"
#include "payload/exec/exec_config.h"
#include "payload/exec/model.h"

namespace headlab {

// Builds the model from `c` (seeded by c.seed) into *model with its weights in the compute
// dtype of train.precision on `device` (bf16 on CUDA by default: no fp32 copy of the
// parameters, no per-forward casts), installs the fixed heads, moves it to `device` and
// configures its execution (ConfigureExecution, whose errors it returns).
//
// Fixed heads get the uniform causal pattern (alpha = rho = 0, so P(i, j) = 1 / (i + 1);
// SAF eq. 3) rather than a fitted one: a fixed head's cost does not depend on the values
// of alpha and rho, and a timing leg must not need a calibration run first.
Status MakeBenchModel(const ExecConfig& c, const BenchSettings& s, torch::Device device,
                      Gpt* model);

}  // namespace headlab
