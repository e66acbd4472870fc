// AAH-v3 observation pass, window installation and the control hook.
#include "payload/methods/aah/aah_model.h"

#include <cmath>
#include <limits>

#include "payload/exec/attention_cuda.h"

namespace headlab::aah {
namespace {

// Mean absolute value and (population) standard deviation of one head's activations,
// reduced over batch, sequence and head-feature axes (AAH §5.3: mu(|q_h|), not |mu(q_h)|).
std::pair<float, float> MeanAbsStd(const torch::Tensor& t) {
  torch::Tensor mean = t.mean();
  torch::Tensor std = (t - mean).pow(2).mean().sqrt();
  return {t.abs().mean().item<float>(), std.item<float>()};
}

// [B, T, n * d] -> head i: [B, T, d].
torch::Tensor HeadSlice(const torch::Tensor& y, int64_t i, int64_t d) { return y.narrow(-1, i * d, d); }

}  // namespace

std::vector<HeadObservation> ObserveHeads(GptImpl& model, const torch::Tensor& idx) {
  torch::NoGradGuard no_grad;
  const int64_t T = idx.size(1);
  // Mirrors GptImpl::forward's embedding (model.cc): learned positions or RoPE.
  torch::Tensor x = model.Embed(idx);
  const std::function<torch::Tensor(const torch::Tensor&)> rotate = model.Rotation();
  std::vector<HeadObservation> out;
  for (const auto& module : *model.blocks) {
    auto block = module->as<Block>();
    HybridAttentionImpl& attn = *block->attn;
    const int64_t H = attn.heads(), d = attn.head_dim();
    const int64_t group = H / (attn.k_proj->weight.size(0) / d);
    torch::Tensor h = block->ln1(x);
    torch::Tensor q = attn.q_proj(h), k = attn.k_proj(h), v = attn.v_proj(h);  // [B, T, n*d]
    HeadObservation obs;
    for (int64_t i = 0; i < H; ++i) {
      torch::Tensor qi = HeadSlice(q, i, d), ki = HeadSlice(k, i / group, d),
                    vi = HeadSlice(v, i / group, d);
      auto [mq, sq] = MeanAbsStd(qi);
      auto [mk, sk] = MeanAbsStd(ki);
      auto [mv, sv] = MeanAbsStd(vi);
      obs.qkv.push_back({mq, sq, mk, sk, mv, sv});

      const HeadState& s = attn.head_states()[size_t(i)];
      if (s.mode != HeadMode::kOrdinary && s.mode != HeadMode::kLocal &&
          s.mode != HeadMode::kStreaming) {
        obs.attention.push_back({0, 0, 0});
        continue;
      }
      // The attention this head executes now, one head at a time ([B, T, T] scores).
      torch::Tensor qr = qi.unsqueeze(1), kr = ki.unsqueeze(1);  // [B, 1, T, d]
      if (rotate) qr = rotate(qr), kr = rotate(kr);
      torch::Tensor allowed = AllowedKeys(s, T, idx.device());
      torch::Tensor scores = torch::matmul(qr, kr.transpose(-2, -1)).squeeze(1) / std::sqrt(double(d));
      scores = scores.masked_fill(allowed.logical_not(), -std::numeric_limits<float>::infinity());
      torch::Tensor p = torch::softmax(scores, -1);
      torch::Tensor plogp = torch::where(p > 0, p * torch::log(p.clamp_min(1e-30)), torch::zeros_like(p));
      const float entropy = (-plogp.sum(-1)).mean().item<float>();
      const float out_norm = torch::matmul(p, vi).pow(2).sum(-1).sqrt().mean().item<float>();
      const float usage = allowed.to(torch::kFloat).sum(-1).max().item<float>() / float(T);
      obs.attention.push_back({entropy, out_norm, usage});
    }
    out.push_back(std::move(obs));
    x = block->forward(x, rotate);
  }
  return out;
}

void ApplyWindows(GptImpl& model, const WindowMap& windows) {
  const int64_t T = model.config().context;
  for (size_t l = 0; l < windows.size(); ++l)
    for (size_t h = 0; h < windows[l].size(); ++h) {
      HeadState s;
      if (windows[l][h] < T) {
        s.mode = HeadMode::kLocal;  // keys q - W < k <= q (AAH §5.8)
        s.window = windows[l][h];
      }
      model.attention(int64_t(l))->SetHeadState(int64_t(h), s);
    }
}

WindowMap InstalledWindows(GptImpl& model) {
  const ModelConfig& c = model.config();
  WindowMap w(size_t(c.layers));
  for (int64_t l = 0; l < c.layers; ++l)
    for (const HeadState& s : model.attention(l)->head_states()) {
      switch (s.mode) {
        case HeadMode::kLocal: w[size_t(l)].push_back(std::min(s.window, c.context)); break;
        case HeadMode::kStreaming: w[size_t(l)].push_back(std::min(s.sink + s.recent, c.context)); break;
        case HeadMode::kPruned: w[size_t(l)].push_back(0); break;
        case HeadMode::kOrdinary:
        case HeadMode::kFixed: w[size_t(l)].push_back(c.context); break;
      }
    }
  return w;
}

ExecutionBackend ExecutionBackendOf(GptImpl& model, const torch::Device& device, int64_t batch) {
  const ModelConfig& c = model.config();
  ExecutionBackend b;
  b.device = device.str();
  const bool fused = std::string(AttentionBackendName(device)) == "fused_cuda";
  b.name = fused ? kFusedCuda : kDenseMasked;
  if (!device.is_cuda()) return b;
  // The dispatch (HybridAttentionImpl::forward) asks per layer and input; a broadcast
  // scalar of the input's shape, dtype and device asks the same question without memory.
  for (int64_t l = 0; l < c.layers; ++l) {
    HybridAttention& layer = model.attention(l);
    torch::Tensor probe = torch::empty({1}, layer->q_proj->weight.options().device(device))
                              .expand({batch, c.context, c.width});
    const std::string why = FusedAttentionUnsupported(*layer, probe);
    if (fused) b.layer_fallback.push_back(why);
    else if (b.why_dense.empty()) b.why_dense = why;
  }
  return b;
}

Status ControlStep(AahController& controller, GptImpl& model, int64_t step,
                   const torch::Tensor& x, bool* updated) {
  if (updated) *updated = false;
  const ModelConfig& c = model.config();
  const AahOptions& o = controller.options();
  if (o.regime == Regime::kOff) return Status::Ok();
  if (c.context != o.context)
    return Status::InvalidArgument("aah: controller context " + std::to_string(o.context) +
                                   " != model.context " + std::to_string(c.context));
  if (controller.Due(step)) {
    const int64_t rows = o.observe_rows > 0 ? std::min<int64_t>(o.observe_rows, x.size(0)) : x.size(0);
    HEADLAB_RETURN_IF_ERROR(controller.Update(ObserveHeads(model, x.narrow(0, 0, rows)), step));
    if (updated) *updated = true;
  }
  // Installing is idempotent; doing it every step also covers a resume and the windows of
  // controls that never update (fixed_window).
  ApplyWindows(model, controller.windows());
  return Status::Ok();
}

}  // namespace headlab::aah
