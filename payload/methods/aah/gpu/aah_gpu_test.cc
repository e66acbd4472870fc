// AAH-v3 on CUDA (label gpu; built only against a CUDA LibTorch): the diagnostics from the
// fused kernels' log-normalisers equal the dense ones, the whole observation pass on the
// device equals the CPU's, and the in-forward observation (from the forward's taps) equals
// the separate pass.
#include <torch/torch.h>

#include <cmath>

#include "kernels/torch/hybrid_attention_op.h"
#include "payload/exec/attention_cuda.h"
#include "payload/methods/aah/aah_model.h"
#include "payload/methods/aah/aah_testing.h"
#include "payload/methods/aah/head_diagnostics.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::aah {
namespace {

// ordinary, local(48), local(1), pruned: the kernels' specs and the [6, H] table.
std::vector<HeadState> States() {
  std::vector<HeadState> s(4);
  s[1].mode = HeadMode::kLocal;
  s[1].window = 48;
  s[2].mode = HeadMode::kLocal;
  s[2].window = 1;
  s[3].mode = HeadMode::kPruned;
  return s;
}

torch::Tensor Table(const std::vector<HeadState>& states, const torch::Device& device) {
  std::vector<int64_t> v;
  for (int field = 0; field < 6; ++field)
    for (const HeadState& s : states) {
      const bool scores = s.mode != HeadMode::kPruned && s.mode != HeadMode::kFixed;
      const int64_t values[6] = {
          s.window, s.sink, s.recent, s.mode == HeadMode::kLocal, s.mode == HeadMode::kStreaming,
          scores};
      v.push_back(values[field]);
    }
  return torch::tensor(v, torch::kLong).view({6, -1}).to(device);
}

TEST_CASE("aah on CUDA: diagnostics from the kernels' log-normalisers equal the dense ones") {
  REQUIRE(torch::cuda::is_available());
  torch::manual_seed(11);
  const int64_t B = 2, T = 192, H = 4, kv = 2, d = 64;
  const torch::Device cuda(torch::kCUDA);
  const std::vector<HeadState> states = States();
  kernels::HybridHeads heads;
  for (const HeadState& s : states) heads.specs.push_back(KernelHeadSpec(s));
  const double scale = 1.0 / std::sqrt(double(d));
  AttendWithLse attend = [&](const torch::Tensor& q, const torch::Tensor& k,
                             const torch::Tensor& values) {
    return kernels::HybridAttentionWithLse(q, k, values, heads, scale);
  };
  torch::Tensor q = torch::randn({B, T, H, d}, cuda) * 2, k = torch::randn({B, T, kv, d}, cuda) * 2;
  torch::Tensor v = torch::randn({B, T, kv, d}, cuda);
  const torch::Tensor table = Table(states, cuda);
  const torch::Tensor want = DenseDiagnostics(q, k, v, table).cpu();
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    INFO("dtype " << c10::toString(dtype));
    const double tol = dtype == torch::kFloat ? 1e-4 : 2e-2;
    const torch::Tensor got = LseDiagnostics(q.to(dtype), k.to(dtype), v.to(dtype), attend).cpu();
    // Heads 0-2 form scores; the pruned head's values are unspecified (zeroed by the caller).
    CHECK(torch::allclose(got.narrow(0, 0, 3), want.narrow(0, 0, 3), tol, tol));
  }
}

TEST_CASE("aah on CUDA: the observation pass equals the CPU's") {
  REQUIRE(torch::cuda::is_available());
  torch::manual_seed(12);
  Gpt model(testing::SmallModel(2, 4, 256, 128, 64, "rope", 2));  // d = 64, GQA 2
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t h = 0; h < 4; ++h) model->attention(l)->SetHeadState(h, States()[size_t(h)]);
  torch::Tensor idx = torch::randint(0, 64, {2, 128}, torch::kLong);
  const std::vector<HeadObservation> cpu = ObserveHeads(*model, idx);
  model->to(torch::kCUDA);
  const std::vector<HeadObservation> gpu = ObserveHeads(*model, idx.to(torch::kCUDA));
  REQUIRE(gpu.size() == cpu.size());
  for (size_t l = 0; l < cpu.size(); ++l)
    for (size_t h = 0; h < 4; ++h) {
      INFO("layer " << l << " head " << h);
      for (size_t i = 0; i < 6; ++i)
        CHECK(gpu[l].qkv[h][i] == Approx(cpu[l].qkv[h][i]).epsilon(1e-3).margin(1e-5));
      for (size_t i = 0; i < 3; ++i)
        CHECK(gpu[l].attention[h][i] == Approx(cpu[l].attention[h][i]).epsilon(1e-3).margin(1e-5));
    }
}

// The control update's observation inside the training forward reads the projections and
// each head's output from the layer's fast path (ForwardTaps) and runs one attention pass;
// the separate pass projects and runs two. Same heads, same rows.
TEST_CASE("aah on CUDA: the in-forward observation from the forward's taps equals the separate") {
  REQUIRE(torch::cuda::is_available());
  torch::manual_seed(13);
  Gpt model(testing::SmallModel(2, 4, 256, 128, 64, "rope", 2));  // d = 64, GQA 2
  model->to(torch::kCUDA);
  AahOptions o;
  o.regime = Regime::kFullAdaptive;
  o.context = 128;
  o.windows = ScaledWindows(128);
  o.min_window = o.windows.front();
  o.hierarchy = DefaultHierarchy(o.regime);
  o.scorer_hidden = 16;
  o.control_every = 1;
  REQUIRE(ValidateOptions(o).ok());
  AahController controller(o, 2, 4, 7);
  const torch::Tensor idx = torch::randint(0, 64, {2, 128}, torch::kLong).to(torch::kCUDA);
  // Mixed windows: the plan packs the heads out of order.
  auto mix = [&] {
    for (int64_t l = 0; l < 2; ++l) {
      HeadState local;
      local.mode = HeadMode::kLocal;
      local.window = 48 - 16 * l;
      model->attention(l)->SetHeadState(1, local);
      model->attention(l)->SetHeadState(2, local);
    }
  };
  mix();
  const std::vector<HeadObservation> separate = ObserveHeads(*model, idx);
  auto round = ControlStep(controller, *model, 0, idx, Observation::kInForward);
  REQUIRE(round.ok());
  REQUIRE(*round != nullptr);
  mix();  // again: ControlStep installed the controller's windows
  {
    torch::NoGradGuard no_grad;
    model->Loss(idx, idx);
  }
  REQUIRE((*round)->layers == 2);
  for (int64_t l = 0; l < 2; ++l) {
    CHECK(LayerPathLabel(*model->attention(l)).find("dense") == std::string::npos);
    const torch::Tensor rows = (*round)->rows[size_t(l)].to(torch::kCPU, torch::kFloat);
    auto r = rows.accessor<float, 2>();
    for (int64_t h = 0; h < 4; ++h) {
      INFO("layer " << l << " head " << h);
      const HeadObservation& want = separate[size_t(l)];
      for (int64_t i = 0; i < 6; ++i)
        CHECK(r[h][i] == Approx(want.qkv[size_t(h)][size_t(i)]).epsilon(1e-3).margin(1e-5));
      for (int64_t i = 0; i < 2; ++i)
        CHECK(r[h][6 + i] ==
              Approx(want.attention[size_t(h)][size_t(i)]).epsilon(1e-3).margin(1e-5));
    }
  }
  REQUIRE(FinishControl(controller, *model, round->get()).ok());
}

}  // namespace
}  // namespace headlab::aah
