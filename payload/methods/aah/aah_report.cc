// AAH run reporting: metric rows, summary values, provenance.
#include "payload/methods/aah/aah_report.h"

#include <map>

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
  v[kInferenceAcr] = eval_usage.executions() > 0 ? InferenceAcr(eval_usage.Frequencies(), o.context)
                                                 : AttentionCoverageRatio(w, o.context);
  std::vector<double> buckets = WindowBucketDistribution(w, o.windows);
  for (size_t k = 0; k < buckets.size(); ++k)
    v[kBucketPrefix + std::to_string(o.windows[k])] = buckets[k];
  return v;
}

Json BackendSummary(const ExecutionBackend& b, const WindowMap& windows, int64_t T) {
  Json v = {{metric::kAahBackendPrefix + b.name, 1.0}};
  const bool fused = b.name == kFusedCuda;
  int64_t local = 0, native = 0, fallback = 0;
  std::map<int64_t, std::pair<int64_t, int64_t>> bucket;  // W -> (heads, fallen back)
  for (size_t l = 0; l < windows.size(); ++l) {
    const bool layer_native =
        fused && (l >= b.layer_fallback.size() || b.layer_fallback[l].empty());
    for (int64_t W : windows[l]) {
      if (W >= T) continue;  // ordinary attention: not a local bucket
      ++local;
      native += layer_native;
      fallback += fused && !layer_native;
      bucket[W].first += 1;
      bucket[W].second += fused && !layer_native;
    }
  }
  if (local == 0) return v;
  v[metric::kAahNativeFrac] = double(native) / double(local);
  v[metric::kAahFallbackFrac] = double(fallback) / double(local);
  if (fused)
    for (const auto& [W, n] : bucket)
      v[metric::kAahFallbackPrefix + std::to_string(W)] = double(n.second) / double(n.first);
  return v;
}

Json BackendProvenance(const ExecutionBackend& b) {
  Json fallback = Json::array();
  for (size_t l = 0; l < b.layer_fallback.size(); ++l)
    if (!b.layer_fallback[l].empty())
      fallback.push_back("layer " + std::to_string(l) + ": " + b.layer_fallback[l]);
  Json p = {{"aah_backend", b.name},
            {"aah_backend_device", b.device},
            {"aah_backend_fallback", fallback}};
  if (!b.why_dense.empty()) p["aah_backend_why_dense"] = b.why_dense;
  return p;
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
          {"aah_resolution_state", ResolutionStateName(o.resolution_state)},
          {"aah_cache_step", o.cache_step},
          {"aah_norm_penalty", o.norm_penalty},
          {"aah_cluster_threshold", o.cluster_threshold},
          {"aah_scorer_hidden", o.scorer_hidden}};
}

Json FinalHeadMaps(const AahController& c) {
  return HeadMapsJson(c.windows(), c.indices(), c.options().context);
}

}  // namespace headlab::aah
