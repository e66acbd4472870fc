// tma_primitives.cuh: the Hopper (sm_90a) pieces a warp-specialised kernel is made of —
// transaction barriers (mbarrier) in shared memory, tensor-memory-accelerator loads
// (cp.async.bulk.tensor) that complete on them, bulk reductions into global memory
// (cp.reduce.async.bulk), named barriers between warpgroups and the
// register reallocation between producer and consumer warpgroups (setmaxnreg).
// PTX ISA 8.x: "mbarrier", "cp.async.bulk.tensor", "bar.sync / bar.arrive", "setmaxnreg".
#pragma once

#include <cstdint>

#include "kernels/wgmma_primitives.cuh"

namespace headlab {
namespace kernels {
namespace internal {

// A transaction barrier: `count` arrivals plus the bytes announced by ArriveExpectTx
// complete a phase; waiters name the phase by its parity (0, 1, 0, ...).
__device__ __forceinline__ void MbarInit(uint64_t* bar, int count) {
#if HEADLAB_WGMMA_DEVICE
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(SmemAddr(bar)), "r"(count)
               : "memory");
#endif
}
// Makes barrier initialisation visible to the async proxy (TMA) before the CTA barrier that
// follows it.
__device__ __forceinline__ void FenceBarrierInit() {
#if HEADLAB_WGMMA_DEVICE
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
// One arrival that also announces `bytes` the TMA loads of this phase will deliver.
__device__ __forceinline__ void MbarArriveExpectTx(uint64_t* bar, uint32_t bytes) {
#if HEADLAB_WGMMA_DEVICE
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(SmemAddr(bar)),
               "r"(bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void MbarArrive(uint64_t* bar) {
#if HEADLAB_WGMMA_DEVICE
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(SmemAddr(bar)) : "memory");
#endif
}
// Blocks until the phase of parity `parity` has completed. A fresh barrier is in phase 0,
// so waiting for parity 1 returns at once (a producer's first wait on an empty slot).
__device__ __forceinline__ void MbarWait(uint64_t* bar, uint32_t parity) {
#if HEADLAB_WGMMA_DEVICE
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, "
        "0, p;\n}\n"
        : "=r"(done)
        : "r"(SmemAddr(bar)), "r"(parity)
        : "memory");
  } while (!done);
#endif
}

// TMA load of one box of a 4-D tensor map at element coordinates (c0, c1, c2, c3) (innermost
// first) into shared memory at dst; completes `bytes` of `bar`'s transaction count. The map
// must live in kernel parameters (__grid_constant__) or global memory.
__device__ __forceinline__ void TmaLoad4d(void* dst, const void* tensor_map, uint64_t* bar, int c0,
                                          int c1, int c2, int c3) {
#if HEADLAB_WGMMA_DEVICE
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(SmemAddr(dst)),
      "l"(reinterpret_cast<uint64_t>(tensor_map)), "r"(SmemAddr(bar)), "r"(c0), "r"(c1), "r"(c2),
      "r"(c3)
      : "memory");
#endif
}

// TMA reduction of one box of shared memory at src (laid out as the map's box, in its
// swizzle) into a 4-D tensor map at element coordinates (c0, c1, c2, c3): dst += src elementwise,
// done by the TMA unit in L2; rows past the tensor's bounds are left out. Completes in the
// issuing thread's bulk group.
__device__ __forceinline__ void TmaReduceAdd4d(const void* tensor_map, const void* src, int c0,
                                               int c1, int c2, int c3) {
#if HEADLAB_WGMMA_DEVICE
  asm volatile(
      "cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4, "
      "%5}], [%1];\n" ::"l"(reinterpret_cast<uint64_t>(tensor_map)),
      "r"(SmemAddr(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
#endif
}

// Bulk reduction of `bytes` (a multiple of 16, both addresses 16-byte aligned) fp32 values
// from shared memory into global memory: dst[i] += src[i], done by the TMA unit in L2
// instead of one atomic per element. Completes in the issuing thread's bulk group.
__device__ __forceinline__ void BulkReduceAddF32(float* dst, const float* src, uint32_t bytes) {
#if HEADLAB_WGMMA_DEVICE
  asm volatile(
      "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst),
      "r"(SmemAddr(src)), "r"(bytes)
      : "memory");
#endif
}
__device__ __forceinline__ void BulkCommit() {
#if HEADLAB_WGMMA_DEVICE
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}
// Blocks until at most N of this thread's bulk groups still read their shared-memory source.
template <int N>
__device__ __forceinline__ void BulkWaitRead() {
#if HEADLAB_WGMMA_DEVICE
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
#endif
}

// Blocks until all of this thread's bulk groups have completed (their writes performed).
__device__ __forceinline__ void BulkWaitAll() {
#if HEADLAB_WGMMA_DEVICE
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
#endif
}

// Named barriers (ids 1..15; 0 is __syncthreads): Sync blocks until `threads` threads have
// arrived or synced on `id`; Arrive counts this thread without waiting.
__device__ __forceinline__ void NamedBarrierSync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void NamedBarrierArrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Register reallocation between warpgroups (every warp of the warpgroup executes it).
template <int kRegs>
__device__ __forceinline__ void SetMaxRegsDec() {
#if HEADLAB_WGMMA_DEVICE
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}
template <int kRegs>
__device__ __forceinline__ void SetMaxRegsInc() {
#if HEADLAB_WGMMA_DEVICE
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}

}  // namespace internal
}  // namespace kernels
}  // namespace headlab
