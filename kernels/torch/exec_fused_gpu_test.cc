// The training loop's attention on CUDA (worker/exec/attention_cuda.h) against the dense
// reference layer: a small Gpt with every head mode (ordinary, fixed compact, streaming,
// local, pruned) and GQA gives the same loss and parameter gradients through the fused op as
// through the dense masks on the same device (fp32, issue 7: relative L2 <= 1e-5), and the
// training loop's steps on CUDA run through the op. Needs a GPU (ctest label gpu).
#include <catch2/catch.hpp>

#include <cstdio>
#include <map>
#include <string>

#include <torch/torch.h>

#include "common/run_config.h"
#include "worker/exec/attention_cuda.h"
#include "worker/exec/model.h"
#include "worker/exec/test_util.h"
#include "worker/exec/train.h"

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
    torch::Tensor rho = -0.05 * torch::arange(context, torch::kFloat) + torch::randn({context}) * 0.2;
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

TEST_CASE("fused attention: a mixed-head Gpt on CUDA matches the dense reference") {
  REQUIRE(torch::cuda::is_available());
  REQUIRE(FusedAttentionCompiled());
  CHECK(std::string(AttentionBackendName(torch::Device(torch::kCUDA, 0))) == "fused_cuda");
  CHECK(std::string(AttentionBackendName(torch::Device(torch::kCPU))) == "dense_reference");
  for (const char* pos : {"rope", "learned"}) {
    ModelConfig c;
    c.layers = 2;
    c.heads = 4;
    c.kv_heads = std::string(pos) == "rope" ? 2 : 4;  // GQA with RoPE, plain MHA without
    c.width = 256;  // head_dim 64
    c.context = 97;
    c.mlp_ratio = 2;
    c.vocab = 64;
    c.pos = pos;
    c.rope_base = 10000;
    c.norm = std::string(pos) == "rope" ? "rmsnorm" : "layernorm";
    INFO("pos " << pos);
    torch::manual_seed(5);
    Gpt model(c);
    model->to(torch::kCUDA);
    InstallModes(model, c.context);
    torch::Tensor x = torch::randint(0, c.vocab, {3, c.context}, torch::kLong).to(torch::kCUDA);
    torch::Tensor y = torch::randint(0, c.vocab, {3, c.context}, torch::kLong).to(torch::kCUDA);

    SetFusedAttentionEnabled(false);
    const int64_t calls0 = FusedAttentionCalls();
    LossAndGrads dense = LossAndGradients(model, x, y);
    CHECK(FusedAttentionCalls() == calls0);
    SetFusedAttentionEnabled(true);
    LossAndGrads fused = LossAndGradients(model, x, y);
    CHECK(FusedAttentionCalls() == calls0 + c.layers);  // every layer took the op

    CHECK(std::abs(fused.loss - dense.loss) <= 1e-5 * std::abs(dense.loss));
    double worst = 0;
    for (const auto& [name, want] : dense.grads) {
      INFO("parameter " << name);
      const torch::Tensor& got = fused.grads[name];
      REQUIRE(got.defined() == want.defined());
      if (!want.defined()) continue;
      const double err = RelL2(got, want);
      worst = std::max(worst, err);
      CHECK(err <= 1e-5);
    }
    std::printf("fused vs dense (pos %s): loss %.9g vs %.9g, worst gradient rel L2 %.3g\n", pos,
                fused.loss, dense.loss, worst);
    // Fixed heads use no Q/K rows: exact zeros in the weight gradients (layer 0, head 3).
    const torch::Tensor& dq = fused.grads["blocks.0.attn.q_proj.weight"];
    CHECK(dq.narrow(0, 3 * 64, 64).abs().max().item<float>() == 0.f);
    // Layer 1 head 0 is pruned: its output projection columns see zeros.
    const torch::Tensor& d_o = fused.grads["blocks.1.attn.o_proj.weight"];
    CHECK(d_o.narrow(1, 0, 64).abs().max().item<float>() == 0.f);
  }
}

TEST_CASE("fused attention: the training loop's steps on CUDA run through the op") {
  REQUIRE(torch::cuda::is_available());
  Json config = {{"seed", 3},
                 {"model", {{"layers", 2}, {"heads", 2}, {"width", 128}, {"context", 64},
                            {"head_modes", "0.1=local:9,1.0=streaming:2:7"}}},
                 {"train", {{"steps", 6}, {"batch_size", 4}, {"warmup_steps", 2},
                            {"device", "cuda"}}}};
  StatusOr<Json> normalized = NormalizeRunConfig(config, "test");
  REQUIRE(normalized.ok());
  StatusOr<ExecConfig> c = ExecConfigFromJson(normalized.value(), "test");
  REQUIRE(c.ok());
  const std::string dir = testing::ScratchPath("headlab_exec_fused_train");
  testing::RemoveTree(dir);
  FILE* f = std::tmpfile();
  REQUIRE(f);
  EventSink sink(f);
  const int64_t calls0 = FusedAttentionCalls();
  Status st = RunTraining(TrainRequest{c.value(), normalized.value(), dir, std::nullopt}, &sink);
  REQUIRE(st.ok());
  // At least one forward per layer per training step (evaluation adds more).
  CHECK(FusedAttentionCalls() - calls0 >= 6 * 2);
  std::rewind(f);
  char line[8192];
  int losses = 0;
  while (std::fgets(line, sizeof line, f)) {
    Json j = Json::parse(line);
    if (j["ev"] == "metric" && j["key"] == "train.loss") {
      CHECK(std::isfinite(j["value"].get<double>()));
      ++losses;
    }
  }
  std::fclose(f);
  CHECK(losses > 0);
  testing::RemoveTree(dir);
}

}  // namespace
}  // namespace headlab
