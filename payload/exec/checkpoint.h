// Exact training checkpoints (LibTorch translation units only).
//
// checkpoint := torch::serialize archive {
//   model:     module archive (parameters and buffers by name)
//   optimizer: AdamW archive (param groups, per-parameter step, exp_avg, exp_avg_sq)
//   step:      int64 scalar, updates completed
//   sampler:   uint8 tensor, BatchSampler::SaveState text
//   cpu_rng:   uint8 tensor, default CPU generator state
//   config:    uint8 tensor, canonical JSON of the run config that wrote it
//   loss_scale: float64 [2] = {scale, clean updates} (fp16 runs only; precision.h)
//   head_states: uint8 tensor, JSON [[{mode, window, sink, recent, dense, removed}]] per
//              layer/head; heads `removed` physically (attention.h RemoveHeads) are
//              removed from the model before its archive loads, so the shapes match
//              (so heads a method installed survive resume; compact fixed patterns are
//              model buffers; dense fixed patterns are not saved and refuse to restore)
// }
#pragma once

#include <map>
#include <string>

#include <torch/torch.h>

#include "common/status.h"
#include "payload/exec/model.h"

namespace headlab {

struct TrainProgress {
  int64_t step = 0;           // updates completed
  std::string sampler_state;  // BatchSampler::SaveState()
  // TrainHooks::SaveState of each method, by TrainHooks::name().
  std::map<std::string, std::string> method_states;
  // fp16's dynamic loss scale and clean-update count (precision.h LossScaler); 0: none.
  double loss_scale = 0;
  int64_t loss_scale_growth = 0;
};

// Serializes model, optimizer, progress and the CPU RNG state to bytes.
std::string SerializeCheckpoint(Gpt& model, torch::optim::Optimizer& optimizer,
                                const TrainProgress& progress, const std::string& config_json);

// Restores what SerializeCheckpoint wrote onto `model` and `optimizer` (already built with
// the same shapes and parameter groups) and fills *progress. Shape mismatches and
// unreadable archives are Corruption naming `source`.
Status RestoreCheckpoint(const std::string& bytes, const std::string& source, Gpt& model,
                         torch::optim::Optimizer& optimizer, TrainProgress* progress);

}  // namespace headlab
