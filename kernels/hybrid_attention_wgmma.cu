// hybrid_attention_wgmma.cu: the Hopper forward of the hybrid-head layer (sm_90a, bf16/fp16
// in, fp32 accumulation, d = 64): the mma.sync forward's algorithm (hybrid_attention_mma.cu)
// with both matmuls on warpgroup MMA (wgmma_primitives.cuh).
//
// The CTA, its head states and its tile loop are forward_cta.cuh's skeleton, shared with the
// mma.sync kernel; one CTA is one warpgroup (4 warps). This file is its Core: K/V tiles of 64
// keys in the 128-byte swizzle wgmma reads; S = Q K^T is 4 wgmma m64n64k16 from shared
// memory (no ldmatrix, no per-warp operand traffic); the online softmax (forward_tile.cuh)
// runs on the accumulators; O += P V is 4 wgmma with P from registers, one tile behind S so
// that it overlaps the next tile's softmax (measured neutral against the unpipelined order,
// on the H200).
#include "kernels/forward_cta.cuh"
#include "kernels/wgmma_primitives.cuh"

namespace headlab {
namespace kernels {
namespace internal {
namespace {

constexpr int kD = 64, kBk = kFwdBk, kBq = kCtaRows, kThreads = kCtaThreads;
constexpr int kTileElems = 64 * kD;  // one swizzled 64 x 64 tile
constexpr int kVBufs = 3;            // V of tiles n - 1 (in P V), n (resident), n + 1 (loading)

// Shared memory: Q [64][64]; K [2][64][64]; V [3][64][64] (swizzled); two buffers of
// fixed-head factors; plus the slack that aligns the tiles (53 KB: 4 CTAs per SM).
constexpr size_t WgmmaForwardSmemBytes() {
  return kSwizzleAlign + 2 * (3 + kVBufs) * kTileElems + 4 * 2 * FixedTileFloats<kBq>();
}

// 4 CTAs (16 warps) per SM: <= 128 registers.
constexpr int kMinBlocks = 4;

// The wgmma Core of the forward skeleton (forward_cta.cuh): tiles in the 128-byte swizzle,
// S = Q K^T from shared memory, O += P V with P from registers. Scored tiles are software-
// pipelined (FlashAttention-3's intra-warpgroup overlap): tile n issues S_n, then
// O += P_{n-1} V_{n-1}; the softmax of S_n runs while the tensor cores do P_{n-1} V_{n-1}; O
// is rescaled by tile n's factors once that is done, and Finish issues the last P V. Tile 0
// multiplies a zero P by V_0 so that every tile has the same two commit groups (ptxas
// serializes wgmma when it cannot match waits to groups).
template <typename T>
struct WgmmaForwardCore {
  const Params& p;
  T* qs;  // [64][64]
  T* ks;  // [2][64][64]
  T* vs;  // [3][64][64]
  float* fixed_s;
  uint32_t pf[kBk / 16][4];  // P of the last scored tile as the A operand of its P V

  __device__ WgmmaForwardCore(const Params& params, unsigned char* smem_raw) : p(params) {
    unsigned char* base = AlignedSharedBase(smem_raw);
    qs = reinterpret_cast<T*>(base);
    ks = qs + kTileElems;
    vs = ks + 2 * kTileElems;
    fixed_s = reinterpret_cast<float*>(vs + kVBufs * kTileElems);
#pragma unroll
    for (int kk = 0; kk < kBk / 16; ++kk) pf[kk][0] = pf[kk][1] = pf[kk][2] = pf[kk][3] = 0u;
  }

  __device__ void LoadQ(const ForwardCta& c) {
    LoadRowsSw128<T, kBq, kThreads>(p, p.q, c.b, c.h, c.q0, qs);
  }
  __device__ void LoadK(const ForwardCta& c, int k0, int n) {
    LoadRowsSw128<T, kBk, kThreads>(p, p.k, c.b, c.g, k0, ks + (n & 1) * kTileElems);
  }
  __device__ void LoadV(const ForwardCta& c, int k0, int n) {
    LoadRowsSw128<T, kBk, kThreads>(p, p.v, c.b, c.g, k0, vs + (n % kVBufs) * kTileElems);
  }
  __device__ void LoadsLanded() { FenceProxyAsyncShared(); }

  __device__ void IssuePv(float (&o)[kD / 8][4], const uint32_t (&a)[kBk / 16][4],
                          int n) {  // one commit group
    const uint64_t v_desc = SmemDescSw128(vs + (n % kVBufs) * kTileElems);
#pragma unroll
    for (int kk = 0; kk < kBk / 16; ++kk)
      Wgmma<T>::RS(o, a[kk], DescPlus(v_desc, 16 * 128 * kk), 1);
    WgmmaCommit();
  }

  __device__ void ScoredTile(float (&o)[kD / 8][4], float (&m)[2], float (&l)[2],
                             const ForwardCta& c, int n, int k0, bool need_mask, float scale2) {
    const uint64_t q_desc = SmemDescSw128(qs), k_desc = SmemDescSw128(ks + (n & 1) * kTileElems);
    float s[kBk / 8][4];
    WgmmaFence();
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk)
      Wgmma<T>::SS(s, DescPlus(q_desc, 32 * kk), DescPlus(k_desc, 32 * kk), kk);
    WgmmaCommit();
    IssuePv(o, pf, n > 0 ? n - 1 : 0);
    WgmmaWait<1>();  // S_n (P_{n-1} V_{n-1} may still run)
    FenceOperands(s);
    float corr[2];
    SoftmaxTile(s, m, l, corr, need_mask, c.hd, c.w, k0, scale2);
    WgmmaWait<0>();
    FenceOperands(o);
    RescaleRows<kD>(o, corr);
#pragma unroll
    for (int kk = 0; kk < kBk / 16; ++kk) PackP<T>(s, kk, pf[kk]);
  }
  __device__ void Finish(float (&o)[kD / 8][4], int count) {
    if (count == 0) return;
    WgmmaFence();
    IssuePv(o, pf, count - 1);
    WgmmaWait<0>();
    FenceOperands(o);
  }
  __device__ void FixedTile(float (&o)[kD / 8][4], const float (&s)[kBk / 8][4], int n) {
    uint32_t a[kBk / 16][4];
#pragma unroll
    for (int kk = 0; kk < kBk / 16; ++kk) PackP<T>(s, kk, a[kk]);
    WgmmaFence();
    IssuePv(o, a, n);
    WgmmaWait<0>();
    FenceOperands(o);
  }
};

template <typename T>
__global__ void __launch_bounds__(kThreads, kMinBlocks) WgmmaForwardKernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  WgmmaForwardCore<T> core(p, smem_raw);
  RunForwardCta<T, kD>(p, core);
}

}  // namespace

template <typename T>
cudaError_t LaunchWgmmaForward(const Params& p, cudaStream_t s) {
  if (p.d != kD) return cudaErrorInvalidValue;
  const dim3 grid((p.T + kBq - 1) / kBq, p.H, p.B);
  return LaunchWithSmem(WgmmaForwardKernel<T>, grid, kThreads, WgmmaForwardSmemBytes(), s, p);
}

template cudaError_t LaunchWgmmaForward<__nv_bfloat16>(const Params&, cudaStream_t);
template cudaError_t LaunchWgmmaForward<__half>(const Params&, cudaStream_t);

}  // namespace internal
}  // namespace kernels
}  // namespace headlab
