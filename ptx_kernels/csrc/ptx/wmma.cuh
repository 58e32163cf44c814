// ptx/wmma.cuh — wmma.load: the PTX form of nvcuda::wmma::load_matrix_sync, with an immediate offset
//
// Part of the PTX wrappers (csrc/ptx/, one file per instruction family): one __device__ __forceinline__ wrapper
// per instruction, named after its mnemonic and shape, with the exact PTX string and its section of the PTX ISA
// (https://docs.nvidia.com/cuda/parallel-thread-execution/) above it. Kernels call these; raw `asm` appears in
// csrc/ptx/ only. Register signatures follow the ISA's fragment tables: a .b32 register holds two consecutive
// fp16 values (the lower address in the low half).
#pragma once
#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 700
#error "wmma.load needs sm_70 or newer (ptx/wmma.cuh)"
#endif

namespace ptx {

// ---------------------------------------------------------------------------------------------------------------
// wmma.load — the PTX form of nvcuda::wmma::load_matrix_sync for 16x16 fp16 operands in shared memory (sm_70)
// ISA: 9.7.14.4.3 "Warp-level Matrix Load Instruction: wmma.load"
// https://docs.nvidia.com/cuda/parallel-thread-execution/#warp-level-matrix-instructions-wmma-ld
// The fragment is 8 .b32 registers whose layout is unspecified (on sm_80+ ptxas lowers the load to one
// ldmatrix.x4, whose 4 registers it uses twice). Why a wrapper when the C++ API has load_matrix_sync: that call
// compiles to `wmma.load [%r]` with the fragment's offset added in a separate instruction before it, and ptxas
// then adds the lane offsets after it, so every fragment costs two integer instructions; the address form
// [addr + OFF] with an immediate OFF (and an immediate leading dimension LDM) lets ptxas fold OFF into the LDSM.
// The registers are meant for nvcuda::wmma fragments (their x[] array, 16 halves) and wmma::mma_sync.
// ---------------------------------------------------------------------------------------------------------------

// wmma.load.a.sync.aligned.row.m16n16k16.shared.f16 {r0..r7}, [addr + OFF], LDM;   (row-major A, LDM halves)
template <int LDM, int OFF>
__device__ __forceinline__ void wmma_load_a_row_m16n16k16(uint32_t (&r)[8], uint32_t addr) {
  asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.shared.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8 + %9], %10;\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7])
               : "r"(addr), "n"(OFF), "n"(LDM));
}
// wmma.load.b.sync.aligned.{row,col}.m16n16k16.shared.f16 {r0..r7}, [addr + OFF], LDM;   (B row- or column-major)
template <bool COL, int LDM, int OFF>
__device__ __forceinline__ void wmma_load_b_m16n16k16(uint32_t (&r)[8], uint32_t addr) {
  if (COL)
    asm volatile("wmma.load.b.sync.aligned.col.m16n16k16.shared.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8 + %9], %10;\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7])
                 : "r"(addr), "n"(OFF), "n"(LDM));
  else
    asm volatile("wmma.load.b.sync.aligned.row.m16n16k16.shared.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8 + %9], %10;\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7])
                 : "r"(addr), "n"(OFF), "n"(LDM));
}

}  // namespace ptx
