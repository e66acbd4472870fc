// SAF on CUDA (label gpu; built only against a CUDA LibTorch): the batched compact fit on
// the device equals the per-head fits on the CPU, and the chunked calibration on the device
// reproduces the CPU's full pass to fp32 rounding and reports the allocator's peak.
#include <torch/torch.h>

#include "payload/exec/model.h"
#include "payload/methods/saf/chunked_calibration.h"
#include "payload/methods/saf/compact_fit.h"
#include "payload/methods/saf/saf_testing.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::saf {
namespace {

TEST_CASE("batched fits on CUDA equal per-head CPU fits, ill-conditioned targets included") {
  REQUIRE(torch::cuda::is_available());
  const int64_t T = 256;
  const std::vector<torch::Tensor> targets = testing::AssortedTargets(T);
  const testing::BatchInputs in = testing::StackTargets(targets);
  const torch::Device cuda(torch::kCUDA);
  std::vector<CompactFit> batched =
      FitCompactBatched({in.eta.eta_abs.to(cuda), in.eta.eta_rel.to(cuda)}, in.entropy.to(cuda));
  REQUIRE(batched.size() == targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    INFO("target " << i);
    const CompactFit one = FitCompact(targets[i]);  // CPU, head by head
    CHECK(batched[i].alpha.device().is_cpu());
    auto close = [](const torch::Tensor& x, const torch::Tensor& y) {
      return ((x - y).abs() <= 1e-6 * y.abs().clamp_min(1.0)).all().item<bool>();
    };
    // The objective and the decision agree for every target. The parameters agree where
    // the fit is well conditioned (the three random mean patterns and a compact one):
    // elsewhere (a sink of 1e-6 mass, the identity, a permutation, a saturated prior)
    // Adam's normalised steps turn the last-bit differences of cuFFT and the CPU's FFT in
    // near-zero gradients into different but equally good parameters.
    CHECK(batched[i].kl == Approx(one.kl).epsilon(1e-6).margin(1e-9));
    CHECK(batched[i].accepted == one.accepted);
    if (i < 4) {
      CHECK(close(batched[i].alpha, one.alpha));
      CHECK(close(batched[i].rho, one.rho));
      CHECK(close(batched[i].log_z, one.log_z));
    }
  }
}

TEST_CASE("chunked calibration on CUDA matches the CPU's full pass and reports its peak") {
  REQUIRE(torch::cuda::is_available());
  const int64_t T = 64;
  torch::manual_seed(3);
  ModelConfig c = testing::TinyGptConfig(T, 2);
  c.layers = 3;
  Gpt gpt(c);
  torch::manual_seed(4);
  std::vector<torch::Tensor> cpu_batches = {torch::randint(0, 64, {2, T}, torch::kLong),
                                            torch::randint(0, 64, {2, T}, torch::kLong)};
  CalibrationStats full(3, 4, {});
  Calibrate(ViewOfGpt(*gpt), cpu_batches, &full);

  gpt->to(torch::kCUDA);
  std::vector<torch::Tensor> batches;
  for (const torch::Tensor& b : cpu_batches) batches.push_back(b.to(torch::kCUDA));
  ChunkedCalibrationOptions o;
  o.memory_bytes = 1;  // one layer per chunk
  ChunkedCalibration chunked = CalibrateInChunks(ViewOfGpt(*gpt), batches, o);
  CHECK(chunked.summary.chunks == 3);
  CHECK(chunked.summary.device_bytes_peak > 0);
  for (int64_t l = 0; l < 3; ++l)
    for (int64_t h = 0; h < 4; ++h) {
      INFO("head " << l << "." << h);
      const HeadSummary& s = chunked.summary.at(l, h);
      CHECK(s.variance == Approx(full.VarianceScore(l, h)).epsilon(1e-3));
      CHECK(s.forward_kl == Approx(full.ForwardKlScore(l, h)).epsilon(1e-3).margin(1e-6));
      Marginals eta = SufficientStatistics(PrepareTarget(full.Mean(l, h)));
      CHECK(s.eta.eta_abs.device().is_cpu());
      CHECK(torch::allclose(s.eta.eta_abs, eta.eta_abs, 1e-4, 1e-6));
      CHECK(torch::allclose(s.eta.eta_rel, eta.eta_rel, 1e-4, 1e-6));
    }
}

}  // namespace
}  // namespace headlab::saf
