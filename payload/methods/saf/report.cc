// SAF intervention report: head map rows and the cost split, as JSON.
#include "payload/methods/saf/report.h"

namespace headlab::saf {

Json ToJson(const HeadMapRow& row) {
  Json j = {{"layer", row.layer},
            {"head", row.head},
            {"role", row.role},
            {"score", row.score},
            {"rank", row.rank}};
  j["fit_kl"] = row.fit_kl ? Json(*row.fit_kl) : Json(nullptr);
  j["pattern"] = row.pattern.empty() ? Json(nullptr) : Json(row.pattern);
  return j;
}

Json ToJson(const InterventionReport& r) {
  Json rows = Json::array();
  for (const HeadMapRow& row : r.head_map) rows.push_back(ToJson(row));
  return {{"event", r.event},
          {"step", r.step},
          {"schedule", r.schedule},
          {"score", r.score},
          {"pattern", r.pattern},
          {"storage", r.storage},
          {"k", r.k},
          {"cost_s",
           {{"calibration", r.cost.calibration_s},
            {"ranking", r.cost.ranking_s},
            {"fitting", r.cost.fitting_s},
            {"installation", r.cost.installation_s},
            {"total", r.cost.total_s()}}},
          {"fits", {{"run", r.fits_run}, {"rejected", r.fits_rejected}}},
          {"memory",
           {{"calibration_statistics_bytes_peak", r.memory.statistics_bytes_peak},
            {"calibration_layers_per_chunk", r.memory.layers_per_chunk},
            {"device_bytes_peak",
             r.memory.device_bytes_peak < 0 ? Json(nullptr) : Json(r.memory.device_bytes_peak)},
            {"device_peak_raised", r.memory.device_peak_raised}}},
          {"overlap_variance", r.overlap_variance >= 0 ? Json(r.overlap_variance) : Json()},
          {"variance_spread",
           {{"layer_sd", r.variance_layer_sd}, {"within_share", r.variance_within_share}}},
          {"head_map", rows}};
}

}  // namespace headlab::saf
