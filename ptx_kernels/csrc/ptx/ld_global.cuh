// ptx/ld_global.cuh — ld.global.nc: loads of read-only global memory straight into registers, 16 bytes or one
// element a thread, with the cache hints of an operand streamed once and of one read again by every warp
//
// Part of the PTX wrappers (csrc/ptx/, one file per instruction family): one __device__ __forceinline__ wrapper
// per instruction, named after its mnemonic and shape, with the exact PTX string and its section of the PTX ISA
// (https://docs.nvidia.com/cuda/parallel-thread-execution/) above it. Kernels call these; raw `asm` appears in
// csrc/ptx/ only. Register signatures follow the ISA's fragment tables: a .b32 register holds two consecutive
// fp16 values (the lower address in the low half).
#pragma once
#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "ld.global's L2::256B prefetch hint needs sm_80 or newer (ptx/ld_global.cuh)"
#endif

namespace ptx {

// ---------------------------------------------------------------------------------------------------------------
// ld.global.nc — loads through the non-coherent (read-only) path; the data must not change while the kernel runs
// ISA: 9.7.9.9 "Data Movement and Conversion Instructions: ld.global.nc"
// https://docs.nvidia.com/cuda/parallel-thread-execution/#data-movement-and-conversion-instructions-ld-global-nc
// Cache hints (9.7.9.8 "ld"): .L1::no_allocate keeps the line out of L1 (data read once: it would only evict what
// other warps read again); .L2::256B asks L2 to fetch the whole 256-byte block around the address (a hint: it
// never faults, past the end of an allocation included).
// ---------------------------------------------------------------------------------------------------------------

// ld.global.nc.L1::no_allocate.L2::256B.v4.b32 {r0, r1, r2, r3}, [addr];   (addr 16-byte aligned)
__device__ __forceinline__ uint4 ld_global_nc_na_v4_b32(const void* addr) {
  uint4 r;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(addr));
  return r;
}

// ld.global.nc.v4.b32 {r0, r1, r2, r3}, [addr];   (addr 16-byte aligned; cached in L1: read again by other warps)
__device__ __forceinline__ uint4 ld_global_nc_v4_b32(const void* addr) {
  uint4 r;
  asm("ld.global.nc.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(addr));
  return r;
}

// ld.global.nc.v2.b32 {r0, r1}, [addr];   (addr 8-byte aligned)
__device__ __forceinline__ uint2 ld_global_nc_v2_b32(const void* addr) {
  uint2 r;
  asm("ld.global.nc.v2.b32 {%0, %1}, [%2];\n" : "=r"(r.x), "=r"(r.y) : "l"(addr));
  return r;
}

// ld.global.nc.b32 r, [addr];   (addr 4-byte aligned)
__device__ __forceinline__ uint32_t ld_global_nc_b32(const void* addr) {
  uint32_t r;
  asm("ld.global.nc.b32 %0, [%1];\n" : "=r"(r) : "l"(addr));
  return r;
}

// ld.global.nc.b16 r, [addr];   (one 16-bit element, in the low half of a 32-bit register, the high half zero)
__device__ __forceinline__ uint32_t ld_global_nc_b16(const void* addr) {
  unsigned short r;
  asm("ld.global.nc.b16 %0, [%1];\n" : "=h"(r) : "l"(addr));
  return r;
}

}  // namespace ptx
