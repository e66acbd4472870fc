// hybrid_attention_mma_bwd.cu: the tensor-core backward of the hybrid-head layer
// (FlashAttention-2 style, bf16/fp16 in, fp32 accumulation, mma.sync.m16n8k16).
//
// One CTA = 64 keys of one (batch, KV head), 4 warps x 16 keys, looping over the query
// heads of its GQA group (dK/dV sums stay in registers) and over the query tiles of each
// head that can see these keys (head_mask.h QuerySpanForKeys: local/streaming heads skip
// the rest). Q, dO, lse and delta tiles are double buffered with cp.async. Everything is
// computed transposed (keys are the M dimension) so that P^T and dS^T come out of the
// accumulators already in the A-operand layout:
//   S^T = K Q^T,  P^T = exp(S^T - lse),  dV += P^T dO,
//   dP^T = V dO^T,  dS^T = P^T (dP^T - delta) * scale,  dK += dS^T Q,
//   dQ += dS K  (dS^T through shared memory, fp32 atomics into the workspace).
// Fixed heads (SAF eq. 3) rebuild P^T from alpha/rho/logZ and stop after dV: no Q load,
// no Q K^T, no dP, no dQ/dK work. Pruned heads are skipped.
#include "kernels/mma_primitives.cuh"

namespace headlab {
namespace kernels {
namespace internal {
namespace {

constexpr int kBk = 64, kBq = 64, kWarps = 4, kThreads = kWarps * 32;

// Above this, exp(A + R - logZ) could overflow the product form: the column uses exp.
constexpr float kProductFormLimit = 60.f;
constexpr int kBand = kBq + kBk - 1;  // offsets q - k of a (query tile, key block) pair
// Per buffer: rz [64], rho raw [Band + 1], rho exp [Band + 1], pad [2]; even, so the float2
// loads of rz stay 8-byte aligned.
constexpr int kBandStride = kBq + 2 * (kBand + 1) + 2;
constexpr int kRawOff = kBq, kExpOff = kBq + kBand + 1;

template <int D>
constexpr size_t MmaBackwardSmemBytes() {
  // K, V [64][D+8]; Q, dO [2][64][D+8]; dS^T [64][64+8]; lse, delta [2][64];
  // fixed heads: alpha raw/exp [64] x2, A + pad; per buffer kBandStride floats.
  return 2 * (2 * kBk * (D + 8) + 4 * kBq * (D + 8) + kBk * (kBq + 8)) +
         4 * (4 * kBq + 2 * kBk + 2 + 2 * kBandStride);
}

// CTAs per SM the register allocation must allow. Run 4 left it free: 209 registers at d=64
// gave 2 CTAs (8 warps) per SM while shared memory (~69 KB) allows 3; d=64 asks for 3
// (<= 168 registers, ~100 bytes of spill): 12.6% faster fwd+bwd (NOTES.md run 11).
template <int D> constexpr int MinBlocksPerSm() { return D == 64 ? 3 : 0; }  // 0: no bound

template <typename T, int D, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks) MmaBackwardKernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* ks = reinterpret_cast<T*>(smem_raw);
  T* vs = ks + kBk * (D + 8);
  T* qs = vs + kBk * (D + 8);          // [2][64][D + 8]
  T* dos = qs + 2 * kBq * (D + 8);     // [2][64][D + 8]
  T* dst_s = dos + 2 * kBq * (D + 8);  // dS^T [64 keys][64 + 8 queries]
  float* lse_s = reinterpret_cast<float*>(dst_s + kBk * (kBq + 8));  // [2][64] (nats)
  float* delta_s = lse_s + 2 * kBq;                                   // [2][64]
  // SAF eq. 3 in product form, P(i,j) = e^{alpha_j - A} e^{rho_{i-j} - R} e^{A + R - logZ_i}:
  // one exp per key, offset and query of a tile instead of one per element.
  float* alpha_raw = delta_s + 2 * kBq;                               // [64]
  float* alpha_exp = alpha_raw + kBk;                                 // [64]
  float* alpha_max = alpha_exp + kBk;                                 // [2] (A, pad)
  float* band_s = alpha_max + 2;                                      // [2][kBandStride]

  const int kb = gridDim.x - 1 - blockIdx.x;  // early keys see the most queries: first
  const int k0 = kb * kBk, g = blockIdx.y, b = blockIdx.z;
  const int k1 = min(k0 + kBk, p.T);
  const int rep = p.H / p.G;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int gr = lane / 4, tq = lane % 4;
  const int key_a = k0 + warp * 16 + gr, key_b = key_a + 8;  // this thread's accumulator rows
  const float scale2 = p.scale * kLog2e;

  LoadRows<T, D, kBk, kThreads>(p, p.k, b, g, k0, ks);
  LoadRows<T, D, kBk, kThreads>(p, p.v, b, g, k0, vs);
  CpAsyncCommit();

  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[n][e] = dv[n][e] = 0.f;

  for (int h = g * rep; h < (g + 1) * rep; ++h) {
    const DeviceHead hd = p.heads[h];
    const HeadState state = static_cast<HeadState>(hd.state);
    if (state == HeadState::kPruned) continue;  // uniform over the CTA
    const bool fixed = state == HeadState::kFixed;
    const BlockRanges br = ToBlocks(QuerySpanForKeys(state, hd.window, hd.sink, hd.recent, k0, k1, p.T), kBq);
    const int count = br.Count();
    const size_t row_base = (size_t(b) * p.H + h) * p.T;
    __syncthreads();  // the previous head's last tile is fully consumed
    if (fixed) {
      if (warp == 0) {
        float a[kBk / 32], mx = -INFINITY;
#pragma unroll
        for (int i = 0; i < kBk / 32; ++i) {
          const int k = k0 + lane + 32 * i;
          a[i] = k < p.T ? hd.alpha[k] : -INFINITY;
          mx = fmaxf(mx, a[i]);
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
#pragma unroll
        for (int i = 0; i < kBk / 32; ++i) {
          alpha_raw[lane + 32 * i] = a[i];
          alpha_exp[lane + 32 * i] = __expf(a[i] - mx);
        }
        if (lane == 0) *alpha_max = mx;
      }
      __syncthreads();  // A is read by the rho staging below
    }
    auto issue = [&](int n) {
      const int q0 = br.Block(n) * kBq, buf = n & 1;
      if (!fixed) LoadRows<T, D, kBq, kThreads>(p, p.q, b, h, q0, qs + buf * kBq * (D + 8));
      LoadRows<T, D, kBq, kThreads>(p, p.d_o, b, h, q0, dos + buf * kBq * (D + 8));
      for (int i = threadIdx.x; i < kBq; i += kThreads) {
        const int q = q0 + i;
        if (!fixed) {
          // Async like the tiles (a plain load here stalled warps 0-1 every tile). Rows
          // beyond T read lse = delta = 0: their Q and dO rows are zero-filled, so P = 1
          // there meets dO = 0 (dV), dP = 0 and delta = 0 (dS = 0), and dQ rows >= T are
          // never stored.
          const bool in = q < p.T;
          CpAsync4(lse_s + buf * kBq + i, in ? p.lse + row_base + q : p.lse, in ? 4 : 0);
          CpAsync4(delta_s + buf * kBq + i, in ? p.delta + row_base + q : p.delta, in ? 4 : 0);
        } else {
          lse_s[buf * kBq + i] = q < p.T ? hd.log_z[q] : INFINITY;  // logZ (nats)
          delta_s[buf * kBq + i] = 0.f;
        }
      }
      if (fixed && warp == 1) {  // rho over offsets q - k in [q0 - k0 - 63, q0 - k0 + 63]
        float* bs = band_s + buf * kBandStride;
        constexpr int kPer = (kBand + 31) / 32;
        float r[kPer], mx = -INFINITY;
#pragma unroll
        for (int i = 0; i < kPer; ++i) {
          const int j = lane + 32 * i, off = q0 - k0 - (kBk - 1) + j;
          r[i] = (j < kBand && off >= 0 && off < p.T) ? hd.rho[off] : -INFINITY;
          mx = fmaxf(mx, r[i]);
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
#pragma unroll
        for (int i = 0; i < kPer; ++i) {
          const int j = lane + 32 * i;
          if (j < kBand) {
            bs[kRawOff + j] = r[i];
            bs[kExpOff + j] = __expf(r[i] - mx);
          }
        }
        // rz = e^{A + R - logZ_q}, or -1 where that could overflow (exact exp instead).
        const float ar = *alpha_max + mx;
#pragma unroll
        for (int i = 0; i < kBq / 32; ++i) {
          const int q = q0 + lane + 32 * i;
          const float rl = q < p.T ? ar - hd.log_z[q] : -INFINITY;
          bs[lane + 32 * i] = rl > kProductFormLimit ? -1.f : __expf(rl);
        }
      }
    };
    if (count > 0) issue(0);
    CpAsyncCommit();

    for (int n = 0; n < count; ++n) {
      if (n + 1 < count) issue(n + 1);
      CpAsyncCommit();
      CpAsyncWait<1>();
      __syncthreads();
      const int q0 = br.Block(n) * kBq, buf = n & 1;
      const T* qt = qs + buf * kBq * (D + 8);
      const T* dot = dos + buf * kBq * (D + 8);
      const float* lse_t = lse_s + buf * kBq;
      const float* delta_t = delta_s + buf * kBq;
      const bool need_mask = !TileAllVisible(hd, q0, min(q0 + kBq, p.T) - 1, k0, k0 + kBk - 1);

      // P^T (16 keys x 64 queries per warp) in accumulator layout: rows key_a/key_b,
      // columns q0 + nb*8 + 2tq + (e & 1).
      float pt[kBq / 8][4];
      if (!fixed) {
#pragma unroll
        for (int nb = 0; nb < kBq / 8; ++nb) pt[nb][0] = pt[nb][1] = pt[nb][2] = pt[nb][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          uint32_t af[4];
          {
            const int r = warp * 16 + (lane % 8) + ((lane / 8) & 1) * 8, c = kk * 16 + (lane / 16) * 8;
            LdMatrixX4(af, ks + r * (D + 8) + c);
          }
#pragma unroll
          for (int np = 0; np < kBq / 16; ++np) {
            uint32_t bf[4];
            const int mi = lane / 8;
            const int q = np * 16 + (mi >> 1) * 8 + lane % 8, c = kk * 16 + (mi & 1) * 8;
            LdMatrixX4(bf, qt + q * (D + 8) + c);
            Mma<T>::Run(pt[2 * np], af, bf[0], bf[1]);
            Mma<T>::Run(pt[2 * np + 1], af, bf[2], bf[3]);
          }
        }
#pragma unroll
        for (int nb = 0; nb < kBq / 8; ++nb) {
          const float2 l2 = *reinterpret_cast<const float2*>(lse_t + nb * 8 + 2 * tq);
          const float nl[2] = {-l2.x * kLog2e, -l2.y * kLog2e};
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int ql = nb * 8 + 2 * tq + (e & 1);
            float x = Ex2(fmaf(pt[nb][e], scale2, nl[e & 1]));
            if (need_mask && !Visible(hd, q0 + ql, e < 2 ? key_a : key_b)) x = 0.f;
            pt[nb][e] = x;
          }
        }
      } else {
        const float* bs = band_s + buf * kBandStride;
        const float* rz = bs;
        const int band0 = q0 - k0 - (kBk - 1);
        // Per thread: 2 alpha factors (its key rows), 16 rz (its query columns) and 18 rho
        // factors (band = c + 8 (nb - hf) + e) per tile, loaded once.
        const float ea[2] = {alpha_exp[key_a - k0], alpha_exp[key_b - k0]};
        const int c = 2 * tq - warp * 16 - gr + (kBk - 1);
        float er[kBq / 8 + 1][2];
#pragma unroll
        for (int u = 0; u <= kBq / 8; ++u) {
          er[u][0] = bs[kExpOff + c + 8 * (u - 1)];
          er[u][1] = bs[kExpOff + c + 8 * (u - 1) + 1];
        }
#pragma unroll
        for (int nb = 0; nb < kBq / 8; ++nb) {
          const float2 r2 = *reinterpret_cast<const float2*>(rz + nb * 8 + 2 * tq);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int hf = e >> 1, ql = nb * 8 + 2 * tq + (e & 1), q = q0 + ql;
            const int key = hf ? key_b : key_a;
            const float r = (e & 1) ? r2.y : r2.x;
            float pv = ea[hf] * er[nb - hf + 1][e & 1] * r;
            if (r < 0.f) pv = __expf(alpha_raw[key - k0] + bs[kRawOff + q - key - band0] - lse_t[ql]);
            if (need_mask && !Visible(hd, q, key)) pv = 0.f;
            pt[nb][e] = pv;
          }
        }
      }
      // dV += P^T dO: A = P^T (repacked accumulators), B = dO by transposed ldmatrix.
#pragma unroll
      for (int kk = 0; kk < kBq / 16; ++kk) {
        uint32_t af[4];
        af[0] = Mma<T>::Pack(pt[2 * kk][0], pt[2 * kk][1]);
        af[1] = Mma<T>::Pack(pt[2 * kk][2], pt[2 * kk][3]);
        af[2] = Mma<T>::Pack(pt[2 * kk + 1][0], pt[2 * kk + 1][1]);
        af[3] = Mma<T>::Pack(pt[2 * kk + 1][2], pt[2 * kk + 1][3]);
#pragma unroll
        for (int np = 0; np < D / 16; ++np) {
          uint32_t bf[4];
          const int mi = lane / 8;
          const int q = kk * 16 + (mi & 1) * 8 + lane % 8, c = np * 16 + (mi >> 1) * 8;
          LdMatrixX4Trans(bf, dot + q * (D + 8) + c);
          Mma<T>::Run(dv[2 * np], af, bf[0], bf[1]);
          Mma<T>::Run(dv[2 * np + 1], af, bf[2], bf[3]);
        }
      }
      if (!fixed) {
        // dP^T = V dO^T (16 keys x 64 queries per warp).
        float dpt[kBq / 8][4];
#pragma unroll
        for (int nb = 0; nb < kBq / 8; ++nb) dpt[nb][0] = dpt[nb][1] = dpt[nb][2] = dpt[nb][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          uint32_t af[4];
          {
            const int r = warp * 16 + (lane % 8) + ((lane / 8) & 1) * 8, c = kk * 16 + (lane / 16) * 8;
            LdMatrixX4(af, vs + r * (D + 8) + c);
          }
#pragma unroll
          for (int np = 0; np < kBq / 16; ++np) {
            uint32_t bf[4];
            const int mi = lane / 8;
            const int q = np * 16 + (mi >> 1) * 8 + lane % 8, c = kk * 16 + (mi & 1) * 8;
            LdMatrixX4(bf, dot + q * (D + 8) + c);
            Mma<T>::Run(dpt[2 * np], af, bf[0], bf[1]);
            Mma<T>::Run(dpt[2 * np + 1], af, bf[2], bf[3]);
          }
        }
        // dS^T = P^T (dP^T - delta) * scale, kept in pt; also staged in shared memory.
#pragma unroll
        for (int nb = 0; nb < kBq / 8; ++nb) {
          const int ql = nb * 8 + 2 * tq;
          pt[nb][0] = pt[nb][0] * (dpt[nb][0] - delta_t[ql]) * p.scale;
          pt[nb][1] = pt[nb][1] * (dpt[nb][1] - delta_t[ql + 1]) * p.scale;
          pt[nb][2] = pt[nb][2] * (dpt[nb][2] - delta_t[ql]) * p.scale;
          pt[nb][3] = pt[nb][3] * (dpt[nb][3] - delta_t[ql + 1]) * p.scale;
          const int ra = warp * 16 + gr;
          *reinterpret_cast<uint32_t*>(dst_s + ra * (kBq + 8) + ql) = Mma<T>::Pack(pt[nb][0], pt[nb][1]);
          *reinterpret_cast<uint32_t*>(dst_s + (ra + 8) * (kBq + 8) + ql) = Mma<T>::Pack(pt[nb][2], pt[nb][3]);
        }
        // dK += dS^T Q: B = Q by transposed ldmatrix.
#pragma unroll
        for (int kk = 0; kk < kBq / 16; ++kk) {
          uint32_t af[4];
          af[0] = Mma<T>::Pack(pt[2 * kk][0], pt[2 * kk][1]);
          af[1] = Mma<T>::Pack(pt[2 * kk][2], pt[2 * kk][3]);
          af[2] = Mma<T>::Pack(pt[2 * kk + 1][0], pt[2 * kk + 1][1]);
          af[3] = Mma<T>::Pack(pt[2 * kk + 1][2], pt[2 * kk + 1][3]);
#pragma unroll
          for (int np = 0; np < D / 16; ++np) {
            uint32_t bf[4];
            const int mi = lane / 8;
            const int q = kk * 16 + (mi & 1) * 8 + lane % 8, c = np * 16 + (mi >> 1) * 8;
            LdMatrixX4Trans(bf, qt + q * (D + 8) + c);
            Mma<T>::Run(dk[2 * np], af, bf[0], bf[1]);
            Mma<T>::Run(dk[2 * np + 1], af, bf[2], bf[3]);
          }
        }
        __syncthreads();  // dS^T complete
        // dQ (16 queries x D per warp) = dS K: A = dS from dS^T by transposed ldmatrix,
        // B = K by transposed ldmatrix; then fp32 atomics into the workspace.
        const int qa = q0 + warp * 16 + gr, qb2 = qa + 8;
#pragma unroll
        for (int np = 0; np < D / 16; ++np) {
          float acc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
          for (int kk = 0; kk < kBk / 16; ++kk) {
            uint32_t af[4], bf[4];
            const int mi = lane / 8;
            {
              const int key = kk * 16 + (mi >> 1) * 8 + lane % 8, q = warp * 16 + (mi & 1) * 8;
              LdMatrixX4Trans(af, dst_s + key * (kBq + 8) + q);
            }
            {
              const int key = kk * 16 + (mi & 1) * 8 + lane % 8, c = np * 16 + (mi >> 1) * 8;
              LdMatrixX4Trans(bf, ks + key * (D + 8) + c);
            }
            Mma<T>::Run(acc[0], af, bf[0], bf[1]);
            Mma<T>::Run(acc[1], af, bf[2], bf[3]);
          }
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int c = np * 16 + half * 8 + 2 * tq;
            if (qa < p.T)
              atomicAdd(reinterpret_cast<float2*>(p.dq_acc + (row_base + qa) * D + c), make_float2(acc[half][0], acc[half][1]));
            if (qb2 < p.T)
              atomicAdd(reinterpret_cast<float2*>(p.dq_acc + (row_base + qb2) * D + c), make_float2(acc[half][2], acc[half][3]));
          }
        }
      }
      __syncthreads();  // buffers of tile n are refilled by the issue of tile n + 2
    }
    CpAsyncWait<0>();
  }
  CpAsyncWait<0>();

#pragma unroll
  for (int nd = 0; nd < D / 8; ++nd) {
    const int c = nd * 8 + 2 * tq;
    if (key_a < p.T) {
      *reinterpret_cast<uint32_t*>(At<T>(p.dk, b, key_a, g) + c) = Mma<T>::Pack(dk[nd][0], dk[nd][1]);
      *reinterpret_cast<uint32_t*>(At<T>(p.dv, b, key_a, g) + c) = Mma<T>::Pack(dv[nd][0], dv[nd][1]);
    }
    if (key_b < p.T) {
      *reinterpret_cast<uint32_t*>(At<T>(p.dk, b, key_b, g) + c) = Mma<T>::Pack(dk[nd][2], dk[nd][3]);
      *reinterpret_cast<uint32_t*>(At<T>(p.dv, b, key_b, g) + c) = Mma<T>::Pack(dv[nd][2], dv[nd][3]);
    }
  }
}

template <typename T, int D, int kMinBlocks>
cudaError_t MmaBackwardLaunch(const Params& p, cudaStream_t s) {
  constexpr size_t smem = MmaBackwardSmemBytes<D>();
  cudaError_t e = cudaFuncSetAttribute(MmaBackwardKernel<T, D, kMinBlocks>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (e != cudaSuccess) return e;
  dim3 grid((p.T + kBk - 1) / kBk, p.G, p.B);
  MmaBackwardKernel<T, D, kMinBlocks><<<grid, kThreads, smem, s>>>(p);
  return cudaGetLastError();
}

}  // namespace

template <typename T>
cudaError_t LaunchMmaBackward(const Params& p, cudaStream_t s) {
  switch (p.d) {
    case 64: return MmaBackwardLaunch<T, 64, MinBlocksPerSm<64>()>(p, s);
    case 96: return MmaBackwardLaunch<T, 96, MinBlocksPerSm<96>()>(p, s);
    case 128: return MmaBackwardLaunch<T, 128, MinBlocksPerSm<128>()>(p, s);
    default: return cudaErrorInvalidValue;
  }
}

template cudaError_t LaunchMmaBackward<__nv_bfloat16>(const Params&, cudaStream_t);
template cudaError_t LaunchMmaBackward<__half>(const Params&, cudaStream_t);

}  // namespace internal
}  // namespace kernels
}  // namespace headlab
