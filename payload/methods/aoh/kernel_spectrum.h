// Data-free head scores from frozen query-key weights (AoH §4, §6.4, App. J.1, App. L).
// Included only by LibTorch translation units.
//
// For query head h with query rows W_Q^h and the key rows W_K^g of its KV group (both
// [d_head, d_model], the rows of q_proj/k_proj), the kernel attention matrix is
// M_h = W_K^h^T W_Q^h (d_model x d_model, AoH §1). It has rank <= d_head, so M_h is never
// formed: any d_head x d_head factors with F_q^T F_q = W_Q W_Q^T and F_k^T F_k = W_K W_K^T
// (then W_Q^T = Q_q F_q, W_K^T = Q_k F_k with orthonormal columns) give
// M_h = Q_k (F_k F_q^T) Q_q^T, and the singular values of M_h are those of the d_head x
// d_head matrix F_k F_q^T. The factors come from the Gram matrices (AoH §6.4's proxy
// C_h = (W_Q W_Q^T)(W_K W_K^T) = F_q^T F_q F_k^T F_k): one batched GEMM and small
// eigensolves per layer. The Gram route squares the condition number: sigma_i carries a
// relative error of about 1e-16 (sigma_1 / sigma_i)^2 in float64, below 1e-10 for
// sigma_i > 1e-3 sigma_1 and far below the zero threshold. A KV group's F_k is computed once
// and shared by its query heads (GQA), a layer's heads in one batched call, in float64 on
// the weights' device: 2 d_model d_head^2 flops per head for the Gram matrix, d_head^3 per
// head and RoPE distance for the spectrum.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "payload/exec/rope.h"
#include "payload/methods/aoh/head_labels.h"

namespace headlab::aoh {

// Returns the explicit kernel matrix M_h = W_K^T W_Q [d_model, d_model] (AoH §1). For tests
// and references only: the scores below never form it.
torch::Tensor KernelMatrix(const torch::Tensor& wq, const torch::Tensor& wk);

// Returns factors F [N, d_head, d_head] (float64) of rows [N, d_head, d_model] with
// F[n]^T F[n] = rows[n] rows[n]^T, so that rows[n]^T = Q_n F[n] with Q_n's columns
// orthonormal: F = diag(sqrt(lambda)) U^T from the Gram matrix's eigendecomposition.
torch::Tensor GramFactors(const torch::Tensor& rows);

// Returns the singular values [N, d_head] (float64, descending) of the N kernels
// M = W_K^T R W_Q from their factors rq, rk [N, d_head, d_head] (GramFactors of W_Q and
// W_K): those of F_k R F_q^T, R = `rotation` [d_head, d_head] (AoH §6.4's R_Delta on the
// queries) or the identity when undefined.
torch::Tensor KernelSpectra(const torch::Tensor& rq, const torch::Tensor& rk,
                            const torch::Tensor& rotation = {});

// Returns the singular values of one head's M_h = W_K^T R W_Q, descending, float64 [d_head]
// (KernelSpectra of its factors).
torch::Tensor KernelSpectrum(const torch::Tensor& wq, const torch::Tensor& wk,
                             const torch::Tensor& rotation = {});

// Singular values below this fraction of the largest count as zero (r_h of App. J.1): the
// float64 Gram route leaves true zeros at ~1e-8 of sigma_1 (bf16 weights are exact in
// float64), so 1e-6 separates them safely.
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
// Returns the scores of every row of spectra [N, d_head] (one batched computation).
std::vector<SpectralScores> ScoresFromSpectra(const torch::Tensor& sigma);
// Returns the value of `m` in `s`.
double MetricValue(const SpectralScores& s, Metric m);

// Returns the RoPE rotation by relative distance `delta` in the model's rotate-half layout
// (payload/exec/model.h RotaryEmbedding): plane (i, i + d/2) turns by delta * theta_i with
// theta_i from RopeFrequencies (rope.h: base^(-2i/d), rescaled as the model's rope_scaling
// says). YaRN's attention factor scales every head's kernel alike and is left out.
// float64 [head_dim, head_dim]; head_dim even.
torch::Tensor RopeRotation(int64_t head_dim, const RopeSpec& rope, int64_t delta);

// The relative distances the RoPE-aware score averages over: 0, 1, 2, 4, ... (powers of
// two below max_distance) and max_distance itself. The paper scores "with relative RoPE
// rotations up to Delta" (§6.4, Table 2) without saying how distances combine; we average
// the scores over log-spaced distances so that the short range, where most attention mass
// lives, is not drowned out by thousands of long distances. max_distance 0 gives {0}, the
// vanilla score.
std::vector<int64_t> RopeDistances(int64_t max_distance);

// Returns the scores of one head averaged over RopeDistances(max_distance) (AoH §6.4,
// C_{h,Delta}); max_distance 0 is the vanilla score.
SpectralScores RopeAwareScores(const torch::Tensor& wq, const torch::Tensor& wk,
                               const RopeSpec& rope, int64_t max_distance);

// Returns the scores of every query head of one layer, as RopeAwareScores of each: wq
// [heads * d_head, d_model] and wk [kv_heads * d_head, d_model] (q_proj / k_proj weights,
// any dtype and device), query head h reading KV group h / (heads / kv_heads).
std::vector<SpectralScores> LayerScores(const torch::Tensor& wq, const torch::Tensor& wk,
                                        int64_t head_dim, const RopeSpec& rope,
                                        int64_t max_distance);

// Returns <M_a, M_b>_F = tr(W_Q^a W_Q^b^T W_K^b W_K^a^T) by the trace identity of App. L,
// in d_head space (float64).
double FrobeniusInnerProduct(const torch::Tensor& wq_a, const torch::Tensor& wk_a,
                             const torch::Tensor& wq_b, const torch::Tensor& wk_b);
// Returns <M_a, M_b>_F / (||M_a||_F ||M_b||_F) (App. J.2 head mapping); 0 if either is zero.
double NormalizedFrobenius(const torch::Tensor& wq_a, const torch::Tensor& wk_a,
                           const torch::Tensor& wq_b, const torch::Tensor& wk_b);

}  // namespace headlab::aoh
