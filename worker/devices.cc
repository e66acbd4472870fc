// Device discovery through the CUDA runtime (when compiled with HEADLAB_HAVE_CUDA) and
// /proc for the CPU fallback.
#include "worker/devices.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

#ifdef HEADLAB_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace headlab {
namespace {

#ifdef HEADLAB_HAVE_CUDA
// Returns "13.0" for the CUDA integer version 13000.
std::string CudaVersionString(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}
#endif

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  size_t e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Returns the value after "key:" on the first matching line of a /proc file, or "".
std::string ProcField(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    size_t colon = line.find(':');
    if (colon != std::string::npos && Trim(line.substr(0, colon)) == key)
      return Trim(line.substr(colon + 1));
  }
  return "";
}

}  // namespace

Device CpuDevice() {
  Device d;
  d.kind = "cpu";
  d.name = ProcField("/proc/cpuinfo", "model name");
  if (d.name.empty()) d.name = "cpu";
  // "MemTotal:  16318024 kB"
  std::istringstream mem(ProcField("/proc/meminfo", "MemTotal"));
  uint64_t kb = 0;
  if (mem >> kb) d.memory_bytes = kb * 1024;
  if (d.memory_bytes == 0) {
    long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && page > 0) d.memory_bytes = uint64_t(pages) * uint64_t(page);
  }
  return d;
}

DeviceInventory DiscoverDevices() {
  DeviceInventory inv;
#ifdef HEADLAB_HAVE_CUDA
  int v = 0;
  if (cudaDriverGetVersion(&v) == cudaSuccess && v > 0) inv.cuda_driver = CudaVersionString(v);
  if (cudaRuntimeGetVersion(&v) == cudaSuccess && v > 0) inv.cuda_runtime = CudaVersionString(v);
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    // On GPU-less machines this is "CUDA driver version is insufficient" or "no CUDA-capable
    // device": both mean CPU-only, not a failure.
    inv.note = std::string("CUDA: ") + cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky error so nothing later trips over it
    count = 0;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, i);
    if (e != cudaSuccess) {
      inv.note = "CUDA device " + std::to_string(i) + ": " + cudaGetErrorString(e);
      continue;
    }
    Device d;
    d.index = i;
    d.name = p.name;
    d.memory_bytes = p.totalGlobalMem;
    d.cc_major = p.major;
    d.cc_minor = p.minor;
    d.kind = "cuda";
    inv.devices.push_back(d);
  }
  if (count == 0 && inv.note.empty()) inv.note = "CUDA: no devices";
#else
  inv.note = "built without CUDA";
#endif
  inv.has_gpu = !inv.devices.empty();
  if (!inv.has_gpu) inv.devices.push_back(CpuDevice());
  return inv;
}

Json DeviceToJson(const Device& d) {
  return Json{{"index", d.index},       {"name", d.name},         {"memory_bytes", d.memory_bytes},
              {"cc_major", d.cc_major}, {"cc_minor", d.cc_minor}, {"kind", d.kind}};
}

std::string ChildVisibleDevice(int ordinal, const char* inherited) {
  std::vector<std::string> entries;
  if (inherited && *inherited) {
    std::stringstream in(inherited);
    for (std::string e; std::getline(in, e, ',');) entries.push_back(e);
  }
  if (ordinal >= 0 && size_t(ordinal) < entries.size() && !entries[ordinal].empty())
    return entries[ordinal];
  return std::to_string(ordinal);
}

}  // namespace headlab
