// Test helpers shared by the SAF tests (header only; LibTorch tests, CPU and GPU).
#pragma once

#include <vector>

#include <torch/torch.h>

#include "payload/exec/exec_config.h"
#include "payload/methods/saf/compact_fit.h"

namespace headlab::saf::testing {

// A tiny learned-position GPT shape: 2 layers x 4 heads, width 32, vocab 64.
inline ModelConfig TinyGptConfig(int64_t context, double mlp_ratio) {
  ModelConfig c;
  c.layers = 2;
  c.heads = 4;
  c.width = 32;
  c.context = context;
  c.mlp_ratio = mlp_ratio;
  c.vocab = 64;
  c.kv_heads = 4;
  c.pos = "learned";
  c.norm = "layernorm";
  return c;
}

// A causal row-stochastic matrix that is not of the compact form: the mean of a few random
// causal softmaxes with a content-like spike. float64 [T, T].
inline torch::Tensor RandomMeanPattern(int64_t T, uint64_t seed) {
  torch::manual_seed(seed);
  torch::Tensor s = torch::randn({4, T, T}, torch::kFloat64) * 2;
  torch::Tensor mask = torch::ones({T, T}, torch::kBool).tril();
  torch::Tensor a = torch::softmax(s.masked_fill(mask.logical_not(), -INFINITY), -1);
  return a.mean(0);
}

// Prepared targets of every kind a selection meets, for batched-vs-per-head fit checks:
// content-like means (0-2), an exact compact pattern (3), a strong attention sink (4), a
// sharp local diagonal (5), a one-hot permutation the fit rejects (6) and an extreme
// compact pattern whose normaliser spans hundreds of nats (7: the FFT path's clamp).
inline std::vector<torch::Tensor> AssortedTargets(int64_t T) {
  const auto f64 = torch::kFloat64;
  std::vector<torch::Tensor> out;
  for (uint64_t seed : {11, 12, 13}) out.push_back(PrepareTarget(RandomMeanPattern(T, seed)));
  torch::manual_seed(14);
  out.push_back(PrepareTarget(CompactPatternDense(torch::randn({T}, f64), torch::randn({T}, f64))));
  torch::Tensor sink = torch::full({T, T}, 1e-6, f64).tril();
  sink.select(1, 0).fill_(1.0);
  out.push_back(PrepareTarget(sink));
  out.push_back(PrepareTarget(torch::eye(T, f64) + 1e-12));
  torch::Tensor perm = torch::zeros({T, T}, f64);
  for (int64_t i = 0; i < T; ++i) perm[i][(7 * i + 3) % (i + 1)] = 1.0;
  out.push_back(PrepareTarget(perm));
  torch::Tensor alpha = torch::linspace(0, 300, T, f64), rho = -torch::arange(T, f64) * 40;
  out.push_back(PrepareTarget(CompactPatternDense(alpha, rho)));
  return out;
}

// The inputs of FitCompactBatched for prepared targets: their stacked marginals [n, T]
// and mean row entropies [n].
struct BatchInputs {
  Marginals eta;
  torch::Tensor entropy;
};
inline BatchInputs StackTargets(const std::vector<torch::Tensor>& targets) {
  std::vector<torch::Tensor> abs, rel;
  std::vector<double> entropy;
  for (const torch::Tensor& p : targets) {
    Marginals eta = SufficientStatistics(p);
    abs.push_back(eta.eta_abs);
    rel.push_back(eta.eta_rel);
    entropy.push_back(MeanRowEntropy(p));
  }
  return {{torch::stack(abs), torch::stack(rel)}, torch::tensor(entropy, torch::kFloat64)};
}

}  // namespace headlab::saf::testing
