// SAF's compact fixed heads (eq. 3) as a causal convolution: the cheapest exact form of
// O = P V when P(i,j) = exp(alpha(j) + rho(i-j) - logZ(i)) for j <= i. Then
//   O(i) = exp(-logZ(i)) sum_{j<=i} exp(rho(i-j)) (exp(alpha(j)) V(j)),
// a causal convolution of u(j) = exp(alpha(j)) V(j) with the kernel exp(rho), done with FFTs
// in O(T log T) per channel (B * d channels per head) instead of the pattern GEMM's O(T^2);
// the backward is the matching correlation, dV(j) = exp(alpha(j)) sum_{i>=j} exp(rho(i-j))
// exp(-logZ(i)) dO(i) (SAF §3.3's dV = P^T dO).
//
// Stabilised: the factors are a = exp(alpha - max alpha), r = exp(rho - max rho) and the row
// factor s(i) = exp(max alpha + max rho - logZ(i)), each in [0, 1] but s. An FFT convolution's
// error is normwise, ~ eps log2(L) |a|_2 |r|_2 (L the FFT length), so the rows whose sum
// c(i) = exp(logZ(i) - max alpha - max rho) is small lose relative accuracy; the conditioning
//   kappa = |a|_2 |r|_2 / min_i c(i)
// decides the FFT's precision: fp32 when eps32 log2(L) kappa is within the activations'
// tolerance, else fp64, else (an extreme pattern, e.g. a strong sink with a sharp local
// decay) the form is not offered and the head keeps the GEMM or the fused kernel.
// Trainable alpha/rho (SAF App. C.3.2) are not differentiated here: such layers keep the
// dense reference (attention_plan.h).
#pragma once

#include <cstdint>
#include <string>

#include <torch/torch.h>

namespace headlab {

// The FFT length of a linear (not circular) causal convolution of length T: a power of two
// >= 2T.
int64_t CausalFftLength(int64_t T);

// c(..., i) = sum_{k<=i} a(..., k) r(i-k) for i < T, with r given by its spectrum
// rfft(r, L), L = CausalFftLength(T) (broadcast against a's leading dimensions).
torch::Tensor CausalConvolve(const torch::Tensor& a, const torch::Tensor& r_spectrum, int64_t T);
// c(..., j) = sum_{i>=j, i<T} r(i-j) w(..., i) for j < T: the adjoint of CausalConvolve.
torch::Tensor CausalCorrelate(const torch::Tensor& w, const torch::Tensor& r_spectrum, int64_t T);

// The stabilised factors of n compact fixed heads at length T, in the FFT's dtype.
struct FixedConvFactors {
  torch::Tensor a;         // [n, T] exp(alpha - max alpha)
  torch::Tensor row;       // [n, T] exp(max alpha + max rho - logZ)
  torch::Tensor spectrum;  // [n, L/2 + 1] rfft(exp(rho - max rho), L)
  int64_t T = 0;
};

// Builds the factors of the heads whose alpha, rho, logZ are the rows of `alpha`, `rho`,
// `log_z` ([n, >= T], fp32), choosing the FFT's precision for outputs accurate to
// `tolerance` (relative; e.g. 1e-4 for bf16 activations). Returns false (and why) when
// neither fp32 nor fp64 reaches it.
bool MakeFixedConvFactors(const torch::Tensor& alpha, const torch::Tensor& rho,
                          const torch::Tensor& log_z, int64_t T, double tolerance,
                          FixedConvFactors* out, std::string* why);

// O = P V for the heads of `f`: v [B, T, n, d] -> [B, T, n, d] in v's dtype, differentiable
// in v (an autograd function: the backward is one correlation, no [T, T] pattern is formed).
torch::Tensor FixedConvMix(const torch::Tensor& v, const FixedConvFactors& f);

}  // namespace headlab
