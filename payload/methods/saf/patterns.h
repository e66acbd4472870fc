// SAF fixed patterns (§3.2, App. C.2): the five candidates built from one head's calibration
// statistics. Sampled patterns are drawn once, at replacement, from a generator seeded by
// (pattern_seed, layer, head, kind) alone, so a head gets the same draw at every rate and
// replacement time (App. C.1) and the training generators are never touched. Included only
// by LibTorch translation units.
#pragma once

#include <cstdint>

#include <torch/torch.h>

#include "payload/methods/saf/calibration.h"
#include "payload/methods/saf/compact_fit.h"
#include "payload/methods/saf/saf_options.h"

namespace headlab::saf {

// A pattern ready to install: dense P [T, T] (float32), or compact alpha, rho, log Z [T].
struct FixedPattern {
  PatternKind kind = PatternKind::kMean;
  bool dense = false;
  torch::Tensor p;                  // dense
  torch::Tensor alpha, rho, log_z;  // compact
};

// Returns the CPU generator for one head's sampled pattern.
at::Generator PatternGenerator(uint64_t seed, int64_t layer, int64_t head, PatternKind kind);

// Returns softmax_causal of logits [T, T] (future entries ignored).
torch::Tensor CausalSoftmax(const torch::Tensor& logits);

// Sharp mean: softmax_causal(N^-1 sum_n S_n) (§3.2). Needs logit statistics.
torch::Tensor SharpMeanPattern(const CalibrationStats& stats, int64_t l, int64_t h);
// Gaussian sample: causal logits drawn independently from N(mean, var) per entry, then
// softmax_causal (§3.2). Needs logit statistics.
torch::Tensor GaussianSamplePattern(const CalibrationStats& stats, int64_t l, int64_t h,
                                    at::Generator gen);
// The Dirichlet concentration of each row, SAF eq. 18: c_i = (1 - ||m_i||^2) / sum_j u_ij - 1,
// times `scale`, bounded to [1e-2, 1e6]; rows whose variance or 1 - ||m_i||^2 is below
// 1e-12 (nearly deterministic) get 0, meaning "use the mean". mean, var: [T, T] -> [T].
torch::Tensor DirichletConcentration(const torch::Tensor& mean, const torch::Tensor& var,
                                     double scale);
// Dirichlet sample: each causal row drawn jointly from Dirichlet(c_i m_i), parameters
// floored at 1e-6, no softmax (App. C.2). Needs per-entry variance.
torch::Tensor DirichletSamplePattern(const CalibrationStats& stats, int64_t l, int64_t h,
                                     double scale, at::Generator gen);
// Structured random (control): alpha, rho iid N(0, 1) over T entries, log Z by FFT.
FixedPattern StructuredRandomPattern(int64_t T, at::Generator gen);

// Builds the configured pattern of head (l, h). `mean_fit` is the head's accepted compact
// fit of its mean (kMean with compact storage; its length is T). `stats` holds layer l's
// full statistics; only dense patterns read it (NeedsFullStatistics), the others accept
// nullptr. Dense patterns are float32 [T, T] on the CPU; compact vectors float32 [T] on
// the CPU.
FixedPattern BuildPattern(const SafOptions& options, const CalibrationStats* stats, int64_t l,
                          int64_t h, const CompactFit& mean_fit);

// Returns what `options` needs from calibration for its pattern.
CalibrationNeeds PatternNeeds(PatternKind kind);

// Returns true iff an intervention of `options` reads per-entry [T, T] statistics of some
// head beyond the compact fit's sufficient statistics: installed dense patterns (dense mean,
// sharp mean, Gaussian, Dirichlet) or the dense fitting path (its KL compares full rows).
// Then calibration keeps every layer's statistics at once; otherwise it runs in chunks.
bool NeedsFullStatistics(const SafOptions& options);

}  // namespace headlab::saf
