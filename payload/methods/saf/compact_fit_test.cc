#include "payload/methods/saf/compact_fit.h"

#include "payload/exec/attention.h"
#include "payload/methods/saf/saf_testing.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::saf {
namespace {

constexpr int64_t kT = 48;

torch::TensorOptions F64() { return torch::dtype(torch::kFloat64); }

using testing::AssortedTargets;
using testing::RandomMeanPattern;

TEST_CASE("PrepareTarget floors causal entries, renormalises rows and zeroes the future") {
  torch::Tensor m = torch::zeros({4, 4}, F64());
  m[0][0] = 1;
  m[1][0] = 1;  // row 1 key 1 is 0: floored
  m[2][1] = 0.5;
  m[2][2] = 0.5;
  m[3][3] = 1;
  m[0][3] = 7;  // future entry: dropped
  torch::Tensor p = PrepareTarget(m, 1e-9);
  CHECK(p[0][3].item<double>() == 0.0);
  CHECK(p[1][1].item<double>() == Approx(1e-9).epsilon(1e-6));
  CHECK(p[2][0].item<double>() > 0.0);
  CHECK(torch::allclose(p.sum(1), torch::ones({4}, F64()), 0, 1e-12));
}

TEST_CASE("FFT and dense normalisers and marginals agree") {
  torch::manual_seed(3);
  torch::Tensor alpha = torch::randn({kT}, F64()) * 2;
  torch::Tensor rho = torch::randn({kT}, F64()) * 2;
  torch::Tensor fft = LogNormalizerFft(alpha, rho), dense = LogNormalizerDense(alpha, rho);
  CHECK((fft - dense).abs().max().item<double>() < 1e-10);
  // The exec layer's own normaliser (float32) agrees as well: what gets installed is what
  // was fitted.
  torch::Tensor exec = CompactLogNormalizer(alpha.to(torch::kFloat32), rho.to(torch::kFloat32));
  CHECK((exec.to(torch::kFloat64) - dense).abs().max().item<double>() < 1e-4);

  ModelMarginals a = CompactMarginals(alpha, rho, NormalizerPath::kFft);
  ModelMarginals b = CompactMarginals(alpha, rho, NormalizerPath::kDense);
  CHECK((a.col - b.col).abs().max().item<double>() < 1e-10);
  CHECK((a.diag - b.diag).abs().max().item<double>() < 1e-10);
  // Each row sums to 1, so both marginals sum to T.
  CHECK(a.col.sum().item<double>() == Approx(double(kT)));
  CHECK(a.diag.sum().item<double>() == Approx(double(kT)));
}

TEST_CASE("fitted rows sum to 1 and are causal") {
  torch::Tensor p = PrepareTarget(RandomMeanPattern(kT, 1));
  CompactFit fit = FitCompact(p);
  torch::Tensor q = CompactPatternDense(fit.alpha, fit.rho);
  CHECK(torch::allclose(q.sum(1), torch::ones({kT}, F64()), 0, 1e-12));
  CHECK(q.triu(1).abs().max().item<double>() == 0.0);
  CHECK(q.min().item<double>() >= 0.0);
  // The installed form (exec's CompactPattern from alpha, rho, log Z) is the same matrix.
  torch::Tensor installed =
      CompactPattern(fit.alpha.to(torch::kFloat32), fit.rho.to(torch::kFloat32),
                     fit.log_z.to(torch::kFloat32), kT);
  CHECK((installed.to(torch::kFloat64) - q).abs().max().item<double>() < 1e-5);
  CHECK(fit.kl >= 0.0);
}

TEST_CASE("at the optimum the fit reproduces both target marginals (eq. 20)") {
  torch::Tensor p = PrepareTarget(RandomMeanPattern(kT, 2));
  Marginals eta = SufficientStatistics(p);
  CompactFitOptions opt;
  // Past the default 400 steps and at a smaller step size, so Adam settles at the optimum
  // rather than oscillating around it.
  opt.steps = 4000;
  opt.lr = 0.01;
  CompactFit fit = FitCompact(p, opt);
  ModelMarginals m = CompactMarginals(fit.alpha, fit.rho, NormalizerPath::kDense);
  CHECK((m.col - eta.eta_abs).abs().max().item<double>() < 1e-3);
  CHECK((m.diag - eta.eta_rel).abs().max().item<double>() < 1e-3);
}

TEST_CASE("a pattern exactly of the compact form is recovered (KL < 1e-3) by both paths") {
  torch::manual_seed(5);
  torch::Tensor alpha = torch::randn({kT}, F64());
  torch::Tensor rho = torch::randn({kT}, F64());
  torch::Tensor p = PrepareTarget(CompactPatternDense(alpha, rho));
  for (NormalizerPath path : {NormalizerPath::kFft, NormalizerPath::kDense}) {
    CompactFitOptions opt;
    opt.path = path;
    CompactFit fit = FitCompact(p, opt);
    double dense_kl = RowAveragedKl(p, CompactPatternDense(fit.alpha, fit.rho));
    CHECK(fit.kl < 1e-3);
    CHECK(dense_kl < 1e-3);
    CHECK(fit.kl == Approx(dense_kl).margin(1e-9));  // FFT KL from sufficient statistics
    CHECK(fit.accepted);
  }
}

TEST_CASE("a head whose target the compact form cannot express fails the 0.2-nat check") {
  // A content-like permutation pattern: each row puts its mass on a key chosen at random,
  // which no absolute-plus-relative preference can reproduce.
  torch::manual_seed(9);
  torch::Tensor m = torch::zeros({kT, kT}, F64());
  for (int64_t i = 0; i < kT; ++i) m[i][torch::randint(0, i + 1, {1}).item<int64_t>()] = 1.0;
  CompactFit fit = FitCompact(PrepareTarget(m));
  CHECK(fit.kl > 0.2);
  CHECK_FALSE(fit.accepted);
}

TEST_CASE("batched fits equal per-head fits on assorted targets, ill-conditioned ones included") {
  const std::vector<torch::Tensor> targets = AssortedTargets(kT);
  const testing::BatchInputs in = testing::StackTargets(targets);
  CompactFitOptions opt;
  std::vector<CompactFit> batched = FitCompactBatched(in.eta, in.entropy, opt);
  REQUIRE(batched.size() == targets.size());
  int64_t accepted = 0;
  for (size_t i = 0; i < targets.size(); ++i) {
    INFO("target " << i);
    const CompactFit one = FitCompact(targets[i], opt);
    const CompactFit& b = batched[i];
    auto close = [](const torch::Tensor& x, const torch::Tensor& y) {
      return ((x - y).abs() <= 1e-9 * y.abs().clamp_min(1.0)).all().item<bool>();
    };
    CHECK(close(b.alpha, one.alpha));
    CHECK(close(b.rho, one.rho));
    CHECK(close(b.log_z, one.log_z));
    CHECK(b.kl == Approx(one.kl).epsilon(1e-9).margin(1e-12));
    CHECK(b.accepted == one.accepted);
    accepted += b.accepted;
    if (i < 4) {
      // The batch's KL is the dense KL of its own fit, and its fit that of the dense fitter
      // (the T x T reference, head by head): nothing leaks between rows.
      CHECK(b.kl ==
            Approx(RowAveragedKl(targets[i], CompactPatternDense(b.alpha, b.rho))).margin(1e-9));
      CompactFitOptions dense = opt;
      dense.path = NormalizerPath::kDense;
      const CompactFit d = FitCompact(targets[i], dense);
      CHECK((b.alpha - d.alpha).abs().max().item<double>() < 1e-6);
      CHECK((b.rho - d.rho).abs().max().item<double>() < 1e-6);
    }
  }
  CHECK(accepted > 0);                        // some pass ...
  CHECK(accepted < int64_t(targets.size()));  // ... and the permutation does not
  // A head's fit does not depend on its batch: alone, or after the others in reverse order.
  std::vector<CompactFit> reversed =
      FitCompactBatched({in.eta.eta_abs.flip(0), in.eta.eta_rel.flip(0)}, in.entropy.flip(0), opt);
  for (size_t i = 0; i < targets.size(); ++i)
    CHECK(reversed[targets.size() - 1 - i].kl == Approx(batched[i].kl).epsilon(1e-9).margin(1e-12));
}

}  // namespace
}  // namespace headlab::saf
