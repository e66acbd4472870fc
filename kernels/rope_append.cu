// rope_append.cu: RoPE of new queries and keys and the K/V append, one kernel
// (rope_append.h).
#include "kernels/rope_append.h"

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/hybrid_attention_internal.cuh"  // ToFloat, FromFloat

namespace headlab {
namespace kernels {
namespace {

using internal::FromFloat;
using internal::ToFloat;

struct SegmentParams {
  void* k;
  void* v;
  int64_t stride_b, stride_h, stride_t;
  int capacity, sink, ring, first_slot;
};

struct Params {
  int H, KV, d, T;
  const void* qkv;
  int64_t qkv_stride_b, qkv_stride_t;
  const void* cos;
  const void* sin;
  void* q;
  int64_t q_stride_b, q_stride_t;
  const int64_t* position;
  SegmentParams seg[kMaxDecodeSegments];
  int8_t seg_of[kMaxHeads];   // layer KV head -> its segment, -1: none (not cached)
  int16_t slot_of[kMaxHeads]; // layer KV head -> its index in that segment
};

// Rounds x to T and back, as a kernel writing T would.
template <typename T>
__device__ __forceinline__ float Round(float x) {
  return ToFloat(FromFloat<T>(x));
}

// Thread (c, r) of CTA (token t of sequence b, row group y): element c of row j = y *
// blockDim.y + r (query heads, then KV heads).
template <typename T>
__global__ void RopeAppendKernel(const __grid_constant__ Params p) {
  const int j = blockIdx.y * blockDim.y + threadIdx.y, c = threadIdx.x, half = p.d / 2;
  if (j >= p.H + p.KV) return;
  const int64_t b = blockIdx.x / p.T, t = blockIdx.x % p.T;
  const T* token = static_cast<const T*>(p.qkv) + b * p.qkv_stride_b + t * p.qkv_stride_t;
  const T* row = token + int64_t(j) * p.d;
  float y = ToFloat(row[c]);
  if (p.cos) {  // rot(x) = x * cos' + swap(x) * sin', rounded after the product and the sum
    const float partner = ToFloat(row[c < half ? c + half : c - half]);
    const float r = Round<T>(y * ToFloat(static_cast<const T*>(p.cos)[t * p.d + c]));
    y = r + partner * ToFloat(static_cast<const T*>(p.sin)[t * p.d + c]);
  }
  if (j < p.H) {
    static_cast<T*>(p.q)[b * p.q_stride_b + t * p.q_stride_t + int64_t(j) * p.d + c] = FromFloat<T>(y);
    return;
  }
  const int kv = j - p.H, s = p.seg_of[kv];
  if (s < 0) return;  // a KV head no segment caches (read only by pruned heads)
  const SegmentParams& sp = p.seg[s];
  int64_t slot;
  if (sp.first_slot >= 0) {  // a chunk: the linear layout, from the host's slot on
    slot = sp.first_slot + t;
  } else {
    const int64_t pos = *p.position;
    slot = sp.ring > 0 && pos >= sp.sink ? sp.sink + (pos - sp.sink) % sp.ring : pos;
  }
  if (slot < 0 || slot >= sp.capacity) return;
  const int64_t at = b * sp.stride_b + p.slot_of[kv] * sp.stride_h + slot * sp.stride_t + c;
  static_cast<T*>(sp.k)[at] = FromFloat<T>(y);
  static_cast<T*>(sp.v)[at] = token[int64_t(p.H + p.KV + kv) * p.d + c];
}

}  // namespace

KernelStatus ValidateRopeAppend(const RopeAppendArgs& a) {
  if (a.batch < 1) return Invalid("rope_append: batch must be >= 1");
  if (a.heads < 1 || a.heads > kMaxHeads || a.kv_heads < 1 || a.heads % a.kv_heads != 0)
    return Invalid("rope_append: need 1 <= kv_heads, kv_heads dividing heads <= kMaxHeads");
  if (a.head_dim != 64 && a.head_dim != 128) return {KernelCode::kUnsupported, "rope_append: head_dim must be 64 or 128"};
  if (a.dtype != DType::kF32 && a.dtype != DType::kBF16 && a.dtype != DType::kF16)
    return Invalid("rope_append: unknown dtype");
  if (a.tokens < 1) return Invalid("rope_append: tokens must be >= 1");
  if (a.qkv == nullptr || a.q == nullptr) return Invalid("rope_append: qkv or q is null");
  if (a.position != nullptr && a.tokens != 1) return Invalid("rope_append: a device position takes one token");
  if (int64_t(a.batch) * a.tokens > int64_t(INT32_MAX)) return Invalid("rope_append: batch x tokens too large");
  if ((a.cos == nullptr) != (a.sin == nullptr)) return Invalid("rope_append: cos and sin go together");
  if (a.segments < 0 || a.segments > kMaxDecodeSegments)
    return Invalid("rope_append: segments must be in [0, kMaxDecodeSegments]");
  bool taken[kMaxHeads] = {};
  for (int s = 0; s < a.segments; ++s) {
    const AppendSegment& sg = a.seg[s];
    if (sg.k == nullptr || sg.v == nullptr || sg.layer_kv_heads == nullptr || sg.kv_heads < 1)
      return Invalid("rope_append: a segment without k, v or KV heads");
    if (sg.capacity < 1 || sg.sink < 0 || sg.ring < 0 || (sg.ring > 0 && sg.sink + sg.ring > sg.capacity))
      return Invalid("rope_append: a segment's capacity, sink or ring is unusable");
    if (a.position == nullptr &&
        (sg.first_slot < 0 || sg.ring != 0 || int64_t(sg.first_slot) + a.tokens > sg.capacity))
      return Invalid("rope_append: a chunk needs each segment linear with slots first_slot + [0, tokens) in it");
    for (int i = 0; i < sg.kv_heads; ++i) {
      const int j = sg.layer_kv_heads[i];
      if (j < 0 || j >= a.kv_heads) return Invalid("rope_append: a segment's KV head is out of range");
      if (taken[j]) return Invalid("rope_append: a layer KV head is in two segments");
      taken[j] = true;
    }
  }
  return {};
}

KernelStatus RopeAppend(const RopeAppendArgs& a, void* stream) {
  KernelStatus st = ValidateRopeAppend(a);
  if (!st.ok()) return st;
  Params p{};
  p.H = a.heads;
  p.KV = a.kv_heads;
  p.d = a.head_dim;
  p.T = a.tokens;
  p.qkv = a.qkv;
  p.qkv_stride_b = a.qkv_stride_b;
  p.qkv_stride_t = a.qkv_stride_t;
  p.cos = a.cos;
  p.sin = a.sin;
  p.q = a.q;
  p.q_stride_b = a.q_stride_b;
  p.q_stride_t = a.q_stride_t;
  p.position = a.position;
  for (int j = 0; j < kMaxHeads; ++j) p.seg_of[j] = -1;
  for (int s = 0; s < a.segments; ++s) {
    const AppendSegment& sg = a.seg[s];
    p.seg[s] = {sg.k, sg.v, sg.stride_b, sg.stride_h, sg.stride_t, sg.capacity, sg.sink, sg.ring,
                a.position == nullptr ? sg.first_slot : -1};
    for (int i = 0; i < sg.kv_heads; ++i) {
      p.seg_of[sg.layer_kv_heads[i]] = int8_t(s);
      p.slot_of[sg.layer_kv_heads[i]] = int16_t(i);
    }
  }
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const int rows = 256 / a.head_dim;  // rows per CTA
  const dim3 block(a.head_dim, rows);
  const dim3 grid(unsigned(int64_t(a.batch) * a.tokens), unsigned((a.heads + a.kv_heads + rows - 1) / rows));
  switch (a.dtype) {
    case DType::kF32: RopeAppendKernel<float><<<grid, block, 0, s>>>(p); break;
    case DType::kBF16: RopeAppendKernel<__nv_bfloat16><<<grid, block, 0, s>>>(p); break;
    default: RopeAppendKernel<__half><<<grid, block, 0, s>>>(p); break;
  }
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return {KernelCode::kCudaError, cudaGetErrorString(e)};
  return {};
}

}  // namespace kernels
}  // namespace headlab
