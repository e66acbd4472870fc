// What an AAH run reports (AAH §5.10, §7.2-7.6): metric names, training-row metrics
// (attn_ratio, exact coverage, hierarchy levels used), summary values (inference ACR from
// branch usage, window-bucket distribution) and provenance fields. ACR is a selected-window
// routing diagnostic and is never reported as FLOPs (§5.10, §6). Torch-free.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/json.h"
#include "payload/methods/aah/aah_metrics.h"
#include "payload/methods/aah/controller.h"
#include "payload/methods/aah/coverage.h"

namespace headlab::aah {

// Metric names (aah_metrics.h).
inline constexpr const char* kAttnRatio = metric::kAahAttnRatio;  // training-row ACR (§5.10)
inline constexpr const char* kExactCoverage =
    metric::kAahExactCoverage;                                      // sum min(t, W) / full causal
inline constexpr const char* kLevelsUsed = metric::kAahLevelsUsed;  // mean over layers (Fig. 3)
inline constexpr const char* kControlUpdates = metric::kAahControlUpdates;
inline constexpr const char* kInferenceAcr = metric::kAahAcr;           // sum_W f_W W / T (§7.6)
inline constexpr const char* kBucketPrefix = metric::kAahBucketPrefix;  // + W (§7.4, Fig. 4)

// Execution backend names (§7.7): the dense masks of the hybrid layer (the reference, on
// any device) and the fused block-skipping CUDA kernels (payload/exec/attention_cuda.h).
inline constexpr const char* kDenseMasked = "dense_masked";
inline constexpr const char* kFusedCuda = "fused_cuda";

// Which backend executed a run's selected windows.
struct ExecutionBackend {
  std::string name;    // kDenseMasked | kFusedCuda
  std::string device;  // e.g. "cpu", "cuda:0"
  // Under kFusedCuda, per layer: "" when the kernels run the layer, else why it falls back
  // to the dense masks. Empty under kDenseMasked.
  std::vector<std::string> layer_fallback;
  // Under kDenseMasked on a CUDA device: why the fused kernels are not used.
  std::string why_dense;
};

// Returns the metrics of a logged training row for the windows executing now.
std::vector<std::pair<std::string, double>> TrainRowMetrics(const AahController& c);

// Returns the summary values: inference ACR from `eval_usage` (the windows' ACR when
// nothing was recorded), the final training-path attn_ratio and exact coverage, levels used,
// control updates and one aah.bucket.<W> per candidate window W (Fig. 4's row).
Json SummaryValues(const AahController& c, const BranchUsage& eval_usage);

// Returns the backend's summary values for the executed `windows`: aah.backend.<name> = 1;
// over the local-window heads (W < T; none: both fractions left out) the fraction run
// natively by block skipping (kFusedCuda on a layer it takes) and the fraction that fell
// back to dense masks (kFusedCuda on a layer it cannot take: AAH §7.7 reports these
// rather than counting them as backend-realized), and under kFusedCuda one
// aah.fallback.<W> per local bucket present (the fraction of that bucket's heads).
Json BackendSummary(const ExecutionBackend& b, const WindowMap& windows, int64_t T);

// Returns the backend's provenance fields: aah_backend, aah_backend_device,
// aah_backend_fallback (["layer L: why", ...]) and, when set, aah_backend_why_dense.
Json BackendProvenance(const ExecutionBackend& b);

// Returns the provenance fields that identify the policy (regime, control, candidate
// windows, W_min, hierarchy, control interval, alpha, beta, lambda, scorer width).
Json ProvenanceFields(const AahOptions& o);

// Returns the head_maps rows of the final windows (coverage.h HeadMapsJson).
Json FinalHeadMaps(const AahController& c);

}  // namespace headlab::aah
