// ptx/stmatrix.cuh — stmatrix: fragments to 8x8 b16 matrices in shared memory (sm_90)
//
// Part of the PTX wrappers (csrc/ptx/, one file per instruction family): one __device__ __forceinline__ wrapper
// per instruction, named after its mnemonic and shape, with the exact PTX string and its section of the PTX ISA
// (https://docs.nvidia.com/cuda/parallel-thread-execution/) above it. Kernels call these; raw `asm` appears in
// csrc/ptx/ only. Register signatures follow the ISA's fragment tables: a .b32 register holds two consecutive
// fp16 values (the lower address in the low half).
#pragma once
#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "stmatrix needs sm_90 or newer (ptx/stmatrix.cuh); include it only for sm_90+ targets"
#endif
#define PTX_HAS_STMATRIX 1  // for kernels with a pre-sm_90 fallback

namespace ptx {

// ---------------------------------------------------------------------------------------------------------------
// stmatrix — the inverse of ldmatrix: fragments to 8x8 b16 matrices in shared memory (sm_90 only)
// ISA: 9.7.14.5.16 "Warp-level matrix store instruction: stmatrix"
// https://docs.nvidia.com/cuda/parallel-thread-execution/#warp-level-matrix-instructions-stmatrix
// Guarded: including this file for a pre-sm_90 target is a compile-time error, not a silent fallback. A kernel
// with a fallback before sm_90 includes it only where the instruction exists:
//   #if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
//   #include "ptx/stmatrix.cuh"   // defines PTX_HAS_STMATRIX
//   #endif
// ---------------------------------------------------------------------------------------------------------------

// stmatrix.sync.aligned.m8n8.x1.shared.b16 [addr], {r0};
__device__ __forceinline__ void stmatrix_x1(uint32_t addr, uint32_t r0) {
  asm volatile("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};\n" ::"r"(addr), "r"(r0) : "memory");
}
// stmatrix.sync.aligned.m8n8.x2.shared.b16 [addr], {r0, r1};
__device__ __forceinline__ void stmatrix_x2(uint32_t addr, uint32_t r0, uint32_t r1) {
  asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};\n" ::"r"(addr), "r"(r0), "r"(r1) : "memory");
}
// stmatrix.sync.aligned.m8n8.x4.shared.b16 [addr], {r0, r1, r2, r3};
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}
// stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [addr], {r0};
__device__ __forceinline__ void stmatrix_x1_trans(uint32_t addr, uint32_t r0) {
  asm volatile("stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [%0], {%1};\n" ::"r"(addr), "r"(r0) : "memory");
}
// stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [addr], {r0, r1};
__device__ __forceinline__ void stmatrix_x2_trans(uint32_t addr, uint32_t r0, uint32_t r1) {
  asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};\n" ::"r"(addr), "r"(r0), "r"(r1)
               : "memory");
}
// stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [addr], {r0, r1, r2, r3};
__device__ __forceinline__ void stmatrix_x4_trans(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2,
                                                  uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

}  // namespace ptx
