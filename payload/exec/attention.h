// The hybrid-head attention layer, dense fp32 reference (LibTorch translation units only).
//
// One layer, one state per head (docs/DESIGN.md, "Hybrid-head attention"):
//   ordinary      softmax(q k^T / sqrt(d)) over keys k <= q
//   fixed         a frozen pattern P, no scores: compact P(i,j) = exp(alpha(j) + rho(i-j)
//                 - logZ(i)) for j <= i (SAF eq. 3), or a dense [T, T] P (comparison
//                 patterns); alpha, rho, logZ and P are buffers, never trained, unless
//                 MakeFixedTrainable (SAF App. C.3.2) gives a compact head trainable alpha,
//                 rho whose logZ the forward then recomputes
//   streaming     keys k <= q with k < sink or in the recent window: q - k < recent (token
//                 eviction, StreamingLLM), or k >= floor(q / K) K - recent (per-chunk
//                 eviction of chunked prefill, AoH §5; HeadState::chunk = K)
//   local(W)      keys q - W < k <= q (AAH §5.8)
//   pruned        contributes nothing
// Outputs stay in the original head order before the output projection. Fixed and pruned
// heads' query/key rows are not computed (their rows get no gradient); pruned heads' value
// rows neither. Grouped-query attention shares each key/value head among heads/kv_heads
// consecutive query heads. Pruned heads may also be removed physically (RemoveHeads: their
// projection rows and output-projection columns are gone); head numbering stays original.
//
// This implementation forms every score matrix densely and applies the modes as masks: it
// is the obviously-correct reference that the fast path (attention_cuda.h: CUDA inputs) is
// tested against. Under autocast (precision.h) its matmuls run in the autocast dtype.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "payload/exec/head_state.h"

namespace headlab {

// Returns logZ(i) = log sum_{k<=i} exp(alpha(k) + rho(i-k)) for i < T (SAF eq. 3),
// alpha, rho: [T].
torch::Tensor CompactLogNormalizer(const torch::Tensor& alpha, const torch::Tensor& rho);
// Returns the dense causal [T, T] pattern of SAF eq. 3 from alpha, rho, logZ: [>= T].
torch::Tensor CompactPattern(const torch::Tensor& alpha, const torch::Tensor& rho,
                             const torch::Tensor& log_z, int64_t T);
// Returns the [T, T] boolean mask of keys that `state` lets each query attend to (not
// meaningful for fixed or pruned heads).
torch::Tensor AllowedKeys(const HeadState& state, int64_t T, torch::Device device);
// The same rule at arbitrary positions: [T, L] for query positions qpos [T] and key
// positions kpos [L] (a KV cache's). A chunk-evicting streaming head's chunk starts at
// max(floor(q / chunk) chunk, call_first): a decoder that also evicts before each call
// (AoH §5: a decode step is a chunk of one token) passes the call's first position.
torch::Tensor AllowedKeysAt(const HeadState& state, const torch::Tensor& qpos,
                            const torch::Tensor& kpos, int64_t call_first = 0);

// What an imported architecture adds to the layer (payload/exec/hf_config.h); the defaults
// are headlab's own layer.
struct AttentionOptions {
  int64_t head_dim = 0;   // 0 = width / heads
  bool qkv_bias = false;  // q/k/v projection biases (GPT-2, Qwen 2)
  bool out_bias = false;  // output projection bias (GPT-2)
  bool qk_norm = false;   // per-head RMSNorm of q and k, gains q_norm / k_norm (Qwen 3)
  double qk_norm_eps = 1e-6;
};

// What a layer's fast forward computed, detached, for its observer: q [B, T, H, d], k and
// v [B, T, kv, d] as projected (before the per-head norm and the position encoding), and
// o [B, T, H, d], each head's attention output before the output projection. Left empty
// where the forward's path does not have them in that form: the dense reference, a plan
// that projects only some heads' rows or outputs only some heads.
struct ForwardTaps {
  torch::Tensor q, k, v, o;
};

class HybridAttentionImpl : public torch::nn::Module {
 public:
  // All heads start ordinary. kv_heads divides heads.
  HybridAttentionImpl(int64_t width, int64_t heads, int64_t kv_heads, int64_t context,
                      const AttentionOptions& options = {});

  // x: [B, T, C] -> [B, T, C]. `rotate`, when given, applies a position encoding to
  // queries and keys ([B, h, T, d] -> same), e.g. RoPE.
  torch::Tensor forward(const torch::Tensor& x,
                        const std::function<torch::Tensor(const torch::Tensor&)>& rotate = {});

  const std::vector<HeadState>& head_states() const { return states_; }
  // Sets head h to ordinary, streaming, local or pruned (fixed heads use SetFixed*).
  void SetHeadState(int64_t h, const HeadState& state);
  // Makes head h fixed with the compact pattern (alpha, rho, logZ: [context]).
  void SetFixedCompact(int64_t h, const torch::Tensor& alpha, const torch::Tensor& rho,
                       const torch::Tensor& log_z);
  // Makes head h fixed with a dense causal pattern P: [context, context].
  void SetFixedDense(int64_t h, const torch::Tensor& p);
  // SAF App. C.3.2: makes compact fixed head h's alpha, rho trainable. Returns the two leaf
  // tensors ([context] each, requires_grad, initialised from the buffers) for the caller to
  // add to its optimiser; the forward then computes logZ from them (autograd through eq. 3)
  // instead of reading fixed_log_z. Any later Set* of head h makes it frozen again. The
  // tensors are not registered parameters: the default (frozen) model's parameter list,
  // state dict and checkpoints stay exactly as they are.
  std::pair<torch::Tensor, torch::Tensor> MakeFixedTrainable(int64_t h);
  bool fixed_trainable(int64_t h) const { return train_alpha_[size_t(h)].defined(); }
  // Copies the trainable alpha, rho into fixed_alpha / fixed_rho and recomputes fixed_log_z
  // (call after each optimiser step), so checkpoints and the fused kernels see them.
  void SyncTrainableFixed();

  int64_t heads() const { return heads_; }
  int64_t kv_heads() const { return kv_heads_; }
  int64_t head_dim() const { return head_dim_; }
  // Whether any fixed head has trainable alpha/rho (MakeFixedTrainable).
  bool any_fixed_trainable() const { return trainable_count_ > 0; }
  // Per-head RMSNorm of queries or keys y [..., head_dim] with gain q_norm / k_norm (Qwen 3;
  // options.qk_norm), in y's dtype.
  torch::Tensor NormalizeHeads(const torch::Tensor& y, const torch::Tensor& gain) const;
  // The output [B, T, C] of a layer none of whose heads has an output: zeros plus the output
  // projection's bias, if any.
  torch::Tensor EmptyLayerOutput(const torch::Tensor& x) const;
  // The queries, keys or values [B, n, T, head_dim] of x [B, T, C] for every row block the
  // projection still has (kept heads / kv heads, in slot order), as forward computes them:
  // bias and q/k norm applied, no position encoding. For code that runs the layer's pieces
  // itself (AoH's streaming decoder).
  torch::Tensor Queries(const torch::Tensor& x) const;
  torch::Tensor Keys(const torch::Tensor& x) const;
  torch::Tensor Values(const torch::Tensor& x) const;

  // Called for each parameter RemoveHeads shrinks, before it shrinks: `kept` lists the
  // indices along dimension `dim` that stay (e.g. to slice optimiser moments alike).
  using ResizeFn =
      std::function<void(const torch::Tensor& param, int64_t dim, const torch::Tensor& kept)>;
  // Physically prunes query heads `heads` (original numbering; already removed ones are
  // skipped): marks them pruned, drops their q_proj rows and o_proj columns, and the
  // k_proj/v_proj rows of each kv head whose query heads are all removed (GQA). The
  // parameters keep their identity (set_data), so an optimiser holding them stays valid.
  void RemoveHeads(const std::vector<int64_t>& heads, const ResizeFn& resized = {});
  // Whether query head h (original numbering) has been removed physically.
  bool removed(int64_t h) const;
  // Original query heads of q_proj's row blocks (= o_proj's column blocks), in order.
  const std::vector<int64_t>& kept_heads() const { return kept_; }
  // Original kv heads of k_proj's / v_proj's row blocks, in order.
  const std::vector<int64_t>& kept_kv_heads() const { return kept_kv_; }

  // Optional gates xi [B, heads] (original numbering) multiplying each head's output before
  // the output projection, e.g. ones with requires_grad for the gate-Taylor importance
  // |dL/dxi| (SAF eq. 19). Undefined (the default): no gates.
  torch::Tensor head_gate;

  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  // Per-head RMSNorm gains [head_dim] of queries and keys (options.qk_norm), else undefined.
  torch::Tensor q_norm, k_norm;
  // Per-head fixed-pattern state, saved with the model: [heads, context] each.
  torch::Tensor fixed_alpha, fixed_rho, fixed_log_z;
  // Dense patterns [heads, context, context], allocated by the first SetFixedDense. Not a
  // registered buffer (the default model's state dict stays as it is): checkpoints write it
  // separately for layers that have dense fixed heads (checkpoint.cc).
  torch::Tensor fixed_dense;

  // The CUDA fast path's cached plan and fixed patterns (attention_cuda.cc); null until
  // the layer's first fast forward.
  std::shared_ptr<struct FastPathState> fast_state;

  // A one-shot observer of this layer's next forward (AAH's controller reads the current
  // Q/K/V and the attention each head executes there, AAH §5.3): called once the layer's
  // attention has run, with the layer's input x, its position encoding and what the fast
  // path computed on the way (ForwardTaps; empty where the path keeps none), so the observer
  // need not compute it again; cleared before the call. It runs outside the flops kind's
  // "attention" range.
  using ForwardObserver = std::function<void(
      HybridAttentionImpl& layer, const torch::Tensor& x,
      const std::function<torch::Tensor(const torch::Tensor&)>& rotate, const ForwardTaps& taps)>;
  ForwardObserver observe_next_forward;

 private:
  // The layer's output for x; *taps (when not null) gets what the fast path computed.
  torch::Tensor Attend(const torch::Tensor& x,
                       const std::function<torch::Tensor(const torch::Tensor&)>& rotate,
                       ForwardTaps* taps);
  // Projects x [B, T, C] with the row blocks `heads` (slots; repeats allowed, e.g. a GQA kv
  // head per query head) of `proj` ([n * head_dim, C] weight, optional bias), then the
  // per-head RMSNorm with gain `norm` when defined: [B, len(heads), T, head_dim]. Only the
  // listed heads' rows are multiplied, so the others get no gradient.
  torch::Tensor Project(const torch::Tensor& x, const torch::nn::Linear& proj,
                        const std::vector<int64_t>& heads, const torch::Tensor& norm = {}) const;
  // Drops head h's trainable alpha, rho (if any): it is frozen again.
  void EndTrainable(int64_t h);

  int64_t heads_, kv_heads_, head_dim_, context_;
  double qk_norm_eps_;
  std::vector<HeadState> states_;
  std::vector<int64_t> kept_, kept_kv_;  // see kept_heads(), kept_kv_heads()
  // Trainable alpha, rho per head; undefined for every head not made trainable.
  std::vector<torch::Tensor> train_alpha_, train_rho_;
  int64_t trainable_count_ = 0;
};
TORCH_MODULE(HybridAttention);

}  // namespace headlab
