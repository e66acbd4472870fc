#include "payload/exec/fixed_conv.h"

#include "payload/exec/attention.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

// The convolution form of SAF eq. 3 against the dense pattern (attention.cc's
// CompactPattern, in fp64): outputs and dV, short and long T, and extreme alpha/rho.
namespace headlab {
namespace {

// Per row (last dimension = channels), the largest |got - want| / |want|_row over rows.
double WorstRowError(const torch::Tensor& got, const torch::Tensor& want) {
  torch::Tensor g = got.to(torch::kDouble).reshape({-1, want.size(-1)});
  torch::Tensor w = want.to(torch::kDouble).reshape({-1, want.size(-1)});
  torch::Tensor err = (g - w).norm(2, 1) / w.norm(2, 1).clamp_min(1e-300);
  return err.max().item<double>();
}

struct Heads {
  torch::Tensor alpha, rho, log_z;  // [n, context] fp32
};

Heads MakeHeads(const std::vector<torch::Tensor>& alphas, const std::vector<torch::Tensor>& rhos) {
  Heads h;
  h.alpha = torch::stack(alphas).to(torch::kFloat);
  h.rho = torch::stack(rhos).to(torch::kFloat);
  std::vector<torch::Tensor> zs;
  for (size_t i = 0; i < alphas.size(); ++i)
    zs.push_back(CompactLogNormalizer(h.alpha[i], h.rho[i]));
  h.log_z = torch::stack(zs);
  return h;
}

// O = P V and dV = P^T dO with the dense patterns, in fp64: v, g [B, T, n, d].
std::pair<torch::Tensor, torch::Tensor> DenseReference(const Heads& h, const torch::Tensor& v,
                                                       const torch::Tensor& g) {
  const int64_t T = v.size(1), n = v.size(2);
  std::vector<torch::Tensor> os, dvs;
  for (int64_t i = 0; i < n; ++i) {
    torch::Tensor p = CompactPattern(h.alpha[i].to(torch::kDouble), h.rho[i].to(torch::kDouble),
                                     h.log_z[i].to(torch::kDouble), T);
    os.push_back(torch::matmul(p, v.select(2, i).to(torch::kDouble)));
    dvs.push_back(torch::matmul(p.transpose(0, 1), g.select(2, i).to(torch::kDouble)));
  }
  return {torch::stack(os, 2), torch::stack(dvs, 2)};
}

// Runs FixedConvMix forward and backward; returns (O, dV).
std::pair<torch::Tensor, torch::Tensor> RunConv(const FixedConvFactors& f, const torch::Tensor& v,
                                                const torch::Tensor& g) {
  torch::Tensor vv = v.clone().requires_grad_(true);
  torch::Tensor o = FixedConvMix(vv, f);
  (o * g).sum().backward();
  return {o.detach(), vv.grad()};
}

TEST_CASE("fixed conv: causal convolution and correlation match the sums they stand for") {
  torch::manual_seed(1);
  for (int64_t T : {1, 5, 33}) {
    torch::Tensor a = torch::randn({3, T}, torch::kDouble), r = torch::randn({T}, torch::kDouble);
    torch::Tensor spec = torch::fft::rfft(r, CausalFftLength(T));
    torch::Tensor conv = CausalConvolve(a, spec, T), corr = CausalCorrelate(a, spec, T);
    torch::Tensor want_conv = torch::zeros_like(a), want_corr = torch::zeros_like(a);
    auto A = a.accessor<double, 2>();
    auto R = r.accessor<double, 1>();
    auto C = want_conv.accessor<double, 2>(), D = want_corr.accessor<double, 2>();
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t k = 0; k <= i; ++k) {
          C[c][i] += A[c][k] * R[i - k];  // conv(i) = sum_{k<=i} a(k) r(i-k)
          D[c][k] += R[i - k] * A[c][i];  // corr(k) = sum_{i>=k} r(i-k) a(i)
        }
    CHECK((conv - want_conv).abs().max().item<double>() < 1e-12);
    CHECK((corr - want_corr).abs().max().item<double>() < 1e-12);
  }
  CHECK(CausalFftLength(1) == 2);
  CHECK(CausalFftLength(1025) == 4096);
}

TEST_CASE("fixed conv: O = P V and dV = P^T dO of SAF eq. 3, awkward and long T") {
  torch::manual_seed(2);
  for (int64_t T : {1, 97, 257, 1025, 4096}) {
    INFO("T = " << T);
    const int64_t context = T + 3, n = 2, B = T > 1100 ? 1 : 2, d = T > 1100 ? 4 : 8;
    // Head 0: a smooth fitted-like pattern (mild key bias, decaying distance profile);
    // head 1: random alpha and rho.
    torch::Tensor pos = torch::arange(context, torch::kFloat);
    Heads h =
        MakeHeads({torch::randn({context}) * 0.3, torch::randn({context})},
                  {-0.02 * pos + 0.1 * torch::randn({context}), torch::randn({context}) * 0.5});
    FixedConvFactors f;
    std::string why;
    REQUIRE(MakeFixedConvFactors(h.alpha, h.rho, h.log_z, T, 1e-6, &f, &why));
    torch::Tensor v = torch::randn({B, T, n, d}), g = torch::randn({B, T, n, d});
    auto [o, dv] = RunConv(f, v, g);
    auto [want_o, want_dv] = DenseReference(h, v, g);
    CHECK(o.scalar_type() == torch::kFloat);
    CHECK(WorstRowError(o, want_o) <= 1e-5);  // fp32 outputs of an fp64-accurate conv
    CHECK(WorstRowError(dv, want_dv) <= 1e-5);
  }
}

TEST_CASE("fixed conv: bf16 activations within bf16 rounding of the fp32 result") {
  torch::manual_seed(3);
  const int64_t T = 300, context = 300;
  Heads h = MakeHeads({torch::randn({context}) * 0.5}, {torch::randn({context}) * 0.5});
  FixedConvFactors f;
  std::string why;
  REQUIRE(MakeFixedConvFactors(h.alpha, h.rho, h.log_z, T, 1e-4, &f, &why));
  torch::Tensor v = torch::randn({2, T, 1, 16}), g = torch::randn({2, T, 1, 16});
  auto [o, dv] = RunConv(f, v.to(torch::kBFloat16), g.to(torch::kBFloat16));
  auto [want_o, want_dv] = DenseReference(h, v.to(torch::kBFloat16), g.to(torch::kBFloat16));
  CHECK(o.scalar_type() == torch::kBFloat16);
  CHECK(WorstRowError(o, want_o) <= 8e-3);  // bf16's unit roundoff is 3.9e-3
  CHECK(WorstRowError(dv, want_dv) <= 8e-3);
}

TEST_CASE("fixed conv: extreme alpha/rho take fp64 or are refused, never inaccurate") {
  torch::manual_seed(4);
  const int64_t T = 512;
  torch::Tensor pos = torch::arange(T, torch::kFloat);
  torch::Tensor v = torch::randn({1, T, 1, 8}), g = torch::randn({1, T, 1, 8});
  SECTION("huge constant offsets cancel in eq. 3: fp32 suffices") {
    Heads h = MakeHeads({torch::full({T}, 800.f) + 0.1 * torch::randn({T})},
                        {torch::full({T}, -900.f) - 0.01 * pos});
    FixedConvFactors f;
    std::string why;
    REQUIRE(MakeFixedConvFactors(h.alpha, h.rho, h.log_z, T, 1e-4, &f, &why));
    CHECK(f.a.scalar_type() == torch::kFloat);
    auto [o, dv] = RunConv(f, v, g);
    auto [want_o, want_dv] = DenseReference(h, v, g);
    CHECK(WorstRowError(o, want_o) <= 1e-4);
    CHECK(WorstRowError(dv, want_dv) <= 1e-4);
  }
  SECTION("a sink of +12 nats over a local decay: fp64, every row accurate") {
    torch::Tensor alpha = torch::zeros({T});
    alpha[0] = 12.f;
    Heads h = MakeHeads({alpha}, {-0.5 * pos});
    FixedConvFactors f;
    std::string why;
    REQUIRE(MakeFixedConvFactors(h.alpha, h.rho, h.log_z, T, 1e-4, &f, &why));
    CHECK(f.a.scalar_type() == torch::kDouble);
    auto [o, dv] = RunConv(f, v, g);
    auto [want_o, want_dv] = DenseReference(h, v, g);
    CHECK(WorstRowError(o, want_o) <= 1e-5);
    CHECK(WorstRowError(dv, want_dv) <= 1e-5);
  }
  SECTION("a sink of +60 nats over a sharp decay: refused with the reason") {
    torch::Tensor alpha = torch::zeros({T});
    alpha[0] = 60.f;
    Heads h = MakeHeads({alpha}, {-2.0 * pos});
    FixedConvFactors f;
    std::string why;
    CHECK_FALSE(MakeFixedConvFactors(h.alpha, h.rho, h.log_z, T, 1e-4, &f, &why));
    CHECK(why.find("ill-conditioned") != std::string::npos);
  }
}

}  // namespace
}  // namespace headlab
