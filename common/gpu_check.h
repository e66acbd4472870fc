// The one check for host-side CUDA runtime and CUPTI calls: a failed call becomes a Status
// that names the call, the file and line, and the library's error string. Torch-free and
// CUDA-free itself: the macros name cudaGetErrorString / cuptiGetResultString only where
// they are used, so a file that uses them includes <cuda_runtime_api.h> or
// <cupti_result.h> first. Device code (kernels/*.cu) and dev tools that exit keep their own.
//
//   HEADLAB_CUDA_CHECK(cudaEventRecord(e, s));          // returns the Status on failure
//   Status st = HEADLAB_CUDA_STATUS(cudaDeviceSynchronize());   // Ok or the failure
//   HEADLAB_CUPTI_CHECK(cuptiActivityFlushAll(0));
#pragma once

#include "common/status.h"

namespace headlab {

// Which library failed; CUPTI's "insufficient privileges" is its own kind.
enum class GpuApi { kCuda, kCupti, kCuptiNoPermission };

// Returns the Status for a failed call: Unavailable("CUDA <call> failed (<file>:<line>):
// <error>") or Unavailable("CUPTI ..."); for kCuptiNoPermission PermissionDenied("no
// counter permission: CUPTI ... (needs root or NVreg_RestrictProfilingToAdminUsers=0)").
// `file` is shortened to its base name; a null `error` reads "unknown error".
Status GpuCallFailed(GpuApi api, const char* call, const char* error, const char* file, int line);

}  // namespace headlab

// Evaluates a cudaError_t expression once; Ok on cudaSuccess, else GpuCallFailed.
#define HEADLAB_CUDA_STATUS(call)                                                        \
  ([&]() -> ::headlab::Status {                                                          \
    const cudaError_t headlab_e_ = (call);                                               \
    if (headlab_e_ == cudaSuccess) return ::headlab::Status::Ok();                       \
    return ::headlab::GpuCallFailed(::headlab::GpuApi::kCuda, #call,                     \
                                    cudaGetErrorString(headlab_e_), __FILE__, __LINE__); \
  }())

// Evaluates a CUptiResult expression once; Ok on CUPTI_SUCCESS, else GpuCallFailed.
#define HEADLAB_CUPTI_STATUS(call)                                                    \
  ([&]() -> ::headlab::Status {                                                       \
    const CUptiResult headlab_r_ = (call);                                            \
    if (headlab_r_ == CUPTI_SUCCESS) return ::headlab::Status::Ok();                  \
    const char* headlab_text_ = nullptr;                                              \
    cuptiGetResultString(headlab_r_, &headlab_text_);                                 \
    return ::headlab::GpuCallFailed(headlab_r_ == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES \
                                        ? ::headlab::GpuApi::kCuptiNoPermission       \
                                        : ::headlab::GpuApi::kCupti,                  \
                                    #call, headlab_text_, __FILE__, __LINE__);        \
  }())

// Return the failure from the enclosing function (which returns Status or StatusOr<T>).
#define HEADLAB_CUDA_CHECK(call) HEADLAB_RETURN_IF_ERROR(HEADLAB_CUDA_STATUS(call))
#define HEADLAB_CUPTI_CHECK(call) HEADLAB_RETURN_IF_ERROR(HEADLAB_CUPTI_STATUS(call))
