// asm_examples.cuh — the seed's inline-PTX lessons as small, tested device helpers (probed by probes.cu).
// Inline asm syntax: asm volatile("template" : outputs : inputs : clobbers); operand constraint letters:
//   "h" = .u16 register, "r" = .u32, "l" = .u64, "f" = .f32, "d" = .f64, "n" = immediate integer.
// ISA: https://docs.nvidia.com/cuda/inline-ptx-assembly/
#pragma once
#include <cstdint>

namespace asm_ex {

// x^3 with a temporary register scoped by braces: { .reg .u32 t; ... } keeps `t` local to this asm block, so
// the block can be inlined many times without clashing names.
__device__ __forceinline__ uint32_t cube(uint32_t x) {
  uint32_t y;
  asm("{\n\t"
      ".reg .u32 t;\n\t"
      "mul.lo.u32 t, %1, %1;\n\t"
      "mul.lo.u32 %0, t, %1;\n\t"
      "}"
      : "=r"(y)
      : "r"(x));
  return y;
}

// A predicated move: y = (a < b) ? a : b, with a predicate register and a guarded instruction (@p).
__device__ __forceinline__ int32_t min_predicated(int32_t a, int32_t b) {
  int32_t y;
  asm("{\n\t"
      ".reg .pred p;\n\t"
      "mov.s32 %0, %2;\n\t"
      "setp.lt.s32 p, %1, %2;\n\t"
      "@p mov.s32 %0, %1;\n\t"
      "}"
      : "=&r"(y)  // early clobber: written before the inputs are last read
      : "r"(a), "r"(b));
  return y;
}

// Special registers. %laneid does not change, but %clock does between reads: `volatile` stops the compiler from
// merging or hoisting the two reads (without it two reads may become one).
__device__ __forceinline__ uint32_t laneid() {
  uint32_t l;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(l));
  return l;
}
__device__ __forceinline__ uint32_t clock32() {
  uint32_t c;
  asm volatile("mov.u32 %0, %%clock;" : "=r"(c));
  return c;
}

// One example per constraint letter.
__device__ __forceinline__ uint16_t add_u16(uint16_t a, uint16_t b) {  // "h"
  uint16_t y;
  asm("add.u16 %0, %1, %2;" : "=h"(y) : "h"(a), "h"(b));
  return y;
}
__device__ __forceinline__ uint64_t add_u64(uint64_t a, uint64_t b) {  // "l"
  uint64_t y;
  asm("add.u64 %0, %1, %2;" : "=l"(y) : "l"(a), "l"(b));
  return y;
}
__device__ __forceinline__ float fma_f32(float a, float b, float c) {  // "f"
  float y;
  asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(y) : "f"(a), "f"(b), "f"(c));
  return y;
}
__device__ __forceinline__ double add_f64(double a, double b) {  // "d"
  double y;
  asm("add.rn.f64 %0, %1, %2;" : "=d"(y) : "d"(a), "d"(b));
  return y;
}
template <int SHIFT>
__device__ __forceinline__ uint32_t shl_imm(uint32_t a) {  // "n": an immediate baked into the instruction
  uint32_t y;
  asm("shl.b32 %0, %1, %2;" : "=r"(y) : "r"(a), "n"(SHIFT));
  return y;
}

// Store with a "memory" clobber: tells the compiler the asm writes memory it cannot see, so loads after it are
// not served from values cached in registers.
__device__ __forceinline__ void store_u32(uint32_t* p, uint32_t v) {
  asm volatile("st.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

}  // namespace asm_ex
