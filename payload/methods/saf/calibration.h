// SAF calibration (§3.1, App. A.1, App. A.3): per-head attention statistics over N held-out
// sequences at the replacement checkpoint, accumulated batch by batch so that no more than
// one batch of one layer's [B, H, T, T] attention exists at a time. Included only by
// LibTorch translation units.
//
// Per head the pass keeps the running sum of A (the mean pattern, eq. 1/2 and every
// pattern), the scalar sum of squared deviations (eq. 1, merged batch by batch with Chan's
// parallel-variance rule, so a near-constant head does not lose its variance to
// cancellation), the scalar sum of row entropies (eq. 2), and on request the per-entry
// variance of A (Dirichlet, eq. 18) and the per-entry mean and variance of the logits S
// (sharp mean, Gaussian sample). Weights are never written: the pass runs under NoGradGuard
// with the model in eval mode, and restores the caller's train/eval mode.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include <torch/torch.h>

#include "payload/methods/saf/scores.h"

namespace headlab {
class GptImpl;
}

namespace headlab::saf {

// What to accumulate beyond the mean and the scalar statistics.
struct CalibrationNeeds {
  bool entry_variance = false;  // per-entry variance of A (Dirichlet pattern)
  bool logits = false;          // per-entry mean/variance of S (sharp mean, Gaussian pattern)
};

// Running sum and sums of squared deviations of a per-head [H, T, T] quantity over
// sequences.
struct RunningMoments {
  int64_t n = 0;
  torch::Tensor sum;             // [H, T, T] float32
  torch::Tensor m2;              // [H, T, T] per-entry sum of squared deviations, or undefined
  std::vector<double> m2_total;  // [H] sum_n ||X_n - mean||_F^2
  // Adds a batch x: [B, H, T, T], merging the batch's own moments by Chan et al.'s rule
  // (M2 = M2_a + M2_b + ||mean_b - mean_a||^2 n_a n_b / n): every term is a sum of squares.
  void Add(const torch::Tensor& x, bool per_entry);
  torch::Tensor Mean() const;  // [H, T, T]
  int64_t bytes() const;       // of the tensors held (sum, m2)
  // Per-entry sample variance, divisor n - 1 (requires per-entry m2 and n >= 2).
  torch::Tensor EntryVariance() const;
};

// Accumulated statistics of one layer's heads.
struct LayerStats {
  RunningMoments att;                   // A
  RunningMoments logits;                // S (future entries 0), when needs.logits
  std::vector<double> row_entropy_sum;  // [H] sum_n sum_i H(A_n[i, 1:i])
};

// The statistics of all L x H heads. Not thread-safe.
class CalibrationStats {
 public:
  CalibrationStats(int64_t layers, int64_t heads, CalibrationNeeds needs);

  // Adds one batch of layer `layer`: att [B, H, T, T] post-softmax probabilities; scores
  // [B, H, T, T] pre-softmax logits (required iff needs.logits; future entries ignored).
  void Add(int64_t layer, const torch::Tensor& att, const torch::Tensor& scores = {});

  int64_t layers() const { return int64_t(layers_.size()); }
  int64_t heads() const { return heads_; }
  const CalibrationNeeds& needs() const { return needs_; }
  const LayerStats& layer(int64_t l) const { return layers_[size_t(l)]; }
  // Number of sequences seen (the same for every layer once a pass is complete).
  int64_t sequences() const { return layers_.empty() ? 0 : layers_[0].att.n; }

  // Returns the empirical mean pattern A_hat [T, T] of head (l, h) (§3.1).
  torch::Tensor Mean(int64_t l, int64_t h) const;
  // Bytes of the statistics' tensors held.
  int64_t bytes() const;
  // SAF eq. 1: (1 / ((N-1) T^2)) sum_n ||A_n - A_hat||_F^2. Requires N >= 2.
  double VarianceScore(int64_t l, int64_t h) const;
  // SAF eq. 2: (1 / (N T)) sum_n sum_i KL(A_n[i] || A_hat[i]), from row entropies:
  // (1/T) sum_i H(A_hat[i]) - (1/(N T)) sum_n sum_i H(A_n[i]).
  double ForwardKlScore(int64_t l, int64_t h) const;

 private:
  int64_t heads_;
  CalibrationNeeds needs_;
  std::vector<LayerStats> layers_;
};

// A read-only view of one pre-LN transformer layer for calibration: the weights of its
// attention (row blocks of head_dim per head, as in payload/exec/attention.h) and callables
// for its attention input X = LN1(R) and for the whole block R_l -> R_{l+1}.
struct LayerView {
  torch::Tensor q_weight, k_weight, v_weight, o_weight;  // [H d, C], [kv d, C], [kv d, C], [C, H d]
  // Imported checkpoints (model.init_from): projection biases and per-head q/k RMSNorm
  // gains [d]; undefined for headlab's own model.
  torch::Tensor q_bias, k_bias, v_bias, o_bias, q_norm, k_norm;
  double qk_norm_eps = 1e-6;
  std::function<torch::Tensor(const torch::Tensor&)> attention_input;
  std::function<torch::Tensor(const torch::Tensor&)> block;
  // The block's MLP half with its residual: R' -> R' + MLP(LN2(R')) (gate-Taylor only).
  std::function<torch::Tensor(const torch::Tensor&)> mlp;
};

// A read-only view of a decoder: token embedding, layers in order, and an optional rotary
// encoding applied to queries and keys ([B, h, T, d] -> same) before their dot product.
struct ModelView {
  int64_t heads = 0, kv_heads = 0;
  std::function<torch::Tensor(const torch::Tensor&)> embed;  // tokens [B, T] -> R_0 [B, T, C]
  std::vector<LayerView> layers;
  std::function<torch::Tensor(const torch::Tensor&)> rotate;  // may be empty
  std::function<torch::Tensor(const torch::Tensor&)> logits;  // R_L -> [B, T, vocab]
  torch::nn::Module* module = nullptr;  // put into eval mode during calibration, if set
};

// Returns the view of payload/exec/model.h's GptImpl (learned positions or RoPE, as the model
// is configured). The view points into the model: build it right before use and do not
// keep it past the model's lifetime.
ModelView ViewOfGpt(GptImpl& gpt);

// Returns the causal softmax probabilities A and logits S (eq. 5-6) of every head of layer
// `l` on attention input x [B, T, C]: A, S [B, H, T, T] (S's future entries are -inf).
struct LayerAttention {
  torch::Tensor att, scores, values;  // values: [B, H, T, d] (a kv head repeated per group)
};
LayerAttention ComputeLayerAttention(const ModelView& model, int64_t l, const torch::Tensor& x);

// Runs the calibration pass: for each token batch [B, T], every layer's attention is added
// to `stats` and the residual stream advances through the model's own block. NoGradGuard,
// eval mode (restored afterwards); weights and any sampler are untouched.
void Calibrate(const ModelView& model, const std::vector<torch::Tensor>& batches,
               CalibrationStats* stats);

// Puts a module into eval mode for its lifetime and restores the previous mode.
class EvalModeScope {
 public:
  explicit EvalModeScope(torch::nn::Module* m) : m_(m), was_training_(m && m->is_training()) {
    if (m_) m_->eval();
  }
  ~EvalModeScope() {
    if (m_) m_->train(was_training_);
  }
  EvalModeScope(const EvalModeScope&) = delete;
  EvalModeScope& operator=(const EvalModeScope&) = delete;

 private:
  torch::nn::Module* m_;
  bool was_training_;
};

// Returns the query positions used by the output-aware scores: `count` positions spaced
// evenly over [T/2, T-1] (App. A.3).
std::vector<int64_t> LatterHalfQueries(int64_t T, int64_t count);

// Runs the output-aware pass (App. A.3, eq. 10-12) with the mean patterns of `stats`
// (A_hat, for C~ and Y~) at `queries` positions per sequence (LatterHalfQueries).
OutputStats CalibrateOutputs(const ModelView& model, const std::vector<torch::Tensor>& batches,
                             const CalibrationStats& stats, int64_t queries);

// The pieces of CalibrateOutputs, for passes that walk the layers themselves: zeroed sums
// for L x H heads; the query positions of a token batch [B, T] (on its device); and layer
// l's contribution for one batch, given its residual stream r [B, T, C] and its heads' mean
// patterns `mean` [H, T, T] (rows are not counted: add B |I| to out->rows once per batch).
OutputStats EmptyOutputStats(int64_t layers, int64_t heads);
torch::Tensor QueryIndex(const torch::Tensor& tokens, int64_t queries);
void AddLayerOutputs(const ModelView& model, int64_t l, const torch::Tensor& r,
                     const torch::Tensor& mean, const torch::Tensor& queries, OutputStats* out);

// Returns the gate-Taylor importances I_lh of SAF eq. 19 ([L H]): each head's output is
// multiplied by a gate xi (1) before the output projection, and |dL_n/dxi_lh| is averaged
// over the calibration sequences (next-token loss on each batch's first T-1 positions).
// Gradients go to the gates only (torch::autograd::grad): the model's .grad stay as they
// are. Eval mode, restored afterwards.
std::vector<double> GateTaylorImportance(const ModelView& model,
                                         const std::vector<torch::Tensor>& batches);

// Returns q_lh = ||grad W^Q_lh||_F + ||grad W^K_lh||_F for every head (SAF eq. 8) from the
// gradients the last backward pass left on the model's q/k weights (a kv head shared by a
// group counts for each of its query heads); heads without a gradient count 0. Call after
// backward and before the optimiser step, then feed GradientEma::Update.
std::vector<double> QkGradientNorms(const ModelView& model);

}  // namespace headlab::saf
