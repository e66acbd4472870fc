// The training loop's attention on CUDA (payload/exec/attention_cuda.h) against the dense
// reference layer: a small Gpt with every head mode (ordinary, fixed compact, streaming,
// local, pruned) and GQA gives the same loss and parameter gradients through the fast path
// (train.attention auto: SDPA, kernels, fixed-pattern GEMM; and fused: the kernels for every
// head) as through the dense masks on the same device (fp32: relative L2 <= 1e-5); in bf16
// the fast path's error against the fp32 reference stays within a small multiple of the
// dense bf16 reference's own; a bf16 training step runs the wgmma kernels on sm_90; a
// resumed bf16 run continues the uninterrupted one. Needs a GPU (ctest label gpu).
#include <ATen/cuda/CUDAContext.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <string>

#include "common/run_config.h"
#include "kernels/torch/hybrid_attention_op.h"
#include "payload/exec/attention_cuda.h"
#include "payload/exec/linear_cross_entropy.h"
#include "payload/exec/model.h"
#include "payload/exec/test_util.h"
#include "payload/exec/train.h"
#include "payload/exec/train_testing.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

double RelL2(const torch::Tensor& got, const torch::Tensor& want) {
  const double denom = want.norm().item<double>();
  const double diff = (got - want).norm().item<double>();
  return denom == 0 ? diff : diff / denom;
}

// Installs the mixed head modes of the test on `model` (2 layers x 4 heads): every state
// at least once, fixed heads with random compact patterns (SAF eq. 3, logZ from them).
void InstallModes(Gpt& model, int64_t context) {
  torch::manual_seed(11);
  auto fixed = [&](int64_t layer, int64_t h) {
    torch::Tensor alpha = torch::randn({context}) * 0.5;
    torch::Tensor rho =
        -0.05 * torch::arange(context, torch::kFloat) + torch::randn({context}) * 0.2;
    torch::Tensor log_z = CompactLogNormalizer(alpha, rho);
    model->attention(layer)->SetFixedCompact(h, alpha.to(torch::kCUDA), rho.to(torch::kCUDA),
                                             log_z.to(torch::kCUDA));
  };
  model->attention(0)->SetHeadState(1, {HeadMode::kLocal, 17});
  model->attention(0)->SetHeadState(2, {HeadMode::kStreaming, 0, 4, 9});
  fixed(0, 3);
  model->attention(1)->SetHeadState(0, {HeadMode::kPruned});
  fixed(1, 1);
  model->attention(1)->SetHeadState(3, {HeadMode::kLocal, 5});
}

struct LossAndGrads {
  double loss = 0;
  std::map<std::string, torch::Tensor> grads;  // undefined where the parameter got none
};

LossAndGrads LossAndGradients(Gpt& model, const torch::Tensor& x, const torch::Tensor& y) {
  model->zero_grad(/*set_to_none=*/true);
  torch::Tensor loss = model->Loss(x, y);
  loss.backward();
  LossAndGrads out;
  out.loss = loss.item<double>();
  for (const auto& p : model->named_parameters())
    out.grads[p.key()] = p.value().grad().defined() ? p.value().grad().clone() : torch::Tensor();
  return out;
}

// The compute capability's major number of GPU 0 (9: Hopper, where the wgmma kernels run).
int ComputeMajor() { return at::cuda::getDeviceProperties(0)->major; }

// The two model shapes of the tests: GQA with RoPE and RMSNorm, plain MHA without.
ModelConfig TestModel(const std::string& pos) {
  ModelConfig c;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = pos == "rope" ? 2 : 4;
  c.width = 256;  // head_dim 64
  c.context = 97;
  c.mlp_ratio = 2;
  c.vocab = 64;
  c.pos = pos;
  c.rope_base = 10000;
  c.norm = pos == "rope" ? "rmsnorm" : "layernorm";
  return c;
}

// A model of TestModel(pos) on CUDA with every head mode installed, and a batch of tokens.
struct MixedModel {
  Gpt model{nullptr};
  torch::Tensor x, y;
};
MixedModel MakeMixedModel(const ModelConfig& c, uint64_t seed) {
  torch::manual_seed(seed);
  MixedModel m;
  m.model = Gpt(c);
  m.model->to(torch::kCUDA);
  InstallModes(m.model, c.context);
  m.x = torch::randint(0, c.vocab, {3, c.context}, torch::kLong).to(torch::kCUDA);
  m.y = torch::randint(0, c.vocab, {3, c.context}, torch::kLong).to(torch::kCUDA);
  return m;
}

// The largest relative L2 error of `got`'s loss and gradients against `want`'s.
double WorstError(const LossAndGrads& got, const LossAndGrads& want) {
  double worst = std::abs(got.loss - want.loss) / std::abs(want.loss);
  for (const auto& [name, w] : want.grads) {
    INFO("parameter " << name);
    const torch::Tensor& g = got.grads.at(name);
    REQUIRE(g.defined() == w.defined());
    if (w.defined()) worst = std::max(worst, RelL2(g, w));
  }
  return worst;
}

TEST_CASE("fused attention: a mixed-head Gpt on CUDA matches the dense reference") {
  REQUIRE(torch::cuda::is_available());
  REQUIRE(FusedAttentionCompiled());
  CHECK(std::string(AttentionBackendName(torch::Device(torch::kCUDA, 0))) == "fused_cuda");
  CHECK(std::string(AttentionBackendName(torch::Device(torch::kCPU))) == "dense_reference");
  for (const char* pos : {"rope", "learned"}) {
    const ModelConfig c = TestModel(pos);
    INFO("pos " << pos);
    MixedModel m = MakeMixedModel(c, 5);
    Gpt& model = m.model;
    const torch::Tensor &x = m.x, &y = m.y;
    SetAttentionMode(AttentionMode::kDense);
    const int64_t calls0 = FusedAttentionCalls();
    LossAndGrads dense = LossAndGradients(model, x, y);
    CHECK(FusedAttentionCalls() == calls0);
    for (AttentionMode mode : {AttentionMode::kAuto, AttentionMode::kFused}) {
      INFO("train.attention " << AttentionModeName(mode));
      SetAttentionMode(mode);
      const int64_t calls = FusedAttentionCalls();
      LossAndGrads fast = LossAndGradients(model, x, y);
      CHECK(FusedAttentionCalls() == calls + c.layers);  // every layer took the fast path
      const double worst = WorstError(fast, dense);
      CHECK(worst <= 1e-5);
      std::printf("fp32 %s vs dense (pos %s): loss %.9g vs %.9g, worst rel L2 %.3g; layer 0: %s\n",
                  AttentionModeName(mode), pos, fast.loss, dense.loss, worst,
                  LayerPathLabel(*model->attention(0)).c_str());
      // Fixed heads use no Q/K rows: exact zeros in the weight gradients (layer 0, head 3).
      const torch::Tensor& dq = fast.grads["blocks.0.attn.q_proj.weight"];
      CHECK(dq.narrow(0, 3 * 64, 64).abs().max().item<float>() == 0.f);
      // Layer 1 head 0 is pruned: its output projection columns see zeros.
      const torch::Tensor& d_o = fast.grads["blocks.1.attn.o_proj.weight"];
      CHECK(d_o.narrow(1, 0, 64).abs().max().item<float>() == 0.f);
    }
    SetAttentionMode(AttentionMode::kAuto);
  }
}

TEST_CASE("fused attention: bf16 under autocast stays within the dense bf16 reference's error") {
  REQUIRE(torch::cuda::is_available());
  for (const char* pos : {"rope", "learned"}) {
    const ModelConfig c = TestModel(pos);
    INFO("pos " << pos);
    MixedModel m = MakeMixedModel(c, 7);
    Gpt& model = m.model;
    const torch::Tensor &x = m.x, &y = m.y;
    SetAttentionMode(AttentionMode::kDense);
    model->SetPrecision(Precision::kFp32);
    LossAndGrads exact = LossAndGradients(model, x, y);
    model->SetPrecision(Precision::kBf16);
    const double reference_error = WorstError(LossAndGradients(model, x, y), exact);
    for (AttentionMode mode : {AttentionMode::kAuto, AttentionMode::kFused}) {
      INFO("train.attention " << AttentionModeName(mode));
      SetAttentionMode(mode);
      // Under auto every candidate times alike here, so each layer keeps its static plan
      // (ChoosePlan takes another only when it is faster): the plan under test.
      if (mode == AttentionMode::kAuto)
        SetPlanTimerForTesting([](const std::string&, const std::function<void()>& run) {
          run();
          return 1.0;
        });
      LossAndGrads fast = LossAndGradients(model, x, y);
      SetPlanTimerForTesting(PlanTimer());
      const double error = WorstError(fast, exact);
      std::printf("bf16 %s (pos %s): worst rel L2 vs fp32 %.3g (dense bf16: %.3g); layer 0: %s\n",
                  AttentionModeName(mode), pos, error, reference_error,
                  LayerPathLabel(*model->attention(0)).c_str());
      CHECK(error <= 3 * reference_error + 1e-3);
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)
      // Layer 1's local head (MHA) runs on FlashAttention-2's window in the static plan,
      // within the same error (attention_cuda.h); layer 0's ordinary, local and streaming
      // heads would be three calls, so they take one launch of the kernels
      // (attention_plan.h kMaxAttentionCalls).
      if (mode == AttentionMode::kAuto && c.kv_heads == c.heads) {
        CHECK(LayerPathLabel(*model->attention(1)).find("flash_window[1]") != std::string::npos);
        CHECK(LayerPathLabel(*model->attention(0)).find("fused[3]") == 0);
      }
#endif
      if (mode == AttentionMode::kFused) {
        // A d = 64 layer in bf16 on an sm_90 device runs the warp-specialised kernels, both
        // ways (the label names the forward's and the backward's).
        if (ComputeMajor() == 9)
          CHECK(LayerPathLabel(*model->attention(0)).find("kernel=wgmma-ws/wgmma-ws") !=
                std::string::npos);
      }
    }
    SetAttentionMode(AttentionMode::kAuto);
  }
}

TEST_CASE("fused attention: d = 96 runs padded to 128 on Hopper with the same values") {
  // The op pads a d = 96 layer's Q, K, V (and dO) with zero columns to the size the kernels
  // run (ExecutedHeadDim): O, lse and the gradients must be those of the d = 96 attention,
  // here against masked softmax attention in fp32 on the same inputs.
  REQUIRE(torch::cuda::is_available());
  torch::manual_seed(13);
  const int64_t B = 2, T = 257, H = 4, d = 96;
  const double scale = 1.0 / std::sqrt(double(d));
  const auto bf16 = torch::dtype(torch::kBFloat16).device(torch::kCUDA);
  torch::Tensor q = torch::randn({B, T, H, d}, bf16).requires_grad_();
  torch::Tensor k = torch::randn({B, T, H, d}, bf16).requires_grad_();
  torch::Tensor v = torch::randn({B, T, H, d}, bf16).requires_grad_();
  const std::vector<int32_t> windows = {0, 16, 64, 200};  // 0: ordinary
  kernels::HybridHeads heads;
  for (int32_t w : windows) {
    kernels::HeadSpec s;
    s.state = w == 0 ? kernels::HeadState::kOrdinary : kernels::HeadState::kLocal;
    s.window = w;
    heads.specs.push_back(s);
  }
  kernels::KernelPaths paths;
  torch::Tensor o = kernels::HybridAttention(q, k, v, heads, scale, &paths);
  REQUIRE(o.sizes() == q.sizes());
  CHECK(paths.head_dim == (ComputeMajor() == 9 ? 128 : 96));
  std::printf("d = 96 op: kernels %s/%s at d = %d\n", paths.forward, paths.backward,
              paths.head_dim);
  torch::Tensor d_o = torch::randn_like(o);
  std::vector<torch::Tensor> g = torch::autograd::grad({o}, {q, k, v}, {d_o});

  // The reference: keys j <= i, and i - j < W for a local head.
  torch::Tensor qf = q.detach().to(torch::kFloat).requires_grad_();
  torch::Tensor kf = k.detach().to(torch::kFloat).requires_grad_();
  torch::Tensor vf = v.detach().to(torch::kFloat).requires_grad_();
  torch::Tensor i = torch::arange(T, torch::kCUDA).view({T, 1}), j = i.view({1, T});
  std::vector<torch::Tensor> masks;
  for (int32_t w : windows) masks.push_back((j <= i).logical_and(w == 0 ? j >= 0 : i - j < w));
  torch::Tensor mask = torch::stack(masks).view({1, H, T, T});
  torch::Tensor scores = torch::einsum("bihd,bjhd->bhij", {qf, kf}) * scale;
  scores = scores.masked_fill(mask.logical_not(), -std::numeric_limits<float>::infinity());
  torch::Tensor of = torch::einsum("bhij,bjhd->bihd", {torch::softmax(scores, -1), vf});
  std::vector<torch::Tensor> gf =
      torch::autograd::grad({of}, {qf, kf, vf}, {d_o.to(torch::kFloat)});
  CHECK(RelL2(o.to(torch::kFloat), of) < 2e-2);
  for (int n = 0; n < 3; ++n) {
    INFO("gradient "
         << "qkv"[n]);
    REQUIRE(g[size_t(n)].sizes() == q.sizes());
    CHECK(RelL2(g[size_t(n)].to(torch::kFloat), gf[size_t(n)]) < 3e-2);
  }
  auto [o2, lse] =
      kernels::HybridAttentionWithLse(q.detach(), k.detach(), v.detach(), heads, scale);
  REQUIRE(o2.sizes() == q.sizes());
  CHECK(RelL2(o2.to(torch::kFloat), of) < 2e-2);
  CHECK((lse - torch::logsumexp(scores.detach(), -1)).abs().max().item<float>() < 2e-2);
}

TEST_CASE("fused attention: the loss kernel equals cross_entropy(linear(h, w)) on CUDA") {
  REQUIRE(torch::cuda::is_available());
  torch::manual_seed(12);
  const int64_t n = 300, c = 64, vocab = 50304;  // GPT-2's padded vocabulary, an uneven last chunk
  auto cuda = torch::TensorOptions().device(torch::kCUDA);
  torch::Tensor targets = torch::randint(0, vocab, {n}, cuda.dtype(torch::kLong));
  torch::Tensor h0 = torch::randn({n, c}, cuda), w0 = torch::randn({vocab, c}, cuda) * 0.2;
  auto reference = [&](torch::ScalarType dtype, torch::Tensor* dh, torch::Tensor* dw) {
    torch::Tensor h = h0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true);
    torch::Tensor logits =
        torch::nn::functional::linear(h.to(dtype), w.to(dtype)).to(torch::kFloat);
    torch::Tensor loss = torch::nn::functional::cross_entropy(logits, targets);
    loss.backward();
    *dh = h.grad();
    *dw = w.grad();
    return loss.item<double>();
  };
  torch::Tensor dh32, dw32, dh16, dw16;
  const double exact = reference(torch::kFloat, &dh32, &dw32);
  const double ref16 = reference(torch::kBFloat16, &dh16, &dw16);
  const double ref_error =
      std::max({std::abs(ref16 - exact) / exact, RelL2(dh16, dh32), RelL2(dw16, dw32)});
  for (torch::ScalarType dtype : {torch::kFloat, torch::kBFloat16}) {
    torch::Tensor h = h0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true);
    torch::Tensor loss = LinearCrossEntropy(h, w, targets, dtype, /*chunk_rows=*/128);
    loss.backward();
    const double error = std::max({std::abs(loss.item<double>() - exact) / exact,
                                   RelL2(h.grad(), dh32), RelL2(w.grad(), dw32)});
    std::printf("loss kernel %s: worst rel error vs fp32 reference %.3g (bf16 reference: %.3g)\n",
                c10::toString(dtype), error, ref_error);
    CHECK(error <= (dtype == torch::kFloat ? 1e-5 : 3 * ref_error + 1e-3));
  }
}

TEST_CASE("fused attention: a bf16 training run on CUDA runs the wgmma kernels and resumes") {
  REQUIRE(torch::cuda::is_available());
  Json config = {{"seed", 3},
                 {"model",
                  {{"layers", 2},
                   {"heads", 2},
                   {"width", 128},
                   {"context", 64},
                   {"head_modes", "0.1=local:9,1.0=streaming:2:7"}}},
                 {"train",
                  {{"steps", 6},
                   {"batch_size", 4},
                   {"warmup_steps", 2},
                   {"log_every", 1},
                   {"checkpoint_every", 3},
                   {"device", "cuda"},
                   {"attention", "fused"}}}};
  auto req = testing::MakeTrainRequest(config, "test", "headlab_exec_fused_train");
  REQUIRE(req.ok());
  const int64_t calls0 = FusedAttentionCalls();
  testing::TrainEvents full = testing::CollectTrainingEventsOk(*req);
  // At least one forward per layer per training step (evaluation adds more).
  CHECK(FusedAttentionCalls() - calls0 >= 6 * 2);
  CHECK(full.provenance["precision"] == "bf16");  // train.precision auto on CUDA
  CHECK(full.provenance["attention"] == "fused");
  const std::string paths = full.provenance["attention_paths"].dump();
  std::printf("attention paths: %s\n", paths.c_str());
  if (ComputeMajor() == 9) CHECK(paths.find("kernel=wgmma-ws/wgmma-ws") != std::string::npos);
  CHECK(full.summary.contains("train.tokens_per_s"));
  CHECK(full.summary.contains("mem.gpu_peak_bytes"));
  REQUIRE(full.metrics["train.loss"].size() == 6);
  for (const auto& [step, loss] : full.metrics["train.loss"]) CHECK(std::isfinite(loss));

  // Resume from the step-3 checkpoint: steps 4-6 continue the uninterrupted run (GPU
  // reductions need not be bitwise repeatable: within 1e-3 relative).
  auto again = testing::MakeTrainRequest(config, "test", "headlab_exec_fused_resume");
  REQUIRE(again.ok());
  again->resume = full.ResumeAt(3);
  testing::TrainEvents resumed = testing::CollectTrainingEventsOk(*again);
  for (int64_t step = 4; step <= 6; ++step) {
    INFO("step " << step);
    const double want = full.metrics["train.loss"].at(step);
    CHECK(std::abs(resumed.metrics["train.loss"].at(step) - want) <= 1e-3 * std::abs(want));
  }
  testing::RemoveTree(req->out_dir);
  testing::RemoveTree(again->out_dir);
}

// train.attention = auto measures every candidate plan and runs the fastest
// (attention_cuda.h); all must be exact. Each form forced in turn through the test timer
// (time 0 for the plans `form` matches, 1 for the rest), fp32 against the dense reference
// and bf16 within the dense bf16 reference's own error, for MHA and GQA layers.
TEST_CASE(
    "fused attention: every candidate plan of the measured choice matches the dense reference") {
  REQUIRE(torch::cuda::is_available());
  struct Form {
    const char* name;
    std::function<bool(const std::string&)> matches;
  };
  auto has = [](const std::string& s, const char* part) {
    return s.find(part) != std::string::npos;
  };
  const std::vector<Form> forms = {
      {"all fused", [&](const std::string& l) { return !has(l, "sdpa") && has(l, "fixed_fused"); }},
      {"sdpa + fixed gemm", [&](const std::string& l) { return has(l, "fixed_gemm"); }},
      {"sdpa + fixed conv", [&](const std::string& l) { return has(l, "fixed_conv"); }},
      {"sdpa + fixed fused",
       [&](const std::string& l) { return has(l, "sdpa") && has(l, "fixed_fused"); }}};
  for (const char* pos : {"learned", "rope"}) {  // MHA, GQA
    const ModelConfig c = TestModel(pos);
    MixedModel m = MakeMixedModel(c, 9);
    SetAttentionMode(AttentionMode::kDense);
    m.model->SetPrecision(Precision::kFp32);
    LossAndGrads exact = LossAndGradients(m.model, m.x, m.y);
    m.model->SetPrecision(Precision::kBf16);
    const double bf16_reference = WorstError(LossAndGradients(m.model, m.x, m.y), exact);
    SetAttentionMode(AttentionMode::kAuto);
    for (const Form& form : forms) {
      INFO("pos " << pos << ", " << form.name);
      SetPlanTimerForTesting([&](const std::string& label, const std::function<void()>& run) {
        run();
        return form.matches(label) ? 0.0 : 1.0;
      });
      m.model->SetPrecision(Precision::kFp32);
      const double fp32_error = WorstError(LossAndGradients(m.model, m.x, m.y), exact);
      const std::string label = LayerPathLabel(*m.model->attention(0));
      m.model->SetPrecision(Precision::kBf16);
      const double bf16_error = WorstError(LossAndGradients(m.model, m.x, m.y), exact);
      std::printf(
          "candidates (pos %s, %s): layer 0 ran %s; fp32 worst rel L2 %.3g; bf16 %.3g (dense bf16 "
          "%.3g)\n",
          pos, form.name, label.c_str(), fp32_error, bf16_error, bf16_reference);
      if (c.kv_heads == c.heads) CHECK(form.matches(label));  // MHA: every form is a candidate
      CHECK(fp32_error <= 1e-5);
      CHECK(bf16_error <= 3 * bf16_reference + 1e-3);
    }
    SetPlanTimerForTesting(PlanTimer());
    // The default timer (CUDA events) measures and records every candidate of layer 0.
    SetAttentionMode(AttentionMode::kAuto);
    LossAndGradients(m.model, m.x, m.y);
    for (const PlanChoice& choice : LayerPlanChoices(*m.model->attention(0)))
      std::printf("measured (pos %s): %s\n", pos, PlanChoiceSummary(choice).c_str());
    if (c.kv_heads == c.heads) CHECK_FALSE(LayerPlanChoices(*m.model->attention(0)).empty());
  }
}

// The whole-layer bench of the kernel-targets rows (docs/BENCHMARKS.md) (hidden: run it with
// `kernels_exec_fused_test "[layer_bench]"`): a bf16 layer of 12 heads at B=8, T=4096, d =
// 64 and 128 (projections included) as training runs it with train.attention = auto. The
// first forward + backward times every candidate plan (the measured choice; its summary is
// printed), then the chosen plan is timed with CUDA events: median [min, max] of 5 rounds of
// 5 steps, and the ratio to the all-ordinary layer's time.
TEST_CASE("fused attention: whole-layer time of the measured choice, kernel-target rows",
          "[.][layer_bench]") {
  REQUIRE(torch::cuda::is_available());
  const int64_t B = 8, H = 12, T = 4096;
  SetAttentionMode(AttentionMode::kAuto);
  for (int64_t d : {64, 128}) {
    struct Row {
      std::string name;
      std::function<void(HybridAttention&)> install;
    };
    auto fixed = [&](HybridAttention& layer, int64_t n) {
      for (int64_t h = 0; h < n; ++h) {
        torch::Tensor alpha = torch::randn({T}) * 0.5;
        torch::Tensor rho = -0.01 * torch::arange(T, torch::kFloat) + torch::randn({T}) * 0.2;
        layer->SetFixedCompact(h, alpha.to(torch::kCUDA), rho.to(torch::kCUDA),
                               CompactLogNormalizer(alpha, rho).to(torch::kCUDA));
      }
    };
    auto each = [&](HybridAttention& layer, int64_t n, HeadState s) {
      for (int64_t h = 0; h < n; ++h) layer->SetHeadState(h, s);
    };
    const std::vector<Row> rows = {
        {"all ordinary", [](HybridAttention&) {}},
        {"fixed 25%", [&](HybridAttention& l) { fixed(l, H / 4); }},
        {"fixed 50%", [&](HybridAttention& l) { fixed(l, H / 2); }},
        {"local W=512",
         [&](HybridAttention& l) {
           each(l, H, {HeadMode::kLocal, 512});
         }},
        {"local W=1024",
         [&](HybridAttention& l) {
           each(l, H, {HeadMode::kLocal, 1024});
         }},
        {"pruned 50%", [&](HybridAttention& l) { each(l, H / 2, {HeadMode::kPruned}); }},
        {"streaming 50% (128+256)", [&](HybridAttention& l) {
           each(l, H / 2, {HeadMode::kStreaming, 0, 128, 256});
         }}};
    double ordinary_ms = 0;
    for (const Row& row : rows) {
      torch::manual_seed(21);
      HybridAttention layer(H * d, H, H, T);
      layer->to(torch::kCUDA);
      for (torch::Tensor& p : layer->parameters()) p.set_data(p.data().to(torch::kBFloat16));
      row.install(layer);
      torch::Tensor x =
          torch::randn({B, T, H * d}, torch::dtype(torch::kBFloat16).device(torch::kCUDA))
              .requires_grad_(true);
      torch::Tensor dy = torch::randn_like(x);
      std::vector<torch::Tensor> inputs = layer->parameters();  // dW too, as in training
      inputs.push_back(x);
      auto step = [&] {
        torch::Tensor y = layer->forward(x);
        torch::autograd::grad({y}, inputs, {dy});
      };
      step();  // the measured choice
      for (const PlanChoice& c : LayerPlanChoices(*layer))
        std::printf("d=%ld %-24s measured %s\n", long(d), row.name.c_str(),
                    PlanChoiceSummary(c).c_str());
      std::vector<double> ms;
      for (int round = 0; round < 5; ++round) {
        torch::cuda::synchronize();
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 5; ++i) step();
        torch::cuda::synchronize();
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count() /
            5);
      }
      std::sort(ms.begin(), ms.end());
      if (row.name == "all ordinary") ordinary_ms = ms[2];
      std::printf("d=%ld %-24s layer fwd+bwd %.3f ms [%.3f, %.3f] = %.3f x all-ordinary; ran %s\n",
                  long(d), row.name.c_str(), ms[2], ms[0], ms[4], ms[2] / ordinary_ms,
                  LayerPathLabel(*layer).c_str());
      CHECK(LayerPathLabel(*layer).rfind("dense_reference", 0) != 0);
    }
  }
}

// A mid-run SAF event (one-time replacement at half the run, SAF §3.3) on CUDA in bf16: the
// replaced layers re-plan after it and run the fast path with their fixed heads (no dense
// reference, no Q/K rows for them), the run's provenance records each layer's plan after
// the event (attention_plans), and the throughput after it is reported on its own.
TEST_CASE("fused attention: after a mid-run SAF event every layer runs its planned fast path") {
  REQUIRE(torch::cuda::is_available());
  Json config = {
      {"seed", 5},
      {"model", {{"layers", 2}, {"heads", 4}, {"width", 256}, {"context", 256}, {"pos", "rope"}}},
      {"train",
       {{"steps", 8},
        {"batch_size", 2},
        {"warmup_steps", 2},
        {"log_every", 1},
        {"eval_every", 0},
        {"eval_batches", 1},
        {"checkpoint_every", 0},
        {"device", "cuda"},
        {"attention", "auto"}}},
      {"saf",
       {{"method", "replace"},
        {"rate", 0.5},
        {"tau", 0.5},
        {"calib_sequences", 4},
        {"calib_batch", 2},
        {"fit_steps", 50},
        {"fit_max_kl", 100.0}}}};
  auto req = testing::MakeTrainRequest(config, "test", "headlab_exec_fused_saf_event");
  REQUIRE(req.ok());
  testing::TrainEvents run = testing::CollectTrainingEventsOk(*req);
  const Json& plans = run.provenance["attention_plans"];
  std::printf("attention plans after the SAF event: %s\n", plans.dump().c_str());
  REQUIRE(plans.size() == 1);
  CHECK(plans[0]["step"] == 5);  // the event comes before update 5 (step 4 = 0.5 x 8): it re-plans
  int64_t fixed_layers = 0;
  for (const auto& [label, layers] : plans[0]["attention_paths"].items()) {
    INFO(label);
    CHECK(label.find("dense_reference") == std::string::npos);
    if (label.find("fixed_") != std::string::npos) fixed_layers += int64_t(layers.size());
  }
  CHECK(fixed_layers >= 1);  // 4 of the 8 heads are fixed: at least one layer holds some
  CHECK(run.summary.contains("train.tokens_per_s_after_event"));
  CHECK(run.summary["saf.heads_fixed"] == 4);
  testing::RemoveTree(req->out_dir);
}

}  // namespace
}  // namespace headlab
