// ptx/cp_async.cuh — cp.async: asynchronous global -> shared copies, their groups and their mbarrier arrival
//
// Part of the PTX wrappers (csrc/ptx/, one file per instruction family): one __device__ __forceinline__ wrapper
// per instruction, named after its mnemonic and shape, with the exact PTX string and its section of the PTX ISA
// (https://docs.nvidia.com/cuda/parallel-thread-execution/) above it. Kernels call these; raw `asm` appears in
// csrc/ptx/ only. Register signatures follow the ISA's fragment tables: a .b32 register holds two consecutive
// fp16 values (the lower address in the low half).
#pragma once
#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "cp.async needs sm_80 or newer (ptx/cp_async.cuh)"
#endif

namespace ptx {

// ---------------------------------------------------------------------------------------------------------------
// cp.async — asynchronous global -> shared copies (sm_80)
// ISA: 9.7.9.25.3.1 "Data Movement and Conversion Instructions: cp.async"
// https://docs.nvidia.com/cuda/parallel-thread-execution/#data-movement-and-conversion-instructions-cp-async
// ---------------------------------------------------------------------------------------------------------------

// cp.async.cg.shared.global [dst], [src], 16, src_bytes;
// Copies src_bytes (0..16) from global and zero-fills the rest of the 16 bytes: the edge form. `.cg` caches in L2
// only (the data is reused from shared memory, not L1). dst and src must be 16-byte aligned.
__device__ __forceinline__ void cp_async_16B(uint32_t dst_smem, const void* src_gmem, uint32_t src_bytes = 16) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst_smem), "l"(src_gmem), "r"(src_bytes)
               : "memory");
}

// cp.async.commit_group;  — closes the group of cp.async issued since the last commit.
// ISA: #data-movement-and-conversion-instructions-cp-async-commit-group
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// cp.async.wait_group N;  — waits until at most N committed groups are still in flight.
// ISA: #data-movement-and-conversion-instructions-cp-async-wait-group
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  static_assert(N >= 0 && N < 8, "cp.async.wait_group takes a small immediate");
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// cp.async.mbarrier.arrive.noinc.shared::cta.b64 [bar];  — one arrival on bar, made once every cp.async this
// thread issued before it has landed in shared memory. .noinc: the arrival counts against the count given at
// init (so a barrier that every thread's copies arrive on is initialised with the thread count).
// ISA: #data-movement-and-conversion-instructions-cp-async-mbarrier-arrive
__device__ __forceinline__ void cp_async_mbarrier_arrive_noinc(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

}  // namespace ptx
