// wgmma_primitives.cuh: Hopper warpgroup MMA (wgmma.mma_async, sm_90a) for the forward of
// the hybrid-head layer: m64n64k16 with fp32 accumulators, shared-memory descriptors for the
// 128-byte swizzled tiles, and the fences the asynchronous instructions need.
//
// Layouts (PTX ISA, "Asynchronous Warpgroup Level Matrix Shared Memory Layout"):
// - A tile of 64 rows x 64 bf16/fp16 is 64 rows of 128 bytes; its 16-byte chunk j of row r
//   sits at r * 128 + ((j ^ (r % 8)) * 16) (the 128-byte swizzle; atoms of 8 rows = 1024
//   bytes, 1024-byte aligned).
// - Q (operand A of S = Q K^T) and K (operand B, "K-major": contiguous along d) use it
//   directly: stride between 8-row groups (SBO) 1024 bytes; the k-step kk of 16 elements
//   starts 32 kk bytes into the rows.
// - V (operand B of O = P V, keys x d) is "MN-major" (contiguous along d): the same tile with
//   the transpose flag; the k-step kk of 16 keys starts at row 16 kk, SBO 1024 bytes between
//   8-key groups.
// - The accumulator of m64nN gives warp w of the warpgroup rows 16 w .. 16 w + 15 in the
//   mma.sync m16n8 C layout, repeated over N / 8 column blocks; a register A operand has the
//   mma.sync A layout for the same rows — so P goes from S's accumulator to P V's A operand
//   by packing pairs, as in the mma.sync kernel.
#pragma once

#include <cstdint>

#include "kernels/mma_primitives.cuh"

namespace headlab {
namespace kernels {
namespace internal {

// True where this translation unit is compiled for sm_90a (wgmma exists).
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define HEADLAB_WGMMA_DEVICE 1
#else
#define HEADLAB_WGMMA_DEVICE 0
#endif

// 128-byte swizzle atoms (8 rows of 128 bytes) start at 1024-byte aligned shared addresses.
constexpr int kSwizzleAlign = 1024;

// The first kSwizzleAlign-aligned byte of dynamic shared memory `raw`, reached by adding an
// offset to `raw` itself: the compiler then still knows that the pointers made from it are
// in shared memory and accesses them with LDS/STS. Rounding through an integer (uintptr_t)
// loses that, and every access through the result becomes a generic LD/ST (ncu: the
// warp-specialised backward's row statistics and dS^T were all generic).
__device__ __forceinline__ unsigned char* AlignedSharedBase(unsigned char* raw) {
  const uint32_t addr = SmemAddr(raw);
  return raw + ((kSwizzleAlign - addr % kSwizzleAlign) % kSwizzleAlign);
}

// Descriptor of a 128-byte-swizzled tile starting at p (1024-byte aligned atom rows):
// bits 0-13 start address >> 4, 16-29 leading byte offset >> 4 (unused by these layouts: 1),
// 32-45 stride byte offset >> 4 (1024 bytes between 8-row groups), 62-63 swizzle (1 = 128 B).
__device__ __forceinline__ uint64_t SmemDescSw128(const void* p) {
  const uint64_t addr = SmemAddr(p);
  return ((addr & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) |
         (uint64_t(1) << 62);
}
// The descriptor of the same tile `bytes` further on (bytes a multiple of 16).
__device__ __forceinline__ uint64_t DescPlus(uint64_t desc, int bytes) {
  return desc + uint64_t(bytes >> 4);
}

__device__ __forceinline__ void WgmmaFence() {
#if HEADLAB_WGMMA_DEVICE
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void WgmmaCommit() {
#if HEADLAB_WGMMA_DEVICE
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void WgmmaWait() {
#if HEADLAB_WGMMA_DEVICE
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Makes this thread's generic-proxy writes of shared memory (cp.async) visible to the async
// proxy that wgmma reads through; precedes the barrier after cp.async.wait_group.
__device__ __forceinline__ void FenceProxyAsyncShared() {
#if HEADLAB_WGMMA_DEVICE
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// Pins accumulator registers at this point of the program: uses after it cannot be hoisted
// above a wgmma.wait_group before it, definitions before it cannot sink below a wgmma.fence.
template <int N>
__device__ __forceinline__ void FenceOperands(float (&d)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[i][e])::"memory");
}

#define HEADLAB_WGMMA_D32                                                                       \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define HEADLAB_WGMMA_D32_OPERANDS(d)                                                           \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),     \
      "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), \
      "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), \
      "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), \
      "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), \
      "+f"(d[7][2]), "+f"(d[7][3])

// m64n64k16, fp32 accumulators d[n8 block][4]. SS: A and B from shared memory, K-major
// unless kTransA / kTransB (then M-major / N-major); RS: A from registers (mma.sync A
// layout), B from shared memory N-major.
// accumulate = 0 overwrites d (scale-d = 0), 1 adds to it.
template <typename T>
struct Wgmma;
#define HEADLAB_DEFINE_WGMMA(TYPE, PTX_TYPES)                                            \
  template <>                                                                            \
  struct Wgmma<TYPE> {                                                                   \
    template <int kTransA = 0, int kTransB = 0>                                          \
    static __device__ __forceinline__ void SS(float (&d)[8][4], uint64_t a, uint64_t b,  \
                                              int accumulate) {                          \
      if constexpr (HEADLAB_WGMMA_DEVICE) {                                              \
        asm volatile(                                                                    \
            "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                 \
            "wgmma.mma_async.sync.aligned.m64n64k16.f32" PTX_TYPES " " HEADLAB_WGMMA_D32 \
            ", %32, %33, p, 1, 1, %35, %36;\n}\n"                                        \
            : HEADLAB_WGMMA_D32_OPERANDS(d)                                              \
            : "l"(a), "l"(b), "r"(accumulate), "n"(kTransA), "n"(kTransB));              \
      } else {                                                                           \
        __trap();                                                                        \
      }                                                                                  \
    }                                                                                    \
    static __device__ __forceinline__ void RS(float (&d)[8][4], const uint32_t (&a)[4],  \
                                              uint64_t b, int accumulate) {              \
      if constexpr (HEADLAB_WGMMA_DEVICE) {                                              \
        asm volatile(                                                                    \
            "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                 \
            "wgmma.mma_async.sync.aligned.m64n64k16.f32" PTX_TYPES " " HEADLAB_WGMMA_D32 \
            ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"                              \
            : HEADLAB_WGMMA_D32_OPERANDS(d)                                              \
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));      \
      } else {                                                                           \
        __trap();                                                                        \
      }                                                                                  \
    }                                                                                    \
  };
HEADLAB_DEFINE_WGMMA(__nv_bfloat16, ".bf16.bf16")
HEADLAB_DEFINE_WGMMA(__half, ".f16.f16")
#undef HEADLAB_DEFINE_WGMMA

// Columns [64 j, 64 j + 64) of a wider m64 accumulator (keys of a 128-key S, or d columns
// of a d = 128 output), as the m64n64 operand Wgmma takes.
template <int N>
__device__ __forceinline__ float (&Cols64(float (&acc)[N][4], int j))[8][4] {
  return *reinterpret_cast<float(*)[8][4]>(&acc[8 * j][0]);
}

// Stores a warpgroup's 64 x 64 tile held as register A fragments (a[kk] = columns 16 kk ..
// 16 kk + 15 of this warp's 16 rows, mma.sync A layout: registers 0-3 are rows r, r + 8, r,
// r + 8 and 16-byte chunks 2 kk, 2 kk, 2 kk + 1, 2 kk + 1, bytes 4 tq within) into dst[64][64]
// in the 128-byte swizzle, where wgmma can read it back (the backwards' dS^T).
template <typename T>
__device__ __forceinline__ void StoreFragmentsSw128(const uint32_t (&a)[4][4], T* dst, int warp,
                                                    int gr, int tq) {
  unsigned char* bytes = reinterpret_cast<unsigned char*>(dst);
  const int r = warp * 16 + gr;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = r + 8 * (i & 1), chunk = 2 * kk + (i >> 1);
      *reinterpret_cast<uint32_t*>(bytes + row * 128 + ((chunk ^ (row & 7)) << 4) + 4 * tq) =
          a[kk][i];
    }
}

// Issues the async copy of rows [t0, t0 + kRows) of head h (d = 64) into dst[kRows][64] in
// the 128-byte swizzle; rows beyond T are zero-filled.
template <typename T, int kRows, int kThreads>
__device__ __forceinline__ void LoadRowsSw128(const Params& p, const View& v, int b, int h, int t0,
                                              T* dst) {
  static_assert(kRows * 8 % kThreads == 0, "whole chunks per thread");
#pragma unroll
  for (int i = 0; i < kRows * 8 / kThreads; ++i) {  // a fixed trip count: no bounds tests
    const int idx = threadIdx.x + i * kThreads;
    const int r = idx >> 3, j = idx & 7, t = t0 + r;
    const T* src = t < p.T ? At<const T>(v, b, t, h) + j * 8 : reinterpret_cast<const T*>(v.data);
    CpAsync16(dst + r * 64 + ((j ^ (r & 7)) << 3), src, t < p.T ? 16 : 0);
  }
}

}  // namespace internal
}  // namespace kernels
}  // namespace headlab
