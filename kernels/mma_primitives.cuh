// mma_primitives.cuh: the tensor-core building blocks of the hybrid-head kernels: mma.sync
// m16n8k16 (bf16/fp16 in, fp32 accumulate), ldmatrix, cp.async with zero fill.
// Fragment layouts (PTX ISA, mma.m16n8k16): g = lane / 4, t = lane % 4;
//   A (16x16, row): a0 = (g, 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..), a3 = (g+8, 2t+8..)
//   B (16x8, col):  b0 = (k = 2t..2t+1, n = g), b1 = (k = 2t+8.., n = g)
//   C (16x8):       c0,c1 = (g, 2t..2t+1), c2,c3 = (g+8, 2t..2t+1)
// so two adjacent C tiles (16x16) repack into one A fragment without moving data.
#pragma once

#include "kernels/hybrid_attention_internal.cuh"

namespace headlab {
namespace kernels {
namespace internal {

constexpr float kLog2e = 1.4426950408889634f;

// 2^x on the special-function unit (ex2.approx.ftz: ~2 ulp, flushes denormals; -inf -> 0).
__device__ __forceinline__ float Ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

template <typename T>
struct Mma;
template <>
struct Mma<__nv_bfloat16> {
  static __device__ __forceinline__ void Run(float c[4], const uint32_t a[4], uint32_t b0,
                                             uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ uint32_t Pack(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
};
template <>
struct Mma<__half> {
  static __device__ __forceinline__ void Run(float c[4], const uint32_t a[4], uint32_t b0,
                                             uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ uint32_t Pack(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
};

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void LdMatrixX4(uint32_t r[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddr(p)));
}
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t r[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddr(p)));
}

// 16-byte async copy; src_bytes = 0 zero-fills the destination (rows beyond T).
__device__ __forceinline__ void CpAsync16(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(SmemAddr(dst)), "l"(src),
               "r"(src_bytes));
}
// 4-byte async copy (through L1); src_bytes = 0 writes a zero.
__device__ __forceinline__ void CpAsync4(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(SmemAddr(dst)), "l"(src),
               "r"(src_bytes));
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n"); }
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// The cp.async double-buffered tile loop the synchronous kernels share (forward_cta.cuh,
// backward_cta.cuh), once the caller has issued tile 0's copies (issue(0)) and committed
// them: tile n + 1's copies (issue(n + 1)) are in flight while tile n is computed (body(n)),
// which runs after this thread's copies of tile n have landed (landed(): e.g. wgmma's fence
// to the async proxy) and a barrier; a barrier after each tile, before its buffers are
// refilled. The last (empty) group is left to the caller's CpAsyncWait<0>.
template <class Issue, class Landed, class Body>
__device__ __forceinline__ void DoubleBufferedTiles(int count, Issue&& issue, Landed&& landed,
                                                    Body&& body) {
  for (int n = 0; n < count; ++n) {
    if (n + 1 < count) issue(n + 1);
    CpAsyncCommit();
    CpAsyncWait<1>();
    landed();
    __syncthreads();
    body(n);
    __syncthreads();
  }
}

// Issues the async copy of rows [t0, t0 + kRows) of head h into dst[kRows][D + 8] (rows
// padded by 16 bytes so ldmatrix's eight row addresses fall in distinct banks).
template <typename T, int D, int kRows, int kThreads>
__device__ __forceinline__ void LoadRows(const Params& p, const View& v, int b, int h, int t0,
                                         T* dst) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  for (int idx = threadIdx.x; idx < kRows * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = (idx % kChunks) * 8, t = t0 + r;
    const T* src = t < p.T ? At<const T>(v, b, t, h) + c : reinterpret_cast<const T*>(v.data);
    CpAsync16(dst + r * (D + 8) + c, src, t < p.T ? 16 : 0);
  }
}

// The A fragment of Mma for column block kk (16 columns) of this warp's 16 rows of a
// [rows][D + 8] tile.
template <typename T, int D>
__device__ __forceinline__ void LoadRowFragment(uint32_t (&a)[4], const T* rows, int warp, int lane,
                                                int kk) {
  const int r = warp * 16 + (lane % 8) + ((lane / 8) & 1) * 8, c = kk * 16 + (lane / 16) * 8;
  LdMatrixX4(a, rows + r * (D + 8) + c);
}

// acc (16 rows x kN) += a x cols^T over column block kk: `a` a LoadRowFragment, cols a
// [kN][D + 8] tile whose B fragments come by ldmatrix (two n-blocks of 8 per load).
template <typename T, int D, int kN>
__device__ __forceinline__ void AddTimesRowsT(float (&acc)[kN / 8][4], const uint32_t (&a)[4],
                                              const T* cols, int lane, int kk) {
#pragma unroll
  for (int np = 0; np < kN / 16; ++np) {
    uint32_t bf[4];
    const int mi = lane / 8;
    const int r = np * 16 + (mi >> 1) * 8 + lane % 8, c = kk * 16 + (mi & 1) * 8;
    LdMatrixX4(bf, cols + r * (D + 8) + c);
    Mma<T>::Run(acc[2 * np], a, bf[0], bf[1]);
    Mma<T>::Run(acc[2 * np + 1], a, bf[2], bf[3]);
  }
}

}  // namespace internal
}  // namespace kernels
}  // namespace headlab
