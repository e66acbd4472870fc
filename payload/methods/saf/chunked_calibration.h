// SAF calibration in bounded memory (§3.1, App. A.1-A.3 at the 1B / 8K scale). A layer's
// running moments are [H, T, T] fp32 (16 heads at T = 8192: 4.3 GB), so holding every
// layer at once does not fit one GPU. But ranking and the compact fit need from each head
// only scalars and O(T) numbers: its eq. 1 variance and eq. 2 forward KL, the two marginals
// of its prepared target P = PrepareTarget(A_hat) (eq. 4's sufficient statistics) and P's
// mean row entropy (the fit's KL). So the pass runs in chunks of consecutive layers sized to
// a memory budget: each chunk's moments are accumulated over all calibration batches (the
// residual stream entering the chunk is cached per batch, so every layer's forward runs
// once), reduced head by head to those summaries and freed before the next chunk. The
// summaries are what the full pass would compute from the same moments: the rankings,
// selections and fits do not depend on the chunking. Included only by LibTorch units.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <torch/torch.h>

#include "payload/methods/saf/calibration.h"
#include "payload/methods/saf/compact_fit.h"

namespace headlab::saf {

// Everything ranking and the compact fit need of one head's complete statistics.
struct HeadSummary {
  double variance = 0;        // SAF eq. 1
  double forward_kl = 0;      // SAF eq. 2
  Marginals eta;              // of P = PrepareTarget(A_hat, floor): float64 [T] each, CPU
  double target_entropy = 0;  // MeanRowEntropy(P)
};

// The summaries of all L x H heads (u = l H + h) and what the pass held.
struct CalibrationSummary {
  int64_t layers = 0, heads = 0;
  std::vector<HeadSummary> head;
  int64_t layers_per_chunk = 0, chunks = 0;
  // Largest bytes of statistics and cached residual streams held at once (what
  // saf.calib_memory_gb bounds; the working set of one batch's attention comes on top).
  int64_t statistics_bytes_peak = 0;
  // CUDA: the caching allocator's peak allocated bytes when the pass ended, and whether the
  // pass raised it (then it is the pass's own peak); -1 on the CPU.
  int64_t device_bytes_peak = -1;
  bool device_peak_raised = false;

  const HeadSummary& at(int64_t l, int64_t h) const { return head[size_t(l * heads + h)]; }
  std::vector<double> VarianceScores() const;   // [L H]
  std::vector<double> ForwardKlScores() const;  // [L H]
};

// Reduces every head of `stats` (complete statistics of model layers first_layer, ...) to
// its summary in `out` (sized for the whole model). `floor`: PrepareTarget's floor.
void SummarizeLayers(const CalibrationStats& stats, int64_t first_layer, double floor,
                     CalibrationSummary* out);

// Returns how many layers of `layer_bytes` statistics each a chunk takes under
// `memory_bytes`: all `layers` when they fit together (one chunk, nothing cached), else as
// many as fit beside `cache_bytes` of cached residual streams, at least 1.
int64_t LayersPerChunk(int64_t layers, int64_t layer_bytes, int64_t cache_bytes,
                       int64_t memory_bytes);

struct ChunkedCalibrationOptions {
  CalibrationNeeds needs;                   // per-entry statistics beyond the mean
  int64_t memory_bytes = int64_t(8) << 30;  // saf.calib_memory_gb
  double floor = 1e-9;                      // PrepareTarget's floor (saf fit options)
  bool keep_stats = false;                  // keep the full statistics of every layer (one chunk)
  // Non-null: also run the output-aware pass (App. A.3) on these batches, chunk by chunk.
  const std::vector<torch::Tensor>* output_batches = nullptr;
  int64_t output_queries = 64;
};

struct ChunkedCalibration {
  CalibrationSummary summary;
  OutputStats outputs;                    // when output_batches was given
  std::optional<CalibrationStats> stats;  // when keep_stats
};

// Runs the calibration pass over `batches` ([B, T] token tensors) in layer chunks (see the
// top of this file), plus the output-aware pass when asked. NoGradGuard, eval mode
// (restored); weights untouched. The summaries, output sums and kept statistics are those
// of Calibrate / CalibrateOutputs on the same batches.
ChunkedCalibration CalibrateInChunks(const ModelView& model,
                                     const std::vector<torch::Tensor>& batches,
                                     const ChunkedCalibrationOptions& options);

}  // namespace headlab::saf
