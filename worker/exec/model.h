// The decoder-only language model (LibTorch): token embedding tied with the output head,
// learned absolute positions, pre-LayerNorm blocks of causal multi-head attention and a
// GELU MLP, final LayerNorm. Included only by LibTorch translation units.
#pragma once

#include <torch/torch.h>

#include "worker/exec/exec_config.h"

namespace headlab {

// Causal multi-head self-attention with separate Q/K/V/output projections (no biases),
// computed densely in fp32: softmax(QK^T/sqrt(d) + causal mask) V.
class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  CausalSelfAttentionImpl(int64_t width, int64_t heads);
  // x: [B, T, C] -> [B, T, C].
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};

 private:
  int64_t heads_;
  int64_t head_dim_;
};
TORCH_MODULE(CausalSelfAttention);

class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(const ModelConfig& c);
  torch::Tensor forward(torch::Tensor x);

  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  CausalSelfAttention attn{nullptr};
  torch::nn::Linear fc{nullptr}, proj{nullptr};
};
TORCH_MODULE(Block);

class GptImpl : public torch::nn::Module {
 public:
  // Initialises parameters from the current default generator (seed it first).
  explicit GptImpl(const ModelConfig& c);
  // idx: [B, T] int64 tokens, T <= context -> logits [B, T, vocab].
  torch::Tensor forward(const torch::Tensor& idx);
  // Mean next-token cross-entropy in nats/token; x, y: [B, T].
  torch::Tensor Loss(const torch::Tensor& x, const torch::Tensor& y);
  // Per-token next-token log-probabilities log p(y_t | x_<=t): [B, T].
  torch::Tensor TokenLogProbs(const torch::Tensor& x, const torch::Tensor& y);

  const ModelConfig& config() const { return config_; }

  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::LayerNorm ln_f{nullptr};

 private:
  ModelConfig config_;
};
TORCH_MODULE(Gpt);

}  // namespace headlab
