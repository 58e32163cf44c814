// ptx/mbarrier.cuh — mbarrier: barrier objects in shared memory, with phases
//
// Part of the PTX wrappers (csrc/ptx/, one file per instruction family): one __device__ __forceinline__ wrapper
// per instruction, named after its mnemonic and shape, with the exact PTX string and its section of the PTX ISA
// (https://docs.nvidia.com/cuda/parallel-thread-execution/) above it. Kernels call these; raw `asm` appears in
// csrc/ptx/ only. Register signatures follow the ISA's fragment tables: a .b32 register holds two consecutive
// fp16 values (the lower address in the low half).
#pragma once
#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "mbarrier needs sm_80 or newer (ptx/mbarrier.cuh)"
#endif

namespace ptx {

// ---------------------------------------------------------------------------------------------------------------
// mbarrier — barrier objects in shared memory, with phases (sm_80; try_wait sm_90)
// ISA: 9.7.13.15 "Parallel Synchronization and Communication Instructions: mbarrier"
// https://docs.nvidia.com/cuda/parallel-thread-execution/#parallel-synchronization-and-communication-instructions-mbarrier
// A 64-bit object (8-byte aligned) holding an expected arrival count, a pending count and a phase: when the
// pending count reaches zero the current phase completes, the phase parity flips and the count resets. A thread
// waits for a phase by its parity (0, 1, 0, ...), so a waiter must never fall two phases behind. Arrivals release
// the arriving thread's earlier memory accesses; a completed wait acquires them. `bar` is a shared address
// (smem_u32).
// ---------------------------------------------------------------------------------------------------------------

// mbarrier.init.shared::cta.b64 [bar], count;  — phase 0 pending, `count` arrivals expected per phase. Make the
// initialisation visible (e.g. __syncthreads) before any other thread uses the barrier.
__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

// mbarrier.arrive.shared::cta.b64 state, [bar];  — one arrival (release). The returned phase token is unused.
__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
  asm volatile("{\n .reg .b64 state;\n mbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(bar) : "memory");
}

// Wait until the phase of bar with parity `parity` has completed (acquire), polling in a loop:
//   sm_90: mbarrier.try_wait.parity.shared::cta.b64 p, [bar], parity;  (may suspend the thread a while first)
//   sm_80: mbarrier.test_wait.parity.shared::cta.b64 p, [bar], parity;  (returns at once)
// The labels live in a { } scope, so every inlined copy has its own.
__device__ __forceinline__ void mbarrier_wait_parity(uint32_t bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n .reg .pred ready;\nWAIT:\n mbarrier.try_wait.parity.shared::cta.b64 ready, [%0], %1;\n"
      " @!ready bra WAIT;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#else
  asm volatile(
      "{\n .reg .pred ready;\nWAIT:\n mbarrier.test_wait.parity.shared::cta.b64 ready, [%0], %1;\n"
      " @!ready bra WAIT;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#endif
}

}  // namespace ptx
