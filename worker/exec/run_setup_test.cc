#include "worker/exec/run_setup.h"

#include <catch2/catch.hpp>

#include "worker/exec/attention.h"
#include "worker/exec/attention_cuda.h"
#include "worker/exec/model_testing.h"

// Provenance of train.attention = auto's measured choice: every layer's candidates and the
// one chosen, from a CPU model on the fast path's stand-ins with a deterministic timer.
namespace headlab {
namespace {

TEST_CASE("run setup: attention_choices records every layer's candidates and the fastest") {
  torch::manual_seed(7);
  Gpt model(testing::TinyModelConfig(2, 2, 128, 16, 40));  // head_dim 64
  torch::Tensor alpha = torch::randn({16}) * 0.5, rho = torch::randn({16}) * 0.3;
  model->attention(1)->SetFixedCompact(1, alpha, rho, CompactLogNormalizer(alpha, rho));
  // Time = the label's length: the shortest label wins, the first of equals on ties.
  SetPlanTimerForTesting([](const std::string& label, const std::function<void()>& run) {
    run();
    return double(label.size());
  });
  SetFastPathOnCpuForTesting(true);
  torch::Tensor x = torch::randint(0, 40, {2, 16}, torch::kLong);
  model->Loss(x, x).backward();
  SetFastPathOnCpuForTesting(false);
  SetPlanTimerForTesting(PlanTimer());
  CHECK(AttentionChoices(model) == Json::parse(R"([
    {"layer": 0, "shape": "B=2 T=16 Float fwd+bwd", "chosen": "sdpa[2]",
     "candidates_ms": {"fused[2]": 8, "sdpa[2]": 7}},
    {"layer": 1, "shape": "B=2 T=16 Float fwd+bwd", "chosen": "sdpa[1] fixed_gemm[1]",
     "candidates_ms": {"fused[1] fixed_fused[1]": 23, "sdpa[1] fixed_gemm[1]": 21,
                       "sdpa[1] fixed_conv[1]": 21, "sdpa[1] fixed_fused[1]": 22}}])"));
  CHECK(AttentionPaths(model) == Json::parse(R"({"sdpa[2]": [0], "sdpa[1] fixed_gemm[1]": [1]})"));
}

}  // namespace
}  // namespace headlab
