// AAH run reporting: metric rows, summary values, provenance.
#include "worker/methods/aah/aah_report.h"

namespace headlab::aah {

std::vector<std::pair<std::string, double>> TrainRowMetrics(const AahController& c) {
  const WindowMap w = c.windows();
  const int64_t T = c.options().context;
  return {{kAttnRatio, AttentionCoverageRatio(w, T)},
          {kExactCoverage, ExactCausalCoverage(w, T)},
          {kLevelsUsed, c.levels_used()},
          {kControlUpdates, double(c.updates())}};
}

Json SummaryValues(const AahController& c, const BranchUsage& eval_usage) {
  const WindowMap w = c.windows();
  const AahOptions& o = c.options();
  Json v = Json::object();
  for (const auto& [key, value] : TrainRowMetrics(c)) v[key] = value;
  v[kInferenceAcr] = eval_usage.executions() > 0
                         ? InferenceAcr(eval_usage.Frequencies(), o.context)
                         : AttentionCoverageRatio(w, o.context);
  std::vector<double> buckets = WindowBucketDistribution(w, o.windows);
  for (size_t k = 0; k < buckets.size(); ++k) v[kWindowFracPrefix + std::to_string(k)] = buckets[k];
  return v;
}

Json ProvenanceFields(const AahOptions& o) {
  return {{"aah_regime", RegimeName(o.regime)},
          {"aah_control", ControlName(o.control)},
          {"aah_windows", o.windows},
          {"aah_min_window", o.min_window},
          {"aah_hierarchy", o.hierarchy},
          {"aah_control_every", o.control_every},
          {"aah_feature_ema", o.feature_ema},
          {"aah_resolution_ema", o.resolution_ema},
          {"aah_norm_penalty", o.norm_penalty},
          {"aah_cluster_threshold", o.cluster_threshold},
          {"aah_scorer_hidden", o.scorer_hidden},
          {"aah_backend", "dense_masked"}};  // §5.8: the reference execution path
}

Json FinalHeadMaps(const AahController& c) {
  return HeadMapsJson(c.windows(), c.indices(), c.options().context);
}

}  // namespace headlab::aah
