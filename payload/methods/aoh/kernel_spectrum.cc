// Kernel attention matrix spectra and scores in d_head space (AoH §4, §6.4, App. J.1, L).
#include "payload/methods/aoh/kernel_spectrum.h"

#include <cmath>

namespace headlab::aoh {
namespace {

torch::Tensor Double(const torch::Tensor& t) {
  return t.detach().to(torch::TensorOptions().dtype(torch::kDouble).device(torch::kCPU));
}

// Returns the symmetric PSD square root of a symmetric PSD matrix (negative rounding
// eigenvalues clamped to 0).
torch::Tensor PsdSqrt(const torch::Tensor& a) {
  auto eig = torch::linalg_eigh(a, "L");
  torch::Tensor lambda = std::get<0>(eig).clamp_min(0).sqrt();
  torch::Tensor u = std::get<1>(eig);
  return torch::matmul(u * lambda.unsqueeze(0), u.transpose(0, 1));
}

}  // namespace

torch::Tensor KernelMatrix(const torch::Tensor& wq, const torch::Tensor& wk) {
  return torch::matmul(Double(wk).transpose(0, 1), Double(wq));  // AoH §1: W_K^T W_Q
}

torch::Tensor GramProxySpectrum(const torch::Tensor& wq, const torch::Tensor& wk,
                                const torch::Tensor& rotation) {
  torch::Tensor q = Double(wq), k = Double(wk);
  torch::Tensor a = torch::matmul(q, q.transpose(0, 1));  // W_Q W_Q^T, [d, d]
  torch::Tensor b = torch::matmul(k, k.transpose(0, 1));  // W_K W_K^T
  if (rotation.defined()) {
    torch::Tensor r = Double(rotation);
    a = torch::matmul(torch::matmul(r, a), r.transpose(0, 1));  // AoH §6.4: R_Delta A R_Delta^T
  }
  // lambda(A B) = lambda(A^{1/2} B A^{1/2}) for PSD A: a similarity transform when A is
  // invertible, and by continuity otherwise.
  torch::Tensor s = PsdSqrt(a);
  torch::Tensor sym = torch::matmul(torch::matmul(s, b), s);
  sym = 0.5 * (sym + sym.transpose(0, 1));  // exact symmetry for the eigensolver
  torch::Tensor lambda = torch::linalg_eigvalsh(sym, "L").clamp_min(0);
  return std::get<0>(lambda.sqrt().sort(/*dim=*/0, /*descending=*/true));
}

double EffectiveRank(const torch::Tensor& sigma) {
  torch::Tensor s = Double(sigma).abs();
  if (s.numel() == 0) return 0;
  double top = s.max().item<double>();
  if (!(top > 0)) return 0;
  s = s.masked_select(s > kZeroSingularValue * top);  // the r_h nonzero values
  torch::Tensor p = s / s.sum();                         // App. J.1: sigma_hat_k
  return std::exp(-(p * p.log()).sum().item<double>());
}

SpectralScores ScoresFromSpectrum(const torch::Tensor& sigma) {
  torch::Tensor s = Double(sigma).abs();
  SpectralScores out;
  out.effective_rank = EffectiveRank(s);
  double fro2 = s.pow(2).sum().item<double>();
  out.frobenius = std::sqrt(fro2);
  out.spectral = s.numel() ? s.max().item<double>() : 0.0;
  out.stable_rank = out.spectral > 0 ? fro2 / (out.spectral * out.spectral) : 0.0;
  return out;
}

double MetricValue(const SpectralScores& s, Metric m) {
  switch (m) {
    case Metric::kEffectiveRank: return s.effective_rank;
    case Metric::kFrobenius: return s.frobenius;
    case Metric::kSpectral: return s.spectral;
    case Metric::kStableRank: return s.stable_rank;
  }
  return s.effective_rank;
}

torch::Tensor RopeRotation(int64_t head_dim, double base, int64_t delta) {
  const int64_t half = head_dim / 2;
  torch::Tensor r = torch::zeros({head_dim, head_dim}, torch::kDouble);
  auto acc = r.accessor<double, 2>();
  for (int64_t i = 0; i < half; ++i) {
    // Same frequencies as RotaryEmbedding: base^(-2i/d).
    double angle = double(delta) * std::pow(base, -2.0 * double(i) / double(head_dim));
    double c = std::cos(angle), s = std::sin(angle);
    acc[i][i] = c;
    acc[i][i + half] = -s;
    acc[i + half][i] = s;
    acc[i + half][i + half] = c;
  }
  return r;
}

std::vector<int64_t> RopeDistances(int64_t max_distance) {
  std::vector<int64_t> d = {0};
  for (int64_t p = 1; p < max_distance; p *= 2) d.push_back(p);
  if (max_distance > 0) d.push_back(max_distance);
  return d;
}

SpectralScores RopeAwareScores(const torch::Tensor& wq, const torch::Tensor& wk, double base,
                               int64_t max_distance) {
  const std::vector<int64_t> distances = RopeDistances(max_distance);
  SpectralScores mean;
  for (int64_t delta : distances) {
    torch::Tensor r = delta == 0 ? torch::Tensor() : RopeRotation(wq.size(0), base, delta);
    SpectralScores s = ScoresFromSpectrum(GramProxySpectrum(wq, wk, r));
    mean.effective_rank += s.effective_rank;
    mean.frobenius += s.frobenius;
    mean.spectral += s.spectral;
    mean.stable_rank += s.stable_rank;
  }
  const double n = double(distances.size());
  mean.effective_rank /= n;
  mean.frobenius /= n;
  mean.spectral /= n;
  mean.stable_rank /= n;
  return mean;
}

double FrobeniusInnerProduct(const torch::Tensor& wq_a, const torch::Tensor& wk_a,
                             const torch::Tensor& wq_b, const torch::Tensor& wk_b) {
  // App. L: <M_a, M_b>_F = tr(W_Q^a W_Q^b^T . W_K^b W_K^a^T), two d_head x d_head products.
  torch::Tensor qq = torch::matmul(Double(wq_a), Double(wq_b).transpose(0, 1));
  torch::Tensor kk = torch::matmul(Double(wk_b), Double(wk_a).transpose(0, 1));
  return (qq * kk.transpose(0, 1)).sum().item<double>();  // tr(X Y) = sum(X o Y^T)
}

double NormalizedFrobenius(const torch::Tensor& wq_a, const torch::Tensor& wk_a,
                           const torch::Tensor& wq_b, const torch::Tensor& wk_b) {
  double na = FrobeniusInnerProduct(wq_a, wk_a, wq_a, wk_a);
  double nb = FrobeniusInnerProduct(wq_b, wk_b, wq_b, wk_b);
  if (!(na > 0) || !(nb > 0)) return 0;
  return FrobeniusInnerProduct(wq_a, wk_a, wq_b, wk_b) / std::sqrt(na * nb);
}

}  // namespace headlab::aoh
