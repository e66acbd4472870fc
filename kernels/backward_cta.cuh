// backward_cta.cuh: the skeleton the synchronous tensor-core backwards share (mma.sync in
// hybrid_attention_mma_bwd.cu, wgmma in hybrid_attention_wgmma_bwd.cu): one CTA = 64 keys of
// one (batch, KV head), 4 warps x 16 keys, with K and V loaded once; the loop over the query
// heads of its GQA group (dK / dV sums stay in registers; pruned heads are skipped) and over
// the 64-query tiles of each head that can see these keys (head_mask.h QuerySpanForKeys:
// local and streaming heads skip the rest), Q, dO and the row statistics double-buffered
// with cp.async; fixed heads (SAF eq. 3) rebuild P^T in product form from alpha / rho / logZ
// and stop after dV; then dK and dV are written. What differs between the two kernels is a
// Core: its shared-memory layout and loads, the scored tile's five matmuls, and dV.
//
// A Core provides
//   BwdStats st;                                        // row statistics, fixed-head factors
//   void LoadKV(const BackwardCta&);                    // cp.async of the block's K and V
//   void LoadQ(const BackwardCta&, int h, int q0, int buf), LoadDo(...)
//   void LoadsLanded();                                 // after this thread's copies landed
//   void ScoredTile(dk, dv, const BackwardCta&, const DeviceHead&, int q0, int buf,
//                   size_t row_base, bool need_mask, float scale2);
//   void FixedTile(dv, pt, int buf);                    // dV += P^T dO
#pragma once

#include "kernels/backward_tile.cuh"

namespace headlab {
namespace kernels {
namespace internal {

constexpr int kBwdCtaThreads = 128;

// What a CTA works on: its key block (early keys, which the most queries see, first), KV
// head and batch, and this thread's accumulator rows.
struct BackwardCta {
  int k0, k1, g, b;
  WarpKeys w;
  __device__ explicit BackwardCta(const Params& p) {
    k0 = (gridDim.x - 1 - blockIdx.x) * kBwdBk;
    k1 = min(k0 + kBwdBk, p.T);
    g = blockIdx.y;
    b = blockIdx.z;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    w = WarpKeys{k0 + warp * 16 + lane / 4, lane / 4, lane % 4, warp};
  }
};

template <typename T, int D, class Core>
__device__ __forceinline__ void RunBackwardCta(const Params& p, Core& core) {
  const BackwardCta c(p);
  const int warp = threadIdx.x / 32;
  const float scale2 = p.scale * kLog2e;
  core.LoadKV(c);
  CpAsyncCommit();

  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[n][e] = dv[n][e] = 0.f;

  const int rep = p.H / p.G;
  for (int h = c.g * rep; h < (c.g + 1) * rep; ++h) {
    const DeviceHead hd = p.heads[h];
    const HeadState state = static_cast<HeadState>(hd.state);
    if (state == HeadState::kPruned) continue;  // uniform over the CTA
    const bool fixed = state == HeadState::kFixed;
    const BlockRanges br =
        ToBlocks(QuerySpanForKeys(state, hd.window, hd.sink, hd.recent, c.k0, c.k1, p.T), kBwdBq);
    const int count = br.Count();
    const size_t row_base = (size_t(c.b) * p.H + h) * p.T;
    __syncthreads();  // the previous head's last tile is fully consumed
    BandRaw band;     // fixed heads: the next query tile's rho band, in flight
    if (fixed) {
      StageAlpha(p, hd, c.k0, core.st, warp);
      if (count > 0) FetchBand(p, hd, c.k0, br.Block(0) * kBwdBq, &band, warp);
      __syncthreads();  // A is read by the rho staging in IssueRowStats
    }
    auto issue = [&](int n) {
      const int q0 = br.Block(n) * kBwdBq, buf = n & 1;
      if (!fixed) core.LoadQ(c, h, q0, buf);
      core.LoadDo(c, h, q0, buf);
      IssueRowStats(p, hd, fixed, q0, buf, row_base, band, core.st);
      if (fixed && n + 1 < count) FetchBand(p, hd, c.k0, br.Block(n + 1) * kBwdBq, &band, warp);
    };
    if (count > 0) issue(0);
    CpAsyncCommit();
    DoubleBufferedTiles(
        count, issue, [&] { core.LoadsLanded(); },
        [&](int n) {
          const int q0 = br.Block(n) * kBwdBq, buf = n & 1;
          const bool need_mask =
              !TileAllVisible(hd, q0, min(q0 + kBwdBq, p.T) - 1, c.k0, c.k0 + kBwdBk - 1);
          if (fixed) {
            float pt[kBwdBq / 8][4];
            FixedPt(pt, core.st, buf, need_mask, hd, p.T, q0, c.k0, c.w);
            core.FixedTile(dv, pt, buf);
          } else {
            core.ScoredTile(dk, dv, c, hd, q0, buf, row_base, need_mask, scale2);
          }
        });
    CpAsyncWait<0>();
  }
  CpAsyncWait<0>();
  StoreDkDv<T, D>(p, dk, dv, c.b, c.g, c.w);
}

}  // namespace internal
}  // namespace kernels
}  // namespace headlab
