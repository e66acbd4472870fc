// One SAF intervention (Alg. 1 l.8-25): calibrate on held-out sequences, rank the heads
// that still use ordinary attention, fit compact patterns in score order until k pass (or
// fit a prescribed set), build the configured patterns and install them as fixed heads.
// Every phase is timed (Table 13). The caller keeps the optimiser state and the training
// sampler; nothing here touches either. Included only by LibTorch translation units.
#pragma once

#include <vector>

#include <torch/torch.h>

#include "common/status.h"
#include "payload/exec/attention.h"
#include "payload/exec/data.h"
#include "payload/methods/saf/calibration.h"
#include "payload/methods/saf/patterns.h"
#include "payload/methods/saf/report.h"
#include "payload/methods/saf/saf_options.h"
#include "payload/methods/saf/selection.h"

namespace headlab::saf {

struct InterventionInputs {
  ModelView view;                                 // calibration view (ViewOfGpt)
  std::vector<HybridAttentionImpl*> layers;       // where patterns are installed, per layer
  std::vector<torch::Tensor> calibration;         // token batches [B, T], T = model context
  std::vector<torch::Tensor> output_calibration;  // N_f batches for output-aware scores
  const GradientEma* gradient = nullptr;          // Q/K gradient EMA (gradient scores)
  int64_t k = 0;                                  // heads to install at this event
  std::vector<HeadId> prescribed;                 // non-empty: exactly these heads
  int64_t step = 0, event = 0;                    // for the report
  uint64_t selection_seed = 0;                    // saf.score random: the head shuffle
  bool install = true;  // false: select and fit only (the gradual schedule's final set)
};

struct InterventionResult {
  InterventionReport report;
  std::vector<HeadId> installed;       // selected heads in acceptance order (installed
                                       // unless inputs.install is false)
  std::vector<FixedPattern> patterns;  // parallel to installed when installed (for
                                       // pruned heads: default-constructed, unused)
};

// Runs one intervention. InvalidArgument when the configuration cannot be met (fewer than
// k fits pass, a prescribed head fails or is not ordinary, a gradient score without a
// gradient EMA, calibration length != model context, trainable patterns).
StatusOr<InterventionResult> RunIntervention(const SafOptions& options,
                                             const InterventionInputs& inputs);

// Installs one pattern as head `h` of `layer` (SetFixedCompact / SetFixedDense).
Status InstallPattern(HybridAttentionImpl& layer, int64_t h, const FixedPattern& p);

// Returns head `h` of `layer` to ordinary attention (a controller's undo). Its query/key
// weights were never changed by SAF itself.
void RevertToOrdinary(HybridAttentionImpl& layer, int64_t h);

// Draws `sequences` calibration windows of `context` tokens from `split` with a generator
// of its own (BatchSampler seeded by seed ^ kCalibrationSalt), grouped `batch` per tensor,
// on `device`: the training sampler and its order are untouched (App. C.1).
std::vector<torch::Tensor> DrawCalibrationBatches(const TokenSpan& split, int64_t context,
                                                  int64_t sequences, int64_t batch, uint64_t seed,
                                                  torch::Device device);

inline constexpr uint64_t kCalibrationSalt = 0x5AFCA11B2A7E0001ULL;
inline constexpr uint64_t kOutputCalibrationSalt = 0x5AFCA11B2A7E0002ULL;

// Returns the compact-fit options of `options` (saf.fit_*).
CompactFitOptions FitOptionsOf(const SafOptions& options);

}  // namespace headlab::saf
