// reference.h: the plain C++ (double accumulation) reference of the hybrid-head attention
// layer, the oracle of the kernel tests. No LibTorch, no CUDA: runs on any machine.
#pragma once

#include <vector>

#include "kernels/hybrid_attention.h"

namespace headlab {
namespace kernels {

// How the reference rounds its intermediates. kNone keeps doubles throughout (the fp32
// oracle). kBF16 / kF16 round S, P, O, dP, dS and the gradients to that type at the points
// where an eager low-precision implementation (matmul outputs, softmax output) would: the
// flash-attention rule compares a kernel's error with this reference's own error.
enum class Rounding { kNone, kBF16, kF16 };

// Returns x rounded to the nearest value of `r` (round-to-nearest-even), as a float.
float RoundTo(float x, Rounding r);

// Dense host tensors, contiguous: q, o, d_o, dq are (B, T, H, d); k, v, dk, dv are
// (B, T, Hkv, d); lse is (B, H, T). `heads` has H entries whose alpha/rho/log_z are HOST
// pointers for fixed heads.
struct ReferenceProblem {
  AttentionShape shape;  // dtype is ignored here
  const HeadSpec* heads = nullptr;
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
};

// Computes O and lse of every head.
void ReferenceForward(const ReferenceProblem& p, Rounding r, std::vector<float>* o,
                      std::vector<float>* lse);

// Computes dQ, dK, dV for the output gradient d_o. Fixed and pruned heads get dQ = 0 and
// add nothing to dK; fixed heads add P^T dO to dV.
void ReferenceBackward(const ReferenceProblem& p, const float* d_o, Rounding r,
                       std::vector<float>* dq, std::vector<float>* dk, std::vector<float>* dv);

// Fills log_z[i] = log sum_{k<=i} exp(alpha[k] + rho[i-k]) for i < T (SAF eq. 3's Z(i)),
// computed stably in double.
void FixedLogZ(const float* alpha, const float* rho, int T, float* log_z);

// Returns ||a - b||_2 / max(||b||_2, 1e-30) over n elements, in double.
double RelativeL2(const float* a, const float* b, size_t n);

}  // namespace kernels
}  // namespace headlab
