// NoGpuReason through the CUDA runtime's device count.
#include "payload/measure/gpu_presence.h"

#if HEADLAB_MEASURE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace headlab::measure {

std::string NoGpuReason() {
#if HEADLAB_MEASURE_HAVE_CUDA
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  // A machine without the driver answers cudaErrorInsufficientDriver (or NoDevice): that is
  // "no GPU", an expected state of CPU workers, not a failure.
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return std::string("no GPU: ") + cudaGetErrorString(err);
  }
  if (count == 0) return "no GPU: no CUDA device is visible";
  return "";
#else
  return "no GPU: built without CUDA";
#endif
}

}  // namespace headlab::measure
