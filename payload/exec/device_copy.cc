// Host-to-device copies without a wait for the device.
#include "payload/exec/device_copy.h"

namespace headlab {

torch::Tensor ToDeviceAsync(const torch::Tensor& host, const torch::Device& device) {
  if (device.is_cuda()) return host.pin_memory().to(device, /*non_blocking=*/true);
  return host.to(device, /*non_blocking=*/false, /*copy=*/true);
}

torch::Tensor IndexTensor(const std::vector<int64_t>& v, const torch::Device& device) {
  return ToDeviceAsync(torch::tensor(v, torch::kLong), device);
}

}  // namespace headlab
