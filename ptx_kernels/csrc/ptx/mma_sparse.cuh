// ptx/mma_sparse.cuh — mma.sp::ordered_metadata.m16n8k32: one warp's D[16x8] = A[16x32] * B[32x8] + C with A 2:4 sparse
//
// Part of the PTX wrappers (csrc/ptx/, one file per instruction family): one __device__ __forceinline__ wrapper
// per instruction, named after its mnemonic and shape, with the exact PTX string and its section of the PTX ISA
// (https://docs.nvidia.com/cuda/parallel-thread-execution/) above it. Kernels call these; raw `asm` appears in
// csrc/ptx/ only. Register signatures follow the ISA's fragment tables: a .b32 register holds two consecutive
// fp16 values (the lower address in the low half).
#pragma once
#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "mma.sp.m16n8k32 needs sm_80 or newer (ptx/mma_sparse.cuh)"
#endif

namespace ptx {

// ---------------------------------------------------------------------------------------------------------------
// mma.sp::ordered_metadata.sync.m16n8k32 — sparse A (sm_80; ::ordered_metadata from PTX ISA 8.5)
// ISA: 9.7.14.6 "Multiply-and-Accumulate Instruction: mma.sp / mma.sp::ordered_metadata"
// https://docs.nvidia.com/cuda/parallel-thread-execution/#warp-level-matrix-instructions-mma-sp
// Fragments: 9.7.14.6.2.2 (#warp-level-matrix-fragment-sparse-mma-16832-f16bf16):
//   A: a0..a3 = the compressed 16x16 tile (the two kept elements of each 4-wide chunk, in chunk order) in the dense
//      m16n8k16 A layout;  B: b0, b1 = k 0..15 and b2, b3 = k 16..31, each the m16n8k16 B layout;  C/D: m16n8k16's.
//   e: metadata, 2-bit kept positions per element; lane 4g + 2 SEL + h supplies rows g (bits 0-15) and g + 8
//      (bits 16-31) for K columns 16h..16h+15 (Figure 122); the other lanes' e is ignored.
// SEL: the sparsity selector, an immediate: 0 (threads T0, T1 of each group of four) or 1 (T2, T3).
// ---------------------------------------------------------------------------------------------------------------

// mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 {d0..d3}, {a0..a3}, {b0..b3}, {c0..c3}, e, SEL;
template <int SEL = 0>
__device__ __forceinline__ void mma_sp_m16n8k32_f32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[4],
                                                    const float (&c)[4], uint32_t e) {
  static_assert(SEL == 0 || SEL == 1, "m16n8k32 takes sparsity selector 0 or 1");
  asm volatile(
      "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9, %10, %11}, {%12, %13, %14, %15}, %16, %17;\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "f"(c[0]), "f"(c[1]),
        "f"(c[2]), "f"(c[3]), "r"(e), "n"(SEL));
}

// mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f16.f16.f16.f16 {d0, d1}, {a0..a3}, {b0..b3}, {c0, c1}, e, SEL;
template <int SEL = 0>
__device__ __forceinline__ void mma_sp_m16n8k32_f16(uint32_t (&d)[2], const uint32_t (&a)[4], const uint32_t (&b)[4],
                                                    const uint32_t (&c)[2], uint32_t e) {
  static_assert(SEL == 0 || SEL == 1, "m16n8k32 takes sparsity selector 0 or 1");
  asm volatile(
      "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f16.f16.f16.f16 {%0, %1}, {%2, %3, %4, %5}, "
      "{%6, %7, %8, %9}, {%10, %11}, %12, %13;\n"
      : "=r"(d[0]), "=r"(d[1])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(c[0]), "r"(c[1]),
        "r"(e), "n"(SEL));
}

}  // namespace ptx
