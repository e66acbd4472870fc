// The names of the metrics SAF reports (at each intervention event and in the summary).
// The build lists this header's names in the metric catalog (cmake/metric_names.cmake,
// common/metric_catalog.h), so grids may compare on them; the method owns them, common/
// names none of them. Torch-free.
#pragma once

namespace headlab::metric {

// SAF (payload/methods/saf/): emitted at each intervention event and summarised at the end
// (counts: the heads' state after the event; costs: Table 13's split, summed over events).
inline constexpr const char* kSafHeadsFixed = "saf.heads_fixed";  // heads with a fixed pattern
// pruning control (saf.method prune)
inline constexpr const char* kSafHeadsPruned = "saf.heads_pruned";
// fixed with trainable alpha/rho
inline constexpr const char* kSafHeadsTrainable = "saf.heads_trainable";
inline constexpr const char* kSafEvents = "saf.events";         // interventions run (undo included)
inline constexpr const char* kSafEventStep = "saf.event_step";  // updates before the last event
inline constexpr const char* kSafCostCalibrationS = "saf.cost.calibration_s";
inline constexpr const char* kSafCostRankingS = "saf.cost.ranking_s";
inline constexpr const char* kSafCostFittingS = "saf.cost.fitting_s";
inline constexpr const char* kSafCostInstallationS = "saf.cost.installation_s";
inline constexpr const char* kSafCostTotalS = "saf.cost.total_s";
inline constexpr const char* kSafFitKlMax = "saf.fit_kl_max";    // nats/row, over installed heads
inline constexpr const char* kSafFitKlMean = "saf.fit_kl_mean";  // nats/row, over installed heads
inline constexpr const char* kSafFitsRun = "saf.fits_run";
inline constexpr const char* kSafFitsRejected = "saf.fits_rejected";  // KL above saf.fit_max_kl
// Of the last event (report.h): its heads also in the variance selection it would have made,
// and the within-layer share of the variance scores' sum of squares (selection.h).
inline constexpr const char* kSafOverlapVariance = "saf.overlap_variance";
inline constexpr const char* kSafVarianceWithinShare = "saf.variance_within_share";

}  // namespace headlab::metric
