// hybrid_attention_simt.cu: the CUDA-core path of the hybrid-head layer, every dtype. It is
// the fp32 path (fp32 arithmetic end to end, so it meets the 1e-5 target that tf32 tensor
// cores cannot) and the correctness baseline for the tensor-core path.
//
// Forward: one CTA per (32 query rows, head, batch), 4 warps x 8 rows; keys in tiles of 32
// staged in shared memory; lane j scores key j of the tile; online softmax per row
// (FlashAttention-2); lane c accumulates output dims c, c+32, ...
// Backward: one CTA per (32 keys, KV head, batch) looping over the query heads of its group
// (GQA sums stay in registers, no atomics for dK/dV); lane i handles query i of a tile;
// dQ goes through an fp32 accumulator with atomics. Both skip whole blocks outside a local
// or streaming window (head_mask.h spans) and fixed heads never touch Q or K.
#include "kernels/hybrid_attention_internal.cuh"

namespace headlab {
namespace kernels {
namespace internal {
namespace {

constexpr int kTile = 32;
constexpr int kWarps = 4;
constexpr int kRowsPerWarp = kTile / kWarps;

// Stages rows [t0, t0 + kTile) of head h of a view into smem[kTile][D + 1] as fp32, zero
// beyond T.
template <typename T, int D>
__device__ __forceinline__ void StageTile(const Params& p, const View& v, int b, int h, int t0,
                                          float (*dst)[D + 1]) {
  for (int idx = threadIdx.x; idx < kTile * D; idx += blockDim.x) {
    int r = idx / D, c = idx % D, t = t0 + r;
    dst[r][c] = t < p.T ? ToFloat(At<const T>(v, b, t, h)[c]) : 0.f;
  }
}

template <int D>
constexpr size_t ForwardSmemBytes() {
  return sizeof(float) * (3 * kTile * (D + 1) + 3 * kTile);
}
template <int D>
constexpr size_t BackwardSmemBytes() {
  return sizeof(float) * (4 * kTile * (D + 1) + kTile * (kTile + 1) + 2 * kTile);
}

template <typename T, int D>
__global__ void __launch_bounds__(kWarps * 32) SimtForwardKernel(const Params p) {
  constexpr int kDpl = D / 32;
  extern __shared__ float smem[];  // ForwardSmemBytes<D>()
  float(*qs)[D + 1] = reinterpret_cast<float(*)[D + 1]>(smem);
  float(*ks)[D + 1] = qs + kTile;
  float(*vs)[D + 1] = ks + kTile;
  float* fixed_alpha = &vs[kTile][0];
  float* fixed_rho = fixed_alpha + kTile;
  const int q0 = blockIdx.x * kTile, h = blockIdx.y, b = blockIdx.z;
  const int g = h / (p.H / p.G);
  const DeviceHead hd = p.heads[h];
  const HeadState state = static_cast<HeadState>(hd.state);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int q1 = min(q0 + kTile, p.T);

  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kDpl];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.f;
#pragma unroll
    for (int u = 0; u < kDpl; ++u) acc[r][u] = 0.f;
  }
  if (state != HeadState::kPruned) {
    if (state != HeadState::kFixed) StageTile<T, D>(p, p.q, b, h, q0, qs);
    BlockRanges br =
        ToBlocks(KeySpanForQueries(state, hd.window, hd.sink, hd.recent, q0, q1), kTile);
    for (int n = 0; n < br.Count(); ++n) {
      const int k0 = br.Block(n) * kTile;
      __syncthreads();  // previous tile fully consumed
      if (state == HeadState::kFixed) {
        // SAF eq. 3 needs alpha[k0..k0+31] and rho over offsets q - k in (q0-k0-32, q0-k0+32).
        if (threadIdx.x < kTile)
          fixed_alpha[threadIdx.x] = k0 + threadIdx.x < p.T ? hd.alpha[k0 + threadIdx.x] : 0.f;
        if (threadIdx.x < 2 * kTile) {
          int off = q0 - k0 - kTile + 1 + int(threadIdx.x);
          fixed_rho[threadIdx.x] = (off >= 0 && off < p.T) ? hd.rho[off] : 0.f;
        }
      } else {
        StageTile<T, D>(p, p.k, b, g, k0, ks);
      }
      StageTile<T, D>(p, p.v, b, g, k0, vs);
      __syncthreads();
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const int qr = warp * kRowsPerWarp + r, q = q0 + qr, k = k0 + lane;
        if (q >= p.T) continue;  // warp-uniform
        const bool vis = Visible(hd, q, k);
        float pj;
        if (state == HeadState::kFixed) {
          pj = vis ? __expf(fixed_alpha[lane] + fixed_rho[q - k - (q0 - k0 - kTile + 1)] -
                            hd.log_z[q])
                   : 0.f;
        } else {
          float s = 0.f;
#pragma unroll 8
          for (int c = 0; c < D; ++c) s += qs[qr][c] * ks[lane][c];
          s = vis ? s * p.scale : -INFINITY;
          const float m_new = fmaxf(m[r], WarpMax(s));
          if (m_new == -INFINITY) continue;  // nothing visible yet in this row
          const float corr = __expf(m[r] - m_new);
          pj = vis ? __expf(s - m_new) : 0.f;
          l[r] = l[r] * corr + WarpSum(pj);
          m[r] = m_new;
#pragma unroll
          for (int u = 0; u < kDpl; ++u) acc[r][u] *= corr;
        }
#pragma unroll 8
        for (int j = 0; j < kTile; ++j) {
          const float pb = __shfl_sync(0xffffffffu, pj, j);
#pragma unroll
          for (int u = 0; u < kDpl; ++u) acc[r][u] += pb * vs[j][lane + 32 * u];
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int q = q0 + warp * kRowsPerWarp + r;
    if (q >= p.T) continue;
    float inv = 1.f, lse = -INFINITY;
    if (state == HeadState::kFixed) {
      lse = hd.log_z[q];
    } else if (state != HeadState::kPruned) {
      inv = 1.f / l[r];
      lse = m[r] + logf(l[r]);
    }
    T* out = At<T>(p.o, b, q, h);
#pragma unroll
    for (int u = 0; u < kDpl; ++u) out[lane + 32 * u] = FromFloat<T>(acc[r][u] * inv);
    if (lane == 0) p.lse[(size_t(b) * p.H + h) * p.T + q] = lse;
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(kWarps * 32) SimtBackwardKernel(const Params p) {
  constexpr int kDpl = D / 32;
  extern __shared__ float smem[];  // BackwardSmemBytes<D>()
  float(*ks)[D + 1] = reinterpret_cast<float(*)[D + 1]>(smem);
  float(*vs)[D + 1] = ks + kTile;
  float(*qs)[D + 1] = vs + kTile;
  float(*dos)[D + 1] = qs + kTile;
  float(*ds_s)[kTile + 1] = reinterpret_cast<float(*)[kTile + 1]>(&dos[kTile][0]);
  float* lse_s = &ds_s[kTile][0];
  float* delta_s = lse_s + kTile;
  const int k0 = blockIdx.x * kTile, g = blockIdx.y, b = blockIdx.z;
  const int rep = p.H / p.G;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int k1 = min(k0 + kTile, p.T);

  float dk[kRowsPerWarp][kDpl], dv[kRowsPerWarp][kDpl];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int u = 0; u < kDpl; ++u) dk[r][u] = dv[r][u] = 0.f;

  StageTile<T, D>(p, p.k, b, g, k0, ks);
  StageTile<T, D>(p, p.v, b, g, k0, vs);
  for (int h = g * rep; h < (g + 1) * rep; ++h) {
    const DeviceHead hd = p.heads[h];
    const HeadState state = static_cast<HeadState>(hd.state);
    if (state == HeadState::kPruned) continue;  // uniform over the CTA
    const bool fixed = state == HeadState::kFixed;
    BlockRanges br =
        ToBlocks(QuerySpanForKeys(state, hd.window, hd.sink, hd.recent, k0, k1, p.T), kTile);
    for (int n = 0; n < br.Count(); ++n) {
      const int q0 = br.Block(n) * kTile;
      __syncthreads();
      if (!fixed) StageTile<T, D>(p, p.q, b, h, q0, qs);
      StageTile<T, D>(p, p.d_o, b, h, q0, dos);
      if (threadIdx.x < kTile) {
        int q = q0 + threadIdx.x;
        size_t row = (size_t(b) * p.H + h) * p.T + q;
        lse_s[threadIdx.x] = q < p.T ? (fixed ? hd.log_z[q] : p.lse[row]) : 0.f;
        delta_s[threadIdx.x] = q < p.T && !fixed ? p.delta[row] : 0.f;
      }
      __syncthreads();
      const int q = q0 + lane;
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const int kr = warp * kRowsPerWarp + r, k = k0 + kr;
        const bool vis = q < p.T && Visible(hd, q, k);
        float pij = 0.f;
        if (fixed) {
          if (vis) pij = __expf(hd.alpha[k] + hd.rho[q - k] - lse_s[lane]);  // SAF eq. 3
        } else {
          float s = 0.f;
#pragma unroll 8
          for (int c = 0; c < D; ++c) s += qs[lane][c] * ks[kr][c];
          if (vis) pij = __expf(s * p.scale - lse_s[lane]);
        }
#pragma unroll 8
        for (int i = 0; i < kTile; ++i) {  // dV[k] += sum_i P_ik dO_i
          const float pb = __shfl_sync(0xffffffffu, pij, i);
#pragma unroll
          for (int u = 0; u < kDpl; ++u) dv[r][u] += pb * dos[i][lane + 32 * u];
        }
        if (fixed) continue;
        float dp = 0.f;
#pragma unroll 8
        for (int c = 0; c < D; ++c) dp += dos[lane][c] * vs[kr][c];
        const float ds = pij * (dp - delta_s[lane]) * p.scale;
        ds_s[kr][lane] = ds;
#pragma unroll 8
        for (int i = 0; i < kTile; ++i) {  // dK[k] += sum_i dS_ik Q_i
          const float db = __shfl_sync(0xffffffffu, ds, i);
#pragma unroll
          for (int u = 0; u < kDpl; ++u) dk[r][u] += db * qs[i][lane + 32 * u];
        }
      }
      if (fixed) continue;
      __syncthreads();
      // dQ[i] += sum_k dS_ik K_k for this key block, into the fp32 accumulator.
      for (int idx = threadIdx.x; idx < kTile * D; idx += blockDim.x) {
        const int i = idx / D, c = idx % D, qi = q0 + i;
        if (qi >= p.T) continue;
        float s = 0.f;
#pragma unroll 8
        for (int kr = 0; kr < kTile; ++kr) s += ds_s[kr][i] * ks[kr][c];
        atomicAdd(p.dq_acc + ((size_t(b) * p.H + h) * p.T + qi) * D + c, s);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int k = k0 + warp * kRowsPerWarp + r;
    if (k >= p.T) continue;
    T* dko = At<T>(p.dk, b, k, g);
    T* dvo = At<T>(p.dv, b, k, g);
#pragma unroll
    for (int u = 0; u < kDpl; ++u) {
      dko[lane + 32 * u] = FromFloat<T>(dk[r][u]);
      dvo[lane + 32 * u] = FromFloat<T>(dv[r][u]);
    }
  }
}

// Heads without a dQ: fixed heads (their P has no Q in it) and pruned heads. The backward
// kernels never touch their rows of the workspace, and BackwardFinishKernel writes their dQ
// as zeros without reading it, so BackwardPreprocessKernel leaves those rows alone.
__device__ __forceinline__ bool HasNoDq(const Params& p, int h) {
  const int32_t state = p.heads[h].state;
  return state == int32_t(HeadState::kFixed) || state == int32_t(HeadState::kPruned);
}

// delta[b,h,q] = sum_c dO * O (fp32) and dq_acc = 0, for heads with a dQ; one warp per row.
template <typename T>
__global__ void BackwardPreprocessKernel(const Params p) {
  const int row = blockIdx.x * 4 + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= p.B * p.H * p.T) return;
  const int q = row % p.T, h = (row / p.T) % p.H, b = row / (p.T * p.H);
  if (HasNoDq(p, h)) return;
  const T* o = At<const T>(p.o, b, q, h);
  const T* d_o = At<const T>(p.d_o, b, q, h);
  float s = 0.f;
  for (int c = lane; c < p.d; c += 32) {
    s += ToFloat(o[c]) * ToFloat(d_o[c]);
    p.dq_acc[size_t(row) * p.d + c] = 0.f;
  }
  s = WarpSum(s);
  if (lane == 0) p.delta[row] = s;
}

// dq = dq_acc in the output dtype and layout; exact zeros for heads without a dQ.
template <typename T>
__global__ void BackwardFinishKernel(const Params p) {
  const int row = blockIdx.x * 4 + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= p.B * p.H * p.T) return;
  const int q = row % p.T, h = (row / p.T) % p.H, b = row / (p.T * p.H);
  T* dq = At<T>(p.dq, b, q, h);
  const bool zero = HasNoDq(p, h);
  for (int c = lane; c < p.d; c += 32)
    dq[c] = FromFloat<T>(zero ? 0.f : p.dq_acc[size_t(row) * p.d + c]);
}

template <typename T, int D>
cudaError_t SimtForwardD(const Params& p, cudaStream_t s) {
  const dim3 grid((p.T + kTile - 1) / kTile, p.H, p.B);
  return LaunchWithSmem(SimtForwardKernel<T, D>, grid, kWarps * 32, ForwardSmemBytes<D>(), s, p);
}

template <typename T, int D>
cudaError_t SimtBackwardD(const Params& p, cudaStream_t s) {
  const dim3 grid((p.T + kTile - 1) / kTile, p.G, p.B);
  return LaunchWithSmem(SimtBackwardKernel<T, D>, grid, kWarps * 32, BackwardSmemBytes<D>(), s, p);
}

}  // namespace

template <typename T>
cudaError_t LaunchSimtForward(const Params& p, cudaStream_t s) {
  switch (p.d) {
    case 64:
      return SimtForwardD<T, 64>(p, s);
    case 96:
      return SimtForwardD<T, 96>(p, s);
    case 128:
      return SimtForwardD<T, 128>(p, s);
    default:
      return cudaErrorInvalidValue;
  }
}

template <typename T>
cudaError_t LaunchSimtBackward(const Params& p, cudaStream_t s) {
  switch (p.d) {
    case 64:
      return SimtBackwardD<T, 64>(p, s);
    case 96:
      return SimtBackwardD<T, 96>(p, s);
    case 128:
      return SimtBackwardD<T, 128>(p, s);
    default:
      return cudaErrorInvalidValue;
  }
}

template <typename T>
cudaError_t LaunchBackwardPreprocess(const Params& p, cudaStream_t s) {
  const int rows = p.B * p.H * p.T;
  BackwardPreprocessKernel<T><<<(rows + 3) / 4, 128, 0, s>>>(p);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchBackwardFinish(const Params& p, cudaStream_t s) {
  const int rows = p.B * p.H * p.T;
  BackwardFinishKernel<T><<<(rows + 3) / 4, 128, 0, s>>>(p);
  return cudaGetLastError();
}

#define HEADLAB_INSTANTIATE(T)                                                   \
  template cudaError_t LaunchSimtForward<T>(const Params&, cudaStream_t);        \
  template cudaError_t LaunchSimtBackward<T>(const Params&, cudaStream_t);       \
  template cudaError_t LaunchBackwardPreprocess<T>(const Params&, cudaStream_t); \
  template cudaError_t LaunchBackwardFinish<T>(const Params&, cudaStream_t);
HEADLAB_INSTANTIATE(float)
HEADLAB_INSTANTIATE(__nv_bfloat16)
HEADLAB_INSTANTIATE(__half)
#undef HEADLAB_INSTANTIATE

}  // namespace internal
}  // namespace kernels
}  // namespace headlab
