// add_norm.cu: the residual add and norm of a decode step as one kernel (add_norm.h).
#include "kernels/add_norm.h"

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

template <typename TD, typename TY>
__global__ void __launch_bounds__(kThreads) AddNormKernel(const AddNormArgs a) {
  __shared__ float red[kThreads / 32];
  const int row = blockIdx.x, tid = threadIdx.x;
  float* x = a.x + int64_t(row) * a.x_stride;
  const TD* delta = a.delta ? static_cast<const TD*>(a.delta) + int64_t(row) * a.delta_stride : nullptr;
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

template <typename TD>
cudaError_t LaunchY(const AddNormArgs& a, cudaStream_t s) {
  switch (a.y_dtype) {
    case DType::kF32: AddNormKernel<TD, float><<<a.rows, kThreads, 0, s>>>(a); break;
    case DType::kBF16: AddNormKernel<TD, __nv_bfloat16><<<a.rows, kThreads, 0, s>>>(a); break;
    default: AddNormKernel<TD, __half><<<a.rows, kThreads, 0, s>>>(a); break;
  }
  return cudaGetLastError();
}

}  // namespace

KernelStatus ValidateAddNorm(const AddNormArgs& a) {
  if (a.rows < 1) return Invalid("add_norm: rows must be >= 1");
  if (a.width < 1 || a.width > kMaxAddNormWidth) return Invalid("add_norm: width must be in [1, kMaxAddNormWidth]");
  if (a.x == nullptr || a.weight == nullptr || a.y == nullptr) return Invalid("add_norm: x, weight or y is null");
  if (a.x_stride < a.width || a.y_stride < a.width || (a.delta && a.delta_stride < a.width))
    return Invalid("add_norm: a row stride is shorter than the width");
  if (a.rms && a.bias) return Invalid("add_norm: RMSNorm has no bias");
  if (!(a.eps > 0.f)) return Invalid("add_norm: eps must be > 0");
  for (DType t : {a.delta_dtype, a.y_dtype})
    if (t != DType::kF32 && t != DType::kBF16 && t != DType::kF16) return Invalid("add_norm: unknown dtype");
  return {};
}

KernelStatus AddNorm(const AddNormArgs& a, void* stream) {
  KernelStatus st = ValidateAddNorm(a);
  if (!st.ok()) return st;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  cudaError_t e;
  switch (a.delta_dtype) {
    case DType::kF32: e = LaunchY<float>(a, s); break;
    case DType::kBF16: e = LaunchY<__nv_bfloat16>(a, s); break;
    default: e = LaunchY<__half>(a, s); break;
  }
  if (e != cudaSuccess) return {KernelCode::kCudaError, cudaGetErrorString(e)};
  return {};
}

}  // namespace kernels
}  // namespace headlab
