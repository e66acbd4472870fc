// AAH-v3's attention diagnostics of one layer (AAH §5.3: the entries e_h, n_h, rho_h of the
// head feature x_h): per query head, the entropy of its attention rows, the norm of its
// output rows and its usage, for the attention the head executes now (its installed
// window). The usage follows from the head's state alone (HeadUsage, on the host); two
// ways to the same entropy and norm:
//   DenseDiagnostics materialises the probabilities in chunks of queries (any device; the
//     reference, and the CPU's path).
//   LseDiagnostics never forms a [T, T] matrix: two attention passes that also return each
//     row's log-normaliser (the fused kernels' forward on CUDA), one with values V and one
//     with values K. Since log p_ij = s <q_i, k_j> - lse_i (s the softmax scale),
//       -sum_j p_ij log p_ij = lse_i - s <q_i, sum_j p_ij k_j>,
//     the entropy of row i is lse_i minus s times q_i's dot product with the row's output
//     over keys-as-values.
//   OutputDiagnostics is LseDiagnostics given the output o the layer's forward computed:
//     only the pass over keys-as-values runs.
// LibTorch translation units only.
#pragma once

#include <functional>
#include <utility>

#include <torch/torch.h>

#include "payload/exec/head_state.h"

namespace headlab::aah {

// The attention of every query head with its softmax log-normaliser: (q, k, values) ->
// (o, lse); q [B, T, H, d], k and values [B, T, Hkv, d] (query head h reads key/value
// head h / (H / Hkv)); o [B, T, H, d]; lse [B, H, T] float32, the log of the row's
// normaliser with the scale 1/sqrt(d) applied. Heads that form no scores may return
// anything (their diagnostics are zeroed).
using AttendWithLse = std::function<std::pair<torch::Tensor, torch::Tensor>(
    const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& values)>;

// Returns [H, 2] float32 on q's device: entropy (nats, mean over batch and queries of
// -sum_k p log p) and output norm (mean over batch and queries of |o|_2); unspecified for
// heads that form no scores (FormsScores, payload/exec/head_state.h: the caller zeroes
// them, HeadUsage's zero). q [B, T, H, d], k and v [B, T, Hkv, d], after the position
// encoding; DenseDiagnostics' `table` is the layer's [6, H] head table (window, sink,
// recent, is local, is streaming, forms scores; see AllowedKeyRows).
torch::Tensor DenseDiagnostics(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& table);
torch::Tensor LseDiagnostics(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const AttendWithLse& attend);
// o [B, T, H, d]: each head's attention output, as `attend` would give it with values v.
torch::Tensor OutputDiagnostics(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& o, const AttendWithLse& attend);

// The usage rho_h of a head in `s` on a length-T sequence: the most keys one query reads,
// over T (the last query's: no mask lets a query read fewer keys than an earlier one):
// 1 for ordinary, min(W, T) / T for local(W), the sink and recent keys' union for
// streaming (per-token rule, as AllowedKeyRows); 0 for heads without scores. On the host.
double HeadUsage(const HeadState& s, int64_t T);

// The keys each head may read from queries [r0, r1) of a length-T sequence ([H, r1 - r0, T]
// booleans), from the layer's [6, H] head table: AllowedKeys (payload/exec/attention.h) of
// every head at once.
torch::Tensor AllowedKeyRows(const torch::Tensor& table, int64_t r0, int64_t r1, int64_t T);

}  // namespace headlab::aah
