// hybrid_attention_mma.cu: the tensor-core forward of the hybrid-head layer (bf16/fp16 in,
// fp32 accumulation), FlashAttention-2 style with mma.sync.m16n8k16 (sm_80+ instruction,
// runs on sm_90; wgmma would be the next step up).
//
// One CTA = 64 query rows of one (batch, head), 4 warps x 16 rows. K/V tiles of 64 keys
// stream through shared memory with cp.async, double buffered. S = Q K^T and the online
// softmax stay in registers; P is repacked from the accumulator layout straight into the
// A-operand layout of P V (no shared-memory round trip).
// Per head state: ordinary = full causal; local/streaming = only the key tiles their
// window intersects (head_mask.h), masks only on boundary tiles; fixed = SAF eq. 3 tiles of
// P built from alpha/rho/logZ staged in shared memory — no Q load, no Q K^T, no softmax;
// pruned = zeros.
#include "kernels/mma_primitives.cuh"

namespace headlab {
namespace kernels {
namespace internal {
namespace {

constexpr int kBq = 64, kBk = 64, kWarps = 4;

template <int D>
constexpr size_t MmaForwardSmemBytes() {
  return 2 * (kBq * (D + 8) + 4 * kBk * (D + 8)) + 4 * (2 * kBk + 2 * 2 * kBk);
}

template <typename T, int D>
__global__ void __launch_bounds__(kWarps * 32) MmaForwardKernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* qs = reinterpret_cast<T*>(smem_raw);
  T* ks = qs + kBq * (D + 8);       // [2][64][D + 8]
  T* vs = ks + 2 * kBk * (D + 8);   // [2][64][D + 8]
  float* alpha_s = reinterpret_cast<float*>(vs + 2 * kBk * (D + 8));  // [2][64]
  float* rho_s = alpha_s + 2 * kBk;                                   // [2][128]

  const int qb = gridDim.x - 1 - blockIdx.x;  // longest (last) query blocks first
  const int q0 = qb * kBq, h = blockIdx.y, b = blockIdx.z;
  const int g = h / (p.H / p.G);
  const DeviceHead hd = p.heads[h];
  const HeadState state = static_cast<HeadState>(hd.state);
  const bool fixed = state == HeadState::kFixed;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int gr = lane / 4, tq = lane % 4;  // mma fragment row group / thread in group
  const int q1 = min(q0 + kBq, p.T);
  const int row_a = q0 + warp * 16 + gr, row_b = row_a + 8;

  if (state == HeadState::kPruned) {
    for (int idx = threadIdx.x; idx < kBq * D; idx += kWarps * 32) {
      const int r = idx / D, q = q0 + r;
      if (q < p.T) At<T>(p.o, b, q, h)[idx % D] = FromFloat<T>(0.f);
    }
    for (int r = threadIdx.x; r < kBq; r += kWarps * 32)
      if (q0 + r < p.T) p.lse[(size_t(b) * p.H + h) * p.T + q0 + r] = -INFINITY;
    return;
  }

  const BlockRanges br = ToBlocks(KeySpanForQueries(state, hd.window, hd.sink, hd.recent, q0, q1), kBk);
  const int count = br.Count();
  auto issue = [&](int n) {
    const int k0 = br.Block(n) * kBk, buf = n & 1;
    if (fixed) {
      // SAF eq. 3 factors of this tile: alpha over its keys, rho over offsets
      // q - k in [q0 - k0 - 63, q0 - k0 + 63].
      for (int i = threadIdx.x; i < 3 * kBk; i += kWarps * 32) {
        if (i < kBk) {
          alpha_s[buf * kBk + i] = k0 + i < p.T ? hd.alpha[k0 + i] : 0.f;
        } else {
          const int j = i - kBk, off = q0 - k0 - (kBk - 1) + j;
          if (j < 2 * kBk) rho_s[buf * 2 * kBk + j] = (off >= 0 && off < p.T) ? hd.rho[off] : 0.f;
        }
      }
    } else {
      LoadRows<T, D, kBk, kWarps * 32>(p, p.k, b, g, k0, ks + buf * kBk * (D + 8));
    }
    LoadRows<T, D, kBk, kWarps * 32>(p, p.v, b, g, k0, vs + buf * kBk * (D + 8));
  };

  if (!fixed) LoadRows<T, D, kBk, kWarps * 32>(p, p.q, b, h, q0, qs);
  if (count > 0) issue(0);
  CpAsyncCommit();

  float oacc[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) oacc[n][0] = oacc[n][1] = oacc[n][2] = oacc[n][3] = 0.f;
  float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.f, l_b = 0.f;
  uint32_t qf[D / 16][4];
  const float scale2 = p.scale * kLog2e;
  const float lz_a = fixed && row_a < p.T ? hd.log_z[row_a] : 0.f;
  const float lz_b = fixed && row_b < p.T ? hd.log_z[row_b] : 0.f;

  for (int n = 0; n < count; ++n) {
    if (n + 1 < count) issue(n + 1);
    CpAsyncCommit();
    CpAsyncWait<1>();
    __syncthreads();
    const int k0 = br.Block(n) * kBk, buf = n & 1;
    const T* kt = ks + buf * kBk * (D + 8);
    const T* vt = vs + buf * kBk * (D + 8);
    float s[kBk / 8][4];
    const bool need_mask = !TileAllVisible(hd, q0, q1 - 1, k0, k0 + kBk - 1);
    if (!fixed) {
      if (n == 0) {
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          const int r = warp * 16 + (lane % 8) + ((lane / 8) & 1) * 8, c = kk * 16 + (lane / 16) * 8;
          LdMatrixX4(qf[kk], qs + r * (D + 8) + c);
        }
      }
#pragma unroll
      for (int nb = 0; nb < kBk / 8; ++nb) s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
        for (int np = 0; np < kBk / 16; ++np) {
          uint32_t bf[4];
          const int mi = lane / 8;
          const int key = np * 16 + (mi >> 1) * 8 + lane % 8, c = kk * 16 + (mi & 1) * 8;
          LdMatrixX4(bf, kt + key * (D + 8) + c);
          Mma<T>::Run(s[2 * np], qf[kk], bf[0], bf[1]);
          Mma<T>::Run(s[2 * np + 1], qf[kk], bf[2], bf[3]);
        }
      }
      // Online softmax (log2 domain) on rows row_a (elements 0,1) and row_b (2,3).
      float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
      for (int nb = 0; nb < kBk / 8; ++nb) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float x = s[nb][e] * scale2;
          if (need_mask) {
            const int key = k0 + nb * 8 + 2 * tq + (e & 1);
            if (!Visible(hd, e < 2 ? row_a : row_b, key)) x = -INFINITY;
          }
          s[nb][e] = x;
        }
        mx_a = fmaxf(mx_a, fmaxf(s[nb][0], s[nb][1]));
        mx_b = fmaxf(mx_b, fmaxf(s[nb][2], s[nb][3]));
      }
#pragma unroll
      for (int o = 1; o < 4; o <<= 1) {
        mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, o));
        mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, o));
      }
      const float mn_a = fmaxf(m_a, mx_a), mn_b = fmaxf(m_b, mx_b);
      const float ref_a = mn_a == -INFINITY ? 0.f : mn_a, ref_b = mn_b == -INFINITY ? 0.f : mn_b;
      const float corr_a = exp2f(m_a - ref_a), corr_b = exp2f(m_b - ref_b);
      m_a = mn_a;
      m_b = mn_b;
      float sum_a = 0.f, sum_b = 0.f;
#pragma unroll
      for (int nb = 0; nb < kBk / 8; ++nb) {
        s[nb][0] = exp2f(s[nb][0] - ref_a);
        s[nb][1] = exp2f(s[nb][1] - ref_a);
        s[nb][2] = exp2f(s[nb][2] - ref_b);
        s[nb][3] = exp2f(s[nb][3] - ref_b);
        sum_a += s[nb][0] + s[nb][1];
        sum_b += s[nb][2] + s[nb][3];
      }
      l_a = l_a * corr_a + sum_a;
      l_b = l_b * corr_b + sum_b;
#pragma unroll
      for (int nd = 0; nd < D / 8; ++nd) {
        oacc[nd][0] *= corr_a;
        oacc[nd][1] *= corr_a;
        oacc[nd][2] *= corr_b;
        oacc[nd][3] *= corr_b;
      }
    } else {
      // SAF eq. 3: P(i,j) = exp(alpha[j] + rho[i-j] - logZ[i]); no scores, no softmax.
      const float* at = alpha_s + buf * kBk;
      const float* rt = rho_s + buf * 2 * kBk;
#pragma unroll
      for (int nb = 0; nb < kBk / 8; ++nb) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int kl = nb * 8 + 2 * tq + (e & 1), key = k0 + kl;
          const int row = e < 2 ? row_a : row_b;
          const float lz = e < 2 ? lz_a : lz_b;
          const bool vis = !need_mask || Visible(hd, row, key);
          const int band = row - key - (q0 - k0 - (kBk - 1));
          s[nb][e] = vis ? __expf(at[kl] + rt[band] - lz) : 0.f;
        }
      }
    }
    // O += P V: P from the accumulators, V^T fragments by transposed ldmatrix.
#pragma unroll
    for (int kk = 0; kk < kBk / 16; ++kk) {
      uint32_t pf[4];
      pf[0] = Mma<T>::Pack(s[2 * kk][0], s[2 * kk][1]);
      pf[1] = Mma<T>::Pack(s[2 * kk][2], s[2 * kk][3]);
      pf[2] = Mma<T>::Pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      pf[3] = Mma<T>::Pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
      for (int np = 0; np < D / 16; ++np) {
        uint32_t bf[4];
        const int mi = lane / 8;
        const int key = kk * 16 + (mi & 1) * 8 + lane % 8, c = np * 16 + (mi >> 1) * 8;
        LdMatrixX4Trans(bf, vt + key * (D + 8) + c);
        Mma<T>::Run(oacc[2 * np], pf, bf[0], bf[1]);
        Mma<T>::Run(oacc[2 * np + 1], pf, bf[2], bf[3]);
      }
    }
    __syncthreads();  // this buffer is refilled by the issue of iteration n + 1
  }
  CpAsyncWait<0>();

  float inv_a = 1.f, inv_b = 1.f, lse_a = lz_a, lse_b = lz_b;
  if (!fixed) {
#pragma unroll
    for (int o = 1; o < 4; o <<= 1) {
      l_a += __shfl_xor_sync(0xffffffffu, l_a, o);
      l_b += __shfl_xor_sync(0xffffffffu, l_b, o);
    }
    inv_a = 1.f / l_a;
    inv_b = 1.f / l_b;
    lse_a = (m_a + log2f(l_a)) / kLog2e;
    lse_b = (m_b + log2f(l_b)) / kLog2e;
  }
#pragma unroll
  for (int nd = 0; nd < D / 8; ++nd) {
    const int c = nd * 8 + 2 * tq;
    if (row_a < p.T)
      *reinterpret_cast<uint32_t*>(At<T>(p.o, b, row_a, h) + c) = Mma<T>::Pack(oacc[nd][0] * inv_a, oacc[nd][1] * inv_a);
    if (row_b < p.T)
      *reinterpret_cast<uint32_t*>(At<T>(p.o, b, row_b, h) + c) = Mma<T>::Pack(oacc[nd][2] * inv_b, oacc[nd][3] * inv_b);
  }
  if (tq == 0) {
    if (row_a < p.T) p.lse[(size_t(b) * p.H + h) * p.T + row_a] = lse_a;
    if (row_b < p.T) p.lse[(size_t(b) * p.H + h) * p.T + row_b] = lse_b;
  }
}

template <typename T, int D>
cudaError_t MmaForwardD(const Params& p, cudaStream_t s) {
  constexpr size_t smem = MmaForwardSmemBytes<D>();
  cudaError_t e = cudaFuncSetAttribute(MmaForwardKernel<T, D>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (e != cudaSuccess) return e;
  dim3 grid((p.T + kBq - 1) / kBq, p.H, p.B);
  MmaForwardKernel<T, D><<<grid, kWarps * 32, smem, s>>>(p);
  return cudaGetLastError();
}

}  // namespace

template <typename T>
cudaError_t LaunchMmaForward(const Params& p, cudaStream_t s) {
  switch (p.d) {
    case 64: return MmaForwardD<T, 64>(p, s);
    case 96: return MmaForwardD<T, 96>(p, s);
    case 128: return MmaForwardD<T, 128>(p, s);
    default: return cudaErrorInvalidValue;
  }
}

template cudaError_t LaunchMmaForward<__nv_bfloat16>(const Params&, cudaStream_t);
template cudaError_t LaunchMmaForward<__half>(const Params&, cudaStream_t);

}  // namespace internal
}  // namespace kernels
}  // namespace headlab
