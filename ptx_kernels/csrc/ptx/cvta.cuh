// ptx/cvta.cuh — shared-memory addresses for the `.shared` operands of the other wrappers (any arch)
//
// Part of the PTX wrappers (csrc/ptx/, one file per instruction family): one __device__ __forceinline__ wrapper
// per instruction, named after its mnemonic and shape, with the exact PTX string and its section of the PTX ISA
// (https://docs.nvidia.com/cuda/parallel-thread-execution/) above it. Kernels call these; raw `asm` appears in
// csrc/ptx/ only. Register signatures follow the ISA's fragment tables: a .b32 register holds two consecutive
// fp16 values (the lower address in the low half).
#pragma once
#include <cstdint>

namespace ptx {

// Shared-memory address of a generic pointer into __shared__, as the 32-bit operand `.shared` instructions take.
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

}  // namespace ptx
