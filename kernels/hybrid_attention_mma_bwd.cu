// hybrid_attention_mma_bwd.cu: the tensor-core backward of the hybrid-head layer
// (FlashAttention-2 style, bf16/fp16 in, fp32 accumulation, mma.sync.m16n8k16).
//
// One CTA = 64 keys of one (batch, KV head), 4 warps x 16 keys, looping over the query
// heads of its GQA group (dK/dV sums stay in registers) and over the query tiles of each
// head that can see these keys (head_mask.h QuerySpanForKeys: local/streaming heads skip
// the rest). Q, dO, lse and delta tiles are double buffered with cp.async. Everything is
// computed transposed (keys are the M dimension) so that P^T and dS^T come out of the
// accumulators already in the A-operand layout:
//   S^T = K Q^T,  P^T = exp(S^T - lse),  dV += P^T dO,
//   dP^T = V dO^T,  dS^T = P^T (dP^T - delta) * scale,  dK += dS^T Q,
//   dQ += dS K  (dS^T through shared memory, fp32 atomics into the workspace).
// Fixed heads (SAF eq. 3) rebuild P^T from alpha/rho/logZ and stop after dV: no Q load,
// no Q K^T, no dP, no dQ/dK work. Pruned heads are skipped.
#include "kernels/backward_tile.cuh"
#include "kernels/forward_tile.cuh"  // PackP

namespace headlab {
namespace kernels {
namespace internal {
namespace {

constexpr int kBk = kBwdBk, kBq = kBwdBq, kWarps = 4, kThreads = kWarps * 32;

template <int D>
constexpr size_t MmaBackwardSmemBytes() {
  // K, V [64][D+8]; Q, dO [2][64][D+8]; dS^T [64][64+8]; row statistics (backward_tile.cuh).
  return 2 * (2 * kBk * (D + 8) + 4 * kBq * (D + 8) + kBk * (kBq + 8)) + 4 * BwdStatsFloats();
}

// CTAs per SM the register allocation must allow. Run 4 left it free: 209 registers at d=64
// gave 2 CTAs (8 warps) per SM while shared memory (~69 KB) allows 3; d=64 asks for 3
// (<= 168 registers, ~100 bytes of spill): 12.6% faster fwd+bwd (NOTES.md run 11).
template <int D> constexpr int MinBlocksPerSm() { return D == 64 ? 3 : 0; }  // 0: no bound

template <typename T, int D, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks) MmaBackwardKernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* ks = reinterpret_cast<T*>(smem_raw);
  T* vs = ks + kBk * (D + 8);
  T* qs = vs + kBk * (D + 8);          // [2][64][D + 8]
  T* dos = qs + 2 * kBq * (D + 8);     // [2][64][D + 8]
  T* dst_s = dos + 2 * kBq * (D + 8);  // dS^T [64 keys][64 + 8 queries]
  const BwdStats st(reinterpret_cast<float*>(dst_s + kBk * (kBq + 8)));

  const int kb = gridDim.x - 1 - blockIdx.x;  // early keys see the most queries: first
  const int k0 = kb * kBk, g = blockIdx.y, b = blockIdx.z;
  const int k1 = min(k0 + kBk, p.T);
  const int rep = p.H / p.G;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int gr = lane / 4, tq = lane % 4;
  const WarpKeys w{k0 + warp * 16 + gr, gr, tq, warp};  // this thread's accumulator rows
  const float scale2 = p.scale * kLog2e;

  LoadRows<T, D, kBk, kThreads>(p, p.k, b, g, k0, ks);
  LoadRows<T, D, kBk, kThreads>(p, p.v, b, g, k0, vs);
  CpAsyncCommit();

  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
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
      if (!fixed) LoadRows<T, D, kBq, kThreads>(p, p.q, b, h, q0, qs + buf * kBq * (D + 8));
      LoadRows<T, D, kBq, kThreads>(p, p.d_o, b, h, q0, dos + buf * kBq * (D + 8));
      IssueRowStats(p, hd, fixed, q0, buf, row_base, band, st);
      if (fixed && n + 1 < count) FetchBand(p, hd, k0, br.Block(n + 1) * kBq, &band, warp);
    };
    if (count > 0) issue(0);
    CpAsyncCommit();

    for (int n = 0; n < count; ++n) {
      if (n + 1 < count) issue(n + 1);
      CpAsyncCommit();
      CpAsyncWait<1>();
      __syncthreads();
      const int q0 = br.Block(n) * kBq, buf = n & 1;
      const T* qt = qs + buf * kBq * (D + 8);
      const T* dot = dos + buf * kBq * (D + 8);
      const float* lse_t = st.lse + buf * kBq;
      const float* delta_t = st.delta + buf * kBq;
      const bool need_mask = !TileAllVisible(hd, q0, min(q0 + kBq, p.T) - 1, k0, k0 + kBk - 1);

      // P^T (16 keys x 64 queries per warp) in accumulator layout.
      float pt[kBq / 8][4];
      if (!fixed) {
#pragma unroll
        for (int nb = 0; nb < kBq / 8; ++nb) pt[nb][0] = pt[nb][1] = pt[nb][2] = pt[nb][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          uint32_t af[4];
          {
            const int r = warp * 16 + (lane % 8) + ((lane / 8) & 1) * 8, c = kk * 16 + (lane / 16) * 8;
            LdMatrixX4(af, ks + r * (D + 8) + c);
          }
#pragma unroll
          for (int np = 0; np < kBq / 16; ++np) {
            uint32_t bf[4];
            const int mi = lane / 8;
            const int q = np * 16 + (mi >> 1) * 8 + lane % 8, c = kk * 16 + (mi & 1) * 8;
            LdMatrixX4(bf, qt + q * (D + 8) + c);
            Mma<T>::Run(pt[2 * np], af, bf[0], bf[1]);
            Mma<T>::Run(pt[2 * np + 1], af, bf[2], bf[3]);
          }
        }
        ScoresToPt(pt, lse_t, need_mask, hd, q0, w, scale2);
      } else {
        FixedPt(pt, st, buf, need_mask, hd, p.T, q0, k0, w);
      }
      // dV += P^T dO: A = P^T (repacked accumulators), B = dO by transposed ldmatrix.
#pragma unroll
      for (int kk = 0; kk < kBq / 16; ++kk) {
        uint32_t af[4];
        PackP<T>(pt, kk, af);
#pragma unroll
        for (int np = 0; np < D / 16; ++np) {
          uint32_t bf[4];
          const int mi = lane / 8;
          const int q = kk * 16 + (mi & 1) * 8 + lane % 8, c = np * 16 + (mi >> 1) * 8;
          LdMatrixX4Trans(bf, dot + q * (D + 8) + c);
          Mma<T>::Run(dv[2 * np], af, bf[0], bf[1]);
          Mma<T>::Run(dv[2 * np + 1], af, bf[2], bf[3]);
        }
      }
      if (!fixed) {
        // dP^T = V dO^T (16 keys x 64 queries per warp).
        float dpt[kBq / 8][4];
#pragma unroll
        for (int nb = 0; nb < kBq / 8; ++nb) dpt[nb][0] = dpt[nb][1] = dpt[nb][2] = dpt[nb][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          uint32_t af[4];
          {
            const int r = warp * 16 + (lane % 8) + ((lane / 8) & 1) * 8, c = kk * 16 + (lane / 16) * 8;
            LdMatrixX4(af, vs + r * (D + 8) + c);
          }
#pragma unroll
          for (int np = 0; np < kBq / 16; ++np) {
            uint32_t bf[4];
            const int mi = lane / 8;
            const int q = np * 16 + (mi >> 1) * 8 + lane % 8, c = kk * 16 + (mi & 1) * 8;
            LdMatrixX4(bf, dot + q * (D + 8) + c);
            Mma<T>::Run(dpt[2 * np], af, bf[0], bf[1]);
            Mma<T>::Run(dpt[2 * np + 1], af, bf[2], bf[3]);
          }
        }
        // dS^T = P^T (dP^T - delta) * scale, kept in pt; also staged in shared memory.
        DsFromDp(pt, dpt, delta_t, p.scale, tq);
#pragma unroll
        for (int nb = 0; nb < kBq / 8; ++nb) {
          const int ql = nb * 8 + 2 * tq, ra = warp * 16 + gr;
          *reinterpret_cast<uint32_t*>(dst_s + ra * (kBq + 8) + ql) = Mma<T>::Pack(pt[nb][0], pt[nb][1]);
          *reinterpret_cast<uint32_t*>(dst_s + (ra + 8) * (kBq + 8) + ql) = Mma<T>::Pack(pt[nb][2], pt[nb][3]);
        }
        // dK += dS^T Q: B = Q by transposed ldmatrix.
#pragma unroll
        for (int kk = 0; kk < kBq / 16; ++kk) {
          uint32_t af[4];
          PackP<T>(pt, kk, af);
#pragma unroll
          for (int np = 0; np < D / 16; ++np) {
            uint32_t bf[4];
            const int mi = lane / 8;
            const int q = kk * 16 + (mi & 1) * 8 + lane % 8, c = np * 16 + (mi >> 1) * 8;
            LdMatrixX4Trans(bf, qt + q * (D + 8) + c);
            Mma<T>::Run(dk[2 * np], af, bf[0], bf[1]);
            Mma<T>::Run(dk[2 * np + 1], af, bf[2], bf[3]);
          }
        }
        __syncthreads();  // dS^T complete
        // dQ (16 queries x D per warp) = dS K: A = dS from dS^T by transposed ldmatrix,
        // B = K by transposed ldmatrix; then fp32 atomics into the workspace.
        const int qa = q0 + warp * 16 + gr;
#pragma unroll
        for (int np = 0; np < D / 16; ++np) {
          float acc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
          for (int kk = 0; kk < kBk / 16; ++kk) {
            uint32_t af[4], bf[4];
            const int mi = lane / 8;
            {
              const int key = kk * 16 + (mi >> 1) * 8 + lane % 8, q = warp * 16 + (mi & 1) * 8;
              LdMatrixX4Trans(af, dst_s + key * (kBq + 8) + q);
            }
            {
              const int key = kk * 16 + (mi & 1) * 8 + lane % 8, c = np * 16 + (mi >> 1) * 8;
              LdMatrixX4Trans(bf, ks + key * (D + 8) + c);
            }
            Mma<T>::Run(acc[0], af, bf[0], bf[1]);
            Mma<T>::Run(acc[1], af, bf[2], bf[3]);
          }
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int c = np * 16 + half * 8 + 2 * tq;
            AtomicAddDq(p, row_base, qa, c, D, acc[half][0], acc[half][1]);
            AtomicAddDq(p, row_base, qa + 8, c, D, acc[half][2], acc[half][3]);
          }
        }
      }
      __syncthreads();  // buffers of tile n are refilled by the issue of tile n + 2
    }
    CpAsyncWait<0>();
  }
  CpAsyncWait<0>();
  StoreDkDv<T, D>(p, dk, dv, b, g, w);
}

template <typename T, int D, int kMinBlocks>
cudaError_t MmaBackwardLaunch(const Params& p, cudaStream_t s) {
  const dim3 grid((p.T + kBk - 1) / kBk, p.G, p.B);
  return LaunchWithSmem(MmaBackwardKernel<T, D, kMinBlocks>, grid, kThreads, MmaBackwardSmemBytes<D>(), s, p);
}

}  // namespace

template <typename T>
cudaError_t LaunchMmaBackward(const Params& p, cudaStream_t s) {
  switch (p.d) {
    case 64: return MmaBackwardLaunch<T, 64, MinBlocksPerSm<64>()>(p, s);
    case 96: return MmaBackwardLaunch<T, 96, MinBlocksPerSm<96>()>(p, s);
    case 128: return MmaBackwardLaunch<T, 128, MinBlocksPerSm<128>()>(p, s);
    default: return cudaErrorInvalidValue;
  }
}

template cudaError_t LaunchMmaBackward<__nv_bfloat16>(const Params&, cudaStream_t);
template cudaError_t LaunchMmaBackward<__half>(const Params&, cudaStream_t);

}  // namespace internal
}  // namespace kernels
}  // namespace headlab
