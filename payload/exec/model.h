// The decoder-only language model (LibTorch): token embedding tied with the output head,
// learned absolute positions or RoPE, pre-norm (LayerNorm or RMSNorm) blocks of hybrid-head
// causal attention (attention.h; ordinary heads by default, GQA optional) and a GELU MLP,
// final norm. Imported checkpoints (hf_config.h, import_weights.h) add what their
// architecture has: linear biases, tanh GELU or a SwiGLU MLP, per-head q/k norms, another
// head dimension, an untied output head, their norm epsilon and RoPE base. Included only by
// LibTorch translation units.
#pragma once

#include <torch/torch.h>

#include "payload/exec/attention.h"
#include "payload/exec/exec_config.h"
#include "payload/exec/precision.h"

namespace headlab {

// LayerNorm (with bias) or RMSNorm (gain only), chosen by model.norm; parameters are named
// "weight" (and "bias") as in torch::nn::LayerNorm.
class NormImpl : public torch::nn::Module {
 public:
  NormImpl(int64_t width, bool rms, double eps);
  torch::Tensor forward(const torch::Tensor& x);
  bool rms() const { return rms_; }  // RMSNorm (weight only), else LayerNorm
  double eps() const { return eps_; }

  torch::Tensor weight, bias;

 private:
  bool rms_;
  double eps_;
};
TORCH_MODULE(Norm);

class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(const ModelConfig& c);
  // `rotate`: the position encoding of queries and keys (RoPE), or empty.
  torch::Tensor forward(torch::Tensor x,
                        const std::function<torch::Tensor(const torch::Tensor&)>& rotate);
  // The MLP of normalized input h (no residual): proj(act(fc(h))), or SwiGLU
  // proj(silu(gate(h)) * fc(h)).
  torch::Tensor Mlp(const torch::Tensor& h);

  Norm ln1{nullptr}, ln2{nullptr};
  HybridAttention attn{nullptr};
  torch::nn::Linear fc{nullptr}, proj{nullptr};
  torch::nn::Linear gate{nullptr};  // SwiGLU only

 private:
  std::string act_;  // gelu | gelu_tanh | swiglu
};
TORCH_MODULE(Block);

// RoPE in rotate-half form: rotates each (i, i + d/2) pair of the [B, h, T, d] tensor x at
// position t by the angle t * theta_i, theta_i = base^(-2i/d) as rope.scaling rescales it
// (rope.h), so q.k depends on positions only through t_q - t_k; YaRN also scales both
// components by RopeAttentionFactor. Positions are 0..T-1, or `positions` [T] when given (a
// decoder's later chunks).
torch::Tensor RotaryEmbedding(const torch::Tensor& x, const RopeSpec& rope,
                              const torch::Tensor& positions = torch::Tensor());

class GptImpl : public torch::nn::Module {
 public:
  // Initialises parameters from the current default generator (seed it first), the weight
  // matrices held in `weights` (fp32 master weights for training; the compute dtype for
  // inference, where they are never updated), norm gains and biases in fp32. The values
  // drawn do not depend on `weights` beyond rounding.
  explicit GptImpl(const ModelConfig& c, torch::ScalarType weights = torch::kFloat);
  // idx: [B, T] int64 tokens, T <= context -> fp32 logits [B, T, vocab], computed under
  // autocast in the model's precision (precision.h).
  torch::Tensor forward(const torch::Tensor& idx);
  // The final hidden states ln_f(x) [B, T, width] that the tied head turns into logits.
  torch::Tensor Hidden(const torch::Tensor& idx);
  // Mean next-token cross-entropy in nats/token, computed in fp32 without materialising the
  // logits (LinearCrossEntropy); x, y: [B, T].
  torch::Tensor Loss(const torch::Tensor& x, const torch::Tensor& y);
  // Per-token next-token log-probabilities log p(y_t | x_<=t), fp32: [B, T].
  torch::Tensor TokenLogProbs(const torch::Tensor& x, const torch::Tensor& y);
  // The input of the first block for tokens idx [B, T] at positions [T] (a long tensor on
  // idx's device; 0..T-1 when undefined): token embeddings plus learned positions (RoPE
  // models: embeddings only). No host value in it, so a captured CUDA graph can replay it.
  torch::Tensor Embed(const torch::Tensor& idx, const torch::Tensor& positions = {});
  // The position encoding blocks apply to queries and keys: RoPE at positions 0..T-1 with
  // the model's base and scaling, or empty with learned positions.
  std::function<torch::Tensor(const torch::Tensor&)> Rotation() const;
  // fp32 logits [..., vocab] of the last block's output x: final norm, then the output head
  // (HeadWeight(), or `head_weight` when defined: a copy of it in another dtype, e.g. the
  // streaming decoder's compute-dtype copy for its captured step).
  torch::Tensor Logits(const torch::Tensor& x, const torch::Tensor& head_weight = {});
  // The output head's weight [vocab, width]: `head` when untied, else the token embedding.
  const torch::Tensor& HeadWeight() const;

  // The precision forward computes in (precision.h); fp32 until set. Parameters keep the
  // dtype they were built in and buffers fp32, whatever it is.
  void SetPrecision(Precision p) { precision_ = p; }
  Precision precision() const { return precision_; }

  const ModelConfig& config() const { return config_; }

  // Returns block `layer`'s attention layer (to read or change its head states).
  HybridAttention& attention(int64_t layer);

  torch::nn::Embedding wte{nullptr}, wpe{nullptr};  // wpe only with learned positions
  torch::nn::ModuleList blocks{nullptr};
  Norm ln_f{nullptr};
  torch::nn::Linear head{nullptr};  // only when the head is not tied to wte

 private:
  ModelConfig config_;
  Precision precision_ = Precision::kFp32;
};
TORCH_MODULE(Gpt);

}  // namespace headlab
