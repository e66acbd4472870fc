#include "payload/methods/aah/aah_model.h"

#include <cmath>

#include "payload/exec/attention_cuda.h"
#include "payload/methods/aah/aah_report.h"
#include "payload/methods/aah/aah_testing.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::aah {
namespace {

ModelConfig Tiny(const std::string& pos = "learned", int64_t kv_heads = 4) {
  return testing::SmallModel(2, 4, 32, 32, 64, pos, kv_heads);
}

AahOptions Opts(Regime r, int64_t context) {
  AahOptions o;
  o.regime = r;
  o.context = context;
  o.windows = ScaledWindows(context);
  o.min_window = o.windows.front();
  o.hierarchy = DefaultHierarchy(r);
  o.scorer_hidden = 16;
  o.observe_rows = 2;
  REQUIRE(ValidateOptions(o).ok());
  return o;
}

}  // namespace

TEST_CASE("aah: every window = T equals full attention; shorter windows do not") {
  torch::manual_seed(1);
  Gpt model(Tiny("rope"));
  torch::Tensor idx = torch::randint(0, 64, {2, 32}, torch::kLong);
  torch::Tensor full = model->forward(idx);
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t h = 0; h < 4; ++h) {
      HeadState s;
      s.mode = HeadMode::kLocal;
      s.window = 32;  // local(W = T)
      model->attention(l)->SetHeadState(h, s);
    }
  CHECK(torch::allclose(model->forward(idx), full, 1e-5, 1e-6));
  ApplyWindows(*model, {{8, 8, 8, 8}, {8, 8, 8, 8}});
  CHECK_FALSE(torch::allclose(model->forward(idx), full, 1e-5, 1e-6));
  ApplyWindows(*model, {{32, 32, 32, 32}, {32, 32, 32, 32}});
  CHECK(model->attention(0)->head_states()[0].mode == HeadMode::kOrdinary);
  CHECK(torch::allclose(model->forward(idx), full, 1e-5, 1e-6));
}

TEST_CASE("aah observation pass: mean-absolute Q/K/V statistics and diagnostics") {
  torch::manual_seed(2);
  Gpt model(Tiny("learned", 2));  // GQA: heads 0,1 read kv head 0
  torch::Tensor idx = torch::randint(0, 64, {2, 32}, torch::kLong);
  auto obs = ObserveHeads(*model, idx);
  REQUIRE(obs.size() == 2);
  REQUIRE(obs[0].qkv.size() == 4);
  REQUIRE(obs[0].attention.size() == 4);
  {
    torch::NoGradGuard g;
    auto block = model->blocks->ptr(0)->as<Block>();
    torch::Tensor x = model->wte(idx) + model->wpe(torch::arange(32, torch::kLong));
    torch::Tensor q1 = block->attn->q_proj(block->ln1(x)).narrow(-1, 8, 8);  // head 1
    CHECK(obs[0].qkv[1][0] == Approx(q1.abs().mean().item<float>()).epsilon(1e-4));
    CHECK(std::fabs(q1.mean().item<float>()) < obs[0].qkv[1][0]);  // mu(|q|), not |mu(q)|
    // sigma: the population standard deviation over batch, sequence and features (§5.3).
    const torch::Tensor c = q1 - q1.mean();
    CHECK(obs[0].qkv[1][1] == Approx(c.pow(2).mean().sqrt().item<float>()).epsilon(1e-4));
    torch::Tensor v0 = block->attn->v_proj(block->ln1(x)).narrow(-1, 0, 8);  // kv head 0
    CHECK(obs[0].qkv[1][4] == Approx(v0.abs().mean().item<float>()).epsilon(1e-4));
    CHECK(obs[0].qkv[1][5] ==
          Approx((v0 - v0.mean()).pow(2).mean().sqrt().item<float>()).epsilon(1e-4));
  }
  CHECK(obs[0].qkv[0][2] == obs[0].qkv[1][2]);  // shared kv head
  CHECK(obs[0].qkv[0][2] != obs[0].qkv[2][2]);
  for (const auto& a : obs[1].attention) {
    CHECK(a[0] > 0);
    CHECK(a[0] <= std::log(32.0) + 1e-4);
    CHECK(a[1] > 0);
    CHECK(a[2] == 1.0f);  // ordinary: the whole context
  }
  ApplyWindows(*model, {{8, 8, 8, 8}, {8, 8, 8, 8}});
  auto local = ObserveHeads(*model, idx);
  CHECK(local[0].attention[0][2] == Approx(0.25f));
  CHECK(local[0].attention[0][0] <= std::log(8.0) + 1e-4);
}

namespace {

// One update as the training loop runs it: ControlStep, the forward, FinishControl.
Status Step(AahController& c, GptImpl& model, int64_t step, const torch::Tensor& x,
            Observation how = Observation::kInForward, bool* updated = nullptr) {
  auto round = ControlStep(c, model, step, x, how);
  if (!round.ok()) return round.status();
  if (updated) *updated = *round != nullptr;
  {
    torch::NoGradGuard no_grad;
    model.Loss(x, x);
  }
  return FinishControl(c, model, round->get());
}

}  // namespace

TEST_CASE("aah control hook: updates every 5 steps, installs windows, state round trip") {
  torch::manual_seed(3);
  Gpt model(Tiny());
  AahOptions o = Opts(Regime::kFullAdaptive, 32);
  AahController c(o, 2, 4, 7);
  int updates = 0;
  for (int64_t step = 0; step < 11; ++step) {
    torch::Tensor x = torch::randint(0, 64, {3, 32}, torch::kLong);
    bool updated = false;
    REQUIRE(Step(c, *model, step, x, Observation::kInForward, &updated).ok());
    updates += updated;
    CHECK(updated == (step % 5 == 0));
    for (int64_t l = 0; l < 2; ++l)
      for (int64_t h = 0; h < 4; ++h) {
        const HeadState& s = model->attention(l)->head_states()[size_t(h)];
        const int64_t w = c.windows()[size_t(l)][size_t(h)];
        CHECK((s.mode == HeadMode::kLocal ? s.window : int64_t(32)) == w);
      }
    CHECK(std::isfinite(model->Loss(x, x).item<double>()));
  }
  CHECK(updates == 3);
  CHECK(c.updates() == 3);
  auto row = TrainRowMetrics(c);
  CHECK(row[0].first == kAttnRatio);
  CHECK(row[0].second == Approx(AttentionCoverageRatio(c.windows(), 32)));

  AahController restored(o, 2, 4, 0);
  REQUIRE(restored.LoadState(c.SaveState(), "ckpt").ok());
  torch::Tensor x = torch::randint(0, 64, {3, 32}, torch::kLong);
  CHECK(restored.windows() == c.windows());
  REQUIRE(Step(c, *model, 15, x).ok());
  // ControlStep installs restored's windows (c's before its update): the same forward.
  REQUIRE(Step(restored, *model, 15, x).ok());
  CHECK(restored.windows() == c.windows());

  AahController wrong(Opts(Regime::kFullAdaptive, 64), 2, 4, 0);
  CHECK(ControlStep(wrong, *model, 0, x, Observation::kInForward).status().code() ==
        Status::Code::kInvalidArgument);
}

TEST_CASE("aah in-forward control: observes what the separate pass does, installs after") {
  // The dense reference layer, then the fast path (its CPU stand-ins), whose forward hands
  // the observation its projections (ForwardTaps).
  const bool fast = GENERATE(false, true);
  INFO("fast path " << fast);
  struct FastPath {
    explicit FastPath(bool on) { SetFastPathOnCpuForTesting(on); }
    ~FastPath() { SetFastPathOnCpuForTesting(false); }
  } path(fast);
  torch::manual_seed(4);
  Gpt model(Tiny());
  AahOptions o = Opts(Regime::kFullAdaptive, 32);
  o.observe_rows = 0;  // every row
  o.control_every = 1;
  AahController in_forward(o, 2, 4, 7), separate(o, 2, 4, 7);
  bool narrowed = false;
  for (int64_t step = 0; step < 8; ++step) {
    INFO("step " << step);
    torch::Tensor x = torch::randint(0, 64, {3, 32}, torch::kLong);
    // The separate pass observes every layer under the windows installed before the update.
    ApplyWindows(*model, separate.windows());
    REQUIRE(separate.Update(ObserveHeads(*model, x), step).ok());

    auto round = ControlStep(in_forward, *model, step, x, Observation::kInForward);
    REQUIRE(round.ok());
    REQUIRE(*round != nullptr);
    const WindowMap installed = InstalledWindows(*model);
    {
      torch::NoGradGuard no_grad;
      model->Loss(x, x);
    }
    CHECK((*round)->layers == 2);
    // The update's forward ran the windows installed before it: nothing changed yet.
    CHECK(InstalledWindows(*model) == installed);
    CHECK(in_forward.updates() == step);
    REQUIRE(FinishControl(in_forward, *model, round->get()).ok());
    CHECK(in_forward.updates() == step + 1);
    CHECK((*round)->seconds >= 0);
    // Every layer observed its input under those windows: the separate pass's update.
    CHECK(in_forward.windows() == separate.windows());
    CHECK(in_forward.layer(1).index() == separate.layer(1).index());
    CHECK(InstalledWindows(*model) == in_forward.windows());
    for (const auto& layer : in_forward.windows())
      for (int64_t w : layer) narrowed = narrowed || w < 32;
  }
  // Some update chose a window below the context, so the comparisons above can fail.
  CHECK(narrowed);
}

TEST_CASE("aah in-forward control: a forward that misses a layer fails the update") {
  torch::manual_seed(5);
  Gpt model(Tiny());
  AahController c(Opts(Regime::kFullAdaptive, 32), 2, 4, 7);
  torch::Tensor x = torch::randint(0, 64, {3, 32}, torch::kLong);
  auto round = ControlStep(c, *model, 0, x, Observation::kInForward);
  REQUIRE(round.ok());
  REQUIRE(*round != nullptr);
  Status s = FinishControl(c, *model, round->get());  // no forward ran
  CHECK(s.code() == Status::Code::kInternal);
  CHECK(s.message().find("observed 0 of 2 layers") != std::string::npos);
  CHECK(c.updates() == 0);
  // The observers are gone: a later forward changes no window.
  const WindowMap w = InstalledWindows(*model);
  {
    torch::NoGradGuard no_grad;
    model->Loss(x, x);
  }
  CHECK(InstalledWindows(*model) == w);
}

}  // namespace headlab::aah
