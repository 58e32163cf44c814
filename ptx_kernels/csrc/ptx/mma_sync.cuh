// ptx/mma_sync.cuh — mma.sync.m16n8k16: one warp's D[16x8] = A[16x16] * B[16x8] + C
//
// Part of the PTX wrappers (csrc/ptx/, one file per instruction family): one __device__ __forceinline__ wrapper
// per instruction, named after its mnemonic and shape, with the exact PTX string and its section of the PTX ISA
// (https://docs.nvidia.com/cuda/parallel-thread-execution/) above it. Kernels call these; raw `asm` appears in
// csrc/ptx/ only. Register signatures follow the ISA's fragment tables: a .b32 register holds two consecutive
// fp16 (or bf16) values (the lower address in the low half). Names: mma_<shape>_<accumulator>[_<inputs>], the inputs
// fp16 unless named (CuTe's SM80_16x8x16_F32F16F16F32_TN / SM80_16x8x16_F32BF16BF16F32_TN).
#pragma once
#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "mma.sync.m16n8k16 needs sm_80 or newer (ptx/mma_sync.cuh)"
#endif

namespace ptx {

// ---------------------------------------------------------------------------------------------------------------
// mma.sync.m16n8k16 — one warp computes D[16x8] = A[16x16] * B[16x8] + C (sm_80)
// ISA: 9.7.14.5.8 "Matrix Fragments for mma.m16n8k16 with floating point type"
// https://docs.nvidia.com/cuda/parallel-thread-execution/#warp-level-matrix-fragment-mma-16816-float
// A (row): a0..a3, each two fp16; B (col): b0, b1; with groupID = lane>>2, tig = lane%4:
//   a0: (g, 2t..2t+1)  a1: (g+8, 2t..)  a2: (g, 2t+8..)  a3: (g+8, 2t+8..)   b0: (k=2t..2t+1, n=g)  b1: (k=2t+8.., g)
//   C/D fp32: c0,c1: (g, 2t..2t+1)  c2,c3: (g+8, 2t..2t+1);  fp16: d0 = (g, 2t..2t+1), d1 = (g+8, 2t..2t+1)
// ---------------------------------------------------------------------------------------------------------------

// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {d0,d1,d2,d3}, {a0,a1,a2,a3}, {b0,b1}, {c0,c1,c2,c3};
__device__ __forceinline__ void mma_m16n8k16_f32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                                 const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
        "f"(c[3]));
}

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {d0,d1,d2,d3}, {a0,a1,a2,a3}, {b0,b1}, {c0,c1,c2,c3};
// bf16 A and B (the same fragment maps: two bf16 per register), fp32 accumulators; bf16 has no other accumulation.
// ISA: 9.7.14.5.14 "Warp-level Matrix Multiply-and-Accumulate Instruction: mma" (.bf16 needs sm_80)
// https://docs.nvidia.com/cuda/parallel-thread-execution/#warp-level-matrix-instructions-mma
__device__ __forceinline__ void mma_m16n8k16_f32_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                                      const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
        "f"(c[3]));
}

// mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {d0,d1}, {a0,a1,a2,a3}, {b0,b1}, {c0,c1};
__device__ __forceinline__ void mma_m16n8k16_f16(uint32_t (&d)[2], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                                 const uint32_t (&c)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%8, %9};\n"
      : "=r"(d[0]), "=r"(d[1])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]));
}

}  // namespace ptx
