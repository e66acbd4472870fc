// AAH-v3 observation pass, window installation and the control hook.
#include "payload/methods/aah/aah_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "payload/exec/attention_cuda.h"

namespace headlab::aah {
namespace {

// Bytes of one chunk of [B, H, rows, T] attention probabilities in float32: the observation
// pass takes its queries in chunks of this size, so its memory does not grow with T^2.
constexpr int64_t kObserveChunkBytes = int64_t(256) << 20;

// Per head of t ([B, T, H, d]): mean absolute value and (population) standard deviation
// over batch, sequence and head-feature axes (AAH §5.3: mu(|q_h|), not |mu(q_h)|); [H, 2].
torch::Tensor MeanAbsStd(const torch::Tensor& t) {
  const std::vector<int64_t> kAll = {0, 1, 3};
  torch::Tensor f = t.to(torch::kFloat);
  torch::Tensor mean = f.mean(kAll, /*keepdim=*/true);
  torch::Tensor std = (f - mean).pow(2).mean(kAll).sqrt();
  return torch::stack({f.abs().mean(kAll), std}, 1);
}

// Per layer and head, what the observation pass needs of the head states, as one device
// tensor [L, 6, H] (one copy to the device for the whole pass): window, sink, recent,
// whether local, whether streaming, whether the head forms scores (ordinary, local,
// streaming; fixed and pruned heads report zero diagnostics).
torch::Tensor StateTable(GptImpl& model, const torch::Device& device) {
  std::vector<int64_t> v;
  for (int64_t l = 0; l < model.config().layers; ++l) {
    const std::vector<HeadState>& states = model.attention(l)->head_states();
    for (int field = 0; field < 6; ++field)
      for (const HeadState& s : states) {
        switch (field) {
          case 0: v.push_back(s.window); break;
          case 1: v.push_back(s.sink); break;
          case 2: v.push_back(s.recent); break;
          case 3: v.push_back(s.mode == HeadMode::kLocal); break;
          case 4: v.push_back(s.mode == HeadMode::kStreaming); break;
          default:
            v.push_back(s.mode == HeadMode::kOrdinary || s.mode == HeadMode::kLocal ||
                        s.mode == HeadMode::kStreaming);
        }
      }
  }
  const int64_t L = model.config().layers;
  return torch::tensor(v, torch::kLong).view({L, 6, -1}).to(device);
}

// The keys each head may read from queries [r0, r1) of a length-T sequence ([H, r1 - r0, T]
// booleans): AllowedKeys (attention.h) of every head at once, from a layer's StateTable.
torch::Tensor AllowedRows(const torch::Tensor& table, int64_t r0, int64_t r1, int64_t T) {
  auto opts = torch::dtype(torch::kLong).device(table.device());
  auto col = [&](int field) { return table[field].view({-1, 1, 1}); };
  torch::Tensor q = torch::arange(r0, r1, opts).view({1, -1, 1});
  torch::Tensor k = torch::arange(T, opts).view({1, 1, -1});
  torch::Tensor causal = k <= q;
  torch::Tensor in_window = (k > q - col(0)) | (col(3) == 0);
  torch::Tensor in_stream = (k < col(1)) | (q - k < col(2)) | (col(4) == 0);
  return causal & in_window & in_stream;
}

}  // namespace

std::vector<HeadObservation> ObserveHeads(GptImpl& model, const torch::Tensor& idx) {
  torch::NoGradGuard no_grad;
  const int64_t B = idx.size(0), T = idx.size(1);
  // Mirrors GptImpl::forward's embedding (model.cc): learned positions or RoPE.
  torch::Tensor x = model.Embed(idx);
  const std::function<torch::Tensor(const torch::Tensor&)> rotate = model.Rotation();
  // Every statistic stays on the device until one copy at the end: the pass never waits
  // for the device inside a layer.
  const torch::Tensor states = StateTable(model, x.device());
  std::vector<torch::Tensor> layers;  // [H, 9] float32 per layer
  for (const auto& module : *model.blocks) {
    const torch::Tensor table = states[int64_t(layers.size())];  // [6, H]
    auto block = module->as<Block>();
    HybridAttentionImpl& attn = *block->attn;
    const int64_t H = attn.heads(), d = attn.head_dim();
    const int64_t kv = attn.k_proj->weight.size(0) / d, group = H / kv;
    torch::Tensor h = block->ln1(x);
    torch::Tensor q = attn.q_proj(h).view({B, T, H, d});
    // Each query head's key/value head under GQA (head i reads group i / (H / kv)).
    torch::Tensor k = attn.k_proj(h).view({B, T, kv, d}).repeat_interleave(group, 2);
    torch::Tensor v = attn.v_proj(h).view({B, T, kv, d}).repeat_interleave(group, 2);
    torch::Tensor qkv = torch::cat({MeanAbsStd(q), MeanAbsStd(k), MeanAbsStd(v)}, 1);  // [H, 6]

    // The attention each head executes now, in chunks of queries: entropy (nats) and
    // output norm summed over batch and queries, usage as the most keys a query reads.
    torch::Tensor qr = q.transpose(1, 2), kr = k.transpose(1, 2), vr = v.transpose(1, 2);  // [B, H, T, d]
    if (rotate) qr = rotate(qr), kr = rotate(kr);
    auto fopts = torch::dtype(torch::kFloat).device(x.device());
    torch::Tensor entropy = torch::zeros({H}, fopts), norm = torch::zeros({H}, fopts);
    torch::Tensor usage = torch::zeros({H}, torch::dtype(torch::kLong).device(x.device()));
    const int64_t rows = std::max<int64_t>(1, kObserveChunkBytes / (B * H * T * 4));
    for (int64_t r0 = 0; r0 < T; r0 += rows) {
      const int64_t r1 = std::min(T, r0 + rows);
      torch::Tensor allowed = AllowedRows(table, r0, r1, T);
      torch::Tensor scores = torch::matmul(qr.narrow(2, r0, r1 - r0), kr.transpose(-2, -1)).to(torch::kFloat) /
                             std::sqrt(double(d));
      scores = scores.masked_fill(allowed.logical_not().unsqueeze(0), -std::numeric_limits<float>::infinity());
      torch::Tensor p = torch::softmax(scores, -1);  // [B, H, rows, T]
      torch::Tensor plogp = p * torch::log(p.clamp_min(1e-30));  // 0 where p = 0
      entropy -= plogp.sum(std::vector<int64_t>{0, 2, 3});
      norm += torch::matmul(p.to(vr.scalar_type()), vr).to(torch::kFloat).pow(2).sum(-1).sqrt().sum(std::vector<int64_t>{0, 2});
      usage = torch::maximum(usage, allowed.sum(-1).amax(-1));
    }
    torch::Tensor diag = torch::stack({entropy / double(B * T), norm / double(B * T), usage.to(torch::kFloat) / float(T)}, 1);
    diag = diag * table[5].to(torch::kFloat).view({H, 1});  // zero for heads without scores
    layers.push_back(torch::cat({qkv, diag}, 1));
    x = block->forward(x, rotate);
  }
  torch::Tensor all = torch::stack(layers).cpu();  // [L, H, 9]: the one wait for the device
  std::vector<HeadObservation> out(layers.size());
  for (size_t l = 0; l < out.size(); ++l) {
    const torch::Tensor layer = all[int64_t(l)];
    auto a = layer.accessor<float, 2>();
    for (int64_t i = 0; i < a.size(0); ++i) {
      out[l].qkv.push_back({a[i][0], a[i][1], a[i][2], a[i][3], a[i][4], a[i][5]});
      out[l].attention.push_back({a[i][6], a[i][7], a[i][8]});
    }
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
