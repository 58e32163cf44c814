// blocks/wgmma_tile.cuh — the pieces every Hopper (sm_90a) kernel of the ladder is built from: the shared-memory
// stage a TMA load fills and wgmma reads, the loads of one k-block, the wgmma of one k-block, the tile order and
// the epilogue that stores a warpgroup's accumulators. Kernels (sm90/*.cu) arrange these into their pipelines.
// Every piece takes the element type E of A, B and C (half or __nv_bfloat16) from the storage or the pointers it
// is given: the bytes, boxes and swizzles are the same for both; the wgmma form (.f16 / .bf16), the tensor maps'
// data type and the epilogue's rounding follow E.
#pragma once
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "blocks/common.cuh"
#include "blocks/element.cuh"
#include "hgemm.cuh"
#include "host/launch.h"
#include "host/tensor_map.h"
#include "ptx/barrier.cuh"
#include "ptx/cvta.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/stmatrix.cuh"
#include "ptx/tma.cuh"
#include "ptx/wgmma.cuh"

namespace hopper {

// One k-block is 64 16-bit elements = 128 bytes along K: the widest box row the 128-byte swizzle takes, so every operand row
// of a stage is exactly one swizzle row and every 8 rows one 1024-byte swizzle atom.
constexpr int BK = 64;
constexpr int kWarpgroup = 128;

using tile::cdiv;

// ---- shared memory ------------------------------------------------------------------------------------------
// A stage: A row-major is BM rows of 64 k (K-major; TMA box {64 k, BM rows}); A column-major is BM/64 boxes of
// 64 k-rows x 64 m (M-major; box {64 m, 64 k}), the boxes 8 KB apart. B column-major is BN rows (n) of 64 k
// (K-major; box {64 k, BN rows}); B row-major is BN/64 boxes of 64 k-rows x 64 n (N-major; box {64 n, 64 k}),
// the boxes 8 KB apart. Either way a 64-row slab of A (a warpgroup's) starts 64 x 64 elements after the previous
// one: in the K-major stage 64 rows of 64 k, in the M-major one the next box. Every stage buffer starts 1024-byte
// aligned (the swizzle's atom). E: the element type.
template <typename E, int BM, int BN, int STAGES>
struct SharedStorage {
  static constexpr int kStages = STAGES;
  alignas(1024) E A[STAGES][BM * BK];  // (stage, m, k) or (stage, m / 64, k, m % 64), 128-byte swizzled
  alignas(1024) E B[STAGES][BN * BK];  // (stage, n, k) or (stage, n / 64, k, n % 64), 128-byte swizzled
  alignas(8) uint64_t full[STAGES];    // the stage's bytes landed: 1 arrival (expect_tx) + the TMA bytes
  alignas(8) uint64_t empty[STAGES];   // the stage may be refilled: one arrival per consumer warpgroup
};
static_assert(sizeof(half) == 2 && sizeof(__nv_bfloat16) == 2, "16-bit operands: BK elements are 128 bytes");

// The dynamic shared memory a kernel asks for: the storage plus the slack to align it to 1024 bytes.
template <typename Storage>
constexpr int smem_request() {
  return int(sizeof(Storage)) + 1024;
}

template <typename Storage>
__device__ __forceinline__ Storage& aligned_storage(uint8_t* raw) {
  const uint32_t pad = (1024 - ptx::smem_u32(raw) % 1024) % 1024;
  return *reinterpret_cast<Storage*>(raw + pad);
}

// ---- loads ----------------------------------------------------------------------------------------------------
// The rows of A's TMA box: the tile's BM, or on an output shorter than one tile M rounded up to whole 8-row swizzle
// atoms. A 16-row decode GEMM then moves 2 KB of A per stage instead of 16 KB of zeros (TMA writes a box's
// out-of-bounds rows too), and the wgmma rows past the box read stale shared memory: they only feed output rows
// >= M, which no epilogue stores. Host (the tensor map) and device (the expected bytes) ask the same function.
__host__ __device__ constexpr int a_box_rows(int M, int BM) { return M >= BM ? BM : (M + 7) / 8 * 8; }

// The A rows one stage loads (a_rows = a_box_rows(M, BM)): column-major A comes in whole 64-column boxes (64 m is
// the 128-byte swizzle row), so a short tile's rows round up to 64; row-major A loads a_rows as they are.
template <bool A_COL>
__host__ __device__ constexpr int a_stage_rows(int a_rows) {
  return A_COL ? (a_rows + 63) / 64 * 64 : a_rows;
}

// A's part of a stage, on barrier bar: one box {64 k, a_rows} of row-major A at (k0, m0), or for column-major A
// a_stage_rows / 64 boxes {64 m, 64 k} at (m0 + 64 j, k0), 8 KB apart. The caller expects a_stage_rows<A_COL>(a_rows)
// x BK elements of A.
template <int BM, bool A_COL, typename Storage>
__device__ __forceinline__ void load_a(Storage& ss, int s, const CUtensorMap* tma_a, int m0, int k0, int a_rows,
                                       uint32_t bar) {
  static_assert(!A_COL || BM % 64 == 0, "column-major A is loaded in boxes of 64 rows: BM a multiple of 64");
  if constexpr (A_COL) {
    const int boxes = a_stage_rows<true>(a_rows) / 64;
#pragma unroll
    for (int j = 0; j < BM / 64; ++j)
      if (j < boxes) ptx::tma_load_2d(ptx::smem_u32(ss.A[s] + j * 64 * BK), tma_a, m0 + 64 * j, k0, bar);
  } else {
    ptx::tma_load_2d(ptx::smem_u32(ss.A[s]), tma_a, k0, m0, bar);
  }
}

// One thread announces the stage's bytes on full[s] and issues its TMA boxes (A: a_rows = a_box_rows(M, BM)).
// Boxes past M, N or K read zeros, so edge tiles and the K tail need no other handling.
template <int BM, int BN, bool B_COL, bool A_COL = false, typename Storage>
__device__ __forceinline__ void load_kblock(Storage& ss, int s, const CUtensorMap* tma_a, const CUtensorMap* tma_b,
                                            int m0, int n0, int k0, int a_rows) {
  static_assert(B_COL || BN % 64 == 0, "row-major B is loaded in boxes of 64 columns: BN a multiple of 64");
  const uint32_t bar = ptx::smem_u32(&ss.full[s]);
  ptx::mbarrier_arrive_expect_tx(bar, (a_stage_rows<A_COL>(a_rows) + BN) * BK * int(sizeof(ss.A[0][0])));
  load_a<BM, A_COL>(ss, s, tma_a, m0, k0, a_rows, bar);
  if constexpr (B_COL) {
    ptx::tma_load_2d(ptx::smem_u32(ss.B[s]), tma_b, k0, n0, bar);
  } else {
#pragma unroll
    for (int j = 0; j < BN / 64; ++j)
      ptx::tma_load_2d(ptx::smem_u32(ss.B[s] + j * 64 * BK), tma_b, n0 + 64 * j, k0, bar);
  }
}

// load_kblock for a block of rank `rank` in a cluster of CL blocks whose tiles share their B columns (tiles at the
// same n0, rows m0 apart): its own A box(es), and its 1/CL of the B tile multicast to every block of the cluster
// (.multicast::cluster), which each expect the whole stage's bytes. Column-major B: rows n0 + rank x BN / CL of the
// K-major B tile, one box (BN / CL rows, a multiple of 8: each part starts on a 1024-byte swizzle atom, so the parts
// land where one box of BN rows would put them); row-major B: 64-column boxes rank x BN / 64 / CL onward.
template <int BM, int BN, bool B_COL, bool A_COL, int CL, typename Storage>
__device__ __forceinline__ void load_kblock_multicast(Storage& ss, int s, const CUtensorMap* tma_a,
                                                      const CUtensorMap* tma_b, int m0, int n0, int k0, int a_rows,
                                                      uint32_t rank) {
  static_assert(B_COL ? BN % (8 * CL) == 0 : BN % (64 * CL) == 0, "B's tile splits into whole parts");
  const uint32_t bar = ptx::smem_u32(&ss.full[s]);
  constexpr uint16_t kAll = (1u << CL) - 1;
  ptx::mbarrier_arrive_expect_tx(bar, (a_stage_rows<A_COL>(a_rows) + BN) * BK * int(sizeof(ss.A[0][0])));
  load_a<BM, A_COL>(ss, s, tma_a, m0, k0, a_rows, bar);
  if constexpr (B_COL) {
    constexpr int part = BN / CL;
    ptx::tma_load_2d_multicast(ptx::smem_u32(ss.B[s] + rank * part * BK), tma_b, k0, n0 + int(rank) * part, bar, kAll);
  } else {
#pragma unroll
    for (int jj = 0; jj < BN / 64 / CL; ++jj) {
      const int j = int(rank) * (BN / 64 / CL) + jj;
      ptx::tma_load_2d_multicast(ptx::smem_u32(ss.B[s] + j * 64 * BK), tma_b, n0 + 64 * j, k0, bar, kAll);
    }
  }
}

// The ring's barriers, by one thread before the block's first __syncthreads: full[s] completes on the producer's
// one arrival (with expect_tx) plus the TMA bytes; empty[s] on `empty_arrivals` consumer releases.
template <typename Ring>
__device__ __forceinline__ void init_ring(Ring& ss, int empty_arrivals) {
  for (int s = 0; s < Ring::kStages; ++s) {
    ptx::mbarrier_init(ptx::smem_u32(&ss.full[s]), 1);
    ptx::mbarrier_init(ptx::smem_u32(&ss.empty[s]), empty_arrivals);
  }
}

// The producer's side of the ring for one tile: k-blocks kb0 .. kb1 - 1 of the tile at (m0, n0), each into the
// next stage once its consumers have released it (empty[s], parity phase ^ 1: a fresh barrier passes parity 1).
// s and phase carry over to the next tile.
template <int BM, int BN, bool B_COL, bool A_COL = false, typename Ring>
__device__ __forceinline__ void produce_tile(Ring& ss, const CUtensorMap* tma_a, const CUtensorMap* tma_b, int m0,
                                             int n0, int kb0, int kb1, int a_rows, int& s, uint32_t& phase) {
  for (int kb = kb0; kb < kb1; ++kb) {
    ptx::mbarrier_wait_parity(ptx::smem_u32(&ss.empty[s]), phase ^ 1);
    load_kblock<BM, BN, B_COL, A_COL>(ss, s, tma_a, tma_b, m0, n0, kb * BK, a_rows);
    if (++s == Ring::kStages) s = 0, phase ^= 1;
  }
}

// ---- wgmma ----------------------------------------------------------------------------------------------------
// Accumulators of one warpgroup's 64 x BN slab: fp32 (BN / 2 registers) or fp16 pairs (BN / 4); with MT > 1 a
// warpgroup owns MT such slabs, MT x 64 rows (d[i]: rows 64i..64i+63 of its part of the tile).
template <typename Regs, int MT>
struct SlabRegs {
  using type = Regs[MT];
};
template <typename Regs>
struct SlabRegs<Regs, 1> {
  using type = Regs;
};
template <int BN, Acc ACC, int MT = 1>
struct Accum;
template <int BN, int MT>
struct Accum<BN, Acc::F32, MT> {
  typename SlabRegs<float[BN / 2], MT>::type d;
};
template <int BN, int MT>
struct Accum<BN, Acc::F16, MT> {
  typename SlabRegs<uint32_t[BN / 4], MT>::type d;
};

// The m64nBNk16 wgmma for operands of type E and the accumulators' type: fp32 (fp16 or bf16 operands) or fp16 pairs
// (fp16 operands only: wgmma has no fp16 accumulator for bf16). TRANS_A: A M-major; TRANS_B: B N-major.
template <typename E, int BN, int TRANS_A, int TRANS_B>
__device__ __forceinline__ void wgmma_ss(float (&d)[BN / 2], uint64_t da, uint64_t db, int scale_d) {
  if constexpr (tile::is_bf16<E>) {
    if constexpr (BN == 256) ptx::wgmma_m64n256k16_f32_bf16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
    else if constexpr (BN == 240) ptx::wgmma_m64n240k16_f32_bf16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
    else if constexpr (BN == 232) ptx::wgmma_m64n232k16_f32_bf16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
    else if constexpr (BN == 224) ptx::wgmma_m64n224k16_f32_bf16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
    else if constexpr (BN == 208) ptx::wgmma_m64n208k16_f32_bf16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
    else if constexpr (BN == 192) ptx::wgmma_m64n192k16_f32_bf16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
    else if constexpr (BN == 176) ptx::wgmma_m64n176k16_f32_bf16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
    else if constexpr (BN == 160) ptx::wgmma_m64n160k16_f32_bf16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
    else if constexpr (BN == 152) ptx::wgmma_m64n152k16_f32_bf16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
    else if constexpr (BN == 144) ptx::wgmma_m64n144k16_f32_bf16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
    else if constexpr (BN == 128) ptx::wgmma_m64n128k16_f32_bf16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
    else ptx::wgmma_m64n64k16_f32_bf16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
  } else {
    if constexpr (BN == 256) ptx::wgmma_m64n256k16_f32_f16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
    else if constexpr (BN == 240) ptx::wgmma_m64n240k16_f32_f16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
    else if constexpr (BN == 232) ptx::wgmma_m64n232k16_f32_f16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
    else if constexpr (BN == 224) ptx::wgmma_m64n224k16_f32_f16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
    else if constexpr (BN == 208) ptx::wgmma_m64n208k16_f32_f16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
    else if constexpr (BN == 192) ptx::wgmma_m64n192k16_f32_f16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
    else if constexpr (BN == 176) ptx::wgmma_m64n176k16_f32_f16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
    else if constexpr (BN == 160) ptx::wgmma_m64n160k16_f32_f16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
    else if constexpr (BN == 152) ptx::wgmma_m64n152k16_f32_f16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
    else if constexpr (BN == 144) ptx::wgmma_m64n144k16_f32_f16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
    else if constexpr (BN == 128) ptx::wgmma_m64n128k16_f32_f16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
    else ptx::wgmma_m64n64k16_f32_f16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
  }
}
template <typename E, int BN, int TRANS_A, int TRANS_B>
__device__ __forceinline__ void wgmma_ss(uint32_t (&d)[BN / 4], uint64_t da, uint64_t db, int scale_d) {
  static_assert(std::is_same<E, half>::value, "fp16 accumulation takes fp16 operands only");
  if constexpr (BN == 256) ptx::wgmma_m64n256k16_f16_f16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
  else if constexpr (BN == 240) ptx::wgmma_m64n240k16_f16_f16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
  else if constexpr (BN == 232) ptx::wgmma_m64n232k16_f16_f16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
  else if constexpr (BN == 224) ptx::wgmma_m64n224k16_f16_f16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
  else if constexpr (BN == 208) ptx::wgmma_m64n208k16_f16_f16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
  else if constexpr (BN == 192) ptx::wgmma_m64n192k16_f16_f16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
  else if constexpr (BN == 176) ptx::wgmma_m64n176k16_f16_f16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
  else if constexpr (BN == 160) ptx::wgmma_m64n160k16_f16_f16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
  else if constexpr (BN == 152) ptx::wgmma_m64n152k16_f16_f16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
  else if constexpr (BN == 144) ptx::wgmma_m64n144k16_f16_f16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
  else if constexpr (BN == 128) ptx::wgmma_m64n128k16_f16_f16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
  else ptx::wgmma_m64n64k16_f16_f16_ss<TRANS_A, TRANS_B>(d, da, db, scale_d);
}

// Descriptor strides (bytes). K-major: 8 rows of 128 bytes per atom, atoms back to back (SBO = 1024); a k16 step
// moves the start 32 bytes along the swizzled row. MN-major (B row-major, A column-major): 64 n (m) per 128-byte
// row, k rows 128 bytes apart, atoms of 8 k-rows 1024 bytes apart (SBO), 64-column boxes BK * 128 bytes apart (LBO;
// A's 64-row slab is one box, so LBO goes unused there); a k16 step is 2 atoms.
// (The MN-major roles are CuTe's canonical ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)); with LBO and SBO swapped the
// row-major B results were wrong on the H100, and the exact checks caught it.)
constexpr uint32_t kKMajorSBO = 1024, kNMajorLBO = BK * 128, kNMajorSBO = 1024;

// The descriptor of k16 step kk of a K-major (k_major) or MN-major operand whose stage part starts at smem address
// base (1024-byte aligned).
__device__ __forceinline__ uint64_t kstep_desc(uint32_t base, int kk, bool k_major) {
  return k_major ? ptx::make_smem_desc_sw128(base + kk * 32, 16, kKMajorSBO)
                 : ptx::make_smem_desc_sw128(base + kk * 16 * 128, kNMajorLBO, kNMajorSBO);
}

// The four k16 steps of one k-block for a warpgroup: D(64 x BN) (+)= A_slab(64 x 64) * B(64 x BN). a_slab points
// at the warpgroup's 64 rows of the A stage (K-major, or with A_COL one M-major box); accumulate = false overwrites
// D (a tile's first k-block).
template <int BN, bool B_COL, bool A_COL = false, typename AccRegs, typename E>
__device__ __forceinline__ void mma_kblock(AccRegs& d, const E* a_slab, const E* b, bool accumulate) {
  const uint32_t a0 = ptx::smem_u32(a_slab), b0 = ptx::smem_u32(b);
#pragma unroll
  for (int kk = 0; kk < BK / 16; ++kk) {
    const uint64_t da = kstep_desc(a0, kk, !A_COL), db = kstep_desc(b0, kk, B_COL);
    wgmma_ss<E, BN, A_COL ? 1 : 0, B_COL ? 0 : 1>(d, da, db, (accumulate || kk > 0) ? 1 : 0);
  }
}

// ---- a consumer warpgroup's main loop ----------------------------------------------------------------------------
// All k-blocks of one tile for the warpgroup owning rows slab..slab+63 of the ring's A stages: wait for stage s to
// land (full[s], parity `phase`), issue its four k16 wgmma, keep one group in flight, and hand each stage back with
// release(stage) as soon as the group that read it has completed. s and phase carry over to the next tile.
// MT > 1 (d: MT slabs of Accum<BN, ACC, MT>): the warpgroup owns rows slab..slab + 64 MT - 1 and issues MT x 4
// wgmma per k-block, all reading the same B stage. A_COL: the A stages are M-major (column-major A).
template <int BN, bool B_COL, int MT = 1, bool A_COL = false, typename Ring, typename AccRegs, typename Release>
__device__ __forceinline__ void mma_tile(Ring& ss, AccRegs& d, int slab, int kblocks, int& s, uint32_t& phase,
                                         Release&& release) {
  int prev = -1;
  for (int kb = 0; kb < kblocks; ++kb) {
    ptx::mbarrier_wait_parity(ptx::smem_u32(&ss.full[s]), phase);
    ptx::wgmma_fence();
    if constexpr (MT == 1) {
      mma_kblock<BN, B_COL, A_COL>(d, ss.A[s] + slab * BK, ss.B[s], kb > 0);
    } else {
#pragma unroll
      for (int i = 0; i < MT; ++i)
        mma_kblock<BN, B_COL, A_COL>(d[i], ss.A[s] + (slab + 64 * i) * BK, ss.B[s], kb > 0);
    }
    ptx::wgmma_commit_group();
    ptx::wgmma_wait_group<1>();  // the previous k-block's group is done: its stage may be refilled
    if (prev >= 0) release(prev);
    prev = s;
    if (++s == Ring::kStages) s = 0, phase ^= 1;
  }
  ptx::wgmma_wait_group<0>();
  if constexpr (MT == 1) {
    ptx::fence_operands(d);
  } else {
#pragma unroll
    for (int i = 0; i < MT; ++i) ptx::fence_operands(d[i]);
  }
  release(prev);
}

// The same walk over a tile's k-blocks for a consumer warpgroup whose rows all lie past M (M <= 64 on a 128-row
// tile, or the last band's spare slab): it issues no wgmma and only hands each stage back once it has landed, in the
// order mma_tile would, so the ring's empty barriers still see one arrival per warpgroup and phase. Its accumulators
// are never stored. The other warpgroup then has the tensor cores to itself.
template <typename Ring, typename Release>
__device__ __forceinline__ void pass_tile(Ring& ss, int kblocks, int& s, uint32_t& phase, Release&& release) {
  for (int kb = 0; kb < kblocks; ++kb) {
    ptx::mbarrier_wait_parity(ptx::smem_u32(&ss.full[s]), phase);
    release(s);
    if (++s == Ring::kStages) s = 0, phase ^= 1;
  }
}

// ---- tile order -----------------------------------------------------------------------------------------------
// Tile t of tiles_m x tiles_n in bands of GROUP_M tile-rows walked column by column (tile::grouped_tile): the blocks
// resident at one time share a band's A rows and a few B columns in L2.
template <int GROUP_M>
__device__ __forceinline__ void tile_coords(int t, int tiles_m, int tiles_n, int& tm, int& tn) {
  tile::grouped_tile(t, tiles_m, tiles_n, GROUP_M, tm, tn);
}

// ---- epilogue -------------------------------------------------------------------------------------------------
// The pair of E (fp16 or bf16) a thread holds in 8-column block j, row half h (rows l/4 and l/4 + 8 of its warp's
// 16): columns 8j + 2(l%4) and the next, as one 32-bit word (the fragment in ptx/wgmma.cuh).
template <typename E, int R>
__device__ __forceinline__ uint32_t fragment_pair(const float (&d)[R], int j, int h) {
  return tile::pair_bits<E>(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
}
template <typename E, int R>
__device__ __forceinline__ uint32_t fragment_pair(const uint32_t (&d)[R], int j, int h) {
  static_assert(std::is_same<E, half>::value, "fp16 accumulators hold fp16 pairs");
  return d[2 * j + h];
}

// The same pair as fp32 (split-K partial tiles keep fp32; fp16 accumulators are widened exactly).
template <int R>
__device__ __forceinline__ float2 fragment_float2(const float (&d)[R], int j, int h) {
  return make_float2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
}
template <int R>
__device__ __forceinline__ float2 fragment_float2(const uint32_t (&d)[R], int j, int h) {
  return __half22float2(*reinterpret_cast<const __half2*>(&d[2 * j + h]));
}

// Stores a warpgroup's 64 x BN accumulators at C[row0.., n0..], masked to M x N, straight from registers; `pairs`
// (even ldc, 4-byte aligned C) stores each pair as one 32-bit word. The fallback when C is not TMA-describable.
template <typename E>
__device__ __forceinline__ void store_pair(E* C, int64_t ldc, int M, int N, int row, int col, uint32_t bits,
                                           bool pairs) {
  using Pair = typename tile::Element<E>::Pair;
  if (row >= M) return;
  const Pair v = *reinterpret_cast<const Pair*>(&bits);
  E* p = C + int64_t(row) * ldc + col;
  if (pairs && col + 1 < N) {
    *reinterpret_cast<Pair*>(p) = v;
  } else {
    if (col < N) p[0] = v.x;
    if (col + 1 < N) p[1] = v.y;
  }
}

template <int BN, typename AccRegs, typename E>
__device__ __forceinline__ void store_accumulators(const AccRegs& d, E* C, int64_t ldc, int M, int N, int row0,
                                                   int n0, bool pairs) {
  const int t = threadIdx.x % kWarpgroup, warp = t / 32, lane = t % 32;
  const int r = row0 + warp * 16 + lane / 4;
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    const int c = n0 + 8 * j + 2 * (lane % 4);
    store_pair(C, ldc, M, N, r, c, fragment_pair<E>(d, j, 0), pairs);
    store_pair(C, ldc, M, N, r + 8, c, fragment_pair<E>(d, j, 1), pairs);
  }
}

// ---- epilogue through shared memory and TMA stores ------------------------------------------------------------
// A warpgroup writes its 64 x BN slab EPI_ROWS rows x EPI_COLS columns at a time into a staging buffer, then one
// thread stores it with TMA (rows and columns outside C are dropped). Two layouts, matching C's tensor map
// (make_operands' c_box_cols, c_box_rows):
//   EPI_COLS a multiple of 64 (EPI_ROWS 64): EPI_COLS / 64 boxes of 64 rows x 64 columns, each 128-byte swizzled
//     (16-byte chunk c of row r sits at chunk c ^ (r % 8)): a warp's half2 writes of one fragment column block hit
//     8 rows x 4 lanes in 32 different banks.
//   otherwise (tile widths like 152 that are no whole number of 64-column boxes): one unswizzled box of EPI_ROWS
//     rows x EPI_COLS, rows 2 EPI_COLS bytes apart. At 152 columns (76 words a row: rows 12 banks apart mod 32) a
//     warp's writes are conflict-free too. EPI_ROWS = 32 halves the buffer: the warpgroup's warps 0-1 stage their
//     rows in one round, warps 2-3 in the next.
// Compared with store_pair's 4-byte global stores (8 rows a warp instruction), the LSU sees one shared store per
// fragment pair.
template <typename E, int EPI_COLS, int EPI_ROWS = 64>
struct EpilogueStaging {
  static constexpr bool kSwizzled = EPI_COLS % 64 == 0;
  static constexpr int kBoxCols = kSwizzled ? 64 : EPI_COLS, kRows = EPI_ROWS;  // one TMA store box's columns, rows
  static_assert(EPI_COLS % 8 == 0, "whole 8-column fragment blocks (16 bytes a row) per round");
  static_assert(EPI_ROWS == 64 || (EPI_ROWS == 32 && !kSwizzled), "64 rows, or 32 in the unswizzled layout");
  alignas(1024) E box[EPI_ROWS * EPI_COLS];  // (box, row, kBoxCols columns), swizzled or not as above
};

__host__ __device__ __forceinline__ uint32_t staging_offset(int r, int c) {  // bytes, within 64 x 64 boxes
  const int b = c / 64, cc = c % 64;
  return uint32_t(b * 8192 + r * 128 + (((cc / 8) ^ (r % 8)) * 16) + (cc % 8) * 2);
}

template <int EPI_COLS>
__host__ __device__ __forceinline__ uint32_t staging_offset_of(int r, int c) {  // bytes, either layout
  if constexpr (EPI_COLS % 64 == 0) return staging_offset(r, c);
  return uint32_t((r * EPI_COLS + c) * 2);
}

// Stores accumulators d of a warpgroup (64 x BN at C[row0.., n0..]) through `stage`; `bar_id` is the warpgroup's
// named barrier. Thread 0 of the warpgroup owns the bulk groups: it waits for the previous stores to have read the
// staging buffer before anyone overwrites it, so the last stores of a tile still run while the next tile computes.
template <int BN, int EPI_COLS, int EPI_ROWS, typename AccRegs, typename E>
__device__ __forceinline__ void store_accumulators_tma(const AccRegs& d,
                                                       EpilogueStaging<E, EPI_COLS, EPI_ROWS>& stage,
                                                       const CUtensorMap* tma_c, int row0, int n0, uint32_t bar_id) {
  using Staging = EpilogueStaging<E, EPI_COLS, EPI_ROWS>;
  static_assert(BN % EPI_COLS == 0, "the slab is stored in whole EPI_COLS-column rounds");
  const int t = threadIdx.x % kWarpgroup, warp = t / 32, lane = t % 32;
  const uint32_t base = ptx::smem_u32(stage.box);
  uint8_t* bytes = reinterpret_cast<uint8_t*>(stage.box);
#pragma unroll
  for (int part = 0; part < 64 / EPI_ROWS; ++part) {
    const int r = warp * 16 + lane / 4 - part * EPI_ROWS;  // this thread's row in the staged rows
    const bool mine = r >= 0 && r < EPI_ROWS;                // its warp stages in this row round
#pragma unroll
    for (int round = 0; round < BN / EPI_COLS; ++round) {
      if (t == 0) ptx::bulk_wait_group_read<0>();
      ptx::named_barrier_sync(bar_id, kWarpgroup);
      if (mine) {
#pragma unroll
        for (int jj = 0; jj < EPI_COLS / 8; ++jj) {
          const int j = round * (EPI_COLS / 8) + jj, c = 8 * jj + 2 * (lane % 4);
          *reinterpret_cast<uint32_t*>(bytes + staging_offset_of<EPI_COLS>(r, c)) = fragment_pair<E>(d, j, 0);
          *reinterpret_cast<uint32_t*>(bytes + staging_offset_of<EPI_COLS>(r + 8, c)) = fragment_pair<E>(d, j, 1);
        }
      }
      ptx::fence_proxy_async_shared();  // the generic stores above, read by the TMA engine below
      ptx::named_barrier_sync(bar_id, kWarpgroup);
      if (t == 0) {
#pragma unroll
        for (int b = 0; b < EPI_COLS / Staging::kBoxCols; ++b)
          ptx::tma_store_2d(tma_c, n0 + round * EPI_COLS + Staging::kBoxCols * b, row0 + part * EPI_ROWS,
                            base + b * EPI_ROWS * Staging::kBoxCols * 2);
        ptx::bulk_commit_group();
      }
    }
  }
}

// The same slab stored transposed, for a kernel that computes C^T = B^T A^T (the swapped cut tiles,
// sm90/wgmma_persistent.cu): its tile rows are C's columns and its tile columns C's rows. C's tensor map is C's own
// with a box of EPI_COLS rows x 64 columns, 128-byte swizzled (make_operands' c_transposed); `col0` is the slab's first
// column of C (the kernel's row0), `row0` its first row of C (the kernel's n0). A round stages EPI_COLS rows of C
// (accumulator columns) x the slab's 64 columns of C (accumulator rows): stmatrix .trans writes each 8 x 8 block of
// the fragment transposed, so staged row r (accumulator column r) holds 8 accumulator rows as 16 contiguous bytes.
// Lane l addresses row l % 8 of block l / 8: blocks (j, 0), (j, 1), (j + 1, 0), (j + 1, 1) of an x4, (j, h) being
// 8-column block j's row half h (fragment_pair). The 8 rows of a block sit in 8 different 16-byte chunks (chunk
// c ^ (r % 8)): conflict-free.
template <int BN, int EPI_COLS, int EPI_ROWS, typename AccRegs, typename E>
__device__ __forceinline__ void store_accumulators_tma_t(const AccRegs& d,
                                                         EpilogueStaging<E, EPI_COLS, EPI_ROWS>& stage,
                                                         const CUtensorMap* tma_c, int col0, int row0,
                                                         uint32_t bar_id) {
  static_assert(EPI_ROWS == 64 && BN % EPI_COLS == 0 && EPI_COLS % 8 == 0 && EPI_COLS <= 256,
                "the buffer holds EPI_COLS rows of 64 columns (one box), whole 8-row blocks a round");
  constexpr int kBlocks = EPI_COLS / 8;  // 8-column accumulator blocks a round
  const int t = threadIdx.x % kWarpgroup, warp = t / 32, lane = t % 32;
  const uint32_t base = ptx::smem_u32(stage.box);
  const int half = (lane / 8) % 2, next = lane / 16, r = lane % 8;  // the block this lane addresses, and its row
#pragma unroll
  for (int round = 0; round < BN / EPI_COLS; ++round) {
    if (t == 0) ptx::bulk_wait_group_read<0>();
    ptx::named_barrier_sync(bar_id, kWarpgroup);
#pragma unroll
    for (int jj = 0; jj + 1 < kBlocks; jj += 2) {
      const int j = round * kBlocks + jj;
      ptx::stmatrix_x4_trans(base + staging_offset(8 * (jj + next) + r, warp * 16 + 8 * half),
                             fragment_pair<E>(d, j, 0), fragment_pair<E>(d, j, 1), fragment_pair<E>(d, j + 1, 0),
                             fragment_pair<E>(d, j + 1, 1));
    }
    if constexpr (kBlocks % 2 == 1) {
      const int j = round * kBlocks + kBlocks - 1;
      ptx::stmatrix_x2_trans(base + staging_offset(8 * (kBlocks - 1) + r, warp * 16 + 8 * half),
                             fragment_pair<E>(d, j, 0), fragment_pair<E>(d, j, 1));
    }
    ptx::fence_proxy_async_shared();  // the stmatrix stores above, read by the TMA engine below
    ptx::named_barrier_sync(bar_id, kWarpgroup);
    if (t == 0) {
      ptx::tma_store_2d(tma_c, col0, row0 + round * EPI_COLS, base);
      ptx::bulk_commit_group();
    }
  }
}

// ---- host -----------------------------------------------------------------------------------------------------
// The tensor maps of A (row-major: M x K, box BM x 64, or the rows of a short tile, a_box_rows; column-major: K x M
// rows of M, box 64 k x 64 m) and B (column-major: N x K rows of K, box BN x 64; row-major: K x N, box 64 x 64), and
// whether C takes pair stores; the maps' data type is the operands' element type E.
struct Operands {
  CUtensorMap a, b, c;
  bool pairs;      // C takes 32-bit pair stores
  bool tma_store;  // C is TMA-describable: the epilogue stores 64 x 64 boxes (map c)
};

// b_box_n: the N rows of one column-major B box (default bn; a 2-CTA cluster loads half of B's tile each).
// c_box_cols, c_box_rows: C's store box, EpilogueStaging::kBoxCols and ::kRows (64 columns: 128-byte swizzled;
// else unswizzled). c_transposed: p is a swapped problem (C^T = B^T A^T: p.M is C's columns, p.N its rows), and
// the map is of C itself, N rows x M columns (store_accumulators_tma_t).
template <typename E>
inline cudaError_t make_operands(const GemmArgsOf<E>& p, int bm, int bn, Operands* ops, int b_box_n = 0,
                                 int c_box_cols = 64, int c_box_rows = 64, bool c_transposed = false) {
  if (b_box_n == 0) b_box_n = bn;
  if (p.a_col_major ? (p.sam != 1 && p.M > 1) : (p.sak != 1 && p.K > 1)) return cudaErrorInvalidValue;
  const uint64_t lda = uint64_t(p.a_col_major ? p.sak : p.sam), ldb = uint64_t(p.b_col_major ? p.sbn : p.sbk);
  // a 128-byte-swizzled map of a row-major (rows x cols) matrix of E, leading dimension ld, box_rows x box_cols
  auto map = [](const void* ptr, uint64_t rows, uint64_t cols, uint64_t ld, uint32_t box_rows, uint32_t box_cols,
                CUtensorMap* out) {
    host::TensorMapKey key{ptr, rows, cols, ld, box_rows, box_cols, box_cols == 64};  // 64: 128-byte swizzle
    key.dtype = DTypeOf<E>::value;
    return host::cached_tensor_map(key, out);
  };
  cudaError_t err = p.a_col_major
                        ? map(p.A, uint64_t(p.K), uint64_t(p.M), lda, BK, 64, &ops->a)
                        : map(p.A, uint64_t(p.M), uint64_t(p.K), lda, uint32_t(a_box_rows(p.M, bm)), BK, &ops->a);
  if (err != cudaSuccess) return err;
  err = p.b_col_major ? map(p.B, uint64_t(p.N), uint64_t(p.K), ldb, uint32_t(b_box_n), BK, &ops->b)
                      : map(p.B, uint64_t(p.K), uint64_t(p.N), ldb, BK, 64, &ops->b);
  if (err != cudaSuccess) return err;
  ops->pairs = p.ldc % 2 == 0 && reinterpret_cast<uintptr_t>(p.C) % 4 == 0;
  ops->tma_store = host::tma_describable(p.C, uint64_t(p.ldc)) &&
                   map(p.C, uint64_t(c_transposed ? p.N : p.M), uint64_t(c_transposed ? p.M : p.N), uint64_t(p.ldc),
                       uint32_t(c_box_rows), uint32_t(c_box_cols), &ops->c) == cudaSuccess;
  return cudaSuccess;
}

// A launch configuration for clusters of `cluster` blocks along x; `attr` holds its one attribute.
inline cudaLaunchConfig_t cluster_config(dim3 grid, int threads, int smem, int cluster, cudaStream_t stream,
                                         cudaLaunchAttribute* attr) {
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = unsigned(cluster), attr->val.clusterDim.y = 1, attr->val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = size_t(smem);
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

// Every Hopper kernel takes (tma_a, tma_b, tma_c, C, ldc, M, N, K, pairs), then any arguments of its own (`extra`:
// wgmma_persistent's grid split); those that store from registers ignore tma_c. Launches KERNEL on `grid` blocks of
// `threads` with the dynamic shared memory of Storage, in clusters of `cluster` blocks along x (1: no cluster), and
// reports the launch (tile_m x tile_n, split) to the binding.
template <auto KERNEL, typename Storage, typename E, typename... Extra>
cudaError_t launch(dim3 grid, int threads, int tile_m, int tile_n, const GemmArgsOf<E>& p, const Operands& ops,
                   cudaStream_t stream, LaunchInfo* info, int cluster = 1, int split = 0, Extra... extra) {
  const int smem = smem_request<Storage>();
  const cudaError_t err = tile::prepare_smem(KERNEL, smem, info);  // opt-in above 48 KB, limit checked
  if (err != cudaSuccess) return err;
  if (info) *info = LaunchInfo{grid.x, grid.y, unsigned(threads), smem, info->smem_limit, tile_m, tile_n, split};
  if (cluster == 1) {
    KERNEL<<<grid, threads, smem, stream>>>(ops.a, ops.b, ops.c, p.C, p.ldc, p.M, p.N, p.K, ops.pairs, extra...);
    return cudaGetLastError();
  }
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = cluster_config(grid, threads, smem, cluster, stream, &attr);
  return cudaLaunchKernelEx(&cfg, KERNEL, ops.a, ops.b, ops.c, p.C, p.ldc, p.M, p.N, p.K, ops.pairs, extra...);
}

// ---- tile and split-K choice (wgmma_persistent, wgmma_splitk) ---------------------------------------------------
// 128 x bn tiles, K split into `split` parts (1: none). The estimate: the fraction of SM-rounds the work units
// (tiles x split) fill, times the fraction of the tiles' columns inside N, times the tile's own speed relative to
// 128 x 256 (128 x 128: 0.95, 128 x 64: 0.6; measured on large shapes, docs/design/hopper.md), times 0.97 per
// halving of K (the partial tiles' exchange). On skinny outputs (M or N <= 128) the GEMM streams one operand from
// memory and tile width costs no efficiency there: every width scores speed 1.
// Splitting is considered only where it can pay (measured, docs/design/hopper.md): skinny outputs, or outputs
// whose best unsplit tile leaves half the SMs idle; at 1024^3 or 512 x 4096 x 14336 the unsplit tiles fill the GPU
// and splitting lost 18-60%. A split launch is one wave (the split kernel is not persistent): tiles x split <= the
// blocks that run at once in clusters of that size (wave2, wave4: cudaOccupancyMaxActiveClusters x size; clusters
// stay inside a GPC, so fewer than the SMs), and each part keeps >= 4 k-blocks so its pipeline fills.
// force_bn / force_split (GemmArgs::plan_tile, ::split) pin one; a forced split is cut to the k-blocks there are.
// 128 x 192 (the persistent kernel's fourth tile; the split kernel has none) is a candidate where speed192 > 0, unsplit
// only: it fills whole waves where 128 x 256 leaves part of the last one idle (3072 x 5120: 648 tiles of 128 x 192 are
// 4.9 rounds of 132, 480 of 128 x 256 are 3.6).
// 256 x 152 (the persistent kernel's tall tile, column-major B only) is a candidate where speed_tall > 0, unsplit and
// never on skinny outputs: 3000 x 5000 in 256 x 152 is 396 tiles, exactly 3 rounds of 132 (cuBLAS's tile there),
// where 128 x 256 needs 4 rounds of 120. Its score also counts the rows its 256-row tiles cover past M, against
// the 128-row tiles' (the other candidates share those). kSpeedTall: its speed per output relative to 128 x 256,
// measured (docs/design/hopper.md): 0.98-1.07 on the other shapes measured, 0.94 on
// 3000 x 5000 x 2000's 4,000-byte rows; the lower figure, so that it is taken only where its rounds are fuller.
constexpr double kSpeedTall = 0.94;
constexpr double kSpeed128 = 0.95, kSpeed64 = 0.6;  // 128 x 128 and 128 x 64 (above)
// The cut tiles: 128 x BN and 256 x BN at widths between the powers of two, as cuBLAS cuts its tiles to a shape
// ("What cuBLAS runs where every family here loses", docs/design/hopper.md). wgmma's N goes in steps of 8; these go
// in steps of 16, so that a tile count can land on a whole number of rounds, or N on a whole number of tiles, where
// 256, 192 and 128 cannot. The persistent kernel runs them in one form (fp32 accumulation, A row-major, C stored
// with TMA; B column-major, or row-major where BN is whole 64-column boxes: `cut_menu`), as GemmArgs::plan_tile
// codes kCutFirstCode + i in cut_tile(i) order. speed: per output against 128 x 256 at equal fill, as speeds[] below:
// estimates between the measured 128 x 128, 128 x 192 and 256 x 152 figures above (a sweep of the pinned tiles,
// `python -m compare sweep --ptx-only`, and what its own per-tile figures would choose: docs/design/hopper.md,
// "Cut tiles and the grid split on outputs that are not skinny").
struct CutTile {
  int bm, bn;
  double speed;
};
constexpr int kCutTileCount = 10, kCutFirstCode = 7;
__host__ __device__ constexpr CutTile cut_tile(int i) {  // kCutTiles[i]
  constexpr CutTile kCutTiles[kCutTileCount] = {{128, 144, 0.95},  {128, 160, 0.955}, {128, 176, 0.96},
                                                {128, 208, 0.965}, {128, 224, 0.97},  {128, 240, 0.975},
                                                {256, 128, 0.95},  {256, 144, 0.94},  {256, 160, 0.94},
                                                {256, 176, 0.93}};
  return kCutTiles[i];
}
// Which cut tiles a launch may take: none, those whose B loads are whole 64-column boxes (row-major B), or all.
enum CutMenu : int { kNoCut = 0, kCutWholeBoxes = 1, kCutAll = 2 };
// The swapped cut tiles: the same tiles on the swapped problem C^T = B^T A^T (A' = B^T, B' = A^T), so that a tile's
// rows run along N and its columns, BN at steps of 16, along M: M = 160 in one 160-column row of tiles where 128-row
// tiles take 256 rows. GemmArgs::plan_tile codes kSwapFirstCode + i, in cut_tile(i) order; the kernel stores C
// transposed (store_accumulators_tma_t). One form: fp32 accumulation, A row-major (B' column-major), C stored with
// TMA; A' = B^T is row-major where B is column-major, else read M-major (A_COL). Tiles whose BN is a multiple of 128
// (256 x 128) are not swapped: they would cover M in the steps the 128-row tiles do.
constexpr int kSwapFirstCode = kCutFirstCode + kCutTileCount;
__host__ __device__ constexpr bool swappable(int i) { return cut_tile(i).bn % 128 != 0; }
// The paired swapped tiles: the 128-row swapped cut tiles run in clusters of two blocks whose tiles lie side by side
// along N over the same rows of C, each loading half of the shared A^T box and multicasting it to both (A's L2
// traffic halved). GemmArgs::plan_tile codes kPairFirstCode + i, in cut_tile(i) order; split over the grid as the
// swapped ones are.
constexpr int kPairFirstCode = kSwapFirstCode + kCutTileCount;
__host__ __device__ constexpr bool pairable(int i) { return swappable(i) && cut_tile(i).bm == 128; }
struct Plan {
  int bn, split;
  int bm = 128;
  bool grid = false;   // the K split runs over the grid (choose_grid_split), not a cluster
  double score = 0.0;  // the estimate the plan won with (fill x column coverage x speed)
  int cut = 0;         // a cut tile: its GemmArgs::plan_tile code (kCutFirstCode + its index i, cut_tile(i)), or
                       // swapped (kSwapFirstCode + i)
  double fill = 0.0;   // the share of the SM-rounds its work units fill (choose_plan's plans)
  bool swap = false;   // a swapped cut tile: bm rows of C^T along N, bn columns along M
  bool cluster = false;  // hand the call to wgmma_cluster (128 x 256 tiles in pairs; hopper::model_plan's plans)
  int term = -1;         // hopper::model_plan's plans: the ModelTerm that contributed most to its predicted time
};
__host__ __device__ constexpr Plan choose_plan(int M, int N, int K, int sms, int force_bn = 0, int force_split = 0,
                                               int max_split = 4, int wave2 = 0, int wave4 = 0,
                                               double speed192 = 0.0, double speed_tall = 0.0,
                                               int cut_menu = kNoCut, bool swap = false) {
  const int tiles_m = cdiv(M, 128), kblocks = cdiv(K, BK);
  const bool skinny = M <= 128 || N <= 128;
  const int bns[4] = {256, 192, 128, 64};
  const double speeds[4] = {1.0, speed192, kSpeed128, kSpeed64};
  Plan best{force_bn ? force_bn : 256, 1};
  double best_score = -1.0, unsplit_fill = 0.0;
  for (int split = 1; split <= max_split; split *= 2) {
    if (force_split && split != force_split) continue;
    const long wave = split == 1 ? sms : split == 2 ? (wave2 ? wave2 : sms) : (wave4 ? wave4 : sms);
    if (split > 1 && !force_split && (kblocks < 4 * split || (!skinny && unsplit_fill >= 0.5))) continue;
    for (int i = 0; i < 4; ++i) {
      if (force_bn && bns[i] != force_bn) continue;
      if (bns[i] == 192 && (split > 1 || (!force_bn && (speed192 <= 0.0 || skinny)))) continue;
      const long tiles_n = cdiv(N, bns[i]), units = long(tiles_m) * tiles_n * split;
      if (split > 1 && !force_split && units > wave) continue;
      const long rounds = (units + sms - 1) / sms;
      const double fill = double(units) / double(rounds * sms);
      if (split == 1 && fill > unsplit_fill) unsplit_fill = fill;
      double score = (skinny ? 1.0 : speeds[i]) * fill * double(N) / double(tiles_n * bns[i]);
      for (int s = split; s > 1; s /= 2) score *= 0.97;
      if (score > best_score + 1e-9) best = Plan{bns[i], split}, best_score = score, best.fill = fill;
    }
  }
  if ((force_bn == 152 || (!force_bn && speed_tall > 0.0 && !skinny)) && (!force_split || force_split == 1)) {
    const long tall_m = cdiv(M, 256), tiles_n = cdiv(N, 152), units = tall_m * tiles_n;
    const long rounds = (units + sms - 1) / sms;
    const double fill = double(units) / double(rounds * sms);
    const double score = speed_tall * fill * double(N) / double(tiles_n * 152) * double(tiles_m * 128) /
                         double(tall_m * 256);
    if (force_bn == 152 || score > best_score + 1e-9) best = Plan{152, 1, 256}, best_score = score, best.fill = fill;
  }
  // the cut tiles, unsplit, on outputs that are not skinny; scored as the tall tile (their rows past M counted)
  for (int i = 0; i < kCutTileCount && cut_menu != kNoCut && !force_bn && force_split <= 1 && !skinny; ++i) {
    const CutTile c = cut_tile(i);
    if (cut_menu == kCutWholeBoxes && c.bn % 64 != 0) continue;
    const long cut_m = cdiv(M, c.bm), tiles_n = cdiv(N, c.bn), units = cut_m * tiles_n;
    const long rounds = (units + sms - 1) / sms;
    const double fill = double(units) / double(rounds * sms);
    const double score = c.speed * fill * double(N) / double(tiles_n * c.bn) * double(tiles_m * 128) /
                         double(cut_m * c.bm);
    if (score > best_score + 1e-9) best = Plan{c.bn, 1, c.bm, false, 0.0, kCutFirstCode + i, fill}, best_score = score;
  }
  // the swapped cut tiles (swap: their form holds), unsplit, on outputs that are not skinny: c.bm rows along N,
  // c.bn columns along M; scored as the cut tiles, their columns past M counted against the 128-row tiles' rows
  for (int i = 0; i < kCutTileCount && swap && !force_bn && force_split <= 1 && !skinny; ++i) {
    const CutTile c = cut_tile(i);
    if (!swappable(i)) continue;
    const long tiles_n = cdiv(N, c.bm), swap_m = cdiv(M, c.bn), units = tiles_n * swap_m;
    const long rounds = (units + sms - 1) / sms;
    const double fill = double(units) / double(rounds * sms);
    const double score = c.speed * fill * double(N) / double(tiles_n * c.bm) * double(tiles_m * 128) /
                         double(swap_m * c.bn);
    if (score > best_score + 1e-9)
      best = Plan{c.bn, 1, c.bm, false, 0.0, kSwapFirstCode + i, fill, true}, best_score = score;
  }
  while (best.split > 1 && best.split > kblocks) best.split /= 2;
  best.score = best_score;
  return best;
}
static_assert(choose_plan(4096, 4096, 4096, 132).bn == 256 && choose_plan(4096, 4096, 4096, 132).split == 1 &&
                  choose_plan(16, 4096, 4096, 132, 0, 0, 4, 132, 120).bn == 64 &&
                  choose_plan(16, 4096, 4096, 132, 0, 0, 4, 132, 120).split == 2 &&
                  choose_plan(16, 4096, 4096, 132, 0, 0, 1).bn == 64 &&
                  choose_plan(64, 8192, 8192, 132, 0, 0, 4, 132, 120).bn == 64 &&
                  choose_plan(64, 8192, 8192, 132, 0, 0, 4, 132, 120).split == 1 &&
                  choose_plan(1024, 1024, 1024, 132).split == 1 && choose_plan(128, 8192, 8192, 132).split == 1 &&
                  choose_plan(128, 4096, 4096, 132, 0, 0, 4, 132, 120).split == 2 &&
                  choose_plan(4096, 16, 4096, 132, 0, 0, 4, 132, 120).bn == 64 &&
                  choose_plan(2048, 2048, 2048, 132).split == 1 && choose_plan(8192, 8192, 64, 132).split == 1 &&
                  choose_plan(16, 4096, 8, 132, 0, 4).split == 1 && choose_plan(16, 4096, 128, 132, 0, 4).split == 2 &&
                  choose_plan(3072, 5120, 2048, 132, 0, 0, 4, 0, 0, 0.96).bn == 192 &&
                  choose_plan(4096, 4096, 4096, 132, 0, 0, 4, 0, 0, 0.96).bn == 256 &&
                  choose_plan(8192, 8192, 8192, 132, 0, 0, 4, 0, 0, 0.96).bn == 256 &&
                  choose_plan(8192, 28672, 4096, 132, 0, 0, 4, 0, 0, 0.96).bn == 256 &&
                  choose_plan(16, 4096, 4096, 132, 0, 0, 1, 0, 0, 0.96).bn == 64 &&
                  choose_plan(3000, 5000, 2000, 132, 0, 0, 4, 0, 0, 0.0, kSpeedTall).bm == 256 &&
                  choose_plan(4096, 4096, 4096, 132, 0, 0, 4, 0, 0, 0.0, kSpeedTall).bn == 256 &&
                  choose_plan(8192, 8192, 8192, 132, 0, 0, 4, 0, 0, 0.0, kSpeedTall).bn == 256 &&
                  choose_plan(8192, 28672, 4096, 132, 0, 0, 4, 0, 0, 0.0, kSpeedTall).bn == 256 &&
                  choose_plan(128, 4096, 4096, 132, 0, 0, 4, 132, 120, 0.0, kSpeedTall).bn == 64 &&
                  choose_plan(4096, 4096, 4096, 132, 152).bm == 256 &&
                  choose_plan(4096, 4096, 4096, 132, 0, 0, 4, 0, 0, 0.96, kSpeedTall, kCutAll).cut == 0 &&
                  choose_plan(8192, 8192, 8192, 132, 0, 0, 4, 0, 0, 0.96, kSpeedTall, kCutAll).cut == 0 &&
                  choose_plan(8192, 28672, 4096, 132, 0, 0, 4, 0, 0, 0.96, kSpeedTall, kCutAll).cut == 0 &&
                  choose_plan(8288, 848, 1816, 132, 0, 0, 4, 0, 0, 0.96, kSpeedTall, kCutAll).bn == 144 &&
                  choose_plan(8288, 848, 1816, 132, 0, 0, 4, 0, 0, 0.96, kSpeedTall, kCutAll).cut == kCutFirstCode &&
                  choose_plan(8288, 848, 1816, 132, 0, 0, 4, 0, 0, 0.96, 0.0, kCutWholeBoxes).cut == 0 &&
                  choose_plan(128, 4096, 4096, 132, 0, 0, 4, 132, 120, 0.96, kSpeedTall, kCutAll).cut == 0,
              "worked cases: large outputs keep 128 x 256 whole; a 16-row output splits 64 tiles of 128 x 64 in two "
              "(128 blocks; 128 x 128 in four would need 128 of the 120 blocks that fit); 64 x 8192 (128 tiles of "
              "128 x 64) and 1024^3 fill the GPU unsplit; 128 x 4096 x 4096 (64 tiles) splits; 16 columns take the "
              "narrowest tile; forced splits are cut to the k-blocks; 128 x 192 (speed 0.96) only where 128 x 256 "
              "leaves a round a tenth empty (3072 x 5120: 480 tiles on 132 SMs), never on skinny outputs; 256 x 152 on "
              "3000 x 5000 (3 full rounds) but not on the large squares; GemmArgs::plan_tile forces it; no cut tile on "
              "the large squares or 8192 x 28672, 128 x 144 on 8288 x 848 (65 x 6 = 390 tiles in 3 rounds over 864 "
              "columns, where 128 x 256 covers 1024), which row-major B cannot take; none on skinny outputs");

// ---- split-K over the grid (wgmma_splitk_grid) -----------------------------------------------------------------
// Where even a cluster's split leaves most SMs idle (a 128 x 128 output is two 128 x 64 tiles, 8 blocks in clusters of
// 4; 512 x 512 is 16 tiles of 128 x 128, 64 blocks) and K is long (weight gradients and adapters, whose K is the token
// count), any number of blocks share a tile: S slices of its k-blocks, one block each, the partial tiles added in a
// fixed order through a global fp32 workspace. The plan: 128 x bn tiles, bn the widest of 256 / 128 / 64 that covers N
// with fewer than 64 columns to spare (fewer tiles read A fewer times; the columns past N would be wasted work), and S
// the most slices that keep tiles x S blocks within one wave of `sms` with every slice >= kGridSliceKblocks k-blocks
// (its pipeline fills and drains once per slice). force_bn / force_split pin them; S is cut to the k-blocks there are
// (a slice without k-blocks would only add zeros) and to kGridMaxSplit. wgmma_persistent takes it where its own best
// plan (choose_plan's score) keeps fewer than kGridBelow of the SMs busy (prefer_grid_split).
constexpr int kGridSliceKblocks = 8, kGridMaxSplit = 256;
constexpr double kGridBelow = 0.5;
// The grid split's K parts for bm x bn tiles of C (wgmma_persistent's cut and swapped tiles split over the grid
// inside the persistent kernel): choose_grid_split's count, slices of >= kGridSliceKblocks k-blocks and tiles x S
// within one wave of `sms`, cut to the k-blocks there are and to kGridMaxSplit (compare.sweep.cut_grid_split).
__host__ __device__ constexpr int grid_parts(int M, int N, int K, int sms, int bm, int bn) {
  const int tiles = cdiv(M, bm) * cdiv(N, bn), kblocks = cdiv(K, BK);
  int split = kblocks / kGridSliceKblocks < sms / tiles ? kblocks / kGridSliceKblocks : sms / tiles;
  if (split > kblocks) split = kblocks;
  if (split > kGridMaxSplit) split = kGridMaxSplit;
  return split < 1 ? 1 : split;
}
static_assert(grid_parts(208, 2864, 17744, 132, 208, 128) == 5 && grid_parts(160, 24016, 3048, 132, 160, 128) == 1,
              "worked cases: 23 tiles over 278 k-blocks split in 5; 188 tiles fill the SMs unsplit");
__host__ __device__ constexpr Plan choose_grid_split(int M, int N, int K, int sms, int force_bn = 0,
                                                     int force_split = 0) {
  const int tiles_m = cdiv(M, 128), kblocks = cdiv(K, BK);
  int bn = force_bn;
  const int widths[2] = {256, 128};
  for (int i = 0; i < 2 && !bn; ++i)
    if (cdiv(N, widths[i]) * widths[i] - N < 64) bn = widths[i];
  if (!bn) bn = 64;
  const int tiles = tiles_m * cdiv(N, bn);
  int split = force_split ? force_split : grid_parts(M, N, K, sms, 128, bn);
  if (split > kblocks) split = kblocks;  // a forced count, cut as grid_parts cuts its own
  if (split > kGridMaxSplit) split = kGridMaxSplit;
  if (split < 1) split = 1;
  const long units = long(tiles) * split, rounds = (units + sms - 1) / sms;
  Plan plan{bn, split};
  plan.grid = true;
  plan.score = double(units) / double(rounds * sms) * double(N) / double(cdiv(N, bn) * bn);
  return plan;
}
static_assert(choose_grid_split(128, 128, 131072, 132).bn == 128 &&
                  choose_grid_split(128, 128, 131072, 132).split == 132 &&
                  choose_grid_split(256, 256, 65536, 132).bn == 256 &&
                  choose_grid_split(256, 256, 65536, 132).split == 66 &&
                  choose_grid_split(512, 512, 16384, 132).split == 16 &&
                  choose_grid_split(256, 1024, 32768, 132).split == 16 &&
                  choose_grid_split(100, 16, 400, 132).bn == 64 && choose_grid_split(100, 16, 400, 132).split == 1 &&
                  choose_grid_split(7, 9, 13, 132, 0, 8).split == 1 &&
                  choose_grid_split(7, 9, 200, 132, 0, 8).split == 4,
              "worked cases: 128 x 128 x 131072 in 132 slices of one tile; 256 x 256 x 65536 in 66 slices of two "
              "128 x 256 tiles; 512 x 512 (8 tiles) and 256 x 1024 (8) in 16; 16 columns take 128 x 64 tiles, and 7 "
              "k-blocks no split; forced splits are cut to the k-blocks");

// wgmma_persistent's choice: its own plan (choose_plan, unsplit or split over a cluster), or the grid's split:
//   - the grid's (choose_grid_split's width) where the own plan keeps fewer than kGridBelow of the SMs busy and the
//     grid's split fills more;
//   - on outputs that are not skinny, otherwise, where the own plan leaves SMs idle (fills at most kGridFillBelow
//     of its SM-rounds), the grid's split of each width (256, 128, 64, or force_bn) where it scores above the own
//     plan, scored as choose_plan scores its tiles (the width's speed x the fill of the SMs x the columns inside N)
//     over 1 + kGridFixupK x S / K: the fix-up of S partial tiles (each slice's fp32 partial written, read back and
//     added by the second launch) costs about as much as kGridFixupK more of each slice's K. So a grid split pays
//     where K is long and the own plan's tiles are few (the constants and what they buy: docs/design/hopper.md,
//     "Cut tiles and the grid split on outputs that are not skinny").
constexpr double kGridFixupK = 3200.0, kGridFillBelow = 0.85;
__host__ __device__ constexpr Plan prefer_grid_split(Plan plan, int M, int N, int K, int sms, int force_bn = 0) {
  if (plan.score < kGridBelow) {
    const Plan across = choose_grid_split(M, N, K, sms, force_bn);
    if (across.split > 1 && across.score > plan.score) return across;
  }
  if (M <= 128 || N <= 128 || plan.fill > kGridFillBelow) return plan;
  const int widths[3] = {256, 128, 64};
  const double speeds[3] = {1.0, kSpeed128, kSpeed64};
  Plan best = plan;
  for (int i = 0; i < 3; ++i) {
    if (force_bn && widths[i] != force_bn) continue;
    Plan across = choose_grid_split(M, N, K, sms, widths[i]);
    if (across.split < 2) continue;
    across.score *= speeds[i] / (1.0 + kGridFixupK * across.split / K);
    if (across.score > best.score + 1e-9) best = across;
  }
  return best;
}
static_assert(prefer_grid_split(choose_plan(128, 128, 131072, 132, 0, 0, 4, 132, 120), 128, 128, 131072, 132).grid &&
                  prefer_grid_split(choose_plan(256, 256, 65536, 132, 0, 0, 4, 132, 120), 256, 256, 65536, 132).grid &&
                  prefer_grid_split(choose_plan(512, 512, 16384, 132, 0, 0, 4, 132, 120), 512, 512, 16384, 132).grid &&
                  prefer_grid_split(choose_plan(256, 1024, 32768, 132, 0, 0, 4, 132, 120), 256, 1024, 32768, 132)
                      .grid &&
                  !prefer_grid_split(choose_plan(128, 4096, 4096, 132, 0, 0, 4, 132, 120), 128, 4096, 4096, 132)
                       .grid &&
                  !prefer_grid_split(choose_plan(1, 4096, 4096, 132, 0, 0, 4, 132, 120), 1, 4096, 4096, 132).grid &&
                  !prefer_grid_split(choose_plan(1024, 1024, 1024, 132, 0, 0, 4, 132, 120), 1024, 1024, 1024, 132)
                       .grid &&
                  prefer_grid_split(choose_plan(192, 3232, 16760, 132, 0, 0, 4, 132, 120), 192, 3232, 16760, 132)
                      .grid &&
                  !prefer_grid_split(choose_plan(4096, 4096, 4096, 132, 0, 0, 4, 132, 120), 4096, 4096, 4096, 132)
                       .grid &&
                  !prefer_grid_split(choose_plan(1808, 312, 3872, 132, 0, 0, 4, 132, 120), 1808, 312, 3872, 132)
                       .grid,
              "worked cases: the small outputs with a long K (128 x 128 fills 8 SMs in clusters of 4, 512 x 512 64) "
              "split over the grid; a 128 x 4096 output (128 blocks in clusters of 2), "
              "a decode row and 1024^3 keep their plans; 192 x 3232 x 16760 (102 tiles of 128 x 64) splits over the "
              "grid, 4096^3 and 1808 x 312 x 3872 (a short K: 61 k-blocks) do not");

// Blocks of a persistent grid over `units` work units (tiles, or tile pairs of a cluster) of which at most `slots`
// are resident at once. By default (policy 0 or 2) the fewest blocks that need the same number of rounds,
// cdiv(units, cdiv(units, slots)): the same makespan in whole tiles with every round full (4096^3 in 128 x 256
// tiles: 512 tiles in 4 rounds on 128 blocks rather than 132); what it gained where, measured against one block
// per slot: docs/design/hopper.md. Policy 1: min(units, slots), one block per slot.
constexpr int persistent_blocks(int units, int slots, int policy) {
  return units <= slots ? units : policy == 1 ? slots : cdiv(units, cdiv(units, slots));
}
static_assert(persistent_blocks(512, 132, 0) == 128 && persistent_blocks(2048, 132, 0) == 128 &&
                  persistent_blocks(480, 132, 0) == 120 && persistent_blocks(7168, 132, 0) == 131 &&
                  persistent_blocks(100, 132, 0) == 100 && persistent_blocks(512, 132, 1) == 132,
              "worked cases: 4096^3 and 8192^3 in 128 x 256 tiles run 4 and 16 full rounds on 128 blocks, "
              "3000 x 5000 (480 tiles) 4 on 120, 8192 x 28672 (7168) 55 on 131; fewer tiles than SMs: one each");

inline int sm_count() {
  int dev = 0, n = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
  return n;
}

// Clusters of `cluster` blocks of KERNEL (threads, smem bytes each) that run at once: cudaOccupancyMaxActiveClusters,
// since clusters stay inside a GPC and fewer fit than SMs / cluster. Asked once per device and kernel.
template <auto KERNEL>
inline cudaError_t max_active_clusters(int threads, int smem, int cluster, cudaStream_t stream, int* out) {
  static std::atomic<int> fits[64] = {};
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  *out = dev < 64 ? fits[dev].load(std::memory_order_relaxed) : 0;
  if (*out > 0) return cudaSuccess;
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = cluster_config(dim3(cluster * sm_count()), threads, smem, cluster, stream, &attr);
  err = cudaOccupancyMaxActiveClusters(out, KERNEL, &cfg);
  if (err != cudaSuccess || *out <= 0) return err != cudaSuccess ? err : cudaErrorInvalidConfiguration;
  if (dev < 64) fits[dev].store(*out, std::memory_order_relaxed);
  return cudaSuccess;
}

}  // namespace hopper
