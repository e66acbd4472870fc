// GpuCallFailed: the message of a failed CUDA runtime or CUPTI call.
#include "common/gpu_check.h"

#include <cstring>
#include <string>

namespace headlab {

Status GpuCallFailed(GpuApi api, const char* call, const char* error, const char* file, int line) {
  const char* slash = file ? std::strrchr(file, '/') : nullptr;
  const std::string where = std::string(slash  ? slash + 1
                                        : file ? file
                                               : "?") +
                            ":" + std::to_string(line);
  const std::string what = std::string(api == GpuApi::kCuda ? "CUDA " : "CUPTI ") + call +
                           " failed (" + where + "): " + (error ? error : "unknown error");
  if (api == GpuApi::kCuptiNoPermission)
    return Status::PermissionDenied("no counter permission: " + what +
                                    " (needs root or NVreg_RestrictProfilingToAdminUsers=0)");
  return Status::Unavailable(what);
}

}  // namespace headlab
