// forward_cta.cuh: the skeleton the synchronous tensor-core forwards share (mma.sync in
// hybrid_attention_mma.cu, wgmma in hybrid_attention_wgmma.cu): one CTA = 64 query rows of
// one (batch, head), 4 warps x 16 rows; the per-CTA setup, the head state's branch (pruned
// rows are zeros; fixed heads build P in SAF eq. 3's product form from alpha / rho / logZ a
// tile ahead; the other states score keys), the K/V tiles of 64 keys that the head's mask
// lets the block see, double-buffered with cp.async, and the output. What differs between the
// two kernels is a Core: its shared-memory layout and loads, how a scored tile computes
// S = Q K^T, the softmax and O += P V, and how a fixed tile's P meets V.
//
// A Core provides
//   float* fixed_s;                      // two buffers of fixed-tile factors (FixedTileFloats)
//   void LoadQ(const ForwardCta&);       // cp.async of the block's Q rows
//   void LoadK(const ForwardCta&, int k0, int n), LoadV(...)   // key tile n
//   void LoadsLanded();                  // after this thread's copies of a tile have landed
//                                        // (wgmma: the fence to the async proxy it reads through)
//   void ScoredTile(o, m, l, const ForwardCta&, int n, int k0, bool need_mask, float scale2);
//   void FixedTile(o, s, int n);         // O += P V_n with P = s (product form)
//   void Finish(o, int count);           // after the last scored tile (a pipelined P V)
#pragma once

#include "kernels/forward_tile.cuh"

namespace headlab {
namespace kernels {
namespace internal {

constexpr int kCtaRows = 64, kCtaThreads = 128;  // query rows and threads of a CTA

// What a CTA works on: its query block (the last blocks, with the most keys under causality,
// first), head, batch, KV head, the head's state and the key tiles it visits.
struct ForwardCta {
  int q0, q1, h, b, g;
  DeviceHead hd;
  HeadState state;
  bool fixed;
  WarpRows w;
  BlockRanges br;
  __device__ explicit ForwardCta(const Params& p) {
    q0 = (gridDim.x - 1 - blockIdx.x) * kCtaRows;
    q1 = min(q0 + kCtaRows, p.T);
    h = blockIdx.y;
    b = blockIdx.z;
    g = h / (p.H / p.G);
    hd = p.heads[h];
    state = static_cast<HeadState>(hd.state);
    fixed = state == HeadState::kFixed;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    w = WarpRows{q0 + warp * 16, lane / 4, lane % 4};
    br = ToBlocks(KeySpanForQueries(state, hd.window, hd.sink, hd.recent, q0, q1), kFwdBk);
  }
};

template <typename T, int D, class Core>
__device__ __forceinline__ void RunForwardCta(const Params& p, Core& core) {
  const ForwardCta c(p);
  if (c.state == HeadState::kPruned) {
    StorePrunedRows<T, D, kCtaRows, kCtaThreads>(p, c.b, c.h, c.q0, threadIdx.x);
    return;
  }
  const int count = c.br.Count();
  const int warp = threadIdx.x / 32;
  FixedRaw<kCtaRows> raw;  // fixed heads: the next tile's factors, in flight
  if (c.fixed && count > 0)
    FetchFixedTile<kCtaRows>(p, c.hd, c.q0, c.br.Block(0) * kFwdBk, &raw, warp);
  auto issue = [&](int n) {
    const int k0 = c.br.Block(n) * kFwdBk;
    if (c.fixed) {
      StageFixedTile<kCtaRows>(raw, FixedTileAt<kCtaRows>(core.fixed_s, n & 1), warp);
      if (n + 1 < count)
        FetchFixedTile<kCtaRows>(p, c.hd, c.q0, c.br.Block(n + 1) * kFwdBk, &raw, warp);
    } else {
      core.LoadK(c, k0, n);
    }
    core.LoadV(c, k0, n);
  };
  if (!c.fixed) core.LoadQ(c);
  if (count > 0) issue(0);
  CpAsyncCommit();

  float o[D / 8][4];
  float m[2], l[2], lz[2];
#pragma unroll
  for (int nd = 0; nd < D / 8; ++nd) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.f;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    m[hf] = -INFINITY;
    l[hf] = 0.f;
    lz[hf] = c.fixed && c.w.Row(hf) < p.T ? c.hd.log_z[c.w.Row(hf)] : 0.f;
  }
  const float scale2 = p.scale * kLog2e;
  DoubleBufferedTiles(
      count, issue, [&] { core.LoadsLanded(); },
      [&](int n) {
        const int k0 = c.br.Block(n) * kFwdBk;
        const bool need_mask = !TileAllVisible(c.hd, c.q0, c.q1 - 1, k0, k0 + kFwdBk - 1);
        if (c.fixed) {  // SAF eq. 3: P without scores or softmax
          float s[kFwdBk / 8][4];
          FixedScoresTile<kCtaRows>(s, FixedTileAt<kCtaRows>(core.fixed_s, n & 1), lz, need_mask,
                                    c.hd, c.w, c.q0, k0);
          core.FixedTile(o, s, n);
        } else {
          core.ScoredTile(o, m, l, c, n, k0, need_mask, scale2);
        }
      });
  if (!c.fixed) core.Finish(o, count);
  CpAsyncWait<0>();
  StoreRows<T, D>(p, o, m, l, lz, c.fixed, c.b, c.h, c.w);
}

}  // namespace internal
}  // namespace kernels
}  // namespace headlab
