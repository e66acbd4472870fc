// hybrid_attention_mma.cu: the tensor-core forward of the hybrid-head layer (bf16/fp16 in,
// fp32 accumulation), FlashAttention-2 style with mma.sync.m16n8k16 (sm_80+; on sm_90 the
// wgmma forward in hybrid_attention_wgmma.cu runs instead where it applies).
//
// One CTA = 64 query rows of one (batch, head), 4 warps x 16 rows. K/V tiles of 64 keys
// stream through shared memory with cp.async, double buffered. S = Q K^T and the online
// softmax stay in registers; P is repacked from the accumulator layout straight into the
// A-operand layout of P V (no shared-memory round trip).
// Per head state: ordinary = full causal; local/streaming = only the key tiles their
// window intersects (head_mask.h), masks only on boundary tiles; fixed = SAF eq. 3 tiles of
// P built from alpha/rho/logZ in product form (FixedTile) — no Q load, no Q K^T, no
// softmax, no per-element exp; pruned = zeros.
#include "kernels/forward_tile.cuh"

namespace headlab {
namespace kernels {
namespace internal {
namespace {

constexpr int kBk = kFwdBk, kBq = 64, kWarps = 4, kThreads = kWarps * 32;

// Query rows per CTA: 64, one m-tile of 16 rows per warp. Two m-tiles per warp (128-row
// blocks) reuse each K/V fragment twice, but measured on H200 (kernels/dev/NOTES.md run 3) it
// gained only 3.5% for all-ordinary d=64 while local heads lost 25% to coarser window blocks.

// Shared memory: Q [64][D+8]; K, V [2][64][D+8]; two buffers of fixed-head factors.
template <int D>
constexpr size_t MmaForwardSmemBytes() {
  return 2 * (kBq * (D + 8) + 4 * kBk * (D + 8)) + 4 * 2 * FixedTileFloats<kBq>();
}

// CTAs per SM the register allocation must allow. Left free (NOTES.md run 4), 167 registers
// at d=64 gave 3 CTAs (12 warps) per SM, and the kernel is latency bound, so d=64 asks for 4
// (16 warps; <= 128 registers, 12 bytes of spill; shared memory 48 KB per CTA allows 4): 6.5%
// faster (run 11). d=96/128 keep their registers (their accumulators need them).
template <int D> constexpr int MinBlocksPerSm() { return D == 64 ? 4 : 1; }

template <typename T, int D>
__global__ void __launch_bounds__(kThreads, MinBlocksPerSm<D>()) MmaForwardKernel(const Params p) {
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
  const WarpRows w{q0 + warp * 16, lane / 4, lane % 4};
  const int q1 = min(q0 + kBq, p.T);

  if (state == HeadState::kPruned) {
    StorePrunedRows<T, D, kBq, kThreads>(p, b, h, q0, threadIdx.x);
    return;
  }

  const BlockRanges br = ToBlocks(KeySpanForQueries(state, hd.window, hd.sink, hd.recent, q0, q1), kBk);
  const int count = br.Count();
  FixedRaw<kBq> raw;  // fixed heads: the next tile's factors, in flight
  if (fixed && count > 0) FetchFixedTile<kBq>(p, hd, q0, br.Block(0) * kBk, &raw, warp);
  auto issue = [&](int n) {
    const int k0 = br.Block(n) * kBk, buf = n & 1;
    if (fixed) {
      StageFixedTile<kBq>(raw, FixedTileAt<kBq>(fixed_s, buf), warp);
      if (n + 1 < count) FetchFixedTile<kBq>(p, hd, q0, br.Block(n + 1) * kBk, &raw, warp);
    } else {
      LoadRows<T, D, kBk, kThreads>(p, p.k, b, g, k0, ks + buf * kBk * (D + 8));
    }
    LoadRows<T, D, kBk, kThreads>(p, p.v, b, g, k0, vs + buf * kBk * (D + 8));
  };

  if (!fixed) LoadRows<T, D, kBq, kThreads>(p, p.q, b, h, q0, qs);
  if (count > 0) issue(0);
  CpAsyncCommit();

  float oacc[D / 8][4];
  float m[2], l[2], lz[2];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) oacc[n][0] = oacc[n][1] = oacc[n][2] = oacc[n][3] = 0.f;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    m[hf] = -INFINITY;
    l[hf] = 0.f;
    lz[hf] = fixed && w.Row(hf) < p.T ? hd.log_z[w.Row(hf)] : 0.f;
  }
  uint32_t qf[D / 16][4];
  const float scale2 = p.scale * kLog2e;

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
      float corr[2];
      SoftmaxTile(s, m, l, corr, need_mask, hd, w, k0, scale2);
      RescaleRows<D>(oacc, corr);
    } else {
      FixedScoresTile<kBq>(s, FixedTileAt<kBq>(fixed_s, buf), lz, need_mask, hd, w, q0, k0);
    }
    // O += P V: P from the accumulators, V fragments by transposed ldmatrix.
#pragma unroll
    for (int kk = 0; kk < kBk / 16; ++kk) {
      uint32_t pf[4];
      PackP<T>(s, kk, pf);
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
  StoreRows<T, D>(p, oacc, m, l, lz, fixed, b, h, w);
}

template <typename T, int D>
cudaError_t MmaForwardLaunch(const Params& p, cudaStream_t s) {
  const dim3 grid((p.T + kBq - 1) / kBq, p.H, p.B);
  return LaunchWithSmem(MmaForwardKernel<T, D>, grid, kThreads, MmaForwardSmemBytes<D>(), s, p);
}

}  // namespace

template <typename T>
cudaError_t LaunchMmaForward(const Params& p, cudaStream_t s) {
  switch (p.d) {
    case 64: return MmaForwardLaunch<T, 64>(p, s);
    case 96: return MmaForwardLaunch<T, 96>(p, s);
    case 128: return MmaForwardLaunch<T, 128>(p, s);
    default: return cudaErrorInvalidValue;
  }
}

template cudaError_t LaunchMmaForward<__nv_bfloat16>(const Params&, cudaStream_t);
template cudaError_t LaunchMmaForward<__half>(const Params&, cudaStream_t);

}  // namespace internal
}  // namespace kernels
}  // namespace headlab
