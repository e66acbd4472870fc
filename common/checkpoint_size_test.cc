#include "common/checkpoint_size.h"

#include <catch2/catch.hpp>

#include "common/run_config.h"

namespace headlab {

TEST_CASE("124m with RoPE: 123,606,528 parameters, 1.39 GiB a checkpoint") {
  auto c = NormalizeRunConfig(Json::parse(R"({"model": {"preset": "124m", "pos": "rope"}})"), "f");
  REQUIRE(c.ok());
  // By hand: embedding 50304 x 768; per layer 2 LayerNorms (2 x 768 each), q, k, v, o
  // (768^2 each), MLP 768 x 3072 twice; final LayerNorm.
  const int64_t per_layer = 2 * 2 * 768 + 4 * 768 * 768 + 2 * 768 * 3072;
  CHECK(per_layer == 7080960);
  CHECK(ModelParameterCount(*c) == 50304 * 768 + 12 * per_layer + 2 * 768);
  CHECK(ModelParameterCount(*c) == 123606528);
  // 12 bytes a parameter (fp32 weights, exp_avg, exp_avg_sq) + 3 x 12 x 4096 fp32 per layer.
  CHECK(CheckpointBytesEstimate(*c) == 12 * 123606528LL + 4 * 12 * 3 * 12 * 4096);
  // The size a 124M checkpoint measured on the device (1.39 GiB).
  CHECK(double(CheckpointBytesEstimate(*c)) / double(1 << 30) == Approx(1.39).epsilon(0.005));
}

TEST_CASE("Learned positions, RMSNorm, GQA and the MLP ratio change the count as the model does") {
  Json c = DefaultRunConfig();  // 2 layers, 4 heads, width 128, context 128, vocab 256
  const int64_t base = 256 * 128 + 128 * 128 + 2 * (2 * 256 + 4 * 128 * 128 + 2 * 128 * 512) + 256;
  CHECK(ModelParameterCount(c) == base);
  c["model"]["norm"] = "rmsnorm";  // norms lose their bias: 5 norms x 128
  CHECK(ModelParameterCount(c) == base - 5 * 128);
  c["model"]["norm"] = "layernorm";
  c["model"]["kv_heads"] = 1;  // k and v: 128 x 32 instead of 128 x 128, per layer
  CHECK(ModelParameterCount(c) == base - 2 * 2 * 128 * 96);
  c["model"]["kv_heads"] = 0;
  c["model"]["mlp_ratio"] = 2;
  CHECK(ModelParameterCount(c) == base - 2 * 2 * 128 * 256);
  c["model"]["init_from"] = "/models/gpt2";
  CHECK(ModelParameterCount(c) == 0);
  CHECK(CheckpointBytesEstimate(c) == 0);
}

}  // namespace headlab
