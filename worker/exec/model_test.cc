#include "worker/exec/model.h"

#include <catch2/catch.hpp>

namespace headlab {
namespace {

ModelConfig TinyModel() {
  ModelConfig m;
  m.layers = 2;
  m.heads = 2;
  m.width = 16;
  m.context = 12;
  m.mlp_ratio = 2;
  m.vocab = 40;
  return m;
}

TEST_CASE("model: logits have shape [B, T, vocab] and the head is tied") {
  torch::manual_seed(0);
  Gpt model(TinyModel());
  torch::Tensor idx = torch::randint(0, 40, {3, 12}, torch::kLong);
  torch::Tensor logits = model->forward(idx);
  CHECK(logits.sizes().vec() == std::vector<int64_t>{3, 12, 40});
  // Tied: there is no separate output matrix, the embedding is the only [vocab, width].
  int64_t vocab_matrices = 0;
  for (const auto& p : model->parameters()) vocab_matrices += p.sizes().vec() == std::vector<int64_t>{40, 16};
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

TEST_CASE("model: same seed, same initial weights") {
  torch::manual_seed(3);
  Gpt a(TinyModel());
  torch::manual_seed(3);
  Gpt b(TinyModel());
  auto pa = a->parameters(), pb = b->parameters();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) CHECK(torch::equal(pa[i], pb[i]));
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
