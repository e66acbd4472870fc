// Data-free head scores from frozen query-key weights (AoH §4, §6.4, App. J.1, App. L).
// Included only by LibTorch translation units.
//
// For query head h with query rows W_Q^h and the key rows W_K^g of its KV group (both
// [d_head, d_model], the rows of q_proj/k_proj), the kernel attention matrix is
// M_h = W_K^h^T W_Q^h (d_model x d_model, AoH §1). Its nonzero singular values are the
// square roots of the eigenvalues of the d_head x d_head Gram proxy
// C_h = (W_Q W_Q^T)(W_K W_K^T) (AoH §6.4), so M_h is never formed. All spectral work runs in
// float64 on the CPU: it is d_head^3 per head, negligible next to one forward pass, and
// double precision keeps the squared-spectrum route within 1e-8 relative of the SVD.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "payload/methods/aoh/head_labels.h"

namespace headlab::aoh {

// Returns the explicit kernel matrix M_h = W_K^T W_Q [d_model, d_model] (AoH §1). For tests
// and references only: the scores below never form it.
torch::Tensor KernelMatrix(const torch::Tensor& wq, const torch::Tensor& wk);

// Returns the singular values of M_h = W_K^T W_Q from the Gram proxy, descending, float64
// [d_head]: sigma_k = sqrt(lambda_k(C_h)) with C_h = (R A R^T) B, A = W_Q W_Q^T,
// B = W_K W_K^T (AoH §6.4; R = `rotation` [d_head, d_head] or the identity when undefined).
// The eigenvalues of the non-symmetric C_h are taken from the similar symmetric matrix
// A'^{1/2} B A'^{1/2} (A' = R A R^T), so a symmetric eigensolver does the work.
torch::Tensor GramProxySpectrum(const torch::Tensor& wq, const torch::Tensor& wk,
                                const torch::Tensor& rotation = {});

// Singular values below this fraction of the largest count as zero (r_h of App. J.1): the
// Gram route carries ~1e-8 relative error on sigma, so 1e-6 separates true zeros safely.
inline constexpr double kZeroSingularValue = 1e-6;

// The four scores of one head (AoH Table 4): effective rank (App. J.1), ||M||_F,
// ||M||_2 = sigma_1 and the stable rank ||M||_F^2 / ||M||_2^2.
struct SpectralScores {
  double effective_rank = 0;
  double frobenius = 0;
  double spectral = 0;
  double stable_rank = 0;
};

// Returns exp(-sum_k p_k log p_k), p_k = sigma_k / sum_j sigma_j over the nonzero sigma
// (AoH App. J.1; Roy and Vetterli 2007). 0 for an all-zero spectrum.
double EffectiveRank(const torch::Tensor& sigma);
// Returns all four scores of a spectrum (descending or not).
SpectralScores ScoresFromSpectrum(const torch::Tensor& sigma);
// Returns the value of `m` in `s`.
double MetricValue(const SpectralScores& s, Metric m);

// Returns the RoPE rotation by relative distance `delta` in the model's rotate-half layout
// (payload/exec/model.h RotaryEmbedding): plane (i, i + d/2) turns by delta * base^(-2i/d).
// float64 [head_dim, head_dim]; head_dim even.
torch::Tensor RopeRotation(int64_t head_dim, double base, int64_t delta);

// The relative distances the RoPE-aware score averages over: 0, 1, 2, 4, ... (powers of
// two below max_distance) and max_distance itself. The paper scores "with relative RoPE
// rotations up to Delta" (§6.4, Table 2) without saying how distances combine; we average
// the scores over log-spaced distances so that the short range, where most attention mass
// lives, is not drowned out by thousands of long distances. max_distance 0 gives {0}, the
// vanilla score.
std::vector<int64_t> RopeDistances(int64_t max_distance);

// Returns the scores of one head averaged over RopeDistances(max_distance) (AoH §6.4,
// C_{h,Delta}); max_distance 0 is the vanilla score.
SpectralScores RopeAwareScores(const torch::Tensor& wq, const torch::Tensor& wk, double base,
                               int64_t max_distance);

// Returns <M_a, M_b>_F = tr(W_Q^a W_Q^b^T W_K^b W_K^a^T) by the trace identity of App. L,
// in d_head space (float64).
double FrobeniusInnerProduct(const torch::Tensor& wq_a, const torch::Tensor& wk_a,
                             const torch::Tensor& wq_b, const torch::Tensor& wk_b);
// Returns <M_a, M_b>_F / (||M_a||_F ||M_b||_F) (App. J.2 head mapping); 0 if either is zero.
double NormalizedFrobenius(const torch::Tensor& wq_a, const torch::Tensor& wk_a,
                           const torch::Tensor& wq_b, const torch::Tensor& wk_b);

}  // namespace headlab::aoh
