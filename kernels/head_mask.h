// head_mask.h: the one definition of which keys a head's query row may see, and of which
// key-block ranges a query block must visit. Shared by the CPU reference and the kernels.
#pragma once

#include "kernels/hybrid_attention.h"

#ifdef __CUDACC__
#define HEADLAB_HD __host__ __device__ __forceinline__
#else
#define HEADLAB_HD inline
#endif

namespace headlab {
namespace kernels {

// Returns true iff query position q of a head in `state` attends to key position k.
// Fixed heads see the causal triangle (SAF eq. 3: P(i,j) = 0 for j > i); pruned see nothing.
HEADLAB_HD bool KeyVisible(HeadState state, int window, int sink, int recent, int q, int k) {
  if (k > q) return false;
  switch (state) {
    case HeadState::kOrdinary:
    case HeadState::kFixed:
      return true;
    case HeadState::kLocal:
      return k > q - window;
    case HeadState::kStreaming:
      return k < sink || k > q - recent;
    default:
      return false;
  }
}

// KeyVisible in the form the forwards' tile masks evaluate per element: query q fixed (a
// thread's row), key k = base + c with c a small offset that is a compile-time constant in
// the unrolled tile loops; visible iff c <= hi && (c > lo || c < sk). Three compares
// combined without short-circuit, so the compiler emits predicates and a select, not two
// branches per element (the PTX of `k <= q && (k > q - w || k < sink)` had them: 363
// branches in the d = 64 warp-specialised forward, 115 now). reference_test checks it
// against KeyVisible for every state, offset and base.
struct RowVisibility {
  int hi, lo, sk;
  HEADLAB_HD bool Visible(int c) const { return (c <= hi) & ((c > lo) | (c < sk)); }
};

// The window w and sink s of KeyVisible's rule k <= q && (k > q - w || k < s) for a state;
// pruned heads get w = 0, s = 0 (nothing visible).
struct WindowSink {
  int w, s;
};
HEADLAB_HD WindowSink WindowSinkOf(HeadState state, int window, int sink, int recent) {
  switch (state) {
    case HeadState::kOrdinary:
    case HeadState::kFixed:
      return {1 << 30, 0};
    case HeadState::kLocal:
      return {window, 0};
    case HeadState::kStreaming:
      return {recent, sink};
    default:
      return {0, 0};
  }
}

HEADLAB_HD RowVisibility RowVisibilityOf(HeadState state, int window, int sink, int recent, int q,
                                         int base) {
  const WindowSink ws = WindowSinkOf(state, window, sink, recent);
  return {q - base, q - ws.w - base, ws.s - base};
}

// Up to two half-open ranges of positions [lo0, hi0) and [lo1, hi1), lo1 >= hi0.
struct SpanPair {
  int lo0, hi0, lo1, hi1;
};

// Returns the key positions a block of queries [q0, q1) (q1 <= T) may see: the forward
// iteration space. Everything outside is never loaded.
HEADLAB_HD SpanPair KeySpanForQueries(HeadState state, int window, int sink, int recent, int q0,
                                      int q1) {
  SpanPair s{0, 0, 0, 0};
  switch (state) {
    case HeadState::kOrdinary:
    case HeadState::kFixed:
      s.hi0 = q1;
      break;
    case HeadState::kLocal:
      s.lo0 = q0 - window + 1 > 0 ? q0 - window + 1 : 0;
      s.hi0 = q1;
      break;
    case HeadState::kStreaming: {
      int lo = q0 - recent + 1 > 0 ? q0 - recent + 1 : 0;
      int sink_end = sink < q1 ? sink : q1;
      if (sink_end >= lo) {  // the two pieces touch: one range
        s.hi0 = q1;
      } else {
        s.hi0 = sink_end;
        s.lo1 = lo;
        s.hi1 = q1;
      }
      break;
    }
    default:
      break;
  }
  return s;
}

// Returns the query positions that may see some key in [k0, k1) for a sequence of length
// T: the backward iteration space of a key block.
HEADLAB_HD SpanPair QuerySpanForKeys(HeadState state, int window, int sink, int recent, int k0,
                                     int k1, int T) {
  SpanPair s{0, 0, 0, 0};
  switch (state) {
    case HeadState::kOrdinary:
    case HeadState::kFixed:
      s.lo0 = k0;
      s.hi0 = T;
      break;
    case HeadState::kLocal: {
      int hi = k1 - 1 + window;  // queries q < k + W
      s.lo0 = k0;
      s.hi0 = hi < T ? hi : T;
      break;
    }
    case HeadState::kStreaming: {
      s.lo0 = k0;
      if (k0 < sink) {
        s.hi0 = T;
      } else {
        int hi = k1 - 1 + recent;  // queries q < k + recent
        s.hi0 = hi < T ? hi : T;
      }
      break;
    }
    default:
      break;
  }
  return s;
}

}  // namespace kernels
}  // namespace headlab
