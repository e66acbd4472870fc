#include "payload/exec/attention.h"

#include <cmath>

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

constexpr int64_t kWidth = 24, kHeads = 4, kContext = 10;

// An independent per-head reference: loops over (q, k) for the mask, no shared helpers.
torch::Tensor ReferenceHead(HybridAttention& layer, const torch::Tensor& x, int64_t h,
                            const HeadState& s, const torch::Tensor& dense_p = {}) {
  const int64_t T = x.size(1), d = layer->head_dim();
  const int64_t kv = h / (layer->heads() / (layer->k_proj->weight.size(0) / d));
  auto rows = [&](const torch::Tensor& w, int64_t i) { return w.narrow(0, i * d, d); };
  torch::Tensor v = torch::matmul(x, rows(layer->v_proj->weight, kv).t());  // [B, T, d]
  if (s.mode == HeadMode::kPruned) return torch::zeros_like(v);
  if (s.mode == HeadMode::kFixed) return torch::matmul(dense_p.narrow(0, 0, T).narrow(1, 0, T), v);
  torch::Tensor q = torch::matmul(x, rows(layer->q_proj->weight, h).t());
  torch::Tensor k = torch::matmul(x, rows(layer->k_proj->weight, kv).t());
  torch::Tensor scores = torch::matmul(q, k.transpose(1, 2)) / std::sqrt(double(d));
  torch::Tensor mask = torch::zeros({T, T}, torch::kBool);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j <= i; ++j) {
      bool ok = true;
      if (s.mode == HeadMode::kLocal) ok = i - s.window < j;
      if (s.mode == HeadMode::kStreaming) ok = j < s.sink || i - j < s.recent;
      mask[i][j] = ok;
    }
  scores = scores.masked_fill(mask.logical_not(), -INFINITY);
  return torch::matmul(torch::softmax(scores, -1), v);
}

torch::Tensor Reference(HybridAttention& layer, const torch::Tensor& x,
                        const std::vector<HeadState>& states,
                        const std::vector<torch::Tensor>& dense = {}) {
  std::vector<torch::Tensor> outs;
  for (int64_t h = 0; h < layer->heads(); ++h)
    outs.push_back(ReferenceHead(layer, x, h, states[size_t(h)],
                                 size_t(h) < dense.size() ? dense[size_t(h)] : torch::Tensor()));
  return layer->o_proj(torch::cat(outs, -1));
}

torch::Tensor Bools(std::vector<int64_t> v) { return torch::tensor(v).to(torch::kBool); }

torch::Tensor RandomCausalPattern(int64_t T) {
  torch::Tensor p = torch::rand({T, T}).tril() + 0.01;
  p = p.tril();
  return p / p.sum(1, true);
}

TEST_CASE("attention: all heads ordinary equals plain causal attention") {
  torch::manual_seed(0);
  for (int64_t kv_heads : {4, 2, 1}) {
    HybridAttention layer(kWidth, kHeads, kv_heads, kContext);
    torch::Tensor x = torch::randn({3, 7, kWidth});
    std::vector<HeadState> states(kHeads);
    INFO("kv_heads " << kv_heads);
    CHECK(torch::allclose(layer->forward(x), Reference(layer, x, states), 1e-5, 1e-6));
  }
}

TEST_CASE("attention: local(W >= T) equals ordinary, smaller W differs") {
  torch::manual_seed(1);
  HybridAttention layer(kWidth, kHeads, kHeads, kContext);
  torch::Tensor x = torch::randn({2, kContext, kWidth});
  torch::Tensor ordinary = layer->forward(x);
  for (int64_t h = 0; h < kHeads; ++h) layer->SetHeadState(h, {HeadMode::kLocal, kContext + h});
  CHECK(torch::allclose(layer->forward(x), ordinary, 1e-6, 1e-7));
  layer->SetHeadState(2, {HeadMode::kLocal, 3});
  CHECK(!torch::allclose(layer->forward(x), ordinary, 1e-4, 1e-5));
}

TEST_CASE("attention: mixed heads match the per-head reference in original head order") {
  torch::manual_seed(2);
  HybridAttention layer(kWidth, kHeads, 2, kContext);
  torch::Tensor x = torch::randn({2, 9, kWidth});
  std::vector<HeadState> states = {{HeadMode::kStreaming, 0, 2, 3},
                                   {HeadMode::kFixed},
                                   {HeadMode::kPruned},
                                   {HeadMode::kLocal, 4}};
  torch::Tensor p = RandomCausalPattern(kContext);
  layer->SetHeadState(0, states[0]);
  layer->SetFixedDense(1, p);
  layer->SetHeadState(2, states[2]);
  layer->SetHeadState(3, states[3]);
  torch::Tensor expected = Reference(layer, x, states, {{}, p});
  CHECK(torch::allclose(layer->forward(x), expected, 1e-5, 1e-6));
}

TEST_CASE("attention: a fixed head with dense P computes P V") {
  torch::manual_seed(3);
  HybridAttention layer(kWidth, kHeads, kHeads, kContext);
  torch::Tensor x = torch::randn({2, kContext, kWidth});
  std::vector<torch::Tensor> ps;
  std::vector<HeadState> states(kHeads, HeadState{HeadMode::kFixed});
  for (int64_t h = 0; h < kHeads; ++h) {
    ps.push_back(RandomCausalPattern(kContext));
    layer->SetFixedDense(h, ps.back());
  }
  CHECK(torch::allclose(layer->forward(x), Reference(layer, x, states, ps), 1e-5, 1e-6));
}

TEST_CASE("attention: the compact pattern is SAF eq. 3 and its rows sum to one") {
  torch::manual_seed(4);
  torch::Tensor alpha = torch::randn({kContext}), rho = torch::randn({kContext});
  torch::Tensor log_z = CompactLogNormalizer(alpha, rho);
  torch::Tensor p = CompactPattern(alpha, rho, log_z, kContext);
  CHECK(torch::allclose(p.sum(1), torch::ones({kContext}), 1e-5, 1e-6));
  CHECK(p[2][5].item<float>() == 0.0f);  // causal
  double z = 0;
  for (int k = 0; k <= 6; ++k) z += std::exp(alpha[k].item<double>() + rho[6 - k].item<double>());
  CHECK(p[6][2].item<double>() ==
        Approx(std::exp(alpha[2].item<double>() + rho[4].item<double>()) / z).epsilon(1e-5));

  // The compact state in the layer gives the same output as its dense expansion.
  HybridAttention a(kWidth, kHeads, kHeads, kContext), b(kWidth, kHeads, kHeads, kContext);
  {
    torch::NoGradGuard g;
    for (size_t i = 0; i < a->parameters().size(); ++i)
      b->parameters()[i].copy_(a->parameters()[i]);
  }
  a->SetFixedCompact(1, alpha, rho, log_z);
  b->SetFixedDense(1, p);
  torch::Tensor x = torch::randn({2, 8, kWidth});
  CHECK(torch::allclose(a->forward(x), b->forward(x), 1e-5, 1e-6));
}

TEST_CASE("attention: pruned heads contribute nothing") {
  torch::manual_seed(5);
  HybridAttention layer(kWidth, kHeads, kHeads, kContext);
  torch::Tensor x = torch::randn({2, 8, kWidth});
  layer->SetHeadState(1, {HeadMode::kPruned});
  torch::Tensor before = layer->forward(x);
  {
    torch::NoGradGuard g;  // scramble everything head 1 could have used
    const int64_t d = layer->head_dim();
    for (auto* lin : {&layer->q_proj, &layer->k_proj, &layer->v_proj})
      (*lin)->weight.narrow(0, d, d).normal_();
    layer->o_proj->weight.narrow(1, d, d).normal_();
  }
  CHECK(torch::equal(layer->forward(x), before));
}

TEST_CASE("attention: fixed heads get no Q/K gradient, their values still train") {
  torch::manual_seed(6);
  HybridAttention layer(kWidth, kHeads, kHeads, kContext);
  torch::Tensor alpha = torch::randn({kContext}), rho = torch::randn({kContext});
  layer->SetFixedCompact(2, alpha, rho, CompactLogNormalizer(alpha, rho));
  torch::Tensor x = torch::randn({2, 8, kWidth});
  layer->forward(x).pow(2).sum().backward();
  const int64_t d = layer->head_dim();
  for (auto* lin : {&layer->q_proj, &layer->k_proj}) {
    torch::Tensor g = (*lin)->weight.grad();
    CHECK(g.narrow(0, 2 * d, d).abs().max().item<float>() == 0.0f);
    CHECK(g.narrow(0, 0, d).abs().max().item<float>() > 0.0f);
  }
  CHECK(layer->v_proj->weight.grad().narrow(0, 2 * d, d).abs().max().item<float>() > 0.0f);
  CHECK(!layer->fixed_alpha.requires_grad());
  CHECK(!layer->fixed_rho.requires_grad());
  for (const auto& p : layer->parameters()) CHECK(!p.is_same(layer->fixed_alpha));
}

TEST_CASE("attention: streaming and local masks") {
  HeadState s{HeadMode::kStreaming, 0, 1, 2};
  torch::Tensor m = AllowedKeys(s, 5, torch::kCPU);
  // query 4 sees the sink (0) and the recent keys 3, 4.
  CHECK(torch::equal(m[4], Bools({1, 0, 0, 1, 1})));
  torch::Tensor l = AllowedKeys({HeadMode::kLocal, 2}, 5, torch::kCPU);
  CHECK(torch::equal(l[4], Bools({0, 0, 0, 1, 1})));
  CHECK(torch::equal(l[0], Bools({1, 0, 0, 0, 0})));
}

// The keys a chunk-evicting streaming head reads, by simulating AoH §5's chunked prefill
// literally: a cache list that each chunk appends to and that is trimmed to the sink and the
// `recent` newest keys after the chunk. Returns [T][T] visibility.
std::vector<std::vector<bool>> SimulatedChunkPrefill(int64_t sink, int64_t recent, int64_t chunk,
                                                     int64_t T) {
  std::vector<std::vector<bool>> seen(size_t(T), std::vector<bool>(size_t(T), false));
  std::vector<int64_t> cache;
  for (int64_t c0 = 0; c0 < T; c0 += chunk) {
    const int64_t c1 = std::min(T, c0 + chunk);
    for (int64_t q = c0; q < c1; ++q) {
      cache.push_back(q);  // the query's own key joins before it attends (causal)
      for (int64_t k : cache) seen[size_t(q)][size_t(k)] = true;
    }
    std::vector<int64_t> kept;
    for (size_t i = 0; i < cache.size(); ++i)
      if (cache[i] < sink || int64_t(cache.size() - i) <= recent) kept.push_back(cache[i]);
    cache = kept;
  }
  return seen;
}

TEST_CASE("attention: the chunk-eviction mask is the simulated chunked prefill") {
  for (int64_t sink : {0, 1, 3})
    for (int64_t recent : {1, 2, 5})
      for (int64_t chunk : {1, 2, 4, 7, 40}) {
        const int64_t T = 23;
        HeadState s{HeadMode::kStreaming, 0, sink, recent, false, chunk};
        torch::Tensor m = AllowedKeys(s, T, torch::kCPU);
        auto want = SimulatedChunkPrefill(sink, recent, chunk, T);
        int64_t mismatches = 0;
        for (int64_t q = 0; q < T; ++q)
          for (int64_t k = 0; k < T; ++k)
            mismatches += m[q][k].item<bool>() != want[size_t(q)][size_t(k)];
        INFO("sink " << sink << " recent " << recent << " chunk " << chunk);
        CHECK(mismatches == 0);
      }
  // A chunk of the whole sequence is causal attention; with AoH's sink 1, recent 2, chunk 4,
  // query 9 (chunk 8..11) sees the sink, the kept window 6, 7 and its own chunk 8, 9.
  HeadState s{HeadMode::kStreaming, 0, 1, 2, false, 4};
  CHECK(torch::equal(AllowedKeys(s, 10, torch::kCPU)[9], Bools({1, 0, 0, 0, 0, 0, 1, 1, 1, 1})));
  // At arbitrary positions with an eviction before the call at position 9 (a decode step):
  // keys 7, 8, 9 and the sink.
  torch::Tensor pos = torch::arange(10, torch::kLong);
  CHECK(torch::equal(AllowedKeysAt(s, torch::tensor({int64_t(9)}), pos, 9)[0],
                     Bools({1, 0, 0, 0, 0, 0, 0, 1, 1, 1})));
}

}  // namespace
}  // namespace headlab
