// GPT-style decoder-only LM on LibTorch.
#include "worker/exec/model.h"

#include <cmath>

namespace headlab {
namespace F = torch::nn::functional;
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

CausalSelfAttentionImpl::CausalSelfAttentionImpl(int64_t width, int64_t heads)
    : heads_(heads), head_dim_(width / heads) {
  auto lin = [&](const char* name) {
    return register_module(name, torch::nn::Linear(
                                     torch::nn::LinearOptions(width, width).bias(false)));
  };
  q_proj = lin("q_proj");
  k_proj = lin("k_proj");
  v_proj = lin("v_proj");
  o_proj = lin("o_proj");
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
  auto split = [&](const torch::Tensor& t) {
    return t.view({B, T, heads_, head_dim_}).transpose(1, 2);  // [B, H, T, d]
  };
  torch::Tensor q = split(q_proj(x)), k = split(k_proj(x)), v = split(v_proj(x));
  torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(head_dim_));
  torch::Tensor future = torch::ones({T, T}, torch::dtype(torch::kBool).device(x.device()))
                             .triu(1);
  scores = scores.masked_fill(future, -std::numeric_limits<float>::infinity());
  torch::Tensor y = torch::matmul(torch::softmax(scores, -1), v);  // [B, H, T, d]
  return o_proj(y.transpose(1, 2).reshape({B, T, C}));
}

BlockImpl::BlockImpl(const ModelConfig& c) {
  const int64_t hidden = int64_t(std::llround(c.mlp_ratio * double(c.width)));
  ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.width})));
  attn = register_module("attn", CausalSelfAttention(c.width, c.heads));
  ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.width})));
  fc = register_module("fc", torch::nn::Linear(torch::nn::LinearOptions(c.width, hidden).bias(false)));
  proj = register_module("proj",
                         torch::nn::Linear(torch::nn::LinearOptions(hidden, c.width).bias(false)));
}

torch::Tensor BlockImpl::forward(torch::Tensor x) {
  x = x + attn(ln1(x));
  return x + proj(F::gelu(fc(ln2(x))));
}

GptImpl::GptImpl(const ModelConfig& c) : config_(c) {
  wte = register_module("wte", torch::nn::Embedding(c.vocab, c.width));
  wpe = register_module("wpe", torch::nn::Embedding(c.context, c.width));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.layers; ++i) blocks->push_back(Block(c));
  ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.width})));

  // GPT-2 initialisation: N(0, 0.02) for embeddings and projections; the projections that
  // write into the residual stream are scaled by 1/sqrt(2 * layers) so its variance does
  // not grow with depth.
  torch::NoGradGuard no_grad;
  const double residual_std = 0.02 / std::sqrt(2.0 * double(c.layers));
  for (auto& p : named_parameters()) {
    const std::string& name = p.key();
    torch::Tensor& t = p.value();
    if (t.dim() < 2) continue;  // LayerNorm weights/biases keep their (1, 0) init
    bool residual = EndsWith(name, ".o_proj.weight") || EndsWith(name, ".proj.weight");
    t.normal_(0.0, residual ? residual_std : 0.02);
  }
}

torch::Tensor GptImpl::forward(const torch::Tensor& idx) {
  const int64_t T = idx.size(1);
  TORCH_CHECK(T <= config_.context, "sequence length ", T, " > context ", config_.context);
  torch::Tensor pos = torch::arange(T, torch::dtype(torch::kLong).device(idx.device()));
  torch::Tensor x = wte(idx) + wpe(pos);
  for (const auto& b : *blocks) x = b->as<Block>()->forward(x);
  return F::linear(ln_f(x), wte->weight);  // tied output head
}

torch::Tensor GptImpl::Loss(const torch::Tensor& x, const torch::Tensor& y) {
  torch::Tensor logits = forward(x);
  return F::cross_entropy(logits.view({-1, logits.size(-1)}), y.reshape({-1}));
}

torch::Tensor GptImpl::TokenLogProbs(const torch::Tensor& x, const torch::Tensor& y) {
  torch::Tensor logp = torch::log_softmax(forward(x), -1);
  return logp.gather(-1, y.unsqueeze(-1)).squeeze(-1);
}

}  // namespace headlab
