#include "payload/exec/attention_cuda.h"

#include <limits>
#include <map>
#include <string>

#include "payload/exec/attention.h"
#include "payload/exec/model.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

// The fast path's own code (plan, packed projection with only the rows the heads use,
// fixed-pattern GEMM, output assembly, gradients) on the CPU, with dense stand-ins for SDPA
// and the fused kernels (SetFastPathOnCpuForTesting), against the dense reference layer.
// The CUDA backends themselves are tested on the device (kernels/torch/exec_fused_gpu_test.cc).
namespace headlab {
namespace {

double RelL2(const torch::Tensor& got, const torch::Tensor& want) {
  const double denom = want.norm().item<double>();
  const double diff = (got - want).norm().item<double>();
  return denom == 0 ? diff : diff / denom;
}

// Turns the CPU fast path on for one scope and restores the defaults after.
struct CpuFastPath {
  explicit CpuFastPath(AttentionMode mode) {
    SetFastPathOnCpuForTesting(true);
    SetAttentionMode(mode);
  }
  ~CpuFastPath() {
    SetFastPathOnCpuForTesting(false);
    SetAttentionMode(AttentionMode::kAuto);
  }
};

struct Result {
  torch::Tensor y;
  std::map<std::string, torch::Tensor> grads;  // undefined where none
  torch::Tensor gate_grad;
};

// Forward and backward of `layer` on x with a fixed output gradient.
Result Run(HybridAttention& layer, const torch::Tensor& x, const torch::Tensor& dy,
           const std::function<torch::Tensor(const torch::Tensor&)>& rotate = {}) {
  layer->zero_grad(/*set_to_none=*/true);
  if (layer->head_gate.defined()) layer->head_gate.mutable_grad() = torch::Tensor();
  Result r;
  r.y = layer->forward(x, rotate);
  (r.y * dy).sum().backward();
  for (const auto& p : layer->named_parameters())
    r.grads[p.key()] = p.value().grad().defined() ? p.value().grad().clone() : torch::Tensor();
  if (layer->head_gate.defined()) r.gate_grad = layer->head_gate.grad().clone();
  return r;
}

// The fast path (in `mode`) against the dense reference: outputs and every gradient.
void ExpectSameAsDense(HybridAttention& layer, const torch::Tensor& x, AttentionMode mode,
                       const std::string& want_label,
                       const std::function<torch::Tensor(const torch::Tensor&)>& rotate = {}) {
  torch::manual_seed(3);
  torch::Tensor dy = torch::randn({x.size(0), x.size(1), layer->o_proj->weight.size(0)});
  Result dense = Run(layer, x, dy, rotate);
  const int64_t calls = FusedAttentionCalls();
  Result fast;
  {
    CpuFastPath on(mode);
    fast = Run(layer, x, dy, rotate);
  }
  CHECK(FusedAttentionCalls() == calls + 1);
  CHECK(LayerPathLabel(*layer) == want_label);
  CHECK(RelL2(fast.y, dense.y) <= 1e-5);
  for (const auto& [name, want] : dense.grads) {
    INFO("gradient of " << name);
    const torch::Tensor& got = fast.grads[name];
    REQUIRE(got.defined() == want.defined());
    if (want.defined()) CHECK(RelL2(got, want) <= 1e-5);
  }
  if (dense.gate_grad.defined()) CHECK(RelL2(fast.gate_grad, dense.gate_grad) <= 1e-5);
}

// Installs a compact fixed pattern (SAF eq. 3) with random alpha, rho on head h.
void SetRandomCompact(HybridAttention& layer, int64_t h, int64_t context) {
  torch::Tensor alpha = torch::randn({context}) * 0.5;
  torch::Tensor rho = -0.1 * torch::arange(context, torch::kFloat) + torch::randn({context}) * 0.3;
  layer->SetFixedCompact(h, alpha, rho, CompactLogNormalizer(alpha, rho));
}

TEST_CASE("attention fast path: CPU layers take the dense reference unless testing, and say why") {
  HybridAttention layer(128, 2, 2, 16);  // head_dim 64
  torch::Tensor x = torch::randn({1, 8, 128});
  CHECK(FusedAttentionUnsupported(*layer, x) == "input not on CUDA");
  CHECK(std::string(AttentionBackendName(torch::Device(torch::kCPU))) == "dense_reference");
  SetAttentionMode(AttentionMode::kDense);
  CHECK(std::string(AttentionBackendName(torch::Device(torch::kCUDA, 0))) == "dense_reference");
  SetAttentionMode(AttentionMode::kAuto);
  const int64_t calls = FusedAttentionCalls();
  torch::Tensor y = layer->forward(x);  // the CPU path never counts as fast
  CHECK(y.sizes() == x.sizes());
  CHECK(FusedAttentionCalls() == calls);
  AttentionMode m;
  CHECK(ParseAttentionMode("fused", &m));
  CHECK(m == AttentionMode::kFused);
  CHECK_FALSE(ParseAttentionMode("flash", &m));
  for (AttentionMode each : {AttentionMode::kAuto, AttentionMode::kFused, AttentionMode::kDense}) {
    CHECK(ParseAttentionMode(AttentionModeName(each), &m));  // names round-trip
    CHECK(m == each);
  }
  CHECK(std::string(AttentionModeName(AttentionMode::kDense)) == "dense");
}

TEST_CASE("attention fast path: every head state in one layer matches the dense reference") {
  const int64_t T = 37;  // odd: the fixed-pattern GEMM's row split is uneven
  torch::manual_seed(1);
  HybridAttention layer(512, 8, 8, 48);  // head_dim 64, context > T
  layer->SetHeadState(1, {HeadMode::kLocal, 5});
  layer->SetHeadState(2, {HeadMode::kStreaming, 0, 3, 7});
  SetRandomCompact(layer, 3, 48);
  layer->SetHeadState(4, {HeadMode::kPruned});
  SetRandomCompact(layer, 6, 48);
  torch::Tensor dense_p = CompactPattern(torch::randn({48}), torch::randn({48}) * 0.1,
                                         torch::zeros({48}), 48);  // rows need not sum to 1
  layer->SetFixedDense(7, dense_p);
  torch::Tensor x = torch::randn({2, T, 512});

  // auto: ordinary heads 0 and 5 through SDPA, the windowed ones through the kernels, the
  // three fixed heads through the pattern GEMM; head 4 has no segment at all.
  ExpectSameAsDense(layer, x, AttentionMode::kAuto,
                    "sdpa[2] fused[2] fixed_gemm[3] kernel=cpu_stand_in");
  // Exact zeros where the fast path computes no rows: fixed heads' Q and K, the pruned
  // head's Q, K, V and output columns.
  {
    CpuFastPath on(AttentionMode::kAuto);
    layer->zero_grad(true);
    layer->forward(x).sum().backward();
  }
  auto rows = [](const torch::Tensor& g, int64_t h) {
    return g.narrow(0, h * 64, 64).abs().max().item<float>();
  };
  for (int64_t h : {3, 4, 6, 7}) {
    CHECK(rows(layer->q_proj->weight.grad(), h) == 0.f);
    CHECK(rows(layer->k_proj->weight.grad(), h) == 0.f);
  }
  CHECK(rows(layer->v_proj->weight.grad(), 4) == 0.f);
  CHECK(rows(layer->v_proj->weight.grad(), 3) > 0.f);
  CHECK(layer->o_proj->weight.grad().narrow(1, 4 * 64, 64).abs().max().item<float>() == 0.f);
}

TEST_CASE("attention fast path: AAH's local heads through FlashAttention-2, one call per window") {
  const int64_t T = 29;
  torch::manual_seed(4);
  HybridAttention layer(320, 5, 5, 32);  // head_dim 64
  // AAH §5.8 windows: heads 0 and 3 at W = 4, head 2 at W = 9, heads 1 and 4 pruned: two
  // FlashAttention-2 calls.
  layer->SetHeadState(0, {HeadMode::kLocal, 4});
  layer->SetHeadState(1, {HeadMode::kPruned});
  layer->SetHeadState(2, {HeadMode::kLocal, 9});
  layer->SetHeadState(3, {HeadMode::kLocal, 4});
  layer->SetHeadState(4, {HeadMode::kPruned});
  torch::Tensor x = torch::randn({2, T, 320});
  SetFlashWindowOnCpuForTesting(true);
  ExpectSameAsDense(layer, x, AttentionMode::kAuto, "flash_window[2] flash_window[1]");
  // Head 1 ordinary and head 4 streaming: four calls, so every head takes one launch of the
  // kernels (attention_plan.h kMaxAttentionCalls).
  layer->SetHeadState(1, {HeadMode::kOrdinary});
  layer->SetHeadState(4, {HeadMode::kStreaming, 0, 2, 5});
  ExpectSameAsDense(layer, x, AttentionMode::kAuto, "fused[5] kernel=cpu_stand_in");
  // train.attention = fused: the kernels take every head, FlashAttention none.
  ExpectSameAsDense(layer, x, AttentionMode::kFused, "fused[5] kernel=cpu_stand_in");
  SetFlashWindowOnCpuForTesting(false);
  ExpectSameAsDense(layer, x, AttentionMode::kAuto, "sdpa[1] fused[4] kernel=cpu_stand_in");
}

TEST_CASE("attention fast path: train.attention = fused sends every compact head to the kernels") {
  torch::manual_seed(2);
  HybridAttention layer(256, 4, 4, 32);
  layer->SetHeadState(0, {HeadMode::kLocal, 9});
  SetRandomCompact(layer, 2, 32);
  torch::Tensor x = torch::randn({3, 29, 256});
  ExpectSameAsDense(layer, x, AttentionMode::kFused, "fused[3] fixed_fused[1] kernel=cpu_stand_in");
  // A dense pattern cannot go to the kernels: the layer says so and runs the reference.
  layer->SetFixedDense(
      1, CompactPattern(torch::zeros({32}), torch::zeros({32}), torch::zeros({32}), 32));
  CpuFastPath on(AttentionMode::kFused);
  CHECK(FusedAttentionUnsupported(*layer, x).find("dense fixed pattern of head 1") !=
        std::string::npos);
}

TEST_CASE("attention fast path: grouped-query layers, RoPE, removed heads and head gates") {
  torch::manual_seed(4);
  auto rope = [](const torch::Tensor& t) { return RotaryEmbedding(t, RopeSpec{10000.0}); };
  SECTION("GQA: one kernel segment over every head") {
    HybridAttention layer(256, 4, 2, 32);
    layer->SetHeadState(1, {HeadMode::kStreaming, 0, 2, 5});
    SetRandomCompact(layer, 2, 32);
    ExpectSameAsDense(layer, torch::randn({2, 31, 256}), AttentionMode::kAuto,
                      "fused[4] kernel=cpu_stand_in", rope);
  }
  SECTION("MHA with RoPE and physically removed heads") {
    HybridAttention layer(256, 4, 4, 32);
    layer->RemoveHeads({1});
    SetRandomCompact(layer, 3, 32);
    ExpectSameAsDense(layer, torch::randn({2, 31, 256}), AttentionMode::kAuto,
                      "sdpa[2] fixed_gemm[1]", rope);
  }
  SECTION("head gates (gate-Taylor importance) get the same gradients") {
    HybridAttention layer(256, 4, 4, 32);
    layer->SetHeadState(0, {HeadMode::kPruned});
    layer->head_gate = torch::rand({2, 4}).requires_grad_(true);
    ExpectSameAsDense(layer, torch::randn({2, 17, 256}), AttentionMode::kAuto, "sdpa[3]");
  }
  SECTION(
      "imported architectures: projection biases and Qwen 3's q/k norms, head_dim != width / "
      "heads") {
    AttentionOptions o;
    o.head_dim = 64;
    o.qkv_bias = o.out_bias = o.qk_norm = true;
    HybridAttention layer(192, 4, 4, 32, o);  // 4 heads of 64 on a width of 192
    {
      torch::NoGradGuard no_grad;  // non-trivial biases and gains (they start at 0 and 1)
      for (torch::Tensor* t : {&layer->q_proj->bias, &layer->k_proj->bias, &layer->v_proj->bias,
                               &layer->o_proj->bias, &layer->q_norm, &layer->k_norm})
        t->add_(torch::randn(t->sizes()) * 0.5);
    }
    layer->SetHeadState(1, {HeadMode::kLocal, 6});
    SetRandomCompact(layer, 2, 32);
    layer->SetHeadState(3, {HeadMode::kPruned});
    ExpectSameAsDense(layer, torch::randn({2, 23, 192}), AttentionMode::kAuto,
                      "sdpa[1] fused[1] fixed_gemm[1] kernel=cpu_stand_in", rope);
  }
  SECTION("every head pruned: the layer adds nothing") {
    HybridAttention layer(128, 2, 2, 16);
    layer->SetHeadState(0, {HeadMode::kPruned});
    layer->SetHeadState(1, {HeadMode::kPruned});
    CpuFastPath on(AttentionMode::kAuto);
    torch::Tensor y = layer->forward(torch::randn({1, 9, 128}));
    CHECK(y.abs().max().item<float>() == 0.f);
    CHECK(LayerPathLabel(*layer) == "none (every head pruned)");
  }
}

// The taps an observer of the layer's forward gets (ForwardTaps), against the projections
// and a masked softmax per head computed here.
TEST_CASE("attention fast path: the taps give each head's projections and output in head order") {
  torch::manual_seed(6);
  auto rope = [](const torch::Tensor& t) { return RotaryEmbedding(t, RopeSpec{10000.0}); };
  auto tapped = [&](HybridAttention& layer, const torch::Tensor& x, bool fast) {
    ForwardTaps got;
    bool called = false;
    layer->observe_next_forward = [&](HybridAttentionImpl&, const torch::Tensor& in,
                                      const std::function<torch::Tensor(const torch::Tensor&)>&,
                                      const ForwardTaps& taps) {
      CHECK(torch::equal(in, x));
      got = taps;
      called = true;
    };
    if (fast) {
      CpuFastPath on(AttentionMode::kAuto);
      layer->forward(x, rope);
    } else {
      layer->forward(x, rope);
    }
    CHECK(called);
    CHECK(!layer->observe_next_forward);  // one-shot
    return got;
  };
  // Each head's output: softmax(q k^T / sqrt(d)) v over the keys its state allows.
  auto expected_output = [&](HybridAttention& layer, const torch::Tensor& x) {
    const int64_t B = x.size(0), T = x.size(1), H = layer->heads(), d = layer->head_dim();
    const int64_t kv = layer->kv_heads();
    torch::NoGradGuard no_grad;
    torch::Tensor q = rope(layer->q_proj(x).view({B, T, H, d}).transpose(1, 2));
    torch::Tensor k = rope(layer->k_proj(x).view({B, T, kv, d}).transpose(1, 2));
    torch::Tensor v = layer->v_proj(x).view({B, T, kv, d}).transpose(1, 2);
    std::vector<torch::Tensor> heads;
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / kv);
      torch::Tensor s =
          torch::matmul(q.select(1, h), k.select(1, g).transpose(-2, -1)) / std::sqrt(double(d));
      torch::Tensor allowed = AllowedKeys(layer->head_states()[size_t(h)], T, x.device());
      torch::Tensor p = torch::softmax(
          s.masked_fill(allowed.logical_not(), -std::numeric_limits<float>::infinity()), -1);
      heads.push_back(torch::matmul(p, v.select(1, g)));  // [B, T, d]
    }
    return torch::stack(heads, 2);  // [B, T, H, d]
  };
  // The fast path's taps on x against the layer's projections and expected_output.
  auto expect_taps = [&](HybridAttention& layer, const torch::Tensor& x) {
    const ForwardTaps taps = tapped(layer, x, true);
    REQUIRE(taps.o.defined());
    torch::NoGradGuard no_grad;
    const int64_t B = x.size(0), T = x.size(1), d = layer->head_dim();
    CHECK(RelL2(taps.q, layer->q_proj(x).view({B, T, layer->heads(), d})) <= 1e-6);
    CHECK(RelL2(taps.k, layer->k_proj(x).view({B, T, layer->kv_heads(), d})) <= 1e-6);
    CHECK(RelL2(taps.v, layer->v_proj(x).view({B, T, layer->kv_heads(), d})) <= 1e-6);
    CHECK(RelL2(taps.o, expected_output(layer, x)) <= 1e-5);
  };
  SECTION("MHA with mixed windows: the plan packs the heads out of order") {
    HybridAttention layer(256, 4, 4, 32);
    layer->SetHeadState(0, {HeadMode::kLocal, 5});
    layer->SetHeadState(2, {HeadMode::kLocal, 9});
    expect_taps(layer, torch::randn({2, 23, 256}));
  }
  SECTION("GQA: keys and values per kv head") {
    HybridAttention layer(256, 4, 2, 32);
    layer->SetHeadState(3, {HeadMode::kLocal, 4});
    expect_taps(layer, torch::randn({1, 19, 256}));
  }
  SECTION("no taps where the plan lacks a head's output, or on the dense reference") {
    HybridAttention layer(256, 4, 4, 32);
    CHECK(!tapped(layer, torch::randn({1, 9, 256}), false).q.defined());  // dense reference
    layer->SetHeadState(1, {HeadMode::kPruned});
    const ForwardTaps taps = tapped(layer, torch::randn({1, 9, 256}), true);
    CHECK(!taps.q.defined());
    CHECK(!taps.o.defined());
  }
}

TEST_CASE("attention fast path: trainable alpha/rho keep the dense reference, with the reason") {
  HybridAttention layer(128, 2, 2, 16);
  SetRandomCompact(layer, 1, 16);
  layer->MakeFixedTrainable(1);
  CpuFastPath on(AttentionMode::kAuto);
  CHECK(FusedAttentionUnsupported(*layer, torch::randn({1, 8, 128})).find("trainable alpha/rho") !=
        std::string::npos);
  CHECK(LayerPathLabel(*layer).rfind("dense_reference (", 0) == 0);
}

TEST_CASE("attention fast path: the fixed-pattern cache follows the patterns") {
  // A pattern changed in place (a checkpoint restore writes the buffers) must not be served
  // from the cache: the output follows the new pattern.
  torch::manual_seed(5);
  HybridAttention layer(128, 2, 2, 16);
  SetRandomCompact(layer, 1, 16);
  torch::Tensor x = torch::randn({1, 12, 128});
  CpuFastPath on(AttentionMode::kAuto);
  torch::NoGradGuard no_grad;
  torch::Tensor before = layer->forward(x);
  layer->fixed_rho[1].add_(torch::linspace(0, 3, 16));  // a constant shift would cancel in eq. 3
  layer->fixed_log_z[1].copy_(CompactLogNormalizer(layer->fixed_alpha[1], layer->fixed_rho[1]));
  torch::Tensor after = layer->forward(x);
  SetFastPathOnCpuForTesting(false);
  torch::Tensor dense = layer->forward(x);
  CHECK(RelL2(after, dense) <= 1e-5);
  CHECK(RelL2(before, dense) > 1e-3);
}

// A timer for the measured choice: runs each candidate once per repetition (so the
// measurement's own code runs) and reports the given milliseconds, `fallback` for labels
// not listed.
struct FakeTimer {
  FakeTimer(std::map<std::string, double> ms, double fallback) {
    SetPlanTimerForTesting(
        [this, ms, fallback](const std::string& label, const std::function<void()>& run) {
          run();
          ++calls;
          auto it = ms.find(label);
          return it == ms.end() ? fallback : it->second;
        });
  }
  ~FakeTimer() { SetPlanTimerForTesting(PlanTimer()); }
  int calls = 0;
};

// A mixed layer: ordinary, local, two compact fixed heads and a dense fixed one.
HybridAttention MixedLayer() {
  torch::manual_seed(6);
  HybridAttention layer(384, 6, 6, 48);
  layer->SetHeadState(1, {HeadMode::kLocal, 7});
  SetRandomCompact(layer, 2, 48);
  SetRandomCompact(layer, 4, 48);
  layer->SetFixedDense(
      5, CompactPattern(torch::randn({48}), torch::randn({48}) * 0.1, torch::zeros({48}), 48));
  return layer;
}

TEST_CASE("attention fast path: auto times every candidate plan, runs the fastest, records all") {
  HybridAttention layer = MixedLayer();
  torch::Tensor x = torch::randn({2, 41, 384});
  const std::string conv = "sdpa[2] fused[1] fixed_gemm[1] fixed_conv[2]";
  FakeTimer timer({{conv, 1.0}, {"sdpa[2] fused[1] fixed_gemm[3]", 2.0}}, 3.0);
  ExpectSameAsDense(layer, x, AttentionMode::kAuto, conv + " kernel=cpu_stand_in");
  // The dense fixed head rules the all-fused and the fixed-fused plans out: two candidates,
  // five repetitions each.
  CHECK(timer.calls == 2 * 5);
  std::vector<PlanChoice> choices = LayerPlanChoices(*layer);
  REQUIRE(choices.size() == 1);
  CHECK(choices[0].shape == "B=2 T=41 Float fwd+bwd");
  REQUIRE(choices[0].candidates.size() == 2);
  CHECK(choices[0].candidates[choices[0].chosen].label == conv);
  CHECK(choices[0].candidates[choices[0].chosen].ms == 1.0);
  CHECK(choices[0].candidates[choices[0].chosen].samples_ms == std::vector<double>(5, 1.0));
  // The same shape again: no new measurement. Another length, or inference: one each.
  CpuFastPath on(AttentionMode::kAuto);
  layer->forward(x);
  CHECK(timer.calls == 2 * 5);
  layer->forward(torch::randn({2, 30, 384}));
  {
    torch::NoGradGuard no_grad;
    layer->forward(x);
  }
  CHECK(timer.calls == 3 * 2 * 5);
  CHECK(LayerPlanChoices(*layer).size() == 3);
}

TEST_CASE(
    "attention fast path: every candidate plan of a mixed layer matches the dense reference") {
  // Each candidate forced in turn (its time 0, the others 1): outputs and all gradients.
  HybridAttention layer = MixedLayer();
  SetRandomCompact(layer, 5, 48);  // all fixed heads compact: every form applies
  torch::Tensor x = torch::randn({2, 45, 384});
  for (const std::string want :
       {"fused[3] fixed_fused[3]", "sdpa[2] fused[1] fixed_gemm[3]",
        "sdpa[2] fused[1] fixed_conv[3]", "sdpa[2] fused[1] fixed_fused[3]"}) {
    INFO(want);
    FakeTimer timer({{want, 0.0}}, 1.0);
    ExpectSameAsDense(layer, x, AttentionMode::kAuto, want + " kernel=cpu_stand_in");
    CHECK(timer.calls == 4 * 5);
  }
}

}  // namespace
}  // namespace headlab
