// Host-to-device copies that never make the host wait for the device. A plain copy from
// pageable memory to a GPU waits until the stream's queued work is done, so one inside a
// forward stops the host from queueing ahead: every later kernel then starts only once the
// host has launched it. Included only by LibTorch translation units.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace headlab {

// Returns `host` (a CPU tensor) on `device`: through pinned memory without waiting for a
// CUDA device (LibTorch's caching host allocator keeps the pinned copy until the transfer
// is done, so `host` may go at once); a plain copy for the CPU.
torch::Tensor ToDeviceAsync(const torch::Tensor& host, const torch::Device& device);

// Returns the int64 indices `v` on `device` as ToDeviceAsync does.
torch::Tensor IndexTensor(const std::vector<int64_t>& v, const torch::Device& device);

}  // namespace headlab
