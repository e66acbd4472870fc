#include "payload/exec/model.h"

#include "payload/exec/model_testing.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

ModelConfig TinyModel() { return testing::TinyModelConfig(2, 2, 16, 12, 40); }

TEST_CASE("model: logits have shape [B, T, vocab] and the head is tied") {
  torch::manual_seed(0);
  Gpt model(TinyModel());
  torch::Tensor idx = torch::randint(0, 40, {3, 12}, torch::kLong);
  torch::Tensor logits = model->forward(idx);
  CHECK(logits.sizes().vec() == std::vector<int64_t>{3, 12, 40});
  // Tied: there is no separate output matrix, the embedding is the only [vocab, width].
  int64_t vocab_matrices = 0;
  for (const auto& p : model->parameters())
    vocab_matrices += p.sizes().vec() == std::vector<int64_t>{40, 16};
  CHECK(vocab_matrices == 1);
}

TEST_CASE("model: causal, changing a future token leaves earlier logits unchanged") {
  torch::manual_seed(1);
  Gpt model(TinyModel());
  torch::NoGradGuard no_grad;
  torch::Tensor idx = torch::randint(0, 40, {2, 12}, torch::kLong);
  torch::Tensor before = model->forward(idx);
  for (int64_t t : {11, 6, 0}) {
    torch::Tensor changed = idx.clone();
    changed.index_put_({torch::indexing::Slice(), t}, (idx.index({0, t}).item<int64_t>() + 7) % 40);
    torch::Tensor after = model->forward(changed);
    CHECK(torch::equal(before.narrow(1, 0, t), after.narrow(1, 0, t)));
    // ...and the changed position itself does see its own token.
    CHECK(!torch::allclose(before.select(1, t), after.select(1, t)));
  }
}

TEST_CASE("model: RoPE, RMSNorm and GQA variants are causal; head modes are installed") {
  ModelConfig c = TinyModel();
  c.heads = 4;
  c.kv_heads = 2;
  c.pos = "rope";
  c.norm = "rmsnorm";
  c.head_modes = {{0, 1, {HeadMode::kLocal, 3}}, {1, 2, {HeadMode::kPruned}}};
  torch::manual_seed(4);
  Gpt model(c);
  CHECK(!model->wpe);  // no learned positions with RoPE
  CHECK(model->attention(0)->head_states()[1].mode == HeadMode::kLocal);
  CHECK(model->attention(1)->head_states()[2].mode == HeadMode::kPruned);
  CHECK(model->attention(1)->k_proj->weight.size(0) == 2 * 4);  // kv_heads x head_dim
  torch::NoGradGuard no_grad;
  torch::Tensor idx = torch::randint(0, 40, {2, 12}, torch::kLong);
  torch::Tensor before = model->forward(idx);
  torch::Tensor changed = idx.clone();
  changed.index_put_({torch::indexing::Slice(), 8}, (idx.index({0, 8}).item<int64_t>() + 1) % 40);
  CHECK(torch::equal(before.narrow(1, 0, 8), model->forward(changed).narrow(1, 0, 8)));
  CHECK(before.isfinite().all().item<bool>());
}

TEST_CASE("model: RoPE dot products depend only on the relative position") {
  torch::manual_seed(5);
  const int64_t T = 16, d = 8;
  torch::Tensor q =
      RotaryEmbedding(torch::randn({d}).expand({1, 1, T, d}), RopeSpec{10000.0})[0][0];
  torch::Tensor k =
      RotaryEmbedding(torch::randn({d}).expand({1, 1, T, d}), RopeSpec{10000.0})[0][0];
  CHECK(q[5].norm().item<double>() == Approx(q[0].norm().item<double>()));
  CHECK(q[9].dot(k[4]).item<double>() == Approx(q[12].dot(k[7]).item<double>()).epsilon(1e-5));
  CHECK(q[9].dot(k[4]).item<double>() != Approx(q[9].dot(k[7]).item<double>()).epsilon(1e-3));
}

TEST_CASE("model: same seed, same initial weights") {
  torch::manual_seed(3);
  Gpt a(TinyModel());
  torch::manual_seed(3);
  Gpt b(TinyModel());
  auto pa = a->parameters(), pb = b->parameters();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) CHECK(torch::equal(pa[i], pb[i]));
}

TEST_CASE(
    "model: weights built in bf16 are the fp32 initialisation rounded, gains and biases fp32") {
  ModelConfig c = testing::TinyModelConfig(2, 4, 32, 12, 40, "rope", 2);
  c.norm = "rmsnorm";
  c.mlp_act = "swiglu";
  c.mlp_hidden = 24;
  c.attn_bias = true;
  c.qk_norm = true;
  c.tie_head = false;
  torch::manual_seed(4);
  Gpt fp32(c);
  torch::manual_seed(4);
  Gpt bf16(c, torch::kBFloat16);
  auto b = bf16->named_parameters();
  int64_t matrices = 0;
  for (const auto& p : fp32->named_parameters()) {
    INFO(p.key());
    const bool matrix = p.value().dim() >= 2;
    matrices += matrix;
    CHECK(b[p.key()].scalar_type() == (matrix ? torch::kBFloat16 : torch::kFloat));
    CHECK(torch::equal(b[p.key()], matrix ? p.value().to(torch::kBFloat16) : p.value()));
  }
  CHECK(matrices == 2 + 2 * 7);  // wte, head; q, k, v, o, gate, fc, proj per layer
  // The residual stream stays fp32: the embedding of a bf16 model is widened once.
  CHECK(bf16->Embed(torch::zeros({1, 3}, torch::kLong)).scalar_type() == torch::kFloat);
  CHECK(bf16->attention(0)->fixed_alpha.scalar_type() == torch::kFloat);  // buffers untouched
}

TEST_CASE("model: per-token log-probs match the mean loss") {
  torch::manual_seed(2);
  Gpt model(TinyModel());
  torch::Tensor x = torch::randint(0, 40, {2, 12}, torch::kLong);
  torch::Tensor y = torch::randint(0, 40, {2, 12}, torch::kLong);
  double loss = model->Loss(x, y).item<double>();
  double mean_nll = -model->TokenLogProbs(x, y).mean().item<double>();
  CHECK(mean_nll == Approx(loss).epsilon(1e-5));
}

}  // namespace
}  // namespace headlab
