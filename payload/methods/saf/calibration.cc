// SAF calibration passes and their streaming per-head statistics (§3.1, App. A.1, A.3).
#include "payload/methods/saf/calibration.h"

#include <algorithm>
#include <cmath>

#include "payload/exec/model.h"

namespace headlab::saf {
namespace {

std::vector<double> ToDoubles(const torch::Tensor& t) {
  torch::Tensor c = t.detach().to(torch::kCPU, torch::kFloat64).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

void AddInto(std::vector<double>* acc, const torch::Tensor& t) {
  std::vector<double> v = ToDoubles(t);
  if (acc->empty()) acc->assign(v.size(), 0.0);
  for (size_t i = 0; i < v.size(); ++i) (*acc)[i] += v[i];
}

torch::Tensor FutureMask(int64_t T, torch::Device device) {
  return torch::ones({T, T}, torch::dtype(torch::kBool).device(device)).triu(1);
}

}  // namespace

void RunningMoments::Add(const torch::Tensor& x, bool per_entry) {
  torch::Tensor xf = x.detach().to(torch::kFloat32);
  const int64_t b = xf.size(0);
  torch::Tensor batch_mean = xf.mean(0);
  torch::Tensor dev2 = xf - batch_mean;  // squared in place: one [B, H, T, T] temporary
  dev2.pow_(2);
  torch::Tensor batch_m2 = dev2.sum(0);                               // [H, T, T]
  std::vector<double> batch_total = ToDoubles(batch_m2.sum({1, 2}));  // [H]
  if (n == 0) {
    sum = xf.sum(0);
    if (per_entry) m2 = batch_m2;
    m2_total = batch_total;
    n = b;
    return;
  }
  const double w = double(n) * double(b) / double(n + b);
  torch::Tensor delta2 = (batch_mean - sum / double(n)).pow(2);
  std::vector<double> cross = ToDoubles(delta2.sum({1, 2}));
  for (size_t h = 0; h < m2_total.size(); ++h) m2_total[h] += batch_total[h] + cross[h] * w;
  if (per_entry) m2.add_(batch_m2).add_(delta2, w);
  sum.add_(xf.sum(0));
  n += b;
}

torch::Tensor RunningMoments::Mean() const { return sum / double(n); }

int64_t RunningMoments::bytes() const {
  return (sum.defined() ? int64_t(sum.nbytes()) : 0) + (m2.defined() ? int64_t(m2.nbytes()) : 0);
}

torch::Tensor RunningMoments::EntryVariance() const {
  TORCH_CHECK(m2.defined() && n >= 2, "per-entry variance needs per_entry moments and N >= 2");
  return m2 / double(n - 1);
}

CalibrationStats::CalibrationStats(int64_t layers, int64_t heads, CalibrationNeeds needs)
    : heads_(heads), needs_(needs), layers_(size_t(layers)) {}

void CalibrationStats::Add(int64_t layer, const torch::Tensor& att, const torch::Tensor& scores) {
  TORCH_CHECK(layer >= 0 && layer < layers(), "layer ", layer, " out of range");
  TORCH_CHECK(att.dim() == 4 && att.size(1) == heads_, "att must be [B, H, T, T]");
  torch::NoGradGuard no_grad;
  LayerStats& s = layers_[size_t(layer)];
  s.att.Add(att, needs_.entry_variance);
  // H(A_n[i]) = -sum_j a log a with 0 log 0 = 0 (eq. 2's entropy form).
  AddInto(&s.row_entropy_sum, -torch::xlogy(att, att).sum(std::vector<int64_t>{0, 2, 3}));
  if (needs_.logits) {
    TORCH_CHECK(scores.defined(), "logit statistics need the scores");
    s.logits.Add(scores.masked_fill(FutureMask(scores.size(-1), scores.device()), 0.0), true);
  }
}

torch::Tensor CalibrationStats::Mean(int64_t l, int64_t h) const {
  const RunningMoments& m = layers_[size_t(l)].att;
  return m.sum[h] / double(m.n);  // one head's [T, T] only
}

int64_t CalibrationStats::bytes() const {
  int64_t total = 0;
  for (const LayerStats& s : layers_) total += s.att.bytes() + s.logits.bytes();
  return total;
}

double CalibrationStats::VarianceScore(int64_t l, int64_t h) const {
  const RunningMoments& m = layers_[size_t(l)].att;
  TORCH_CHECK(m.n >= 2, "the variance score needs N >= 2 calibration sequences");
  const double T = double(m.sum.size(-1));
  return m.m2_total[size_t(h)] / (double(m.n - 1) * T * T);  // SAF eq. 1
}

double CalibrationStats::ForwardKlScore(int64_t l, int64_t h) const {
  const LayerStats& s = layers_[size_t(l)];
  const double T = double(s.att.sum.size(-1)), N = double(s.att.n);
  torch::Tensor mean = Mean(l, h).to(torch::kFloat64);
  double mean_entropy = -torch::xlogy(mean, mean).sum().item<double>() / T;
  // SAF eq. 2; the two entropy averages can differ by rounding when the head is constant.
  return std::max(0.0, mean_entropy - s.row_entropy_sum[size_t(h)] / (N * T));
}

ModelView ViewOfGpt(GptImpl& gpt) {
  ModelView v;
  v.heads = gpt.config().heads;
  v.module = &gpt;
  GptImpl* g = &gpt;
  v.embed = [g](const torch::Tensor& idx) { return g->Embed(idx); };
  v.rotate = gpt.Rotation();  // the model's own RoPE, or none with learned positions
  for (const auto& m : *gpt.blocks) {
    BlockImpl* block = m->as<BlockImpl>();
    TORCH_CHECK(block != nullptr, "GptImpl.blocks holds a module that is not a Block");
    LayerView lv;
    lv.q_weight = block->attn->q_proj->weight;
    lv.k_weight = block->attn->k_proj->weight;
    lv.v_weight = block->attn->v_proj->weight;
    lv.o_weight = block->attn->o_proj->weight;
    lv.q_bias = block->attn->q_proj->bias;  // undefined unless the checkpoint has them
    lv.k_bias = block->attn->k_proj->bias;
    lv.v_bias = block->attn->v_proj->bias;
    lv.o_bias = block->attn->o_proj->bias;
    lv.q_norm = block->attn->q_norm;
    lv.k_norm = block->attn->k_norm;
    lv.qk_norm_eps = gpt.config().NormEps();
    lv.attention_input = [block](const torch::Tensor& r) { return block->ln1->forward(r); };
    auto rotate = v.rotate;
    lv.block = [block, rotate](const torch::Tensor& r) { return block->forward(r, rotate); };
    // model.cc's BlockImpl::forward, second half (the gate-Taylor forward splits the block).
    lv.mlp = [block](const torch::Tensor& r) { return r + block->Mlp(block->ln2->forward(r)); };
    v.layers.push_back(lv);
  }
  v.logits = [g](const torch::Tensor& r) { return g->Logits(r); };
  const int64_t d = v.layers.empty() ? 1 : v.layers[0].q_weight.size(0) / v.heads;
  v.kv_heads = v.layers.empty() ? v.heads : v.layers[0].k_weight.size(0) / d;
  return v;
}

LayerAttention ComputeLayerAttention(const ModelView& model, int64_t l, const torch::Tensor& x) {
  const LayerView& lv = model.layers[size_t(l)];
  const int64_t B = x.size(0), T = x.size(1), H = model.heads;
  const int64_t d = lv.q_weight.size(0) / H, group = H / model.kv_heads;
  auto split = [&](const torch::Tensor& t) { return t.view({B, T, -1, d}).transpose(1, 2); };
  torch::Tensor q = split(torch::nn::functional::linear(x, lv.q_weight, lv.q_bias));
  torch::Tensor k = split(torch::nn::functional::linear(x, lv.k_weight, lv.k_bias));
  torch::Tensor v = split(torch::nn::functional::linear(x, lv.v_weight, lv.v_bias));
  auto rms = [&](const torch::Tensor& t, const torch::Tensor& gain) {  // Qwen 3's per-head norm
    return gain.defined() ? t * torch::rsqrt(t.pow(2).mean(-1, true) + lv.qk_norm_eps) * gain : t;
  };
  q = rms(q, lv.q_norm);
  k = rms(k, lv.k_norm);
  if (model.rotate) {
    q = model.rotate(q);
    k = model.rotate(k);
  }
  if (group > 1) {
    k = k.repeat_interleave(group, 1);
    v = v.repeat_interleave(group, 1);
  }
  // SAF eq. 5-6.
  torch::Tensor s = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(d));
  s.masked_fill_(FutureMask(T, x.device()), -INFINITY);
  return {torch::softmax(s, -1), s, v};
}

void Calibrate(const ModelView& model, const std::vector<torch::Tensor>& batches,
               CalibrationStats* stats) {
  torch::NoGradGuard no_grad;
  EvalModeScope eval(model.module);
  for (const torch::Tensor& tokens : batches) {
    torch::Tensor r = model.embed(tokens);
    for (int64_t l = 0; l < int64_t(model.layers.size()); ++l) {
      LayerAttention a =
          ComputeLayerAttention(model, l, model.layers[size_t(l)].attention_input(r));
      stats->Add(l, a.att, stats->needs().logits ? a.scores : torch::Tensor());
      r = model.layers[size_t(l)].block(r);
    }
  }
}

std::vector<int64_t> LatterHalfQueries(int64_t T, int64_t count) {
  const int64_t lo = T / 2, span = T - 1 - lo;
  count = std::max<int64_t>(1, std::min(count, span + 1));
  std::vector<int64_t> out;
  for (int64_t c = 0; c < count; ++c)
    out.push_back(count == 1 ? T - 1 : lo + (span * c + (count - 1) / 2) / (count - 1));
  return out;
}

OutputStats EmptyOutputStats(int64_t layers, int64_t heads) {
  OutputStats out;
  out.layers = layers;
  out.heads = heads;
  out.sq_norm.assign(size_t(layers * heads), 0.0);
  out.dims.assign(size_t(layers * heads), 0);
  out.gram.assign(size_t(layers * heads * heads), 0.0);
  out.cos_sum.assign(size_t(layers * heads), 0.0);
  out.rel_sum.assign(size_t(layers * heads), 0.0);
  return out;
}

void AddLayerOutputs(const ModelView& model, int64_t l, const torch::Tensor& r,
                     const torch::Tensor& mean, const torch::Tensor& idx, OutputStats* out) {
  const LayerView& lv = model.layers[size_t(l)];
  const int64_t B = r.size(0), H = model.heads, nq = idx.size(0);
  LayerAttention a = ComputeLayerAttention(model, l, lv.attention_input(r));
  const int64_t C = lv.o_weight.size(0), d = lv.o_weight.size(1) / H;
  torch::Tensor wo = lv.o_weight.view({C, H, d});
  torch::Tensor mean_rows = mean.to(r.device()).index_select(1, idx);  // [H, nq, T]
  // App. A.3: C = A V W^O and C~ = A_hat V W^O at the sampled queries, per head.
  torch::Tensor c =
      torch::einsum("bhid,chd->bhic", {torch::matmul(a.att.index_select(2, idx), a.values), wo});
  torch::Tensor ct =
      torch::einsum("bhid,chd->bhic", {torch::matmul(mean_rows.unsqueeze(0), a.values), wo});
  torch::Tensor o = c.sum(1);  // [B, nq, C]
  if (lv.o_bias.defined()) o = o + lv.o_bias;
  torch::Tensor y = r.index_select(1, idx) + o;  // Y = R + O
  torch::Tensor yt = y.unsqueeze(1) - c + ct;    // Y~_h, [B, H, nq, C]
  std::vector<double> sq = ToDoubles(c.pow(2).sum(std::vector<int64_t>{0, 2, 3}));
  std::vector<double> gram = ToDoubles(torch::einsum("bhic,bgic->hg", {c, c}));
  std::vector<double> cosv =
      ToDoubles((1 - torch::cosine_similarity(y.unsqueeze(1).expand_as(yt), yt, -1))
                    .sum(std::vector<int64_t>{0, 2}));
  torch::Tensor denom = o.norm(2, -1).clamp_min(1e-8).unsqueeze(1);  // [B, 1, nq]
  std::vector<double> rel =
      ToDoubles(((ct - c).norm(2, -1) / denom).sum(std::vector<int64_t>{0, 2}));
  for (int64_t h = 0; h < H; ++h) {
    const size_t u = size_t(l * H + h);
    out->sq_norm[u] += sq[size_t(h)];
    out->dims[u] += B * nq * C;
    out->cos_sum[u] += cosv[size_t(h)];
    out->rel_sum[u] += rel[size_t(h)];
    for (int64_t g = 0; g < H; ++g)
      out->gram[size_t((l * H + h) * H + g)] += gram[size_t(h * H + g)];
  }
}

torch::Tensor QueryIndex(const torch::Tensor& tokens, int64_t queries) {
  return torch::tensor(LatterHalfQueries(tokens.size(1), queries), torch::kLong)
      .to(tokens.device());
}

OutputStats CalibrateOutputs(const ModelView& model, const std::vector<torch::Tensor>& batches,
                             const CalibrationStats& stats, int64_t queries) {
  torch::NoGradGuard no_grad;
  EvalModeScope eval(model.module);
  const int64_t L = int64_t(model.layers.size());
  OutputStats out = EmptyOutputStats(L, model.heads);
  for (const torch::Tensor& tokens : batches) {
    torch::Tensor idx = QueryIndex(tokens, queries);
    torch::Tensor r = model.embed(tokens);
    for (int64_t l = 0; l < L; ++l) {
      AddLayerOutputs(model, l, r, stats.layer(l).att.Mean(), idx, &out);
      r = model.layers[size_t(l)].block(r);
    }
    out.rows += tokens.size(0) * idx.size(0);
  }
  return out;
}

std::vector<double> GateTaylorImportance(const ModelView& model,
                                         const std::vector<torch::Tensor>& batches) {
  EvalModeScope eval(model.module);
  torch::AutoGradMode grad_mode(true);  // gradients to the gates even inside a NoGradGuard
  const int64_t L = int64_t(model.layers.size()), H = model.heads;
  std::vector<double> sum(size_t(L * H), 0.0);
  int64_t sequences = 0;
  for (const torch::Tensor& tokens : batches) {
    const int64_t B = tokens.size(0), T = tokens.size(1) - 1;
    torch::Tensor x = tokens.narrow(1, 0, T), y = tokens.narrow(1, 1, T);
    torch::Tensor gates =
        torch::ones({B, L, H}, torch::dtype(torch::kFloat32).device(tokens.device()))
            .requires_grad_(true);
    torch::Tensor r = model.embed(x);
    for (int64_t l = 0; l < L; ++l) {
      const LayerView& lv = model.layers[size_t(l)];
      LayerAttention a = ComputeLayerAttention(model, l, lv.attention_input(r));
      torch::Tensor z = torch::matmul(a.att, a.values) * gates.select(1, l).view({B, H, 1, 1});
      r = r + torch::nn::functional::linear(z.transpose(1, 2).reshape({B, T, -1}), lv.o_weight,
                                            lv.o_bias);
      r = lv.mlp(r);
    }
    torch::Tensor logits = model.logits(r);
    // Per-sequence mean-token NLL, summed: each sequence's gates see only its own loss.
    torch::Tensor nll = torch::nn::functional::cross_entropy(
        logits.reshape({B * T, -1}), y.reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
    torch::Tensor loss = nll.view({B, T}).mean(1).sum();
    torch::Tensor g = torch::autograd::grad({loss}, {gates})[0];
    AddInto(&sum, g.abs().sum(0));  // SAF eq. 19: |dL_n/dxi| before averaging
    sequences += B;
  }
  for (double& v : sum) v /= double(std::max<int64_t>(1, sequences));
  return sum;
}

std::vector<double> QkGradientNorms(const ModelView& model) {
  const int64_t H = model.heads, group = H / model.kv_heads;
  std::vector<double> out;
  for (const LayerView& lv : model.layers) {
    const int64_t d = lv.q_weight.size(0) / H;
    auto norms = [&](const torch::Tensor& w, int64_t n) {
      torch::Tensor g = w.grad();
      if (!g.defined()) return std::vector<double>(size_t(n), 0.0);
      return ToDoubles(g.detach().view({n, d, -1}).pow(2).sum({1, 2}).sqrt());
    };
    std::vector<double> q = norms(lv.q_weight, H), k = norms(lv.k_weight, model.kv_heads);
    for (int64_t h = 0; h < H; ++h) out.push_back(q[size_t(h)] + k[size_t(h / group)]);
  }
  return out;
}

}  // namespace headlab::saf
