// Device discovery: the CUDA GPUs this host can run attempts on, or one CPU "device".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"

namespace headlab {

// One device as READY reports it (schema/protocol.md, `device`).
struct Device {
  int index = 0;  // CUDA ordinal (the CUDA_VISIBLE_DEVICES value); 0 for the CPU
  std::string name;
  uint64_t memory_bytes = 0;
  int cc_major = 0;  // compute capability; 0.0 for the CPU
  int cc_minor = 0;
  std::string kind = "cpu";  // "cuda" | "cpu"
};

// What discovery found. `cuda_driver` / `cuda_runtime` are "13.0"-style versions, or
// "none" when there is no usable driver or the binary was built without CUDA.
struct DeviceInventory {
  std::vector<Device> devices;  // never empty: CPU-only hosts get one "cpu" device
  bool has_gpu = false;
  std::string cuda_driver = "none";
  std::string cuda_runtime = "none";
  std::string note;  // why there is no GPU (the CUDA error), for the log
};

// Returns the host's devices. Never fails: any CUDA error (no driver, "CUDA driver version
// is insufficient", no device) means "no GPU" and yields the CPU device.
DeviceInventory DiscoverDevices();

// Returns the CPU device: model name from /proc/cpuinfo, memory from /proc/meminfo.
Device CpuDevice();

// Returns `d` as the protocol's device object.
Json DeviceToJson(const Device& d);

// Returns the CUDA_VISIBLE_DEVICES value that gives a child process this worker's device
// `ordinal`. CUDA numbers devices within the worker's own visible set, so when the worker
// itself runs under CUDA_VISIBLE_DEVICES (`inherited`, e.g. Slurm's "4,5" for a job
// given GPUs 4 and 5) the child needs that set's entry, not the ordinal. `inherited`
// null or empty, or an ordinal past its end: the ordinal itself.
std::string ChildVisibleDevice(int ordinal, const char* inherited);

}  // namespace headlab
