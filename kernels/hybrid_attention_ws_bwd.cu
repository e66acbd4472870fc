// hybrid_attention_ws_bwd.cu: the warp-specialised Hopper backward of the hybrid-head layer
// (sm_90a, bf16/fp16, d = 64 and 128), every head state in one launch: the synchronous wgmma
// backward's algorithm (hybrid_attention_wgmma_bwd.cu) with FlashAttention-3's division of
// labour.
//
// One CTA = 128 keys of one (batch, KV head) = three warpgroups:
// - warpgroup 0, the producer: one thread loads the CTA's K and V once, then, for each query
//   head of the GQA group and each 64-query tile its mask lets see these keys, Q and dO into
//   a ring of kStages slots by TMA (tma_primitives.cuh), on the slot's transaction barrier.
// - warpgroups 1 and 2, the consumers: 64 keys each, sharing every Q / dO tile. Keys are the
//   M dimension, so P^T and dS^T come out of the accumulators in the register-A layout:
//     S^T = K Q^T, dP^T = V dO^T          (shared x shared, issued together)
//     P^T = exp(S^T - lse)                 (while dP^T runs; backward_tile.cuh)
//     dV += P^T dO, dK += dS^T Q           (registers x shared)
//     dQ  = dS K                           (dS^T staged in the warpgroup's shared buffer,
//                                          read M-major)
//   The two consumers' dQ of a tile (their 64 keys each) meet in a shared fp32 buffer —
//   consumer 0 writes, consumer 1 adds — and TMA tensor reductions add it to the fp32
//   workspace: half the global reduction traffic of per-consumer atomics, and none of the
//   per-element atomic instructions. The buffer is in the 128-byte swizzle (boxes of 32
//   floats x 64 rows, DqAt): a warp's accumulator rows, 8 of them 256 bytes apart in a
//   row-major buffer, all fell on the same banks (8-way conflicts on every store and load of
//   the sum; ncu: 56 % of the kernel's shared-store wavefronts were conflicts); in the
//   swizzle they spread over all 32 banks. Two buffers, so consumer 0 writes tile n + 1 while
//   the reduction of tile n still reads.
//   Each consumer stages the tile's lse and delta (one value per thread, loaded before the
//   GEMMs are issued) in its own double buffer (BwdStats), ordered by a warpgroup named barrier.
// - Fixed heads (SAF eq. 3) have no Q K^T: the producer loads dO alone, and a consumer rebuilds
//   P^T in product form (FixedPt: alpha of its 64 keys staged once per head, each tile's rho
//   band and logZ per tile) and stops after dV += P^T dO; they take no part in dQ, whose
//   buffers and barriers count the other heads' tiles only.
// dK and dV accumulate in registers over the group's heads and are written once.
#include "kernels/backward_tile.cuh"
#include "kernels/forward_tile.cuh"  // PackP
#include "kernels/tensor_maps.cuh"
#include "kernels/tma_primitives.cuh"

namespace headlab {
namespace kernels {
namespace internal {
namespace {

constexpr int kKeys = 128;   // keys per CTA (64 per consumer warpgroup)
constexpr int kBq = kBwdBq;  // queries per tile (64)
constexpr int kStages = 2;
constexpr int kThreads = 384;
constexpr int kProducerRegs = 24, kConsumerRegs = 240;
constexpr int kRowBytes = 128;    // one swizzled row of 64 elements
constexpr int kTile64 = 64 * 64;  // elements of a [64][64] swizzled tile

struct WsBwdParams {
  Params p;
  CUtensorMap k, v;    // boxes of 64 x 128 rows
  CUtensorMap q, d_o;  // boxes of 64 x 64 rows
  CUtensorMap dq_acc;  // the fp32 workspace, boxes of 32 x 64 rows
};

struct WsBwdBarriers {
  uint64_t full_kv;
  uint64_t full[kStages], empty[kStages];
};

// Shared memory, in [64][64] swizzled tiles: K, V [D/64 halves][128][64]; Q, dO
// [kStages][D/64][64][64]; dS^T [2 consumers][64][64]; then dQ [2 buffers][D/32][64][32] fp32
// (swizzled boxes, DqAt), the row statistics and fixed-head factors [2 consumers]
// (BwdStats: lse, delta [2 buffers][64], alpha, the rho band [2 buffers]) and the barriers.
template <typename T, int D>
struct WsBwdLayout {
  static constexpr int kHalves = D / 64;
  static constexpr size_t kTileBytes = size_t(kTile64) * sizeof(T);
  static constexpr size_t kDqBytes = 2 * size_t(kBq) * D * sizeof(float);
  static constexpr size_t kStatsBytes = 2 * size_t(BwdStatsFloats()) * sizeof(float);
  static constexpr size_t kBytes = kSwizzleAlign +
                                   (2 * 2 * kHalves + 2 * kStages * kHalves + 2) * kTileBytes +
                                   kDqBytes + kStatsBytes + sizeof(WsBwdBarriers);
};

// Named barriers: 1 + c, consumer c's own 128 threads; kDqReady + buf, consumer 0's dQ of the
// tile is in buffer buf (consumer 0 arrives, consumer 1 syncs; one barrier per buffer, since
// consumer 0 may arrive for the next tile before consumer 1 has synced for this one, and a
// second arrival on one barrier would complete it without consumer 1); kDqFree + buf, the reduction
// of the tile that last used buffer buf has read it (consumer 1's first warp arrives, consumer 0
// syncs). Consumer 1 signals a tile's buffer free one tile late, when it issues the next reduction
// (or after the last): the bulk reduction's read of shared memory then overlaps the next tile
// instead of holding consumer 1 on it.
constexpr int kDqReady = 3, kDqFree = 5;

// Float index of dQ element (row r, column c) in a staged [D/32][64][32] buffer: box c / 32,
// its 128-byte rows' 16-byte chunks XOR-permuted by r % 8, as the tensor map's
// CU_TENSOR_MAP_SWIZZLE_128B lays a box out. A warp's float2 of rows gr and gr + 8
// (gr = 0..7) at columns 2 tq, 2 tq + 1 then covers all 32 banks: conflict-free.
__device__ __forceinline__ int DqAt(int r, int c) {
  const int cc = c % 32;
  return (c / 32) * (64 * 32) + r * 32 + ((((cc / 4) ^ (r % 8))) * 4) + cc % 4;
}

// The 64-query tiles of head hd that see any of keys [k0, k1): what the producer loads and
// the consumers work through, in the same order.
__device__ __forceinline__ BlockRanges QueryTiles(const Params& p, const DeviceHead& hd, int k0,
                                                  int k1) {
  return ToBlocks(QuerySpanForKeys(static_cast<HeadState>(hd.state), hd.window, hd.sink, hd.recent,
                                   k0, k1, p.T),
                  kBq);
}

// One thread makes the barriers: K/V's (one arrival with the transaction bytes), each Q/dO
// slot's "full" (the same) and "empty" (lane 0 of each consumer warp).
__device__ __forceinline__ void WsBwdInitBarriers(WsBwdBarriers& bar) {
  MbarInit(&bar.full_kv, 1);
  for (int s = 0; s < kStages; ++s) {
    MbarInit(bar.full + s, 1);
    MbarInit(bar.empty + s, 8);  // lane 0 of each consumer warp
  }
  FenceBarrierInit();
}

// The producer (one thread of warpgroup 0): the CTA's K and V once, then for each head of
// the group each query tile that sees its keys: Q and dO (dO only for fixed heads) into the
// next slot of the ring, after the slot's "empty" barrier.
template <typename T, int D>
__device__ __forceinline__ void WsBwdProduce(const WsBwdParams& wp, T* ks, T* vs, T* qs, T* dos,
                                             WsBwdBarriers& bar, int k0, int k1, int g, int b) {
  using L = WsBwdLayout<T, D>;
  constexpr int kHalves = L::kHalves;
  const Params& p = wp.p;
  const int rep = p.H / p.G;
  MbarArriveExpectTx(&bar.full_kv, uint32_t(2 * 2 * kHalves * L::kTileBytes));
  for (int c = 0; c < kHalves; ++c) {
    TmaLoad4d(ks + c * 2 * kTile64, &wp.k, &bar.full_kv, 64 * c, k0, g, b);
    TmaLoad4d(vs + c * 2 * kTile64, &wp.v, &bar.full_kv, 64 * c, k0, g, b);
  }
  int it = 0;
  for (int h = g * rep; h < (g + 1) * rep; ++h) {
    const DeviceHead hd = p.heads[h];
    if (hd.state == int32_t(HeadState::kPruned)) continue;
    const BlockRanges br = QueryTiles(p, hd, k0, k1);
    const bool fixed = hd.state == int32_t(HeadState::kFixed);  // dO only
    for (int n = 0; n < br.Count(); ++n, ++it) {
      const int st = it % kStages, q0 = br.Block(n) * kBq;
      MbarWait(bar.empty + st, ((it / kStages) & 1) ^ 1);
      MbarArriveExpectTx(bar.full + st, uint32_t((fixed ? 1 : 2) * kHalves * L::kTileBytes));
      for (int c = 0; c < kHalves; ++c) {
        if (!fixed)
          TmaLoad4d(qs + (st * kHalves + c) * kTile64, &wp.q, bar.full + st, 64 * c, q0, h, b);
        TmaLoad4d(dos + (st * kHalves + c) * kTile64, &wp.d_o, bar.full + st, 64 * c, q0, h, b);
      }
    }
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads, 1)
    WsBackwardKernel(const __grid_constant__ WsBwdParams wp) {
  using L = WsBwdLayout<T, D>;
  constexpr int kHalves = L::kHalves;
  const Params& p = wp.p;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* base = AlignedSharedBase(smem_raw);
  T* ks = reinterpret_cast<T*>(base);                        // [half][128][64]
  T* vs = ks + 2 * kHalves * kTile64;                        // [half][128][64]
  T* qs = vs + 2 * kHalves * kTile64;                        // [stage][half][64][64]
  T* dos = qs + kStages * kHalves * kTile64;                 // [stage][half][64][64]
  T* dss = dos + kStages * kHalves * kTile64;                // [consumer][64][64]
  float* dqs = reinterpret_cast<float*>(dss + 2 * kTile64);  // [buf][D/32][64][32], DqAt
  float* stats = dqs + 2 * kBq * D;                          // [consumer] BwdStats
  WsBwdBarriers& bar = *reinterpret_cast<WsBwdBarriers*>(stats + 2 * BwdStatsFloats());

  const int kb = gridDim.x - 1 - blockIdx.x;  // early keys see the most queries: first
  const int k0 = kb * kKeys, g = blockIdx.y, b = blockIdx.z;
  const int k1 = min(k0 + kKeys, p.T);
  const int rep = p.H / p.G;

  if (threadIdx.x == 0) WsBwdInitBarriers(bar);
  __syncthreads();

  const int wg = threadIdx.x / 128;
  if (wg == 0) {  // the producer
    SetMaxRegsDec<kProducerRegs>();
    if (threadIdx.x != 0) return;
    WsBwdProduce<T, D>(wp, ks, vs, qs, dos, bar, k0, k1, g, b);
    return;
  }

  // A consumer: keys [k0 + 64 cw, k0 + 64 cw + 64). It stays in the kernel's body: at
  // d = 128 it holds dK, dV, S^T and dP^T at the register limit (ptxas spills 24 bytes), and
  // moved into a force-inlined function like the producer it spilled 188 (ptxas -v, sm_90a).
  SetMaxRegsInc<kConsumerRegs>();
  const int cw = wg - 1, tid = threadIdx.x - 128 * wg;
  const int warp = tid / 32, lane = threadIdx.x % 32;
  const int gr = lane / 4, tq = lane % 4;
  const int kw0 = k0 + 64 * cw;
  const WarpKeys w{kw0 + warp * 16 + gr, gr, tq, warp};
  const float scale2 = p.scale * kLog2e;
  const int my_bar = 1 + cw;  // named barrier of this warpgroup's 128 threads
  T* ds_w = dss + cw * kTile64;
  const BwdStats stats_w(stats + cw * BwdStatsFloats());
  // This warpgroup's 64 rows of K and V, d half c.
  auto k_desc = [&](int c) { return SmemDescSw128(ks + (2 * c + cw) * kTile64); };
  auto v_desc = [&](int c) { return SmemDescSw128(vs + (2 * c + cw) * kTile64); };
  const uint64_t ds_desc = SmemDescSw128(ds_w);

  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[n][e] = dv[n][e] = 0.f;

  MbarWait(&bar.full_kv, 0);
  int it = 0;     // tiles of every head: the Q/dO ring and the row-statistics buffers
  int dq_it = 0;  // tiles with a dQ (not fixed heads): the dQ buffers and their barriers
  for (int h = g * rep; h < (g + 1) * rep; ++h) {
    const DeviceHead hd = p.heads[h];
    if (hd.state == int32_t(HeadState::kPruned)) continue;
    const bool fixed = hd.state == int32_t(HeadState::kFixed);
    const BlockRanges br = QueryTiles(p, hd, k0, k1);
    const size_t row_base = (size_t(b) * p.H + h) * p.T;
    if (fixed) {
      NamedBarrierSync(my_bar, 128);  // a previous fixed head's last tile has read alpha
      StageAlpha(p, hd, kw0, stats_w, warp);
      NamedBarrierSync(my_bar, 128);  // A is read by StageBand
    }
    for (int n = 0; n < br.Count(); ++n, ++it) {
      const int st = it % kStages, q0 = br.Block(n) * kBq, buf = it & 1;
      const int qr = q0 + tid % kBq;
      const bool need_mask = !TileAllVisible(hd, q0, min(q0 + kBq, p.T) - 1, kw0, kw0 + 63);
      auto q_desc = [&](int c) { return SmemDescSw128(qs + (st * kHalves + c) * kTile64); };
      auto do_desc = [&](int c) { return SmemDescSw128(dos + (st * kHalves + c) * kTile64); };
      // acc += A rows (keys) x B (queries x d, N-major: dO or Q), A from registers (P^T or
      // dS^T as register fragments), 16 queries per k-step; one commit group.
      auto add_frags_times = [&](float(&acc)[D / 8][4], const uint32_t(&a)[kBq / 16][4],
                                 auto b_desc) {
        FenceOperands(acc);
        WgmmaFence();
#pragma unroll
        for (int kk = 0; kk < kBq / 16; ++kk)
#pragma unroll
          for (int c = 0; c < kHalves; ++c)
            Wgmma<T>::RS(Cols64(acc, c), a[kk], DescPlus(b_desc(c), 16 * kRowBytes * kk), 1);
        WgmmaCommit();
      };
      auto add_pt_do = [&](float(&pt)[kBq / 8][4]) {  // dV += P^T dO
        uint32_t pa[kBq / 16][4];
#pragma unroll
        for (int kk = 0; kk < kBq / 16; ++kk) PackP<T>(pt, kk, pa[kk]);
        add_frags_times(dv, pa, do_desc);
      };
      if (fixed) {  // SAF eq. 3: P^T in product form, and P^T dO is all the tile adds
        const float log_z = tid < kBq && qr < p.T ? hd.log_z[qr] : 0.f;  // rows past T: P = 0
        BandRaw band;  // the rho band of (q0, this consumer's keys), warp 1
        FetchBand(p, hd, kw0, q0, &band, warp);
        MbarWait(bar.full + st, (it / kStages) & 1);
        if (tid < kBq) stats_w.lse[buf * kBq + tid] = log_z;
        StageBand(band, stats_w, buf, warp);
        NamedBarrierSync(my_bar, 128);
        float pt[kBq / 8][4];
        FixedPt(pt, stats_w, buf, need_mask, hd, p.T, q0, kw0, w);
        add_pt_do(pt);
        WgmmaWait<0>();
        FenceOperands(dv);
        if (lane == 0) MbarArrive(bar.empty + st);  // dO of this slot is read
        continue;
      }
      // This tile's lse (threads 0-63) and delta (64-127); rows beyond T read 0 (their Q and
      // dO rows are zeros: P = 1 meets dO = 0 and dP = 0, so they add nothing).
      const float stat = qr < p.T ? (tid < kBq ? p.lse : p.delta)[row_base + qr] : 0.f;
      const float* lse_t = stats_w.lse + buf * kBq;
      const float* delta_t = stats_w.delta + buf * kBq;
      MbarWait(bar.full + st, (it / kStages) & 1);

      float pt[kBq / 8][4], dpt[kBq / 8][4];
      WgmmaFence();
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)  // S^T = K Q^T, d in k-steps of 16
        Wgmma<T>::SS(pt, DescPlus(k_desc(kk / 4), 32 * (kk % 4)),
                     DescPlus(q_desc(kk / 4), 32 * (kk % 4)), kk);
      WgmmaCommit();
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)  // dP^T = V dO^T
        Wgmma<T>::SS(dpt, DescPlus(v_desc(kk / 4), 32 * (kk % 4)),
                     DescPlus(do_desc(kk / 4), 32 * (kk % 4)), kk);
      WgmmaCommit();
      (tid < kBq ? stats_w.lse : stats_w.delta)[buf * kBq + tid % kBq] = stat;
      NamedBarrierSync(my_bar, 128);
      WgmmaWait<1>();
      FenceOperands(pt);
      ScoresToPt(pt, lse_t, need_mask, hd, q0, w, scale2);
      add_pt_do(pt);
      WgmmaWait<1>();  // dP^T is done (dV may still run)
      FenceOperands(dpt);
      DsFromDp(pt, dpt, delta_t, p.scale, tq);
      uint32_t da[kBq / 16][4];
#pragma unroll
      for (int kk = 0; kk < kBq / 16; ++kk) PackP<T>(pt, kk, da[kk]);
      StoreFragmentsSw128(da, ds_w, warp, gr, tq);  // dS^T [key][query], for dQ
      add_frags_times(dk, da, q_desc);              // dK += dS^T Q
      FenceProxyAsyncShared();
      NamedBarrierSync(my_bar, 128);  // dS^T staged by the warpgroup's four warps
      // dQ = dS K: A = dS (queries x keys) read M-major from dS^T, B = K (keys x d) N-major,
      // one 64-column half of d at a time (kHalves GEMMs of 64 x 64): at d = 128 a whole dQ
      // (64 registers) beside dK, dV (128) and dS^T in flight was more than ptxas could hold
      // without serializing the wgmmas (C7512); a half is 32.
      // The tile's sum: consumer 0 writes its part, consumer 1 adds its own and reduces the
      // sum into the workspace (the tensor map leaves out rows past T).
      float* dq_buf = dqs + (dq_it & 1) * kBq * D;
      const int r = warp * 16 + gr;
      if (cw == 0 && dq_it >= 2) NamedBarrierSync(kDqFree + (dq_it & 1), 128 + 32);
#pragma unroll
      for (int c = 0; c < kHalves; ++c) {
        float dq[8][4];
        WgmmaFence();
#pragma unroll
        for (int kk = 0; kk < 64 / 16; ++kk)
          Wgmma<T>::template SS<1, 1>(dq, DescPlus(ds_desc, 16 * kRowBytes * kk),
                                      DescPlus(k_desc(c), 16 * kRowBytes * kk), kk);
        WgmmaCommit();
        WgmmaWait<0>();
        FenceOperands(dq);
        if (c == 0) {
          FenceOperands(dk);
          FenceOperands(dv);
          if (lane == 0) MbarArrive(bar.empty + st);  // Q and dO of this slot are read
        }
        if (cw == 0) {
#pragma unroll
          for (int nb = 0; nb < 8; ++nb) {
            const int col = 64 * c + nb * 8 + 2 * tq;
            *reinterpret_cast<float2*>(dq_buf + DqAt(r, col)) = make_float2(dq[nb][0], dq[nb][1]);
            *reinterpret_cast<float2*>(dq_buf + DqAt(r + 8, col)) =
                make_float2(dq[nb][2], dq[nb][3]);
          }
        } else {
          if (c == 0) NamedBarrierSync(kDqReady + (dq_it & 1), 256);
#pragma unroll
          for (int nb = 0; nb < 8; ++nb) {
            const int col = 64 * c + nb * 8 + 2 * tq;
            float2* lo = reinterpret_cast<float2*>(dq_buf + DqAt(r, col));
            float2* hi = reinterpret_cast<float2*>(dq_buf + DqAt(r + 8, col));
            const float2 a = *lo, e = *hi;
            *lo = make_float2(a.x + dq[nb][0], a.y + dq[nb][1]);
            *hi = make_float2(e.x + dq[nb][2], e.y + dq[nb][3]);
          }
        }
      }
      if (cw == 0) {
        NamedBarrierArrive(kDqReady + (dq_it & 1), 256);
      } else {
        FenceProxyAsyncShared();
        NamedBarrierSync(my_bar, 128);  // the sum is complete
        if (warp == 0) {
          if (lane == 0) {
#pragma unroll
            for (int c = 0; c < D / 32; ++c)
              TmaReduceAdd4d(&wp.dq_acc, dq_buf + c * (64 * 32), 32 * c, q0, h, b);
            BulkCommit();
            BulkWaitRead<1>();  // the previous tile's reduction has read its buffer (this one runs
                                // on)
          }
          __syncwarp();
          if (dq_it > 0) NamedBarrierArrive(kDqFree + ((dq_it - 1) & 1), 128 + 32);
        }
      }
      ++dq_it;
    }
  }
  // Consumer 0 takes the last two "buffer free" signals it has not waited for (consumer 1
  // signals the last tile's here, after its reduction), so every named barrier ends with as
  // many syncs as arrivals.
  if (cw == 0) {
    for (int i = max(dq_it - 2, 0); i < dq_it; ++i) NamedBarrierSync(kDqFree + (i & 1), 128 + 32);
  } else if (warp == 0) {
    if (lane == 0) BulkWaitAll();  // the reductions' writes are done before the CTA ends
    __syncwarp();
    if (dq_it > 0) NamedBarrierArrive(kDqFree + ((dq_it - 1) & 1), 128 + 32);
  }
  StoreDkDv<T, D>(p, dk, dv, b, g, w);
}

template <typename T, int D>
cudaError_t Launch(const WsBwdParams& wp, cudaStream_t s) {
  const dim3 grid((wp.p.T + kKeys - 1) / kKeys, wp.p.G, wp.p.B);
  return LaunchWithSmem(WsBackwardKernel<T, D>, grid, kThreads, WsBwdLayout<T, D>::kBytes, s, wp);
}

}  // namespace

template <typename T>
cudaError_t LaunchWsBackward(const Params& p, cudaStream_t s) {
  if (p.d != 64 && p.d != 128) return cudaErrorInvalidValue;
  WsBwdParams wp{};
  wp.p = p;
  if (!EncodeView<T>(&wp.k, p.k, p.B, p.T, p.G, p.d, kKeys) ||
      !EncodeView<T>(&wp.v, p.v, p.B, p.T, p.G, p.d, kKeys) ||
      !EncodeView<T>(&wp.q, p.q, p.B, p.T, p.H, p.d, kBq) ||
      !EncodeView<T>(&wp.d_o, p.d_o, p.B, p.T, p.H, p.d, kBq) ||
      !EncodeDqWorkspace(&wp.dq_acc, p.dq_acc, p.B, p.T, p.H, p.d, kBq))
    return cudaErrorNotSupported;
  return p.d == 64 ? Launch<T, 64>(wp, s) : Launch<T, 128>(wp, s);
}

template cudaError_t LaunchWsBackward<__nv_bfloat16>(const Params&, cudaStream_t);
template cudaError_t LaunchWsBackward<__half>(const Params&, cudaStream_t);

}  // namespace internal
}  // namespace kernels
}  // namespace headlab
