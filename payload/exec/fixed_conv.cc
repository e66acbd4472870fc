// SAF eq. 3's fixed heads as a causal FFT convolution (fixed_conv.h).
#include "payload/exec/fixed_conv.h"

#include <cmath>
#include <limits>

namespace headlab {
namespace {

// Unit roundoffs of the two FFT precisions.
constexpr double kEps32 = 5.96e-8;   // 2^-24
constexpr double kEps64 = 1.11e-16;  // 2^-53

// O = P V with P given by FixedConvFactors, as an autograd function so the backward saves
// only the factors (differentiating through rfft/irfft would keep the complex spectra of V).
class FixedConvFunction : public torch::autograd::Function<FixedConvFunction> {
 public:
  // v: [B, T, n, d]; a, row: [n, T]; spectrum: [n, L/2 + 1]. Returns [B, T, n, d].
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor v,
                               torch::Tensor a, torch::Tensor row, torch::Tensor spectrum) {
    ctx->save_for_backward({a, row, spectrum});
    const int64_t T = v.size(1), n = v.size(2);
    // Channels last in time: [n, B, d, T]; SAF eq. 3 as s(i) sum_k r(i-k) (a(k) V(k)).
    torch::Tensor u = v.permute({2, 0, 3, 1}).to(a.scalar_type()) * a.view({n, 1, 1, T});
    torch::Tensor o = CausalConvolve(u, spectrum.view({n, 1, 1, -1}), T) * row.view({n, 1, 1, T});
    return o.to(v.scalar_type()).permute({1, 3, 0, 2});
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &a = saved[0], &row = saved[1], &spectrum = saved[2];
    const torch::Tensor& g_o = grads[0];  // [B, T, n, d]
    const int64_t T = g_o.size(1), n = g_o.size(2);
    // dV(j) = a(j) sum_{i>=j} r(i-j) s(i) dO(i) (SAF §3.3: dV = P^T dO).
    torch::Tensor w = g_o.permute({2, 0, 3, 1}).to(a.scalar_type()) * row.view({n, 1, 1, T});
    torch::Tensor du = CausalCorrelate(w, spectrum.view({n, 1, 1, -1}), T) * a.view({n, 1, 1, T});
    return {du.to(g_o.scalar_type()).permute({1, 3, 0, 2}), torch::Tensor(), torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

int64_t CausalFftLength(int64_t T) {
  int64_t n = 1;
  while (n < 2 * T) n <<= 1;  // >= 2T: the circular wrap-around lands on zero padding
  return n;
}

torch::Tensor CausalConvolve(const torch::Tensor& a, const torch::Tensor& r_spectrum, int64_t T) {
  const int64_t L = CausalFftLength(T);
  return torch::fft::irfft(torch::fft::rfft(a, L) * r_spectrum, L).narrow(-1, 0, T);
}

torch::Tensor CausalCorrelate(const torch::Tensor& w, const torch::Tensor& r_spectrum, int64_t T) {
  // With L >= 2T, circular index (i - j) mod L of i < j lands on r's zero padding.
  const int64_t L = CausalFftLength(T);
  return torch::fft::irfft(torch::fft::rfft(w, L) * r_spectrum.conj(), L).narrow(-1, 0, T);
}

bool MakeFixedConvFactors(const torch::Tensor& alpha, const torch::Tensor& rho,
                          const torch::Tensor& log_z, int64_t T, double tolerance,
                          FixedConvFactors* out, std::string* why) {
  torch::NoGradGuard no_grad;
  const torch::Tensor al = alpha.narrow(1, 0, T).to(torch::kDouble);
  const torch::Tensor rh = rho.narrow(1, 0, T).to(torch::kDouble);
  const torch::Tensor lz = log_z.narrow(1, 0, T).to(torch::kDouble);
  const torch::Tensor a_max = std::get<0>(al.max(1, true));  // [n, 1]
  const torch::Tensor r_max = std::get<0>(rh.max(1, true));
  const torch::Tensor a = torch::exp(al - a_max), r = torch::exp(rh - r_max);
  // log kappa = log |a|_2 + log |r|_2 - min_i (logZ(i) - max alpha - max rho), per head.
  const torch::Tensor log_c = lz - a_max - r_max;
  const torch::Tensor log_kappa =
      a.norm(2, 1).log() + r.norm(2, 1).log() - std::get<0>(log_c.min(1));
  const double worst = log_kappa.max().item<double>();
  const int64_t L = CausalFftLength(T);
  const double bound = std::log2(double(L)) * std::exp(worst);
  torch::ScalarType fft;
  if (!std::isfinite(worst)) {
    *why = "fixed pattern with a non-finite normaliser";
    return false;
  } else if (kEps32 * bound <= tolerance) {
    fft = torch::kFloat;
  } else if (kEps64 * bound <= tolerance) {
    fft = torch::kDouble;
  } else {
    *why =
        "fixed pattern too ill-conditioned for the FFT (log kappa " + std::to_string(worst) + ")";
    return false;
  }
  out->T = T;
  out->a = a.to(fft);
  out->row = torch::exp(-log_c).to(fft);
  out->spectrum = torch::fft::rfft(r.to(fft), L);
  return true;
}

torch::Tensor FixedConvMix(const torch::Tensor& v, const FixedConvFactors& f) {
  return FixedConvFunction::apply(v, f.a, f.row, f.spectrum);
}

}  // namespace headlab
