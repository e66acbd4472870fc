// NVML through dlopen: the few entry points we call, declared with NVML's C ABI
// (nvml.h: nvmlReturn_t is an int enum, 0 = NVML_SUCCESS; nvmlDevice_t an opaque pointer).
#include "worker/nvml.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace headlab {
namespace {

using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlUtilization {
  unsigned int gpu;
  unsigned int memory;
};
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct Library {
  std::string error;  // why it is unavailable; "" once loaded and initialised
  int (*init)() = nullptr;
  int (*by_index)(unsigned int, NvmlDevice*) = nullptr;
  int (*by_uuid)(const char*, NvmlDevice*) = nullptr;
  int (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  int (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  const char* (*error_string)(int) = nullptr;
};

template <typename F>
bool Resolve(void* handle, const char* name, F* out) {
  *out = reinterpret_cast<F>(::dlsym(handle, name));
  return *out != nullptr;
}

// Loaded once; never unloaded (the driver library stays for the process's life).
const Library& Nvml() {
  static Library lib;
  static std::once_flag once;
  std::call_once(once, [] {
    void* h = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = ::dlerror();
      lib.error = std::string("libnvidia-ml.so.1 not loadable: ") + (e ? e : "unknown error");
      return;
    }
    if (!Resolve(h, "nvmlInit_v2", &lib.init) ||
        !Resolve(h, "nvmlDeviceGetHandleByIndex_v2", &lib.by_index) ||
        !Resolve(h, "nvmlDeviceGetHandleByUUID", &lib.by_uuid) ||
        !Resolve(h, "nvmlDeviceGetUtilizationRates", &lib.utilization) ||
        !Resolve(h, "nvmlDeviceGetMemoryInfo", &lib.memory) ||
        !Resolve(h, "nvmlErrorString", &lib.error_string)) {
      lib.error = "libnvidia-ml.so.1 lacks an NVML entry point";
      return;
    }
    if (int rc = lib.init(); rc != 0) lib.error = std::string("nvmlInit: ") + lib.error_string(rc);
  });
  return lib;
}

Status Check(const Library& lib, int rc, const std::string& what) {
  if (rc == 0) return Status::Ok();
  return Status::Unavailable(what + ": " + lib.error_string(rc));
}

}  // namespace

StatusOr<GpuReading> ReadGpu(const std::string& device) {
  const Library& lib = Nvml();
  if (!lib.error.empty()) return Status::Unavailable(lib.error);
  NvmlDevice d = nullptr;
  if (device.rfind("GPU-", 0) == 0 || device.rfind("MIG-", 0) == 0) {
    if (Status st = Check(lib, lib.by_uuid(device.c_str(), &d), "NVML device " + device); !st.ok())
      return st;
  } else {
    char* end = nullptr;
    unsigned long index = std::strtoul(device.c_str(), &end, 10);
    if (device.empty() || *end)
      return Status::InvalidArgument("not a GPU index or UUID: \"" + device + "\"");
    if (Status st = Check(lib, lib.by_index(unsigned(index), &d), "NVML device " + device);
        !st.ok())
      return st;
  }
  NvmlUtilization u{};
  NvmlMemory m{};
  if (Status st = Check(lib, lib.utilization(d, &u), "NVML utilisation of " + device); !st.ok())
    return st;
  if (Status st = Check(lib, lib.memory(d, &m), "NVML memory of " + device); !st.ok()) return st;
  return GpuReading{double(u.gpu), uint64_t(m.used)};
}

}  // namespace headlab
