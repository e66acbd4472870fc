#include "payload/exec/device_copy.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {

TEST_CASE("device copy: the indices arrive as int64, a copy independent of the host") {
  const torch::Device cpu(torch::kCPU);
  torch::Tensor idx = IndexTensor({3, 0, 7}, cpu);
  CHECK(idx.scalar_type() == torch::kLong);
  REQUIRE(idx.numel() == 3);
  CHECK(idx[0].item<int64_t>() == 3);
  CHECK(idx[2].item<int64_t>() == 7);
  CHECK(IndexTensor({}, cpu).numel() == 0);

  std::vector<float> host = {1.5f, -2.f};
  torch::Tensor view = torch::from_blob(host.data(), {2}, torch::kFloat);
  torch::Tensor copy = ToDeviceAsync(view, cpu);
  host[0] = 9.f;  // the caller may reuse its buffer at once
  CHECK(copy[0].item<float>() == 1.5f);
  CHECK(copy[1].item<float>() == -2.f);
}

}  // namespace headlab
