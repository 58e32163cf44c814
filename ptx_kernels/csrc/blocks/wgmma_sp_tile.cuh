// blocks/wgmma_sp_tile.cuh — the 2:4 sparse stage of the Hopper ladder (sm_90a): how a stage of compressed A, its
// metadata and B sit in shared memory, and the wgmma.mma_async.sp of one stage. The kernel (sm90/wgmma_sp.cu), its
// instruction ceiling (lab/wgmma_sp_ceiling.cu) and the probe that checks the metadata and descriptor model on the
// GPU (lab/wgmma_sp_probe.cu) all issue their MMAs through mma_stage, so the probe tests the kernel's addressing.
//
// A stage covers 64 dense K (hopper::BK), two k32 steps:
//   A: BM rows of 32 compressed halves = 64 bytes, 64-byte swizzled (16-byte chunk c of row r at c ^ ((r / 2) % 4):
//      TMA's CU_TENSOR_MAP_SWIZZLE_64B), read through 64-byte-swizzle descriptors (SBO 512: the next 8 rows); step j
//      starts 32 j bytes into the rows, as a dense k16 step does in a 128-byte row.
//   metadata: (k32 step, 16-row block, word) 32-bit words in the lanes' order (ptx_kernels/sparse.py): lane 4g + h
//      of the warp owning a row block passes word 2g + h (selector 0; with selector 1 lanes 4g + 2 + h pass them).
//   B: hopper::SharedStorage's stage (K-major 128-byte rows of 64 k, or N-major boxes of 64 n); step j reads 32 k,
//      64 bytes into a K-major row or 4 atoms of 8 k-rows into an N-major box.
#pragma once
#include "blocks/wgmma_tile.cuh"
#include "ptx/wgmma_sparse.cuh"

namespace hopper_sp {

constexpr int BKC = hopper::BK / 2;      // compressed halves per row of a stage: 32 = one 64-byte swizzle row
constexpr int KSTEPS = hopper::BK / 32;  // wgmma.sp k32 steps per stage
constexpr uint32_t kSw64SBO = 512;       // 8 rows x 64 bytes: the 64-byte swizzle's atom
constexpr uint32_t kValidMeta = 0x44444444u;  // every chunk keeps positions 0 and 1: a valid word for rows no one reads
static_assert(BKC * 2 == 64, "a compressed A row of a stage is one 64-byte swizzle row");

// Byte offset of compressed element (r, c) (c < 32) of an A stage, and of B element (n, k) of a K-major B stage
// (the 128-byte swizzle of hopper::SharedStorage): where the TMA boxes put them.
__host__ __device__ constexpr uint32_t a_offset(int r, int c) {
  return uint32_t(r * 64 + (((c / 8) ^ ((r / 2) % 4)) * 16) + (c % 8) * 2);
}
__host__ __device__ constexpr uint32_t b_kmajor_offset(int n, int k) {
  return uint32_t(n * 128 + (((k / 8) ^ (n % 8)) * 16) + (k % 8) * 2);
}
// B row-major: boxes of 64 n x 64 k-rows, 8 KB apart, each k-row 128 bytes of 64 n, 128-byte swizzled.
__host__ __device__ constexpr uint32_t b_nmajor_offset(int n, int k) {
  return uint32_t((n / 64) * 8192 + k * 128 + ((((n % 64) / 8) ^ (k % 8)) * 16) + (n % 8) * 2);
}

template <int TRANS_B, int SEL>
__device__ __forceinline__ void sparse_wgmma(float (&d)[128], uint64_t da, uint64_t db, uint32_t e, int scale_d) {
  ptx::wgmma_sp_m64n256k32_f32_f16_ss<TRANS_B, SEL>(d, da, db, e, scale_d);
}
template <int TRANS_B, int SEL>
__device__ __forceinline__ void sparse_wgmma(uint32_t (&d)[64], uint64_t da, uint64_t db, uint32_t e, int scale_d) {
  ptx::wgmma_sp_m64n256k32_f16_f16_ss<TRANS_B, SEL>(d, da, db, e, scale_d);
}

// The two k32 steps of one stage for a warpgroup: D(64 x 256) (+)= A(64 x 64, 2:4) * B(64 x 256). a_slab: the
// warpgroup's 64 compressed rows (512-byte aligned); e: its lanes' metadata registers of the two steps; first:
// overwrite D. The caller fences (wgmma.fence) before and commits after.
template <bool B_COL, int SEL = 0, typename AccRegs>
__device__ __forceinline__ void mma_stage(AccRegs& d, const half* a_slab, const half* b, const uint32_t (&e)[KSTEPS],
                                          bool first) {
  const uint32_t a0 = ptx::smem_u32(a_slab), b0 = ptx::smem_u32(b);
#pragma unroll
  for (int j = 0; j < KSTEPS; ++j) {
    const uint64_t da = ptx::make_smem_desc_sw64(a0 + j * 32, kSw64SBO);
    const uint64_t db = B_COL ? ptx::make_smem_desc_sw128(b0 + j * 64, 16, hopper::kKMajorSBO)
                              : ptx::make_smem_desc_sw128(b0 + j * 32 * 128, hopper::kNMajorLBO, hopper::kNMajorSBO);
    sparse_wgmma<B_COL ? 0 : 1, SEL>(d, da, db, e[j], (first && j == 0) ? 0 : 1);
  }
}

}  // namespace hopper_sp
