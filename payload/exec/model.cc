// GPT-style decoder-only LM on LibTorch.
#include "payload/exec/model.h"

#include <cmath>

#include "payload/exec/linear_cross_entropy.h"

namespace headlab {
namespace F = torch::nn::functional;
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

NormImpl::NormImpl(int64_t width, bool rms, double eps) : rms_(rms), eps_(eps) {
  weight = register_parameter("weight", torch::ones({width}));
  if (!rms) bias = register_parameter("bias", torch::zeros({width}));
}

torch::Tensor NormImpl::forward(const torch::Tensor& x) {
  if (!rms_)
    return F::layer_norm(x,
                         F::LayerNormFuncOptions({x.size(-1)}).weight(weight).bias(bias).eps(eps_));
  return x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps_) * weight;
}

BlockImpl::BlockImpl(const ModelConfig& c) : act_(c.mlp_act) {
  const int64_t hidden = c.MlpHidden();
  const bool rms = c.norm == "rmsnorm";
  ln1 = register_module("ln1", Norm(c.width, rms, c.NormEps()));
  AttentionOptions a;
  a.head_dim = c.head_dim;
  a.qkv_bias = c.attn_bias;
  a.out_bias = c.out_bias;
  a.qk_norm = c.qk_norm;
  a.qk_norm_eps = c.NormEps();
  attn = register_module("attn", HybridAttention(c.width, c.heads, c.kv_heads, c.context, a));
  ln2 = register_module("ln2", Norm(c.width, rms, c.NormEps()));
  auto lin = [&](const char* name, int64_t in, int64_t out) {
    torch::nn::Linear l = register_module(
        name, torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(c.mlp_bias)));
    if (c.mlp_bias) {
      torch::NoGradGuard no_grad;
      l->bias.zero_();
    }
    return l;
  };
  fc = lin("fc", c.width, hidden);
  if (act_ == "swiglu") gate = lin("gate", c.width, hidden);
  proj = lin("proj", hidden, c.width);
}

torch::Tensor BlockImpl::Mlp(const torch::Tensor& h) {
  if (act_ == "swiglu") return proj(F::silu(gate(h)) * fc(h));
  if (act_ == "gelu_tanh") return proj(F::gelu(fc(h), F::GELUFuncOptions().approximate("tanh")));
  return proj(F::gelu(fc(h)));
}

torch::Tensor BlockImpl::forward(torch::Tensor x,
                                 const std::function<torch::Tensor(const torch::Tensor&)>& rotate) {
  x = x + attn->forward(ln1(x), rotate);
  return x + Mlp(ln2(x));
}

GptImpl::GptImpl(const ModelConfig& c, torch::ScalarType weights) : config_(c) {
  torch::NoGradGuard no_grad;
  // Weight matrices (embeddings, projections, the output head: all but ~0.01% of the
  // parameters) take `weights` module by module as they are built, so at most one block's
  // (or the embedding's) fp32 values exist at a time, never a whole fp32 copy. Norm gains and
  // biases stay fp32, as the residual stream does (Embed), so the add+norm kernels and the
  // fp32 norms run as with fp32 weights; buffers (fixed heads' patterns) keep their dtype.
  auto to_weights = [weights](torch::nn::Module& m) {
    if (weights == torch::kFloat) return;
    for (torch::Tensor& p : m.parameters())
      if (p.dim() >= 2) p.set_data(p.to(weights));
  };
  wte = register_module("wte", torch::nn::Embedding(c.vocab, c.width));
  to_weights(*wte);
  if (c.pos == "learned") {
    wpe = register_module("wpe", torch::nn::Embedding(c.context, c.width));
    to_weights(*wpe);
  }
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.layers; ++i) {
    Block b(c);
    to_weights(*b);
    blocks->push_back(b);
  }
  ln_f = register_module("ln_f", Norm(c.width, c.norm == "rmsnorm", c.NormEps()));
  to_weights(*ln_f);
  if (!c.tie_head) {
    head = register_module(
        "head", torch::nn::Linear(torch::nn::LinearOptions(c.width, c.vocab).bias(false)));
    to_weights(*head);
  }

  // GPT-2 initialisation: N(0, 0.02) for embeddings and projections; the projections that
  // write into the residual stream are scaled by 1/sqrt(2 * layers) so its variance does
  // not grow with depth. Drawn in fp32 whatever the weights' dtype (one tensor at a time),
  // so a model built in bf16 holds exactly the fp32 model's values rounded.
  const double residual_std = 0.02 / std::sqrt(2.0 * double(c.layers));
  for (auto& p : named_parameters()) {
    const std::string& name = p.key();
    torch::Tensor& t = p.value();
    if (t.dim() < 2) continue;  // norm gains and biases keep their (1, 0) init
    bool residual = EndsWith(name, ".o_proj.weight") || EndsWith(name, ".proj.weight");
    const double sd = residual ? residual_std : 0.02;
    if (t.scalar_type() == torch::kFloat)
      t.normal_(0.0, sd);
    else
      t.copy_(torch::empty(t.sizes(), torch::kFloat).normal_(0.0, sd));
  }
  for (const HeadAssignment& a : c.head_modes) attention(a.layer)->SetHeadState(a.head, a.state);
}

HybridAttention& GptImpl::attention(int64_t layer) {
  return blocks->ptr(size_t(layer))->as<Block>()->attn;
}

torch::Tensor RotaryEmbedding(const torch::Tensor& x, const RopeSpec& rope,
                              const torch::Tensor& positions) {
  const int64_t T = x.size(2), d = x.size(3), half = d / 2;
  auto opts = torch::dtype(torch::kFloat).device(x.device());
  // theta_i = base^(-2i/d) (rope.h), computed on x's device; a rescaled table comes from
  // RopeFrequencies on the host (a [d/2] copy).
  torch::Tensor inv_freq =
      rope.scaling.type.empty()
          ? torch::pow(rope.base, -torch::arange(0, half, opts) * 2.0 / double(d))
          : torch::tensor(RopeFrequencies(rope, d), torch::kDouble).to(opts);  // [d/2]
  torch::Tensor pos = positions.defined() ? positions.to(torch::kFloat) : torch::arange(T, opts);
  torch::Tensor angles = torch::outer(pos, inv_freq);  // [T, d/2]
  // The angles in fp32; the rotation in x's dtype (bf16 under autocast), so queries and keys
  // keep the dtype the attention backends take. YaRN scales cos and sin (eq. 22).
  const double a = RopeAttentionFactor(rope);
  torch::Tensor cos = angles.cos(), sin = angles.sin();
  if (a != 1.0) {
    cos = cos * a;
    sin = sin * a;
  }
  cos = cos.to(x.scalar_type());
  sin = sin.to(x.scalar_type());
  torch::Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  return torch::cat({x1 * cos - x2 * sin, x1 * sin + x2 * cos}, -1);
}

std::function<torch::Tensor(const torch::Tensor&)> GptImpl::Rotation() const {
  if (wpe) return {};
  const RopeSpec rope = config_.Rope();
  return [rope](const torch::Tensor& t) { return RotaryEmbedding(t, rope); };
}

torch::Tensor GptImpl::Hidden(const torch::Tensor& idx) {
  const int64_t T = idx.size(1);
  TORCH_CHECK(T <= config_.context, "sequence length ", T, " > context ", config_.context);
  AutocastScope autocast(precision_, idx.device());
  torch::Tensor x = Embed(idx);
  const std::function<torch::Tensor(const torch::Tensor&)> rotate = Rotation();
  for (const auto& b : *blocks) x = b->as<Block>()->forward(x, rotate);
  return ln_f(x);
}

torch::Tensor GptImpl::forward(const torch::Tensor& idx) {
  torch::Tensor h = Hidden(idx);
  // The output head (tied or not), computed in the precision's dtype; the logits leave as
  // fp32 so that every loss and log-probability downstream is computed in fp32.
  AutocastScope autocast(precision_, idx.device());
  return F::linear(h, HeadWeight()).to(torch::kFloat);
}

torch::Tensor GptImpl::Embed(const torch::Tensor& idx, const torch::Tensor& positions) {
  torch::Tensor x = wte(idx);
  // The residual stream is fp32 even where the embeddings are held in bf16 / fp16.
  if (x.scalar_type() == torch::kBFloat16 || x.scalar_type() == torch::kHalf)
    x = x.to(torch::kFloat);
  if (wpe)
    x = x + wpe(positions.defined()
                    ? positions
                    : torch::arange(idx.size(1), torch::dtype(torch::kLong).device(idx.device())));
  return x;
}

torch::Tensor GptImpl::Logits(const torch::Tensor& x, const torch::Tensor& head_weight) {
  return F::linear(ln_f(x), head_weight.defined() ? head_weight : HeadWeight()).to(torch::kFloat);
}

const torch::Tensor& GptImpl::HeadWeight() const { return head ? head->weight : wte->weight; }

torch::Tensor GptImpl::Loss(const torch::Tensor& x, const torch::Tensor& y) {
  torch::Tensor h = Hidden(x);
  // fp32 runs compute in the parameters' own dtype (fp64 in finite-difference tests).
  const torch::ScalarType dtype =
      precision_ == Precision::kFp32 ? wte->weight.scalar_type() : ComputeDtype(precision_);
  return LinearCrossEntropy(h.reshape({-1, h.size(-1)}), HeadWeight(), y.reshape({-1}), dtype);
}

torch::Tensor GptImpl::TokenLogProbs(const torch::Tensor& x, const torch::Tensor& y) {
  torch::Tensor logp = torch::log_softmax(forward(x), -1);
  return logp.gather(-1, y.unsqueeze(-1)).squeeze(-1);
}

}  // namespace headlab
