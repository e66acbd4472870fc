// Dense fp32 reference of the hybrid-head attention layer.
#include "payload/exec/attention.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "payload/exec/attention_cuda.h"
#include "payload/exec/flops_ranges.h"

namespace headlab {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Returns the [T, T] unnormalised log-pattern alpha(j) + rho(i-j) for keys j <= i, -inf
// for j > i.
torch::Tensor CompactLogits(const torch::Tensor& alpha, const torch::Tensor& rho, int64_t T) {
  auto opts = torch::dtype(torch::kLong).device(alpha.device());
  torch::Tensor i = torch::arange(T, opts).unsqueeze(1);  // query
  torch::Tensor j = torch::arange(T, opts).unsqueeze(0);  // key
  torch::Tensor logits = alpha.narrow(0, 0, T).unsqueeze(0) + rho.index({(i - j).clamp_min(0)});
  return logits.masked_fill(j > i, kNegInf);
}

}  // namespace

torch::Tensor CompactLogNormalizer(const torch::Tensor& alpha, const torch::Tensor& rho) {
  return torch::logsumexp(CompactLogits(alpha, rho, alpha.size(0)), 1);
}

torch::Tensor CompactPattern(const torch::Tensor& alpha, const torch::Tensor& rho,
                             const torch::Tensor& log_z, int64_t T) {
  // SAF eq. 3: P(i,j) = exp(alpha(j) + rho(i-j)) / Z(i) for j <= i; exp(-inf) = 0 above.
  return torch::exp(CompactLogits(alpha, rho, T) - log_z.narrow(0, 0, T).unsqueeze(1));
}

torch::Tensor AllowedKeysAt(const HeadState& s, const torch::Tensor& qpos,
                            const torch::Tensor& kpos, int64_t call_first) {
  torch::Tensor q = qpos.unsqueeze(1), k = kpos.unsqueeze(0);
  torch::Tensor allowed = k <= q;
  if (s.mode == HeadMode::kLocal) allowed = allowed & (k > q - s.window);
  if (s.mode == HeadMode::kStreaming && s.chunk == 0)
    allowed = allowed & ((k < s.sink) | (q - k < s.recent));
  if (s.mode == HeadMode::kStreaming && s.chunk > 0) {
    // AoH §5: after each chunk the cache keeps the sink and the `recent` newest keys; the
    // next chunk's queries read those and their own chunk causally.
    torch::Tensor start = torch::floor_divide(q, s.chunk) * s.chunk;
    start = torch::clamp_min(start, call_first);
    allowed = allowed & ((k < s.sink) | (k >= start - s.recent));
  }
  return allowed;
}

torch::Tensor AllowedKeys(const HeadState& s, int64_t T, torch::Device device) {
  torch::Tensor pos = torch::arange(T, torch::dtype(torch::kLong).device(device));
  return AllowedKeysAt(s, pos, pos);
}

HybridAttentionImpl::HybridAttentionImpl(int64_t width, int64_t heads, int64_t kv_heads,
                                         int64_t context, const AttentionOptions& options)
    : heads_(heads),
      kv_heads_(kv_heads),
      head_dim_(options.head_dim > 0 ? options.head_dim : width / heads),
      context_(context),
      qk_norm_eps_(options.qk_norm_eps),
      states_(size_t(heads)),
      train_alpha_(size_t(heads)),
      train_rho_(size_t(heads)) {
  TORCH_CHECK((options.head_dim > 0 || width % heads == 0) && heads % kv_heads == 0,
              "bad attention shape");
  kept_.resize(size_t(heads));
  std::iota(kept_.begin(), kept_.end(), 0);
  kept_kv_.resize(size_t(kv_heads));
  std::iota(kept_kv_.begin(), kept_kv_.end(), 0);
  auto lin = [&](const char* name, int64_t in, int64_t out, bool bias) {
    torch::nn::Linear l =
        register_module(name, torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias)));
    if (bias) {
      torch::NoGradGuard no_grad;
      l->bias.zero_();
    }
    return l;
  };
  q_proj = lin("q_proj", width, heads * head_dim_, options.qkv_bias);
  k_proj = lin("k_proj", width, kv_heads * head_dim_, options.qkv_bias);
  v_proj = lin("v_proj", width, kv_heads * head_dim_, options.qkv_bias);
  o_proj = lin("o_proj", heads * head_dim_, width, options.out_bias);
  if (options.qk_norm) {
    q_norm = register_parameter("q_norm", torch::ones({head_dim_}));
    k_norm = register_parameter("k_norm", torch::ones({head_dim_}));
  }
  fixed_alpha = register_buffer("fixed_alpha", torch::zeros({heads, context}));
  fixed_rho = register_buffer("fixed_rho", torch::zeros({heads, context}));
  fixed_log_z = register_buffer("fixed_log_z", torch::zeros({heads, context}));
}

void HybridAttentionImpl::SetHeadState(int64_t h, const HeadState& state) {
  TORCH_CHECK(h >= 0 && h < heads_, "head ", h, " out of range");
  TORCH_CHECK(state.mode != HeadMode::kFixed, "use SetFixedCompact/SetFixedDense");
  TORCH_CHECK(state.mode == HeadMode::kPruned || !removed(h), "head ", h,
              " was removed physically and can only stay pruned");
  TORCH_CHECK(state.mode != HeadMode::kLocal || state.window >= 1, "local window must be >= 1");
  TORCH_CHECK(state.mode != HeadMode::kStreaming ||
                  (state.recent >= 1 && state.sink >= 0 && state.chunk >= 0),
              "streaming needs recent >= 1, sink >= 0 and chunk >= 0");
  EndTrainable(h);
  states_[size_t(h)] = state;
}

void HybridAttentionImpl::SetFixedCompact(int64_t h, const torch::Tensor& alpha,
                                          const torch::Tensor& rho, const torch::Tensor& log_z) {
  TORCH_CHECK(h >= 0 && h < heads_, "head ", h, " out of range");
  TORCH_CHECK(!removed(h), "head ", h, " was removed physically");
  torch::NoGradGuard no_grad;
  fixed_alpha[h].copy_(alpha);
  fixed_rho[h].copy_(rho);
  fixed_log_z[h].copy_(log_z);
  EndTrainable(h);
  states_[size_t(h)] = HeadState{HeadMode::kFixed};
}

void HybridAttentionImpl::SetFixedDense(int64_t h, const torch::Tensor& p) {
  TORCH_CHECK(h >= 0 && h < heads_, "head ", h, " out of range");
  TORCH_CHECK(!removed(h), "head ", h, " was removed physically");
  if (!fixed_dense.defined())
    fixed_dense = torch::zeros({heads_, context_, context_}, fixed_alpha.options());
  fixed_dense[h].copy_(p.detach());
  EndTrainable(h);
  HeadState s{HeadMode::kFixed};
  s.dense = true;
  states_[size_t(h)] = s;
}

std::pair<torch::Tensor, torch::Tensor> HybridAttentionImpl::MakeFixedTrainable(int64_t h) {
  TORCH_CHECK(h >= 0 && h < heads_, "head ", h, " out of range");
  const HeadState& s = states_[size_t(h)];
  TORCH_CHECK(s.mode == HeadMode::kFixed && !s.dense, "head ", h, " is not a compact fixed head");
  if (!fixed_trainable(h)) {
    train_alpha_[size_t(h)] = fixed_alpha[h].detach().clone().requires_grad_(true);
    train_rho_[size_t(h)] = fixed_rho[h].detach().clone().requires_grad_(true);
    ++trainable_count_;
  }
  return {train_alpha_[size_t(h)], train_rho_[size_t(h)]};
}

void HybridAttentionImpl::SyncTrainableFixed() {
  if (trainable_count_ == 0) return;
  torch::NoGradGuard no_grad;
  for (int64_t h = 0; h < heads_; ++h) {
    if (!fixed_trainable(h)) continue;
    fixed_alpha[h].copy_(train_alpha_[size_t(h)]);
    fixed_rho[h].copy_(train_rho_[size_t(h)]);
    fixed_log_z[h].copy_(CompactLogNormalizer(train_alpha_[size_t(h)], train_rho_[size_t(h)]));
  }
}

void HybridAttentionImpl::EndTrainable(int64_t h) {
  if (!fixed_trainable(h)) return;
  train_alpha_[size_t(h)] = torch::Tensor();
  train_rho_[size_t(h)] = torch::Tensor();
  --trainable_count_;
}

bool HybridAttentionImpl::removed(int64_t h) const {
  return std::find(kept_.begin(), kept_.end(), h) == kept_.end();
}

void HybridAttentionImpl::RemoveHeads(const std::vector<int64_t>& heads, const ResizeFn& resized) {
  const int64_t group = heads_ / kv_heads_;
  std::vector<int64_t> keep_q, keep_kv;  // row/column blocks (current slots) that stay
  std::vector<int64_t> kept, kept_kv;
  for (size_t slot = 0; slot < kept_.size(); ++slot) {
    const int64_t h = kept_[slot];
    TORCH_CHECK(h >= 0 && h < heads_, "head ", h, " out of range");
    if (std::find(heads.begin(), heads.end(), h) != heads.end()) continue;
    keep_q.push_back(int64_t(slot));
    kept.push_back(h);
  }
  for (size_t slot = 0; slot < kept_kv_.size(); ++slot) {
    const int64_t g = kept_kv_[slot];
    bool used = false;  // a kv head stays while any of its query heads does
    for (int64_t h : kept) used = used || h / group == g;
    if (!used) continue;
    keep_kv.push_back(int64_t(slot));
    kept_kv.push_back(g);
  }
  for (int64_t h : heads) {
    TORCH_CHECK(h >= 0 && h < heads_, "head ", h, " out of range");
    EndTrainable(h);
    states_[size_t(h)] = HeadState{HeadMode::kPruned};
  }
  // Element indices of the kept blocks of head_dim rows (or columns).
  auto elements = [&](const std::vector<int64_t>& blocks) {
    std::vector<int64_t> idx;
    for (int64_t b : blocks)
      for (int64_t i = 0; i < head_dim_; ++i) idx.push_back(b * head_dim_ + i);
    return torch::tensor(idx, torch::kLong).to(q_proj->weight.device());
  };
  torch::NoGradGuard no_grad;
  auto shrink = [&](torch::Tensor& w, int64_t dim, const std::vector<int64_t>& blocks) {
    if (int64_t(blocks.size()) * head_dim_ == w.size(dim)) return;  // nothing removed
    torch::Tensor idx = elements(blocks);
    if (resized) resized(w, dim, idx);
    w.set_data(w.index_select(dim, idx));
    // A gradient of the old shape cannot accumulate into the new one.
    if (w.grad().defined()) w.mutable_grad() = torch::Tensor();
  };
  shrink(q_proj->weight, 0, keep_q);
  shrink(o_proj->weight, 1, keep_q);
  shrink(k_proj->weight, 0, keep_kv);
  shrink(v_proj->weight, 0, keep_kv);
  if (q_proj->bias.defined()) shrink(q_proj->bias, 0, keep_q);
  if (k_proj->bias.defined()) shrink(k_proj->bias, 0, keep_kv);
  if (v_proj->bias.defined()) shrink(v_proj->bias, 0, keep_kv);
  kept_ = kept;
  kept_kv_ = kept_kv;
}

torch::Tensor HybridAttentionImpl::EmptyLayerOutput(const torch::Tensor& x) const {
  torch::Tensor y = torch::zeros({x.size(0), x.size(1), o_proj->weight.size(0)}, x.options());
  return o_proj->bias.defined() ? y + o_proj->bias : y;
}

torch::Tensor HybridAttentionImpl::NormalizeHeads(const torch::Tensor& y,
                                                  const torch::Tensor& gain) const {
  return (y * torch::rsqrt(y.pow(2).mean(-1, /*keepdim=*/true) + qk_norm_eps_) * gain)
      .to(y.scalar_type());
}

namespace {
std::vector<int64_t> AllSlots(int64_t n) {
  std::vector<int64_t> slots(static_cast<size_t>(n));
  std::iota(slots.begin(), slots.end(), 0);
  return slots;
}
}  // namespace

torch::Tensor HybridAttentionImpl::Queries(const torch::Tensor& x) const {
  return Project(x, q_proj, AllSlots(q_proj->weight.size(0) / head_dim_), q_norm);
}
torch::Tensor HybridAttentionImpl::Keys(const torch::Tensor& x) const {
  return Project(x, k_proj, AllSlots(k_proj->weight.size(0) / head_dim_), k_norm);
}
torch::Tensor HybridAttentionImpl::Values(const torch::Tensor& x) const {
  return Project(x, v_proj, AllSlots(v_proj->weight.size(0) / head_dim_));
}

torch::Tensor HybridAttentionImpl::Project(const torch::Tensor& x, const torch::nn::Linear& proj,
                                           const std::vector<int64_t>& heads,
                                           const torch::Tensor& norm) const {
  const torch::Tensor& weight = proj->weight;
  const int64_t B = x.size(0), T = x.size(1), C = weight.size(1);
  const int64_t n = weight.size(0) / head_dim_;
  // Unique heads in first-use order; their rows only are multiplied.
  std::vector<int64_t> unique, slot;
  for (int64_t h : heads) {
    auto it = std::find(unique.begin(), unique.end(), h);
    slot.push_back(int64_t(it - unique.begin()));
    if (it == unique.end()) unique.push_back(h);
  }
  bool all = int64_t(unique.size()) == n;
  for (size_t i = 0; all && i < unique.size(); ++i) all = unique[i] == int64_t(i);
  torch::Tensor w = weight, b = proj->bias;
  if (!all) {
    torch::Tensor idx = torch::tensor(unique, torch::kLong).to(weight.device());
    w = weight.view({n, head_dim_, C}).index_select(0, idx).reshape({-1, C});
    if (b.defined()) b = b.view({n, head_dim_}).index_select(0, idx).reshape({-1});
  }
  torch::Tensor y =
      MarkProjection(
          x, [&](const torch::Tensor& in) { return torch::nn::functional::linear(in, w, b); })
          .view({B, T, -1, head_dim_})
          .transpose(1, 2);
  if (norm.defined()) y = NormalizeHeads(y, norm);  // Qwen 3's q_norm / k_norm
  bool identity = slot.size() == unique.size();
  for (size_t i = 0; identity && i < slot.size(); ++i) identity = slot[i] == int64_t(i);
  if (identity) return y;  // [B, len(heads), T, d]
  return y.index_select(1, torch::tensor(slot, torch::kLong).to(weight.device()));
}

torch::Tensor HybridAttentionImpl::forward(
    const torch::Tensor& x, const std::function<torch::Tensor(const torch::Tensor&)>& rotate) {
  const ForwardObserver observe = std::move(observe_next_forward);
  observe_next_forward = nullptr;
  ForwardTaps taps;
  ForwardTaps* want = observe ? &taps : nullptr;
  // Run kind "flops": an "attention" range around the layer, forward and backward.
  torch::Tensor y =
      AttentionRangeWanted()
          ? MarkAttentionRange(x, [&](const torch::Tensor& in) { return Attend(in, rotate, want); })
          : Attend(x, rotate, want);
  if (observe) observe(*this, x, rotate, taps);
  return y;
}

torch::Tensor HybridAttentionImpl::Attend(
    const torch::Tensor& x, const std::function<torch::Tensor(const torch::Tensor&)>& rotate,
    ForwardTaps* taps) {
  // CUDA input: the fast path (attention_cuda.h) when the layer's plan allows; the masks
  // below are the reference and the fallback.
  if (FusedAttentionUnsupported(*this, x).empty())
    return FusedAttentionForward(*this, x, rotate, taps);
  const int64_t B = x.size(0), T = x.size(1), d = head_dim_;
  const int64_t group = heads_ / kv_heads_;

  // Projection row blocks (slots) of a query head and of its kv head: after RemoveHeads
  // they differ from the original numbering.
  auto q_slot = [&](int64_t h) {
    return int64_t(std::find(kept_.begin(), kept_.end(), h) - kept_.begin());
  };
  auto kv_slot = [&](int64_t h) {
    return int64_t(std::find(kept_kv_.begin(), kept_kv_.end(), h / group) - kept_kv_.begin());
  };
  std::vector<int64_t> score_heads, score_q, score_kv, value_heads, value_kv;
  for (int64_t h = 0; h < heads_; ++h) {
    HeadMode m = states_[size_t(h)].mode;
    if (FormsScores(m)) {
      score_heads.push_back(h);
      score_q.push_back(q_slot(h));
      score_kv.push_back(kv_slot(h));
    }
    if (m != HeadMode::kPruned) {
      value_heads.push_back(h);
      value_kv.push_back(kv_slot(h));
    }
  }
  // Values of every non-pruned head, [B, len(value_heads), T, d]; a shared kv head is
  // computed once and repeated for each query head that reads it.
  torch::Tensor v;
  if (!value_heads.empty()) v = Project(x, v_proj, value_kv);
  auto value_slot = [&](int64_t h) {
    return int64_t(std::find(value_heads.begin(), value_heads.end(), h) - value_heads.begin());
  };
  std::vector<torch::Tensor> per_head(static_cast<size_t>(heads_));  // [B, T, d] each

  if (!score_heads.empty()) {
    torch::Tensor q = Project(x, q_proj, score_q, q_norm);  // [B, Hs, T, d]
    torch::Tensor k = Project(x, k_proj, score_kv, k_norm);
    if (rotate) {
      q = rotate(q);
      k = rotate(k);
    }
    std::vector<torch::Tensor> masks;
    std::vector<int64_t> slots;
    for (int64_t h : score_heads) {
      masks.push_back(AllowedKeys(states_[size_t(h)], T, x.device()));
      slots.push_back(value_slot(h));
    }
    torch::Tensor allowed = torch::stack(masks);  // [Hs, T, T]
    torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(d));
    torch::Tensor att = torch::softmax(scores.masked_fill(allowed.logical_not(), kNegInf), -1);
    torch::Tensor vs = v.index_select(1, torch::tensor(slots, torch::kLong).to(x.device()));
    torch::Tensor y = torch::matmul(att, vs);  // [B, Hs, T, d]
    for (size_t i = 0; i < score_heads.size(); ++i)
      per_head[size_t(score_heads[i])] = y.select(1, int64_t(i));
  }

  for (int64_t h = 0; h < heads_; ++h) {
    const HeadState& s = states_[size_t(h)];
    if (s.mode != HeadMode::kFixed) continue;
    torch::Tensor p;
    if (fixed_trainable(h)) {
      // SAF App. C.3.2: logZ(i) depends on alpha(k), rho(i-k) for k <= i < T only.
      torch::Tensor a = train_alpha_[size_t(h)].narrow(0, 0, T);
      torch::Tensor r = train_rho_[size_t(h)].narrow(0, 0, T);
      p = CompactPattern(a, r, CompactLogNormalizer(a, r), T);
    } else {
      p = s.dense ? fixed_dense[h].narrow(0, 0, T).narrow(1, 0, T)
                  : CompactPattern(fixed_alpha[h], fixed_rho[h], fixed_log_z[h], T);
    }
    // SAF: Z = P V; autograd gives dV = P^T dZ, and nothing to frozen alpha/rho (buffers).
    per_head[size_t(h)] = torch::matmul(p, v.select(1, value_slot(h)));
  }

  // The heads the output projection still has columns for, in original order.
  std::vector<torch::Tensor> outputs;
  torch::Tensor zeros;
  for (int64_t h : kept_) {
    torch::Tensor out = per_head[size_t(h)];
    if (!out.defined()) {  // pruned: contributes nothing
      if (!zeros.defined()) zeros = torch::zeros({B, T, d}, x.options());
      out = zeros;
    }
    if (head_gate.defined()) out = out * head_gate.select(1, h).view({B, 1, 1});
    outputs.push_back(out);
  }
  if (outputs.empty())  // every head removed: the layer adds nothing but its output bias
    return EmptyLayerOutput(x);
  torch::Tensor y = torch::stack(outputs, 2);  // [B, T, kept heads, d], original order
  return MarkProjection(y.reshape({B, T, int64_t(outputs.size()) * d}),
                        [&](const torch::Tensor& in) { return o_proj(in); });
}

}  // namespace headlab
