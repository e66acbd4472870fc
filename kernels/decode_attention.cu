// decode_attention.cu: the split-K decode kernel and its combine (decode_attention.h).
//
// Version 1 (SIMT, this file). One CTA of 128 threads per (split, segment KV head, sequence):
//   - the group's g query rows in shared memory as fp32, the softmax scale folded in;
//   - per tile of kTile = 32 slots, K and V rows arrive as 16-byte vector loads into
//     registers one tile ahead (the next tile's loads are in flight while this one is
//     computed), then go to shared memory as fp32 (K rows padded to d + 1: conflict-free
//     reads down a column);
//   - scores s[h][j] = q_h . k_j for every (head, slot) pair, -inf where head_mask.h's
//     KeyVisible refuses the slot's position;
//   - one warp per head updates the running (m, l) and turns scores into p = exp(s - m)
//     (FlashAttention-2's online softmax);
//   - thread t owns output column t % d for heads t / d, t / d + 128 / d, ... and adds p V.
// Decoding reads every cached byte once per step and does g multiply-adds per key element:
// bandwidth-bound for g <= 16, which is why this is SIMT and not tensor cores.
// Version 2 (DecodeSplitMhaKernel) for one query head per KV head (g = 1, multi-head attention
// such as the 124M shape) in bf16/fp16 at d = 64, where version 1 leaves most of its threads
// idle (32 of 128 compute the tile's scores, 64 its P V) between four barriers per 32-slot
// tile: eight lanes read a slot, 16 bytes of its K row and of its V row each, so a warp reads
// four slots' rows as 512 contiguous bytes of K and of V; lane li keeps columns
// [8 li, 8 li + 8) of its group's running (m, l, acc) (FlashAttention-2's online softmax,
// acc rescaled only when the max grows), the score being 8 products per lane summed by three
// shuffles. Four steps of the CTA's 16 consecutive slots are loaded before any is used (K
// and V together: one memory round trip). No barrier until the end, where the groups merge
// by shuffles and the warps through shared memory into the split's (m, l, acc), the same
// statistics version 1 writes.
// Both end in FinishSplit: the last CTA of a (KV head, sequence) to finish merges its splits.
#include "kernels/decode_attention.h"

#include <algorithm>
#include <type_traits>

#include "kernels/hybrid_attention_internal.cuh"
#include "kernels/mma_primitives.cuh"  // kLog2e

namespace headlab {
namespace kernels {
namespace {

using internal::FromFloat;
using internal::ToFloat;
using internal::WarpMax;
using internal::WarpSum;

constexpr int kThreads = 128;
constexpr int kTile = 32;  // one slot per lane in the softmax step
static_assert(kTile == 32, "the softmax step gives each lane one slot");
// Grid size the automatic split count aims for: about four CTAs per SM of an H200 (132
// SMs; ~22 KB of shared memory and 128 threads each, all resident at once). A CTA streams
// its split one 32-slot tile at a time with one tile in flight, so more CTAs put more bytes
// in flight, until the combine and the short splits cost more than they bring:
// decode_attention_bench's forced-split rows (124M shape, 12 KV heads, 16K: 22 splits
// 0.062 ms, 43 0.050, 86 0.052, 171 0.065; docs/BENCHMARKS.md).
constexpr int kTargetCtas = 528;
// Version 2 has no barrier until its end, so longer splits cost it nothing and each split
// adds a combine row; what matters is where a wave ends. At 89 registers (ptxas; 96
// allocated) x 128 threads five of its CTAs are resident per SM (660 on an H200), and the
// split count is the most that still fits in that one wave (floor, not ceiling; forced
// splits showed the wave edge for the earlier version at 3 CTAs per SM: at B = 16,
// 16K, 384 CTAs 0.246 ms, 576 0.312). Update the count with the kernel's registers.
constexpr int kResidentCtasV2 = 5 * 132;
constexpr int kMaxSplits = 256;

// Version 2 (DecodeSplitMhaKernel) applies: one query head per KV head, 2-byte elements
// (bf16/fp16), d = 64 (at d = 128 its per-thread accumulators and a K row need more than 255
// registers; fp32 rows are twice as wide).
bool UsesVersion2(int g, int head_dim, size_t elem_bytes) {
  return g == 1 && head_dim == 64 && elem_bytes == 2;
}

struct DecodeHead {
  int32_t state, window, sink, recent;
};

// One segment of a launch: its cache, its split plan and its part of the workspace.
struct DecodeSegmentParams {
  int first, n;  // the launch's KV heads [first, first + n) (blockIdx.y) are this segment's
  int splits, split_len;
  int span_lo, span_hi;  // the slots any head of the segment may see
  int lead, tail_start, ring;
  const void* k;
  const void* v;
  int64_t c_sb, c_sh, c_st;
  float* acc;  // [B, n * g, splits, d]
  float* m;    // [B, n * g, splits]
  float* l;    // [B, n * g, splits]
};

// Everything one launch needs, by value (about 3 KB; kernel parameters may hold 4).
struct DecodeParams {
  int B, g, segments;
  int query_position;
  const int64_t* device_query_position;  // when set, the query position (read on the device)
  float scale;
  const void* q;
  int64_t q_sb, q_sh;
  void* o;
  int64_t o_sb, o_sh;
  DecodeSegmentParams seg[kMaxDecodeSegments];
  int* counts;                  // [B, launch KV heads]: splits arrived (DecodeArgs::counts)
  int kv_of[kMaxHeads];         // launch KV head -> layer KV head
  DecodeHead heads[kMaxHeads];  // per layer query head
};

static_assert(sizeof(DecodeParams) <= 4096, "decode launch parameters exceed 4 KB");

// The segment holding the launch's KV head y, copied into registers: the kernels keep it by
// value, since a field read through a register-indexed reference into the parameters stays
// an indexed constant load inside the slot loop (measured 12-15% slower on the H200).
__device__ __forceinline__ DecodeSegmentParams SegmentOf(const DecodeParams& p, int y) {
  int s = 0;
  while (s + 1 < p.segments && y >= p.seg[s + 1].first) ++s;
  return p.seg[s];
}

// The split plan: span of visible slots, split count and slots per split.
struct Plan {
  int lo = 0, hi = 0, splits = 1, split_len = kTile;
};

// Adds the slots holding positions [a, b) to the bounding range [*lo, *hi).
void AddPositions(const DecodeCache& c, int a, int b, int* lo, int* hi) {
  auto add = [&](int s0, int s1) {
    if (s0 >= s1) return;
    *lo = std::min(*lo, s0);
    *hi = std::max(*hi, s1);
  };
  add(std::max(a, 0), std::min(b, c.lead));  // slot = position below lead
  const int tail_end = c.tail_start + (c.entries - c.lead);
  const int t0 = std::max(a, c.tail_start), t1 = std::min(b, tail_end);
  if (t0 < t1) add(c.lead + (t0 - c.tail_start), c.lead + (t1 - c.tail_start));
}

// The plan for visible slots [lo, hi), lo < hi: whole tiles per split, enough splits for
// the grid to fill the device.
Plan Split(const DecodeArgs& a, const DecodeCache& c, int lo, int hi) {
  Plan p;
  p.lo = lo;
  p.hi = hi;
  const int tiles = (hi - lo + kTile - 1) / kTile;
  const int ctas_per_split = a.batch * c.kv_heads;
  const bool v2 = UsesVersion2(a.heads / a.kv_heads, a.head_dim, DTypeSize(a.dtype));
  const int automatic =
      v2 ? kResidentCtasV2 / ctas_per_split : (kTargetCtas + ctas_per_split - 1) / ctas_per_split;
  int splits = a.splits > 0 ? a.splits : automatic;
  splits = std::max(1, std::min({splits, tiles, kMaxSplits}));
  const int tiles_per_split = (tiles + splits - 1) / splits;
  p.split_len = tiles_per_split * kTile;
  p.splits = (tiles + tiles_per_split - 1) / tiles_per_split;
  return p;
}

// The split plan of segment `segment` of a launch; an empty plan (nothing visible) is one
// empty split, whose outputs become zeros. Each segment is planned as if alone: in one
// launch the segments' CTAs share the device, a small segment's filling what a large one
// leaves.
Plan MakePlan(const DecodeArgs& a, int segment) {
  const DecodeCache& c = a.caches[segment];
  if (a.device_query_position != nullptr || c.ring > 0) {
    // The visible slots depend on the query position (read on the device) or wrap around
    // the ring: the span is every slot; the split kernel skips what a head cannot see.
    return c.entries > 0 ? Split(a, c, 0, c.entries) : Plan{};
  }
  const int g = a.heads / a.kv_heads;
  int lo = c.entries, hi = 0;
  for (int i = 0; i < c.kv_heads; ++i)
    for (int r = 0; r < g; ++r) {
      const HeadSpec& s = a.head_specs[c.layer_kv_heads[i] * g + r];
      const SpanPair span = KeySpanForQueries(s.state, s.window, s.sink, s.recent, a.query_position,
                                              a.query_position + 1);
      AddPositions(c, span.lo0, span.hi0, &lo, &hi);
      AddPositions(c, span.lo1, span.hi1, &lo, &hi);
    }
  return lo < hi ? Split(a, c, lo, hi) : Plan{};
}

// 16 bytes of T, converted one element at a time.
template <typename T>
constexpr int kVec = 16 / int(sizeof(T));

// The position slot `slot` holds for the query at qp (decode_attention.h's slot maps), or
// -1 for a ring slot not written yet.
__device__ __forceinline__ int SlotPosition(const DecodeSegmentParams& p, int slot, int qp) {
  if (slot < p.lead) return slot;
  if (p.ring == 0) return p.tail_start + (slot - p.lead);
  const int back = ((qp - slot) % p.ring + p.ring) % p.ring;  // qp - pos, in [0, ring)
  const int pos = qp - back;
  return pos >= p.lead ? pos : -1;
}

// The end of a split CTA: its statistics are in the workspace; the last of the splits of
// its (KV head, sequence) to arrive merges them, for each of the group's query heads:
//   M = max_s m_s,  L = sum_s l_s e^{m_s - M},  o = sum_s acc_s e^{m_s - M} / L  (0 when L = 0).
// Arrival is counted in p.counts (threadFenceReduction's pattern: each CTA's writes are made
// visible device-wide before it counts, the last reads the others' through L2), and the
// last CTA sets its count back to 0 for the next launch. One kernel per layer, not a split
// kernel and a combine.
template <typename T, int D>
__device__ __forceinline__ void FinishSplit(const DecodeParams& p, const DecodeSegmentParams& sp,
                                            int y, int b) {
  __shared__ bool last_s;
  __shared__ float w_s[kMaxSplits];  // e^{m_s - M} of one query head
  __shared__ float sum_s;
  const int tid = threadIdx.x, lane = tid % 32;
  if (sp.splits > 1) {
    __threadfence();  // this CTA's statistics, visible before it counts
    __syncthreads();
    if (tid == 0) {
      int* count = p.counts + int64_t(b) * gridDim.y + y;
      last_s = atomicAdd(count, 1) == sp.splits - 1;
      if (last_s) *count = 0;  // every split has counted: ready for the next launch
    }
    __syncthreads();
    if (!last_s) return;
    __threadfence();
  } else {
    __syncthreads();  // one split: this CTA's own writes
  }
  const int i = y - sp.first;
  for (int r = 0; r < p.g; ++r) {
    const int64_t row = (int64_t(b) * sp.n + i) * p.g + r;
    const float* m = sp.m + row * sp.splits;
    const float* l = sp.l + row * sp.splits;
    if (tid < 32) {
      float big = -INFINITY;
      for (int s = lane; s < sp.splits; s += 32) big = fmaxf(big, __ldcg(m + s));
      big = WarpMax(big);
      float sum = 0.f;
      for (int s = lane; s < sp.splits; s += 32) {
        const float ms = __ldcg(m + s);
        const float w = ms == -INFINITY ? 0.f : __expf(ms - big);
        w_s[s] = w;
        sum += __ldcg(l + s) * w;
      }
      sum = WarpSum(sum);
      if (lane == 0) sum_s = sum;
    }
    __syncthreads();
    const int head = p.kv_of[y] * p.g + r;
    for (int c = tid; c < D; c += kThreads) {
      float out = 0.f;
      for (int s = 0; s < sp.splits; ++s)
        out += __ldcg(sp.acc + (row * sp.splits + s) * D + c) * w_s[s];
      static_cast<T*>(p.o)[b * p.o_sb + head * p.o_sh + c] =
          FromFloat<T>(sum_s > 0.f ? out / sum_s : 0.f);
    }
    __syncthreads();  // w_s and sum_s are the next head's
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    DecodeSplitKernel(const __grid_constant__ DecodeParams p) {
  internal::LetDependentsStart();  // o_proj's weights load while this runs (decode_linear.h)
  internal::WaitForPrevious();     // launched overlapping: q and the new slot are the previous
                                   // kernel's
  constexpr int kRowVecs = D / kVec<T>;                 // vectors per cached row
  constexpr int kLoads = kTile * kRowVecs / kThreads;   // vectors per thread per tile
  constexpr int kAcc = kMaxDecodeGroup * D / kThreads;  // output cells per thread
  static_assert(kLoads >= 1 && kTile * kRowVecs % kThreads == 0, "tile must split evenly");
  __shared__ float q_s[kMaxDecodeGroup][D];
  __shared__ float k_s[kTile][D + 1];
  __shared__ float v_s[kTile][D];
  __shared__ float p_s[kMaxDecodeGroup][kTile];
  __shared__ float m_s[kMaxDecodeGroup], l_s[kMaxDecodeGroup], corr_s[kMaxDecodeGroup];

  const int split = blockIdx.x, y = blockIdx.y, b = blockIdx.z;
  const DecodeSegmentParams sp = SegmentOf(p, y);
  if (split >= sp.splits) return;  // a segment with fewer splits than the grid's
  const int i = y - sp.first;      // the KV head within the segment
  const int g = p.g, tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int qp = p.device_query_position ? int(*p.device_query_position) : p.query_position;
  const int h0 = p.kv_of[y] * g;  // the group's first layer query head
  const T* q = static_cast<const T*>(p.q) + b * p.q_sb;
  for (int x = tid; x < g * D; x += kThreads)
    q_s[x / D][x % D] = ToFloat(q[(h0 + x / D) * p.q_sh + x % D]) * p.scale;
  if (tid < g) {
    m_s[tid] = -INFINITY;
    l_s[tid] = 0.f;
  }
  const int lo = sp.span_lo + split * sp.split_len;
  int hi = min(sp.span_hi, lo + sp.split_len);
  // A full segment read at a device position: slots past the query are not written yet.
  if (p.device_query_position && sp.ring == 0) hi = min(hi, qp + 1);
  const T* kb = static_cast<const T*>(sp.k) + b * sp.c_sb + i * sp.c_sh;
  const T* vb = static_cast<const T*>(sp.v) + b * sp.c_sb + i * sp.c_sh;
  uint4 kr[kLoads], vr[kLoads];
  auto load = [&](int t0) {
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int x = tid + u * kThreads, row = x / kRowVecs, col = (x % kRowVecs) * kVec<T>;
      if (t0 + row < hi) {
        kr[u] = *reinterpret_cast<const uint4*>(kb + (t0 + row) * sp.c_st + col);
        vr[u] = *reinterpret_cast<const uint4*>(vb + (t0 + row) * sp.c_st + col);
      } else {
        kr[u] = vr[u] = make_uint4(0, 0, 0, 0);
      }
    }
  };
  float acc[kAcc];
#pragma unroll
  for (int a = 0; a < kAcc; ++a) acc[a] = 0.f;
  if (lo < hi) load(lo);
  for (int t0 = lo; t0 < hi; t0 += kTile) {
    __syncthreads();  // the previous tile's shared memory is read
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int x = tid + u * kThreads, row = x / kRowVecs, col = (x % kRowVecs) * kVec<T>;
      const T* ke = reinterpret_cast<const T*>(&kr[u]);
      const T* ve = reinterpret_cast<const T*>(&vr[u]);
#pragma unroll
      for (int e = 0; e < kVec<T>; ++e) {
        k_s[row][col + e] = ToFloat(ke[e]);
        v_s[row][col + e] = ToFloat(ve[e]);
      }
    }
    __syncthreads();
    if (t0 + kTile < hi) load(t0 + kTile);  // in flight during this tile's arithmetic
    for (int x = tid; x < g * kTile; x += kThreads) {
      const int h = x / kTile, j = x % kTile, slot = t0 + j;
      const int pos = SlotPosition(sp, slot, qp);
      float s = -INFINITY;
      if (slot < hi && pos >= 0) {
        const DecodeHead& hd = p.heads[h0 + h];
        if (KeyVisible(HeadState(hd.state), hd.window, hd.sink, hd.recent, qp, pos)) {
          float dot = 0.f;
#pragma unroll 16
          for (int c = 0; c < D; ++c) dot += q_s[h][c] * k_s[j][c];
          s = dot;
        }
      }
      p_s[h][j] = s;
    }
    __syncthreads();
    for (int h = warp; h < g; h += kThreads / 32) {
      const float s = p_s[h][lane];
      const float m_old = m_s[h];
      const float m_new = fmaxf(m_old, WarpMax(s));
      const float e = m_new == -INFINITY ? 0.f : __expf(s - m_new);
      const float sum = WarpSum(e);
      p_s[h][lane] = e;
      if (lane == 0) {
        const float corr = m_new == -INFINITY ? 1.f : __expf(m_old - m_new);
        corr_s[h] = corr;
        m_s[h] = m_new;
        l_s[h] = l_s[h] * corr + sum;
      }
    }
    __syncthreads();
    const int c = tid % D;
#pragma unroll
    for (int a = 0; a < kAcc; ++a) {
      const int h = tid / D + a * (kThreads / D);
      if (h < g) {
        float v = acc[a] * corr_s[h];
#pragma unroll 8
        for (int j = 0; j < kTile; ++j) v += p_s[h][j] * v_s[j][c];
        acc[a] = v;
      }
    }
  }
  __syncthreads();
  const int64_t row = (int64_t(b) * sp.n + i) * g;  // the group's first workspace row
  const int c = tid % D;
#pragma unroll
  for (int a = 0; a < kAcc; ++a) {
    const int h = tid / D + a * (kThreads / D);
    if (h < g) sp.acc[((row + h) * sp.splits + split) * D + c] = acc[a];
  }
  if (tid < g) {
    sp.m[(row + tid) * sp.splits + split] = m_s[tid];
    sp.l[(row + tid) * sp.splits + split] = l_s[tid];
  }
  FinishSplit<T, D>(p, sp, y, b);
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    DecodeSplitMhaKernel(const __grid_constant__ DecodeParams p) {
  internal::LetDependentsStart();       // o_proj's weights load while this runs (decode_linear.h)
  internal::WaitForPrevious();          // launched overlapping: q and the new slot are the previous
                                        // kernel's
  constexpr int kLanes = D / kVec<T>;   // lanes per slot: 16 bytes of the row each
  constexpr int kGroups = 32 / kLanes;  // slots a warp reads at once
  constexpr int kWarps = kThreads / 32;
  constexpr int kStep = kWarps * kGroups;  // consecutive slots the CTA reads at once
  constexpr int kUnroll = 4;               // steps whose loads are in flight together
  static_assert(kLanes == 8 && kGroups == 4, "version 2: d = 64 of 2-byte elements");
  __shared__ float m_s[kWarps], l_s[kWarps];
  __shared__ float acc_s[kWarps][D];

  const int split = blockIdx.x, y = blockIdx.y, b = blockIdx.z;
  const DecodeSegmentParams sp = SegmentOf(p, y);
  if (split >= sp.splits) return;  // a segment with fewer splits than the grid's
  const int i = y - sp.first;      // the KV head within the segment
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int grp = lane / kLanes, li = lane % kLanes;  // this lane's slot of four, its 8 columns
  const int qp = p.device_query_position ? int(*p.device_query_position) : p.query_position;
  const int h = p.kv_of[y];  // g = 1: the KV head's one query head
  const DecodeHead hd = p.heads[h];
  const T* q = static_cast<const T*>(p.q) + b * p.q_sb + h * p.q_sh + li * kVec<T>;
  float qf[kVec<T>];
#pragma unroll
  for (int e = 0; e < kVec<T>; ++e) qf[e] = ToFloat(q[e]) * (p.scale * internal::kLog2e);  // base 2
  const int lo = sp.span_lo + split * sp.split_len;
  int hi = min(sp.span_hi, lo + sp.split_len);
  if (p.device_query_position && sp.ring == 0)
    hi = min(hi, qp + 1);  // slots past the query: unwritten
  const T* kb = static_cast<const T*>(sp.k) + b * sp.c_sb + i * sp.c_sh + li * kVec<T>;
  const T* vb = static_cast<const T*>(sp.v) + b * sp.c_sb + i * sp.c_sh + li * kVec<T>;

  // This group's running state; lane li holds columns [8 li, 8 li + 8) of acc.
  float m = -INFINITY, l = 0.f, acc[kVec<T>];
#pragma unroll
  for (int e = 0; e < kVec<T>; ++e) acc[e] = 0.f;
  // Warp-uniform trip count (the shuffles below need every lane); slot = base + grp + kStep u.
  for (int base = lo + warp * kGroups; base < hi; base += kStep * kUnroll) {
    uint4 kr[kUnroll], vr[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int slot = base + grp + u * kStep;
      kr[u] = vr[u] = make_uint4(0, 0, 0, 0);
      if (slot < hi) {
        kr[u] = *reinterpret_cast<const uint4*>(kb + int64_t(slot) * sp.c_st);
        vr[u] = *reinterpret_cast<const uint4*>(vb + int64_t(slot) * sp.c_st);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int slot = base + grp + u * kStep;
      const T* ke = reinterpret_cast<const T*>(&kr[u]);
      float s = 0.f;
#pragma unroll
      for (int e = 0; e < kVec<T>; ++e) s += qf[e] * ToFloat(ke[e]);
#pragma unroll
      for (int off = 1; off < kLanes; off *= 2)
        s += __shfl_xor_sync(0xffffffffu, s, off);  // the group's 8 lanes
      bool visible = slot < hi;
      if (visible) {
        const int pos = SlotPosition(sp, slot, qp);
        visible =
            pos >= 0 && KeyVisible(HeadState(hd.state), hd.window, hd.sink, hd.recent, qp, pos);
      }
      if (!visible) continue;
      if (s > m) {                        // a new maximum: rescale what this group has so far
        const float corr = exp2f(m - s);  // 0 on the first visible slot (m = -inf)
        l *= corr;
#pragma unroll
        for (int e = 0; e < kVec<T>; ++e) acc[e] *= corr;
        m = s;
      }
      const float w = exp2f(s - m);
      l += w;
      const T* ve = reinterpret_cast<const T*>(&vr[u]);
#pragma unroll
      for (int e = 0; e < kVec<T>; ++e) acc[e] += w * ToFloat(ve[e]);
    }
  }
  // The warp's four groups merged by shuffles (lane li meets lane li of the other groups),
  // then the warps through shared memory.
#pragma unroll
  for (int off = kLanes; off < 32; off *= 2) {
    const float mo = __shfl_xor_sync(0xffffffffu, m, off),
                lo_ = __shfl_xor_sync(0xffffffffu, l, off);
    const float mm = fmaxf(m, mo);
    const float cs = mm == -INFINITY ? 0.f : exp2f(m - mm),
                co = mm == -INFINITY ? 0.f : exp2f(mo - mm);
    l = l * cs + lo_ * co;
#pragma unroll
    for (int e = 0; e < kVec<T>; ++e)
      acc[e] = acc[e] * cs + __shfl_xor_sync(0xffffffffu, acc[e], off) * co;
    m = mm;
  }
  if (lane < kLanes) {
#pragma unroll
    for (int e = 0; e < kVec<T>; ++e) acc_s[warp][li * kVec<T> + e] = acc[e];
    if (lane == 0) {
      m_s[warp] = m;
      l_s[warp] = l;
    }
  }
  __syncthreads();
  if (tid < D) {  // thread c: column c of the merged state
    const int c = tid;
    float mm = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mm = fmaxf(mm, m_s[w]);
    float ll = 0.f, out = 0.f;
    for (int w = 0; w < kWarps; ++w) {
      if (m_s[w] == -INFINITY) continue;
      const float f = exp2f(m_s[w] - mm);
      ll += l_s[w] * f;
      out += acc_s[w][c] * f;
    }
    const int64_t row = int64_t(b) * sp.n + i;  // g = 1: one workspace row per KV head
    sp.acc[(row * sp.splits + split) * D + c] = out;
    if (c == 0) {
      // The split statistics in version 1's units: m of the scaled scores in nats.
      sp.m[row * sp.splits + split] = mm == -INFINITY ? -INFINITY : mm / internal::kLog2e;
      sp.l[row * sp.splits + split] = ll;
    }
  }
  FinishSplit<T, D>(p, sp, y, b);
}

template <typename T, int D>
cudaError_t Launch(const DecodeParams& p, bool overlap, cudaStream_t s) {
  const DecodeSegmentParams& last = p.seg[p.segments - 1];
  const int n = last.first + last.n;  // the launch's KV heads
  int splits = 1;
  for (int i = 0; i < p.segments; ++i) splits = std::max(splits, p.seg[i].splits);
  // Version 2 where it applies (UsesVersion2), version 1 elsewhere.
  if (UsesVersion2(p.g, D, sizeof(T))) {
    if constexpr (D == 64 && !std::is_same_v<T, float>) {
      return internal::LaunchOverlapping(overlap, dim3(splits, n, p.B), dim3(kThreads), s,
                                         DecodeSplitMhaKernel<T, D>, p);
    }
    return cudaSuccess;  // not reached: UsesVersion2 needs D = 64 and 2-byte elements
  }
  return internal::LaunchOverlapping(overlap, dim3(splits, n, p.B), dim3(kThreads), s,
                                     DecodeSplitKernel<T, D>, p);
}

template <typename T>
cudaError_t LaunchD(const DecodeParams& p, int d, bool overlap, cudaStream_t s) {
  return d == 64 ? Launch<T, 64>(p, overlap, s) : Launch<T, 128>(p, overlap, s);
}

}  // namespace

int DecodeSplits(const DecodeArgs& a, int segment) { return MakePlan(a, segment).splits; }

// The floats of segment `segment`'s partial statistics: acc, then m, then l.
size_t SegmentWorkspaceFloats(const DecodeArgs& a, int segment, int splits) {
  const size_t rows = size_t(a.batch) * a.caches[segment].kv_heads * (a.heads / a.kv_heads);
  return rows * size_t(splits) * size_t(a.head_dim + 2);
}

size_t DecodeCountsBytes(const DecodeArgs& a) {
  return sizeof(int) * size_t(a.batch) * size_t(a.kv_heads);
}

size_t DecodeWorkspaceBytes(const DecodeArgs& a) {
  size_t floats = 0;
  for (int s = 0; s < a.segments; ++s)
    floats += SegmentWorkspaceFloats(a, s, MakePlan(a, s).splits);
  return sizeof(float) * floats;
}

KernelStatus ValidateDecode(const DecodeArgs& a) {
  if (a.batch < 1) return Invalid("batch must be >= 1");
  if (a.heads < 1 || a.heads > kMaxHeads) return Invalid("heads must be in [1, kMaxHeads]");
  if (a.kv_heads < 1 || a.heads % a.kv_heads != 0) return Invalid("kv_heads must divide heads");
  if (a.heads / a.kv_heads > kMaxDecodeGroup)
    return {KernelCode::kUnsupported, "more than kMaxDecodeGroup query heads per KV head"};
  if (a.head_dim != 64 && a.head_dim != 128)
    return {KernelCode::kUnsupported, "head_dim must be 64 or 128"};
  if (!(a.scale > 0.f) || !std::isfinite(a.scale)) return Invalid("scale must be finite and > 0");
  if (a.dtype != DType::kF32 && a.dtype != DType::kBF16 && a.dtype != DType::kF16)
    return Invalid("unknown dtype");
  if (a.head_specs == nullptr) return Invalid("head_specs is null");
  for (int h = 0; h < a.heads; ++h) {
    const HeadSpec& s = a.head_specs[h];
    if (s.state == HeadState::kFixed)
      return {KernelCode::kUnsupported, "fixed heads have no decode kernel"};
    if (s.state == HeadState::kLocal && s.window < 1)
      return Invalid("local head needs window >= 1");
    if (s.state == HeadState::kStreaming && (s.recent < 1 || s.sink < 0))
      return Invalid("streaming head needs recent >= 1, sink >= 0");
    if (s.state != HeadState::kOrdinary && s.state != HeadState::kPruned &&
        s.state != HeadState::kLocal && s.state != HeadState::kStreaming)
      return Invalid("unknown head state");
  }
  if (a.device_query_position == nullptr && a.query_position < 0)
    return Invalid("query_position must be >= 0");
  if (a.q.data == nullptr || a.o.data == nullptr) return Invalid("q or o is null");
  if (a.splits < 0) return Invalid("splits must be >= 0");
  if (a.segments < 1 || a.segments > kMaxDecodeSegments)
    return Invalid("segments must be in [1, kMaxDecodeSegments]");
  bool taken[kMaxHeads] = {};  // layer KV heads of the segments so far
  for (int s = 0; s < a.segments; ++s) {
    const DecodeCache& c = a.caches[s];
    if (c.kv_heads < 1 || c.kv_heads > a.kv_heads)
      return Invalid("cache.kv_heads must be in [1, kv_heads]");
    if (c.layer_kv_heads == nullptr) return Invalid("cache.layer_kv_heads is null");
    for (int i = 0; i < c.kv_heads; ++i) {
      const int j = c.layer_kv_heads[i];
      if (j < 0 || j >= a.kv_heads) return Invalid("cache.layer_kv_heads entry out of range");
      if (taken[j]) return Invalid("a layer KV head is in two segments (or twice in one)");
      taken[j] = true;
    }
    if (c.entries < 0 || c.lead < 0 || c.lead > c.entries)
      return Invalid("need 0 <= lead <= entries");
    if (c.ring < 0) return Invalid("cache.ring must be >= 0");
    if (c.ring > 0 && c.entries != c.lead + c.ring)
      return Invalid("a ring cache needs entries == lead + ring");
    if (c.ring == 0 && c.lead < c.entries && c.tail_start < c.lead)
      return Invalid("tail_start must be >= lead");
    if (c.entries > 0 && (c.k == nullptr || c.v == nullptr)) return Invalid("cache k or v is null");
    const int64_t vec = 16 / int64_t(DTypeSize(a.dtype));
    if (!AlignedTo(c.k, 16) || !AlignedTo(c.v, 16) || c.stride_b % vec != 0 ||
        c.stride_h % vec != 0 || c.stride_t % vec != 0)
      return Invalid("cache rows must start 16-byte aligned");
  }
  if (a.workspace == nullptr) return Invalid("workspace is null");
  if (a.counts == nullptr) return Invalid("counts is null");
  return {};
}

KernelStatus DecodeAttention(const DecodeArgs& a, void* stream) {
  KernelStatus st = ValidateDecode(a);
  if (!st.ok()) return st;
  DecodeParams p{};
  p.B = a.batch;
  p.g = a.heads / a.kv_heads;
  p.segments = a.segments;
  float* next = static_cast<float*>(a.workspace);
  for (int s = 0, first = 0; s < a.segments; ++s) {
    const DecodeCache& c = a.caches[s];
    const Plan plan = MakePlan(a, s);
    DecodeSegmentParams& sp = p.seg[s];
    sp.first = first;
    sp.n = c.kv_heads;
    sp.splits = plan.splits;
    sp.split_len = plan.split_len;
    sp.span_lo = plan.lo;
    sp.span_hi = plan.hi;
    sp.lead = c.lead;
    sp.tail_start = c.tail_start;
    sp.ring = c.ring;
    sp.k = c.k;
    sp.v = c.v;
    sp.c_sb = c.stride_b;
    sp.c_sh = c.stride_h;
    sp.c_st = c.stride_t;
    const size_t rows = size_t(a.batch) * sp.n * p.g;
    sp.acc = next;
    sp.m = sp.acc + rows * plan.splits * a.head_dim;
    sp.l = sp.m + rows * plan.splits;
    next += SegmentWorkspaceFloats(a, s, plan.splits);
    for (int i = 0; i < sp.n; ++i) p.kv_of[first + i] = c.layer_kv_heads[i];
    first += sp.n;
  }
  p.counts = a.counts;
  p.query_position = a.query_position;
  p.device_query_position = a.device_query_position;
  p.scale = a.scale;
  p.q = a.q.data;
  p.q_sb = a.q.stride_b;
  p.q_sh = a.q.stride_h;
  p.o = a.o.data;
  p.o_sb = a.o.stride_b;
  p.o_sh = a.o.stride_h;
  for (int h = 0; h < a.heads; ++h) {
    const HeadSpec& s = a.head_specs[h];
    p.heads[h] = {static_cast<int32_t>(s.state), s.window, s.sink, s.recent};
  }
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  cudaError_t e;
  switch (a.dtype) {
    case DType::kF32:
      e = LaunchD<float>(p, a.head_dim, a.overlap_previous, s);
      break;
    case DType::kBF16:
      e = LaunchD<__nv_bfloat16>(p, a.head_dim, a.overlap_previous, s);
      break;
    default:
      e = LaunchD<__half>(p, a.head_dim, a.overlap_previous, s);
      break;
  }
  return internal::FromCuda(e);
}

}  // namespace kernels
}  // namespace headlab
