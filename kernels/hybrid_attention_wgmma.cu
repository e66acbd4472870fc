// hybrid_attention_wgmma.cu: the Hopper forward of the hybrid-head layer (sm_90a, bf16/fp16
// in, fp32 accumulation, d = 64): the mma.sync forward's algorithm (hybrid_attention_mma.cu)
// with both matmuls on warpgroup MMA (wgmma_primitives.cuh).
//
// One CTA = one warpgroup (4 warps) = 64 query rows of one (batch, head). K/V tiles of 64 keys
// stream through shared memory with cp.async in the 128-byte swizzle wgmma reads. S = Q K^T
// is 4 wgmma m64n64k16 from shared memory (no ldmatrix, no per-warp operand traffic); the
// online softmax (forward_tile.cuh) runs on the accumulators; O += P V is 4 wgmma with P
// from registers, one tile behind S so that it overlaps the next tile's softmax (measured
// neutral against the unpipelined order, NOTES.md run 16). Head states as in the mma.sync
// kernel: ordinary, local and streaming visit only the key tiles their window intersects and
// mask only boundary tiles; fixed heads build P from alpha/rho/logZ in product form (SAF
// eq. 3) with no Q K^T; pruned heads write zeros.
#include "kernels/forward_tile.cuh"
#include "kernels/wgmma_primitives.cuh"

namespace headlab {
namespace kernels {
namespace internal {
namespace {

constexpr int kD = 64, kBk = kFwdBk, kBq = 64, kThreads = 128;
constexpr int kTileElems = 64 * kD;  // one swizzled 64 x 64 tile
constexpr int kAlign = 1024;         // swizzle atoms are 1024-byte aligned
constexpr int kVBufs = 3;            // V of tiles n - 1 (in P V), n (resident), n + 1 (loading)

// Shared memory: Q [64][64]; K [2][64][64]; V [3][64][64] (swizzled); two buffers of
// fixed-head factors; plus the slack that aligns the tiles (53 KB: 4 CTAs per SM).
constexpr size_t WgmmaForwardSmemBytes() {
  return kAlign + 2 * (3 + kVBufs) * kTileElems + 4 * 2 * FixedTileFloats<kBq>();
}

// 4 CTAs (16 warps) per SM: <= 128 registers.
constexpr int kMinBlocks = 4;

template <typename T>
__global__ void __launch_bounds__(kThreads, kMinBlocks) WgmmaForwardKernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* base = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + kAlign - 1) & ~uintptr_t(kAlign - 1));
  T* qs = reinterpret_cast<T*>(base);
  T* ks = qs + kTileElems;      // [2][64][64]
  T* vs = ks + 2 * kTileElems;  // [3][64][64]
  float* fixed_s = reinterpret_cast<float*>(vs + kVBufs * kTileElems);

  const int qb = gridDim.x - 1 - blockIdx.x;  // longest (last) query blocks first
  const int q0 = qb * kBq, h = blockIdx.y, b = blockIdx.z;
  const int g = h / (p.H / p.G);
  const DeviceHead hd = p.heads[h];
  const HeadState state = static_cast<HeadState>(hd.state);
  const bool fixed = state == HeadState::kFixed;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const WarpRows w{q0 + warp * 16, lane / 4, lane % 4};
  const int q1 = min(q0 + kBq, p.T);

  if (state == HeadState::kPruned) {
    StorePrunedRows<T, kD, kBq, kThreads>(p, b, h, q0, threadIdx.x);
    return;
  }

  const BlockRanges br = ToBlocks(KeySpanForQueries(state, hd.window, hd.sink, hd.recent, q0, q1), kBk);
  const int count = br.Count();
  FixedRaw<kBq> raw;  // fixed heads: the next tile's factors, in flight
  if (fixed && count > 0) FetchFixedTile<kBq>(p, hd, q0, br.Block(0) * kBk, &raw, warp);
  auto issue = [&](int n) {
    const int k0 = br.Block(n) * kBk;
    if (fixed) {
      StageFixedTile<kBq>(raw, FixedTileAt<kBq>(fixed_s, n & 1), warp);
      if (n + 1 < count) FetchFixedTile<kBq>(p, hd, q0, br.Block(n + 1) * kBk, &raw, warp);
    } else {
      LoadRowsSw128<T, kBk, kThreads>(p, p.k, b, g, k0, ks + (n & 1) * kTileElems);
    }
    LoadRowsSw128<T, kBk, kThreads>(p, p.v, b, g, k0, vs + (n % kVBufs) * kTileElems);
  };
  auto v_desc = [&](int n) { return SmemDescSw128(vs + (n % kVBufs) * kTileElems); };

  if (!fixed) LoadRowsSw128<T, kBq, kThreads>(p, p.q, b, h, q0, qs);
  if (count > 0) issue(0);
  CpAsyncCommit();

  float oacc[kD / 8][4];
  float m[2], l[2], lz[2];
#pragma unroll
  for (int n = 0; n < kD / 8; ++n) oacc[n][0] = oacc[n][1] = oacc[n][2] = oacc[n][3] = 0.f;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    m[hf] = -INFINITY;
    l[hf] = 0.f;
    lz[hf] = fixed && w.Row(hf) < p.T ? hd.log_z[w.Row(hf)] : 0.f;
  }
  const float scale2 = p.scale * kLog2e;
  const uint64_t q_desc = SmemDescSw128(qs);
  uint32_t pf[kBk / 16][4];  // P of a tile as the A operand of its P V
  auto begin_tile = [&](int n) {
    if (n + 1 < count) issue(n + 1);
    CpAsyncCommit();
    CpAsyncWait<1>();
    FenceProxyAsyncShared();
    __syncthreads();
  };
  auto issue_pv = [&](int n) {  // O += P V_n (one commit group)
#pragma unroll
    for (int kk = 0; kk < kBk / 16; ++kk) Wgmma<T>::RS(oacc, pf[kk], DescPlus(v_desc(n), 16 * 128 * kk), 1);
    WgmmaCommit();
  };

  if (fixed) {
    // SAF eq. 3 tiles of P (no scores, no softmax), then O += P V.
    for (int n = 0; n < count; ++n) {
      begin_tile(n);
      const int k0 = br.Block(n) * kBk;
      float s[kBk / 8][4];
      const bool need_mask = !TileAllVisible(hd, q0, q1 - 1, k0, k0 + kBk - 1);
      FixedScoresTile<kBq>(s, FixedTileAt<kBq>(fixed_s, n & 1), lz, need_mask, hd, w, q0, k0);
#pragma unroll
      for (int kk = 0; kk < kBk / 16; ++kk) PackP<T>(s, kk, pf[kk]);
      WgmmaFence();
      issue_pv(n);
      WgmmaWait<0>();
      FenceOperands(oacc);
      __syncthreads();  // this tile's buffers are refilled by the issue of iteration n + 1
    }
  } else {
    // Software pipeline (FlashAttention-3's intra-warpgroup overlap): iteration n issues
    // S_n = Q K_n^T, then O += P_{n-1} V_{n-1}; the softmax of S_n runs while the tensor
    // cores do P_{n-1} V_{n-1}; O is rescaled by tile n's factors once that is done.
    // Iteration 0 multiplies a zero P by V_0 so that every iteration has the same two commit
    // groups (ptxas serializes wgmma when it cannot match waits to groups).
#pragma unroll
    for (int kk = 0; kk < kBk / 16; ++kk) pf[kk][0] = pf[kk][1] = pf[kk][2] = pf[kk][3] = 0u;
    for (int n = 0; n < count; ++n) {
      begin_tile(n);
      const int k0 = br.Block(n) * kBk;
      float s[kBk / 8][4];
      const bool need_mask = !TileAllVisible(hd, q0, q1 - 1, k0, k0 + kBk - 1);
      const uint64_t k_desc = SmemDescSw128(ks + (n & 1) * kTileElems);
      WgmmaFence();
#pragma unroll
      for (int kk = 0; kk < kD / 16; ++kk) Wgmma<T>::SS(s, DescPlus(q_desc, 32 * kk), DescPlus(k_desc, 32 * kk), kk);
      WgmmaCommit();
      issue_pv(n > 0 ? n - 1 : 0);
      WgmmaWait<1>();  // S_n (P_{n-1} V_{n-1} may still run)
      FenceOperands(s);
      float corr[2];
      SoftmaxTile(s, m, l, corr, need_mask, hd, w, k0, scale2);
      WgmmaWait<0>();
      FenceOperands(oacc);
      RescaleRows<kD>(oacc, corr);
#pragma unroll
      for (int kk = 0; kk < kBk / 16; ++kk) PackP<T>(s, kk, pf[kk]);
      __syncthreads();  // K_n and V_{n-1} are refilled by the issues of iterations n + 1, n + 2
    }
    if (count > 0) {
      WgmmaFence();
      issue_pv(count - 1);
      WgmmaWait<0>();
      FenceOperands(oacc);
    }
  }
  CpAsyncWait<0>();
  StoreRows<T, kD>(p, oacc, m, l, lz, fixed, b, h, w);
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
