// decode_linear.cu: a decode step's linear layer, y = x W^T (+ bias), for M <= 16 rows
// (decode_linear.h).
#include "kernels/decode_linear.h"

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/hybrid_attention_internal.cuh"  // FromFloat, ToFloat
#include "kernels/mma_primitives.cuh"             // Mma

namespace headlab {
namespace kernels {
namespace {

using internal::FromFloat;
using internal::Mma;
using internal::ToFloat;

constexpr int kWarps = 8;
constexpr int kBatch = 4;  // 32-wide k blocks a warp loads before it multiplies any

__device__ __forceinline__ uint4 Load16(const void* p) {
  return *reinterpret_cast<const uint4*>(p);
}

// The activation on the fp32 sum (decode_linear.h).
__device__ __forceinline__ float Activate(float y, DecodeActivation act) {
  if (act == DecodeActivation::kGelu) return 0.5f * y * (1.f + erff(y * 0.70710678118654752f));
  if (act == DecodeActivation::kGeluTanh)
    return 0.5f * y * (1.f + tanhf(0.79788456080286536f * (y + 0.044715f * y * y * y)));
  return y;
}

// CTA j: output columns [8 j, 8 j + 8); warp w: k blocks w, w + kWarps, ... in batches of
// kBatch. The weights do not depend on the kernel before this one: the first batch's are
// loaded before WaitForPrevious (under PDL, while that kernel still runs), and each later
// batch's while the one before it is multiplied.
template <typename T>
__global__ void __launch_bounds__(32 * kWarps) DecodeLinearKernel(const DecodeLinearArgs a) {
  internal::LetDependentsStart();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int n0 = blockIdx.x * 8;
  // The lane's rows of x (g and g + 8; zero past M) and of the weight tile (n0 + g), at its
  // 8 k values of a block: 8c .. 8c + 7.
  const bool row0 = g < a.rows, row1 = g + 8 < a.rows;
  const T* x0 = static_cast<const T*>(a.x) + int64_t(g) * a.x_stride + 8 * c;
  const T* x1 = static_cast<const T*>(a.x) + int64_t(g + 8) * a.x_stride + 8 * c;
  const T* wr = static_cast<const T*>(a.w) + int64_t(n0 + g) * a.w_stride + 8 * c;
  const int blocks = a.in / 32;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  auto load_weights = [&](int kb0, uint4(&wv)[kBatch]) {
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int kb = kb0 + u * kWarps;
      wv[u] = kb < blocks ? Load16(wr + kb * 32) : zero;
    }
  };
  uint4 wv[kBatch];
  load_weights(warp, wv);
  internal::WaitForPrevious();  // x is the previous kernel's output
  float acc[4] = {};
  for (int kb0 = warp; kb0 < blocks; kb0 += kWarps * kBatch) {
    uint4 xa[kBatch], xb[kBatch], next[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {  // every load of the batch in flight at once
      const int kb = kb0 + u * kWarps;
      const bool in = kb < blocks;
      xa[u] = in && row0 ? Load16(x0 + kb * 32) : zero;
      xb[u] = in && row1 ? Load16(x1 + kb * 32) : zero;
    }
    load_weights(kb0 + kWarps * kBatch, next);
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      // Logical k 0..15 of the block: physical 8c + {0..3}; 16..31: 8c + {4..7}.
      const uint32_t lo[4] = {xa[u].x, xb[u].x, xa[u].y, xb[u].y};
      Mma<T>::Run(acc, lo, wv[u].x, wv[u].y);
      const uint32_t hi[4] = {xa[u].z, xb[u].z, xa[u].w, xb[u].w};
      Mma<T>::Run(acc, hi, wv[u].z, wv[u].w);
      wv[u] = next[u];
    }
  }
  // The warps' partial sums through shared memory: red[warp][i][lane] is accumulator i of the
  // lane (row g + 8 (i / 2), column n0 + 2c + i % 2).
  __shared__ float red[kWarps][4][32];
#pragma unroll
  for (int i = 0; i < 4; ++i) red[warp][i][lane] = acc[i];
  __syncthreads();
  if (threadIdx.x >= 128) return;
  const int i = threadIdx.x / 32, l = threadIdx.x % 32;
  const int row = l / 4 + 8 * (i / 2), col = n0 + 2 * (l % 4) + i % 2;
  if (row >= a.rows) return;
  float sum = 0.f;
#pragma unroll
  for (int v = 0; v < kWarps; ++v) sum += red[v][i][l];
  if (a.bias) sum += ToFloat(static_cast<const T*>(a.bias)[col]);
  static_cast<T*>(a.y)[int64_t(row) * a.y_stride + col] = FromFloat<T>(Activate(sum, a.activation));
}

template <typename T>
cudaError_t Launch(const DecodeLinearArgs& a, cudaStream_t s) {
  return internal::LaunchOverlapping(a.overlap_previous, dim3(unsigned(a.out / 8)),
                                     dim3(32 * kWarps), s, DecodeLinearKernel<T>, a);
}

}  // namespace

KernelStatus ValidateDecodeLinear(const DecodeLinearArgs& a) {
  if (a.rows < 1 || a.rows > kMaxDecodeLinearRows)
    return Invalid("decode_linear: rows must be in [1, 16]");
  if (a.in < 32 || a.in % 32 != 0)
    return Invalid("decode_linear: in (K) must be a positive multiple of 32");
  if (a.out < 8 || a.out % 8 != 0)
    return Invalid("decode_linear: out (N) must be a positive multiple of 8");
  if (a.dtype != DType::kBF16 && a.dtype != DType::kF16)
    return {KernelCode::kUnsupported, "decode_linear: dtype must be bf16 or fp16"};
  if (a.x == nullptr || a.w == nullptr || a.y == nullptr)
    return Invalid("decode_linear: x, w or y is null");
  if (a.activation != DecodeActivation::kNone && a.activation != DecodeActivation::kGelu &&
      a.activation != DecodeActivation::kGeluTanh)
    return Invalid("decode_linear: unknown activation");
  if (a.x_stride < a.in || a.w_stride < a.in || a.y_stride < a.out)
    return Invalid("decode_linear: a row stride is shorter than its row");
  if (!AlignedTo(a.x, 16) || !AlignedTo(a.w, 16) || a.x_stride % 8 != 0 || a.w_stride % 8 != 0)
    return Invalid("decode_linear: x and w rows must start on 16-byte boundaries");
  return {};
}

KernelStatus DecodeLinear(const DecodeLinearArgs& a, void* stream) {
  KernelStatus st = ValidateDecodeLinear(a);
  if (!st.ok()) return st;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  cudaError_t e = a.dtype == DType::kBF16 ? Launch<__nv_bfloat16>(a, s) : Launch<__half>(a, s);
  if (e == cudaSuccess) e = cudaGetLastError();
  return internal::FromCuda(e);
}

}  // namespace kernels
}  // namespace headlab
