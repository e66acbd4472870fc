// SAF compact fitting: eq. 3-4 and eq. 20 by FFT (O(T log T)) or densely, Adam (App. A.2).
#include "payload/methods/saf/compact_fit.h"

#include <torch/fft.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "payload/exec/fixed_conv.h"

namespace headlab::saf {
namespace {

constexpr double kRhoInitFloor = 1e-9;  // App. A.2: rho(d) = log max{eta_rel(d)/(T-d), 1e-9}
constexpr double kAdamBeta1 = 0.9, kAdamBeta2 = 0.999, kAdamEps = 1e-8;  // Adam's defaults
// Smallest normaliser the FFT path trusts. Rows whose scaled Z falls below it carry
// probability ~1e-280 of the largest term and would otherwise become log(<= 0).
constexpr double kMinScaledZ = 1e-280;

torch::Tensor AsF64(const torch::Tensor& t) { return t.detach().to(torch::kFloat64).contiguous(); }

// [T, T] long matrix of offsets i - j (query i, key j), clamped at 0 above the diagonal.
torch::Tensor Offsets(int64_t T, torch::Device device) {
  torch::Tensor i = torch::arange(T, torch::dtype(torch::kLong).device(device)).unsqueeze(1);
  torch::Tensor j = torch::arange(T, torch::dtype(torch::kLong).device(device)).unsqueeze(0);
  return (i - j).clamp_min(0);
}

torch::Tensor CausalMask(int64_t T, torch::Device device) {
  return torch::ones({T, T}, torch::dtype(torch::kBool).device(device)).tril();
}

// Returns d -> sum_{i-j=d} m(..., i, j) for causal [..., T, T] matrices m (zeros above the
// diagonal): [..., T].
torch::Tensor DiagonalSums(const torch::Tensor& m) {
  const int64_t T = m.size(-1);
  std::vector<int64_t> lead(m.sizes().begin(), m.sizes().end() - 2);
  torch::Tensor flat = m.reshape({-1, T * T});
  torch::Tensor out = torch::zeros({flat.size(0), T}, m.options())
                          .index_add_(1, Offsets(T, m.device()).flatten(), flat);
  lead.push_back(T);
  return out.view(lead);
}

// The scaled factors of eq. 3 per row (last dimension): a = exp(alpha - max alpha),
// r = exp(rho - max rho), and the shift [..., 1] their product carries.
struct Scaled {
  torch::Tensor a, r, shift;
};
Scaled ScaleFactors(const torch::Tensor& alpha, const torch::Tensor& rho) {
  torch::Tensor ma = std::get<0>(alpha.max(-1, /*keepdim=*/true));
  torch::Tensor mr = std::get<0>(rho.max(-1, /*keepdim=*/true));
  return {torch::exp(alpha - ma), torch::exp(rho - mr), ma + mr};
}

// c(..., i) = sum_{k<=i} a(..., k) r(..., i-k) for i < T (causal convolution by FFT, row by
// row).
torch::Tensor CausalConvolution(const torch::Tensor& a, const torch::Tensor& r) {
  const int64_t T = a.size(-1);
  return CausalConvolve(a, torch::fft::rfft(r, CausalFftLength(T)), T);
}

// c(..., j) = sum_{d >= 0, j+d < T} r(..., d) w(..., j+d) for j < T (correlation by FFT).
torch::Tensor CausalCorrelation(const torch::Tensor& w, const torch::Tensor& r) {
  const int64_t T = w.size(-1);
  return CausalCorrelate(w, torch::fft::rfft(r, CausalFftLength(T)), T);
}

// The unnormalised log-pattern alpha(j) + rho(i-j) for j <= i, -inf above: [..., T, T].
torch::Tensor CompactLogits(const torch::Tensor& alpha, const torch::Tensor& rho) {
  const int64_t T = alpha.size(-1);
  torch::Tensor logits = alpha.unsqueeze(-2) + rho.index({"...", Offsets(T, rho.device())});
  return logits.masked_fill(CausalMask(T, rho.device()).logical_not(), -INFINITY);
}

// Returns eq. 4's loss of each row: (sum_i log Z(i) - eta_abs . alpha - eta_rel . rho) / T.
torch::Tensor FitLossRows(const torch::Tensor& log_z, const Marginals& eta,
                          const torch::Tensor& alpha, const torch::Tensor& rho) {
  const double T = double(log_z.size(-1));
  return (log_z.sum(-1) - (eta.eta_abs * alpha).sum(-1) - (eta.eta_rel * rho).sum(-1)) / T;
}

// App. A.2's optimisation of eq. 4 for the rows of `eta` ([..., T] float64, one head per
// row, all at once): initialisation alpha = 0, rho(d) = log max(eta_rel(d)/(T-d), 1e-9),
// then `steps` Adam steps with the gradient of eq. 20. Returns alpha, rho.
std::pair<torch::Tensor, torch::Tensor> AdamFit(const Marginals& eta,
                                                const CompactFitOptions& options) {
  const int64_t T = eta.eta_abs.size(-1);
  torch::Tensor alpha = torch::zeros_like(eta.eta_abs);
  torch::Tensor counts = torch::arange(T, 0, -1, eta.eta_rel.options());  // T - d keys at offset d
  torch::Tensor rho = torch::log((eta.eta_rel / counts).clamp_min(kRhoInitFloor));

  torch::Tensor m_a = torch::zeros_like(alpha), v_a = torch::zeros_like(alpha);
  torch::Tensor m_r = torch::zeros_like(rho), v_r = torch::zeros_like(rho);
  auto adam = [&](torch::Tensor& x, torch::Tensor& m, torch::Tensor& v, const torch::Tensor& g,
                  int64_t t) {
    m.mul_(kAdamBeta1).add_(g, 1 - kAdamBeta1);
    v.mul_(kAdamBeta2).addcmul_(g, g, 1 - kAdamBeta2);
    double c1 = 1 - std::pow(kAdamBeta1, double(t)), c2 = 1 - std::pow(kAdamBeta2, double(t));
    x.sub_(options.lr * (m / c1) / ((v / c2).sqrt() + kAdamEps));
  };
  for (int64_t t = 1; t <= options.steps; ++t) {
    ModelMarginals mm = CompactMarginals(alpha, rho, options.path);
    // SAF eq. 20: dL/dalpha(j) = (sum_i P_hat(i,j) - eta_abs(j)) / T, likewise for rho.
    torch::Tensor g_alpha = (mm.col - eta.eta_abs) / double(T);
    torch::Tensor g_rho = (mm.diag - eta.eta_rel) / double(T);
    adam(alpha, m_a, v_a, g_alpha, t);
    adam(rho, m_r, v_r, g_rho, t);
  }
  return {alpha, rho};
}

}  // namespace

torch::Tensor PrepareTarget(const torch::Tensor& mean, double floor) {
  TORCH_CHECK(mean.dim() == 2 && mean.size(0) == mean.size(1), "target must be [T, T]");
  const int64_t T = mean.size(0);
  torch::Tensor causal = CausalMask(T, mean.device());
  torch::Tensor p = AsF64(mean).clamp_min(floor).masked_fill(causal.logical_not(), 0.0);
  return p / p.sum(1, /*keepdim=*/true);
}

Marginals SufficientStatistics(const torch::Tensor& p) {
  torch::Tensor q = AsF64(p);
  return {q.sum(-2), DiagonalSums(q)};  // eq. 4: eta_abs(j), eta_rel(d)
}

torch::Tensor LogNormalizerFft(const torch::Tensor& alpha, const torch::Tensor& rho) {
  Scaled s = ScaleFactors(AsF64(alpha), AsF64(rho));
  return torch::log(CausalConvolution(s.a, s.r).clamp_min(kMinScaledZ)) + s.shift;
}

torch::Tensor LogNormalizerDense(const torch::Tensor& alpha, const torch::Tensor& rho) {
  return torch::logsumexp(CompactLogits(AsF64(alpha), AsF64(rho)), -1);
}

torch::Tensor CompactPatternDense(const torch::Tensor& alpha, const torch::Tensor& rho) {
  torch::Tensor logits = CompactLogits(AsF64(alpha), AsF64(rho));
  return torch::exp(logits - torch::logsumexp(logits, -1, /*keepdim=*/true));  // SAF eq. 3
}

ModelMarginals CompactMarginals(const torch::Tensor& alpha, const torch::Tensor& rho,
                                NormalizerPath path) {
  torch::Tensor al = AsF64(alpha), rh = AsF64(rho);
  if (path == NormalizerPath::kDense) {
    torch::Tensor logits = CompactLogits(al, rh);
    torch::Tensor log_z = torch::logsumexp(logits, -1);
    torch::Tensor p = torch::exp(logits - log_z.unsqueeze(-1));
    return {p.sum(-2), DiagonalSums(p), log_z};
  }
  // P_hat(i,j) = a(j) r(i-j) w(i) with w = 1/Z in the same scaling (the shift cancels), so
  // sum_i P_hat(i,j) = a(j) (w * r)(j) and sum_{i-j=d} P_hat(i,j) = r(d) (w * a)(d), both
  // correlations: SAF eq. 20 without the T x T matrix.
  Scaled s = ScaleFactors(al, rh);
  torch::Tensor z = CausalConvolution(s.a, s.r).clamp_min(kMinScaledZ);
  torch::Tensor w = 1.0 / z;
  torch::Tensor col = s.a * CausalCorrelation(w, s.r);
  torch::Tensor diag = s.r * CausalCorrelation(w, s.a);
  return {col, diag, torch::log(z) + s.shift};
}

double FitLoss(const torch::Tensor& log_z, const Marginals& eta, const torch::Tensor& alpha,
               const torch::Tensor& rho) {
  // SAF eq. 4.
  return FitLossRows(log_z, eta, AsF64(alpha), AsF64(rho)).item<double>();
}

double MeanRowEntropy(const torch::Tensor& p) {
  torch::Tensor q = AsF64(p);
  torch::Tensor plogp = torch::where(q > 0, q * torch::log(q), torch::zeros_like(q));
  return -plogp.sum().item<double>() / double(q.size(0));
}

double RowAveragedKl(const torch::Tensor& p, const torch::Tensor& q) {
  torch::Tensor a = AsF64(p), b = AsF64(q);
  torch::Tensor terms =
      torch::where(a > 0, a * (torch::log(a) - torch::log(b)), torch::zeros_like(a));
  return terms.sum().item<double>() / double(a.size(0));
}

CompactFit FitCompact(const torch::Tensor& target, const CompactFitOptions& options) {
  torch::Tensor p = AsF64(target);
  Marginals eta = SufficientStatistics(p);
  if (options.path == NormalizerPath::kFft) {
    Marginals row = {eta.eta_abs.unsqueeze(0), eta.eta_rel.unsqueeze(0)};
    return FitCompactBatched(row, torch::full({1}, MeanRowEntropy(p), p.options()), options)[0];
  }
  auto [alpha, rho] = AdamFit(eta, options);
  CompactFit fit;
  fit.alpha = alpha.cpu();
  fit.rho = rho.cpu();
  fit.log_z = LogNormalizerDense(alpha, rho).cpu();
  fit.kl = RowAveragedKl(p, CompactPatternDense(alpha, rho));
  fit.accepted = std::isfinite(fit.kl) && fit.kl <= options.max_kl;
  return fit;
}

std::vector<CompactFit> FitCompactBatched(const Marginals& eta, const torch::Tensor& entropy,
                                          const CompactFitOptions& options) {
  TORCH_CHECK(options.path == NormalizerPath::kFft, "batched fits take the FFT path");
  TORCH_CHECK(eta.eta_abs.dim() == 2 && eta.eta_rel.sizes() == eta.eta_abs.sizes() &&
                  entropy.dim() == 1 && entropy.size(0) == eta.eta_abs.size(0),
              "batched fits need eta [n, T] and entropies [n]");
  Marginals e = {AsF64(eta.eta_abs), AsF64(eta.eta_rel)};
  auto [alpha, rho] = AdamFit(e, options);
  torch::Tensor log_z = LogNormalizerFft(alpha, rho);
  // KL(P || P_hat) averaged over rows = eq. 4's cross-entropy minus the target's mean row
  // entropy: no T x T matrix of the fit is formed.
  torch::Tensor kl =
      (FitLossRows(log_z, e, alpha, rho) - AsF64(entropy).to(alpha.device())).clamp_min(0.0).cpu();
  alpha = alpha.cpu();
  rho = rho.cpu();
  log_z = log_z.cpu();
  std::vector<CompactFit> fits(size_t(alpha.size(0)));
  for (int64_t i = 0; i < alpha.size(0); ++i) {
    CompactFit& f = fits[size_t(i)];
    f.alpha = alpha[i];
    f.rho = rho[i];
    f.log_z = log_z[i];
    f.kl = kl[i].item<double>();
    f.accepted = std::isfinite(f.kl) && f.kl <= options.max_kl;
  }
  return fits;
}

}  // namespace headlab::saf
