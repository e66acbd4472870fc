// The model a bench leg times: the run config's architecture and model.head_modes, plus
// bench.fixed_heads made fixed (SAF) heads, on the leg's device, with the attention
// backend bench.backend asks for. Included only by LibTorch translation units.
#pragma once

#include <torch/torch.h>

#include "common/status.h"
#include "worker/exec/bench_settings.h"
#include "worker/exec/exec_config.h"
#include "worker/exec/model.h"

namespace headlab {

// Builds the model from `c` (seeded by c.seed), installs the fixed heads, moves it to
// `device` and selects the backend: "dense" turns the fused CUDA path off for this
// process so every layer runs the dense masked reference; "auto" keeps the default.
//
// Fixed heads get the uniform causal pattern (alpha = rho = 0, so P(i, j) = 1 / (i + 1);
// SAF eq. 3) rather than a fitted one: a fixed head's cost does not depend on the values
// of alpha and rho, and a timing leg must not need a calibration run first.
StatusOr<Gpt> MakeBenchModel(const ExecConfig& c, const BenchSettings& s, torch::Device device);

}  // namespace headlab
