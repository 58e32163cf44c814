// ptx/ldmatrix.cuh — ldmatrix: warp-wide loads of 8x8 b16 matrices into mma fragments
//
// Part of the PTX wrappers (csrc/ptx/, one file per instruction family): one __device__ __forceinline__ wrapper
// per instruction, named after its mnemonic and shape, with the exact PTX string and its section of the PTX ISA
// (https://docs.nvidia.com/cuda/parallel-thread-execution/) above it. Kernels call these; raw `asm` appears in
// csrc/ptx/ only. Register signatures follow the ISA's fragment tables: a .b32 register holds two consecutive
// fp16 values (the lower address in the low half).
#pragma once
#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 750
#error "ldmatrix needs sm_75 or newer (ptx/ldmatrix.cuh)"
#endif

namespace ptx {

// ---------------------------------------------------------------------------------------------------------------
// ldmatrix — warp-wide loads of 8x8 b16 matrices from shared memory into the mma fragment layout (sm_75)
// ISA: 9.7.14.5.15 "Warp-level matrix load instruction: ldmatrix"
// https://docs.nvidia.com/cuda/parallel-thread-execution/#warp-level-matrix-instructions-ldmatrix
// Lanes 8i..8i+7 give the row addresses of matrix i (16 bytes each, 16-byte aligned); lane l receives, for each
// matrix, the pair of elements (row l/4, columns 2(l%4), 2(l%4)+1) — or, with .trans, of the transposed matrix.
// ---------------------------------------------------------------------------------------------------------------

// ldmatrix.sync.aligned.m8n8.x1.shared.b16 {r0}, [addr];   (lanes 0-7 give addresses)
__device__ __forceinline__ void ldmatrix_x1(uint32_t& r0, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r0) : "r"(addr));
}
// ldmatrix.sync.aligned.m8n8.x2.shared.b16 {r0, r1}, [addr];   (lanes 0-15 give addresses)
__device__ __forceinline__ void ldmatrix_x2(uint32_t& r0, uint32_t& r1, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(addr));
}
// ldmatrix.sync.aligned.m8n8.x4.shared.b16 {r0, r1, r2, r3}, [addr];   (all 32 lanes give addresses)
__device__ __forceinline__ void ldmatrix_x4(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
// ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {r0}, [addr];
__device__ __forceinline__ void ldmatrix_x1_trans(uint32_t& r0, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r0) : "r"(addr));
}
// ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {r0, r1}, [addr];
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t& r0, uint32_t& r1, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(addr));
}
// ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {r0, r1, r2, r3}, [addr];
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3,
                                                  uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}

}  // namespace ptx
