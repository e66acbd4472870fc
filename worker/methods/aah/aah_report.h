// What an AAH run reports (AAH §5.10, §7.2-7.6): metric names, training-row metrics
// (attn_ratio, exact coverage, hierarchy levels used), summary values (inference ACR from
// branch usage, window-bucket distribution) and provenance fields. ACR is a selected-window
// routing diagnostic and is never reported as FLOPs (§5.10, §6). Torch-free.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/json.h"
#include "worker/methods/aah/controller.h"
#include "worker/methods/aah/coverage.h"

namespace headlab::aah {

// Metric names (proposed for common/metric_names.h; README.md).
inline constexpr const char* kAttnRatio = "aah.attn_ratio";          // training-row ACR (§5.10)
inline constexpr const char* kExactCoverage = "aah.exact_coverage";  // sum min(t, W) / full causal
inline constexpr const char* kLevelsUsed = "aah.levels_used";        // mean over layers (Fig. 3)
inline constexpr const char* kControlUpdates = "aah.control_updates";
inline constexpr const char* kInferenceAcr = "aah.acr";              // sum_W f_W W / T (§7.6)
inline constexpr const char* kWindowFracPrefix = "aah.window_frac.";  // + bucket index (§7.4)

// Returns the metrics of a logged training row for the windows executing now.
std::vector<std::pair<std::string, double>> TrainRowMetrics(const AahController& c);

// Returns the summary values: inference ACR from `eval_usage` (the windows' ACR when
// nothing was recorded), the final training-path attn_ratio and exact coverage, levels used,
// control updates and one aah.window_frac.<k> per candidate window (Fig. 4's row).
Json SummaryValues(const AahController& c, const BranchUsage& eval_usage);

// Returns the provenance fields that identify the policy (regime, control, candidate
// windows, W_min, hierarchy, control interval, alpha, beta, lambda, scorer width).
Json ProvenanceFields(const AahOptions& o);

// Returns the head_maps rows of the final windows (coverage.h HeadMapsJson).
Json FinalHeadMaps(const AahController& c);

}  // namespace headlab::aah
