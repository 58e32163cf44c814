// ptx/tma.cuh — the Tensor Memory Accelerator: bulk tensor copies between global and shared memory, the
// mbarrier transaction count they complete on, and the proxy fence between generic and async accesses (sm_90).
//
// One __device__ __forceinline__ wrapper per PTX instruction, with its exact PTX string and its PTX ISA section
// (https://docs.nvidia.com/cuda/parallel-thread-execution/). A tensor map (CUtensorMap, 128 bytes, built on the host
// by cuTensorMapEncodeTiled: host/tensor_map.h) describes the global tensor, the box one copy moves and the
// shared-memory swizzle; kernels take it as a `const __grid_constant__ CUtensorMap` parameter and pass its address.
// Coordinates are in elements, innermost first, and may lie partly or wholly outside the tensor: those elements
// are read as zeros, and stores to them are dropped — the edge handling of every Hopper kernel here.
#pragma once
#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "ptx/tma.cuh needs sm_90 or newer (cp.async.bulk.tensor, mbarrier transaction counts)"
#endif

namespace ptx {

// ---------------------------------------------------------------------------------------------------------------
// mbarrier transaction counts
// ISA: 9.7.13.15.11 "mbarrier.expect_tx" / 9.7.13.15.12 "mbarrier.arrive"
// https://docs.nvidia.com/cuda/parallel-thread-execution/#parallel-synchronization-and-communication-instructions-mbarrier-arrive
// A phase completes when its arrivals are in AND the bytes it expects have landed: the thread that issues a
// stage's copies arrives once and announces the stage's bytes; each copy's completion counts its bytes down (a
// box partly outside the tensor still delivers every byte of the box, the zeros included).
// ---------------------------------------------------------------------------------------------------------------

// mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], bytes;
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

// ---------------------------------------------------------------------------------------------------------------
// cp.async.bulk.tensor — one box between global and shared memory, issued by one thread
// ISA: 9.7.9.25.5.1 "Data Movement and Conversion Instructions: cp.async.bulk.tensor"
// https://docs.nvidia.com/cuda/parallel-thread-execution/#data-movement-and-conversion-instructions-cp-async-bulk-tensor
// ---------------------------------------------------------------------------------------------------------------

// cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [dst], [tmap, {c0, c1}], [bar];
// Loads the box at (c0 innermost, c1) into shared memory at dst (1024-byte aligned for the 128-byte swizzle) and
// counts its bytes down on bar.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void* tmap, int c0, int c1, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
      ::"r"(dst), "l"(tmap), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

// cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster
//     [dst], [tmap, {c0, c1}], [bar], cta_mask;
// One load delivered to every CTA of the cluster whose bit is set in cta_mask, at the same shared offset dst, each
// counting the bytes down on its own mbarrier at offset bar: two CTAs that need the same box read it from L2 once.
__device__ __forceinline__ void tma_load_2d_multicast(uint32_t dst, const void* tmap, int c0, int c1, uint32_t bar,
                                                      uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;\n"
      ::"r"(dst), "l"(tmap), "r"(c0), "r"(c1), "r"(bar), "h"(cta_mask)
      : "memory");
}

// cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [tmap, {c0, c1}], [src];
// Stores the box at src to (c0, c1); elements outside the tensor are not written. Completion: bulk groups below.
__device__ __forceinline__ void tma_store_2d(const void* tmap, int c0, int c1, uint32_t src) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];\n"
               ::"l"(tmap), "r"(c0), "r"(c1), "r"(src)
               : "memory");
}

// cp.async.bulk.commit_group;  — closes the group of bulk stores issued by this thread since the last commit.
// ISA: #data-movement-and-conversion-instructions-cp-async-bulk-commit-group
__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }

// cp.async.bulk.wait_group.read N;  — waits until at most N bulk groups still read their shared-memory source.
// ISA: #data-movement-and-conversion-instructions-cp-async-bulk-wait-group
template <int N>
__device__ __forceinline__ void bulk_wait_group_read() {
  static_assert(N >= 0 && N < 8, "cp.async.bulk.wait_group takes a small immediate");
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}

// prefetch.tensormap [tmap];  — pulls the 128-byte tensor map into the cache before the first copy uses it.
// ISA: #data-movement-and-conversion-instructions-prefetch-prefetchu
__device__ __forceinline__ void prefetch_tensormap(const void* tmap) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(tmap) : "memory");
}

// ---------------------------------------------------------------------------------------------------------------
// fence.proxy.async — order generic-proxy shared-memory accesses (st.shared, stmatrix) against the async proxy
// (TMA, wgmma) that reads the same bytes next
// ISA: 9.7.13.4 "Parallel Synchronization and Communication Instructions: membar / fence"
// https://docs.nvidia.com/cuda/parallel-thread-execution/#parallel-synchronization-and-communication-instructions-membar
// ---------------------------------------------------------------------------------------------------------------

// fence.proxy.async.shared::cta;  — each writing thread, before the barrier that hands the bytes to a TMA store.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

}  // namespace ptx
