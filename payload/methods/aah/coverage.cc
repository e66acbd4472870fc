// AAH §5.10 ACR and exact causal coverage; §7.4 buckets; §7.6 branch usage.
#include "payload/methods/aah/coverage.h"

#include <algorithm>

namespace headlab::aah {

double AttentionCoverageRatio(const WindowMap& windows, int64_t T) {
  // §5.10: T_q = T (decoder-only), T_k = W: sum T * W / (N_layer H T^2).
  double sum = 0;
  int64_t n = 0;
  for (const auto& layer : windows)
    for (int64_t w : layer) sum += double(T) * double(std::min(w, T)), ++n;
  return n == 0 ? 1.0 : sum / (double(n) * double(T) * double(T));
}

int64_t CausalPairs(int64_t W, int64_t T) {
  W = std::min(W, T);
  // sum_{t=1..T} min(t, W) = W (W + 1) / 2 + (T - W) W.
  return W * (W + 1) / 2 + (T - W) * W;
}

double ExactCausalCoverage(const WindowMap& windows, int64_t T) {
  double sum = 0;
  int64_t n = 0;
  for (const auto& layer : windows)
    for (int64_t w : layer) sum += double(CausalPairs(w, T)), ++n;
  return n == 0 ? 1.0 : sum / (double(n) * double(CausalPairs(T, T)));
}

double InferenceAcr(const std::map<int64_t, double>& usage, int64_t T) {
  double acr = 0;
  for (const auto& [w, f] : usage) acr += f * double(std::min(w, T)) / double(T);  // §7.6
  return acr;
}

void BranchUsage::Record(const WindowMap& windows) {
  for (const auto& layer : windows)
    for (int64_t w : layer) ++count_[w], ++total_;
}

std::map<int64_t, double> BranchUsage::Frequencies() const {
  std::map<int64_t, double> f;
  for (const auto& [w, c] : count_) f[w] = double(c) / double(total_);
  return f;
}

std::vector<double> WindowBucketDistribution(const WindowMap& windows,
                                             const std::vector<int64_t>& candidates) {
  std::vector<double> frac(candidates.size(), 0.0);
  if (candidates.empty()) return frac;
  int64_t n = 0;
  for (const auto& layer : windows)
    for (int64_t w : layer) {
      size_t b = 0;
      for (size_t i = 0; i < candidates.size(); ++i)
        if (candidates[i] <= w) b = i;
      frac[b] += 1, ++n;
    }
  for (double& f : frac) f /= double(std::max<int64_t>(1, n));
  return frac;
}

Json HeadMapsJson(const WindowMap& windows, const std::vector<std::vector<int>>& index, int64_t T) {
  Json rows = Json::array();
  for (size_t l = 0; l < windows.size(); ++l)
    for (size_t h = 0; h < windows[l].size(); ++h) {
      Json row = {{"layer", l},
                  {"head", h},
                  {"role", windows[l][h] >= T ? "ordinary" : "local"},
                  {"window", windows[l][h]}};
      if (l < index.size() && h < index[l].size()) row["score"] = index[l][h];
      rows.push_back(row);
    }
  return rows;
}

}  // namespace headlab::aah
