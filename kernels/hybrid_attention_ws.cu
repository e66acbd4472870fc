// hybrid_attention_ws.cu: the warp-specialised Hopper forward of the hybrid-head layer
// (sm_90a, bf16/fp16, d = 64 and 128): FlashAttention-3's structure (Shah et al. 2024,
// "producer-consumer asynchrony" and "pingpong scheduling"), every head state in one launch:
// ordinary, local and streaming heads score keys; fixed heads (SAF eq. 3) build P in product
// form from alpha, rho and logZ with no Q K^T and no softmax; pruned heads write zeros.
//
// One CTA per SM, persistent: it takes work tiles (128 query rows of one batch and head;
// WorkTile) blockIdx.x, blockIdx.x + gridDim.x, ..., with three warpgroups:
// - warpgroup 0, the producer (WsProduce): one thread issues TMA loads (tma_primitives.cuh) of each
//   work tile's Q (two slots) and of each 128-key tile's K and V (a ring of kWsStages
//   slots) in the 128-byte swizzle wgmma reads, each completing on the slot's "full"
//   transaction barrier, after waiting on its "empty" barrier — running ahead into the next
//   work tile while the consumers finish the last; the warpgroup gives its registers up
//   (setmaxnreg).
// - warpgroups 1 and 2, the consumers (WsConsume): 64 rows each, sharing every K/V tile. Tile n is
//   S_n = Q K_n^T (wgmma from shared memory), the online softmax (forward_tile.cuh, SAF's
//   and FlashAttention-2's recurrence), then O += P_n V_n with P from registers. Within a
//   warpgroup the GEMMs of one iteration are S_n and P_{n-1} V_{n-1}, so the softmax of S_n
//   runs while the tensor cores do P_{n-1} V_{n-1}; between the two warpgroups a pair of
//   named barriers hands the turn to issue GEMMs back and forth, so one warpgroup's softmax
//   runs under the other's GEMMs.
// Local and streaming heads visit only the 128-key tiles their window intersects
// (KeySpanForQueries over the work tile's rows); a warpgroup masks a tile unless all of it is
// visible to all of its rows. Keys and queries past T are zeros from the TMA's bounds.
// A fixed head's work tile loads no Q and no K: its K slots go round empty (the barriers keep
// one count for all heads), each consumer stages the product form's factors of its 64 rows
// and each 64-key half (warps 0-1 the first half's alpha and rho band, warps 2-3 the
// second's, fetched a tile ahead), builds P (forward_tile.cuh FixedScoresTile) and issues
// O += P V on its own, outside the ping-pong.
#include <algorithm>
#include <type_traits>

#include "kernels/forward_tile.cuh"
#include "kernels/tensor_maps.cuh"
#include "kernels/tma_primitives.cuh"

namespace headlab {
namespace kernels {
namespace internal {
namespace {

constexpr int kWsBq = 128;    // query rows per CTA (64 per consumer warpgroup)
constexpr int kWsBk = 128;    // keys per tile
constexpr int kWsStages = 2;  // K/V slots (3 measured no faster)
constexpr int kWsQSlots = 2;  // Q of this work tile and the next
constexpr int kWsThreads = 384;
constexpr int kProducerRegs = 24, kConsumerRegs = 240;  // 128 x 24 + 256 x 240 <= 64K
constexpr int kHalfElems = 128 * 64;                    // one [128 rows][64] swizzled half-tile

struct WsParams {
  Params p;
  CUtensorMap q, k, v;  // boxes of 64 elements x 128 rows of (d, T, heads, B)
};

// The barriers of the pipeline, in shared memory. K/V slot i serves the key tiles whose
// running index (over all of a CTA's work tiles) is i modulo kWsStages; Q slot i the work
// tiles whose index is i modulo kWsQSlots.
struct WsBarriers {
  uint64_t full_q[kWsQSlots], empty_q[kWsQSlots];
  uint64_t full_k[kWsStages], empty_k[kWsStages], full_v[kWsStages], empty_v[kWsStages];
};

// A consumer's fixed-head factors: [64-key half][buffer] FixedTile of its 64 rows.
constexpr int kWsFixedFloats = 2 * 2 * FixedTileFloats<64>();

// Shared memory: Q [kWsQSlots][D/64][128][64]; K and V [kWsStages][D/64][128][64]; the fixed
// heads' factors [consumer]; then the barriers.
template <typename T, int D>
struct WsLayout {
  static constexpr int kHalves = D / 64;
  static constexpr size_t kTileBytes = size_t(kHalves) * kHalfElems * sizeof(T);
  static constexpr size_t kBytes = kSwizzleAlign + (kWsQSlots + 2 * kWsStages) * kTileBytes +
                                   2 * kWsFixedFloats * sizeof(float) + sizeof(WsBarriers);
};

// The work tiles of a launch: kWsBq query rows of each batch and head.
__host__ __device__ __forceinline__ int WorkTiles(const Params& p) {
  return (p.T + kWsBq - 1) / kWsBq * p.H * p.B;
}

// Work tile t of a launch (128 query rows of one batch and head), in the order CTAs take
// them: head by head, so that the CTAs running at one time share a few heads' K and V in L2;
// within a head the last query blocks (the most keys under causality) first, so that the
// launch ends on short tiles.
struct WorkTile {
  int q0, h, b;
  __device__ WorkTile(const Params& p, int t) {
    const int nqb = (p.T + kWsBq - 1) / kWsBq, head = t / nqb;
    q0 = (nqb - 1 - t % nqb) * kWsBq;
    h = head % p.H;
    b = head / p.H;
  }
};

// The 128-key tiles of a work tile: those its head's mask lets any of its rows see.
__device__ __forceinline__ BlockRanges KeyTiles(const Params& p, const DeviceHead& hd, int q0) {
  const int q1 = min(q0 + kWsBq, p.T);
  return ToBlocks(
      KeySpanForQueries(static_cast<HeadState>(hd.state), hd.window, hd.sink, hd.recent, q0, q1),
      kWsBk);
}

// One thread makes every slot's barriers: a "full" barrier completes on its loads (one
// arrival with the transaction bytes), an "empty" one on lane 0 of each consumer warp.
__device__ __forceinline__ void WsInitBarriers(WsBarriers& bar) {
  for (int s = 0; s < kWsQSlots; ++s) {
    MbarInit(bar.full_q + s, 1);
    MbarInit(bar.empty_q + s, 8);  // lane 0 of each consumer warp
  }
  for (int s = 0; s < kWsStages; ++s) {
    MbarInit(bar.full_k + s, 1);
    MbarInit(bar.full_v + s, 1);
    MbarInit(bar.empty_k + s, 8);
    MbarInit(bar.empty_v + s, 8);
  }
  FenceBarrierInit();
}

// The producer (one thread of warpgroup 0): for each work tile of this CTA, Q into the next
// Q slot (none for fixed heads), then each key tile's K and V into the next K/V slot, each
// after the slot's "empty" barrier; a fixed head's K slots go round empty.
template <typename T, int D>
__device__ __forceinline__ void WsProduce(const WsParams& wp, T* qs, T* ks, T* vs, WsBarriers& bar,
                                          int tiles) {
  using L = WsLayout<T, D>;
  constexpr int kHalves = L::kHalves;
  const Params& p = wp.p;
  constexpr uint32_t kTileTx = uint32_t(L::kTileBytes);
  int it = 0, j = 0;  // key tiles and Q loads (work tiles of heads with a Q) so far
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
    const WorkTile wt(p, t);
    const DeviceHead hd = p.heads[wt.h];
    if (hd.state == int32_t(HeadState::kPruned)) continue;
    const bool fixed = hd.state == int32_t(HeadState::kFixed);  // no Q, no K
    const int g = wt.h / (p.H / p.G);
    const BlockRanges br = KeyTiles(p, hd, wt.q0);
    if (!fixed) {
      const int qslot = j % kWsQSlots;
      T* qst = qs + qslot * kHalves * kHalfElems;
      MbarWait(bar.empty_q + qslot, ((j / kWsQSlots) & 1) ^ 1);
      MbarArriveExpectTx(bar.full_q + qslot, kTileTx);
      for (int c = 0; c < kHalves; ++c)
        TmaLoad4d(qst + c * kHalfElems, &wp.q, bar.full_q + qslot, 64 * c, wt.q0, wt.h, wt.b);
      ++j;
    }
    for (int n = 0; n < br.Count(); ++n, ++it) {
      const int st = it % kWsStages, k0 = br.Block(n) * kWsBk;
      const uint32_t free_parity = ((it / kWsStages) & 1) ^ 1;
      T* kst = ks + st * kHalves * kHalfElems;
      T* vst = vs + st * kHalves * kHalfElems;
      MbarWait(bar.empty_k + st, free_parity);
      if (fixed) {
        MbarArrive(bar.full_k + st);  // the slot goes round empty
      } else {
        MbarArriveExpectTx(bar.full_k + st, kTileTx);
        for (int c = 0; c < kHalves; ++c)
          TmaLoad4d(kst + c * kHalfElems, &wp.k, bar.full_k + st, 64 * c, k0, g, wt.b);
      }
      MbarWait(bar.empty_v + st, free_parity);
      MbarArriveExpectTx(bar.full_v + st, kTileTx);
      for (int c = 0; c < kHalves; ++c)
        TmaLoad4d(vst + c * kHalfElems, &wp.v, bar.full_v + st, 64 * c, k0, g, wt.b);
    }
  }
}

// A consumer (warpgroup 1 + cw): rows [q0 + 64 cw, q0 + 64 cw + 64) of each work tile of
// this CTA, in turns with the other consumer (pingpong) for scoring heads, on its own for
// fixed heads; pruned heads' rows are written as zeros.
template <typename T, int D>
__device__ __forceinline__ void WsConsume(const WsParams& wp, const T* qs, const T* ks, const T* vs,
                                          float* fixed_s, WsBarriers& bar, int tiles, int cw) {
  using L = WsLayout<T, D>;
  constexpr int kHalves = L::kHalves;
  const Params& p = wp.p;
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int my_turn = 1 + cw, other_turn = 2 - cw;  // named barrier ids
  const int my_fixed_bar = 3 + cw;                  // this warpgroup's 128 threads
  const float scale2 = p.scale * kLog2e;

  // S = Q K^T of slot st (both 64-key halves, d in k-steps of 16), one commit group.
  auto issue_s = [&](float(&s)[kWsBk / 8][4], const T* qst, int st) {
    const T* kst = ks + st * kHalves * kHalfElems;
#pragma unroll
    for (int kh = 0; kh < 2; ++kh) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        const uint64_t qd =
            DescPlus(SmemDescSw128(qst + (kk / 4) * kHalfElems + cw * 64 * 64), 32 * (kk % 4));
        const uint64_t kd =
            DescPlus(SmemDescSw128(kst + (kk / 4) * kHalfElems + kh * 64 * 64), 32 * (kk % 4));
        Wgmma<T>::SS(Cols64(s, kh), qd, kd, kk > 0);
      }
    }
    WgmmaCommit();
  };
  // O += P V of slot st (16 keys per k-step, d in 64-column halves), one commit group.
  auto issue_pv = [&](float(&o)[D / 8][4], const uint32_t(&pf)[kWsBk / 16][4], int st) {
    const T* vst = vs + st * kHalves * kHalfElems;
#pragma unroll
    for (int kk = 0; kk < kWsBk / 16; ++kk) {
#pragma unroll
      for (int c = 0; c < kHalves; ++c)
        Wgmma<T>::RS(Cols64(o, c), pf[kk],
                     DescPlus(SmemDescSw128(vst + c * kHalfElems), 16 * 128 * kk), 1);
    }
    WgmmaCommit();
  };

  // A fixed head's factors for 64-key half kh in buffer buf (key tile index & 1).
  float* fixed_w = fixed_s + cw * kWsFixedFloats;
  auto factors = [&](int kh, int buf) {
    return FixedTileAt<64>(fixed_w + kh * 2 * FixedTileFloats<64>(), buf);
  };
  const int half = warp / 2,
            role = warp % 2;  // staging: warps 0-1 keys [k0, k0 + 64), 2-3 the rest

  int it = 0, j = 0;  // key tiles and Q slots (work tiles of heads with a Q) consumed so far
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
    const WorkTile wt(p, t);
    const DeviceHead hd = p.heads[wt.h];
    if (hd.state == int32_t(HeadState::kPruned)) {
      StorePrunedRows<T, D, kWsBq, kWsThreads - 128>(p, wt.b, wt.h, wt.q0, threadIdx.x - 128);
      continue;
    }
    const BlockRanges br = KeyTiles(p, hd, wt.q0);
    const int count = br.Count();  // >= 1: every row sees its own key
    const int r0 = wt.q0 + 64 * cw;
    const int rlast = min(r0 + 63, p.T - 1);
    const WarpRows w{r0 + warp * 16, lane / 4, lane % 4};
    float o[D / 8][4];
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.f;
    uint32_t pf[kWsBk / 16][4];  // P of the last key tile as the A operand of its P V

    if (hd.state == int32_t(HeadState::kFixed)) {
      // SAF eq. 3: P of each 64-key half in product form from the staged factors, then
      // O += P V; rows are normalised by construction and their lse is logZ.
      float lzf[2];
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) lzf[hf] = w.Row(hf) < p.T ? hd.log_z[w.Row(hf)] : 0.f;
      FixedRaw<64> raw;  // the next tile's factors, in flight
      FetchFixedTile<64>(p, hd, r0, br.Block(0) * kWsBk + 64 * half, &raw, role);
      for (int n = 0; n < count; ++n) {
        const int i = it + n, st = i % kWsStages, k0 = br.Block(n) * kWsBk;
        StageFixedTile<64>(raw, factors(half, i & 1), role);
        if (n + 1 < count)
          FetchFixedTile<64>(p, hd, r0, br.Block(n + 1) * kWsBk + 64 * half, &raw, role);
        NamedBarrierSync(my_fixed_bar, 128);  // tile i's factors are staged (and tile i - 2's read)
        float s[kWsBk / 8][4];
#pragma unroll
        for (int kh = 0; kh < 2; ++kh) {
          const int kh0 = k0 + 64 * kh;
          const bool need_mask = !(r0 < p.T && TileAllVisible(hd, r0, rlast, kh0, kh0 + 63));
          FixedScoresTile<64>(Cols64(s, kh), factors(kh, i & 1), lzf, need_mask, hd, w, r0, kh0);
        }
#pragma unroll
        for (int kk = 0; kk < kWsBk / 16; ++kk) PackP<T>(s, kk, pf[kk]);
        MbarWait(bar.full_k + st, (i / kWsStages) & 1);  // the K slot's empty round
        MbarWait(bar.full_v + st, (i / kWsStages) & 1);
        WgmmaFence();
        issue_pv(o, pf, st);
        WgmmaWait<0>();
        FenceOperands(o);
        if (lane == 0) {
          MbarArrive(bar.empty_k + st);
          MbarArrive(bar.empty_v + st);
        }
      }
      StoreRows<T, D>(p, o, m, l, lzf, true, wt.b, wt.h, w);
      it += count;
      continue;
    }
    const float lz[2] = {0.f, 0.f};
    const int qslot = j % kWsQSlots;
    const T* qst = qs + qslot * kHalves * kHalfElems;

    // Key tile n: the turn, S_n (and P_{n-1} V_{n-1} unless first), then the softmax of
    // S_n under the other warpgroup's GEMMs. `first` is a compile-time constant: every wait
    // has one count in each instantiation (ptxas serializes wgmma when it cannot match them).
    auto iteration = [&](int n, auto first_c) {
      constexpr bool kFirst = decltype(first_c)::value;
      const int i = it + n, st = i % kWsStages, pst = (i + kWsStages - 1) % kWsStages;
      const int k0 = br.Block(n) * kWsBk;
      float s[kWsBk / 8][4];
      MbarWait(bar.full_k + st, (i / kWsStages) & 1);
      if (!kFirst) MbarWait(bar.full_v + pst, ((i - 1) / kWsStages) & 1);
      NamedBarrierSync(my_turn, 256);
      WgmmaFence();
      issue_s(s, qst, st);
      if (!kFirst) issue_pv(o, pf, pst);
      if (cw == 0 || n + 1 < count) NamedBarrierArrive(other_turn, 256);
      WgmmaWait<kFirst ? 0 : 1>();
      FenceOperands(s);
      if (lane == 0) {
        MbarArrive(bar.empty_k + st);
        if (n + 1 == count) MbarArrive(bar.empty_q + qslot);  // the tile's last S: Q is free
      }
      const bool need_mask = !(r0 < p.T && TileAllVisible(hd, r0, rlast, k0, k0 + kWsBk - 1));
      float corr[2];
      SoftmaxTile(s, m, l, corr, need_mask, hd, w, k0, scale2);
      if (!kFirst) {
        WgmmaWait<0>();
        FenceOperands(o);
        if (lane == 0) MbarArrive(bar.empty_v + pst);
        RescaleRows<D>(o, corr);
      }
#pragma unroll
      for (int kk = 0; kk < kWsBk / 16; ++kk) PackP<T>(s, kk, pf[kk]);
    };

    if (cw == 1) NamedBarrierArrive(1, 256);  // consumer 0 issues first
    MbarWait(bar.full_q + qslot, (j / kWsQSlots) & 1);
    iteration(0, std::true_type{});
    for (int n = 1; n < count; ++n) iteration(n, std::false_type{});
    const int i_last = it + count - 1, last = i_last % kWsStages;
    MbarWait(bar.full_v + last, (i_last / kWsStages) & 1);
    WgmmaFence();
    issue_pv(o, pf, last);
    WgmmaWait<0>();
    FenceOperands(o);
    if (lane == 0) MbarArrive(bar.empty_v + last);
    StoreRows<T, D>(p, o, m, l, lz, false, wt.b, wt.h, w);
    it += count;
    ++j;
  }
}

// The CTA is persistent: it takes work tiles blockIdx.x, blockIdx.x + gridDim.x, ... (one
// CTA per SM), so the producer loads the next tile's Q, K and V while the consumers finish
// the last one's tiles and write its output, instead of every CTA starting cold.
template <typename T, int D>
__global__ void __launch_bounds__(kWsThreads, 1)
    WsForwardKernel(const __grid_constant__ WsParams wp) {
  using L = WsLayout<T, D>;
  constexpr int kHalves = L::kHalves;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* base = AlignedSharedBase(smem_raw);
  T* qs = reinterpret_cast<T*>(base);
  T* ks = qs + kWsQSlots * kHalves * kHalfElems;  // [stage][half][128][64]
  T* vs = ks + kWsStages * kHalves * kHalfElems;  // [stage][half][128][64]
  float* fixed_s = reinterpret_cast<float*>(vs + kWsStages * kHalves * kHalfElems);  // [consumer]
  WsBarriers& bar = *reinterpret_cast<WsBarriers*>(fixed_s + 2 * kWsFixedFloats);
  const int tiles = WorkTiles(wp.p);

  if (threadIdx.x == 0) WsInitBarriers(bar);
  __syncthreads();

  const int wg = threadIdx.x / 128;
  if (wg == 0) {  // the producer
    SetMaxRegsDec<kProducerRegs>();
    if (threadIdx.x != 0) return;
    WsProduce<T, D>(wp, qs, ks, vs, bar, tiles);
    return;
  }
  SetMaxRegsInc<kConsumerRegs>();
  WsConsume<T, D>(wp, qs, ks, vs, fixed_s, bar, tiles, wg - 1);
}

template <typename T, int D>
cudaError_t Launch(const WsParams& wp, cudaStream_t s) {
  int dev = 0, sms = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (e != cudaSuccess) return e;
  return LaunchWithSmem(WsForwardKernel<T, D>, std::min(WorkTiles(wp.p), sms), kWsThreads,
                        WsLayout<T, D>::kBytes, s, wp);
}

}  // namespace

template <typename T>
cudaError_t LaunchWsForward(const Params& p, cudaStream_t s) {
  if (p.d != 64 && p.d != 128) return cudaErrorInvalidValue;
  WsParams wp{};
  wp.p = p;
  if (!EncodeView<T>(&wp.q, p.q, p.B, p.T, p.H, p.d, kWsBq) ||
      !EncodeView<T>(&wp.k, p.k, p.B, p.T, p.G, p.d, kWsBk) ||
      !EncodeView<T>(&wp.v, p.v, p.B, p.T, p.G, p.d, kWsBk))
    return cudaErrorNotSupported;
  return p.d == 64 ? Launch<T, 64>(wp, s) : Launch<T, 128>(wp, s);
}

template cudaError_t LaunchWsForward<__nv_bfloat16>(const Params&, cudaStream_t);
template cudaError_t LaunchWsForward<__half>(const Params&, cudaStream_t);

}  // namespace internal
}  // namespace kernels
}  // namespace headlab
