// AAH-v3 observation pass, window installation and the control hook.
#include "payload/methods/aah/aah_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "kernels/torch/hybrid_attention_op.h"
#include "payload/exec/attention_cuda.h"
#include "payload/exec/bench_clock.h"
#include "payload/exec/device_copy.h"
#include "payload/measure/range_marker.h"
#include "payload/methods/aah/head_diagnostics.h"

namespace headlab::aah {
namespace {

// Per query head of q [B, T, H, d], k and v [B, T, kv, d]: mean absolute value and
// (population) standard deviation over batch, sequence and head-feature axes (AAH §5.3:
// mu(|q_h|), not |mu(q_h)|), k and v those of the head's key/value head under GQA (head h
// reads h / (H / kv)); [H, 6] = (mu|q|, sigma q, mu|k|, sigma k, mu|v|, sigma v). The
// three projections go through one set of reductions, two passes over them: the variance by
// Welford's one-pass update and the mean absolute value as the 1-norm over the count.
torch::Tensor QkvStatistics(const torch::Tensor& q, const torch::Tensor& k,
                            const torch::Tensor& v) {
  const int64_t H = q.size(2), kv = k.size(2), group = H / kv;
  const std::vector<int64_t> kAll = {0, 1, 3};
  torch::Tensor f = torch::cat({q, k, v}, 2).to(torch::kFloat);  // [B, T, H + 2 kv, d]
  const double count = double(f.size(0) * f.size(1) * f.size(3));
  torch::Tensor var = std::get<0>(torch::var_mean(f, kAll, /*unbiased=*/false));
  torch::Tensor mean_abs = torch::linalg_vector_norm(f, 1, kAll, false, c10::nullopt) / count;
  torch::Tensor stats = torch::stack({mean_abs, var.sqrt()}, 1);  // [H + 2 kv, 2]
  std::vector<int64_t> rows;  // [H, 3]: the q, k and v rows of each query head
  for (int64_t h = 0; h < H; ++h)
    for (int64_t r : {h, H + h / group, H + kv + h / group}) rows.push_back(r);
  return stats.index_select(0, IndexTensor(rows, q.device())).view({H, 6});
}

// Per head of `attn`, what the observation needs of the head states, as one device tensor
// [6, H]: window, sink, recent, whether local, whether streaming, whether the head forms
// scores (ordinary, local, streaming; fixed and pruned heads report zero diagnostics).
torch::Tensor StateTable(const HybridAttentionImpl& attn, const torch::Device& device) {
  const std::vector<HeadState>& states = attn.head_states();
  std::vector<int64_t> v;
  for (int field = 0; field < 6; ++field)
    for (const HeadState& s : states) {
      switch (field) {
        case 0:
          v.push_back(s.window);
          break;
        case 1:
          v.push_back(s.sink);
          break;
        case 2:
          v.push_back(s.recent);
          break;
        case 3:
          v.push_back(s.mode == HeadMode::kLocal);
          break;
        case 4:
          v.push_back(s.mode == HeadMode::kStreaming);
          break;
        default:
          v.push_back(FormsScores(s.mode));
      }
    }
  return IndexTensor(v, device).view({6, -1});  // no wait inside the update's forward
}

// The fused kernels' forward with log-normalisers as the diagnostics' attention, for a
// layer whose heads they all take (kernels/hybrid_attention.h); an empty function when
// the dense pass must run instead: no CUDA kernels in this build, train.attention = dense,
// a head size or count the kernels refuse, or chunk-evicting streaming heads.
AttendWithLse KernelAttend(const HybridAttentionImpl& attn, const torch::Tensor& q) {
#if !HEADLAB_TORCH_CUDA  // the kernels' op is linked into CUDA builds only
  (void)attn;
  (void)q;
  return AttendWithLse();
#else
  const int64_t d = attn.head_dim();
  if (!q.is_cuda() || !KernelInputUnsupported(attn, q).empty()) return AttendWithLse();
  kernels::HybridHeads heads;
  for (const HeadState& s : attn.head_states()) {
    if (s.mode == HeadMode::kStreaming && s.chunk > 0) return AttendWithLse();
    kernels::HeadSpec spec = KernelHeadSpec(s);
    // Heads without scores report zero diagnostics: the kernels skip them.
    if (!FormsScores(s.mode)) spec.state = kernels::HeadState::kPruned;
    heads.specs.push_back(spec);
  }
  const double scale = 1.0 / std::sqrt(double(d));
  return
      [heads, scale](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& values) {
        return kernels::HybridAttentionWithLse(q, k, values, heads, scale);
      };
#endif
}

// One layer's observation (AAH §5.3) from its input h ([B, T, C], after the block's norm):
// [H, 8] on h's device: QkvStatistics' six columns, then the entropy and output norm of
// the attention each head executes now (head_diagnostics.h; unspecified for heads without
// scores). What the layer's forward computed on h (`taps`, attention.h: the projections and
// each head's output) is read, not computed again: then one attention pass runs, over keys
// as values (OutputDiagnostics), instead of the projections and two. No wait for the device.
torch::Tensor ObserveLayer(HybridAttentionImpl& attn, const torch::Tensor& h,
                           const std::function<torch::Tensor(const torch::Tensor&)>& rotate,
                           const ForwardTaps& taps) {
  const int64_t B = h.size(0), T = h.size(1), H = attn.heads(), d = attn.head_dim();
  const int64_t kv = attn.k_proj->weight.size(0) / d;
  const bool tapped = taps.q.defined();
  torch::Tensor q = tapped ? taps.q.narrow(0, 0, B) : attn.q_proj(h).view({B, T, H, d});
  torch::Tensor k = tapped ? taps.k.narrow(0, 0, B) : attn.k_proj(h).view({B, T, kv, d});
  torch::Tensor v = tapped ? taps.v.narrow(0, 0, B) : attn.v_proj(h).view({B, T, kv, d});
  const torch::Tensor qkv = QkvStatistics(q, k, v);
  // The queries and keys the heads attend with: the per-head norm (Qwen 3), then the
  // position encoding, as the forward applies them.
  if (attn.q_norm.defined()) {
    q = attn.NormalizeHeads(q, attn.q_norm);
    k = attn.NormalizeHeads(k, attn.k_norm);
  }
  if (rotate) {
    q = rotate(q.transpose(1, 2)).transpose(1, 2);
    k = rotate(k.transpose(1, 2)).transpose(1, 2);
  }
  const AttendWithLse attend = KernelAttend(attn, q);
  torch::Tensor diag;
  if (attend && taps.o.defined())
    diag = OutputDiagnostics(q, k, taps.o.narrow(0, 0, B), attend);
  else if (attend)
    diag = LseDiagnostics(q, k, v, attend);
  else
    diag = DenseDiagnostics(q, k, v, StateTable(attn, h.device()));
  return torch::cat({qkv, diag}, 1);
}

// Every layer's ObserveLayer rows ([H, 8] each, on the device) on the host as the
// controller reads them, with each head's usage from its state and zero diagnostics for
// heads without scores (§5.3): the one wait for the device of an observation. `model`'s
// head states are the ones the rows were observed under, on sequences of length T.
std::vector<HeadObservation> ToObservations(GptImpl& model,
                                            const std::vector<torch::Tensor>& layers, int64_t T) {
  const torch::Tensor all = torch::stack(layers).to(torch::kCPU, torch::kFloat).contiguous();
  auto a = all.accessor<float, 3>();
  std::vector<HeadObservation> out(size_t(a.size(0)));
  for (int64_t l = 0; l < a.size(0); ++l) {
    const std::vector<HeadState>& states = model.attention(l)->head_states();
    for (int64_t i = 0; i < a.size(1); ++i) {
      const auto r = a[l][i];
      const HeadState& s = states[size_t(i)];
      out[size_t(l)].qkv.push_back({r[0], r[1], r[2], r[3], r[4], r[5]});
      if (FormsScores(s.mode))
        out[size_t(l)].attention.push_back({r[6], r[7], float(HeadUsage(s, T))});
      else
        out[size_t(l)].attention.push_back({0.f, 0.f, 0.f});
    }
  }
  return out;
}

// Installs one layer's windows: local(W) for W < context, ordinary otherwise (§5.8).
void ApplyLayerWindows(HybridAttentionImpl& attn, const std::vector<int64_t>& windows,
                       int64_t context) {
  for (size_t h = 0; h < windows.size(); ++h) {
    HeadState s;
    if (windows[h] < context) {
      s.mode = HeadMode::kLocal;  // keys q - W < k <= q (AAH §5.8)
      s.window = windows[h];
    }
    attn.SetHeadState(int64_t(h), s);
  }
}

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::vector<HeadObservation> ObserveHeads(GptImpl& model, const torch::Tensor& idx) {
  torch::NoGradGuard no_grad;
  // Mirrors GptImpl::Hidden (model.cc): the model's precision (bf16 / fp16 autocast), its
  // embedding (learned positions or RoPE) and blocks.
  AutocastScope autocast(model.precision(), idx.device());
  torch::Tensor x = model.Embed(idx);
  const std::function<torch::Tensor(const torch::Tensor&)> rotate = model.Rotation();
  // Every statistic stays on the device until one copy at the end: the pass never waits
  // for the device inside a layer.
  std::vector<torch::Tensor> layers;  // [H, 8] per layer
  for (const auto& module : *model.blocks) {
    auto block = module->as<Block>();
    layers.push_back(ObserveLayer(*block->attn, block->ln1(x), rotate, ForwardTaps()));
    x = block->forward(x, rotate);
  }
  return ToObservations(model, layers, idx.size(1));
}

void ApplyWindows(GptImpl& model, const WindowMap& windows) {
  for (size_t l = 0; l < windows.size(); ++l)
    ApplyLayerWindows(*model.attention(int64_t(l)), windows[l], model.config().context);
}

WindowMap InstalledWindows(GptImpl& model) {
  const ModelConfig& c = model.config();
  WindowMap w(size_t(c.layers));
  for (int64_t l = 0; l < c.layers; ++l)
    for (const HeadState& s : model.attention(l)->head_states()) {
      switch (s.mode) {
        case HeadMode::kLocal:
          w[size_t(l)].push_back(std::min(s.window, c.context));
          break;
        case HeadMode::kStreaming:
          w[size_t(l)].push_back(std::min(s.sink + s.recent, c.context));
          break;
        case HeadMode::kPruned:
          w[size_t(l)].push_back(0);
          break;
        case HeadMode::kOrdinary:
        case HeadMode::kFixed:
          w[size_t(l)].push_back(c.context);
          break;
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
    if (fused)
      b.layer_fallback.push_back(why);
    else if (b.why_dense.empty())
      b.why_dense = why;
  }
  return b;
}

StatusOr<std::shared_ptr<ControlRound>> ControlStep(AahController& controller, GptImpl& model,
                                                    int64_t step, const torch::Tensor& x,
                                                    Observation observation) {
  const ModelConfig& c = model.config();
  const AahOptions& o = controller.options();
  if (o.regime == Regime::kOff) return std::shared_ptr<ControlRound>();
  if (c.context != o.context)
    return Status::InvalidArgument("aah: controller context " + std::to_string(o.context) +
                                   " != model.context " + std::to_string(c.context));
  // Installing is idempotent; doing it every step also covers a resume and the windows of
  // controls that never update (fixed_window).
  ApplyWindows(model, controller.windows());
  if (!controller.Due(step)) return std::shared_ptr<ControlRound>();
  auto round = std::make_shared<ControlRound>();
  round->step = step;
  const int64_t rows = o.observe_rows > 0 ? o.observe_rows : std::numeric_limits<int64_t>::max();
  if (observation == Observation::kSeparatePass) {
    // The clock starts once the device has finished the work queued before the controller
    // (the model's): the seconds are the controller's own, not a forward it waited for.
    SynchronizeDevice(x.device());
    const auto t0 = std::chrono::steady_clock::now();
    // ObserveHeads ends with its wait for the device.
    const std::vector<HeadObservation> observed =
        ObserveHeads(model, x.narrow(0, 0, std::min(rows, x.size(0))));
    const auto t1 = std::chrono::steady_clock::now();
    HEADLAB_RETURN_IF_ERROR(controller.Update(observed, step));
    round->layers = c.layers;
    round->host_seconds = SecondsSince(t1);
    round->seconds = SecondsSince(t0);
    return round;
  }
  // In the update's forward each layer queues its observation on the device and keeps the
  // rows there; FinishControl reads them all with one wait and runs the controller.
  round->rows.resize(size_t(c.layers));
  round->device_time = std::make_unique<DeviceStopwatch>(x.device());
  for (int64_t l = 0; l < c.layers; ++l) {
    model.attention(l)->observe_next_forward =
        [round, l, rows](HybridAttentionImpl& attn, const torch::Tensor& in,
                         const std::function<torch::Tensor(const torch::Tensor&)>& rotate,
                         const ForwardTaps& taps) {
          measure::ScopedRange method("method");  // the flops kind's range of method work
          torch::NoGradGuard no_grad;
          const torch::Tensor h = in.detach().narrow(0, 0, std::min(rows, in.size(0)));
          round->device_time->Start();
          round->sequence = h.size(1);
          round->rows[size_t(l)] = ObserveLayer(attn, h, rotate, taps);
          round->device_time->Stop();
          ++round->layers;
        };
  }
  return round;
}

Status FinishControl(AahController& controller, GptImpl& model, ControlRound* round) {
  if (round == nullptr || round->finished) return Status::Ok();
  round->finished = true;
  const ModelConfig& c = model.config();
  for (int64_t l = 0; l < c.layers; ++l) model.attention(l)->observe_next_forward = nullptr;
  if (round->layers != c.layers)
    return Status::Internal("aah: the control update before step " + std::to_string(round->step) +
                            " observed " + std::to_string(round->layers) + " of " +
                            std::to_string(c.layers) +
                            " layers: the update's forward did not run every layer");
  if (!round->rows.empty()) {
    const std::vector<HeadObservation> observed =
        ToObservations(model, round->rows, round->sequence);  // the one wait
    round->rows.clear();
    const auto t0 = std::chrono::steady_clock::now();
    HEADLAB_RETURN_IF_ERROR(controller.Update(observed, round->step));
    round->host_seconds = SecondsSince(t0);
    round->seconds = round->host_seconds + round->device_time->TotalMs() / 1000.0;
  }
  // Both observations install here: the update's own forward ran the windows before it.
  ApplyWindows(model, controller.windows());
  return Status::Ok();
}

}  // namespace headlab::aah
