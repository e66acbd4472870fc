// backward_tile.cuh: the per-tile steps the tensor-core backwards share (mma.sync in
// hybrid_attention_mma_bwd.cu, wgmma in hybrid_attention_wgmma_bwd.cu). Both hold a warp's
// 16 keys x 64 queries of S^T / P^T / dP^T in the m16n8 accumulator layout
// (mma_primitives.cuh): element pt[nb][e] is key key_a (e < 2) or key_b = key_a + 8, query
// q0 + 8 nb + 2 tq + e % 2.
#pragma once

#include "kernels/mma_primitives.cuh"

namespace headlab {
namespace kernels {
namespace internal {

constexpr int kBwdBk = 64, kBwdBq = 64;
// Above this, exp(A + R - logZ) could overflow the product form: the column uses exp.
constexpr float kBwdProductFormLimit = 60.f;
constexpr int kBwdBand = kBwdBq + kBwdBk - 1;  // offsets q - k of a (query tile, key block) pair
// Per buffer: rho raw [Band + 1], rho exp [Band + 1], A + R, pad.
constexpr int kBandStride = 2 * (kBwdBand + 1) + 2;
constexpr int kRawOff = 0, kExpOff = kBwdBand + 1, kArOff = 2 * (kBwdBand + 1);

// Shared memory of the row statistics and fixed-head factors: lse, delta [2][64];
// alpha raw/exp [64] x2, A + pad; per buffer kBandStride floats.
constexpr int BwdStatsFloats() { return 4 * kBwdBq + 2 * kBwdBk + 2 + 2 * kBandStride; }

// SAF eq. 3 in product form, P(i,j) = e^{alpha_j - A} e^{rho_{i-j} - R} e^{A + R - logZ_i}:
// one exp per key, offset and query of a tile instead of one per element.
struct BwdStats {
  float* lse;        // [2][64] (nats; logZ for fixed heads)
  float* delta;      // [2][64]
  float* alpha_raw;  // [64]
  float* alpha_exp;  // [64]
  float* alpha_max;  // [2] (A, pad)
  float* band;       // [2][kBandStride]
  __device__ explicit BwdStats(float* base)
      : lse(base),
        delta(base + 2 * kBwdBq),
        alpha_raw(base + 4 * kBwdBq),
        alpha_exp(alpha_raw + kBwdBk),
        alpha_max(alpha_exp + kBwdBk),
        band(alpha_max + 2) {}
};

// A fixed head's alpha over keys [k0, k0 + 64), by warp 0 of the threads that share st
// (`warp`: the caller's warp index among them; a barrier must follow).
__device__ __forceinline__ void StageAlpha(const Params& p, const DeviceHead& hd, int k0,
                                           const BwdStats& st, int warp) {
  const int lane = threadIdx.x % 32;
  if (warp != 0) return;
  float a[kBwdBk / 32];
#pragma unroll
  for (int i = 0; i < kBwdBk / 32; ++i) {
    const int k = k0 + lane + 32 * i;
    a[i] = k < p.T ? hd.alpha[k] : -INFINITY;
  }
  const float mx = StageExpFactors(a, kBwdBk, st.alpha_raw, st.alpha_exp);
  if (lane == 0) *st.alpha_max = mx;
}

// A fixed head's rho band for one (query tile, key block) pair as warp 1 holds it in
// registers: offsets q0 - k0 - 63 + lane + 32 i, -inf outside [0, T).
struct BandRaw {
  float v[(kBwdBand + 31) / 32];
};

// Loads tile q0's band into registers, by warp 1 (plain loads, issued ahead of StageBand: a
// load stalls a warp only when its register is read).
__device__ __forceinline__ void FetchBand(const Params& p, const DeviceHead& hd, int k0, int q0,
                                          BandRaw* raw, int warp) {
  const int lane = threadIdx.x % 32;
  if (warp != 1) return;
#pragma unroll
  for (int i = 0; i < (kBwdBand + 31) / 32; ++i) {
    const int j = lane + 32 * i, off = q0 - k0 - (kBwdBk - 1) + j;
    raw->v[i] = (j < kBwdBand && off >= 0 && off < p.T) ? hd.rho[off] : -INFINITY;
  }
}

// Stages FetchBand's registers as rho factors in buffer buf and A + R (A: alpha max, R: band
// max), by warp 1 (after StageAlpha's barrier; a barrier must follow).
__device__ __forceinline__ void StageBand(const BandRaw& raw, const BwdStats& st, int buf,
                                          int warp) {
  if (warp != 1) return;
  float* bs = st.band + buf * kBandStride;
  const float mx = StageExpFactors(raw.v, kBwdBand, bs + kRawOff, bs + kExpOff);
  if (threadIdx.x % 32 == 0) bs[kArOff] = *st.alpha_max + mx;
}

// Issues the row statistics of query tile q0 into buffer buf by cp.async: lse and delta
// (ordinary heads) or logZ (fixed heads; delta is unused there). For fixed heads warp 1 also
// stages the rho band from FetchBand's registers and A + R (A: alpha max, R: band max).
__device__ __forceinline__ void IssueRowStats(const Params& p, const DeviceHead& hd, bool fixed,
                                              int q0, int buf, size_t row_base, const BandRaw& raw,
                                              const BwdStats& st) {
  for (int i = threadIdx.x; i < kBwdBq; i += blockDim.x) {
    // Rows beyond T read 0: their Q and dO rows are zero-filled, so P = 1 there meets dO = 0
    // (dV), dP = 0 and delta = 0 (dS = 0), and dQ rows >= T are never stored; a fixed head's
    // rz is 0 there (below).
    const int q = q0 + i;
    const bool in = q < p.T;
    if (!fixed) {
      CpAsync4(st.lse + buf * kBwdBq + i, in ? p.lse + row_base + q : p.lse, in ? 4 : 0);
      CpAsync4(st.delta + buf * kBwdBq + i, in ? p.delta + row_base + q : p.delta, in ? 4 : 0);
    } else {
      CpAsync4(st.lse + buf * kBwdBq + i, in ? hd.log_z + q : hd.log_z, in ? 4 : 0);  // logZ (nats)
    }
  }
  if (fixed)
    StageBand(raw, st, buf,
              threadIdx.x / 32);  // rho over offsets q - k in [q0 - k0 - 63, q0 - k0 + 63]
}

// A warp's 16 keys (key_a = its first row) of one query tile.
struct WarpKeys {
  int key_a, gr, tq, warp;
  __device__ __forceinline__ int Key(int e) const { return e < 2 ? key_a : key_a + 8; }
};

// Zeroes the elements of pt whose query the head does not let see its key. Called under one
// uniform branch (boundary tiles only), not tested per element on every tile.
__device__ __forceinline__ void MaskTileT(float (&pt)[kBwdBq / 8][4], const DeviceHead& hd, int q0,
                                          const WarpKeys& w) {
  const VisibleBand band = BandOf(hd);
#pragma unroll
  for (int nb = 0; nb < kBwdBq / 8; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (!band.Visible(q0 + nb * 8 + 2 * w.tq + (e & 1), w.Key(e))) pt[nb][e] = 0.f;
}

// P^T = exp(S^T * scale - lse) of an ordinary/local/streaming head, masked where needed.
__device__ __forceinline__ void ScoresToPt(float (&pt)[kBwdBq / 8][4], const float* lse_t,
                                           bool need_mask, const DeviceHead& hd, int q0,
                                           const WarpKeys& w, float scale2) {
#pragma unroll
  for (int nb = 0; nb < kBwdBq / 8; ++nb) {
    const float2 l2 = *reinterpret_cast<const float2*>(lse_t + nb * 8 + 2 * w.tq);
    const float nl[2] = {-l2.x * kLog2e, -l2.y * kLog2e};
#pragma unroll
    for (int e = 0; e < 4; ++e) pt[nb][e] = Ex2(fmaf(pt[nb][e], scale2, nl[e & 1]));
  }
  if (need_mask) MaskTileT(pt, hd, q0, w);
}

// P^T of a fixed head (SAF eq. 3) in product form, P = e^{alpha_k - A} e^{rho_{q-k} - R}
// rz_q with rz_q = e^{A + R - logZ_q}. Per thread: 2 alpha factors (its key rows), 16 rz
// (its query columns) and 18 rho factors (band = c + 8 (nb - hf) + e) per tile. Where
// A + R - logZ_q could overflow the product form, that column uses exact exps.
// Columns q >= T get P = 0 (their logZ reads 0).
__device__ __forceinline__ void FixedPt(float (&pt)[kBwdBq / 8][4], const BwdStats& st, int buf,
                                        bool need_mask, const DeviceHead& hd, int T, int q0, int k0,
                                        const WarpKeys& w) {
  const float* bs = st.band + buf * kBandStride;
  const float* lse_t = st.lse + buf * kBwdBq;  // logZ
  const int band0 = q0 - k0 - (kBwdBk - 1);
  const float ar = bs[kArOff];
  const float ea[2] = {st.alpha_exp[w.key_a - k0], st.alpha_exp[w.key_a + 8 - k0]};
  const int c = 2 * w.tq - w.warp * 16 - w.gr + (kBwdBk - 1);
  float er[kBwdBq / 8 + 1][2];
#pragma unroll
  for (int u = 0; u <= kBwdBq / 8; ++u) {
    er[u][0] = bs[kExpOff + c + 8 * (u - 1)];
    er[u][1] = bs[kExpOff + c + 8 * (u - 1) + 1];
  }
  bool exact = false;
#pragma unroll
  for (int nb = 0; nb < kBwdBq / 8; ++nb) {
    const float2 lz = *reinterpret_cast<const float2*>(lse_t + nb * 8 + 2 * w.tq);
    const float rl[2] = {ar - lz.x, ar - lz.y};
    exact |=
        rl[0] > kBwdProductFormLimit || rl[1] > kBwdProductFormLimit;  // (q >= T: checked below)
    const int q = q0 + nb * 8 + 2 * w.tq;
    const float rz[2] = {q < T ? __expf(fminf(rl[0], kBwdProductFormLimit)) : 0.f,
                         q + 1 < T ? __expf(fminf(rl[1], kBwdProductFormLimit)) : 0.f};
#pragma unroll
    for (int e = 0; e < 4; ++e) pt[nb][e] = ea[e >> 1] * er[nb - (e >> 1) + 1][e & 1] * rz[e & 1];
  }
  if (exact) {
#pragma unroll
    for (int nb = 0; nb < kBwdBq / 8; ++nb) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int ql = nb * 8 + 2 * w.tq + (e & 1), q = q0 + ql, key = w.Key(e);
        if (q < T && ar - lse_t[ql] > kBwdProductFormLimit)
          pt[nb][e] = __expf(st.alpha_raw[key - k0] + bs[kRawOff + q - key - band0] - lse_t[ql]);
      }
    }
  }
  if (need_mask) MaskTileT(pt, hd, q0, w);
}

// dS^T = P^T (dP^T - delta) * scale, in place of pt.
__device__ __forceinline__ void DsFromDp(float (&pt)[kBwdBq / 8][4],
                                         const float (&dpt)[kBwdBq / 8][4], const float* delta_t,
                                         float scale, int tq) {
#pragma unroll
  for (int nb = 0; nb < kBwdBq / 8; ++nb) {
    const int ql = nb * 8 + 2 * tq;
    pt[nb][0] = pt[nb][0] * (dpt[nb][0] - delta_t[ql]) * scale;
    pt[nb][1] = pt[nb][1] * (dpt[nb][1] - delta_t[ql + 1]) * scale;
    pt[nb][2] = pt[nb][2] * (dpt[nb][2] - delta_t[ql]) * scale;
    pt[nb][3] = pt[nb][3] * (dpt[nb][3] - delta_t[ql + 1]) * scale;
  }
}

// Writes a warp's rows of dK and dV (keys key_a, key_a + 8 of KV head g).
template <typename T, int D>
__device__ __forceinline__ void StoreDkDv(const Params& p, const float (&dk)[D / 8][4],
                                          const float (&dv)[D / 8][4], int b, int g,
                                          const WarpKeys& w) {
#pragma unroll
  for (int nd = 0; nd < D / 8; ++nd) {
    const int c = nd * 8 + 2 * w.tq;
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int key = w.key_a + 8 * hf;
      if (key >= p.T) continue;
      *reinterpret_cast<uint32_t*>(At<T>(p.dk, b, key, g) + c) =
          Mma<T>::Pack(dk[nd][2 * hf], dk[nd][2 * hf + 1]);
      *reinterpret_cast<uint32_t*>(At<T>(p.dv, b, key, g) + c) =
          Mma<T>::Pack(dv[nd][2 * hf], dv[nd][2 * hf + 1]);
    }
  }
}

// dQ rows (query q, columns c, c + 1) += (x, y): fp32 atomics into the workspace.
__device__ __forceinline__ void AtomicAddDq(const Params& p, size_t row_base, int q, int c, int D,
                                            float x, float y) {
  if (q < p.T)
    atomicAdd(reinterpret_cast<float2*>(p.dq_acc + (row_base + q) * D + c), make_float2(x, y));
}

}  // namespace internal
}  // namespace kernels
}  // namespace headlab
