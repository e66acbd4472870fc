// NVML (the NVIDIA driver's management library), loaded at run time: dlopen of
// libnvidia-ml.so.1, so that a CPU build and a host without the driver have neither a link
// nor a load dependency on it. Used to sample an attempt's GPUs while it runs.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace headlab {

struct GpuReading {
  double util_pct = 0;          // share of the last sample period a kernel ran (0..100)
  uint64_t mem_used_bytes = 0;  // device memory in use, by every process on the device
};

// Returns a reading of `device`: a CUDA_VISIBLE_DEVICES entry, an index ("0", taken as
// NVML's index: the same as CUDA's on hosts whose GPUs CUDA orders by PCI bus, the usual
// case with CUDA_DEVICE_ORDER=PCI_BUS_ID or identical GPUs) or a UUID ("GPU-..."). The
// library is loaded and initialised on the first call; Unavailable says why it cannot be
// (no libnvidia-ml.so.1, nvmlInit failed) and is answered at once afterwards. Thread-safe.
StatusOr<GpuReading> ReadGpu(const std::string& device);

}  // namespace headlab
