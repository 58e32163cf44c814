// ptx/flag.cuh — a 64-bit flag in global memory that one block raises and another waits for (sm_70+).
//
// One __device__ __forceinline__ wrapper per PTX instruction, with its exact PTX string and its PTX ISA section
// (https://docs.nvidia.com/cuda/parallel-thread-execution/). The pair gives release/acquire order at GPU scope:
// writes a thread made (or, through a bar.sync before it, its block-mates made) before st.release are visible to a
// thread of another block after its ld.acquire has read the value stored (ISA 8, "Memory Consistency Model").
#pragma once
#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 700
#error "ptx/flag.cuh needs sm_70 or newer (ld.acquire / st.release)"
#endif

namespace ptx {

// st.release.gpu.global.u64 [addr], value;
// ISA: 9.7.9.10 "Data Movement and Conversion Instructions: st"
// https://docs.nvidia.com/cuda/parallel-thread-execution/#data-movement-and-conversion-instructions-st
__device__ __forceinline__ void st_release_gpu(uint64_t* addr, uint64_t value) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;\n" ::"l"(addr), "l"(value) : "memory");
}

// ld.acquire.gpu.global.u64 value, [addr];
// ISA: 9.7.9.8 "Data Movement and Conversion Instructions: ld"
// https://docs.nvidia.com/cuda/parallel-thread-execution/#data-movement-and-conversion-instructions-ld
__device__ __forceinline__ uint64_t ld_acquire_gpu(const uint64_t* addr) {
  uint64_t v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];\n" : "=l"(v) : "l"(addr) : "memory");
  return v;
}

// nanosleep.u32 ns;  — suspends the thread for about `ns` nanoseconds (a polite spin-wait).
// ISA: 9.7.19.2 "Miscellaneous Instructions: nanosleep"
// https://docs.nvidia.com/cuda/parallel-thread-execution/#miscellaneous-instructions-nanosleep
__device__ __forceinline__ void nanosleep(uint32_t ns) { asm volatile("nanosleep.u32 %0;\n" ::"r"(ns)); }

}  // namespace ptx
