// ptx/barrier.cuh — named barriers: a barrier for a subset of a block's warps (sm_70+).
//
// One __device__ __forceinline__ wrapper per PTX instruction, with its exact PTX string and its PTX ISA section
// (https://docs.nvidia.com/cuda/parallel-thread-execution/).
#pragma once
#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 700
#error "ptx/barrier.cuh needs sm_70 or newer (bar.sync with a thread count)"
#endif

namespace ptx {

// bar.sync id, count;  — waits until `count` threads (a multiple of 32) have arrived at barrier `id` (1-15; 0 is
// __syncthreads'). A warpgroup syncs its own 128 threads this way while the block's other warpgroups run on.
// ISA: 9.7.13.1 "Parallel Synchronization and Communication Instructions: bar, barrier"
// https://docs.nvidia.com/cuda/parallel-thread-execution/#parallel-synchronization-and-communication-instructions-bar
__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

}  // namespace ptx
