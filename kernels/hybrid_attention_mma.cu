// hybrid_attention_mma.cu: the tensor-core forward of the hybrid-head layer (bf16/fp16 in,
// fp32 accumulation), FlashAttention-2 style with mma.sync.m16n8k16 (sm_80+ instruction,
// runs on sm_90; wgmma would be the next step up).
//
// One CTA = 64 query rows of one (batch, head), 4 warps x 16 rows (MTiles). K/V tiles of 64 keys stream through shared memory with cp.async, double buffered. S = Q K^T and the online
// softmax stay in registers; P is repacked from the accumulator layout straight into the
// A-operand layout of P V (no shared-memory round trip).
// Per head state: ordinary = full causal; local/streaming = only the key tiles their
// window intersects (head_mask.h), masks only on boundary tiles; fixed = SAF eq. 3 tiles of
// P built from alpha/rho/logZ in product form (FixedTile) — no Q load, no Q K^T, no
// softmax, no per-element exp; pruned = zeros.
#include "kernels/mma_primitives.cuh"

namespace headlab {
namespace kernels {
namespace internal {
namespace {

constexpr int kBk = 64, kWarps = 4, kThreads = kWarps * 32;
// Above this, exp(A + R - logZ) could overflow the product form: the row falls back to exp.
constexpr float kProductFormLimit = 60.f;

// Query rows per CTA: kM m-tiles of 16 rows per warp. Two m-tiles per warp (128-row blocks)
// reuse each K/V fragment twice, but measured on H200 (kernels/dev/NOTES.md) it gained only
// 3.5% for all-ordinary d=64 while local heads lost 25% to coarser window blocks: one.
template <int D> __host__ __device__ constexpr int MTiles() { return 1; }
template <int D> __host__ __device__ constexpr int BlockQ() { return 64 * MTiles<D>(); }
template <int D> __host__ __device__ constexpr int Band() { return BlockQ<D>() + kBk - 1; }

// Shared memory: Q [Bq][D+8]; K, V [2][64][D+8]; fixed-head factors per buffer:
// alpha raw/exp [64] x2, rho raw/exp [Band] x2, A and R.
template <int D>
constexpr size_t MmaForwardSmemBytes() {
  return 2 * (BlockQ<D>() * (D + 8) + 4 * kBk * (D + 8)) + 4 * 2 * (2 * kBk + 2 * Band<D>() + 2);
}

__device__ __forceinline__ float WarpMaxF(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
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

template <int D>
__device__ __forceinline__ FixedTile FixedTileAt(float* base, int buf) {
  float* b = base + buf * (2 * kBk + 2 * Band<D>() + 2);
  return {b, b + kBk, b + 2 * kBk, b + 2 * kBk + Band<D>(), b + 2 * kBk + 2 * Band<D>()};
}

// A fixed tile's raw factors as warps 0 (alpha) and 1 (rho band) hold them in registers.
template <int D>
struct FixedRaw {
  float v[(Band<D>() + 31) / 32];
};

// Loads tile (q0, k0)'s raw factors into registers (plain loads, -inf outside [0, T)). Issued
// one tile ahead: a load stalls a warp only when its register is read, so the global latency
// hides behind a tile of work (run 4 loaded here and stalled warps 0-1 every tile).
template <int D>
__device__ __forceinline__ void FetchFixedTile(const Params& p, const DeviceHead& hd, int q0, int k0,
                                               FixedRaw<D>* raw) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp == 0) {
#pragma unroll
    for (int i = 0; i < kBk / 32; ++i) {
      const int k = k0 + lane + 32 * i;
      raw->v[i] = k < p.T ? hd.alpha[k] : -INFINITY;
    }
  } else if (warp == 1) {
#pragma unroll
    for (int i = 0; i < (Band<D>() + 31) / 32; ++i) {
      const int j = lane + 32 * i, off = q0 - k0 - (kBk - 1) + j;
      raw->v[i] = (j < Band<D>() && off >= 0 && off < p.T) ? hd.rho[off] : -INFINITY;
    }
  }
}

// Warp 0 stages alpha, warp 1 the rho band from FetchFixedTile's registers (ordered by the
// next barrier).
template <int D>
__device__ __forceinline__ void StageFixedTile(const FixedRaw<D>& raw, const FixedTile& ft) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp == 0) {
    float a[kBk / 32];
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < kBk / 32; ++i) {
      a[i] = raw.v[i];
      mx = fmaxf(mx, a[i]);
    }
    mx = WarpMaxF(mx);
#pragma unroll
    for (int i = 0; i < kBk / 32; ++i) {
      ft.alpha_raw[lane + 32 * i] = a[i];
      ft.alpha_exp[lane + 32 * i] = __expf(a[i] - mx);
    }
    if (lane == 0) ft.ar[0] = mx;
  } else if (warp == 1) {
    constexpr int kPer = (Band<D>() + 31) / 32;
    float r[kPer];
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      r[i] = raw.v[i];
      mx = fmaxf(mx, r[i]);
    }
    mx = WarpMaxF(mx);
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int j = lane + 32 * i;
      if (j < Band<D>()) {
        ft.rho_raw[j] = r[i];
        ft.rho_exp[j] = __expf(r[i] - mx);
      }
    }
    if (lane == 0) ft.ar[1] = mx;
  }
}

// CTAs per SM the register allocation must allow. Run 4 left it free: 167 registers at d=64
// gave 3 CTAs (12 warps) per SM, and the kernel is latency bound (NOTES.md), so d=64 now
// asks for 4 (16 warps; <= 128 registers, 8 bytes of spill outside the key loop; shared
// memory 48 KB per CTA allows 4). d=96/128 keep their registers (their accumulators need them).
template <int D> constexpr int MinBlocksPerSm() { return D == 64 ? 4 : 0; }  // 0: no bound

template <typename T, int D, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks) MmaForwardKernel(const Params p) {
  constexpr int kM = MTiles<D>(), kBq = BlockQ<D>();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* qs = reinterpret_cast<T*>(smem_raw);
  T* ks = qs + kBq * (D + 8);       // [2][64][D + 8]
  T* vs = ks + 2 * kBk * (D + 8);   // [2][64][D + 8]
  float* fixed_s = reinterpret_cast<float*>(vs + 2 * kBk * (D + 8));

  const int qb = gridDim.x - 1 - blockIdx.x;  // longest (last) query blocks first
  const int q0 = qb * kBq, h = blockIdx.y, b = blockIdx.z;
  const int g = h / (p.H / p.G);
  const DeviceHead hd = p.heads[h];
  const HeadState state = static_cast<HeadState>(hd.state);
  const bool fixed = state == HeadState::kFixed;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int gr = lane / 4, tq = lane % 4;  // mma fragment row group / thread in group
  const int q1 = min(q0 + kBq, p.T);
  // This thread's rows: m-tile mt, half hf -> q0 + mt * 64 + warp * 16 + gr + 8 * hf.
  auto row_of = [&](int mt, int hf) { return q0 + mt * 64 + warp * 16 + gr + 8 * hf; };

  if (state == HeadState::kPruned) {
    for (int idx = threadIdx.x; idx < kBq * D; idx += kThreads) {
      const int r = idx / D, q = q0 + r;
      if (q < p.T) At<T>(p.o, b, q, h)[idx % D] = FromFloat<T>(0.f);
    }
    for (int r = threadIdx.x; r < kBq; r += kThreads)
      if (q0 + r < p.T) p.lse[(size_t(b) * p.H + h) * p.T + q0 + r] = -INFINITY;
    return;
  }

  const BlockRanges br = ToBlocks(KeySpanForQueries(state, hd.window, hd.sink, hd.recent, q0, q1), kBk);
  const int count = br.Count();
  FixedRaw<D> raw;  // fixed heads: the next tile's factors, in flight
  if (fixed && count > 0) FetchFixedTile<D>(p, hd, q0, br.Block(0) * kBk, &raw);
  auto issue = [&](int n) {
    const int k0 = br.Block(n) * kBk, buf = n & 1;
    if (fixed) {
      StageFixedTile<D>(raw, FixedTileAt<D>(fixed_s, buf));
      if (n + 1 < count) FetchFixedTile<D>(p, hd, q0, br.Block(n + 1) * kBk, &raw);
    } else {
      LoadRows<T, D, kBk, kThreads>(p, p.k, b, g, k0, ks + buf * kBk * (D + 8));
    }
    LoadRows<T, D, kBk, kThreads>(p, p.v, b, g, k0, vs + buf * kBk * (D + 8));
  };

  if (!fixed) LoadRows<T, D, kBq, kThreads>(p, p.q, b, h, q0, qs);
  if (count > 0) issue(0);
  CpAsyncCommit();

  float oacc[kM][D / 8][4];
  float m[kM][2], l[kM][2], lz[kM][2];
#pragma unroll
  for (int mt = 0; mt < kM; ++mt) {
#pragma unroll
    for (int n = 0; n < D / 8; ++n) oacc[mt][n][0] = oacc[mt][n][1] = oacc[mt][n][2] = oacc[mt][n][3] = 0.f;
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      m[mt][hf] = -INFINITY;
      l[mt][hf] = 0.f;
      const int row = row_of(mt, hf);
      lz[mt][hf] = fixed && row < p.T ? hd.log_z[row] : 0.f;
    }
  }
  uint32_t qf[kM][D / 16][4];
  const float scale2 = p.scale * kLog2e;

  for (int n = 0; n < count; ++n) {
    if (n + 1 < count) issue(n + 1);
    CpAsyncCommit();
    CpAsyncWait<1>();
    __syncthreads();
    const int k0 = br.Block(n) * kBk, buf = n & 1;
    const T* kt = ks + buf * kBk * (D + 8);
    const T* vt = vs + buf * kBk * (D + 8);
    float s[kM][kBk / 8][4];
    const bool need_mask = !TileAllVisible(hd, q0, q1 - 1, k0, k0 + kBk - 1);
    if (!fixed) {
      if (n == 0) {
#pragma unroll
        for (int mt = 0; mt < kM; ++mt)
#pragma unroll
          for (int kk = 0; kk < D / 16; ++kk) {
            const int r = mt * 64 + warp * 16 + (lane % 8) + ((lane / 8) & 1) * 8, c = kk * 16 + (lane / 16) * 8;
            LdMatrixX4(qf[mt][kk], qs + r * (D + 8) + c);
          }
      }
#pragma unroll
      for (int mt = 0; mt < kM; ++mt)
#pragma unroll
        for (int nb = 0; nb < kBk / 8; ++nb) s[mt][nb][0] = s[mt][nb][1] = s[mt][nb][2] = s[mt][nb][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
        for (int np = 0; np < kBk / 16; ++np) {
          uint32_t bf[4];
          const int mi = lane / 8;
          const int key = np * 16 + (mi >> 1) * 8 + lane % 8, c = kk * 16 + (mi & 1) * 8;
          LdMatrixX4(bf, kt + key * (D + 8) + c);
#pragma unroll
          for (int mt = 0; mt < kM; ++mt) {
            Mma<T>::Run(s[mt][2 * np], qf[mt][kk], bf[0], bf[1]);
            Mma<T>::Run(s[mt][2 * np + 1], qf[mt][kk], bf[2], bf[3]);
          }
        }
      }
      // Online softmax on raw scores (scale > 0 keeps the order); exponent = s*scale2 - ref.
#pragma unroll
      for (int mt = 0; mt < kM; ++mt) {
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nb = 0; nb < kBk / 8; ++nb) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            if (need_mask) {
              const int key = k0 + nb * 8 + 2 * tq + (e & 1);
              if (!Visible(hd, row_of(mt, e >> 1), key)) s[mt][nb][e] = -INFINITY;
            }
            mx[e >> 1] = fmaxf(mx[e >> 1], s[mt][nb][e]);
          }
        }
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          mx[hf] = fmaxf(mx[hf], __shfl_xor_sync(0xffffffffu, mx[hf], 1));
          mx[hf] = fmaxf(mx[hf], __shfl_xor_sync(0xffffffffu, mx[hf], 2));
          const float mn = fmaxf(m[mt][hf], mx[hf]);
          const float ref = mn == -INFINITY ? 0.f : mn * scale2;
          const float corr = Ex2(m[mt][hf] * scale2 - ref);
          m[mt][hf] = mn;
          float sum = 0.f;
#pragma unroll
          for (int nb = 0; nb < kBk / 8; ++nb) {
            s[mt][nb][2 * hf] = Ex2(fmaf(s[mt][nb][2 * hf], scale2, -ref));
            s[mt][nb][2 * hf + 1] = Ex2(fmaf(s[mt][nb][2 * hf + 1], scale2, -ref));
            sum += s[mt][nb][2 * hf] + s[mt][nb][2 * hf + 1];
          }
          l[mt][hf] = l[mt][hf] * corr + sum;
#pragma unroll
          for (int nd = 0; nd < D / 8; ++nd) {
            oacc[mt][nd][2 * hf] *= corr;
            oacc[mt][nd][2 * hf + 1] *= corr;
          }
        }
      }
    } else {
      // SAF eq. 3 without scores or softmax, in product form (FixedTile). Each thread's
      // elements touch 16 alpha factors and 18 rho factors per m-tile: load those once
      // (band = c + 8 (hf - nb) - e) instead of two shared loads per element.
      const FixedTile ft = FixedTileAt<D>(fixed_s, buf);
      const float ar = ft.ar[0] + ft.ar[1];
      const int band0 = q0 - k0 - (kBk - 1);
      float ea[kBk / 8][2];
#pragma unroll
      for (int nb = 0; nb < kBk / 8; ++nb) {
        const float2 v = *reinterpret_cast<const float2*>(ft.alpha_exp + nb * 8 + 2 * tq);
        ea[nb][0] = v.x;
        ea[nb][1] = v.y;
      }
#pragma unroll
      for (int mt = 0; mt < kM; ++mt) {
        const int c = mt * 64 + warp * 16 + gr + (kBk - 1) - 2 * tq;
        float er[kBk / 8 + 1][2];
#pragma unroll
        for (int u = 0; u <= kBk / 8; ++u) {
          er[u][0] = ft.rho_exp[c + 8 * (u - (kBk / 8 - 1))];
          er[u][1] = ft.rho_exp[c + 8 * (u - (kBk / 8 - 1)) - 1];
        }
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          const int row = row_of(mt, hf);
          const float rz_log = ar - lz[mt][hf];
          const bool exact = rz_log > kProductFormLimit;
          const float rz = __expf(fminf(rz_log, kProductFormLimit));
#pragma unroll
          for (int nb = 0; nb < kBk / 8; ++nb) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              float pv = ea[nb][e] * er[hf - nb + kBk / 8 - 1][e] * rz;
              const int kl = nb * 8 + 2 * tq + e, key = k0 + kl;
              if (exact) pv = __expf(ft.alpha_raw[kl] + ft.rho_raw[row - key - band0] - lz[mt][hf]);
              if (need_mask && !Visible(hd, row, key)) pv = 0.f;
              s[mt][nb][2 * hf + e] = pv;
            }
          }
        }
      }
    }
    // O += P V: P from the accumulators, V fragments by transposed ldmatrix.
#pragma unroll
    for (int kk = 0; kk < kBk / 16; ++kk) {
      uint32_t pf[kM][4];
#pragma unroll
      for (int mt = 0; mt < kM; ++mt) {
        pf[mt][0] = Mma<T>::Pack(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        pf[mt][1] = Mma<T>::Pack(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        pf[mt][2] = Mma<T>::Pack(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        pf[mt][3] = Mma<T>::Pack(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int np = 0; np < D / 16; ++np) {
        uint32_t bf[4];
        const int mi = lane / 8;
        const int key = kk * 16 + (mi & 1) * 8 + lane % 8, c = np * 16 + (mi >> 1) * 8;
        LdMatrixX4Trans(bf, vt + key * (D + 8) + c);
#pragma unroll
        for (int mt = 0; mt < kM; ++mt) {
          Mma<T>::Run(oacc[mt][2 * np], pf[mt], bf[0], bf[1]);
          Mma<T>::Run(oacc[mt][2 * np + 1], pf[mt], bf[2], bf[3]);
        }
      }
    }
    __syncthreads();  // this buffer is refilled by the issue of iteration n + 1
  }
  CpAsyncWait<0>();

#pragma unroll
  for (int mt = 0; mt < kM; ++mt) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int row = row_of(mt, hf);
      float inv = 1.f, lse = lz[mt][hf];
      if (!fixed) {
        float lsum = l[mt][hf];
        lsum += __shfl_xor_sync(0xffffffffu, lsum, 1);
        lsum += __shfl_xor_sync(0xffffffffu, lsum, 2);
        inv = 1.f / lsum;
        lse = m[mt][hf] * p.scale + logf(lsum);
      }
      if (row >= p.T) continue;
      T* out = At<T>(p.o, b, row, h);
#pragma unroll
      for (int nd = 0; nd < D / 8; ++nd) {
        *reinterpret_cast<uint32_t*>(out + nd * 8 + 2 * tq) =
            Mma<T>::Pack(oacc[mt][nd][2 * hf] * inv, oacc[mt][nd][2 * hf + 1] * inv);
      }
      if (tq == 0) p.lse[(size_t(b) * p.H + h) * p.T + row] = lse;
    }
  }
}

template <typename T, int D, int kMinBlocks>
cudaError_t MmaForwardLaunch(const Params& p, cudaStream_t s) {
  constexpr size_t smem = MmaForwardSmemBytes<D>();
  cudaError_t e = cudaFuncSetAttribute(MmaForwardKernel<T, D, kMinBlocks>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (e != cudaSuccess) return e;
  dim3 grid((p.T + BlockQ<D>() - 1) / BlockQ<D>(), p.H, p.B);
  MmaForwardKernel<T, D, kMinBlocks><<<grid, kThreads, smem, s>>>(p);
  return cudaGetLastError();
}

template <typename T, int D>
cudaError_t MmaForwardD(const Params& p, cudaStream_t s, bool run4_tuning) {
  if constexpr (MinBlocksPerSm<D>() > 0) {  // 0: no bound (run 4's build)
    if (run4_tuning) return MmaForwardLaunch<T, D, 0>(p, s);
  }
  return MmaForwardLaunch<T, D, MinBlocksPerSm<D>()>(p, s);
}

}  // namespace

template <typename T>
cudaError_t LaunchMmaForward(const Params& p, cudaStream_t s, bool run4_tuning) {
  switch (p.d) {
    case 64: return MmaForwardD<T, 64>(p, s, run4_tuning);
    case 96: return MmaForwardD<T, 96>(p, s, run4_tuning);
    case 128: return MmaForwardD<T, 128>(p, s, run4_tuning);
    default: return cudaErrorInvalidValue;
  }
}

template cudaError_t LaunchMmaForward<__nv_bfloat16>(const Params&, cudaStream_t, bool);
template cudaError_t LaunchMmaForward<__half>(const Params&, cudaStream_t, bool);

}  // namespace internal
}  // namespace kernels
}  // namespace headlab
