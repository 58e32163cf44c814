// ptx.cuh — one __device__ __forceinline__ wrapper per PTX instruction this project uses.
//
// Kernels call these; raw `asm` appears in this header only. Each wrapper names the instruction and its shape,
// shows the exact PTX string, and links its section of the PTX ISA
// (https://docs.nvidia.com/cuda/parallel-thread-execution/). Register signatures follow the ISA's fragment
// tables: a .b32 register holds two consecutive fp16 values (the lower address in the low half).
#pragma once
#include <cstdint>
#include <cuda_fp16.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "ptx.cuh needs sm_80 or newer (cp.async, ldmatrix, mma.sync.m16n8k16)"
#endif

namespace ptx {

// Shared-memory address of a generic pointer into __shared__, as the 32-bit operand `.shared` instructions take.
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---------------------------------------------------------------------------------------------------------------
// cp.async — asynchronous global -> shared copies (sm_80)
// ISA: 9.7.9.25.3.1 "Data Movement and Conversion Instructions: cp.async"
// https://docs.nvidia.com/cuda/parallel-thread-execution/#data-movement-and-conversion-instructions-cp-async
// ---------------------------------------------------------------------------------------------------------------

// cp.async.cg.shared.global [dst], [src], 16, src_bytes;
// Copies src_bytes (0..16) from global and zero-fills the rest of the 16 bytes: the edge form. `.cg` caches in L2
// only (the data is reused from shared memory, not L1). dst and src must be 16-byte aligned.
__device__ __forceinline__ void cp_async_16B(uint32_t dst_smem, const void* src_gmem, uint32_t src_bytes = 16) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst_smem), "l"(src_gmem), "r"(src_bytes)
               : "memory");
}

// cp.async.commit_group;  — closes the group of cp.async issued since the last commit.
// ISA: #data-movement-and-conversion-instructions-cp-async-commit-group
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// cp.async.wait_group N;  — waits until at most N committed groups are still in flight.
// ISA: #data-movement-and-conversion-instructions-cp-async-wait-group
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  static_assert(N >= 0 && N < 8, "cp.async.wait_group takes a small immediate");
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

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

// cp.async.mbarrier.arrive.noinc.shared::cta.b64 [bar];  — one arrival on bar, made once every cp.async this
// thread issued before it has landed in shared memory. .noinc: the arrival counts against the count given at
// init (so a barrier that every thread's copies arrive on is initialised with the thread count).
// ISA: #data-movement-and-conversion-instructions-cp-async-mbarrier-arrive
__device__ __forceinline__ void cp_async_mbarrier_arrive_noinc(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
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

// ---------------------------------------------------------------------------------------------------------------
// stmatrix — the inverse of ldmatrix: fragments to 8x8 b16 matrices in shared memory (sm_90 only)
// ISA: 9.7.14.5.16 "Warp-level matrix store instruction: stmatrix"
// https://docs.nvidia.com/cuda/parallel-thread-execution/#warp-level-matrix-instructions-stmatrix
// Guarded: instantiating one of these for a pre-sm_90 target is a compile-time error, not a silent fallback.
// ---------------------------------------------------------------------------------------------------------------
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define PTX_HAS_STMATRIX 1
#else
#define PTX_HAS_STMATRIX 0
#endif

// stmatrix.sync.aligned.m8n8.x1.shared.b16 [addr], {r0};
template <int kArchGuard = 0>
__device__ __forceinline__ void stmatrix_x1(uint32_t addr, uint32_t r0) {
#if PTX_HAS_STMATRIX
  asm volatile("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};\n" ::"r"(addr), "r"(r0) : "memory");
#else
  static_assert(kArchGuard != kArchGuard, "stmatrix needs sm_90");
#endif
}
// stmatrix.sync.aligned.m8n8.x2.shared.b16 [addr], {r0, r1};
template <int kArchGuard = 0>
__device__ __forceinline__ void stmatrix_x2(uint32_t addr, uint32_t r0, uint32_t r1) {
#if PTX_HAS_STMATRIX
  asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};\n" ::"r"(addr), "r"(r0), "r"(r1) : "memory");
#else
  static_assert(kArchGuard != kArchGuard, "stmatrix needs sm_90");
#endif
}
// stmatrix.sync.aligned.m8n8.x4.shared.b16 [addr], {r0, r1, r2, r3};
template <int kArchGuard = 0>
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
#if PTX_HAS_STMATRIX
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
#else
  static_assert(kArchGuard != kArchGuard, "stmatrix needs sm_90");
#endif
}
// stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [addr], {r0};
template <int kArchGuard = 0>
__device__ __forceinline__ void stmatrix_x1_trans(uint32_t addr, uint32_t r0) {
#if PTX_HAS_STMATRIX
  asm volatile("stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [%0], {%1};\n" ::"r"(addr), "r"(r0) : "memory");
#else
  static_assert(kArchGuard != kArchGuard, "stmatrix needs sm_90");
#endif
}
// stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [addr], {r0, r1};
template <int kArchGuard = 0>
__device__ __forceinline__ void stmatrix_x2_trans(uint32_t addr, uint32_t r0, uint32_t r1) {
#if PTX_HAS_STMATRIX
  asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};\n" ::"r"(addr), "r"(r0), "r"(r1)
               : "memory");
#else
  static_assert(kArchGuard != kArchGuard, "stmatrix needs sm_90");
#endif
}
// stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [addr], {r0, r1, r2, r3};
template <int kArchGuard = 0>
__device__ __forceinline__ void stmatrix_x4_trans(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2,
                                                  uint32_t r3) {
#if PTX_HAS_STMATRIX
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
#else
  static_assert(kArchGuard != kArchGuard, "stmatrix needs sm_90");
#endif
}

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

// mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {d0,d1}, {a0,a1,a2,a3}, {b0,b1}, {c0,c1};
__device__ __forceinline__ void mma_m16n8k16_f16(uint32_t (&d)[2], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                                 const uint32_t (&c)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%8, %9};\n"
      : "=r"(d[0]), "=r"(d[1])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]));
}

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
