#include "payload/methods/aoh/kernel_spectrum.h"

#include "payload/exec/model.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::aoh {
namespace {

// Returns max |a - b| / max |b| over the leading min(len) values.
double RelErr(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).abs().max() / b.abs().max()).item<double>();
}

TEST_CASE("aoh spectrum: the Gram factors give the SVD of the explicit M_h") {
  torch::manual_seed(3);
  for (int64_t d : {4, 8}) {
    for (int64_t C : {16, 40}) {
      torch::Tensor wq = torch::randn({d, C}) * 0.3, wk = torch::randn({d, C}) * 0.7;
      torch::Tensor exact = torch::linalg_svdvals(KernelMatrix(wq, wk)).narrow(0, 0, d);
      torch::Tensor proxy = KernelSpectrum(wq, wk);
      REQUIRE(proxy.size(0) == d);
      CHECK(RelErr(proxy, exact) < 1e-12);
      // The scores agree too.
      SpectralScores a = ScoresFromSpectrum(proxy), b = ScoresFromSpectrum(exact);
      CHECK(a.effective_rank == Approx(b.effective_rank).epsilon(1e-6));
      CHECK(a.frobenius == Approx(KernelMatrix(wq, wk).norm().item<double>()).epsilon(1e-6));
    }
  }
}

TEST_CASE("aoh spectrum: the rotated factors give the SVD of the kernel with rotated queries") {
  torch::manual_seed(4);
  const int64_t d = 8, C = 24;
  torch::Tensor wq = torch::randn({d, C}), wk = torch::randn({d, C});
  for (int64_t delta : {1, 7, 300}) {
    torch::Tensor r = RopeRotation(d, RopeSpec{10000.0}, delta);
    CHECK(torch::allclose(torch::matmul(r, r.transpose(0, 1)), torch::eye(d, torch::kDouble), 1e-12,
                          1e-12));
    // Score at distance delta: (R_i W_Q x)(R_j W_K y) = x^T W_Q^T R_delta^T W_K y, so the
    // kernel is W_K^T (R_delta W_Q) as a matrix acting on queries.
    torch::Tensor rotated = torch::matmul(r, wq.to(torch::kDouble));
    torch::Tensor exact = torch::linalg_svdvals(KernelMatrix(rotated, wk)).narrow(0, 0, d);
    CHECK(RelErr(KernelSpectrum(wq, wk, r), exact) < 1e-12);
  }
}

TEST_CASE("aoh spectrum: RopeRotation is the model's RoPE at that position") {
  torch::manual_seed(5);
  const int64_t d = 8, T = 6;
  torch::Tensor x = torch::randn({1, 1, 1, d}).expand({1, 1, T, d}).contiguous();
  torch::Tensor rotated = RotaryEmbedding(x, RopeSpec{500.0});  // position t in row t
  for (int64_t t = 0; t < T; ++t) {
    torch::Tensor mine =
        torch::matmul(RopeRotation(d, RopeSpec{500.0}, t), x[0][0][t].to(torch::kDouble));
    CHECK(torch::allclose(mine.to(torch::kFloat), rotated[0][0][t], 1e-5, 1e-5));
  }
}

TEST_CASE("aoh spectrum: effective rank is 1 for rank-1 and d_head for identity-like M_h") {
  torch::manual_seed(6);
  const int64_t d = 8, C = 32;
  torch::Tensor u = torch::randn({d, 1}), a = torch::randn({1, C});
  torch::Tensor wq_rank1 = torch::matmul(u, a);  // every query row along a: M_h rank 1
  torch::Tensor wk = torch::randn({d, C});
  CHECK(EffectiveRank(KernelSpectrum(wq_rank1, wk)) == Approx(1.0).epsilon(1e-6));
  torch::Tensor eye = torch::zeros({d, C});
  eye.narrow(1, 0, d).copy_(torch::eye(d));  // W_Q = W_K = [I 0]: M_h = diag(I_d, 0)
  SpectralScores s = ScoresFromSpectrum(KernelSpectrum(eye * 2, eye));
  CHECK(s.effective_rank == Approx(double(d)).epsilon(1e-9));
  CHECK(s.stable_rank == Approx(double(d)).epsilon(1e-9));
  CHECK(s.spectral == Approx(2.0).epsilon(1e-9));
  CHECK(s.frobenius == Approx(2.0 * std::sqrt(double(d))).epsilon(1e-9));
  CHECK(EffectiveRank(torch::zeros({d})) == 0);
  // Known spectrum: sigma = (3, 1) -> p = (0.75, 0.25).
  double h = -(0.75 * std::log(0.75) + 0.25 * std::log(0.25));
  CHECK(EffectiveRank(torch::tensor({3.0, 1.0, 0.0})) == Approx(std::exp(h)));
}

TEST_CASE("aoh spectrum: Frobenius inner product by the trace identity equals the explicit one") {
  torch::manual_seed(7);
  const int64_t d = 4, C = 20;
  torch::Tensor q1 = torch::randn({d, C}), k1 = torch::randn({d, C});
  torch::Tensor q2 = torch::randn({d, C}), k2 = torch::randn({d, C});
  double explicit_ip = (KernelMatrix(q1, k1) * KernelMatrix(q2, k2)).sum().item<double>();
  CHECK(FrobeniusInnerProduct(q1, k1, q2, k2) == Approx(explicit_ip).epsilon(1e-9));
  double n1 = KernelMatrix(q1, k1).norm().item<double>();
  CHECK(FrobeniusInnerProduct(q1, k1, q1, k1) == Approx(n1 * n1).epsilon(1e-9));
  double n2 = KernelMatrix(q2, k2).norm().item<double>();
  CHECK(NormalizedFrobenius(q1, k1, q2, k2) == Approx(explicit_ip / (n1 * n2)).epsilon(1e-9));
  CHECK(NormalizedFrobenius(q1, k1, q1 * 3, k1) == Approx(1.0));
}

TEST_CASE("aoh spectrum: RoPE-aware scores average over log-spaced distances") {
  CHECK(RopeDistances(0) == std::vector<int64_t>{0});
  CHECK(RopeDistances(8) == std::vector<int64_t>{0, 1, 2, 4, 8});
  CHECK(RopeDistances(10) == std::vector<int64_t>{0, 1, 2, 4, 8, 10});
  torch::manual_seed(8);
  torch::Tensor wq = torch::randn({8, 16}), wk = torch::randn({8, 16});
  SpectralScores vanilla = RopeAwareScores(wq, wk, RopeSpec{10000.0}, 0);
  CHECK(vanilla.effective_rank == Approx(EffectiveRank(KernelSpectrum(wq, wk))));
  // The RoPE-aware score is the mean over distances of the scores of the explicitly rotated
  // kernels W_K^T R_delta W_Q.
  double er = 0, spectral = 0;
  for (int64_t delta : RopeDistances(64)) {
    torch::Tensor rotated =
        torch::matmul(RopeRotation(8, RopeSpec{10000.0}, delta), wq.to(torch::kDouble));
    SpectralScores s = ScoresFromSpectrum(torch::linalg_svdvals(KernelMatrix(rotated, wk)));
    er += s.effective_rank / 8;
    spectral += s.spectral / 8;
  }
  SpectralScores rope = RopeAwareScores(wq, wk, RopeSpec{10000.0}, 64);
  CHECK(rope.effective_rank == Approx(er).epsilon(1e-6));
  CHECK(rope.spectral == Approx(spectral).epsilon(1e-6));
  CHECK(rope.effective_rank != Approx(vanilla.effective_rank).epsilon(1e-6));
}

// Brute force for one layer: every query head's explicit d_model x d_model kernel with
// rotated queries, its full SVD, averaged over the RoPE distances.
std::vector<SpectralScores> BruteForceLayer(const torch::Tensor& wq, const torch::Tensor& wk,
                                            int64_t d, const RopeSpec& rope, int64_t max_distance) {
  const int64_t H = wq.size(0) / d, G = wk.size(0) / d;
  std::vector<SpectralScores> out(static_cast<size_t>(H));
  const std::vector<int64_t> distances = RopeDistances(max_distance);
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t delta : distances) {
      torch::Tensor q =
          torch::matmul(RopeRotation(d, rope, delta), wq.narrow(0, h * d, d).to(torch::kDouble));
      torch::Tensor k = wk.narrow(0, (h / (H / G)) * d, d).to(torch::kDouble);
      SpectralScores s = ScoresFromSpectrum(torch::linalg_svdvals(KernelMatrix(q, k)));
      out[size_t(h)].effective_rank += s.effective_rank / double(distances.size());
      out[size_t(h)].frobenius += s.frobenius / double(distances.size());
      out[size_t(h)].spectral += s.spectral / double(distances.size());
      out[size_t(h)].stable_rank += s.stable_rank / double(distances.size());
    }
  }
  return out;
}

TEST_CASE("aoh spectrum: a GQA layer's batched scores equal the brute-force SVD of every head") {
  torch::manual_seed(9);
  const int64_t d = 8, C = 40, H = 6, G = 2;
  // bf16 weights as an imported checkpoint holds them; one query head of rank 2.
  torch::Tensor wq = torch::randn({H * d, C}).to(torch::kBFloat16);
  torch::Tensor wk = torch::randn({G * d, C}).to(torch::kBFloat16);
  // Head 3's rows are u or v times a power of two: exactly rank 2 in bf16.
  torch::Tensor u = torch::randn({C}).to(torch::kBFloat16),
                v = torch::randn({C}).to(torch::kBFloat16);
  for (int64_t i = 0; i < d; ++i) wq[3 * d + i].copy_((i % 2 ? u : v) * double(1 << (i % 3)));
  RopeSpec llama3{500000.0};
  llama3.scaling.type = "llama3";
  llama3.scaling.factor = 8;
  llama3.scaling.original_context = 64;
  for (const RopeSpec& rope : {RopeSpec{10000.0}, llama3}) {
    for (int64_t max_distance : {0, 100}) {
      const std::vector<SpectralScores> fast = LayerScores(wq, wk, d, rope, max_distance);
      const std::vector<SpectralScores> slow = BruteForceLayer(wq, wk, d, rope, max_distance);
      REQUIRE(fast.size() == size_t(H));
      for (int64_t h = 0; h < H; ++h) {
        INFO("head " << h << " max_distance " << max_distance << " scaling " << rope.scaling.type);
        CHECK(fast[size_t(h)].effective_rank ==
              Approx(slow[size_t(h)].effective_rank).epsilon(1e-10));
        CHECK(fast[size_t(h)].frobenius == Approx(slow[size_t(h)].frobenius).epsilon(1e-10));
        CHECK(fast[size_t(h)].spectral == Approx(slow[size_t(h)].spectral).epsilon(1e-10));
        CHECK(fast[size_t(h)].stable_rank == Approx(slow[size_t(h)].stable_rank).epsilon(1e-10));
      }
      // The rank-2 head is found as such (vanilla: exactly two nonzero singular values).
      if (max_distance == 0) CHECK(fast[3].effective_rank < 2.0 + 1e-9);
    }
  }
}

TEST_CASE("aoh spectrum: RopeRotation follows the model's RoPE scaling") {
  torch::manual_seed(10);
  const int64_t d = 8, T = 300;
  RopeSpec yarn{10000.0};
  yarn.scaling.type = "yarn";
  yarn.scaling.factor = 4;
  yarn.scaling.original_context = 32;
  torch::Tensor x = torch::randn({1, 1, 1, d}).expand({1, 1, T, d}).contiguous();
  torch::Tensor rotated =
      RotaryEmbedding(x, yarn) / RopeAttentionFactor(yarn);  // the rotation alone
  for (int64_t t : {1, 17, 299}) {
    torch::Tensor mine = torch::matmul(RopeRotation(d, yarn, t), x[0][0][t].to(torch::kDouble));
    CHECK(torch::allclose(mine.to(torch::kFloat), rotated[0][0][t], 1e-5, 1e-5));
  }
  CHECK_FALSE(torch::allclose(RopeRotation(d, yarn, 299), RopeRotation(d, RopeSpec{10000.0}, 299)));
}

}  // namespace
}  // namespace headlab::aoh
