#include "payload/exec/optimizer.h"

#include <vector>

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

// Three parameters with random gradients (one without any).
std::vector<torch::Tensor> Params(uint64_t seed, double grad_scale) {
  torch::manual_seed(seed);
  std::vector<torch::Tensor> ps;
  for (auto shape : {std::vector<int64_t>{5, 7}, {11}, {3, 3}}) {
    torch::Tensor p = torch::randn(shape).requires_grad_(true);
    p.mutable_grad() = torch::randn(shape) * grad_scale;
    ps.push_back(p);
  }
  ps.push_back(torch::randn({4}).requires_grad_(true));  // no gradient
  return ps;
}

TEST_CASE("optimizer: ClipGradNorm equals LibTorch's clip_grad_norm_, clipping or not") {
  for (double scale : {0.01, 10.0}) {  // below and above the limit of 1
    INFO("gradient scale " << scale);
    std::vector<torch::Tensor> mine = Params(9, scale), theirs = Params(9, scale);
    const double want = torch::nn::utils::clip_grad_norm_(theirs, 1.0);
    torch::Tensor got = ClipGradNorm(mine, 1.0);
    CHECK(got.item<double>() == Approx(want).epsilon(1e-6));
    for (size_t i = 0; i + 1 < mine.size(); ++i)
      CHECK(torch::allclose(mine[i].grad(), theirs[i].grad(), 1e-6, 1e-7));
  }
  // An infinite limit only measures.
  std::vector<torch::Tensor> ps = Params(4, 10.0);
  torch::Tensor before = ps[0].grad().clone();
  ClipGradNorm(ps, INFINITY);
  CHECK(torch::equal(ps[0].grad(), before));
}

TEST_CASE("optimizer: AdamWStepper steps like torch::optim::AdamW and keeps its state there") {
  std::vector<torch::Tensor> a = Params(2, 1.0), b = Params(2, 1.0);
  auto options = torch::optim::AdamWOptions(1e-2).betas({0.9, 0.95}).weight_decay(0.1);
  torch::optim::AdamW mine(a, options), theirs(b, options);
  AdamWStepper stepper(mine);
  for (int i = 0; i < 3; ++i) {
    stepper.Step();
    theirs.step();
  }
  for (size_t i = 0; i < a.size(); ++i) CHECK(torch::equal(a[i], b[i]));
  REQUIRE(AdamWStateOf(mine, a[0]) != nullptr);
  CHECK(AdamWStateOf(mine, a[0])->step() == 3);
  CHECK(AdamWStateOf(mine, a[3]) == nullptr);  // never had a gradient
  CHECK_FALSE(AdamWStepper::Fused(torch::Device(torch::kCPU)));
}

}  // namespace
}  // namespace headlab
