// decode_attention.h: the C++ API of the fused decode kernel: one query token per sequence
// and head against that head's KV cache (AoH §5's inference setting), flash-decoding.
//
// Split-K: the cache's visible slots are cut into `splits` contiguous pieces; one CTA per
// (split, KV head, sequence) computes, for every query head sharing that KV head (GQA:
// the group's queries sit in one CTA, so each K/V tile is read once for the group), the
// partial softmax statistics of its piece (running max m, sum l and the unnormalised
// accumulator acc, FlashAttention-2's online softmax) into a workspace, and counts itself
// done in an arrival counter of its (KV head, sequence); the last to arrive combines the
// pieces and resets the counter:
//   M = max_s m_s,  L = sum_s l_s exp(m_s - M),  o = sum_s acc_s exp(m_s - M) / L.
// Which keys a head sees is head_mask.h's KeyVisible at the cached positions; the slots
// outside the union of the segment's heads' KeySpanForQueries are never loaded.
//
// Segments: a launch takes up to kMaxDecodeSegments caches of one layer at once (the
// streaming decoder's full and bounded segments), each with its own split plan, in one grid
// of split CTAs: a layer's decode step is one kernel however its heads are divided. Each
// segment's KV heads are distinct.
//
// Cache layout (one segment of a layer's KV heads with one retention policy, as
// payload/decode/decoder.h keeps them): K and V are (B, n, capacity, d) device
// buffers with element strides (b, h, slot) and a contiguous last dimension; slots
// [0, entries) are live. Slot s holds position
//   pos(s) = s                          for s < lead       (a full segment: lead = entries)
//   pos(s) = tail_start + (s - lead)    for s >= lead      (a bounded segment's recent run)
// so a bounded streaming segment (sink positions 0..a-1, then a contiguous recent run) needs
// no per-slot position array on the device.
//
// Ring layout (cache.ring > 0), for decode steps replayed from one CUDA graph, where the
// slot a step writes cannot depend on host state: slots [0, lead) hold positions 0..lead-1,
// slots [lead, lead + ring) a ring of the latest positions p >= lead, position p at slot
//   slot(p) = lead + (p - lead) mod ring,
// so slot s >= lead holds the latest p <= q with that slot (q the query position), and is
// empty while that p < lead. entries = lead + ring; tail_start is unused. A streaming
// segment with sink a and recent window r is a ring with lead = a and ring = r (the query
// at q sees q - r < p <= q, exactly the ring); a local(W) segment is lead 0, ring W.
//
// Device query position (device_query_position != nullptr): the kernels read q from device
// memory when they run, so one captured launch serves every step. Slots are then never
// pruned by the heads' visible spans on the host (the span is every slot); a full segment
// (ring 0, lead = entries = its capacity) only reads slots <= q, and slots a step has not
// written yet must hold finite values (the decoder zero-fills its buffers).
//
// dtype fp32, bf16 or fp16 (q, cache and o share it); fp32 accumulation; d = 64 or 128.
// All data pointers are device pointers; the head specs and KV head lists are host arrays
// copied into the launch parameters. No LibTorch here (kernels/torch/decode_attention_op.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/hybrid_attention.h"

namespace headlab {
namespace kernels {

// The most query heads that share one KV head in a decode launch.
constexpr int kMaxDecodeGroup = 16;
// The most cache segments one launch takes.
constexpr int kMaxDecodeSegments = 4;

struct DecodeCache {
  const void* k = nullptr;
  const void* v = nullptr;
  int64_t stride_b = 0, stride_h = 0, stride_t = 0;  // elements; same for k and v
  int entries = 0;                                   // live slots
  int lead = 0;                                      // slots holding positions 0..lead-1
  int tail_start = 0;                                // position of slot `lead` (ring == 0)
  int ring = 0;                         // > 0: the ring layout above (entries == lead + ring)
  int kv_heads = 0;                     // n, KV heads in this segment (<= kMaxHeads)
  const int* layer_kv_heads = nullptr;  // host array of n: the layer's KV head of each slot head
};

struct DecodeArgs {
  int batch = 0;      // B
  int heads = 0;      // H, the layer's query heads (<= kMaxHeads)
  int kv_heads = 0;   // Hkv, the layer's KV heads; group g = H / Hkv <= kMaxDecodeGroup
  int head_dim = 0;   // 64 or 128
  float scale = 0.f;  // softmax scale
  DType dtype = DType::kBF16;
  const HeadSpec* head_specs = nullptr;  // host array of H (fixed heads are refused)
  int query_position = 0;  // the position of the query token (keys at positions <= it)
  // When set: a device int64 holding the query position, read by the kernels instead of
  // query_position (see "Device query position" above).
  const int64_t* device_query_position = nullptr;
  // (B, 1, H, d) views of the layer's queries and outputs; only the segments' query heads
  // (layer KV head j's heads j*g .. j*g+g-1) are read and written.
  TensorView q, o;
  DecodeCache caches[kMaxDecodeSegments];  // caches[0, segments)
  int segments = 1;
  void* workspace = nullptr;  // device scratch of DecodeWorkspaceBytes(args) bytes
  // Device arrival counters of DecodeCountsBytes(args) bytes, all zero before the launch;
  // the launch leaves them zero (so one zero-filled array serves every launch that runs
  // after the previous one on the same stream, a captured CUDA graph's included).
  int* counts = nullptr;
  int splits = 0;  // 0: DecodeSplits chooses (for every segment)
  // Programmatic dependent launch (hybrid_attention_internal.cuh): the launch overlaps the
  // end of the kernel before it (a decode step's RoPE+append), and the kernel waits for
  // that one before it reads or writes anything; it lets the kernel after it (o_proj's
  // decode_linear) start at its own beginning. false: an ordinary launch.
  bool overlap_previous = true;
};

// Returns the split count segment `segment` of a launch uses: args.splits when > 0, else
// enough splits for that segment's CTAs to fill an H200-sized device (about four CTAs per
// SM; for version 2, g = 1 at d = 64 in bf16/fp16, one wave of its resident CTAs), at least
// one tile each.
int DecodeSplits(const DecodeArgs& args, int segment = 0);

// Returns the scratch bytes of the partial statistics (fp32 acc, m, l per split) of every
// segment.
size_t DecodeWorkspaceBytes(const DecodeArgs& args);

// Returns the bytes of DecodeArgs::counts: one int per (sequence, KV head of the layer).
size_t DecodeCountsBytes(const DecodeArgs& args);

// Returns a non-ok status iff the shape, heads, views or cache are unusable.
KernelStatus ValidateDecode(const DecodeArgs& args);

// Launches the decode kernel (splits and their combine) on `stream` (a cudaStream_t).
KernelStatus DecodeAttention(const DecodeArgs& args, void* stream);

}  // namespace kernels
}  // namespace headlab
