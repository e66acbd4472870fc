// add_norm.cu: the residual add and norm of a decode step as one kernel (add_norm.h).
#include "kernels/add_norm.h"

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/hybrid_attention_internal.cuh"  // ToFloat, FromFloat, WarpSum

namespace headlab {
namespace kernels {
namespace {

using internal::FromFloat;
using internal::ToFloat;
using internal::WarpSum;

constexpr int kThreads = 256;
constexpr int kPerThread = kMaxAddNormWidth / kThreads;

// The sum of v over the CTA (every thread gets it); `red` holds one float per warp.
__device__ __forceinline__ float BlockSum(float v, float* red) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = WarpSum(v);
  __syncthreads();  // red is free (a previous BlockSum has been read)
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float total = 0.f;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) total += red[w];
  return total;
}

// Any row up to kMaxAddNormWidth: one CTA of kThreads per row.
template <typename TD, typename TY>
__global__ void __launch_bounds__(kThreads) AddNormKernel(const AddNormArgs a) {
  internal::LetDependentsStart();  // the next GEMM's weights load while this runs (decode_linear.h)
  internal::WaitForPrevious();     // launched overlapping: delta is the previous kernel's output
  __shared__ float red[kThreads / 32];
  const int row = blockIdx.x, tid = threadIdx.x;
  float* x = a.x + int64_t(row) * a.x_stride;
  const TD* delta =
      a.delta ? static_cast<const TD*>(a.delta) + int64_t(row) * a.delta_stride : nullptr;
  float v[kPerThread];
  float sum = 0.f;
#pragma unroll
  for (int u = 0; u < kPerThread; ++u) {
    const int c = tid + u * kThreads;
    v[u] = 0.f;
    if (c < a.width) {
      v[u] = x[c];
      if (delta) {
        v[u] += ToFloat(delta[c]);
        x[c] = v[u];
      }
      sum += v[u];
    }
  }
  float mean = 0.f;
  if (!a.rms) mean = BlockSum(sum, red) / float(a.width);
  float sq = 0.f;
#pragma unroll
  for (int u = 0; u < kPerThread; ++u) {
    const int c = tid + u * kThreads;
    if (c < a.width) sq += (v[u] - mean) * (v[u] - mean);
  }
  const float rstd = rsqrtf(BlockSum(sq, red) / float(a.width) + a.eps);
  TY* y = static_cast<TY*>(a.y) + int64_t(row) * a.y_stride;
#pragma unroll
  for (int u = 0; u < kPerThread; ++u) {
    const int c = tid + u * kThreads;
    if (c < a.width) {
      float out = (v[u] - mean) * rstd * a.weight[c];
      if (a.bias) out += a.bias[c];
      y[c] = FromFloat<TY>(out);
    }
  }
}

// Rows of up to kWarpRowWidth elements, one warp each: lane l holds the 4-element vectors
// l, l + 32, ... of its row in registers (16-byte fp32 loads, 8-byte bf16/fp16 ones), the
// statistics are warp shuffles and no thread waits at a CTA barrier. A 768-wide row is 6
// vectors a lane. The block kernel above spends its time in two barriers per row for 3
// elements a thread (62 us for 8192 rows of 768 on an H200, a quarter of the bandwidth).
constexpr int kWarpRowWidth = 1024;
constexpr int kWarpRowVectors = kWarpRowWidth / 128;
constexpr int kRowsPerCta = 4;

template <typename T>
using Pack4 = internal::Pack<T, 4>;

template <typename T>
__device__ __forceinline__ Pack4<T> Load4(const T* p) {
  return *reinterpret_cast<const Pack4<T>*>(p);
}

template <typename TD, typename TY>
__global__ void __launch_bounds__(32 * kRowsPerCta) AddNormWarpRowKernel(const AddNormArgs a) {
  internal::LetDependentsStart();  // the next GEMM's weights load while this runs (decode_linear.h)
  internal::WaitForPrevious();     // launched overlapping: delta is the previous kernel's output
  const int lane = threadIdx.x % 32, row = blockIdx.x * kRowsPerCta + threadIdx.x / 32;
  if (row >= a.rows) return;  // a whole warp: the shuffles below see all 32 lanes
  float* x = a.x + int64_t(row) * a.x_stride;
  const TD* delta =
      a.delta ? static_cast<const TD*>(a.delta) + int64_t(row) * a.delta_stride : nullptr;
  float v[kWarpRowVectors][4];
  float sum = 0.f;
#pragma unroll
  for (int u = 0; u < kWarpRowVectors; ++u) {
    const int c = 4 * (lane + 32 * u);
    Pack4<float> xv{};
    if (c < a.width) {
      xv = Load4(x + c);
      if (delta) {
        const Pack4<TD> dv = Load4(delta + c);
#pragma unroll
        for (int i = 0; i < 4; ++i) xv.v[i] += ToFloat(dv.v[i]);
        *reinterpret_cast<Pack4<float>*>(x + c) = xv;
      }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[u][i] = xv.v[i];
      sum += xv.v[i];
    }
  }
  const float mean = a.rms ? 0.f : WarpSum(sum) / float(a.width);
  float sq = 0.f;
#pragma unroll
  for (int u = 0; u < kWarpRowVectors; ++u)
    if (4 * (lane + 32 * u) < a.width)
#pragma unroll
      for (int i = 0; i < 4; ++i) sq += (v[u][i] - mean) * (v[u][i] - mean);
  const float rstd = rsqrtf(WarpSum(sq) / float(a.width) + a.eps);
  TY* y = static_cast<TY*>(a.y) + int64_t(row) * a.y_stride;
#pragma unroll
  for (int u = 0; u < kWarpRowVectors; ++u) {
    const int c = 4 * (lane + 32 * u);
    if (c >= a.width) continue;
    const Pack4<float> w = Load4(a.weight + c);
    const Pack4<float> bias = a.bias ? Load4(a.bias + c) : Pack4<float>{};
    Pack4<TY> out;
#pragma unroll
    for (int i = 0; i < 4; ++i)
      out.v[i] = FromFloat<TY>((v[u][i] - mean) * rstd * w.v[i] + bias.v[i]);
    *reinterpret_cast<Pack4<TY>*>(y + c) = out;
  }
}

// The warp-row kernel takes rows of <= kWarpRowWidth that split into aligned 4-element
// vectors, when there are enough of them: kWarpRowMinRows rows make 128 CTAs of 4 warps, about
// one per SM of an H200. A decode step's few rows (one per sequence) spread each row over a
// CTA of 8 warps instead: the bench's B = 16 step took ~45-70 us longer (12 layers, 25
// launches) with a warp per row (docs/BENCHMARKS.md, "Decode").
constexpr int kWarpRowMinRows = 512;

bool WarpRows(const AddNormArgs& a) {
  auto aligned = [](const void* p, DType t) {
    return AlignedTo(p, 4 * DTypeSize(t));
  };  // 4-element vectors
  return a.rows >= kWarpRowMinRows && a.width <= kWarpRowWidth && a.width % 4 == 0 &&
         a.x_stride % 4 == 0 && a.y_stride % 4 == 0 && (!a.delta || a.delta_stride % 4 == 0) &&
         aligned(a.x, DType::kF32) && aligned(a.weight, DType::kF32) &&
         aligned(a.bias, DType::kF32) && aligned(a.delta, a.delta_dtype) && aligned(a.y, a.y_dtype);
}

template <typename TD, typename TY>
cudaError_t Launch(const AddNormArgs& a, cudaStream_t s) {
  if (WarpRows(a))
    return internal::LaunchOverlapping(a.overlap_previous,
                                       dim3((a.rows + kRowsPerCta - 1) / kRowsPerCta),
                                       dim3(32 * kRowsPerCta), s, AddNormWarpRowKernel<TD, TY>, a);
  return internal::LaunchOverlapping(a.overlap_previous, dim3(a.rows), dim3(kThreads), s,
                                     AddNormKernel<TD, TY>, a);
}

template <typename TD>
cudaError_t LaunchY(const AddNormArgs& a, cudaStream_t s) {
  cudaError_t e;
  switch (a.y_dtype) {
    case DType::kF32:
      e = Launch<TD, float>(a, s);
      break;
    case DType::kBF16:
      e = Launch<TD, __nv_bfloat16>(a, s);
      break;
    default:
      e = Launch<TD, __half>(a, s);
      break;
  }
  return e == cudaSuccess ? cudaGetLastError() : e;
}

}  // namespace

KernelStatus ValidateAddNorm(const AddNormArgs& a) {
  if (a.rows < 1) return Invalid("add_norm: rows must be >= 1");
  if (a.width < 1 || a.width > kMaxAddNormWidth)
    return Invalid("add_norm: width must be in [1, kMaxAddNormWidth]");
  if (a.x == nullptr || a.weight == nullptr || a.y == nullptr)
    return Invalid("add_norm: x, weight or y is null");
  if (a.x_stride < a.width || a.y_stride < a.width || (a.delta && a.delta_stride < a.width))
    return Invalid("add_norm: a row stride is shorter than the width");
  if (a.rms && a.bias) return Invalid("add_norm: RMSNorm has no bias");
  if (!(a.eps > 0.f)) return Invalid("add_norm: eps must be > 0");
  for (DType t : {a.delta_dtype, a.y_dtype})
    if (t != DType::kF32 && t != DType::kBF16 && t != DType::kF16)
      return Invalid("add_norm: unknown dtype");
  return {};
}

KernelStatus AddNorm(const AddNormArgs& a, void* stream) {
  KernelStatus st = ValidateAddNorm(a);
  if (!st.ok()) return st;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  cudaError_t e;
  switch (a.delta_dtype) {
    case DType::kF32:
      e = LaunchY<float>(a, s);
      break;
    case DType::kBF16:
      e = LaunchY<__nv_bfloat16>(a, s);
      break;
    default:
      e = LaunchY<__half>(a, s);
      break;
  }
  return internal::FromCuda(e);
}

}  // namespace kernels
}  // namespace headlab
