// primitives_gpu_test.cu: the device-function primitives of the attention kernels
// (mma_primitives.cuh, wgmma_primitives.cuh, tma_primitives.cuh, tensor_maps.cuh), each in a
// small kernel that uses it as the kernels do (the comments name which), checked against
// values the host computes on its own (ctest label `gpu`). A failure names the primitive where
// kernels_gpu_test only sees an attention output off. Inputs are small integers, exact in bf16
// and fp16, so every fp32 sum is exact in any order and matmuls compare with ==.
//   ex2        Ex2 within 2 ulp of the correctly rounded 2^x; exactly 1 at 0, 0 at -inf
//   mma        S = Q K^T (LoadRows, LoadRowFragment, AddTimesRowsT), O = P V
//              (AddPackedTimesRows: PackP, LdMatrixX4Trans); rows past T zero-filled
//   dbuf       DoubleBufferedTiles with CpAsync16
//   sm_90a only (else "skipped: needs sm_90"):
//   tma-load   TmaLoad4d of EncodeView boxes (strided view; past T zeros) on an mbarrier over
//              two phases, read back through LoadRowsSw128's swizzle
//   tma-reduce TmaReduceAdd4d of swizzled fp32 boxes from 7 CTAs (EncodeDqWorkspace; clipped)
//   bulk       BulkReduceAddF32 from 8 CTAs into overlapping ranges
//   wgmma      SS S = Q K^T over 128 keys (Cols64), RS O = P V (PackP), SS<1,1> dQ = dS K
//              from StoreFragmentsSw128's dS^T, all on LoadRowsSw128 tiles
//   warpgroups setmaxnreg, the ping-pong of named barriers, MbarArrive's count
//
//   build/kernels/kernels_primitives_gpu_test
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/forward_tile.cuh"  // PackP, AddPackedTimesRows
#include "kernels/tensor_maps.cuh"
#include "kernels/testing/attention_harness.cuh"  // HEADLAB_CUDA_CHECK_OR_EXIT, DeviceBuffer
#include "kernels/tma_primitives.cuh"

namespace headlab {
namespace kernels {
namespace {

using namespace internal;
using testing::DeviceBuffer;

// 1 where this binary's device code has the sm_90a primitives (HEADLAB_WGMMA_DEVICE).
__global__ void ProbeSm90a(int* out) { *out = HEADLAB_WGMMA_DEVICE; }

// The m16n8 accumulator layout every kernel holds a warp's 16 rows in (mma_primitives.cuh,
// forward_tile.cuh; wgmma's m64nN gives warp w of the warpgroup rows 16 w .. 16 w + 15 the
// same): a[nb][e] is row 16 warp + gr + 8 (e / 2), column 8 nb + 2 tq + e % 2 of m[.][ld].
__device__ void LoadAcc(const float* m, int ld, float (&a)[8][4]) {
  const int warp = threadIdx.x / 32, gr = threadIdx.x % 32 / 4, tq = threadIdx.x % 4;
#pragma unroll
  for (int nb = 0; nb < 8; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      a[nb][e] = m[(16 * warp + gr + 8 * (e / 2)) * ld + 8 * nb + 2 * tq + e % 2];
}
__device__ void StoreAcc(const float (&a)[8][4], float* m, int ld) {
  const int warp = threadIdx.x / 32, gr = threadIdx.x % 32 / 4, tq = threadIdx.x % 4;
#pragma unroll
  for (int nb = 0; nb < 8; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      m[(16 * warp + gr + 8 * (e / 2)) * ld + 8 * nb + 2 * tq + e % 2] = a[nb][e];
}

__global__ void Ex2Kernel(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = Ex2(x[i]);
}

// Rows of the packed test tensor (1, T, 3 heads, 64): Q, K, V are heads 0, 1, 2, each tile
// starting at its row below (Q, V and the wgmma test's 128 K rows run past T: zero fill).
constexpr int kMmT = 150, kQ0 = 100, kK0 = 30, kV0 = 120;

// One warp per 16 rows, 4 warps: S = Q K^T (64 x 64) and O = P V as the mma.sync forward
// computes them (hybrid_attention_mma.cu).
template <typename T>
__global__ void MmaKernel(const Params p, const float* pm, float* s_out, float* o_out) {
  constexpr int D = 64;
  __shared__ __align__(16) T qs[64 * (D + 8)], ks[64 * (D + 8)], vs[64 * (D + 8)];
  LoadRows<T, D, 64, 128>(p, p.q, 0, 0, kQ0, qs);
  LoadRows<T, D, 64, 128>(p, p.k, 0, 1, kK0, ks);
  LoadRows<T, D, 64, 128>(p, p.v, 0, 2, kV0, vs);
  CpAsyncCommit();
  CpAsyncWait<0>();
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // S = Q K^T as hybrid_attention_mma.cu MmaForwardCore::ScoredTile forms it.
  uint32_t qf[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) LoadRowFragment<T, D>(qf[kk], qs, warp, lane, kk);
  float s[8][4] = {};
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) AddTimesRowsT<T, D, 64>(s, qf[kk], ks, lane, kk);
  StoreAcc(s, s_out, 64);
  float pa[8][4], o[8][4] = {};
  LoadAcc(pm, 64, pa);
  AddPackedTimesRows<T, D, 64>(o, pa, vs);
  StoreAcc(o, o_out, 64);
}

// DoubleBufferedTiles as the synchronous CTAs use it (forward_cta.cuh): tile 0 issued and
// committed first, the last group left to CpAsyncWait<0>. Each thread copies one 16-byte
// chunk per tile and its body reads another thread's chunk, which only the barriers order.
constexpr int kDbTiles = 5, kDbThreads = 128, kDbFloats = 4 * kDbThreads;
__global__ void DoubleBufferedKernel(const float* src, float* out) {
  __shared__ __align__(16) float buf[2][kDbFloats];
  const int tid = threadIdx.x;
  int landed = 0;
  auto issue = [&](int n) { CpAsync16(buf[n & 1] + 4 * tid, src + n * kDbFloats + 4 * tid, 16); };
  issue(0);
  CpAsyncCommit();
  DoubleBufferedTiles(
      kDbTiles, issue, [&] { ++landed; },
      [&](int n) {
        const float* c = buf[n & 1] + 4 * ((tid + 37) % kDbThreads);
        out[n * kDbThreads + tid] = c[0] + 2 * c[1] + 3 * c[2] + 4 * c[3];
      });
  CpAsyncWait<0>();
  out[kDbTiles * kDbThreads + tid] = float(landed);
}

// A box origin (element coordinates t0 of dim 1, head, batch; dim 0 at 0).
struct Box {
  int t0, h, b;
};

// Two TMA loads per CTA into one [64][64] swizzled buffer on one barrier (phases 0 and 1),
// as the producers fill a slot (hybrid_attention_ws.cu WsProduce) and the consumers wait.
constexpr int kTmaRows = 64;
__global__ void TmaLoadKernel(const __grid_constant__ CUtensorMap map, const Box* boxes,
                              uint16_t* out) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* base = AlignedSharedBase(smem_raw);
  uint16_t* tile = reinterpret_cast<uint16_t*>(base);
  uint64_t* bar = reinterpret_cast<uint64_t*>(base + kTmaRows * 128);
  if (threadIdx.x == 0) {
    MbarInit(bar, 1);
    FenceBarrierInit();
  }
  __syncthreads();
  for (int phase = 0; phase < 2; ++phase) {
    const Box bx = boxes[2 * blockIdx.x + phase];
    if (threadIdx.x == 0) {
      if (phase == 0) MbarWait(bar, 1);  // a fresh barrier: returns at once (an empty slot)
      MbarArriveExpectTx(bar, kTmaRows * 128);
      TmaLoad4d(tile, &map, bar, 0, bx.t0, bx.h, bx.b);
    }
    MbarWait(bar, phase);
    uint16_t* o = out + (2 * blockIdx.x + phase) * kTmaRows * 64;
    for (int i = threadIdx.x; i < kTmaRows * 64; i += blockDim.x) {
      const int r = i / 64, j = i % 64 / 8;  // chunk j of row r, where LoadRowsSw128 puts it
      o[i] = tile[r * 64 + ((j ^ (r & 7)) << 3) + i % 8];
    }
    FenceProxyAsyncShared();
    __syncthreads();  // read before the next load overwrites the buffer
  }
}

// The dQ workspace's reduction (hybrid_attention_ws_bwd.cu): a [D/32][64][32] fp32 buffer in
// the tensor map's 128-byte swizzle, reduced box by box by one thread. The swizzle is
// CU_TENSOR_MAP_SWIZZLE_128B's: 16-byte chunk q of a 128-byte row r sits at chunk q ^ (r % 8).
constexpr int kRdT = 100, kRdH = 2, kRdB = 2, kRdD = 128, kRdCtas = 7;
__host__ __device__ float ReduceValue(int cta, int r, int c) {
  return float((cta + 1) * ((r * 131 + c * 7) % 17 - 8));
}
__global__ void TmaReduceKernel(const __grid_constant__ CUtensorMap map, const Box* boxes) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* buf = reinterpret_cast<float*>(AlignedSharedBase(smem_raw));
  for (int i = threadIdx.x; i < 64 * kRdD; i += blockDim.x) {
    const int r = i / kRdD, c = i % kRdD, cc = c % 32;
    buf[(c / 32) * (64 * 32) + r * 32 + (((cc / 4) ^ (r % 8)) * 4) + cc % 4] =
        ReduceValue(blockIdx.x, r, c);
  }
  FenceProxyAsyncShared();
  __syncthreads();
  if (threadIdx.x == 0) {
    const Box bx = boxes[blockIdx.x];
    for (int c = 0; c < kRdD / 32; ++c)
      TmaReduceAdd4d(&map, buf + c * (64 * 32), 32 * c, bx.t0, bx.h, bx.b);
    BulkCommit();
    BulkWaitAll();
  }
}

// CTA k adds its 256 floats to dst[4 k .. 4 k + 255]: overlapping ranges.
constexpr int kBulkFloats = 256, kBulkCtas = 8;
__host__ __device__ float BulkValue(int cta, int i) { return float((cta + 1) * (i % 11 - 5)); }
__global__ void BulkReduceKernel(float* dst) {
  __shared__ __align__(16) float src[kBulkFloats];
  for (int i = threadIdx.x; i < kBulkFloats; i += blockDim.x) src[i] = BulkValue(blockIdx.x, i);
  FenceProxyAsyncShared();
  __syncthreads();
  if (threadIdx.x == 0) {
    BulkReduceAddF32(dst + 4 * blockIdx.x, src, kBulkFloats * sizeof(float));
    BulkCommit();
    BulkWaitAll();
  }
}

// One warpgroup, the three GEMM forms of the warp-specialised kernels on tiles loaded by
// LoadRowsSw128 (Q rows kQ0.., K rows kK0.. (128), V rows kV0..):
//   S = Q K^T (64 x 128): hybrid_attention_ws.cu issue_s at d = 64, a 64-key half per Cols64;
//   O = P V: hybrid_attention_wgmma.cu IssuePv, P (pm, 64 x 64) packed from the accumulator
//     layout by PackP;
//   dQ = dS K (64 x 64): hybrid_attention_ws_bwd.cu, dS^T (dst, [key][query]) staged by
//     StoreFragmentsSw128 from packed accumulators, K the second 64-key half (consumer 1's).
template <typename T>
__global__ void WgmmaKernel(const Params p, const float* pm, const float* dst, float* s_out,
                            float* o_out, float* dq_out) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* qs = reinterpret_cast<T*>(AlignedSharedBase(smem_raw));  // [64][64], swizzled
  T* ks = qs + 64 * 64;                                       // [128][64]
  T* vs = ks + 128 * 64;                                      // [64][64]
  T* dss = vs + 64 * 64;                                      // [64][64]
  LoadRowsSw128<T, 64, 128>(p, p.q, 0, 0, kQ0, qs);
  LoadRowsSw128<T, 128, 128>(p, p.k, 0, 1, kK0, ks);
  LoadRowsSw128<T, 64, 128>(p, p.v, 0, 2, kV0, vs);
  CpAsyncCommit();
  CpAsyncWait<0>();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float x[8][4];
  uint32_t da[4][4];
  LoadAcc(dst, 64, x);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) PackP<T>(x, kk, da[kk]);
  StoreFragmentsSw128(da, dss, warp, lane / 4, lane % 4);
  FenceProxyAsyncShared();
  __syncthreads();
  float s[16][4];
  WgmmaFence();
#pragma unroll
  for (int kh = 0; kh < 2; ++kh)
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      Wgmma<T>::SS(Cols64(s, kh), DescPlus(SmemDescSw128(qs), 32 * kk),
                   DescPlus(SmemDescSw128(ks + kh * 64 * 64), 32 * kk), kk > 0);
  WgmmaCommit();
  WgmmaWait<0>();
  FenceOperands(s);
#pragma unroll
  for (int kh = 0; kh < 2; ++kh) StoreAcc(Cols64(s, kh), s_out + 64 * kh, 128);
  float pa[8][4], o[8][4] = {};
  uint32_t pf[4][4];
  LoadAcc(pm, 64, pa);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) PackP<T>(pa, kk, pf[kk]);
  FenceOperands(o);
  WgmmaFence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    Wgmma<T>::RS(o, pf[kk], DescPlus(SmemDescSw128(vs), 16 * 128 * kk), 1);
  WgmmaCommit();
  WgmmaWait<0>();
  FenceOperands(o);
  StoreAcc(o, o_out, 64);
  float dq[8][4];
  WgmmaFence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    Wgmma<T>::template SS<1, 1>(dq, DescPlus(SmemDescSw128(dss), 16 * 128 * kk),
                                DescPlus(SmemDescSw128(ks + 64 * 64), 16 * 128 * kk), kk);
  WgmmaCommit();
  WgmmaWait<0>();
  FenceOperands(dq);
  StoreAcc(dq, dq_out, 64);
}

// The warp-specialised CTA's frame (hybrid_attention_ws.cu): warpgroup 0 gives registers up
// and keeps one thread, warpgroups 1 and 2 take them and pass the turn back and forth on
// named barriers 1 and 2 (consumer 0 first); each turn's first thread appends to a log.
// Lane 0 of each consumer warp then arrives on a barrier of count 8, which the producer
// thread waits on before it reads the log.
constexpr int kTurns = 8;
__global__ void __launch_bounds__(384, 1) WarpgroupKernel(int* out) {
  __shared__ uint64_t done;
  __shared__ volatile int seq;
  __shared__ volatile int turns[2 * kTurns];
  if (threadIdx.x == 0) {
    MbarInit(&done, 8);
    FenceBarrierInit();
    seq = 0;
  }
  __syncthreads();
  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    SetMaxRegsDec<24>();
    if (threadIdx.x != 0) return;
    MbarWait(&done, 0);
    out[0] = seq;
    for (int i = 0; i < 2 * kTurns; ++i) out[1 + i] = turns[i];
    return;
  }
  SetMaxRegsInc<240>();
  const int cw = wg - 1, my_turn = 1 + cw, other_turn = 2 - cw;
  if (cw == 1) NamedBarrierArrive(1, 256);
  for (int n = 0; n < kTurns; ++n) {
    NamedBarrierSync(my_turn, 256);
    if (threadIdx.x % 128 == 0) {
      const int s = seq;
      __nanosleep(1000);  // widens the window in which unordered turns would lose an entry
      if (s < 2 * kTurns) turns[s] = 100 * cw + n;
      seq = s + 1;
      __threadfence_block();
    }
    if (cw == 0 || n + 1 < kTurns) NamedBarrierArrive(other_turn, 256);
  }
  if (threadIdx.x % 32 == 0) MbarArrive(&done);
}

int failures = 0;

void Report(const char* test, const char* what, bool ok, const char* detail = "") {
  std::printf("%-10s %-28s %s %s\n", test, what, ok ? "ok  " : "FAIL", detail);
  if (!ok) ++failures;
}

// Compares element by element (exact); names the first mismatch by (row, column).
template <typename V>
void ExpectEqual(const char* test, const char* what, const std::vector<V>& got,
                 const std::vector<V>& want, int ld) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (!(got[i] == want[i]) && bad++ == 0) first = i;
  char detail[160] = "";
  if (bad)
    std::snprintf(detail, sizeof(detail), "%zu of %zu differ; first (%zu, %zu): got %g want %g",
                  bad, want.size(), first / ld, first % ld, double(got[first]),
                  double(want[first]));
  Report(test, what, bad == 0, detail);
}

template <typename V>
DeviceBuffer Upload(const std::vector<V>& v) {
  DeviceBuffer d(v.size() * sizeof(V));
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaMemcpy(d.ptr, v.data(), d.bytes, cudaMemcpyHostToDevice));
  return d;
}
template <typename V>
std::vector<V> Download(const DeviceBuffer& d) {
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaDeviceSynchronize());
  std::vector<V> v(d.bytes / sizeof(V));
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaMemcpy(v.data(), d.ptr, d.bytes, cudaMemcpyDeviceToHost));
  return v;
}

// out[i][j] = sum_x a[i * ai + x * ax] b[x * bx + j * bj] (strides say which operand is
// transposed), in double: exact for these integers.
std::vector<float> Product(int m, int n, int k, const float* a, int ai, int ax, const float* b,
                           int bx, int bj) {
  std::vector<float> out(size_t(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int x = 0; x < k; ++x) acc += double(a[i * ai + x * ax]) * b[x * bx + j * bj];
      out[size_t(i) * n + j] = float(acc);
    }
  return out;
}

float* F(const DeviceBuffer& d) { return static_cast<float*>(d.ptr); }

std::vector<float> SmallInts(size_t n, int lo, int hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = float(dist(rng));
  return v;
}

template <typename T>
constexpr DType kDTypeOf = std::is_same_v<T, __half> ? DType::kF16 : DType::kBF16;

// The matmul tests' inputs: a packed (1, kMmT, 3, 64) tensor of small integers they read Q,
// K, V from (heads 0, 1, 2; on the device as T behind p's views) and a 64 x 64 P; on the host
// the tensor's rows past T are 0 (zero fill).
template <typename T>
struct MatmulInputs {
  std::vector<float> qkv = SmallInts(size_t(kMmT) * 3 * 64, -4, 4, 7);
  std::vector<float> pm = SmallInts(64 * 64, -2, 2, 11);
  DeviceBuffer d_qkv, d_pm = Upload(pm);
  Params p{};
  MatmulInputs() {
    std::vector<uint16_t> bits(qkv.size());
    for (size_t i = 0; i < qkv.size(); ++i) bits[i] = testing::ToHalfBits(qkv[i], kDTypeOf<T>);
    d_qkv = Upload(bits);
    p.T = kMmT;
    p.q = p.k = p.v = View{d_qkv.ptr, int64_t(kMmT) * 3 * 64, 3 * 64, 64};
  }
  // Rows [t0, t0 + n) of a head as an n x 64 matrix.
  std::vector<float> Rows(int head, int t0, int n) const {
    std::vector<float> m(size_t(n) * 64, 0.f);
    for (int r = 0; r < n && t0 + r < kMmT; ++r)
      for (int i = 0; i < 64; ++i) m[r * 64 + i] = qkv[(size_t(t0 + r) * 3 + head) * 64 + i];
    return m;
  }
  // What both matmul tests compute: S = Q K^T over n keys from kK0, and O = P V.
  std::vector<float> QkT(int n) const {
    const std::vector<float> q = Rows(0, kQ0, 64), k = Rows(1, kK0, n);
    return Product(64, n, 64, q.data(), 64, 1, k.data(), 1, 64);
  }
  std::vector<float> Pv() const {
    const std::vector<float> v = Rows(2, kV0, 64);
    return Product(64, 64, 64, pm.data(), 64, 1, v.data(), 64, 1);
  }
};

void TestEx2() {
  constexpr int kSweep = 1 << 20;
  std::vector<float> x(kSweep);
  for (int i = 0; i < kSweep; ++i) x[i] = -125.f + 252.f * float(i) / kSweep;  // normal outputs
  x.insert(x.end(), {0.f, -INFINITY});
  DeviceBuffer dx = Upload(x), dy(x.size() * sizeof(float));
  Ex2Kernel<<<(int(x.size()) + 255) / 256, 256>>>(F(dx), F(dy), int(x.size()));
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaGetLastError());
  const std::vector<float> y = Download<float>(dy);
  int64_t worst = 0;
  float worst_x = 0;
  for (int i = 0; i < kSweep; ++i) {
    const float want = float(std::exp2(double(x[i])));  // correctly rounded (almost surely)
    int32_t a, b;
    std::memcpy(&a, &y[i], 4);
    std::memcpy(&b, &want, 4);
    // Both positive: the distance of the bit patterns is the distance in ulps.
    const int64_t ulp = std::isnan(y[i]) ? INT32_MAX : std::llabs(int64_t(a) - b);
    if (ulp > worst) {
      worst = ulp;
      worst_x = x[i];
    }
  }
  char detail[96];
  std::snprintf(detail, sizeof(detail), "max %lld ulp at x = %.7g", (long long)worst, worst_x);
  Report("ex2", "x in [-125, 127): <= 2 ulp", worst <= 2, detail);
  Report("ex2", "ex2(0) == 1, ex2(-inf) == 0", y[kSweep] == 1.f && y[kSweep + 1] == 0.f);
}

template <typename T>
void TestMma(const char* name) {
  const MatmulInputs<T> x;
  DeviceBuffer ds(64 * 64 * 4), dout(64 * 64 * 4);
  MmaKernel<T><<<1, 128>>>(x.p, F(x.d_pm), F(ds), F(dout));
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaGetLastError());
  ExpectEqual(name, "S = Q K^T (AddTimesRowsT)", Download<float>(ds), x.QkT(64), 64);
  ExpectEqual(name, "O = P V (LdMatrixX4Trans)", Download<float>(dout), x.Pv(), 64);
}

void TestDoubleBuffered() {
  const std::vector<float> src = SmallInts(size_t(kDbTiles) * kDbFloats, -9, 9, 3);
  DeviceBuffer ds = Upload(src), dout((kDbTiles + 1) * kDbThreads * sizeof(float));
  DoubleBufferedKernel<<<1, kDbThreads>>>(F(ds), F(dout));
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaGetLastError());
  std::vector<float> want((kDbTiles + 1) * kDbThreads, float(kDbTiles));  // landed() per tile
  for (int n = 0; n < kDbTiles; ++n)
    for (int t = 0; t < kDbThreads; ++t) {
      const float* c = &src[n * kDbFloats + 4 * ((t + 37) % kDbThreads)];
      want[n * kDbThreads + t] = c[0] + 2 * c[1] + 3 * c[2] + 4 * c[3];
    }
  ExpectEqual("dbuf", "tiles through two buffers", Download<float>(dout), want, kDbThreads);
}

void TestTmaLoad() {
  // (B, T, heads, 64) bf16 with one unused head slot per row (a strided view, like packed
  // QKV); element (b, t, h, i) holds the bits 1 + its index, unique (< 2^16), never 0.
  constexpr int B = 2, T = 100, H = 3, kSlot = (H + 1) * 64;
  std::vector<uint16_t> x(size_t(B) * T * kSlot, 0xFFFF);
  auto code = [&](int b, int t, int h, int i) {
    return uint16_t(1 + ((b * T + t) * H + h) * 64 + i);
  };
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h)
        for (int i = 0; i < 64; ++i) x[(size_t(b) * T + t) * kSlot + h * 64 + i] = code(b, t, h, i);
  DeviceBuffer dx = Upload(x);
  CUtensorMap map;
  const View v{dx.ptr, int64_t(T) * kSlot, kSlot, 64};
  if (!EncodeView<__nv_bfloat16>(&map, v, B, T, H, 64, kTmaRows)) {
    Report("tma-load", "EncodeView", false, "the encoder refused the map");
    return;
  }
  // CTA 0: an interior box, then one past T; CTA 1: an unaligned box ending at T, then one
  // starting at the last row.
  const std::vector<Box> boxes = {{0, 0, 0}, {64, 2, 1}, {36, 1, 1}, {99, 0, 0}};
  DeviceBuffer db = Upload(boxes), dout(boxes.size() * kTmaRows * 64 * 2);
  TmaLoadKernel<<<2, 128, kSwizzleAlign + kTmaRows * 128 + 8>>>(
      map, static_cast<const Box*>(db.ptr), static_cast<uint16_t*>(dout.ptr));
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaGetLastError());
  std::vector<uint16_t> want;
  for (const Box& bx : boxes)
    for (int r = 0; r < kTmaRows; ++r)
      for (int i = 0; i < 64; ++i)
        want.push_back(bx.t0 + r < T ? code(bx.b, bx.t0 + r, bx.h, i) : 0);
  ExpectEqual("tma-load", "4 boxes, 2 phases, zero fill", Download<uint16_t>(dout), want, 64);
}

void TestTmaReduce() {
  const size_t n = size_t(kRdB) * kRdH * kRdT * kRdD;
  std::vector<float> ws(n);
  for (size_t i = 0; i < n; ++i) ws[i] = float(int(i % 29) - 14);
  DeviceBuffer dws = Upload(ws);
  CUtensorMap map;
  if (!EncodeDqWorkspace(&map, F(dws), kRdB, kRdT, kRdH, kRdD, 64)) {
    Report("tma-reduce", "EncodeDqWorkspace", false, "the encoder refused the map");
    return;
  }
  // Four CTAs on one box; two on a box past T (rows 100..143 clipped); one unaligned.
  const std::vector<Box> boxes = {{0, 1, 0},  {0, 1, 0},  {0, 1, 0}, {0, 1, 0},
                                  {80, 0, 1}, {80, 0, 1}, {36, 1, 1}};
  DeviceBuffer db = Upload(boxes);
  TmaReduceKernel<<<kRdCtas, 128, kSwizzleAlign + 64 * kRdD * sizeof(float)>>>(
      map, static_cast<const Box*>(db.ptr));
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaGetLastError());
  for (int k = 0; k < kRdCtas; ++k)
    for (int r = 0; r < 64 && boxes[k].t0 + r < kRdT; ++r)
      for (int c = 0; c < kRdD; ++c)
        ws[((size_t(boxes[k].b) * kRdH + boxes[k].h) * kRdT + boxes[k].t0 + r) * kRdD + c] +=
            ReduceValue(k, r, c);
  ExpectEqual("tma-reduce", "7 CTAs into [B][H][T][128]", Download<float>(dws), ws, kRdD);
}

void TestBulkReduce() {
  std::vector<float> dst(4 * kBulkCtas + kBulkFloats);
  for (size_t i = 0; i < dst.size(); ++i) dst[i] = float(int(i % 13) - 6);
  DeviceBuffer dd = Upload(dst);
  BulkReduceKernel<<<kBulkCtas, 128>>>(F(dd));
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaGetLastError());
  for (int k = 0; k < kBulkCtas; ++k)
    for (int i = 0; i < kBulkFloats; ++i) dst[4 * k + i] += BulkValue(k, i);
  ExpectEqual("bulk", "8 CTAs, overlapping ranges", Download<float>(dd), dst, int(dst.size()));
}

template <typename T>
void TestWgmma(const char* name) {
  const MatmulInputs<T> x;
  const std::vector<float> dst = SmallInts(64 * 64, -2, 2, 13);  // dS^T [key][query]
  DeviceBuffer dd = Upload(dst), ds(64 * 128 * 4), dout(64 * 64 * 4), ddq(64 * 64 * 4);
  constexpr size_t kSmem = kSwizzleAlign + (64 + 128 + 64 + 64) * 64 * sizeof(T);
  WgmmaKernel<T><<<1, 128, kSmem>>>(x.p, F(x.d_pm), F(dd), F(ds), F(dout), F(ddq));
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaGetLastError());
  ExpectEqual(name, "SS S = Q K^T, 128 keys", Download<float>(ds), x.QkT(128), 128);
  ExpectEqual(name, "RS O = P V", Download<float>(dout), x.Pv(), 64);
  const std::vector<float> k = x.Rows(1, kK0 + 64, 64);  // consumer 1's keys
  ExpectEqual(name, "SS<1,1> dQ = dS K", Download<float>(ddq),
              Product(64, 64, 64, dst.data(), 1, 64, k.data(), 64, 1), 64);
}

void TestWarpgroups() {
  DeviceBuffer dout((1 + 2 * kTurns) * sizeof(int));
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaMemset(dout.ptr, 0xFF, dout.bytes));
  WarpgroupKernel<<<1, 384>>>(static_cast<int*>(dout.ptr));
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaGetLastError());
  std::vector<int> want = {2 * kTurns};
  for (int n = 0; n < kTurns; ++n) want.insert(want.end(), {n, 100 + n});
  ExpectEqual("warpgroups", "turns alternate, 8 arrivals", Download<int>(dout), want,
              int(want.size()));
}

}  // namespace
}  // namespace kernels
}  // namespace headlab

int main() {
  using namespace headlab::kernels;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: nothing to test here\n");
    return 1;
  }
  int major = 0, sm90a = 0;
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  DeviceBuffer probe(sizeof(int));
  ProbeSm90a<<<1, 1>>>(static_cast<int*>(probe.ptr));
  HEADLAB_CUDA_CHECK_OR_EXIT(cudaGetLastError());
  sm90a = Download<int>(probe)[0];
  TestEx2();
  TestMma<__nv_bfloat16>("mma bf16");
  TestMma<__half>("mma fp16");
  TestDoubleBuffered();
  if (major == 9 && sm90a == 1) {
    TestTmaLoad();
    TestTmaReduce();
    TestBulkReduce();
    TestWgmma<__nv_bfloat16>("wgmma bf16");
    TestWgmma<__half>("wgmma fp16");
    TestWarpgroups();
  } else {
    std::printf("tma, bulk, wgmma, warpgroups: skipped: needs sm_90 (device %d.x, %s)\n", major,
                sm90a ? "sm_90a code" : "built without sm_90a");
  }
  std::printf("%s: %d failed checks\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}
