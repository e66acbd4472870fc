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
  int B, H, KV, d, T;
  const void* qkv;
  int64_t qkv_stride_b, qkv_stride_t;
  const void* cos;
  const void* sin;
  int table_rows;
  void* q;
  int64_t q_stride_b, q_stride_t;
  const int64_t* position;
  SegmentParams seg[kMaxDecodeSegments];
  int8_t seg_of[kMaxHeads];    // layer KV head -> its segment, -1: none (not cached)
  int16_t slot_of[kMaxHeads];  // layer KV head -> its index in that segment
};

// Rounds x to T and back, as a kernel writing T would.
template <typename T>
__device__ __forceinline__ float Round(float x) {
  return ToFloat(FromFloat<T>(x));
}

constexpr int kThreads = 256;

// Thread i of the launch: the V-element vectors cv of both halves of row j (query heads,
// then KV heads) of token t of sequence b, i = ((b T + t)(H + KV) + j) n + cv with n = d / 2V
// vectors a half. Holding a vector and its partner in the other half, the thread rotates both
// from its own registers: V = 16 / sizeof(T) makes every access 16 bytes where every row,
// table and stride keeps 16-byte alignment (Aligned below); V = 1 otherwise.
template <typename T, int V>
__global__ void __launch_bounds__(kThreads) RopeAppendKernel(const __grid_constant__ Params p) {
  internal::LetDependentsStart();  // the decode kernel's launch overlaps this one
  internal::WaitForPrevious();     // launched overlapping: qkv is the previous kernel's output
  using Vec = internal::Pack<T, V>;
  const int n = p.d / (2 * V), half = p.d / 2, rows = p.H + p.KV;
  int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= int64_t(p.B) * p.T * rows * n) return;
  const int lo = int(i % n) * V;  // the first element of the vector in the first half
  i /= n;
  const int j = int(i % rows);
  const int64_t token_index = i / rows, b = token_index / p.T, t = token_index % p.T;
  const T* token = static_cast<const T*>(p.qkv) + b * p.qkv_stride_b + t * p.qkv_stride_t;
  auto load = [](const T* at) { return *reinterpret_cast<const Vec*>(at); };
  const T* row = token + int64_t(j) * p.d;
  const Vec x0 = load(row + lo), x1 = load(row + half + lo);
  const int64_t pos = p.position ? *p.position : -1;  // a step's device position
  Vec y0, y1;
  if (p.cos) {  // rot(x) = x * cos' + swap(x) * sin', rounded after the product and the sum
    const int64_t table_row = p.position ? pos : t;
    if (table_row < 0 || table_row >= p.table_rows) return;  // a position past the tables
    const T* cos = static_cast<const T*>(p.cos) + table_row * p.d;
    const T* sin = static_cast<const T*>(p.sin) + table_row * p.d;
    const Vec c0 = load(cos + lo), c1 = load(cos + half + lo), s0 = load(sin + lo),
              s1 = load(sin + half + lo);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const float a = ToFloat(x0.v[e]), z = ToFloat(x1.v[e]);
      y0.v[e] = FromFloat<T>(Round<T>(a * ToFloat(c0.v[e])) + z * ToFloat(s0.v[e]));
      y1.v[e] = FromFloat<T>(Round<T>(z * ToFloat(c1.v[e])) + a * ToFloat(s1.v[e]));
    }
  } else {
    y0 = x0;
    y1 = x1;
  }
  auto store = [](T* at, const Vec& x) { *reinterpret_cast<Vec*>(at) = x; };
  if (j < p.H) {
    T* q = static_cast<T*>(p.q) + b * p.q_stride_b + t * p.q_stride_t + int64_t(j) * p.d;
    store(q + lo, y0);
    store(q + half + lo, y1);
    return;
  }
  const int kv = j - p.H, s = p.seg_of[kv];
  if (s < 0) return;  // a KV head no segment caches (read only by pruned heads)
  const SegmentParams& sp = p.seg[s];
  int64_t slot;
  if (sp.first_slot >= 0) {  // a chunk: the linear layout, from the host's slot on
    slot = sp.first_slot + t;
  } else {
    slot = sp.ring > 0 && pos >= sp.sink ? sp.sink + (pos - sp.sink) % sp.ring : pos;
  }
  if (slot < 0 || slot >= sp.capacity) return;
  const int64_t at = b * sp.stride_b + p.slot_of[kv] * sp.stride_h + slot * sp.stride_t;
  store(static_cast<T*>(sp.k) + at + lo, y0);
  store(static_cast<T*>(sp.k) + at + half + lo, y1);
  const T* value = token + int64_t(p.H + p.KV + kv) * p.d;
  store(static_cast<T*>(sp.v) + at + lo, load(value + lo));
  store(static_cast<T*>(sp.v) + at + half + lo, load(value + half + lo));
}

// Whether every pointer and stride the kernel touches keeps V-element vectors aligned.
bool Aligned(const RopeAppendArgs& a, int vector_bytes, int element_bytes) {
  const int64_t v = vector_bytes / element_bytes;
  auto at = [&](const void* ptr) { return AlignedTo(ptr, size_t(vector_bytes)); };
  bool ok = at(a.qkv) && at(a.q) && (a.cos == nullptr || (at(a.cos) && at(a.sin))) &&
            a.qkv_stride_b % v == 0 && a.qkv_stride_t % v == 0 && a.q_stride_b % v == 0 &&
            a.q_stride_t % v == 0;
  for (int s = 0; s < a.segments; ++s) {
    const AppendSegment& sg = a.seg[s];
    ok = ok && at(sg.k) && at(sg.v) && sg.stride_b % v == 0 && sg.stride_h % v == 0 &&
         sg.stride_t % v == 0;
  }
  return ok;
}

template <typename T>
cudaError_t Launch(const RopeAppendArgs& a, const Params& p, cudaStream_t s) {
  constexpr int kV = 16 / int(sizeof(T));
  const bool wide = Aligned(a, 16, int(sizeof(T)));
  const int n = a.head_dim / (2 * (wide ? kV : 1));
  const int64_t threads = int64_t(a.batch) * a.tokens * (a.heads + a.kv_heads) * n;
  const unsigned blocks = unsigned((threads + kThreads - 1) / kThreads);
  if (wide)
    return internal::LaunchOverlapping(a.overlap_previous, dim3(blocks), dim3(kThreads), s,
                                       RopeAppendKernel<T, kV>, p);
  return internal::LaunchOverlapping(a.overlap_previous, dim3(blocks), dim3(kThreads), s,
                                     RopeAppendKernel<T, 1>, p);
}

}  // namespace

KernelStatus ValidateRopeAppend(const RopeAppendArgs& a) {
  if (a.batch < 1) return Invalid("rope_append: batch must be >= 1");
  if (a.heads < 1 || a.heads > kMaxHeads || a.kv_heads < 1 || a.heads % a.kv_heads != 0)
    return Invalid("rope_append: need 1 <= kv_heads, kv_heads dividing heads <= kMaxHeads");
  if (a.head_dim != 64 && a.head_dim != 128)
    return {KernelCode::kUnsupported, "rope_append: head_dim must be 64 or 128"};
  if (a.dtype != DType::kF32 && a.dtype != DType::kBF16 && a.dtype != DType::kF16)
    return Invalid("rope_append: unknown dtype");
  if (a.tokens < 1) return Invalid("rope_append: tokens must be >= 1");
  if (a.qkv == nullptr || a.q == nullptr) return Invalid("rope_append: qkv or q is null");
  if (a.position != nullptr && a.tokens != 1)
    return Invalid("rope_append: a device position takes one token");
  // One thread per element pair at most (rope_append.cu), in blocks of 256 counted in 32 bits.
  if (int64_t(a.batch) * a.tokens * (a.heads + a.kv_heads) * (a.head_dim / 2) / 256 >=
      int64_t(INT32_MAX))
    return Invalid("rope_append: batch x tokens too large");
  if ((a.cos == nullptr) != (a.sin == nullptr))
    return Invalid("rope_append: cos and sin go together");
  if (a.cos != nullptr && (a.table_rows < 1 || (a.position == nullptr && a.table_rows < a.tokens)))
    return Invalid(
        "rope_append: the tables need a row per token (a chunk) or at least one (a step)");
  if (a.segments < 0 || a.segments > kMaxDecodeSegments)
    return Invalid("rope_append: segments must be in [0, kMaxDecodeSegments]");
  bool taken[kMaxHeads] = {};
  for (int s = 0; s < a.segments; ++s) {
    const AppendSegment& sg = a.seg[s];
    if (sg.k == nullptr || sg.v == nullptr || sg.layer_kv_heads == nullptr || sg.kv_heads < 1)
      return Invalid("rope_append: a segment without k, v or KV heads");
    if (sg.capacity < 1 || sg.sink < 0 || sg.ring < 0 ||
        (sg.ring > 0 && sg.sink + sg.ring > sg.capacity))
      return Invalid("rope_append: a segment's capacity, sink or ring is unusable");
    if (a.position == nullptr &&
        (sg.first_slot < 0 || sg.ring != 0 || int64_t(sg.first_slot) + a.tokens > sg.capacity))
      return Invalid(
          "rope_append: a chunk needs each segment linear with slots first_slot + [0, tokens) in "
          "it");
    for (int i = 0; i < sg.kv_heads; ++i) {
      const int j = sg.layer_kv_heads[i];
      if (j < 0 || j >= a.kv_heads)
        return Invalid("rope_append: a segment's KV head is out of range");
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
  p.B = a.batch;
  p.H = a.heads;
  p.KV = a.kv_heads;
  p.d = a.head_dim;
  p.T = a.tokens;
  p.qkv = a.qkv;
  p.qkv_stride_b = a.qkv_stride_b;
  p.qkv_stride_t = a.qkv_stride_t;
  p.cos = a.cos;
  p.sin = a.sin;
  p.table_rows = a.table_rows;
  p.q = a.q;
  p.q_stride_b = a.q_stride_b;
  p.q_stride_t = a.q_stride_t;
  p.position = a.position;
  for (int j = 0; j < kMaxHeads; ++j) p.seg_of[j] = -1;
  for (int s = 0; s < a.segments; ++s) {
    const AppendSegment& sg = a.seg[s];
    p.seg[s] = {sg.k,        sg.v,        sg.stride_b,
                sg.stride_h, sg.stride_t, sg.capacity,
                sg.sink,     sg.ring,     a.position == nullptr ? sg.first_slot : -1};
    for (int i = 0; i < sg.kv_heads; ++i) {
      p.seg_of[sg.layer_kv_heads[i]] = int8_t(s);
      p.slot_of[sg.layer_kv_heads[i]] = int16_t(i);
    }
  }
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  cudaError_t e;
  switch (a.dtype) {
    case DType::kF32:
      e = Launch<float>(a, p, s);
      break;
    case DType::kBF16:
      e = Launch<__nv_bfloat16>(a, p, s);
      break;
    default:
      e = Launch<__half>(a, p, s);
      break;
  }
  if (e == cudaSuccess) e = cudaGetLastError();
  return internal::FromCuda(e);
}

}  // namespace kernels
}  // namespace headlab
