// hybrid_attention_wgmma_bwd.cu: the Hopper backward of the hybrid-head layer (sm_90a,
// bf16/fp16 in, fp32 accumulation, d = 64): the mma.sync backward's algorithm
// (hybrid_attention_mma_bwd.cu) with its five matmuls on warpgroup MMA (wgmma_primitives.cuh).
//
// The CTA (one warpgroup = 64 keys of one (batch, KV head)), its loop over the query heads of
// its GQA group and the query tiles each head's mask lets see these keys, and the fixed
// heads' product form are backward_cta.cuh's skeleton, shared with the mma.sync kernel; this
// file is its Core. Keys are the M dimension, so P^T and dS^T come out of the accumulators
// in the register-A layout:
//   S^T = K Q^T, dP^T = V dO^T          (shared x shared, issued together)
//   P^T = exp(S^T - lse)                 (while dP^T runs)
//   dV += P^T dO, dK += dS^T Q           (registers x shared, dO and Q N-major)
//   dQ  = dS K                           (dS^T staged in shared memory, read M-major; fp32
//                                         atomics into the workspace)
// Fixed heads (SAF eq. 3) rebuild P^T in product form and stop after dV.
#include "kernels/backward_cta.cuh"
#include "kernels/forward_tile.cuh"  // PackP
#include "kernels/wgmma_primitives.cuh"

namespace headlab {
namespace kernels {
namespace internal {
namespace {

constexpr int kD = 64, kBk = kBwdBk, kBq = kBwdBq, kThreads = kBwdCtaThreads;
constexpr int kTileElems = 64 * kD;  // one swizzled 64 x 64 tile
constexpr int kRowBytes = 128;       // one swizzled row

// K, V; Q, dO [2]; dS^T: seven swizzled tiles (56 KB), the row statistics, alignment slack.
constexpr size_t WgmmaBackwardSmemBytes() {
  return kSwizzleAlign + 2 * 7 * kTileElems + 4 * BwdStatsFloats();
}

// 2 CTAs (8 warps) per SM: 236 registers. At 3 (<= 168 registers) ptxas serializes the wgmma
// for want of registers (C7512).
constexpr int kMinBlocks = 2;

// The wgmma Core of the backward skeleton (backward_cta.cuh): tiles in the 128-byte swizzle.
// S^T and dP^T are issued together from shared memory; P^T is formed while dP^T runs; dV and
// dK take P^T / dS^T from registers; dQ reads the staged dS^T M-major.
template <typename T>
struct WgmmaBackwardCore {
  const Params& p;
  T* ks;   // [64][64]
  T* vs;   // [64][64]
  T* qs;   // [2][64][64]
  T* dos;  // [2][64][64]
  T* dss;  // dS^T [64 keys][64 queries]
  BwdStats st;

  __device__ WgmmaBackwardCore(const Params& params, unsigned char* base)
      : p(params),
        ks(reinterpret_cast<T*>(base)),
        vs(ks + kTileElems),
        qs(vs + kTileElems),
        dos(qs + 2 * kTileElems),
        dss(dos + 2 * kTileElems),
        st(reinterpret_cast<float*>(dss + kTileElems)) {}

  __device__ void LoadKV(const BackwardCta& c) {
    LoadRowsSw128<T, kBk, kThreads>(p, p.k, c.b, c.g, c.k0, ks);
    LoadRowsSw128<T, kBk, kThreads>(p, p.v, c.b, c.g, c.k0, vs);
  }
  __device__ void LoadQ(const BackwardCta& c, int h, int q0, int buf) {
    LoadRowsSw128<T, kBq, kThreads>(p, p.q, c.b, h, q0, qs + buf * kTileElems);
  }
  __device__ void LoadDo(const BackwardCta& c, int h, int q0, int buf) {
    LoadRowsSw128<T, kBq, kThreads>(p, p.d_o, c.b, h, q0, dos + buf * kTileElems);
  }
  __device__ void LoadsLanded() { FenceProxyAsyncShared(); }

  // dV += P^T dO: B = dO (queries x d), N-major, 16 queries per k-step; one commit group.
  __device__ void IssueDv(float (&dv)[kD / 8][4], const float (&pt)[kBq / 8][4], uint64_t do_desc) {
    uint32_t pa[kBq / 16][4];
#pragma unroll
    for (int kk = 0; kk < kBq / 16; ++kk) PackP<T>(pt, kk, pa[kk]);
    FenceOperands(dv);
    WgmmaFence();
#pragma unroll
    for (int kk = 0; kk < kBq / 16; ++kk)
      Wgmma<T>::RS(dv, pa[kk], DescPlus(do_desc, 16 * kRowBytes * kk), 1);
    WgmmaCommit();
  }

  __device__ void FixedTile(float (&dv)[kD / 8][4], const float (&pt)[kBq / 8][4], int buf) {
    IssueDv(dv, pt, SmemDescSw128(dos + buf * kTileElems));
    WgmmaWait<0>();
    FenceOperands(dv);
  }

  __device__ void ScoredTile(float (&dk)[kD / 8][4], float (&dv)[kD / 8][4], const BackwardCta& c,
                             const DeviceHead& hd, int q0, int buf, size_t row_base, bool need_mask,
                             float scale2) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int gr = lane / 4, tq = lane % 4;
    const uint64_t k_desc = SmemDescSw128(ks), v_desc = SmemDescSw128(vs),
                   ds_desc = SmemDescSw128(dss);
    const uint64_t q_desc = SmemDescSw128(qs + buf * kTileElems);
    const uint64_t do_desc = SmemDescSw128(dos + buf * kTileElems);
    float pt[kBq / 8][4], dpt[kBq / 8][4];
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
    ScoresToPt(pt, st.lse + buf * kBq, need_mask, hd, q0, c.w, scale2);
    IssueDv(dv, pt, do_desc);
    WgmmaWait<1>();  // dP^T is done (dV may still run)
    FenceOperands(dpt);
    DsFromDp(pt, dpt, st.delta + buf * kBq, p.scale, tq);
    uint32_t da[kBq / 16][4];
#pragma unroll
    for (int kk = 0; kk < kBq / 16; ++kk) PackP<T>(pt, kk, da[kk]);
    StoreFragmentsSw128(da, dss, warp, gr, tq);  // dS^T [key][query], for dQ
    // dK += dS^T Q: B = Q (queries x d), N-major.
    FenceOperands(dk);
    WgmmaFence();
#pragma unroll
    for (int kk = 0; kk < kBq / 16; ++kk)
      Wgmma<T>::RS(dk, da[kk], DescPlus(q_desc, 16 * kRowBytes * kk), 1);
    WgmmaCommit();
    FenceProxyAsyncShared();
    __syncthreads();  // dS^T staged by all four warps
    // dQ = dS K: A = dS (queries x keys) read M-major from dS^T, B = K (keys x d) N-major.
    float dq[kD / 8][4];
    WgmmaFence();
#pragma unroll
    for (int kk = 0; kk < kBk / 16; ++kk)
      Wgmma<T>::template SS<1, 1>(dq, DescPlus(ds_desc, 16 * kRowBytes * kk),
                                  DescPlus(k_desc, 16 * kRowBytes * kk), kk);
    WgmmaCommit();
    WgmmaWait<0>();
    FenceOperands(dq);
    FenceOperands(dk);
    FenceOperands(dv);
    const int qa = q0 + warp * 16 + gr;
#pragma unroll
    for (int nb = 0; nb < kD / 8; ++nb) {
      const int col = nb * 8 + 2 * tq;
      AtomicAddDq(p, row_base, qa, col, kD, dq[nb][0], dq[nb][1]);
      AtomicAddDq(p, row_base, qa + 8, col, kD, dq[nb][2], dq[nb][3]);
    }
  }
};

template <typename T>
__global__ void __launch_bounds__(kThreads, kMinBlocks) WgmmaBackwardKernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* base = AlignedSharedBase(smem_raw);
  WgmmaBackwardCore<T> core(p, base);
  RunBackwardCta<T, kD>(p, core);
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
