#include "payload/exec/precision.h"

#include <cmath>

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

TEST_CASE("precision: auto is bf16 on CUDA and fp32 on the CPU; fp16 needs CUDA") {
  CHECK(ResolvePrecision("auto", torch::Device(torch::kCUDA, 0)).value() == Precision::kBf16);
  CHECK(ResolvePrecision("auto", torch::Device(torch::kCPU)).value() == Precision::kFp32);
  CHECK(ResolvePrecision("bf16", torch::Device(torch::kCPU)).value() == Precision::kBf16);
  StatusOr<Precision> fp16 = ResolvePrecision("fp16", torch::Device(torch::kCPU));
  REQUIRE_FALSE(fp16.ok());
  CHECK(fp16.status().message().find("$.config.train.precision") != std::string::npos);
  CHECK(ComputeDtype(Precision::kFp16) == torch::kHalf);
  CHECK(ResolvePrecision("fp32", torch::Device(torch::kCPU)).value() == Precision::kFp32);
  CHECK(ResolvePrecision("fp16", torch::Device(torch::kCUDA, 0)).value() == Precision::kFp16);
  for (Precision p : {Precision::kFp32, Precision::kBf16, Precision::kFp16})  // names round-trip
    CHECK(ResolvePrecision(PrecisionName(p), torch::Device(torch::kCUDA, 0)).value() == p);
  CHECK(ResolvePrecision("tf32", torch::Device(torch::kCPU)).status().message() ==
        "config: $.config.train.precision: expected auto or one of fp32|bf16|fp16, got \"tf32\"");
}

TEST_CASE("precision: an autocast scope computes linear layers in bf16 and ends cleanly") {
  torch::manual_seed(1);
  torch::Tensor x = torch::randn({4, 64}), w = torch::randn({32, 64});
  torch::Tensor exact = torch::nn::functional::linear(x, w);
  {
    AutocastScope scope(Precision::kBf16, torch::Device(torch::kCPU));
    CHECK(ActivationDtype(x) == torch::kBFloat16);
    torch::Tensor y = torch::nn::functional::linear(x, w);
    CHECK(y.scalar_type() == torch::kBFloat16);
    // bf16 keeps 8 significant bits: close to the fp32 product, not equal to it.
    const double rel =
        (y.to(torch::kFloat) - exact).norm().item<double>() / exact.norm().item<double>();
    CHECK(rel > 0);
    CHECK(rel < 2e-2);
  }
  CHECK(ActivationDtype(x) == torch::kFloat);
  CHECK(torch::nn::functional::linear(x, w).scalar_type() == torch::kFloat);
  AutocastScope none(Precision::kFp32, torch::Device(torch::kCPU));
  CHECK(ActivationDtype(x) == torch::kFloat);
}

TEST_CASE("precision: the loss scaler's rule (GradScaler's) on the CPU") {
  LossScaler s(true, torch::Device(torch::kCPU), /*init_scale=*/8.0, /*growth_interval=*/2);
  CHECK(s.Scale(torch::tensor({1.5f})).item<float>() == 12.0f);
  torch::Tensor g1 = torch::tensor({8.0f, -16.0f}), g2 = torch::tensor({4.0f});
  torch::Tensor found = s.Unscale({g1, g2});
  CHECK(found.item<float>() == 0.f);
  CHECK(g1[1].item<float>() == -2.0f);  // divided by the scale
  CHECK(g2[0].item<float>() == 0.5f);
  s.Update(found);
  CHECK(s.scale() == 8.0);  // one clean update of the two needed to grow
  s.Update(found);
  CHECK(s.scale() == 16.0);
  CHECK(s.growth_tracker() == 0);
  torch::Tensor bad = torch::tensor({1.0f, INFINITY});
  found = s.Unscale({bad});
  CHECK(found.item<float>() == 1.f);
  s.Update(found);
  CHECK(s.scale() == 8.0);  // backed off
  s.Restore(1024.0, 1);
  CHECK(s.scale() == 1024.0);
  CHECK(s.growth_tracker() == 1);
  LossScaler off(false, torch::Device(torch::kCPU));
  CHECK_FALSE(off.Unscale({g1}).defined());
  CHECK(off.Scale(torch::tensor({2.0f})).item<float>() == 2.0f);
}

}  // namespace
}  // namespace headlab
