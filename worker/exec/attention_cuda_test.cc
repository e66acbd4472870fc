#include "worker/exec/attention_cuda.h"

#include <catch2/catch.hpp>

#include <string>

#include "worker/exec/attention.h"

// The CPU side of the fused-attention dispatch; the fused path itself is tested on the
// device (kernels/torch/exec_fused_gpu_test.cc, label gpu).
namespace headlab {
namespace {

TEST_CASE("attention_cuda: CPU layers take the dense reference and say why") {
  HybridAttention layer(128, 2, 2, 16);  // head_dim 64
  torch::Tensor x = torch::randn({1, 8, 128});
  CHECK(FusedAttentionUnsupported(*layer, x) == "input not on CUDA");
  CHECK(std::string(AttentionBackendName(torch::Device(torch::kCPU))) == "dense_reference");
  // A CUDA device gets the fused backend exactly when this build links the op.
  const std::string cuda = AttentionBackendName(torch::Device(torch::kCUDA, 0));
  CHECK(cuda == (FusedAttentionCompiled() ? "fused_cuda" : "dense_reference"));
  SetFusedAttentionEnabled(false);
  CHECK(std::string(AttentionBackendName(torch::Device(torch::kCUDA, 0))) == "dense_reference");
  SetFusedAttentionEnabled(true);
  const int64_t calls = FusedAttentionCalls();
  torch::Tensor y = layer->forward(x);  // the CPU path never counts as fused
  CHECK(y.sizes() == x.sizes());
  CHECK(FusedAttentionCalls() == calls);
  if (!FusedAttentionCompiled())
    CHECK_THROWS(FusedAttentionForward(*layer, x, {}));  // no op linked: refuses, not silently dense
}

}  // namespace
}  // namespace headlab
