// rope_append.h: a decode step's RoPE of the new queries and keys and the append of its keys
// and values to the KV cache, as one kernel (one token per sequence). The reference runs
// three kernels per rotated tensor (swap the halves, x * cos', + swapped * sin') and two
// index_copy_ per cache segment; this is one, from the output of the fused q/k/v projection:
//   qkv rows [B, H + 2 KV, d]: heads 0..H-1 queries, then KV keys, then KV values
//   q out [B, H, d] = rot(q rows);  cache[k of segment s][b, i, slot] = rot(k row), v likewise
// rot(x) = x * cos' + swap(x) * sin' with cos' = (cos, cos), sin' = (-sin, sin) and swap
// exchanging the two halves of d (RotaryEmbedding's half-split form), rounded to the dtype
// after the product and after the sum as the reference's two kernels round; no tables: no
// rotation (learned positions). The step's position p is read on the device (a captured
// step replays for every position): slot = p in a full segment, p < sink ? p : sink +
// (p - sink) mod ring in a ring (decode_attention.h). One CTA of d threads per (row, sequence).
// No LibTorch here (kernels/torch/rope_append_op.h).
#pragma once

#include <cstdint>

#include "kernels/decode_attention.h"  // kMaxDecodeSegments, DType, KernelStatus

namespace headlab {
namespace kernels {

struct AppendSegment {
  void* k = nullptr;  // [B, n, capacity, d], element strides (b, h, slot), last dimension contiguous
  void* v = nullptr;  // the same strides as k
  int64_t stride_b = 0, stride_h = 0, stride_t = 0;
  int capacity = 0;                     // slots
  int kv_heads = 0;                     // n
  const int* layer_kv_heads = nullptr;  // host array of n: the layer KV head of each
  int sink = 0, ring = 0;               // ring > 0: the ring layout; else slot = position
};

struct RopeAppendArgs {
  int batch = 0, heads = 0, kv_heads = 0, head_dim = 0;  // B, H, KV, d (d = 64 or 128)
  DType dtype = DType::kBF16;                             // qkv, tables, q and the caches
  const void* qkv = nullptr;  // rows of d, head stride d, sequence stride qkv_stride_b
  int64_t qkv_stride_b = 0;
  const void* cos = nullptr;  // [d] cos' and [d] sin' in dtype, or both null: no rotation
  const void* sin = nullptr;
  void* q = nullptr;          // [B, H, d] out, head stride d, sequence stride q_stride_b
  int64_t q_stride_b = 0;
  const int64_t* position = nullptr;  // device: the step's position
  int segments = 0;
  AppendSegment seg[kMaxDecodeSegments];
};

// Returns a non-ok status iff the shape, pointers or segments are unusable (a KV head in
// two segments, one outside [0, KV), a slot past a segment's capacity cannot be checked
// here: the position is on the device; the kernel skips writes past the capacity).
KernelStatus ValidateRopeAppend(const RopeAppendArgs& args);

// Launches the kernel on `stream` (a cudaStream_t).
KernelStatus RopeAppend(const RopeAppendArgs& args, void* stream);

}  // namespace kernels
}  // namespace headlab
