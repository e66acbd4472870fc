// hybrid_attention_mma.cu: the tensor-core forward of the hybrid-head layer (bf16/fp16 in,
// fp32 accumulation), FlashAttention-2 style with mma.sync.m16n8k16 (sm_80+; on sm_90 the
// wgmma forward in hybrid_attention_wgmma.cu runs instead where it applies).
//
// The CTA (64 query rows of one (batch, head), 4 warps x 16 rows), its head states and its
// tile loop are forward_cta.cuh's skeleton, shared with the wgmma kernel: ordinary = full
// causal; local/streaming = only the key tiles their window intersects (head_mask.h), masks
// only on boundary tiles; fixed = SAF eq. 3 tiles of P built from alpha/rho/logZ in product
// form — no Q load, no Q K^T, no softmax, no per-element exp; pruned = zeros. This file is its
// Core: S = Q K^T and the online softmax stay in registers; P is repacked from the
// accumulator layout straight into the A-operand layout of P V (no shared-memory round
// trip).
#include "kernels/forward_cta.cuh"

namespace headlab {
namespace kernels {
namespace internal {
namespace {

constexpr int kBk = kFwdBk, kBq = kCtaRows, kThreads = kCtaThreads;

// Query rows per CTA: 64, one m-tile of 16 rows per warp. Two m-tiles per warp (128-row
// blocks) reuse each K/V fragment twice, but measured on H200 it
// gained only 3.5% for all-ordinary d=64 while local heads lost 25% to coarser window blocks.

// Shared memory: Q [64][D+8]; K, V [2][64][D+8]; two buffers of fixed-head factors.
template <int D>
constexpr size_t MmaForwardSmemBytes() {
  return 2 * (kBq * (D + 8) + 4 * kBk * (D + 8)) + 4 * 2 * FixedTileFloats<kBq>();
}

// CTAs per SM the register allocation must allow. Left free, 167 registers
// at d=64 gave 3 CTAs (12 warps) per SM, and the kernel is latency bound, so d=64 asks for 4
// (16 warps; <= 128 registers, 12 bytes of spill; shared memory 48 KB per CTA allows 4): 6.5%
// faster. d=96/128 keep their registers (their accumulators need them).
template <int D>
constexpr int MinBlocksPerSm() {
  return D == 64 ? 4 : 1;
}

// The mma.sync Core of the forward skeleton (forward_cta.cuh): Q, K, V rows padded to D + 8
// (ldmatrix's eight row addresses in distinct banks), Q fragments loaded once, S and O by
// mma.sync.m16n8k16, V fragments by transposed ldmatrix.
template <typename T, int D>
struct MmaForwardCore {
  const Params& p;
  T* qs;  // [64][D + 8]
  T* ks;  // [2][64][D + 8]
  T* vs;  // [2][64][D + 8]
  float* fixed_s;
  uint32_t qf[D / 16][4];  // Q fragments (loaded on the first scored tile)

  __device__ MmaForwardCore(const Params& params, unsigned char* smem)
      : p(params),
        qs(reinterpret_cast<T*>(smem)),
        ks(qs + kBq * (D + 8)),
        vs(ks + 2 * kBk * (D + 8)),
        fixed_s(reinterpret_cast<float*>(vs + 2 * kBk * (D + 8))) {}

  __device__ void LoadQ(const ForwardCta& c) {
    LoadRows<T, D, kBq, kThreads>(p, p.q, c.b, c.h, c.q0, qs);
  }
  __device__ void LoadK(const ForwardCta& c, int k0, int n) {
    LoadRows<T, D, kBk, kThreads>(p, p.k, c.b, c.g, k0, ks + (n & 1) * kBk * (D + 8));
  }
  __device__ void LoadV(const ForwardCta& c, int k0, int n) {
    LoadRows<T, D, kBk, kThreads>(p, p.v, c.b, c.g, k0, vs + (n & 1) * kBk * (D + 8));
  }
  __device__ void LoadsLanded() {}

  // O += P V_n: P from the accumulators, V fragments by transposed ldmatrix.
  __device__ void Pv(float (&o)[D / 8][4], const float (&s)[kBk / 8][4], int n) {
    AddPackedTimesRows<T, D, kBk>(o, s, vs + (n & 1) * kBk * (D + 8));
  }

  __device__ void ScoredTile(float (&o)[D / 8][4], float (&m)[2], float (&l)[2],
                             const ForwardCta& c, int n, int k0, bool need_mask, float scale2) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const T* kt = ks + (n & 1) * kBk * (D + 8);
    if (n == 0) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) LoadRowFragment<T, D>(qf[kk], qs, warp, lane, kk);
    }
    float s[kBk / 8][4];
#pragma unroll
    for (int nb = 0; nb < kBk / 8; ++nb) s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) AddTimesRowsT<T, D, kBk>(s, qf[kk], kt, lane, kk);
    float corr[2];
    SoftmaxTile(s, m, l, corr, need_mask, c.hd, c.w, k0, scale2);
    RescaleRows<D>(o, corr);
    Pv(o, s, n);
  }
  __device__ void FixedTile(float (&o)[D / 8][4], const float (&s)[kBk / 8][4], int n) {
    Pv(o, s, n);
  }
  __device__ void Finish(float (&)[D / 8][4], int) {}
};

template <typename T, int D>
__global__ void __launch_bounds__(kThreads, MinBlocksPerSm<D>()) MmaForwardKernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  MmaForwardCore<T, D> core(p, smem_raw);
  RunForwardCta<T, D>(p, core);
}

template <typename T, int D>
cudaError_t MmaForwardLaunch(const Params& p, cudaStream_t s) {
  const dim3 grid((p.T + kBq - 1) / kBq, p.H, p.B);
  return LaunchWithSmem(MmaForwardKernel<T, D>, grid, kThreads, MmaForwardSmemBytes<D>(), s, p);
}

}  // namespace

template <typename T>
cudaError_t LaunchMmaForward(const Params& p, cudaStream_t s) {
  switch (p.d) {
    case 64:
      return MmaForwardLaunch<T, 64>(p, s);
    case 96:
      return MmaForwardLaunch<T, 96>(p, s);
    case 128:
      return MmaForwardLaunch<T, 128>(p, s);
    default:
      return cudaErrorInvalidValue;
  }
}

template cudaError_t LaunchMmaForward<__nv_bfloat16>(const Params&, cudaStream_t);
template cudaError_t LaunchMmaForward<__half>(const Params&, cudaStream_t);

}  // namespace internal
}  // namespace kernels
}  // namespace headlab
