// hybrid_attention_internal.cuh: what the kernel files share — the launch parameters, dtype
// conversion, strided element addressing and the conversion of skip spans to key/query
// block ranges. Included by .cu files only.
#pragma once

#include <atomic>
#include <utility>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>

#include "kernels/head_mask.h"
#include "kernels/hybrid_attention.h"

namespace headlab {
namespace kernels {
namespace internal {

// Returns OK for cudaSuccess, else kCudaError with CUDA's message: the one conversion of a
// launch's cudaError_t to the kernels' status.
inline KernelStatus FromCuda(cudaError_t e) {
  if (e == cudaSuccess) return {};
  return {KernelCode::kCudaError, cudaGetErrorString(e)};
}

// A device copy of HeadSpec (40 bytes); all heads travel in the kernel parameters.
struct DeviceHead {
  int32_t state, window, sink, recent;
  const float* alpha;
  const float* rho;
  const float* log_z;
};

struct View {
  void* data;
  int64_t sb, st, sh;
};

// Everything one launch needs, passed by value (CUDA 12.1+ allows 32 KB of parameters).
struct Params {
  int B, T, H, G, d;
  float scale;
  View q, k, v, o, d_o, dq, dk, dv;
  float* lse;     // (B, H, T)
  float* dq_acc;  // (B, H, T, d) fp32, backward only
  float* delta;   // (B, H, T) rowsum(dO * O), backward only
  DeviceHead heads[kMaxHeads];
};

template <typename T>
__device__ __forceinline__ float ToFloat(T x);
template <>
__device__ __forceinline__ float ToFloat<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ float ToFloat<__nv_bfloat16>(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <>
__device__ __forceinline__ float ToFloat<__half>(__half x) {
  return __half2float(x);
}

template <typename T>
__device__ __forceinline__ T FromFloat(float x);
template <>
__device__ __forceinline__ float FromFloat<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float x) {
  return __float2half_rn(x);
}

// N elements of T read or written as one access of N * sizeof(T) bytes (the address must be
// aligned to that): Pack<__nv_bfloat16, 8> is a 16-byte load.
template <typename T, int N>
struct alignas(N * sizeof(T)) Pack {
  T v[N];
};

// Programmatic dependent launch (PDL, compute 9.0+). A kernel launched with programmatic
// stream serialization (the decode step's kernels) may start once every CTA of the kernel
// before it has called LetDependentsStart (or exited); it must call WaitForPrevious, which
// returns when that kernel has finished and its writes are visible, before it reads anything
// that kernel writes, before it writes anything at all, and before any CTA returns (so that
// it cannot finish before that kernel, and completion stays ordered along the stream). Both
// are no-ops without the launch attribute and before compute 9.0.
__device__ __forceinline__ void LetDependentsStart() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}
__device__ __forceinline__ void WaitForPrevious() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Whether the current device is compute 9.0+, where PDL exists (asked once per device).
inline bool DeviceTakesPdl() {
  constexpr int kDevices = 64;
  static std::atomic<int> major_plus_one[kDevices];  // 0: not asked yet
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kDevices) return false;
  int known = major_plus_one[dev].load(std::memory_order_relaxed);
  if (known == 0) {
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
      return false;
    known = major + 1;
    major_plus_one[dev].store(known, std::memory_order_relaxed);
  }
  return known - 1 >= 9;
}

// Launches kernel<<<grid, block, 0, stream>>>(args...), with programmatic stream
// serialization (PDL) when `overlap` and the device has it: the kernel must then call
// WaitForPrevious as above.
template <typename... Params, typename... Args>
cudaError_t LaunchOverlapping(bool overlap, dim3 grid, dim3 block, cudaStream_t stream,
                              void (*kernel)(Params...), Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = overlap && DeviceTakesPdl() ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

// Maximum and sum over the 32 lanes of a warp.
__device__ __forceinline__ float WarpMax(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float WarpSum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// One warp stages factors for a product form (SAF eq. 3): v holds entries lane + 32 i;
// the first n go to raw[j] and ex[j] = e^{v_j - max}. Returns the max over the warp.
template <int kPer>
__device__ __forceinline__ float StageExpFactors(const float (&v)[kPer], int n, float* raw,
                                                 float* ex) {
  const int lane = threadIdx.x % 32;
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < kPer; ++i) mx = fmaxf(mx, v[i]);
  mx = WarpMax(mx);
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int j = lane + 32 * i;
    if (j < n) {
      raw[j] = v[i];
      ex[j] = __expf(v[i] - mx);
    }
  }
  return mx;
}

// Returns a pointer to element (b, t, h, 0) of a view.
template <typename T>
__device__ __forceinline__ T* At(const View& v, int b, int t, int h) {
  return reinterpret_cast<T*>(v.data) + b * v.sb + t * v.st + h * v.sh;
}

// Block index ranges [a0, a1) and [b0, b1) (disjoint, ascending) covering a SpanPair for
// blocks of `blk` positions. Iterating n in [0, Count()) visits each block once.
struct BlockRanges {
  int a0, a1, b0, b1;
  __device__ __forceinline__ int Count() const { return (a1 - a0) + (b1 - b0); }
  __device__ __forceinline__ int Block(int n) const {
    return n < a1 - a0 ? a0 + n : b0 + n - (a1 - a0);
  }
};

__device__ __forceinline__ BlockRanges ToBlocks(SpanPair s, int blk) {
  BlockRanges r{0, 0, 0, 0};
  if (s.hi0 > s.lo0) {
    r.a0 = s.lo0 / blk;
    r.a1 = (s.hi0 + blk - 1) / blk;
  }
  if (s.hi1 > s.lo1) {
    r.b0 = s.lo1 / blk;
    r.b1 = (s.hi1 + blk - 1) / blk;
    if (r.b0 < r.a1) r.b0 = r.a1;  // a block shared by both spans is visited once
    if (r.b1 < r.b0) r.b1 = r.b0;
  }
  return r;
}

__device__ __forceinline__ bool Visible(const DeviceHead& h, int q, int k) {
  return KeyVisible(static_cast<HeadState>(h.state), h.window, h.sink, h.recent, q, k);
}

// KeyVisible in the form the backwards' tile masks evaluate per element: (q, k) is visible
// iff k <= q and (k > q - window or k < sink), with window and sink set by the head's state.
// (The forwards use head_mask.h's branch-free RowVisibility; written the same way for the
// backward's key rows, it raised the d = 128 mma.sync backward's spills from 24 to 80 bytes.)
struct VisibleBand {
  int window, sink;
  __device__ __forceinline__ bool Visible(int q, int k) const {
    return k <= q && (k > q - window || k < sink);
  }
};

__device__ __forceinline__ VisibleBand BandOf(const DeviceHead& h) {
  switch (static_cast<HeadState>(h.state)) {
    case HeadState::kOrdinary:
    case HeadState::kFixed:
      return {1 << 30, 0};
    case HeadState::kLocal:
      return {h.window, 0};
    case HeadState::kStreaming:
      return {h.recent, h.sink};
    default:
      return {0, 0};  // pruned: nothing
  }
}

// Returns true iff every (q, k) in [q0, q1] x [k0, k1] (inclusive) is visible to `h`: then
// a tile needs no per-element mask.
__device__ __forceinline__ bool TileAllVisible(const DeviceHead& h, int q0, int q1, int k0,
                                               int k1) {
  if (k1 > q0) return false;  // causal
  switch (static_cast<HeadState>(h.state)) {
    case HeadState::kOrdinary:
    case HeadState::kFixed:
      return true;
    case HeadState::kLocal:
      return k0 > q1 - h.window;
    case HeadState::kStreaming:
      return k1 < h.sink || k0 > q1 - h.recent;
    default:
      return false;
  }
}

// Launches kernel(p) on `grid` x `threads` with `smem` bytes of dynamic shared memory (the
// attribute lifts the 48 KB default); returns the first CUDA error. P is Params or a kernel's
// own parameter struct around it.
template <typename Kernel, typename P>
cudaError_t LaunchWithSmem(Kernel kernel, dim3 grid, int threads, size_t smem, cudaStream_t s,
                           const P& p) {
  cudaError_t e =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (e != cudaSuccess) return e;
  kernel<<<grid, threads, smem, s>>>(p);
  return cudaGetLastError();
}

// Forward / backward launchers of each implementation (return a CUDA error code).
template <typename T>
cudaError_t LaunchSimtForward(const Params& p, cudaStream_t s);
template <typename T>
cudaError_t LaunchSimtBackward(const Params& p, cudaStream_t s);
template <typename T>
cudaError_t LaunchMmaForward(const Params& p, cudaStream_t s);
template <typename T>
cudaError_t LaunchMmaBackward(const Params& p, cudaStream_t s);
// sm_90a only, d = 64 (Sm90a in hybrid_attention.cu).
template <typename T>
cudaError_t LaunchWgmmaForward(const Params& p, cudaStream_t s);
// sm_90a only, d = 64 or 128, every head state (hybrid_attention_ws.cu).
template <typename T>
cudaError_t LaunchWsForward(const Params& p, cudaStream_t s);
// sm_90a only, d = 64 or 128, every head state (hybrid_attention_ws_bwd.cu).
template <typename T>
cudaError_t LaunchWsBackward(const Params& p, cudaStream_t s);
template <typename T>
cudaError_t LaunchWgmmaBackward(const Params& p, cudaStream_t s);
// Shared by both backward implementations.
template <typename T>
cudaError_t LaunchBackwardPreprocess(const Params& p, cudaStream_t s);
template <typename T>
cudaError_t LaunchBackwardFinish(const Params& p, cudaStream_t s);

}  // namespace internal
}  // namespace kernels
}  // namespace headlab
