// The hybrid-head layer's fast path (attention_cuda.h).
#include "payload/exec/attention_cuda.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>

#include <torch/version.h>

#include "common/config_key.h"
#include "common/log.h"
#include "common/run_config.h"
#include "payload/exec/attention.h"
#include "payload/exec/attention_plan.h"
#include "payload/exec/bench_clock.h"
#include "payload/exec/device_copy.h"
#include "payload/exec/fixed_conv.h"
#include "payload/exec/flops_ranges.h"
#include "payload/exec/precision.h"

#if HEADLAB_TORCH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "kernels/torch/hybrid_attention_op.h"
#endif

// FlashAttention-2 with a left window (aten::_flash_attention_forward's window_size_left)
// is part of CUDA LibTorch from 2.5 on.
#define HEADLAB_HAVE_FLASH_WINDOW \
  (HEADLAB_TORCH_CUDA &&          \
   (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)))

namespace headlab {

// A plan with its head-block indices on the layer's device (made once per plan: an upload
// in every forward would wait for the device each time).
struct DevicePlan {
  AttentionPlan plan;
  torch::Tensor q_idx, k_idx, v_idx, o_idx, out_idx;
};

// Per-layer state of the fast path: the cached plans, the measured choices and the cached
// fixed patterns (GEMM) and convolution factors.
struct FastPathState {
  std::string plan_key;
  // The static plan (one element), or with train.attention = auto on a device that can be
  // timed, every candidate (CandidatePlans); `active` is the one forwards run.
  std::vector<DevicePlan> plans;
  size_t active = 0;
  // Measured choices: the candidates' labels + shape -> index into plans (CandidatePlans
  // lists the same labels in the same order), and what was measured.
  std::map<std::string, size_t> chosen;
  std::string candidates_key;  // the plans' labels, set with `plans`
  std::map<std::string, PlanChoice> choices;
  std::string pattern_key;
  torch::Tensor patterns;  // [fixed_gemm heads, T, T] in the activations' dtype
  int64_t pattern_bytes = 0;
  std::string conv_key;  // the compact fixed heads' convolution factors (fixed_conv.h)
  bool conv_ok = false;
  FixedConvFactors conv;
  std::string label;  // LayerPathLabel
  ~FastPathState();
};

namespace {

namespace F = torch::nn::functional;

std::atomic<int> attention_mode{int(AttentionMode::kAuto)};
std::atomic<bool> cpu_testing{false};
std::atomic<bool> flash_window_cpu_testing{false};
std::atomic<int64_t> fused_calls{0};
std::mutex timer_mutex;
PlanTimer test_timer;                      // guarded by timer_mutex; SetPlanTimerForTesting
std::atomic<int64_t> timer_generation{0};  // a new test timer measures afresh
// Bytes of fixed-pattern caches held by all layers of this process. The cache holds one
// causal [T, T] pattern per fixed head (2 bytes per entry in bf16: 32 MiB at T = 4096); past
// this budget a layer's fixed heads take the fused kernels (in-register patterns) instead.
std::atomic<int64_t> pattern_cache_bytes{0};
constexpr int64_t kPatternCacheBudget = int64_t(8) << 30;

// Logs once per process why a CUDA layer fell back to the dense masks (it is slow there).
void NoteFallback(const std::string& why) {
  static std::once_flag once;
  std::call_once(once, [&] { LogWarn("attention: dense reference on CUDA: " + why); });
}

bool KernelAvailable(const torch::Tensor& x) {
#if HEADLAB_TORCH_CUDA
  if (x.is_cuda()) return true;
#endif
  return !x.is_cuda() && cpu_testing.load(std::memory_order_relaxed);
}

#if HEADLAB_HAVE_FLASH_WINDOW
// q, k, v [B, T, n, d] in fp16 or bf16 (any strides with a unit last one): causal attention
// over the keys q - window < k <= q, through FlashAttention-2, differentiable.
torch::Tensor FlashWindowCuda(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v, int64_t window, double scale) {
  const int64_t T = q.size(1);
  return std::get<0>(at::_flash_attention_forward(
      q, k, v, std::nullopt, std::nullopt, T, T, /*dropout_p=*/0.0, /*is_causal=*/true,
      /*return_debug_mask=*/false, std::optional<double>(scale), std::optional<int64_t>(window - 1),
      std::optional<int64_t>(0)));
}

// Whether FlashAttention-2's window works on `device` (this LibTorch built for its
// architecture, with local attention and the window in its gradient): one small case, the
// output and the three gradients against the dense masks', once per device. Deterministic
// inputs: the run's random streams are left as they were.
bool FlashWindowWorks(const torch::Device& device) {
  static std::mutex mu;
  static std::map<int, bool> works;
  std::lock_guard<std::mutex> lock(mu);
  auto it = works.find(device.index());
  if (it != works.end()) return it->second;
  bool ok = false;
  std::string why;
  try {
    // Whatever the caller's modes: gradients on, autocast off (the reference is fp32).
    torch::AutoGradMode grad(true);
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    const int64_t T = 96, n = 2, d = 64, W = 17;
    auto input = [&](double f) {
      return torch::sin(torch::arange(T * n * d, torch::kFloat) * f)
          .view({1, T, n, d})
          .to(device, torch::kBFloat16)
          .requires_grad_();
    };
    torch::Tensor q = input(0.37), k = input(0.91), v = input(0.13);
    torch::Tensor dy =
        torch::cos(torch::arange(T * n * d, torch::kFloat) * 0.53).view({1, T, n, d});
    torch::Tensor o = FlashWindowCuda(q, k, v, W, 0.125);
    auto got = torch::autograd::grad({o}, {q, k, v}, {dy.to(device, torch::kBFloat16)});
    // The dense masks in fp32 ([1, n, T, d] views), their gradients through autograd.
    auto ref = [&](const torch::Tensor& t) {
      return t.detach().to(torch::kFloat).transpose(1, 2).requires_grad_();
    };
    torch::Tensor qf = ref(q), kf = ref(k), vf = ref(v);
    const torch::Tensor allowed = AllowedKeys(HeadState{HeadMode::kLocal, W}, T, device);
    torch::Tensor p = torch::softmax((torch::matmul(qf, kf.transpose(-2, -1)) * 0.125)
                                         .masked_fill(allowed.logical_not(), -INFINITY),
                                     -1);
    torch::Tensor want = torch::matmul(p, vf).transpose(1, 2);
    auto want_grads = torch::autograd::grad({want}, {qf, kf, vf}, {dy.to(device)});
    auto rel = [](const torch::Tensor& a, const torch::Tensor& b) {
      return ((a.detach().to(torch::kFloat) - b).norm() / b.norm()).item<double>();
    };
    double err = rel(o, want);
    for (size_t g = 0; g < 3; ++g) err = std::max(err, rel(got[g], want_grads[g].transpose(1, 2)));
    ok = err < 3e-2;
    if (!ok)
      why =
          "rel. L2 error " + std::to_string(err) + " against the dense masks (output or gradient)";
  } catch (const std::exception& e) {
    why = e.what();
    why = why.substr(0, why.find('\n'));
  }
  LogInfo("attention: FlashAttention-2 window on " + device.str() +
          (ok ? ": available for local heads" : ": unavailable (" + why + ")"));
  works[device.index()] = ok;
  return ok;
}
#endif

// Whether local heads of x's layer may take FlashAttention-2 (PlanOptions::flash_window):
// fp16 or bf16 activations on a device where it works, never inside a CUDA graph capture.
bool FlashWindowAvailable(const torch::Tensor& x) {
#if HEADLAB_HAVE_FLASH_WINDOW
  if (x.is_cuda()) {
    const auto dt = ActivationDtype(x);
    if (dt != torch::kBFloat16 && dt != torch::kHalf) return false;
    if (c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None)
      return false;
    return FlashWindowWorks(x.device());
  }
#endif
  return !x.is_cuda() && flash_window_cpu_testing.load(std::memory_order_relaxed);
}

bool SdpaAvailable(const torch::Tensor& x) {
#if HEADLAB_HAVE_SDPA
  if (x.is_cuda()) return true;
#endif
  return !x.is_cuda() && cpu_testing.load(std::memory_order_relaxed);
}

int64_t ElementBytes(torch::ScalarType t) { return int64_t(c10::elementSize(t)); }

int64_t FixedHeadCount(const HybridAttentionImpl& layer) {
  int64_t n = 0;
  for (const HeadState& s : layer.head_states()) n += s.mode == HeadMode::kFixed;
  return n;
}

// The key a plan is cached under: everything PlanAttention reads.
std::string PlanKey(const HybridAttentionImpl& layer, const PlanOptions& o) {
  std::ostringstream k;
  for (const HeadState& s : layer.head_states())
    k << int(s.mode) << ':' << s.window << ':' << s.sink << ':' << s.recent << ':' << s.chunk << ':'
      << s.dense << ',';
  k << '|';
  for (int64_t h : layer.kept_heads()) k << h << ',';
  k << '|';
  for (int64_t g : layer.kept_kv_heads()) k << g << ',';
  k << '|' << o.sdpa << o.kernel << o.flash_window << o.fused_only << o.fixed_gemm << o.fixed_conv
    << o.trainable_fixed;
  return k.str();
}

// [B, T, n, d] views: causal softmax attention of ordinary heads. On CUDA PyTorch's
// scaled_dot_product_attention (its own backend choice); the CPU test stand-in computes the
// same with dense masks.
torch::Tensor SdpaCausal(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                         double scale) {
#if HEADLAB_HAVE_SDPA
  if (q.is_cuda())
    return at::scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                            c10::nullopt, 0.0, /*is_causal=*/true, scale)
        .transpose(1, 2);
#endif
  const int64_t T = q.size(1);
  torch::Tensor s = torch::matmul(q.transpose(1, 2), k.transpose(1, 2).transpose(-2, -1)) * scale;
  torch::Tensor future = torch::ones({T, T}, torch::dtype(torch::kBool).device(q.device())).triu(1);
  torch::Tensor p = torch::softmax(s.masked_fill(future, -INFINITY), -1);
  return torch::matmul(p.to(v.scalar_type()), v.transpose(1, 2)).transpose(1, 2);
}

// The CPU test stand-in of the fused kernels: per head, the dense reference's masks (or the
// compact pattern of a fixed head). q, k, v: [B, T, n, d] (grouped: k, v hold the groups).
torch::Tensor KernelStandIn(const HybridAttentionImpl& layer, const PlanSegment& seg,
                            const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            bool grouped, double scale) {
  const int64_t T = q.size(1);
  const int64_t group = grouped ? layer.heads() / k.size(2) : 1;
  std::vector<torch::Tensor> outs;
  for (size_t i = 0; i < seg.heads.size(); ++i) {
    const int64_t h = seg.heads[i];
    const HeadState& s = layer.head_states()[size_t(h)];
    const int64_t kv = grouped ? h / group : int64_t(i);
    torch::Tensor vi = v.select(2, kv);  // [B, T, d]
    if (s.mode == HeadMode::kPruned) {
      outs.push_back(torch::zeros_like(vi));
      continue;
    }
    torch::Tensor p;
    if (s.mode == HeadMode::kFixed) {
      p = CompactPattern(layer.fixed_alpha[h], layer.fixed_rho[h], layer.fixed_log_z[h], T);
    } else {
      torch::Tensor scores =
          torch::matmul(q.select(2, int64_t(i)), k.select(2, kv).transpose(-2, -1)) * scale;
      p = torch::softmax(scores.masked_fill(AllowedKeys(s, T, q.device()).logical_not(), -INFINITY),
                         -1);
    }
    outs.push_back(torch::matmul(p.to(vi.scalar_type()), vi));
  }
  return torch::stack(outs, 2);
}

// The fused kernels over one segment's heads (their specs in order; fixed heads read their
// prior rows by original number). Records the kernels' implementations in *path as
// "<forward>/<backward>", with "@d<n>" when they ran a padded head size n
// (kernels/torch/hybrid_attention_op.h KernelPaths).
torch::Tensor RunKernel(const HybridAttentionImpl& layer, const PlanSegment& seg,
                        const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        bool grouped, double scale, std::string* path) {
#if HEADLAB_TORCH_CUDA
  if (q.is_cuda()) {
    kernels::HybridHeads heads;
    for (int64_t h : seg.heads) {
      const HeadState& s = layer.head_states()[size_t(h)];
      heads.specs.push_back(KernelHeadSpec(s));
      heads.prior_rows.push_back(h);
      if (s.mode == HeadMode::kFixed) {
        heads.alpha = layer.fixed_alpha;
        heads.rho = layer.fixed_rho;
        heads.log_z = layer.fixed_log_z;
      }
    }
    kernels::KernelPaths paths;
    torch::Tensor o = kernels::HybridAttention(q, k, v, heads, scale, &paths);
    *path = std::string(paths.forward) + "/" + paths.backward;
    if (paths.head_dim != q.size(3)) *path += "@d" + std::to_string(paths.head_dim);
    return o;
  }
#endif
  *path = "cpu_stand_in";
  return KernelStandIn(layer, seg, q, k, v, grouped, scale);
}

// A kFlashWindow segment's heads (q, k, v [B, T, n, d]) through FlashAttention-2 in the
// activations' dtype `dt`; the CPU test stand-in computes the same with the heads' masks.
torch::Tensor RunFlashWindow(const HybridAttentionImpl& layer, const PlanSegment& seg,
                             const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             torch::ScalarType dt, double scale) {
#if HEADLAB_HAVE_FLASH_WINDOW
  if (q.is_cuda()) {
    auto in = [&](const torch::Tensor& t) { return t.scalar_type() == dt ? t : t.to(dt); };
    return FlashWindowCuda(in(q), in(k), in(v), seg.window, scale);
  }
#endif
  (void)dt;
  return KernelStandIn(layer, seg, q, k, v, false, scale);
}

// Fixed heads as a GEMM with their cached causal patterns: O = P V and dV = P^T dO (SAF
// §3.3), per head and over the batch at once (V of a head laid out [T, B * d]). The rows are
// split in two halves so that the zero upper-right quarter of P is never multiplied.
// Row (and key) blocks of the fixed heads' GEMMs: P is lower triangular, so row block k of
// K reads keys [0, (k + 1) T / K) only, (K + 1) / 2K of the square (5/8 at K = 4, where
// two blocks did 3/4), in K batched GEMMs each way.
constexpr int64_t kFixedGemmBlocks = 4;

// Returns the k-th of kFixedGemmBlocks + 1 block boundaries of [0, T].
int64_t FixedBlockEdge(int64_t k, int64_t T) { return k * T / kFixedGemmBlocks; }

class FixedPatternMix : public torch::autograd::Function<FixedPatternMix> {
 public:
  // v: [B, T, n, d]; p: [n, >= T, >= T] in v's dtype, no gradient. Returns [B, T, n, d].
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor v,
                               torch::Tensor p) {
    const int64_t B = v.size(0), T = v.size(1), n = v.size(2), d = v.size(3);
    torch::Tensor pt = p.narrow(1, 0, T).narrow(2, 0, T);
    torch::Tensor u = v.permute({2, 1, 0, 3}).contiguous().view({n, T, B * d});
    torch::Tensor o = torch::empty_like(u);
    for (int64_t k = 0; k < kFixedGemmBlocks; ++k) {
      const int64_t r0 = FixedBlockEdge(k, T), r1 = FixedBlockEdge(k + 1, T);
      if (r1 == r0) continue;
      torch::Tensor rows = o.narrow(1, r0, r1 - r0);
      at::bmm_out(rows, pt.narrow(1, r0, r1 - r0).narrow(2, 0, r1), u.narrow(1, 0, r1));
    }
    ctx->save_for_backward({pt});
    return o.view({n, T, B, d}).permute({2, 1, 0, 3});
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::Tensor pt = ctx->get_saved_variables()[0];
    const torch::Tensor& g_o = grads[0];  // [B, T, n, d]
    const int64_t B = g_o.size(0), T = g_o.size(1), n = g_o.size(2), d = g_o.size(3);
    torch::Tensor g = g_o.permute({2, 1, 0, 3}).contiguous().view({n, T, B * d});
    torch::Tensor du = torch::empty_like(g);
    // Keys of block k are seen by the rows from the block's start on only.
    for (int64_t k = 0; k < kFixedGemmBlocks; ++k) {
      const int64_t c0 = FixedBlockEdge(k, T), c1 = FixedBlockEdge(k + 1, T);
      if (c1 == c0) continue;
      torch::Tensor keys = du.narrow(1, c0, c1 - c0);
      at::bmm_out(keys, pt.narrow(1, c0, T - c0).narrow(2, c0, c1 - c0).transpose(1, 2),
                  g.narrow(1, c0, T - c0));
    }
    return {du.view({n, T, B, d}).permute({2, 1, 0, 3}), torch::Tensor()};
  }
};

// The key the fixed patterns are cached under: the heads, the length, the dtype and the
// identity and version of every buffer they are built from (a checkpoint restore or
// SetFixed* changes a version).
std::string PatternKey(const HybridAttentionImpl& layer, const PlanSegment& seg, int64_t T,
                       torch::ScalarType dtype) {
  std::ostringstream k;
  for (int64_t h : seg.heads) k << h << ',';
  k << '|' << T << '|' << int(dtype);
  for (const torch::Tensor* t :
       {&layer.fixed_alpha, &layer.fixed_rho, &layer.fixed_log_z, &layer.fixed_dense})
    if (t->defined()) k << '|' << t->data_ptr() << ':' << t->_version();
  return k.str();
}

// Returns the causal patterns of the segment's fixed heads, [n, T, T] in `dtype`, from the
// layer's cache when still valid: SAF eq. 3 for compact heads, the stored P for dense ones.
torch::Tensor FixedPatterns(HybridAttentionImpl& layer, FastPathState& st, const PlanSegment& seg,
                            int64_t T, torch::ScalarType dtype) {
  const std::string key = PatternKey(layer, seg, T, dtype);
  if (key == st.pattern_key && st.patterns.defined()) return st.patterns;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> ps;
  for (int64_t h : seg.heads) {
    const HeadState& s = layer.head_states()[size_t(h)];
    torch::Tensor p =
        s.dense ? layer.fixed_dense[h].narrow(0, 0, T).narrow(1, 0, T)
                : CompactPattern(layer.fixed_alpha[h], layer.fixed_rho[h], layer.fixed_log_z[h], T);
    ps.push_back(p.to(dtype));
  }
  pattern_cache_bytes.fetch_sub(st.pattern_bytes);
  st.patterns = torch::stack(ps);
  st.pattern_bytes = st.patterns.numel() * ElementBytes(dtype);
  pattern_cache_bytes.fetch_add(st.pattern_bytes);
  st.pattern_key = key;
  return st.patterns;
}

FastPathState& StateOf(HybridAttentionImpl& layer) {
  if (!layer.fast_state) layer.fast_state = std::make_shared<FastPathState>();
  return *layer.fast_state;
}

// The weight rows (dim 0) or columns (dim 1) of the head blocks `idx` (a device tensor).
torch::Tensor Blocks(const torch::Tensor& w, int64_t dim, const torch::Tensor& idx, int64_t d) {
  const int64_t n = w.size(dim) / d;
  if (dim == 0) return w.view({n, d, w.size(1)}).index_select(0, idx).reshape({-1, w.size(1)});
  return w.view({w.size(0), n, d}).index_select(1, idx).reshape({w.size(0), -1});
}

// Returns the plan with its index lists uploaded to `device`.
DevicePlan Upload(AttentionPlan plan, const torch::Device& device) {
  // No wait for the device: the first forward after a change of head states (AAH's control
  // updates) plans every layer, and a wait in each would stall the queue each time.
  auto up = [&](const std::vector<int64_t>& v) { return IndexTensor(v, device); };
  DevicePlan dp;
  dp.q_idx = up(plan.q_blocks);
  dp.k_idx = up(plan.k_blocks);
  dp.v_idx = up(plan.v_blocks);
  dp.o_idx = up(plan.o_blocks);
  dp.out_idx = up(plan.output_heads);
  dp.plan = std::move(plan);
  return dp;
}

// The compact fixed heads (ascending: the order PlanAttention gives a kFixedConv segment).
PlanSegment CompactFixedHeads(const HybridAttentionImpl& layer) {
  PlanSegment seg;
  seg.kind = SegmentKind::kFixedConv;
  for (int64_t h = 0; h < layer.heads(); ++h) {
    const HeadState& s = layer.head_states()[size_t(h)];
    if (s.mode == HeadMode::kFixed && !s.dense) seg.heads.push_back(h);
  }
  return seg;
}

// Returns true iff the layer's compact fixed heads may take the convolution at length T for
// activations of `dtype` (fixed_conv.h: the FFT reaches the dtype's tolerance), making
// their factors (cached in st.conv under the patterns' key).
bool ConvFactors(HybridAttentionImpl& layer, FastPathState& st, int64_t T,
                 torch::ScalarType dtype) {
  const PlanSegment seg = CompactFixedHeads(layer);
  if (seg.heads.empty()) return false;
  const std::string key = PatternKey(layer, seg, T, dtype);
  if (key == st.conv_key) return st.conv_ok;
  torch::Tensor idx = IndexTensor(seg.heads, layer.fixed_alpha.device());
  // Relative output accuracy asked of the FFT: well below each dtype's own rounding.
  const double tolerance = dtype == torch::kFloat ? 1e-6 : 1e-4;
  std::string why;
  st.conv = FixedConvFactors();
  st.conv_ok = MakeFixedConvFactors(
      layer.fixed_alpha.index_select(0, idx), layer.fixed_rho.index_select(0, idx),
      layer.fixed_log_z.index_select(0, idx), T, tolerance, &st.conv, &why);
  if (!st.conv_ok) LogInfo("attention: fixed heads keep the GEMM or the kernels: " + why);
  st.conv_key = key;
  return st.conv_ok;
}

// Drops the layer's fixed-pattern cache (a measured choice that does not use it).
void ReleasePatterns(FastPathState& st) {
  pattern_cache_bytes.fetch_sub(st.pattern_bytes);
  st.pattern_bytes = 0;
  st.patterns = torch::Tensor();
  st.pattern_key.clear();
}

// The timer of the measured choice for inputs like x: the test timer when set; on CUDA,
// CUDA events over warmed iterations; else none (the static plan is used).
PlanTimer TimerFor(const torch::Tensor& x) {
  {
    std::lock_guard<std::mutex> lock(timer_mutex);
    if (test_timer) return test_timer;
  }
#if HEADLAB_TORCH_CUDA
  if (x.is_cuda()) {
    return [](const std::string&, const std::function<void()>& run) {
      constexpr int kWarmup = 1, kTimed = 3;  // per repetition (MeasureChoice repeats)
      for (int i = 0; i < kWarmup; ++i) run();
      at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
      const auto stream = c10::cuda::getCurrentCUDAStream();
      start.record(stream);
      for (int i = 0; i < kTimed; ++i) run();
      stop.record(stream);
      stop.synchronize();
      return double(start.elapsed_time(stop)) / kTimed;
    };
  }
#endif
  (void)x;
  return PlanTimer();
}

// "B=8 T=4096 bf16 fwd+bwd": the shape part of a measured choice's key.
std::string ShapeKey(const torch::Tensor& x, bool backward) {
  std::ostringstream k;
  k << "B=" << x.size(0) << " T=" << x.size(1) << ' ' << c10::toString(ActivationDtype(x))
    << (backward ? " fwd+bwd" : " fwd");
  return k.str();
}

}  // namespace

kernels::HeadSpec KernelHeadSpec(const HeadState& s) {
  kernels::HeadSpec spec;
  switch (s.mode) {
    case HeadMode::kOrdinary:
      spec.state = kernels::HeadState::kOrdinary;
      break;
    case HeadMode::kFixed:
      spec.state = kernels::HeadState::kFixed;
      break;
    case HeadMode::kStreaming:
      spec.state = kernels::HeadState::kStreaming;
      break;
    case HeadMode::kLocal:
      spec.state = kernels::HeadState::kLocal;
      break;
    case HeadMode::kPruned:
      spec.state = kernels::HeadState::kPruned;
      break;
  }
  spec.window = static_cast<int32_t>(s.window);
  spec.sink = static_cast<int32_t>(s.sink);
  spec.recent = static_cast<int32_t>(s.recent);
  return spec;
}

FastPathState::~FastPathState() { pattern_cache_bytes.fetch_sub(pattern_bytes); }

bool ParseAttentionMode(const std::string& s, AttentionMode* mode) {
  StatusOr<int> i =
      ParseNameIndex(kAttentionModeNames, std::size(kAttentionModeNames), s, "train.attention");
  if (!i.ok()) return false;
  *mode = AttentionMode(*i);
  return true;
}

const char* AttentionModeName(AttentionMode mode) { return kAttentionModeNames[int(mode)]; }

void SetAttentionMode(AttentionMode mode) { attention_mode.store(int(mode)); }
AttentionMode GetAttentionMode() { return AttentionMode(attention_mode.load()); }

bool FusedAttentionCompiled() {
#if HEADLAB_TORCH_CUDA
  return true;
#else
  return false;
#endif
}

std::string KernelInputUnsupported(const HybridAttentionImpl& layer, const torch::Tensor& x) {
  const auto dt = x.scalar_type();
  const int64_t d = layer.head_dim();
  if (GetAttentionMode() == AttentionMode::kDense) return "train.attention = dense";
  if (dt != torch::kFloat && dt != torch::kBFloat16 && dt != torch::kHalf)
    return std::string("dtype ") + c10::toString(dt) + " unsupported";
  if (d != 64 && d != 96 && d != 128)
    return "head_dim " + std::to_string(d) + " unsupported (64, 96, 128)";
  if (layer.heads() > kernels::kMaxHeads)
    return "more than " + std::to_string(kernels::kMaxHeads) + " heads";
  if (x.size(0) * layer.heads() * x.size(1) * d >= (int64_t(1) << 31)) return "B*H*T*d >= 2^31";
  return "";
}

std::string FusedAttentionUnsupported(HybridAttentionImpl& layer, const torch::Tensor& x) {
  const bool testing = !x.is_cuda() && cpu_testing.load(std::memory_order_relaxed);
  if (!x.is_cuda() && !testing) return "input not on CUDA";
  const AttentionMode mode = GetAttentionMode();
  FastPathState& st = StateOf(layer);
  std::string why = KernelInputUnsupported(layer, x);
  if (why.empty() && (layer.fixed_alpha.scalar_type() != torch::kFloat ||
                      layer.fixed_alpha.device() != x.device()))
    why = "fixed-pattern buffers are not fp32 on the input's device";
  if (why.empty()) {
    PlanOptions o;
    o.sdpa = SdpaAvailable(x);
    o.kernel = KernelAvailable(x);
    o.flash_window = FlashWindowAvailable(x);
    o.fused_only = mode == AttentionMode::kFused;
    o.trainable_fixed = layer.any_fixed_trainable();
    const int64_t T = x.size(1);
    const int64_t want = FixedHeadCount(layer) * T * T * ElementBytes(ActivationDtype(x));
    o.fixed_gemm = pattern_cache_bytes.load() - st.pattern_bytes + want <= kPatternCacheBudget;
    // train.attention = auto on a device that can be timed: every exact plan is a
    // candidate, and FusedAttentionForward measures them (docs/DESIGN.md).
    const bool measured = mode == AttentionMode::kAuto && TimerFor(x);
    o.fixed_conv = measured && !o.trainable_fixed && ConvFactors(layer, st, T, ActivationDtype(x));
    const std::string key = PlanKey(layer, o) + (measured ? "|measured" : "");
    if (key != st.plan_key || (!st.plans.empty() && st.plans[0].q_idx.device() != x.device())) {
      std::vector<AttentionPlan> plans;
      if (measured) {
        plans = CandidatePlans(layer.head_states(), layer.kv_heads(), layer.kept_heads(),
                               layer.kept_kv_heads(), o);
      } else {
        plans.push_back(PlanAttention(layer.head_states(), layer.kv_heads(), layer.kept_heads(),
                                      layer.kept_kv_heads(), o));
      }
      st.plans.clear();
      for (AttentionPlan& p : plans) st.plans.push_back(Upload(std::move(p), x.device()));
      st.active = 0;
      st.plan_key = key;
      // Choices are keyed by the candidates' labels, not the exact head states: a change of
      // windows that leaves the same forms competing (AAH) is not re-timed.
      st.candidates_key.clear();
      for (const DevicePlan& dp : st.plans) st.candidates_key += dp.plan.Label() + ";";
      st.label = st.plans[0].plan.Label();
    }
    why = st.plans[0].plan.dense_reason;
  }
  if (!why.empty()) {
    st.label = "dense_reference (" + why + ")";
    if (mode != AttentionMode::kDense) NoteFallback(why);
  }
  return why;
}

namespace {

// Returns the first position in `blocks` of each of 0, 1, ..., n - 1, or {} when one of
// them is missing.
std::vector<int64_t> FirstPositions(const std::vector<int64_t>& blocks, int64_t n) {
  std::vector<int64_t> at(size_t(n), -1);
  for (size_t i = blocks.size(); i-- > 0;)
    if (blocks[i] >= 0 && blocks[i] < n) at[size_t(blocks[i])] = int64_t(i);
  for (int64_t i : at)
    if (i < 0) return {};
  return at;
}

// The layer's forward as `dp` says; *label gets its LayerPathLabel, and *taps (when given)
// what an observer may read (ForwardTaps) where the plan projects and outputs every head.
torch::Tensor RunPlan(HybridAttentionImpl& layer, FastPathState& st, const DevicePlan& dp,
                      const torch::Tensor& x,
                      const std::function<torch::Tensor(const torch::Tensor&)>& rotate,
                      std::string* label, ForwardTaps* taps = nullptr) {
  const AttentionPlan& plan = dp.plan;
  const int64_t B = x.size(0), T = x.size(1), d = layer.head_dim();
  const double scale = 1.0 / std::sqrt(double(d));
  *label = plan.Label();
  if (plan.output_heads.empty()) return layer.EmptyLayerOutput(x);  // every head pruned

  // One projection: [Q blocks | K blocks | V blocks], only the rows the heads use (with
  // their biases, where an imported architecture has them).
  const torch::Tensor& wq = layer.q_proj->weight;
  const torch::Tensor& wk = layer.k_proj->weight;
  const torch::Tensor& wv = layer.v_proj->weight;
  const bool biased = layer.q_proj->bias.defined();
  const int64_t nq = int64_t(plan.q_blocks.size()), nk = int64_t(plan.k_blocks.size());
  const int64_t nv = int64_t(plan.v_blocks.size());
  std::vector<torch::Tensor> parts, biases;
  if (plan.AllRows(wq.size(0) / d, wk.size(0) / d)) {
    parts = {wq, wk, wv};
    if (biased) biases = {layer.q_proj->bias, layer.k_proj->bias, layer.v_proj->bias};
  } else {
    auto add = [&](const torch::nn::Linear& proj, const torch::Tensor& idx) {
      parts.push_back(Blocks(proj->weight, 0, idx, d));
      if (biased) biases.push_back(Blocks(proj->bias.view({-1, 1}), 0, idx, d).view({-1}));
    };
    if (nq > 0) add(layer.q_proj, dp.q_idx);
    if (nk > 0) add(layer.k_proj, dp.k_idx);
    add(layer.v_proj, dp.v_idx);
  }
  torch::Tensor y = MarkProjection(x, [&](const torch::Tensor& in) {
    return F::linear(in, torch::cat(parts, 0), biased ? torch::cat(biases, 0) : torch::Tensor());
  });
  // The taps: every head's rows, put back in head order (the packed order is the plan's).
  const int64_t H = layer.heads(), kv = layer.kv_heads();
  std::vector<int64_t> q_at, k_at, v_at, o_at;
  if (taps != nullptr && wq.size(0) == H * d && wk.size(0) == kv * d) {
    q_at = FirstPositions(plan.q_blocks, H);
    k_at = FirstPositions(plan.k_blocks, kv);
    v_at = FirstPositions(plan.v_blocks, kv);
    o_at = FirstPositions(plan.output_heads, H);
  }
  if (q_at.empty() || k_at.empty() || v_at.empty() || o_at.empty()) taps = nullptr;
  if (taps != nullptr) {
    const torch::Tensor rows = y.detach();
    auto heads = [&](int64_t offset, int64_t n, const std::vector<int64_t>& at) {
      return rows.narrow(2, offset * d, n * d)
          .view({B, T, n, d})
          .index_select(2, IndexTensor(at, y.device()));
    };
    taps->q = heads(0, nq, q_at);
    taps->k = heads(nq, nk, k_at);
    taps->v = heads(nq + nk, nv, v_at);
  }
  torch::Tensor q_all, k_all;  // [B, T, nq, d], [B, T, nk, d]
  if (nq > 0) {
    torch::Tensor qk = y.narrow(2, 0, (nq + nk) * d).view({B, T, nq + nk, d});
    if (layer.q_norm.defined())  // Qwen 3: per-head RMSNorm before the position encoding
      qk = torch::cat({layer.NormalizeHeads(qk.narrow(2, 0, nq), layer.q_norm),
                       layer.NormalizeHeads(qk.narrow(2, nq, nk), layer.k_norm)},
                      2);
    if (rotate) qk = rotate(qk.transpose(1, 2)).transpose(1, 2);
    q_all = qk.narrow(2, 0, nq);
    k_all = qk.narrow(2, nq, nk);
  }
  torch::Tensor v_all = y.narrow(2, (nq + nk) * d, nv * d).view({B, T, nv, d});

  std::vector<torch::Tensor> outs;
  std::string kernel_path;
  for (const PlanSegment& seg : plan.segments) {
    const int64_t n = int64_t(seg.heads.size());
    switch (seg.kind) {
      case SegmentKind::kSdpa:
        outs.push_back(SdpaCausal(q_all.narrow(2, seg.qk_offset, n),
                                  k_all.narrow(2, seg.qk_offset, n),
                                  v_all.narrow(2, seg.v_offset, n), scale));
        break;
      case SegmentKind::kFlashWindow:
        outs.push_back(RunFlashWindow(layer, seg, q_all.narrow(2, seg.qk_offset, n),
                                      k_all.narrow(2, seg.qk_offset, n),
                                      v_all.narrow(2, seg.v_offset, n), ActivationDtype(x), scale));
        break;
      case SegmentKind::kKernel:
        if (plan.grouped) {
          outs.push_back(RunKernel(layer, seg, q_all, k_all, v_all, true, scale, &kernel_path));
        } else {
          outs.push_back(RunKernel(layer, seg, q_all.narrow(2, seg.qk_offset, n),
                                   k_all.narrow(2, seg.qk_offset, n),
                                   v_all.narrow(2, seg.v_offset, n), false, scale, &kernel_path));
        }
        break;
      case SegmentKind::kFixedGemm: {
        torch::Tensor v = v_all.narrow(2, seg.v_offset, n);
        outs.push_back(
            FixedPatternMix::apply(v, FixedPatterns(layer, st, seg, T, v.scalar_type())));
        break;
      }
      case SegmentKind::kFixedConv: {
        TORCH_CHECK(st.conv_ok && st.conv.T == T && st.conv.a.size(0) == n,
                    "attention: convolution factors out of date for this plan");
        outs.push_back(FixedConvMix(v_all.narrow(2, seg.v_offset, n), st.conv));
        break;
      }
      case SegmentKind::kFixedKernel: {
        // Fixed heads read no Q or K (kernels/hybrid_attention.h): V stands in for both, and
        // the exact-zero gradients the kernels return for them add nothing to V's.
        torch::Tensor v = v_all.narrow(2, seg.v_offset, n);
        outs.push_back(RunKernel(layer, seg, v, v, v, false, scale, &kernel_path));
        break;
      }
    }
  }
  if (!kernel_path.empty()) *label += " kernel=" + kernel_path;

  const int64_t no = int64_t(plan.output_heads.size());
  torch::Tensor o = outs.size() == 1 ? outs[0] : torch::cat(outs, 2);  // [B, T, no, d]
  if (taps != nullptr) taps->o = o.detach().index_select(2, IndexTensor(o_at, o.device()));
  if (layer.head_gate.defined())
    o = o * layer.head_gate.index_select(1, dp.out_idx).view({B, 1, no, 1}).to(o.scalar_type());
  const torch::Tensor& wo = layer.o_proj->weight;
  torch::Tensor wo_used = plan.AllColumns(wo.size(1) / d) ? wo : Blocks(wo, 1, dp.o_idx, d);
  return MarkProjection(o.reshape({B, T, no * d}), [&](const torch::Tensor& in) {
    return F::linear(in, wo_used, layer.o_proj->bias);
  });
}

// Repetitions of each candidate's timing, taken round-robin so that a slow spell of the
// device (clocks, another process) falls on every candidate alike; the choice reads their
// medians (ChoosePlan).
constexpr int kPlanRepetitions = 5;

// Times every candidate plan of the layer on x (forward, and backward when `backward`),
// returns the chosen one's index (ChoosePlan) and records the choice under `key`. The
// gradients go to x and the parameters through autograd::grad: nothing accumulates into .grad.
size_t MeasureChoice(HybridAttentionImpl& layer, FastPathState& st, const torch::Tensor& x,
                     const std::function<torch::Tensor(const torch::Tensor&)>& rotate,
                     bool backward, const std::string& key, const PlanTimer& timer) {
  torch::Tensor xm = x.detach().requires_grad_(backward);
  std::vector<torch::Tensor> inputs = {xm};
  if (backward)
    for (const torch::Tensor& p : layer.parameters())
      if (p.requires_grad()) inputs.push_back(p);
  torch::Tensor dy = torch::ones_like(x);
  PlanChoice choice;
  choice.shape = ShapeKey(x, backward);
  for (const DevicePlan& dp : st.plans) choice.candidates.push_back({dp.plan.Label(), 0, {}});
  for (int rep = 0; rep < kPlanRepetitions; ++rep) {
    for (size_t i = 0; i < st.plans.size(); ++i) {
      const DevicePlan& dp = st.plans[i];
      std::string label;
      auto run = [&] {
        torch::Tensor y = RunPlan(layer, st, dp, xm, rotate, &label);
        if (backward && y.requires_grad())
          torch::autograd::grad({y}, inputs, {dy}, /*retain_graph=*/false, /*create_graph=*/false,
                                /*allow_unused=*/true);
      };
      choice.candidates[i].samples_ms.push_back(timer(dp.plan.Label(), run));
    }
  }
  for (PlanTiming& t : choice.candidates) t.ms = MedianMs(t.samples_ms);
  choice.chosen = ChoosePlan(choice.candidates);
  LogInfo("attention: measured choice " + PlanChoiceSummary(choice));
  st.choices[key] = choice;
  st.chosen[key] = choice.chosen;
  bool gemm = false;
  for (const PlanSegment& seg : st.plans[choice.chosen].plan.segments)
    gemm = gemm || seg.kind == SegmentKind::kFixedGemm;
  if (!gemm) ReleasePatterns(st);
  return choice.chosen;
}

}  // namespace

torch::Tensor FusedAttentionForward(
    HybridAttentionImpl& layer, const torch::Tensor& x,
    const std::function<torch::Tensor(const torch::Tensor&)>& rotate, ForwardTaps* taps) {
  TORCH_CHECK(x.is_cuda() ? FusedAttentionCompiled() || HEADLAB_HAVE_SDPA
                          : cpu_testing.load(std::memory_order_relaxed),
              "attention: this build has no fast path for ", x.device().str(), " inputs");
  FastPathState& st = StateOf(layer);
  TORCH_CHECK(
      !st.plans.empty() && st.plans[0].plan.dense_reason.empty(),
      "attention: FusedAttentionForward without a plan (call FusedAttentionUnsupported first)");
  if (st.plans.size() > 1) {  // train.attention = auto: the measured choice for this shape
    bool backward = false;
    if (torch::GradMode::is_enabled()) {
      backward = x.requires_grad();
      for (const torch::Tensor& p : layer.parameters()) backward = backward || p.requires_grad();
    }
    const std::string key = st.candidates_key + "|" + ShapeKey(x, backward) + "|" +
                            std::to_string(timer_generation.load());
    auto it = st.chosen.find(key);
    st.active = it != st.chosen.end()
                    ? it->second
                    : MeasureChoice(layer, st, x, rotate, backward, key, TimerFor(x));
  }
  fused_calls.fetch_add(1, std::memory_order_relaxed);
  std::string label;
  torch::Tensor y = RunPlan(layer, st, st.plans[st.active], x, rotate, &label, taps);
  if (label != st.label) st.label = label;
  return y;
}

double PrepareSdpaHeadCounts(const HybridAttentionImpl& layer, int64_t batch, int64_t seq,
                             torch::ScalarType dtype, const torch::Device& device, bool rotated) {
  if (!device.is_cuda() || GetAttentionMode() != AttentionMode::kAuto) return 0;
#if HEADLAB_HAVE_SDPA && HEADLAB_TORCH_CUDA
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t H = layer.heads(), d = layer.head_dim();
  const double scale = 1.0 / std::sqrt(double(d));
  const auto options = torch::dtype(dtype).device(device);
  for (int64_t n = 1; n <= H; ++n) {
    // RunPlan's layout: SDPA's heads first in [Q blocks | K blocks | V blocks] of one
    // projection output; rotated queries and keys are a fresh head-major tensor.
    torch::Tensor y = torch::randn({batch, seq, 3 * H * d}, options).requires_grad_();
    torch::Tensor qk = y.narrow(2, 0, 2 * H * d).view({batch, seq, 2 * H, d});
    if (rotated) qk = (qk.transpose(1, 2) * 1.0).transpose(1, 2);
    torch::Tensor v = y.narrow(2, 2 * H * d, H * d).view({batch, seq, H, d});
    torch::Tensor o = SdpaCausal(qk.narrow(2, 0, n), qk.narrow(2, H, n), v.narrow(2, 0, n), scale);
    torch::autograd::grad({o}, {y}, {torch::ones_like(o)});
  }
  SynchronizeDevice(device);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
#else
  (void)layer;
  (void)batch;
  (void)seq;
  (void)dtype;
  (void)rotated;
  return 0;
#endif
}

int64_t FusedAttentionCalls() { return fused_calls.load(std::memory_order_relaxed); }

std::string LayerPathLabel(const HybridAttentionImpl& layer) {
  return layer.fast_state ? layer.fast_state->label : "";
}

std::vector<PlanChoice> LayerPlanChoices(const HybridAttentionImpl& layer) {
  std::vector<PlanChoice> out;
  if (layer.fast_state)
    for (const auto& [key, choice] : layer.fast_state->choices) out.push_back(choice);
  return out;
}

void SetPlanTimerForTesting(PlanTimer timer) {
  std::lock_guard<std::mutex> lock(timer_mutex);
  test_timer = std::move(timer);
  timer_generation.fetch_add(1);
}

const char* AttentionBackendName(const torch::Device& device) {
  const bool fast = device.is_cuda() && (FusedAttentionCompiled() || HEADLAB_HAVE_SDPA);
  return fast && GetAttentionMode() != AttentionMode::kDense ? "fused_cuda" : "dense_reference";
}

void SetFastPathOnCpuForTesting(bool enabled) { cpu_testing.store(enabled); }

void SetFlashWindowOnCpuForTesting(bool enabled) { flash_window_cpu_testing.store(enabled); }

}  // namespace headlab
