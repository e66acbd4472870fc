#include "payload/methods/saf/calibration.h"

#include "payload/exec/model.h"
#include "payload/methods/saf/saf_testing.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::saf {
namespace {

constexpr int64_t kT = 16, kHeads = 3;

// [B, H, T, T] random causal softmax probabilities and their logits.
std::pair<torch::Tensor, torch::Tensor> RandomAttention(int64_t B, uint64_t seed) {
  torch::manual_seed(seed);
  torch::Tensor s = torch::randn({B, kHeads, kT, kT});
  torch::Tensor future = torch::ones({kT, kT}, torch::kBool).triu(1);
  s = s.masked_fill(future, -INFINITY);
  return {torch::softmax(s, -1), s};
}

TEST_CASE(
    "the variance and forward-KL scores of a head with identical attention on every input are 0") {
  CalibrationStats stats(1, kHeads, {});
  torch::Tensor one = RandomAttention(1, 1).first;  // [1, H, T, T]
  for (int batch = 0; batch < 3; ++batch) stats.Add(0, one.expand({2, kHeads, kT, kT}));
  REQUIRE(stats.sequences() == 6);
  for (int64_t h = 0; h < kHeads; ++h) {
    CHECK(stats.VarianceScore(0, h) == Approx(0.0).margin(1e-12));
    CHECK(stats.ForwardKlScore(0, h) == Approx(0.0).margin(1e-6));
    CHECK(torch::allclose(stats.Mean(0, h), one[0][h], 1e-6, 1e-7));
  }
}

TEST_CASE("streamed statistics equal the two-pass definitions (eq. 1, eq. 2, per-entry moments)") {
  CalibrationNeeds needs;
  needs.entry_variance = true;
  needs.logits = true;
  CalibrationStats stats(1, kHeads, needs);
  std::vector<torch::Tensor> all_a, all_s;
  int64_t sizes[] = {1, 3, 2};  // uneven batches exercise the merge rule
  for (int i = 0; i < 3; ++i) {
    auto [a, s] = RandomAttention(sizes[i], 10 + i);
    stats.Add(0, a, s);
    all_a.push_back(a);
    all_s.push_back(s);
  }
  torch::Tensor A = torch::cat(all_a).to(torch::kFloat64);  // [N, H, T, T]
  torch::Tensor S = torch::cat(all_s).to(torch::kFloat64);
  const int64_t N = A.size(0);
  REQUIRE(stats.sequences() == N);
  torch::Tensor future = torch::ones({kT, kT}, torch::kBool).triu(1);
  S = S.masked_fill(future, 0.0);
  for (int64_t h = 0; h < kHeads; ++h) {
    torch::Tensor a = A.select(1, h), mean = a.mean(0);
    double var = (a - mean).pow(2).sum().item<double>() / (double(N - 1) * kT * kT);  // eq. 1
    CHECK(stats.VarianceScore(0, h) == Approx(var).epsilon(1e-5));
    double kl = 0;  // eq. 2 term by term
    for (int64_t n = 0; n < N; ++n)
      kl += (torch::xlogy(a[n], a[n]) - torch::xlogy(a[n], mean)).sum().item<double>();
    kl /= double(N * kT);
    CHECK(stats.ForwardKlScore(0, h) == Approx(kl).epsilon(1e-4));
    CHECK(torch::allclose(stats.Mean(0, h).to(torch::kFloat64), mean, 1e-5, 1e-6));
    CHECK(torch::allclose(stats.layer(0).att.EntryVariance()[h].to(torch::kFloat64), a.var(0), 1e-4,
                          1e-6));
    torch::Tensor s = S.select(1, h);
    CHECK(torch::allclose(stats.layer(0).logits.Mean()[h].to(torch::kFloat64), s.mean(0), 1e-4,
                          1e-5));
    CHECK(torch::allclose(stats.layer(0).logits.EntryVariance()[h].to(torch::kFloat64), s.var(0),
                          1e-3, 1e-4));
  }
}

ModelConfig TinyConfig() { return testing::TinyGptConfig(kT, 4); }

TEST_CASE("calibration on a GPT walks the model's own layers and leaves it untouched") {
  torch::manual_seed(7);
  Gpt gpt(TinyConfig());
  gpt->train();
  torch::Tensor before = gpt->attention(0)->q_proj->weight.clone();
  ModelView view = ViewOfGpt(*gpt);
  REQUIRE(view.layers.size() == 2);
  torch::Tensor tokens = torch::randint(0, 64, {2, kT}, torch::kLong);

  {  // The view's residual stream reproduces the model's logits, and the per-head
     // probabilities recompose the model's attention output: A V W^O summed over heads.
    torch::NoGradGuard ng;
    torch::Tensor r = view.embed(tokens);
    for (int64_t l = 0; l < 2; ++l) {
      torch::Tensor x = view.layers[size_t(l)].attention_input(r);
      LayerAttention a = ComputeLayerAttention(view, l, x);
      CHECK(torch::allclose(a.att.sum(-1), torch::ones({2, 4, kT}), 1e-5, 1e-6));
      CHECK(a.att.triu(1).abs().max().item<float>() == 0.0f);
      torch::Tensor z = torch::matmul(a.att, a.values).transpose(1, 2).reshape({2, kT, 32});
      torch::Tensor y = torch::nn::functional::linear(z, view.layers[size_t(l)].o_weight);
      torch::Tensor expected = gpt->attention(l)->forward(x);
      CHECK(torch::allclose(y, expected, 1e-4, 1e-5));
      r = view.layers[size_t(l)].block(r);
    }
    torch::Tensor logits = torch::nn::functional::linear(gpt->ln_f(r), gpt->wte->weight);
    CHECK(torch::allclose(logits, gpt->forward(tokens), 1e-4, 1e-5));
  }

  CalibrationStats stats(2, 4, {});
  Calibrate(view, {tokens, tokens.flip(1)}, &stats);
  CHECK(stats.sequences() == 4);
  CHECK(gpt->is_training());  // mode restored
  CHECK(torch::equal(before, gpt->attention(0)->q_proj->weight));
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t h = 0; h < 4; ++h) {
      CHECK(torch::allclose(stats.Mean(l, h).sum(1), torch::ones({kT}), 1e-5, 1e-6));
      CHECK(stats.VarianceScore(l, h) > 0.0);
    }

  OutputStats out = CalibrateOutputs(view, {tokens}, stats, 4);
  CHECK(out.rows == 2 * 4);
  for (int64_t u = 0; u < 8; ++u) {
    CHECK(out.sq_norm[size_t(u)] > 0.0);
    CHECK(out.gram[size_t(u * 4 + u % 4)] == Approx(out.sq_norm[size_t(u)]).epsilon(1e-4));
  }
}

// SAF eq. 11-12 against the model itself: for each head, Y = R + O from the model's own
// attention layer and Y~_h from the same layer with head h replaced by its mean pattern
// A_hat (a fixed dense head: its output is A_hat V W^O), compared at the sampled queries;
// the scores are the means over sequences and queries.
TEST_CASE(
    "output-aware residual scores equal one-head replacement in the model's layer (eq. 11-12)") {
  torch::manual_seed(10);
  Gpt gpt(TinyConfig());
  torch::Tensor tokens = torch::randint(0, 64, {3, kT}, torch::kLong);
  ModelView view = ViewOfGpt(*gpt);
  CalibrationStats stats(2, 4, {});
  Calibrate(view, {tokens.narrow(0, 0, 2), tokens.narrow(0, 2, 1)}, &stats);
  const int64_t nq = 5;
  OutputStats out =
      CalibrateOutputs(view, {tokens.narrow(0, 0, 2), tokens.narrow(0, 2, 1)}, stats, nq);
  REQUIRE(out.rows == 3 * nq);
  const std::vector<double> cos_scores = ResidualCosScores(out),
                            rel_scores = ResidualRelScores(out);
  torch::NoGradGuard no_grad;
  gpt->eval();
  torch::Tensor queries = torch::tensor(LatterHalfQueries(kT, nq), torch::kLong);
  torch::Tensor r = gpt->wte(tokens) + gpt->wpe(torch::arange(kT, torch::kLong));  // R_0
  for (int64_t l = 0; l < 2; ++l) {
    BlockImpl* block = gpt->blocks[size_t(l)]->as<BlockImpl>();
    HybridAttention& attn = gpt->attention(l);
    torch::Tensor x = block->ln1(r);
    torch::Tensor o = attn->forward(x).to(torch::kFloat64).index_select(1, queries);  // O
    torch::Tensor y = r.to(torch::kFloat64).index_select(1, queries) + o;             // Y
    for (int64_t h = 0; h < 4; ++h) {
      attn->SetFixedDense(h, stats.Mean(l, h));
      torch::Tensor ot = attn->forward(x).to(torch::kFloat64).index_select(1, queries);
      attn->SetHeadState(h, HeadState{});
      torch::Tensor yt = y - o + ot;  // Y~_h: only head h's contribution changed
      const double cos_ref =
          (1 - (y * yt).sum(-1) / (y.norm(2, -1) * yt.norm(2, -1))).mean().item<double>();
      const double rel_ref =
          ((ot - o).norm(2, -1) / o.norm(2, -1).clamp_min(1e-8)).mean().item<double>();
      INFO("layer " << l << " head " << h);
      CHECK(cos_ref > 0);
      CHECK(cos_scores[size_t(l * 4 + h)] == Approx(cos_ref).epsilon(1e-3).margin(1e-7));
      CHECK(rel_scores[size_t(l * 4 + h)] == Approx(rel_ref).epsilon(1e-4));
    }
    r = block->forward(r, {});
  }
}

TEST_CASE("Q/K gradient norms are read per head from the last backward pass (eq. 8)") {
  torch::manual_seed(8);
  Gpt gpt(TinyConfig());
  torch::Tensor tokens = torch::randint(0, 64, {2, kT + 1}, torch::kLong);
  gpt->Loss(tokens.narrow(1, 0, kT), tokens.narrow(1, 1, kT)).backward();
  ModelView view = ViewOfGpt(*gpt);
  std::vector<double> q = QkGradientNorms(view);
  REQUIRE(q.size() == 8);
  auto& attn = gpt->attention(1);
  const int64_t d = 8, h = 2;
  double expected = attn->q_proj->weight.grad().narrow(0, h * d, d).norm().item<double>() +
                    attn->k_proj->weight.grad().narrow(0, h * d, d).norm().item<double>();
  CHECK(q[size_t(4 + h)] == Approx(expected).epsilon(1e-5));
}

TEST_CASE("gate-Taylor importances match central differences of per-sequence losses (eq. 19)") {
  torch::manual_seed(9);
  Gpt gpt(TinyConfig());
  torch::Tensor tokens = torch::randint(0, 64, {2, kT}, torch::kLong);
  std::vector<double> imp = GateTaylorImportance(ViewOfGpt(*gpt), {tokens});
  REQUIRE(imp.size() == 8);
  CHECK(gpt->wte->weight.grad().defined() == false);  // no parameter gradients left behind
  // A gate on head h's output equals scaling head h's columns of W^O.
  // The reference runs in float64 so the central difference is not lost to rounding.
  gpt->to(torch::kFloat64);
  const int64_t l = 1, h = 2, d = 8;
  const double eps = 1e-3;
  torch::Tensor wo = gpt->attention(l)->o_proj->weight;
  torch::Tensor saved = wo.detach().clone();
  double expected = 0;
  torch::NoGradGuard ng;
  gpt->eval();
  for (int64_t n = 0; n < 2; ++n) {
    torch::Tensor x = tokens.narrow(0, n, 1).narrow(1, 0, kT - 1),
                  y = tokens.narrow(0, n, 1).narrow(1, 1, kT - 1);
    auto loss_at = [&](double gate) {
      wo.copy_(saved);
      wo.narrow(1, h * d, d).mul_(gate);
      return gpt->Loss(x, y).item<double>();
    };
    expected += std::abs(loss_at(1 + eps) - loss_at(1 - eps)) / (2 * eps);
  }
  wo.copy_(saved);
  CHECK(imp[size_t(l * 4 + h)] == Approx(expected / 2).epsilon(2e-3));
}

TEST_CASE("latter-half queries are spread evenly over [T/2, T-1]") {
  CHECK(LatterHalfQueries(16, 4) == std::vector<int64_t>{8, 10, 13, 15});
  CHECK(LatterHalfQueries(16, 100).size() == 8);
  CHECK(LatterHalfQueries(16, 1) == std::vector<int64_t>{15});
}

}  // namespace
}  // namespace headlab::saf
