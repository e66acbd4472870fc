// hybrid_attention_bench.cu: dev bench of the hybrid-head kernels (llm.c style).
//
// Versions compared in one process:
//   simt  - hybrid_attention_simt.cu: CUDA cores, fp32 math, 32x32 tiles (the naive baseline)
//   mma   - hybrid_attention_mma.cu / _mma_bwd.cu: mma.sync tensor cores, FlashAttention-2
//           online softmax, 64x64 tiles, cp.async double buffering (KernelPath::kTensorCore)
//   auto  - as dispatched: on sm_90 at d = 64 hybrid_attention_wgmma.cu / _wgmma_bwd.cu
//           (warpgroup MMA)
// Every configuration is validated before it is timed: at a reduced size (B=1) against the
// CPU reference (hybrid_attention_gpu_test's rule: <= 2x a bf16-rounding reference), and at
// the full bench size the tensor-core output against the SIMT output.
// Timing: CUDA events, warm-ups discarded, median over launches; ratios are taken per round
// with the two legs alternating (ABBA), reported as median [min, max] over rounds.
// The LibTorch SDPA (flash backend) baseline is measured in one process by
// scripts/gpu/bench_vs_sdpa.py, which loads these kernels through kernels/dev/c_api.cu.
//
// Build and run (device machine; scripts/gpu/build-and-test.sh does both):
//   cmake -S . -B /tmp/kb -G Ninja -DHEADLAB_ONLY=kernels && ninja -C /tmp/kb
//   /tmp/kb/kernels/hybrid_attention_bench [--quick | --profile]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>

#include "kernels/testing/attention_harness.cuh"

namespace headlab {
namespace kernels {
namespace {

using testing::Problem;
using testing::ProblemConfig;

bool quick = false;
int validation_failures = 0;

// Causal attention FLOPs of one head-set at full coverage: 2 matmuls x 2 flops x pairs x d.
double CausalFlops(int B, int H, int T, int d) {
  return 4.0 * B * H * d * (double(T) * (T + 1) / 2);
}

// Median milliseconds of `reps` launches of fn after `warm` warm-ups.
float TimeMs(const std::function<void()>& fn, int reps = 10, int warm = 3) {
  for (int i = 0; i < warm; ++i) fn();
  cudaEvent_t a, b;
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaEventCreate(&a));
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    HEADLAB_CUDA_CHECK_OR_EXIT(cudaEventRecord(a));
    fn();
    HEADLAB_CUDA_CHECK_OR_EXIT(cudaEventRecord(b));
    HEADLAB_CUDA_CHECK_OR_EXIT(cudaEventSynchronize(b));
    float t;
    HEADLAB_CUDA_CHECK_OR_EXIT(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaGetLastError());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void Must(KernelStatus st) {
  if (!st.ok()) {
    std::fprintf(stderr, "kernel refused: %s\n", st.message);
    std::exit(1);
  }
}

std::function<void()> Fwd(Problem& p, KernelPath path) {
  return [&p, path] { Must(HybridAttentionForward(p.Forward(path), nullptr)); };
}
std::function<void()> FwdBwd(Problem& p, KernelPath path) {
  return [&p, path] {
    Must(HybridAttentionForward(p.Forward(path), nullptr));
    Must(HybridAttentionBackward(p.Backward(path), nullptr));
  };
}

// Validates `c` at B = 1 (and T capped at 2048) against the CPU reference, forward and
// backward, on the auto path.
void ValidateSmall(ProblemConfig c, const char* name) {
  c.B = 1;
  c.T = std::min(c.T, 2048);
  for (HeadSpec& h : c.heads) {  // keep windows meaningful at the reduced length
    if (h.state == HeadState::kLocal) h.window = std::min(h.window, c.T);
  }
  Problem p(c);
  p.PoisonOutputs();
  Must(HybridAttentionForward(p.Forward(KernelPath::kAuto), nullptr));
  Must(HybridAttentionBackward(p.Backward(KernelPath::kAuto), nullptr));
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaDeviceSynchronize());
  std::vector<float> o, lse, dq, dk, dv, o_lp, lse_lp, dq_lp, dk_lp, dv_lp;
  ReferenceForward(p.Reference(), Rounding::kNone, &o, &lse);
  ReferenceForward(p.Reference(), Rounding::kBF16, &o_lp, &lse_lp);
  ReferenceBackward(p.Reference(), p.d_o().data(), Rounding::kNone, &dq, &dk, &dv);
  ReferenceBackward(p.Reference(), p.d_o().data(), Rounding::kBF16, &dq_lp, &dk_lp, &dv_lp);
  struct Item {
    const char* n;
    std::vector<float> got;
    const std::vector<float>* ref;
    const std::vector<float>* lp;
  };
  Item items[] = {{"o", p.O(), &o, &o_lp},
                  {"dq", p.DQ(), &dq, &dq_lp},
                  {"dk", p.DK(), &dk, &dk_lp},
                  {"dv", p.DV(), &dv, &dv_lp}};
  std::printf("validate %-28s (B=1 T=%d):", name, c.T);
  for (Item& it : items) {
    double err = RelativeL2(it.got.data(), it.ref->data(), it.got.size());
    double tol = 2 * RelativeL2(it.lp->data(), it.ref->data(), it.got.size());
    bool ok = err <= tol;
    validation_failures += !ok;
    std::printf(" %s %.1e/%.1e%s", it.n, err, tol, ok ? "" : " FAIL");
  }
  std::printf("\n");
}

// At full size: the tensor-core forward output (on `path`) against the SIMT one.
void ValidateFull(Problem& p, const char* name, KernelPath path = KernelPath::kAuto) {
  Must(HybridAttentionForward(p.Forward(KernelPath::kSimt), nullptr));
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaDeviceSynchronize());
  std::vector<float> simt = p.O();
  p.PoisonOutputs();
  Must(HybridAttentionForward(p.Forward(path), nullptr));
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaDeviceSynchronize());
  std::vector<float> mma = p.O();
  double err = RelativeL2(mma.data(), simt.data(), mma.size());
  bool ok = err < 1e-2;
  validation_failures += !ok;
  std::printf("validate %-28s full size: tensor cores vs simt forward rel L2 %.1e%s\n", name, err,
              ok ? "" : " FAIL");
}

struct Ratio {
  float a_ms, b_ms, median, lo, hi;
};

// Times A and B alternately (ABBA) over `rounds`; returns medians and the spread of B/A.
Ratio Compare(const std::function<void()>& a, const std::function<void()>& b, int rounds = 5) {
  std::vector<float> ta, tb, r;
  for (int i = 0; i < rounds; ++i) {
    float x, y;
    if (i % 2 == 0) {
      x = TimeMs(a);
      y = TimeMs(b);
    } else {
      y = TimeMs(b);
      x = TimeMs(a);
    }
    ta.push_back(x);
    tb.push_back(y);
    r.push_back(y / x);
  }
  auto med = [](std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return {med(ta), med(tb), med(r), *std::min_element(r.begin(), r.end()),
          *std::max_element(r.begin(), r.end())};
}

ProblemConfig Base(int T) {
  ProblemConfig c;
  c.B = 8;
  c.H = 12;
  c.G = 12;
  c.T = T;
  c.d = 64;
  c.dtype = DType::kBF16;
  c.heads.assign(c.H, HeadSpec{});
  return c;
}

// Window W whose causal coverage sum_q min(q+1, W) / (T(T+1)/2) is closest to c.
int WindowForCoverage(int T, double c) {
  double target = c * double(T) * (T + 1) / 2;
  int best = 1;
  for (int w = 1; w <= T; ++w) {
    if (double(w) * T - double(w) * (w - 1) / 2 <= target) best = w;
  }
  return best;
}

double Coverage(const ProblemConfig& c) {
  double kept = 0, full = double(c.T) * (c.T + 1) / 2 * c.H;
  for (const HeadSpec& h : c.heads) {
    for (int q = 0; q < c.T; ++q) {
      switch (h.state) {
        case HeadState::kLocal:
          kept += std::min(q + 1, h.window);
          break;
        case HeadState::kStreaming:
          kept += std::min(q + 1, h.sink + h.recent);
          break;
        case HeadState::kPruned:
          break;
        default:
          kept += q + 1;
      }
    }
  }
  return kept / full;
}

void Run() {
  const int T = quick ? 1024 : 4096;
  // 1. All heads ordinary: tensor cores vs the SIMT baseline, forward and forward+backward.
  ProblemConfig ord = Base(T);
  ValidateSmall(ord, "all ordinary");
  Problem p_ord(ord);
  ValidateFull(p_ord, "all ordinary");
  const double flops = CausalFlops(ord.B, ord.H, ord.T, ord.d);
  Ratio fwd = Compare(Fwd(p_ord, KernelPath::kSimt), Fwd(p_ord, KernelPath::kAuto), 3);
  std::printf(
      "all-ordinary fwd      simt %8.3f ms %6.1f TFLOP/s | auto %8.3f ms %6.1f TFLOP/s | auto/simt "
      "time %.3f [%.3f, %.3f]\n",
      fwd.a_ms, flops / fwd.a_ms * 1e-9, fwd.b_ms, flops / fwd.b_ms * 1e-9, fwd.median, fwd.lo,
      fwd.hi);
  const float ord_fb = TimeMs(FwdBwd(p_ord, KernelPath::kAuto));
  std::printf(
      "all-ordinary fwd+bwd  auto %8.3f ms %6.1f TFLOP/s (fwd+bwd counted as 3.5x fwd FLOPs)\n",
      ord_fb, 3.5 * flops / ord_fb * 1e-9);
  // The mma.sync kernels against the dispatched ones (wgmma on sm_90), same process,
  // ABBA rounds.
  ValidateFull(p_ord, "all ordinary, mma.sync", KernelPath::kTensorCore);
  const KernelPath mma = KernelPath::kTensorCore, now = KernelPath::kAuto;
  Ratio tf = Compare(Fwd(p_ord, mma), Fwd(p_ord, now));
  Ratio tb = Compare(FwdBwd(p_ord, mma), FwdBwd(p_ord, now));
  std::printf(
      "versions fwd      mma.sync %8.3f ms %6.1f TFLOP/s | auto %8.3f ms %6.1f TFLOP/s | auto/mma "
      "time %.3f [%.3f, %.3f]\n",
      tf.a_ms, flops / tf.a_ms * 1e-9, tf.b_ms, flops / tf.b_ms * 1e-9, tf.median, tf.lo, tf.hi);
  std::printf(
      "versions fwd+bwd  mma.sync %8.3f ms | auto %8.3f ms | auto/mma time %.3f [%.3f, %.3f]\n",
      tb.a_ms, tb.b_ms, tb.median, tb.lo, tb.hi);

  // 2. Fixed heads at 25% / 50%: forward+backward time over the all-ordinary time.
  for (int pct : {25, 50}) {
    ProblemConfig c = Base(T);
    for (int h = 0; h < c.H * pct / 100; ++h) c.heads[h].state = HeadState::kFixed;
    char name[64];
    std::snprintf(name, sizeof(name), "fixed %d%%", pct);
    ValidateSmall(c, name);
    Problem p(c);
    ValidateFull(p, name);
    Ratio r = Compare(FwdBwd(p_ord, KernelPath::kAuto), FwdBwd(p, KernelPath::kAuto));
    Ratio rf = Compare(Fwd(p_ord, KernelPath::kAuto), Fwd(p, KernelPath::kAuto));
    std::printf(
        "%-12s fwd+bwd %8.3f ms vs ordinary %8.3f ms: ratio %.3f [%.3f, %.3f] (target <= %.2f) | "
        "fwd ratio %.3f [%.3f, %.3f]\n",
        name, r.b_ms, r.a_ms, r.median, r.lo, r.hi, pct == 25 ? 0.85 : 0.70, rf.median, rf.lo,
        rf.hi);
  }

  // 3. Local windows at exact coverage c: time over full causal (target 1.15 c + 0.05).
  for (double cov : {0.2, 0.4, 0.6}) {
    for (int variant = 0; variant < 2; ++variant) {
      ProblemConfig c = Base(T);
      if (variant == 0) {  // every head local with the same window
        const int w = WindowForCoverage(T, cov);
        for (HeadSpec& h : c.heads) {
          h.state = HeadState::kLocal;
          h.window = w;
        }
      } else {  // an AAH-like assignment: a quarter of heads full, the rest local
        const int n_full = c.H / 4;
        const double rest = (cov * c.H - n_full) / (c.H - n_full);
        const int w = WindowForCoverage(T, std::max(rest, 0.01));
        for (int h = n_full; h < c.H; ++h) {
          c.heads[h].state = HeadState::kLocal;
          c.heads[h].window = w;
        }
      }
      const double exact = Coverage(c);
      char name[64];
      std::snprintf(name, sizeof(name), "local c=%.3f %s", exact, variant ? "mixed" : "uniform");
      ValidateSmall(c, name);
      Problem p(c);
      ValidateFull(p, name);
      Ratio rf = Compare(Fwd(p_ord, KernelPath::kAuto), Fwd(p, KernelPath::kAuto));
      Ratio rb = Compare(FwdBwd(p_ord, KernelPath::kAuto), FwdBwd(p, KernelPath::kAuto));
      std::printf(
          "%-28s fwd ratio %.3f [%.3f, %.3f] fwd+bwd ratio %.3f [%.3f, %.3f] (target <= %.3f)\n",
          name, rf.median, rf.lo, rf.hi, rb.median, rb.lo, rb.hi, 1.15 * exact + 0.05);
    }
  }

  // 4. Streaming (sink 128 + recent 256) at 50% of heads, T = 16384: forward over full.
  {
    const int Ts = quick ? 2048 : 16384;
    ProblemConfig full = Base(Ts), st = Base(Ts);
    for (int h = 0; h < st.H / 2; ++h) {
      st.heads[h].state = HeadState::kStreaming;
      st.heads[h].sink = 128;
      st.heads[h].recent = 256;
    }
    ValidateSmall(st, "streaming 50%");
    Problem pf(full), ps(st);
    ValidateFull(ps, "streaming 50%");
    Ratio r = Compare(Fwd(pf, KernelPath::kAuto), Fwd(ps, KernelPath::kAuto));
    std::printf(
        "streaming 50%% T=%d fwd %8.3f ms vs full %8.3f ms: ratio %.3f [%.3f, %.3f] (target <= "
        "0.55)\n",
        Ts, r.b_ms, r.a_ms, r.median, r.lo, r.hi);
  }
}

// --profile: two all-ordinary forwards and one forward+backward at the bench size, then one
// forward of all-local heads (W = 512), nothing else (for scripts/gpu/profile-kernels.sh).
void Profile() {
  Problem p(Base(4096));
  Fwd(p, KernelPath::kAuto)();
  Fwd(p, KernelPath::kAuto)();
  FwdBwd(p, KernelPath::kAuto)();
  ProblemConfig lc = Base(4096);
  for (HeadSpec& h : lc.heads) {
    h.state = HeadState::kLocal;
    h.window = 512;
  }
  Problem local(lc);
  Fwd(local, KernelPath::kAuto)();
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace kernels
}  // namespace headlab

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines survive a `timeout` kill into a pipe
  if (argc > 1 && std::strcmp(argv[1], "--profile") == 0) {
    headlab::kernels::Profile();
    return 0;
  }
  headlab::kernels::quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  cudaDeviceProp prop;
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs; bf16, B=8 H=12 d=64\n", prop.name, prop.multiProcessorCount);
  headlab::kernels::Run();
  if (headlab::kernels::validation_failures) {
    std::printf("VALIDATION FAILED (%d): timings above are not trustworthy\n",
                headlab::kernels::validation_failures);
    return 1;
  }
  return 0;
}
