#include "payload/exec/linear_cross_entropy.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

double RelL2(const torch::Tensor& got, const torch::Tensor& want) {
  return (got - want).norm().item<double>() / want.norm().item<double>();
}

TEST_CASE("linear cross-entropy: loss and gradients equal cross_entropy(linear(h, w)), in chunks") {
  torch::manual_seed(8);
  const int64_t n = 37, c = 16, vocab = 53;
  torch::Tensor targets = torch::randint(0, vocab, {n}, torch::kLong);
  for (int64_t chunk : {0, 5, 37}) {  // automatic (one chunk here), uneven chunks, exact
    INFO("chunk rows " << chunk);
    torch::Tensor h1 = torch::randn({n, c}).requires_grad_(true),
                  w1 = torch::randn({vocab, c}).requires_grad_(true);
    torch::Tensor h2 = h1.detach().clone().requires_grad_(true),
                  w2 = w1.detach().clone().requires_grad_(true);
    torch::Tensor want =
        torch::nn::functional::cross_entropy(torch::nn::functional::linear(h1, w1), targets);
    (want * 3.0).backward();  // a non-unit upstream gradient
    torch::Tensor got = LinearCrossEntropy(h2, w2, targets, torch::kFloat, chunk);
    (got * 3.0).backward();
    CHECK(got.item<double>() == Approx(want.item<double>()).epsilon(1e-6));
    CHECK(RelL2(h2.grad(), h1.grad()) < 1e-5);
    CHECK(RelL2(w2.grad(), w1.grad()) < 1e-5);
  }
}

TEST_CASE("linear cross-entropy: the loss of a known case, and no gradient work without grads") {
  // Two classes with logits 0 and log 3: p = (1/4, 3/4); target 0 costs log 4.
  torch::Tensor h = torch::tensor({{1.0f}}), w = torch::tensor({{0.0f}, {std::log(3.0f)}});
  torch::NoGradGuard no_grad;
  torch::Tensor loss = LinearCrossEntropy(h, w, torch::tensor({int64_t(0)}), torch::kFloat);
  CHECK(loss.item<double>() == Approx(std::log(4.0)).epsilon(1e-6));
}

}  // namespace
}  // namespace headlab
