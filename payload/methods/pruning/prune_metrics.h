// The names of the metrics the pruning controls report.
// The build lists this header's names in the metric catalog (cmake/metric_names.cmake,
// common/metric_catalog.h), so grids may compare on them; the method owns them, common/
// names none of them. Torch-free.
#pragma once

namespace headlab::metric {

// Pruning controls (SAF App. C.3.4, payload/methods/pruning/): summary values of a pruned
// arm, and the step row logged when the heads are removed.
inline constexpr const char* kPruneHeadsRemoved = "prune.heads_removed";       // query heads
inline constexpr const char* kPruneKvHeadsRemoved = "prune.kv_heads_removed";  // GQA groups
inline constexpr const char* kPruneParams = "prune.params";  // parameters after removal
inline constexpr const char* kPruneParamsBefore = "prune.params_before";
inline constexpr const char* kPruneStep = "prune.step";  // update it happened after
inline constexpr const char* kPruneEvalLossBefore = "prune.eval_loss_before";  // held-out, nats
inline constexpr const char* kPruneEvalLossAfter = "prune.eval_loss_after";

}  // namespace headlab::metric
