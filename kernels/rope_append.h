// rope_append.h: RoPE of new queries and keys and the append of their keys and values to the
// KV cache, as one kernel: a decode step's (one token per sequence, its position on the
// device) or a prefill chunk's (T tokens, written from a host slot on). The reference runs
// three kernels per rotated tensor (swap the halves, x * cos', + swapped * sin') and two
// index_copy_ per cache segment; this is one, from the output of the fused q/k/v projection:
//   qkv rows [B, H + 2 KV, d]: heads 0..H-1 queries, then KV keys, then KV values
//   q out [B, H, d] = rot(q rows);  cache[k of segment s][b, i, slot] = rot(k row), v likewise
// rot(x) = x * cos' + swap(x) * sin' with cos' = (cos, cos), sin' = (-sin, sin) and swap
// exchanging the two halves of d (RotaryEmbedding's half-split form), rounded to the dtype
// after the product and after the sum as the reference's two kernels round; no tables: no
// rotation (learned positions). The step's position p is read on the device (a captured
// step replays for every position): it is rotated by row p of tables of every position
// (built once, not per step), and slot = p in a full segment, p < sink ? p : sink +
// (p - sink) mod ring in a ring (decode_attention.h). A chunk (position null) writes token t
// of each segment to slot first_slot + t (the linear layout), rotated by row t of the tables.
// One thread per 16-byte vector of a row and its partner in the other half (both halves
// rotated from the thread's registers); one per element pair when a pointer or stride is not
// 16-byte aligned.
// No LibTorch here (kernels/torch/rope_append_op.h).
#pragma once

#include <cstdint>

#include "kernels/decode_attention.h"  // kMaxDecodeSegments, DType, KernelStatus

namespace headlab {
namespace kernels {

struct AppendSegment {
  void* k =
      nullptr;  // [B, n, capacity, d], element strides (b, h, slot), last dimension contiguous
  void* v = nullptr;  // the same strides as k
  int64_t stride_b = 0, stride_h = 0, stride_t = 0;
  int capacity = 0;                     // slots
  int kv_heads = 0;                     // n
  const int* layer_kv_heads = nullptr;  // host array of n: the layer KV head of each
  int sink = 0, ring = 0;               // ring > 0: the ring layout; else slot = position
  int first_slot = -1;                  // a chunk: token t goes to slot first_slot + t (ring 0)
};

struct RopeAppendArgs {
  int batch = 0, heads = 0, kv_heads = 0, head_dim = 0;  // B, H, KV, d (d = 64 or 128)
  DType dtype = DType::kBF16;                            // qkv, tables, q and the caches
  int tokens = 1;                                        // T (1 with a device position)
  const void* qkv =
      nullptr;  // rows of d, head stride d, token stride qkv_stride_t, sequence qkv_stride_b
  int64_t qkv_stride_b = 0, qkv_stride_t = 0;
  const void* cos = nullptr;  // [table_rows, d] cos' and sin' in dtype, or both null: no
  const void* sin = nullptr;  // rotation. A chunk's row t is token t's (table_rows >= T); a
  int table_rows = 0;         // step's row p position p's (a p past the rows writes nothing)
  void* q = nullptr;          // [B, T, H, d] out, head stride d, strides q_stride_t and q_stride_b
  int64_t q_stride_b = 0, q_stride_t = 0;
  // device: the step's position (tokens = 1); null for a chunk (every segment's first_slot set)
  const int64_t* position = nullptr;
  int segments = 0;
  AppendSegment seg[kMaxDecodeSegments];
  // Programmatic dependent launch (hybrid_attention_internal.cuh): the launch overlaps the
  // end of the kernel before it (a decode step's q/k/v decode_linear), and the kernel waits
  // for that one before it reads or writes anything; it lets the kernel after it (the decode
  // kernel) start at its own beginning. false: an ordinary launch.
  bool overlap_previous = true;
};

// Returns a non-ok status iff the shape, pointers or segments are unusable (a KV head in
// two segments, one outside [0, KV), a chunk's slots past a segment's capacity; a decode
// step's slot cannot be checked here: its position is on the device, and the kernel skips
// writes past the capacity or, when rotating, the tables).
KernelStatus ValidateRopeAppend(const RopeAppendArgs& args);

// Launches the kernel on `stream` (a cudaStream_t).
KernelStatus RopeAppend(const RopeAppendArgs& args, void* stream);

}  // namespace kernels
}  // namespace headlab
