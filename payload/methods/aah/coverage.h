// AAH's selected-window diagnostics (AAH §5.10, §7.4, §7.6): the Attention Coverage Ratio
// (the rectangular T * W routing proxy), the exact causal-pair coverage beside it, branch
// usage and the window-bucket distribution. ACR is a routing diagnostic, never FLOPs
// (§5.10, §6). Torch-free.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "common/json.h"

namespace headlab::aah {

// windows[layer][head] = the executed W_h (values above T count as T).
using WindowMap = std::vector<std::vector<int64_t>>;

// ACR = sum_m sum_h T * T_k^(m,h) / (N_layer H T^2) = mean(min(W_h, T)) / T (AAH §5.10).
double AttentionCoverageRatio(const WindowMap& windows, int64_t T);

// Returns sum_{t=1..T} min(t, W): the causal query-key pairs a local(W) head allows.
int64_t CausalPairs(int64_t W, int64_t T);

// The exact causal-pair coverage: sum over heads of sum_t min(t, W_h), over the same sum for
// full causal attention (N_layer H T (T + 1) / 2); 1 when every W_h >= T (AAH §5.10).
double ExactCausalCoverage(const WindowMap& windows, int64_t T);

// Inference ACR from branch usage: sum_W f_W W / T with f_W the fraction of head
// executions that ran at window W (AAH §7.6, Table 6).
double InferenceAcr(const std::map<int64_t, double>& usage, int64_t T);

// Counts head executions per window over forward passes (AAH §7.6 branch usage).
class BranchUsage {
 public:
  // Records one forward pass executing `windows`.
  void Record(const WindowMap& windows);
  // Returns f_W for each window seen (fractions summing to 1; empty before any Record).
  std::map<int64_t, double> Frequencies() const;
  int64_t executions() const { return total_; }

 private:
  std::map<int64_t, int64_t> count_;
  int64_t total_ = 0;
};

// Returns, per candidate window (in `candidates` order), the fraction of layer-head
// assignments at that window (AAH §7.4, Fig. 4); an assignment between candidates counts
// for the largest candidate not above it (the smallest when below all).
std::vector<double> WindowBucketDistribution(const WindowMap& windows,
                                             const std::vector<int64_t>& candidates);

// head_maps rows (schema: layer, head, role, score, window): role "local" for W < T and
// "ordinary" for W >= T, score = the smoothed resolution index c_tilde.
Json HeadMapsJson(const WindowMap& windows, const std::vector<std::vector<int>>& index, int64_t T);

}  // namespace headlab::aah
