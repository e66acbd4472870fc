// The names of the metrics AAH-v3 reports (rows and summary values).
// The build lists this header's names in the metric catalog (cmake/metric_names.cmake,
// common/metric_catalog.h), so grids may compare on them; the method owns them, common/
// names none of them. Torch-free.
#pragma once

namespace headlab::metric {

// AAH-v3 (payload/methods/aah/README.md). ACR is a routing diagnostic of the selected
// windows (AAH §5.10: the rectangular T * W proxy), never FLOPs.
// Training and inference ACR are different quantities (the paper's ACR is the training
// one, §5.10); their names say which.
inline constexpr const char* kAahAttnRatio = "aah.acr_train";  // rows + summary: training ACR
// sum min(t, W) / full causal
inline constexpr const char* kAahExactCoverage = "aah.exact_coverage";
inline constexpr const char* kAahLevelsUsed = "aah.levels_used";  // mean over layers (Fig. 3)
inline constexpr const char* kAahControlUpdates = "aah.control_updates";
// Seconds in the controller's updates (the observations' device time by CUDA events, plus
// the host's scoring and hierarchy): rows (cumulative) + summary. Training time, so inside
// train.tokens_per_s.
inline constexpr const char* kAahControllerS = "aah.controller_s";
// Of aah.controller_s, the host's update alone (features, scoring, hierarchy; seconds).
inline constexpr const char* kAahControllerHostS = "aah.controller_host_s";
// eval rows + summary: sum_W f_W W / T (§7.6)
inline constexpr const char* kAahAcr = "aah.acr_inference";
// + W: fraction of final heads (Fig. 4)
inline constexpr const char* kAahBucketPrefix = "aah.bucket.";
// Execution backend of the selected windows (§7.7): aah.backend.<name> = 1 for the one that
// ran (dense_masked | fused_cuda); of the final local-window (W < T) heads, the fraction the
// backend executed natively (block skipping; 0 for dense masks) and the fraction it could
// not and ran on dense masks instead (fallback), overall and per bucket W.
inline constexpr const char* kAahBackendPrefix = "aah.backend.";
inline constexpr const char* kAahNativeFrac = "aah.native_frac";
inline constexpr const char* kAahFallbackFrac = "aah.fallback_frac";
inline constexpr const char* kAahFallbackPrefix = "aah.fallback.";  // + W

}  // namespace headlab::metric
