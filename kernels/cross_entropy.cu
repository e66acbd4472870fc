// cross_entropy.cu: per-row softmax cross-entropy and its gradient in place (cross_entropy.h).
#include "kernels/cross_entropy.h"

#include <cmath>

#include "kernels/hybrid_attention_internal.cuh"

namespace headlab {
namespace kernels {
namespace {

using internal::FromFloat;
using internal::ToFloat;

constexpr int kThreads = 512;

// Merges the running (max, sum of exp(x - max)) pair (m2, s2) into (m, s).
__device__ __forceinline__ void Merge(float& m, float& s, float m2, float s2) {
  if (m2 == -INFINITY) return;
  if (m == -INFINITY) {
    m = m2;
    s = s2;
    return;
  }
  const float mx = fmaxf(m, m2);
  s = s * __expf(m - mx) + s2 * __expf(m2 - mx);
  m = mx;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    CrossEntropyRowsKernel(T* logits, int64_t vocab, int64_t row_stride, const int64_t* targets,
                           float* loss) {
  __shared__ float shared_m[kThreads / 32], shared_s[kThreads / 32];
  __shared__ float row_lse;
  T* row = logits + int64_t(blockIdx.x) * row_stride;
  const int64_t target = targets[blockIdx.x];
  const bool valid = target >= 0 && target < vocab;

  // Pass 1: online max and sum of exponentials.
  float m = -INFINITY, s = 0.f;
  for (int64_t j = threadIdx.x; j < vocab; j += kThreads) {
    const float x = ToFloat(row[j]);
    if (x == -INFINITY) continue;  // contributes nothing (and exp(-inf - -inf) would be NaN)
    if (x > m) {
      s = (m == -INFINITY ? 0.f : s * __expf(m - x)) + 1.f;
      m = x;
    } else {
      s += __expf(x - m);
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
    Merge(m, s, m2, s2);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    shared_m[warp] = m;
    shared_s[warp] = s;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float mm = shared_m[0], ss = shared_s[0];
    for (int w = 1; w < kThreads / 32; ++w) Merge(mm, ss, shared_m[w], shared_s[w]);
    const float lse = mm + logf(ss);
    row_lse = lse;
    loss[blockIdx.x] = valid ? lse - ToFloat(row[target]) : NAN;  // read before pass 2 writes
  }
  __syncthreads();

  // Pass 2: the gradient softmax - one-hot, over the logits.
  const float lse = row_lse;
  for (int64_t j = threadIdx.x; j < vocab; j += kThreads) {
    const float p = __expf(ToFloat(row[j]) - lse);
    row[j] = FromFloat<T>(j == target ? p - 1.f : p);
  }
}

}  // namespace

KernelStatus CrossEntropyRows(void* logits, DType dtype, int64_t rows, int64_t vocab,
                              int64_t row_stride, const int64_t* targets, float* loss,
                              void* stream) {
  if (logits == nullptr || targets == nullptr || loss == nullptr)
    return {KernelCode::kInvalidArgument, "cross entropy: null pointer"};
  if (rows < 0 || rows > int64_t(2147483647) || vocab < 1 || row_stride < vocab)
    return {KernelCode::kInvalidArgument, "cross entropy: bad rows, vocab or row stride"};
  if (rows == 0) return {};
  auto s = static_cast<cudaStream_t>(stream);
  const dim3 grid(static_cast<unsigned>(rows));
  switch (dtype) {
    case DType::kF32:
      CrossEntropyRowsKernel<float>
          <<<grid, kThreads, 0, s>>>(static_cast<float*>(logits), vocab, row_stride, targets, loss);
      break;
    case DType::kBF16:
      CrossEntropyRowsKernel<__nv_bfloat16><<<grid, kThreads, 0, s>>>(
          static_cast<__nv_bfloat16*>(logits), vocab, row_stride, targets, loss);
      break;
    case DType::kF16:
      CrossEntropyRowsKernel<__half><<<grid, kThreads, 0, s>>>(static_cast<__half*>(logits), vocab,
                                                               row_stride, targets, loss);
      break;
    default:
      return {KernelCode::kInvalidArgument, "cross entropy: unknown dtype"};
  }
  const cudaError_t e = cudaGetLastError();
  return internal::FromCuda(e);
}

}  // namespace kernels
}  // namespace headlab
