// hybrid_attention_wgmma.cu: the Hopper forward of the hybrid-head layer (sm_90a, bf16/fp16
// in, fp32 accumulation, d = 64): the mma.sync forward's algorithm (hybrid_attention_mma.cu)
// with both matmuls on warpgroup MMA (wgmma_primitives.cuh).
//
// One CTA = two warpgroups = 128 query rows of one (batch, head), 64 per warpgroup, sharing
// the K/V tiles (64 keys, cp.async, double buffered, in the 128-byte swizzle wgmma reads):
// each tile is loaded once for 128 rows, half the load instructions and L2 traffic per FLOP
// of one warpgroup per CTA (NOTES.md run 19). Per warpgroup and tile: S = Q K^T is 4 wgmma
// m64n64k16 from shared memory; the online softmax (forward_tile.cuh) runs on the
// accumulators; O += P V is 4 wgmma with P from registers. A warpgroup skips the tiles its
// own rows cannot see (the causal diagonal's last tile, a narrow window's far edge). Head
// states as in the mma.sync kernel: ordinary, local and streaming visit only the key tiles
// their window intersects and mask only boundary tiles; fixed heads build P from
// alpha/rho/logZ in product form (SAF eq. 3) with no Q K^T; pruned heads write zeros.
#include "kernels/forward_tile.cuh"
#include "kernels/wgmma_primitives.cuh"

namespace headlab {
namespace kernels {
namespace internal {
namespace {

constexpr int kD = 64, kBk = kFwdBk, kWgRows = 64, kWgs = 2, kBq = kWgs * kWgRows, kThreads = kWgs * 128;
constexpr int kTileElems = 64 * kD;  // one swizzled 64 x 64 tile
constexpr int kAlign = 1024;         // swizzle atoms are 1024-byte aligned

// Shared memory: Q [2][64][64]; K, V [2][64][64] (swizzled); two buffers of fixed-head
// factors; plus the slack that aligns the tiles (54 KB: 2 CTAs, 16 warps per SM).
constexpr size_t WgmmaForwardSmemBytes() { return kAlign + 2 * 6 * kTileElems + 4 * 2 * FixedTileFloats<kBq>(); }

constexpr int kMinBlocks = 2;  // <= 128 registers

template <typename T>
__global__ void __launch_bounds__(kThreads, kMinBlocks) WgmmaForwardKernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* base = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + kAlign - 1) & ~uintptr_t(kAlign - 1));
  T* qs = reinterpret_cast<T*>(base);  // [2][64][64]: rows 0-63, 64-127
  T* ks = qs + 2 * kTileElems;         // [2][64][64]
  T* vs = ks + 2 * kTileElems;         // [2][64][64]
  float* fixed_s = reinterpret_cast<float*>(vs + 2 * kTileElems);

  const int qb = gridDim.x - 1 - blockIdx.x;  // longest (last) query blocks first
  const int q0 = qb * kBq, h = blockIdx.y, b = blockIdx.z;
  const int g = h / (p.H / p.G);
  const DeviceHead hd = p.heads[h];
  const HeadState state = static_cast<HeadState>(hd.state);
  const bool fixed = state == HeadState::kFixed;
  const int wg = threadIdx.x / 128, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const WarpRows w{q0 + warp * 16, lane / 4, lane % 4};
  const int q1 = min(q0 + kBq, p.T);
  const int wq0 = q0 + wg * kWgRows, wq1 = min(wq0 + kWgRows, p.T);  // this warpgroup's rows

  if (state == HeadState::kPruned) {
    StorePrunedRows<T, kD, kBq, kThreads>(p, b, h, q0);
    return;
  }

  const BlockRanges br = ToBlocks(KeySpanForQueries(state, hd.window, hd.sink, hd.recent, q0, q1), kBk);
  const BlockRanges wbr = wq0 < wq1 ? ToBlocks(KeySpanForQueries(state, hd.window, hd.sink, hd.recent, wq0, wq1), kBk)
                                    : BlockRanges{0, 0, 0, 0};
  const int count = br.Count();
  FixedRaw<kBq> raw;  // fixed heads: the next tile's factors, in flight
  if (fixed && count > 0) FetchFixedTile<kBq>(p, hd, q0, br.Block(0) * kBk, &raw);
  auto issue = [&](int n) {
    const int k0 = br.Block(n) * kBk, buf = n & 1;
    if (fixed) {
      StageFixedTile<kBq>(raw, FixedTileAt<kBq>(fixed_s, buf));
      if (n + 1 < count) FetchFixedTile<kBq>(p, hd, q0, br.Block(n + 1) * kBk, &raw);
    } else {
      LoadRowsSw128<T, kBk, kThreads>(p, p.k, b, g, k0, ks + buf * kTileElems);
    }
    LoadRowsSw128<T, kBk, kThreads>(p, p.v, b, g, k0, vs + buf * kTileElems);
  };

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
  const uint64_t q_desc = SmemDescSw128(qs + wg * kTileElems);

  for (int n = 0; n < count; ++n) {
    if (n + 1 < count) issue(n + 1);
    CpAsyncCommit();
    CpAsyncWait<1>();
    FenceProxyAsyncShared();
    __syncthreads();
    const int blk = br.Block(n), k0 = blk * kBk, buf = n & 1;
    if (wbr.Contains(blk)) {  // uniform over the warpgroup
      float s[kBk / 8][4];
      const bool need_mask = !TileAllVisible(hd, wq0, wq1 - 1, k0, k0 + kBk - 1);
      if (!fixed) {
        const uint64_t k_desc = SmemDescSw128(ks + buf * kTileElems);
        WgmmaFence();
#pragma unroll
        for (int kk = 0; kk < kD / 16; ++kk) Wgmma<T>::SS(s, DescPlus(q_desc, 32 * kk), DescPlus(k_desc, 32 * kk), kk);
        WgmmaCommit();
        WgmmaWait<0>();
        FenceOperands(s);
        float corr[2];
        SoftmaxTile(s, m, l, corr, need_mask, hd, w, k0, scale2);
        RescaleRows<kD>(oacc, corr);
      } else {
        FixedScoresTile<kBq>(s, FixedTileAt<kBq>(fixed_s, buf), lz, need_mask, hd, w, q0, k0);
      }
      // O += P V: P from the accumulators (registers), V from shared memory (transposed).
      uint32_t pf[kBk / 16][4];
#pragma unroll
      for (int kk = 0; kk < kBk / 16; ++kk) PackP<T>(s, kk, pf[kk]);
      const uint64_t v_desc = SmemDescSw128(vs + buf * kTileElems);
      FenceOperands(oacc);
      WgmmaFence();
#pragma unroll
      for (int kk = 0; kk < kBk / 16; ++kk) Wgmma<T>::RS(oacc, pf[kk], DescPlus(v_desc, 16 * 128 * kk), 1);
      WgmmaCommit();
      WgmmaWait<0>();
      FenceOperands(oacc);
    }
    __syncthreads();  // this buffer is refilled by the issue of iteration n + 1
  }
  CpAsyncWait<0>();
  StoreRows<T, kD>(p, oacc, m, l, lz, fixed, b, h, w);
}

}  // namespace

template <typename T>
cudaError_t LaunchWgmmaForward(const Params& p, cudaStream_t s) {
  if (p.d != kD) return cudaErrorInvalidValue;
  constexpr size_t smem = WgmmaForwardSmemBytes();
  cudaError_t e = cudaFuncSetAttribute(WgmmaForwardKernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (e != cudaSuccess) return e;
  dim3 grid((p.T + kBq - 1) / kBq, p.H, p.B);
  WgmmaForwardKernel<T><<<grid, kThreads, smem, s>>>(p);
  return cudaGetLastError();
}

template cudaError_t LaunchWgmmaForward<__nv_bfloat16>(const Params&, cudaStream_t);
template cudaError_t LaunchWgmmaForward<__half>(const Params&, cudaStream_t);

}  // namespace internal
}  // namespace kernels
}  // namespace headlab
