// forward_tile.cuh: the per-tile steps the tensor-core forwards share (mma.sync in
// hybrid_attention_mma.cu, wgmma in hybrid_attention_wgmma.cu). Both hold a warp's 16 query
// rows x 64 keys of S in the m16n8 accumulator layout (mma_primitives.cuh): s[nb][e] is row
// gr + 8 (e / 2), key 8 nb + 2 tq + e % 2 — wgmma's m64nN accumulator gives each warp of the
// warpgroup exactly this layout for its 16 rows. What differs between the two is only how
// S = Q K^T and O += P V are computed.
#pragma once

#include "kernels/mma_primitives.cuh"

namespace headlab {
namespace kernels {
namespace internal {

constexpr int kFwdBk = 64;  // keys per tile
// Above this, exp(A + R - logZ) could overflow the product form: the row falls back to exp.
constexpr float kFwdProductFormLimit = 60.f;

// Offsets q - k one (query block of kBq rows, key tile) pair spans.
template <int kBq>
__host__ __device__ constexpr int Band() {
  return kBq + kFwdBk - 1;
}

// SAF eq. 3 product form of a fixed head's tile: P(i,j) = e^{alpha_j - A} e^{rho_{i-j} - R}
// e^{A + R - logZ_i} with A, R the tile's maxima, so the tile needs 64 + Band exps instead of
// one per element (the forward is otherwise bound by the exp unit, as ordinary heads are).
struct FixedTile {
  float* alpha_raw;  // [64]   -inf beyond T
  float* alpha_exp;  // [64]   e^{alpha - A}
  float* rho_raw;    // [Band] offsets q0 - k0 - 63 + j; -inf outside [0, T)
  float* rho_exp;    // [Band] e^{rho - R}
  float* ar;         // [2]    A, R
};

// Floats of shared memory one buffer of fixed-tile factors takes.
template <int kBq>
__host__ __device__ constexpr int FixedTileFloats() {
  return 2 * kFwdBk + 2 * Band<kBq>() + 2;
}

template <int kBq>
__device__ __forceinline__ FixedTile FixedTileAt(float* base, int buf) {
  float* b = base + buf * FixedTileFloats<kBq>();
  return {b, b + kFwdBk, b + 2 * kFwdBk, b + 2 * kFwdBk + Band<kBq>(),
          b + 2 * kFwdBk + 2 * Band<kBq>()};
}

// A fixed tile's raw factors as the warps of roles 0 (alpha) and 1 (rho band) hold them in
// registers.
template <int kBq>
struct FixedRaw {
  float v[(Band<kBq>() + 31) / 32];
};

// Loads tile (q0, k0)'s raw factors into registers (plain loads, -inf outside [0, T)), by the
// warp of role 0 (alpha) or 1 (rho band); other roles do nothing. Issued one tile ahead: a
// load stalls a warp only when its register is read, so the global latency hides behind a
// tile of work.
template <int kBq>
__device__ __forceinline__ void FetchFixedTile(const Params& p, const DeviceHead& hd, int q0,
                                               int k0, FixedRaw<kBq>* raw, int role) {
  const int lane = threadIdx.x % 32;
  if (role == 0) {
#pragma unroll
    for (int i = 0; i < kFwdBk / 32; ++i) {
      const int k = k0 + lane + 32 * i;
      raw->v[i] = k < p.T ? hd.alpha[k] : -INFINITY;
    }
  } else if (role == 1) {
#pragma unroll
    for (int i = 0; i < (Band<kBq>() + 31) / 32; ++i) {
      const int j = lane + 32 * i, off = q0 - k0 - (kFwdBk - 1) + j;
      raw->v[i] = (j < Band<kBq>() && off >= 0 && off < p.T) ? hd.rho[off] : -INFINITY;
    }
  }
}

// The warp of role 0 stages alpha, that of role 1 the rho band, from FetchFixedTile's
// registers (ordered by the next barrier).
template <int kBq>
__device__ __forceinline__ void StageFixedTile(const FixedRaw<kBq>& raw, const FixedTile& ft,
                                               int role) {
  const int lane = threadIdx.x % 32;
  if (role == 0) {
    float alpha[kFwdBk / 32];  // FetchFixedTile's first entries
#pragma unroll
    for (int i = 0; i < kFwdBk / 32; ++i) alpha[i] = raw.v[i];
    const float mx = StageExpFactors(alpha, kFwdBk, ft.alpha_raw, ft.alpha_exp);
    if (lane == 0) ft.ar[0] = mx;
  } else if (role == 1) {
    const float mx = StageExpFactors(raw.v, Band<kBq>(), ft.rho_raw, ft.rho_exp);
    if (lane == 0) ft.ar[1] = mx;
  }
}

// One warp's 16 rows of a tile: its rows are row0 + gr + 8 hf, its keys k0 + 8 nb + 2 tq + e.
struct WarpRows {
  int row0;  // first row of the warp's 16 (absolute query position)
  int gr, tq;
  __device__ __forceinline__ int Row(int hf) const { return row0 + gr + 8 * hf; }
  __device__ __forceinline__ int Key(int k0, int nb, int e) const {
    return k0 + nb * 8 + 2 * tq + e;
  }
};

// Sets the elements of s whose key the head does not let its row see to `fill`. Called
// under one uniform branch (boundary tiles only): inside the element loop the test cost a
// branch per element on every tile (seen in the SASS). Each of the thread's
// two rows is a RowVisibility over key offsets from k0 + 2 tq (head_mask.h), so an element
// costs three compares and a select.
template <int kNb>
__device__ __forceinline__ void MaskTile(float (&s)[kNb][4], float fill, const DeviceHead& hd,
                                         const WarpRows& w, int k0) {
  const HeadState state = static_cast<HeadState>(hd.state);
  const int base = w.Key(k0, 0, 0);
  const RowVisibility rows[2] = {
      RowVisibilityOf(state, hd.window, hd.sink, hd.recent, w.Row(0), base),
      RowVisibilityOf(state, hd.window, hd.sink, hd.recent, w.Row(1), base)};
#pragma unroll
  for (int nb = 0; nb < kNb; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[nb][e] = rows[e >> 1].Visible(8 * nb + (e & 1)) ? s[nb][e] : fill;
}

// Online softmax (FlashAttention-2) of one warp's raw scores s (kNb blocks of 8 keys): masks
// invisible keys when need_mask, updates the running max m and sum l, turns s into
// unnormalised P and returns in corr the factors the output accumulators must be rescaled
// by (RescaleRows). Works on raw scores (scale > 0 keeps the order): the exponent is
// s * scale2 - m * scale2 with scale2 = scale * log2(e).
// The row max and sum run as kChains independent chains, combined at the end: with two or
// three warps per scheduler a single chain of 2 kNb dependent FMNMX / FADD per row left the
// warp stalled on each result (ncu: fixed-latency dependency, the top stall of the
// warp-specialised forward).
template <int kNb>
__device__ __forceinline__ void SoftmaxTile(float (&s)[kNb][4], float (&m)[2], float (&l)[2],
                                            float (&corr)[2], bool need_mask, const DeviceHead& hd,
                                            const WarpRows& w, int k0, float scale2) {
  constexpr int kChains = 4;
  static_assert(2 * kNb % kChains == 0, "whole chains");
  if (need_mask) MaskTile(s, -INFINITY, hd, w, k0);
  float mxc[2][kChains];
#pragma unroll
  for (int c = 0; c < kChains; ++c) mxc[0][c] = mxc[1][c] = -INFINITY;
#pragma unroll
  for (int nb = 0; nb < kNb; ++nb) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float& acc = mxc[e >> 1][(2 * nb + (e & 1)) % kChains];
      acc = fmaxf(acc, s[nb][e]);
    }
  }
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float mx = fmaxf(fmaxf(mxc[hf][0], mxc[hf][1]), fmaxf(mxc[hf][2], mxc[hf][3]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float mn = fmaxf(m[hf], mx);
    const float ref = mn == -INFINITY ? 0.f : mn * scale2;
    corr[hf] = Ex2(m[hf] * scale2 - ref);
    m[hf] = mn;
    float sum[kChains] = {};
#pragma unroll
    for (int nb = 0; nb < kNb; ++nb) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& x = s[nb][2 * hf + e];
        x = Ex2(fmaf(x, scale2, -ref));
        sum[(2 * nb + e) % kChains] += x;
      }
    }
    l[hf] = l[hf] * corr[hf] + ((sum[0] + sum[1]) + (sum[2] + sum[3]));
  }
}

// o rows *= corr (SoftmaxTile's factors). Skipped when no row of the warp changed its max
// (every corr exactly 1: ex2(0)), as in most tiles after the first few of a row.
template <int D>
__device__ __forceinline__ void RescaleRows(float (&o)[D / 8][4], const float (&corr)[2]) {
  if (!__any_sync(0xffffffffu, corr[0] != 1.f || corr[1] != 1.f)) return;
#pragma unroll
  for (int nd = 0; nd < D / 8; ++nd) {
    o[nd][0] *= corr[0];
    o[nd][1] *= corr[0];
    o[nd][2] *= corr[1];
    o[nd][3] *= corr[1];
  }
}

// SAF eq. 3 without scores or softmax, in product form (FixedTile): writes one warp's P of
// tile (q0, k0) into s. Each thread's elements touch 16 alpha factors and 18 rho factors:
// loaded once (band = c + 8 (hf - nb) - e) instead of two shared loads per element.
template <int kBq>
__device__ __forceinline__ void FixedScoresTile(float (&s)[kFwdBk / 8][4], const FixedTile& ft,
                                                const float (&lz)[2], bool need_mask,
                                                const DeviceHead& hd, const WarpRows& w, int q0,
                                                int k0) {
  const float ar = ft.ar[0] + ft.ar[1];
  const int band0 = q0 - k0 - (kFwdBk - 1);
  float ea[kFwdBk / 8][2];
#pragma unroll
  for (int nb = 0; nb < kFwdBk / 8; ++nb) {
    const float2 v = *reinterpret_cast<const float2*>(ft.alpha_exp + nb * 8 + 2 * w.tq);
    ea[nb][0] = v.x;
    ea[nb][1] = v.y;
  }
  const int c = (w.row0 - q0) + w.gr + (kFwdBk - 1) - 2 * w.tq;
  float er[kFwdBk / 8 + 1][2];
#pragma unroll
  for (int u = 0; u <= kFwdBk / 8; ++u) {
    er[u][0] = ft.rho_exp[c + 8 * (u - (kFwdBk / 8 - 1))];
    er[u][1] = ft.rho_exp[c + 8 * (u - (kFwdBk / 8 - 1)) - 1];
  }
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const float rz_log = ar - lz[hf];
    const float rz = __expf(fminf(rz_log, kFwdProductFormLimit));
#pragma unroll
    for (int nb = 0; nb < kFwdBk / 8; ++nb) {
#pragma unroll
      for (int e = 0; e < 2; ++e)
        s[nb][2 * hf + e] = ea[nb][e] * er[hf - nb + kFwdBk / 8 - 1][e] * rz;
    }
    if (rz_log > kFwdProductFormLimit) {  // the product form could overflow: exact exps
      const int row = w.Row(hf);
#pragma unroll
      for (int nb = 0; nb < kFwdBk / 8; ++nb) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int kl = nb * 8 + 2 * w.tq + e, key = k0 + kl;
          s[nb][2 * hf + e] = __expf(ft.alpha_raw[kl] + ft.rho_raw[row - key - band0] - lz[hf]);
        }
      }
    }
  }
  if (need_mask) MaskTile(s, 0.f, hd, w, k0);
}

// P of k-step kk (keys 16 kk .. 16 kk + 15) as an A fragment: two adjacent C tiles repack
// without moving data (mma_primitives.cuh).
template <typename T, int kNb>
__device__ __forceinline__ void PackP(const float (&s)[kNb][4], int kk, uint32_t (&a)[4]) {
  a[0] = Mma<T>::Pack(s[2 * kk][0], s[2 * kk][1]);
  a[1] = Mma<T>::Pack(s[2 * kk][2], s[2 * kk][3]);
  a[2] = Mma<T>::Pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
  a[3] = Mma<T>::Pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

// acc (16 rows x D) += A B for one warp with mma.sync: A (16 x kK) is the warp's accumulator
// tile a repacked in place (PackP), B (kK x D) rows of a padded shared buffer rows[kK][D + 8]
// read by transposed ldmatrix — the forward's O += P V and the backward's dV += P^T dO and
// dK += dS^T Q.
template <typename T, int D, int kK>
__device__ __forceinline__ void AddPackedTimesRows(float (&acc)[D / 8][4],
                                                   const float (&a)[kK / 8][4], const T* rows) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk) {
    uint32_t af[4];
    PackP<T>(a, kk, af);
#pragma unroll
    for (int np = 0; np < D / 16; ++np) {
      uint32_t bf[4];
      const int mi = lane / 8;
      const int r = kk * 16 + (mi & 1) * 8 + lane % 8, c = np * 16 + (mi >> 1) * 8;
      LdMatrixX4Trans(bf, rows + r * (D + 8) + c);
      Mma<T>::Run(acc[2 * np], af, bf[0], bf[1]);
      Mma<T>::Run(acc[2 * np + 1], af, bf[2], bf[3]);
    }
  }
}

// Normalises one warp's output rows and writes them with their log-sum-exp (nats). Fixed
// heads' rows are already normalised (P rows sum to 1) and their lse is logZ.
template <typename T, int D>
__device__ __forceinline__ void StoreRows(const Params& p, const float (&o)[D / 8][4],
                                          const float (&m)[2], const float (&l)[2],
                                          const float (&lz)[2], bool fixed, int b, int h,
                                          const WarpRows& w) {
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int row = w.Row(hf);
    float inv = 1.f, lse = lz[hf];
    if (!fixed) {
      float lsum = l[hf];
      lsum += __shfl_xor_sync(0xffffffffu, lsum, 1);
      lsum += __shfl_xor_sync(0xffffffffu, lsum, 2);
      inv = 1.f / lsum;
      lse = m[hf] * p.scale + logf(lsum);
    }
    if (row >= p.T) continue;
    T* out = At<T>(p.o, b, row, h);
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd) {
      *reinterpret_cast<uint32_t*>(out + nd * 8 + 2 * w.tq) =
          Mma<T>::Pack(o[nd][2 * hf] * inv, o[nd][2 * hf + 1] * inv);
    }
    if (w.tq == 0) p.lse[(size_t(b) * p.H + h) * p.T + row] = lse;
  }
}

// Pruned heads: zero output rows [q0, q0 + kBq) and lse = -inf, by kThreads threads of
// which this is number tid.
template <typename T, int D, int kBq, int kThreads>
__device__ __forceinline__ void StorePrunedRows(const Params& p, int b, int h, int q0, int tid) {
  for (int idx = tid; idx < kBq * D; idx += kThreads) {
    const int r = idx / D, q = q0 + r;
    if (q < p.T) At<T>(p.o, b, q, h)[idx % D] = FromFloat<T>(0.f);
  }
  for (int r = tid; r < kBq; r += kThreads)
    if (q0 + r < p.T) p.lse[(size_t(b) * p.H + h) * p.T + q0 + r] = -INFINITY;
}

}  // namespace internal
}  // namespace kernels
}  // namespace headlab
