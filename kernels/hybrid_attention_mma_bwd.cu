// hybrid_attention_mma_bwd.cu: the tensor-core backward of the hybrid-head layer
// (FlashAttention-2 style, bf16/fp16 in, fp32 accumulation, mma.sync.m16n8k16).
//
// The CTA (64 keys of one (batch, KV head), 4 warps x 16 keys), its loop over the query heads
// of its GQA group (dK/dV sums stay in registers) and over the query tiles of each head that
// can see these keys, Q, dO, lse and delta double-buffered with cp.async, and the fixed heads'
// product form are backward_cta.cuh's skeleton, shared with the wgmma kernel; this file is its
// Core. Everything is computed transposed (keys are the M dimension) so that P^T and dS^T
// come out of the accumulators already in the A-operand layout:
//   S^T = K Q^T,  P^T = exp(S^T - lse),  dV += P^T dO,
//   dP^T = V dO^T,  dS^T = P^T (dP^T - delta) * scale,  dK += dS^T Q,
//   dQ += dS K  (dS^T through shared memory, fp32 atomics into the workspace).
// Fixed heads (SAF eq. 3) rebuild P^T from alpha/rho/logZ and stop after dV: no Q load,
// no Q K^T, no dP, no dQ/dK work. Pruned heads are skipped.
#include "kernels/backward_cta.cuh"
#include "kernels/forward_tile.cuh"  // PackP

namespace headlab {
namespace kernels {
namespace internal {
namespace {

constexpr int kBk = kBwdBk, kBq = kBwdBq, kThreads = kBwdCtaThreads;

template <int D>
constexpr size_t MmaBackwardSmemBytes() {
  // K, V [64][D+8]; Q, dO [2][64][D+8]; dS^T [64][64+8]; row statistics (backward_tile.cuh).
  return 2 * (2 * kBk * (D + 8) + 4 * kBq * (D + 8) + kBk * (kBq + 8)) + 4 * BwdStatsFloats();
}

// CTAs per SM the register allocation must allow. Left free: 209 registers at d=64
// gave 2 CTAs (8 warps) per SM while shared memory (~69 KB) allows 3; d=64 asks for 3
// (<= 168 registers, ~100 bytes of spill): 12.6% faster fwd+bwd.
template <int D>
constexpr int MinBlocksPerSm() {
  return D == 64 ? 3 : 0;
}  // 0: no bound

// The mma.sync Core of the backward skeleton (backward_cta.cuh): rows padded to D + 8
// (ldmatrix's eight row addresses in distinct banks), every matmul by mma.sync.m16n8k16 with
// ldmatrix (transposed where the operand is N-major).
template <typename T, int D>
struct MmaBackwardCore {
  const Params& p;
  T* ks;     // [64][D + 8]
  T* vs;     // [64][D + 8]
  T* qs;     // [2][64][D + 8]
  T* dos;    // [2][64][D + 8]
  T* dst_s;  // dS^T [64 keys][64 + 8 queries]
  BwdStats st;

  __device__ MmaBackwardCore(const Params& params, unsigned char* smem)
      : p(params),
        ks(reinterpret_cast<T*>(smem)),
        vs(ks + kBk * (D + 8)),
        qs(vs + kBk * (D + 8)),
        dos(qs + 2 * kBq * (D + 8)),
        dst_s(dos + 2 * kBq * (D + 8)),
        st(reinterpret_cast<float*>(dst_s + kBk * (kBq + 8))) {}

  __device__ void LoadKV(const BackwardCta& c) {
    LoadRows<T, D, kBk, kThreads>(p, p.k, c.b, c.g, c.k0, ks);
    LoadRows<T, D, kBk, kThreads>(p, p.v, c.b, c.g, c.k0, vs);
  }
  __device__ void LoadQ(const BackwardCta& c, int h, int q0, int buf) {
    LoadRows<T, D, kBq, kThreads>(p, p.q, c.b, h, q0, qs + buf * kBq * (D + 8));
  }
  __device__ void LoadDo(const BackwardCta& c, int h, int q0, int buf) {
    LoadRows<T, D, kBq, kThreads>(p, p.d_o, c.b, h, q0, dos + buf * kBq * (D + 8));
  }
  __device__ void LoadsLanded() {}

  // acc (16 keys x 64 queries per warp) = rows (K or V, this warp's 16) x cols^T (Q or dO).
  __device__ void KeysTimesRowsT(float (&acc)[kBq / 8][4], const T* rows, const T* cols) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int nb = 0; nb < kBq / 8; ++nb) acc[nb][0] = acc[nb][1] = acc[nb][2] = acc[nb][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t af[4];
      LoadRowFragment<T, D>(af, rows, warp, lane, kk);
      AddTimesRowsT<T, D, kBq>(acc, af, cols, lane, kk);
    }
  }
  // acc (16 keys x D) += a^T-tile (P^T or dS^T, repacked accumulators) x rows (dO or Q),
  // B by transposed ldmatrix.
  __device__ void AddTileTimesRows(float (&acc)[D / 8][4], const float (&a)[kBq / 8][4],
                                   const T* rows) {
    AddPackedTimesRows<T, D, kBq>(acc, a, rows);
  }

  __device__ void FixedTile(float (&dv)[D / 8][4], const float (&pt)[kBq / 8][4], int buf) {
    AddTileTimesRows(dv, pt, dos + buf * kBq * (D + 8));
  }

  __device__ void ScoredTile(float (&dk)[D / 8][4], float (&dv)[D / 8][4], const BackwardCta& cta,
                             const DeviceHead& hd, int q0, int buf, size_t row_base, bool need_mask,
                             float scale2) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int gr = lane / 4, tq = lane % 4;
    const T* qt = qs + buf * kBq * (D + 8);
    const T* dot = dos + buf * kBq * (D + 8);
    // P^T (16 keys x 64 queries per warp) in accumulator layout; dV += P^T dO.
    float pt[kBq / 8][4];
    KeysTimesRowsT(pt, ks, qt);
    ScoresToPt(pt, st.lse + buf * kBq, need_mask, hd, q0, cta.w, scale2);
    AddTileTimesRows(dv, pt, dot);
    // dP^T = V dO^T; dS^T = P^T (dP^T - delta) * scale, kept in pt and staged in shared memory.
    float dpt[kBq / 8][4];
    KeysTimesRowsT(dpt, vs, dot);
    DsFromDp(pt, dpt, st.delta + buf * kBq, p.scale, tq);
#pragma unroll
    for (int nb = 0; nb < kBq / 8; ++nb) {
      const int ql = nb * 8 + 2 * tq, ra = warp * 16 + gr;
      *reinterpret_cast<uint32_t*>(dst_s + ra * (kBq + 8) + ql) =
          Mma<T>::Pack(pt[nb][0], pt[nb][1]);
      *reinterpret_cast<uint32_t*>(dst_s + (ra + 8) * (kBq + 8) + ql) =
          Mma<T>::Pack(pt[nb][2], pt[nb][3]);
    }
    AddTileTimesRows(dk, pt, qt);  // dK += dS^T Q
    __syncthreads();               // dS^T complete
    // dQ (16 queries x D per warp) = dS K: A = dS from dS^T by transposed ldmatrix, B = K by
    // transposed ldmatrix; then fp32 atomics into the workspace.
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
};

template <typename T, int D, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks) MmaBackwardKernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  MmaBackwardCore<T, D> core(p, smem_raw);
  RunBackwardCta<T, D>(p, core);
}

template <typename T, int D, int kMinBlocks>
cudaError_t MmaBackwardLaunch(const Params& p, cudaStream_t s) {
  const dim3 grid((p.T + kBk - 1) / kBk, p.G, p.B);
  return LaunchWithSmem(MmaBackwardKernel<T, D, kMinBlocks>, grid, kThreads,
                        MmaBackwardSmemBytes<D>(), s, p);
}

}  // namespace

template <typename T>
cudaError_t LaunchMmaBackward(const Params& p, cudaStream_t s) {
  switch (p.d) {
    case 64:
      return MmaBackwardLaunch<T, 64, MinBlocksPerSm<64>()>(p, s);
    case 96:
      return MmaBackwardLaunch<T, 96, MinBlocksPerSm<96>()>(p, s);
    case 128:
      return MmaBackwardLaunch<T, 128, MinBlocksPerSm<128>()>(p, s);
    default:
      return cudaErrorInvalidValue;
  }
}

template cudaError_t LaunchMmaBackward<__nv_bfloat16>(const Params&, cudaStream_t);
template cudaError_t LaunchMmaBackward<__half>(const Params&, cudaStream_t);

}  // namespace internal
}  // namespace kernels
}  // namespace headlab
