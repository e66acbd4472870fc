// What one SAF intervention reports: the head map (docs/DESIGN.md "head_maps": layer, head, role,
// score, fit KL) and its one-time cost split into calibration, ranking, fitting and
// installation (SAF Table 13's columns). Torch-free, JSON-able.
//
// report := {"event": int, "step": int, "schedule": str, "score": str, "pattern": str,
//            "storage": str, "k": int, "cost_s": {"calibration": s, "ranking": s,
//            "fitting": s, "installation": s, "total": s},
//            "fits": {"run": int, "rejected": int},
//            "memory": {"calibration_statistics_bytes_peak": int, "calibration_layers_per_chunk":
//                       int, "device_bytes_peak": int|null, "device_peak_raised": bool},
//            "overlap_variance": int|null,  (selected heads also in the variance selection)
//            "variance_spread": {"layer_sd": [number], "within_share": number},
//            "head_map": [{"layer", "head", "role": "fixed"|"ordinary"|"pruned", "score",
//                          "rank", "fit_kl": number|null, "pattern": str|null}]}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"

namespace headlab::saf {

struct HeadMapRow {
  int64_t layer = 0, head = 0;
  std::string role = "ordinary";  // the head mode after the event: "fixed", "ordinary", "pruned"
  double score = 0;               // the selection score (or rank sum; order position for random)
  int64_t rank = 0;               // position in candidate order, 0 = first
  std::optional<double> fit_kl;   // set for every head that was fitted
  std::string pattern;            // installed pattern kind, fixed heads only
};

// Seconds spent in each phase of one intervention (Table 13).
struct InterventionCost {
  double calibration_s = 0, ranking_s = 0, fitting_s = 0, installation_s = 0;
  double total_s() const { return calibration_s + ranking_s + fitting_s + installation_s; }
};

// What calibration held (chunked under saf.calib_memory_gb; chunked_calibration.h).
struct CalibrationMemory {
  int64_t statistics_bytes_peak = 0, layers_per_chunk = 0;
  int64_t device_bytes_peak = -1;   // CUDA allocator peak at the pass's end; -1 on the CPU
  bool device_peak_raised = false;  // the pass set that peak (it is the pass's own)
};

struct InterventionReport {
  int64_t event = 0;  // 0 for one-time; the group / increment index otherwise
  int64_t step = 0;   // completed updates when it ran
  std::string schedule, score, pattern, storage;
  int64_t k = 0;  // heads installed by this event
  InterventionCost cost;
  CalibrationMemory memory;
  int64_t fits_run = 0, fits_rejected = 0;
  // Heads of this event also in the variance selection the same event would make (same
  // calibration, eligible heads and k); -1 when not computed (prescribed heads).
  int64_t overlap_variance = -1;
  // The within-layer spread of the variance scores (eq. 1) of every head (selection.h).
  std::vector<double> variance_layer_sd;
  double variance_within_share = 0;
  std::vector<HeadMapRow> head_map;  // every head, layer-major
};

Json ToJson(const HeadMapRow& row);
Json ToJson(const InterventionReport& report);

}  // namespace headlab::saf
