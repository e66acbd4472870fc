#include "payload/exec/throughput.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

TEST_CASE("throughput: model FLOPs per token of GPT-2 124M at 4K context, by hand") {
  ModelConfig c;
  c.layers = 12;
  c.heads = 12;
  c.kv_heads = 12;
  c.width = 768;
  c.context = 4096;
  c.mlp_ratio = 4;
  c.vocab = 50304;
  // N = 12 (4 * 768^2 + 2 * 768 * 3072) + 50304 * 768 = 123,568,128 matmul parameters;
  // 6 N = 741,408,768; attention 6 * 12 * 4096 * 768 = 226,492,416.
  CHECK(ModelFlopsPerToken(c) == 967901184.0);
  c.kv_heads = 4;  // GQA shrinks K and V: 2 * 768 * (768 - 256) fewer per layer
  CHECK(ModelFlopsPerToken(c) == 967901184.0 - 6.0 * 12 * 2 * 768 * 512);
}

TEST_CASE("throughput: device peaks by name and dtype, unknown devices give none") {
  CHECK(PeakFlops("cuda:0 NVIDIA H200", "bf16") == 989.4e12);
  CHECK(PeakFlops("cuda:0 NVIDIA H100 80GB HBM3", "fp16") == 989.4e12);
  CHECK(PeakFlops("cuda:0 NVIDIA H200", "fp32") == 66.9e12);
  CHECK(PeakFlops("cuda:1 NVIDIA A100-SXM4-80GB", "bf16") == 312e12);
  CHECK(PeakFlops("cpu (2 threads)", "fp32") == 0);
}

}  // namespace
}  // namespace headlab
