// The hybrid-head layer on the fused CUDA kernels (attention_cuda.h).
#include "worker/exec/attention_cuda.h"

#include <atomic>
#include <cmath>
#include <mutex>

#include "common/log.h"
#include "worker/exec/attention.h"

#if HEADLAB_TORCH_CUDA
#include "kernels/torch/hybrid_attention_op.h"
#endif

namespace headlab {
namespace {

std::atomic<int64_t> fused_calls{0};
std::atomic<bool> fused_enabled{true};

// Maps a layer's head states onto the kernels' specs (the enums differ only in type).
#if HEADLAB_TORCH_CUDA
kernels::HeadState KernelState(HeadMode m) {
  switch (m) {
    case HeadMode::kOrdinary: return kernels::HeadState::kOrdinary;
    case HeadMode::kFixed: return kernels::HeadState::kFixed;
    case HeadMode::kStreaming: return kernels::HeadState::kStreaming;
    case HeadMode::kLocal: return kernels::HeadState::kLocal;
    case HeadMode::kPruned: return kernels::HeadState::kPruned;
  }
  return kernels::HeadState::kOrdinary;
}
#endif

// Logs once per process why a CUDA layer fell back to the dense masks (it is slow there).
void NoteFallback(const std::string& why) {
  static std::once_flag once;
  std::call_once(once, [&] { LogWarn("attention: dense reference on CUDA: " + why); });
}

}  // namespace

bool FusedAttentionCompiled() {
#if HEADLAB_TORCH_CUDA
  return true;
#else
  return false;
#endif
}

std::string FusedAttentionUnsupported(const HybridAttentionImpl& layer, const torch::Tensor& x) {
  if (!x.is_cuda()) return "input not on CUDA";
  if (!fused_enabled.load(std::memory_order_relaxed)) return "fused attention disabled";
  std::string why;
  const int64_t d = layer.head_dim();
  const auto dt = x.scalar_type();
  if (!FusedAttentionCompiled()) {
    why = "this build has no fused CUDA attention";
  } else if (dt != torch::kFloat && dt != torch::kBFloat16 && dt != torch::kHalf) {
    why = std::string("dtype ") + c10::toString(dt) + " unsupported";
  } else if (d != 64 && d != 96 && d != 128) {
    why = "head_dim " + std::to_string(d) + " unsupported (64, 96, 128)";
  } else if (layer.heads() > 128) {
    why = "more than 128 heads";
  } else if (x.size(0) * layer.heads() * x.size(1) * d >= (int64_t(1) << 31)) {
    why = "B*H*T*d >= 2^31";
  } else {
    for (size_t h = 0; h < layer.head_states().size() && why.empty(); ++h) {
      const HeadState& s = layer.head_states()[h];
      if (s.mode == HeadMode::kFixed && s.dense) why = "head " + std::to_string(h) + " has a dense fixed pattern";
    }
    if (why.empty() && (layer.fixed_alpha.scalar_type() != torch::kFloat ||
                        layer.fixed_alpha.device() != x.device()))
      why = "fixed-pattern buffers are not fp32 on the input's device";
  }
  if (!why.empty()) NoteFallback(why);
  return why;
}

torch::Tensor FusedAttentionForward(const HybridAttentionImpl& layer, const torch::Tensor& x,
                                    const std::function<torch::Tensor(const torch::Tensor&)>& rotate) {
#if HEADLAB_TORCH_CUDA
  namespace F = torch::nn::functional;
  const int64_t B = x.size(0), T = x.size(1), H = layer.heads(), d = layer.head_dim();
  const int64_t G = layer.k_proj->weight.size(0) / d;  // kv heads
  const std::vector<HeadState>& states = layer.head_states();
  kernels::HybridHeads heads;
  bool any_scores = false, any_values = false;
  for (const HeadState& s : states) {
    kernels::HeadSpec spec;
    spec.state = KernelState(s.mode);
    spec.window = static_cast<int32_t>(s.window);
    spec.sink = static_cast<int32_t>(s.sink);
    spec.recent = static_cast<int32_t>(s.recent);
    heads.specs.push_back(spec);
    any_scores |= s.mode == HeadMode::kOrdinary || s.mode == HeadMode::kStreaming ||
                  s.mode == HeadMode::kLocal;
    any_values |= s.mode != HeadMode::kPruned;
    if (s.mode == HeadMode::kFixed) {
      heads.alpha = layer.fixed_alpha;
      heads.rho = layer.fixed_rho;
      heads.log_z = layer.fixed_log_z;
    }
  }
  // Every head is projected (one matmul each for Q, K, V). Heads that do not use a
  // projection get exact-zero gradients from the op, which is what the dense path's
  // per-head projection gives those weight rows; a projection no head uses at all is not
  // computed, so its weight gets no gradient, as in the dense path (AdamW then skips it).
  torch::Tensor q, k, v;
  if (any_scores) {
    q = F::linear(x, layer.q_proj->weight).view({B, T, H, d});
    k = F::linear(x, layer.k_proj->weight).view({B, T, G, d});
    if (rotate) {  // rotate takes [B, h, T, d]; the op reads (B, T, h, d) views
      q = rotate(q.transpose(1, 2)).transpose(1, 2);
      k = rotate(k.transpose(1, 2)).transpose(1, 2);
    }
  } else {
    q = torch::zeros({B, T, H, d}, x.options());
    k = torch::zeros({B, T, G, d}, x.options());
  }
  v = any_values ? F::linear(x, layer.v_proj->weight).view({B, T, G, d})
                 : torch::zeros({B, T, G, d}, x.options());
  torch::Tensor y = kernels::HybridAttention(q, k, v, heads, 1.0 / std::sqrt(double(d)));
  fused_calls.fetch_add(1, std::memory_order_relaxed);
  return F::linear(y.reshape({B, T, H * d}), layer.o_proj->weight, layer.o_proj->bias);
#else
  (void)layer;
  (void)x;
  (void)rotate;
  TORCH_CHECK(false, "attention: this build has no fused CUDA attention");
  return torch::Tensor();
#endif
}

void SetFusedAttentionEnabled(bool enabled) {
  fused_enabled.store(enabled, std::memory_order_relaxed);
}

int64_t FusedAttentionCalls() { return fused_calls.load(std::memory_order_relaxed); }

const char* AttentionBackendName(const torch::Device& device) {
  return device.is_cuda() && FusedAttentionCompiled() && fused_enabled.load(std::memory_order_relaxed)
             ? "fused_cuda"
             : "dense_reference";
}

}  // namespace headlab
