// hybrid_attention_wgmma_bwd.cu: the Hopper backward of the hybrid-head layer (sm_90a,
// bf16/fp16 in, fp32 accumulation, d = 64): the mma.sync backward's algorithm
// (hybrid_attention_mma_bwd.cu) with its five matmuls on warpgroup MMA (wgmma_primitives.cuh).
//
// One CTA = one warpgroup = 64 keys of one (batch, KV head), looping over the query heads of
// its GQA group and the query tiles each head's mask lets see these keys. Keys are the M
// dimension, so P^T and dS^T come out of the accumulators in the register-A layout:
//   S^T = K Q^T, dP^T = V dO^T          (shared x shared, issued together)
//   P^T = exp(S^T - lse)                 (while dP^T runs)
//   dV += P^T dO, dK += dS^T Q           (registers x shared, dO and Q N-major)
//   dQ  = dS K                           (dS^T staged in shared memory, read M-major; fp32
//                                         atomics into the workspace)
// Fixed heads (SAF eq. 3) rebuild P^T in product form and stop after dV.
#include "kernels/backward_tile.cuh"
#include "kernels/forward_tile.cuh"  // PackP
#include "kernels/wgmma_primitives.cuh"

namespace headlab {
namespace kernels {
namespace internal {
namespace {

constexpr int kD = 64, kBk = kBwdBk, kBq = kBwdBq, kThreads = 128;
constexpr int kTileElems = 64 * kD;  // one swizzled 64 x 64 tile
constexpr int kAlign = 1024;         // swizzle atoms are 1024-byte aligned
constexpr int kRowBytes = 128;       // one swizzled row

// K, V; Q, dO [2]; dS^T: seven swizzled tiles (56 KB), the row statistics, alignment slack.
constexpr size_t WgmmaBackwardSmemBytes() { return kAlign + 2 * 7 * kTileElems + 4 * BwdStatsFloats(); }

// 2 CTAs (8 warps) per SM: 236 registers. At 3 (<= 168 registers) ptxas serializes the wgmma
// for want of registers (C7512); kernels/dev/NOTES.md run 15 times both.
constexpr int kMinBlocks = 2;

template <typename T>
__global__ void __launch_bounds__(kThreads, kMinBlocks) WgmmaBackwardKernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* base = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + kAlign - 1) & ~uintptr_t(kAlign - 1));
  T* ks = reinterpret_cast<T*>(base);
  T* vs = ks + kTileElems;
  T* qs = vs + kTileElems;       // [2][64][64]
  T* dos = qs + 2 * kTileElems;  // [2][64][64]
  T* dss = dos + 2 * kTileElems; // dS^T [64 keys][64 queries]
  const BwdStats st(reinterpret_cast<float*>(dss + kTileElems));

  const int kb = gridDim.x - 1 - blockIdx.x;  // early keys see the most queries: first
  const int k0 = kb * kBk, g = blockIdx.y, b = blockIdx.z;
  const int k1 = min(k0 + kBk, p.T);
  const int rep = p.H / p.G;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int gr = lane / 4, tq = lane % 4;
  const WarpKeys w{k0 + warp * 16 + gr, gr, tq, warp};
  const float scale2 = p.scale * kLog2e;

  LoadRowsSw128<T, kBk, kThreads>(p, p.k, b, g, k0, ks);
  LoadRowsSw128<T, kBk, kThreads>(p, p.v, b, g, k0, vs);
  CpAsyncCommit();
  const uint64_t k_desc = SmemDescSw128(ks), v_desc = SmemDescSw128(vs), ds_desc = SmemDescSw128(dss);

  float dk[kD / 8][4], dv[kD / 8][4];
#pragma unroll
  for (int n = 0; n < kD / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[n][e] = dv[n][e] = 0.f;

  for (int h = g * rep; h < (g + 1) * rep; ++h) {
    const DeviceHead hd = p.heads[h];
    const HeadState state = static_cast<HeadState>(hd.state);
    if (state == HeadState::kPruned) continue;  // uniform over the CTA
    const bool fixed = state == HeadState::kFixed;
    const BlockRanges br = ToBlocks(QuerySpanForKeys(state, hd.window, hd.sink, hd.recent, k0, k1, p.T), kBq);
    const int count = br.Count();
    const size_t row_base = (size_t(b) * p.H + h) * p.T;
    __syncthreads();  // the previous head's last tile is fully consumed
    BandRaw band;  // fixed heads: the next query tile's rho band, in flight
    if (fixed) {
      StageAlpha(p, hd, k0, st, warp);
      if (count > 0) FetchBand(p, hd, k0, br.Block(0) * kBq, &band, warp);
      __syncthreads();  // A is read by the rho staging in IssueRowStats
    }
    auto issue = [&](int n) {
      const int q0 = br.Block(n) * kBq, buf = n & 1;
      if (!fixed) LoadRowsSw128<T, kBq, kThreads>(p, p.q, b, h, q0, qs + buf * kTileElems);
      LoadRowsSw128<T, kBq, kThreads>(p, p.d_o, b, h, q0, dos + buf * kTileElems);
      IssueRowStats(p, hd, fixed, q0, buf, row_base, band, st);
      if (fixed && n + 1 < count) FetchBand(p, hd, k0, br.Block(n + 1) * kBq, &band, warp);
    };
    if (count > 0) issue(0);
    CpAsyncCommit();

    for (int n = 0; n < count; ++n) {
      if (n + 1 < count) issue(n + 1);
      CpAsyncCommit();
      CpAsyncWait<1>();
      FenceProxyAsyncShared();
      __syncthreads();
      const int q0 = br.Block(n) * kBq, buf = n & 1;
      const uint64_t q_desc = SmemDescSw128(qs + buf * kTileElems);
      const uint64_t do_desc = SmemDescSw128(dos + buf * kTileElems);
      const float* lse_t = st.lse + buf * kBq;
      const float* delta_t = st.delta + buf * kBq;
      const bool need_mask = !TileAllVisible(hd, q0, min(q0 + kBq, p.T) - 1, k0, k0 + kBk - 1);

      float pt[kBq / 8][4], dpt[kBq / 8][4];
      if (!fixed) {
        WgmmaFence();
#pragma unroll
        for (int kk = 0; kk < kD / 16; ++kk)  // S^T = K Q^T
          Wgmma<T>::SS(pt, DescPlus(k_desc, 32 * kk), DescPlus(q_desc, 32 * kk), kk);
        WgmmaCommit();
#pragma unroll
        for (int kk = 0; kk < kD / 16; ++kk)  // dP^T = V dO^T
          Wgmma<T>::SS(dpt, DescPlus(v_desc, 32 * kk), DescPlus(do_desc, 32 * kk), kk);
        WgmmaCommit();
        WgmmaWait<1>();
        FenceOperands(pt);
        ScoresToPt(pt, lse_t, need_mask, hd, q0, w, scale2);
      } else {
        FixedPt(pt, st, buf, need_mask, hd, p.T, q0, k0, w);
      }
      // dV += P^T dO: B = dO (queries x d), N-major, 16 queries per k-step.
      uint32_t pa[kBq / 16][4];
#pragma unroll
      for (int kk = 0; kk < kBq / 16; ++kk) PackP<T>(pt, kk, pa[kk]);
      FenceOperands(dv);
      WgmmaFence();
#pragma unroll
      for (int kk = 0; kk < kBq / 16; ++kk) Wgmma<T>::RS(dv, pa[kk], DescPlus(do_desc, 16 * kRowBytes * kk), 1);
      WgmmaCommit();
      if (!fixed) {
        WgmmaWait<1>();  // dP^T is done (dV may still run)
        FenceOperands(dpt);
        DsFromDp(pt, dpt, delta_t, p.scale, tq);
        uint32_t da[kBq / 16][4];
#pragma unroll
        for (int kk = 0; kk < kBq / 16; ++kk) PackP<T>(pt, kk, da[kk]);
        StoreFragmentsSw128(da, dss, warp, gr, tq);  // dS^T [key][query], for dQ
        // dK += dS^T Q: B = Q (queries x d), N-major.
        FenceOperands(dk);
        WgmmaFence();
#pragma unroll
        for (int kk = 0; kk < kBq / 16; ++kk) Wgmma<T>::RS(dk, da[kk], DescPlus(q_desc, 16 * kRowBytes * kk), 1);
        WgmmaCommit();
        FenceProxyAsyncShared();
        __syncthreads();  // dS^T staged by all four warps
        // dQ = dS K: A = dS (queries x keys) read M-major from dS^T, B = K (keys x d) N-major.
        float dq[kD / 8][4];
        WgmmaFence();
#pragma unroll
        for (int kk = 0; kk < kBk / 16; ++kk)
          Wgmma<T>::template SS<1, 1>(dq, DescPlus(ds_desc, 16 * kRowBytes * kk), DescPlus(k_desc, 16 * kRowBytes * kk), kk);
        WgmmaCommit();
        WgmmaWait<0>();
        FenceOperands(dq);
        FenceOperands(dk);
        FenceOperands(dv);
        const int qa = q0 + warp * 16 + gr;
#pragma unroll
        for (int nb = 0; nb < kD / 8; ++nb) {
          const int c = nb * 8 + 2 * tq;
          AtomicAddDq(p, row_base, qa, c, kD, dq[nb][0], dq[nb][1]);
          AtomicAddDq(p, row_base, qa + 8, c, kD, dq[nb][2], dq[nb][3]);
        }
      } else {
        WgmmaWait<0>();
        FenceOperands(dv);
      }
      __syncthreads();  // buffers of tile n are refilled by the issue of tile n + 2
    }
    CpAsyncWait<0>();
  }
  CpAsyncWait<0>();
  StoreDkDv<T, kD>(p, dk, dv, b, g, w);
}

}  // namespace

template <typename T>
cudaError_t LaunchWgmmaBackward(const Params& p, cudaStream_t s) {
  if (p.d != kD) return cudaErrorInvalidValue;
  const dim3 grid((p.T + kBk - 1) / kBk, p.G, p.B);
  return LaunchWithSmem(WgmmaBackwardKernel<T>, grid, kThreads, WgmmaBackwardSmemBytes(), s, p);
}

template cudaError_t LaunchWgmmaBackward<__nv_bfloat16>(const Params&, cudaStream_t);
template cudaError_t LaunchWgmmaBackward<__half>(const Params&, cudaStream_t);

}  // namespace internal
}  // namespace kernels
}  // namespace headlab
