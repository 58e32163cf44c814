// wgmma_sp.cu — the Hopper ladder with A 2:4 sparse: wgmma.mma_async.sp m64n256k32 does a dense k32 step's work
// from half of A (the two kept elements of every 4-wide chunk along K) and one 32-bit metadata register a thread.
//
// The pipeline is wgmma_persistent.cu's: one block per SM walks the 128 x 256 output tiles in grouped order; a
// producer warpgroup (setmaxnreg.dec to 40) has one thread issue the TMA loads of each k-block into a ring of
// STAGES stages on full/empty mbarriers; two consumer warpgroups (setmaxnreg.inc to 232) each own 64 rows of the
// tile, keep one wgmma group in flight and release a stage as soon as the group that read it has completed; the
// epilogue stores through swizzled shared memory with TMA while the next tile's loads run. On large problems the
// blocks run in clusters of two on tile rows 2p, 2p + 1 of one tile column, each loading half of B and multicasting
// it to both (wgmma_cluster.cu's scheme): a third less L2 traffic per pair of tiles.
//
// What sparsity changes (blocks/wgmma_sp_tile.cuh has the stage's layouts): a stage of 64 dense K is two k32 steps;
// its compressed A is one TMA box of 32 halves x BM rows with the 64-byte swizzle; its metadata, the words of the
// tile's 8 row blocks for the stage's two K blocks of 32, is a third TMA box (2 rows x 128 words of the (Kp / 32) x
// (16 ceil(M / 16)) int32 matrix ptx_kernels/sparse.py writes in the lanes' order) on the same full barrier; each
// thread reads its word of each step with one 4-byte shared load once the stage has landed, before wgmma.fence (the
// register is an ordinary operand); B is loaded exactly as the dense kernels load it.
// Metadata no instruction may see: TMA reads zeros past the metadata's rows (row blocks past ceil(M / 16)) and past
// Kp (a stage's second k32 step when Kp is an odd number of 32s), and a zero nibble is no valid index pair; those
// words are replaced by 0x44444444 (positions 0, 1 in every chunk), whose products are zeros or rows no one stores.
//
// Tiles: 128 x 256 x 64 (dense K) in 5 stages of 8 KB A + 32 KB B + 1 KB metadata, and 64 x 64 staging per consumer
// for the epilogue (4 rounds a tile): a sparse k-block finishes in half the time of a dense one, so this kernel
// spends shared memory on one more stage than wgmma_persistent (4 stages, 64 x 128 staging) and less on staging.
// K: TMA reads zeros past Kp / 2 compressed columns and past K rows of B, so the K tail needs no other handling.
#include <algorithm>

#include "blocks/wgmma_sp_tile.cuh"
#include "host/registry.h"
#include "ptx/cluster.cuh"

namespace {

constexpr int BM = 128, BN = 256, STAGES = 5, EPI_COLS = 64;
// Bands of tile rows (tile::grouped_tile): the blocks resident at once cover group_m tile rows x 132 / group_m tile
// columns, and each band streams all of B from DRAM. Taller bands read B from DRAM less often but did not pay: the
// kernel is bound by shared memory, not DRAM (measurements: docs/design/sparse.md). GemmArgs::schedule 1 / 2 pin
// bands of 8 / 16; 0 and 3 take kGroupM.
constexpr int kGroupM = 8;
constexpr int kClusterRounds = 8;  // the default runs clusters of two from this many rounds of tiles per SM
using hopper_sp::BKC;
using hopper_sp::KSTEPS;
constexpr int E_WORDS = KSTEPS * BM;  // metadata words per stage: (k32 step, 16-row block, 16 words)
constexpr int kConsumers = 2, kThreads = (1 + kConsumers) * hopper::kWarpgroup;
constexpr int kProducerRegs = 40, kConsumerRegs = 232;  // as wgmma_persistent: 128 fp32 accumulators a thread
static_assert(BM == kConsumers * 64, "each consumer warpgroup owns 64 rows of the tile");

struct Storage {
  static constexpr int kStages = STAGES;
  alignas(1024) half A[STAGES][BM * BKC];    // (stage, m, compressed k), 64-byte swizzled
  alignas(1024) half B[STAGES][BN * hopper::BK];  // (stage, n, k) or (stage, n / 64, k, n % 64), 128-byte swizzled
  alignas(128) uint32_t E[STAGES][E_WORDS];  // (stage, k32 step, 16-row block, word in lane order)
  alignas(8) uint64_t full[STAGES];          // 1 arrival (expect_tx) + the TMA bytes
  alignas(8) uint64_t empty[STAGES];         // one arrival per consumer warpgroup
  hopper::EpilogueStaging<half, EPI_COLS> out[kConsumers];
};
static_assert(hopper::smem_request<Storage>() <= 227 * 1024, "5 stages and the staging fit in 227 KB");

// ---- loads ----------------------------------------------------------------------------------------------------
// One thread: the stage's bytes on full[s], then its boxes: compressed A (a_rows x 32 halves), the metadata (2 x BM
// words), B as hopper::load_kblock loads it. kb counts stages of 64 dense K.
// In clusters of CLUSTER blocks (tiles in the same tile column, rows CLUSTER p .. CLUSTER p + CLUSTER - 1) each block
// loads its own A and metadata and 1 / CLUSTER of B, multicast into every block of the cluster (as wgmma_cluster.cu):
// full[s] still expects the whole stage, part of B's bytes counted down by the peers' copies.
template <bool B_COL, int CLUSTER>
__device__ __forceinline__ void load_stage(Storage& ss, int s, const CUtensorMap* tma_a, const CUtensorMap* tma_e,
                                           const CUtensorMap* tma_b, int m0, int n0, int kb, int a_rows,
                                           uint32_t rank) {
  const uint32_t bar = ptx::smem_u32(&ss.full[s]);
  ptx::mbarrier_arrive_expect_tx(bar, (a_rows * BKC + BN * hopper::BK) * int(sizeof(half)) + E_WORDS * 4);
  ptx::tma_load_2d(ptx::smem_u32(ss.A[s]), tma_a, kb * BKC, m0, bar);
  ptx::tma_load_2d(ptx::smem_u32(ss.E[s]), tma_e, m0, kb * KSTEPS, bar);  // words m0.. of K blocks 2 kb, 2 kb + 1
  const int k0 = kb * hopper::BK;
  if constexpr (CLUSTER == 1) {
    if constexpr (B_COL) {
      ptx::tma_load_2d(ptx::smem_u32(ss.B[s]), tma_b, k0, n0, bar);
    } else {
#pragma unroll
      for (int j = 0; j < BN / 64; ++j)
        ptx::tma_load_2d(ptx::smem_u32(ss.B[s] + j * 64 * hopper::BK), tma_b, n0 + 64 * j, k0, bar);
    }
  } else {
    constexpr uint16_t kAll = (1u << CLUSTER) - 1;
    if constexpr (B_COL) {  // rows n0 + (BN / CLUSTER) rank .. of the K-major B tile: one box
      constexpr int part = BN / CLUSTER;
      ptx::tma_load_2d_multicast(ptx::smem_u32(ss.B[s] + rank * part * hopper::BK), tma_b, k0, n0 + rank * part,
                                 bar, kAll);
    } else {  // this rank's 64-column boxes of the N-major B tile
#pragma unroll
      for (int jj = 0; jj < BN / 64 / CLUSTER; ++jj) {
        const int j = rank * (BN / 64 / CLUSTER) + jj;
        ptx::tma_load_2d_multicast(ptx::smem_u32(ss.B[s] + j * 64 * hopper::BK), tma_b, n0 + 64 * j, k0, bar,
                                   kAll);
      }
    }
  }
}

// ---- the kernel -----------------------------------------------------------------------------------------------
template <Acc ACC, bool B_COL, bool TMA_STORE, int CLUSTER>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_sp_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_e,
                    const __grid_constant__ CUtensorMap tma_b, const __grid_constant__ CUtensorMap tma_c,
                    half* __restrict__ C, int64_t ldc, int M, int N, int K, bool pairs, int group_m) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  Storage& ss = hopper::aligned_storage<Storage>(smem_raw);
  const int wg = threadIdx.x / hopper::kWarpgroup, tid = threadIdx.x % hopper::kWarpgroup;
  // Work units: CLUSTER tiles of one tile column (tile rows CLUSTER p + rank), one unit per cluster at a time; with
  // CLUSTER = 1 a unit is a tile. When the tile rows do not divide, a last unit's tiles below M load zeros for A
  // (and the always-valid metadata), still share their part of B, and store nothing.
  const uint32_t rank = CLUSTER > 1 ? ptx::cluster_ctarank() : 0;
  const int unit0 = blockIdx.x / CLUSTER, units_step = gridDim.x / CLUSTER;
  const int tiles_m = hopper::cdiv(M, BM), tiles_n = hopper::cdiv(N, BN);
  const int units_m = hopper::cdiv(tiles_m, CLUSTER), units = units_m * tiles_n;
  const int group = group_m / CLUSTER > 1 ? group_m / CLUSTER : 1;  // bands of group_m tile rows
  const int ksteps = hopper::cdiv(K, 32), kblocks = hopper::cdiv(ksteps, KSTEPS);  // k32 steps to Kp; stages
  const int a_rows = hopper::a_box_rows(M, BM);

  // ---- PROLOGUE: barriers (visible to the whole cluster before any peer copies or arrives into them) ----
  if (threadIdx.x == 0) {
    ptx::prefetch_tensormap(&tma_a);
    ptx::prefetch_tensormap(&tma_e);
    ptx::prefetch_tensormap(&tma_b);
    hopper::init_ring(ss, kConsumers * CLUSTER);  // empty[s]: every consumer warpgroup of the cluster
    if constexpr (CLUSTER > 1) ptx::fence_mbarrier_init_cluster();
  }
  if constexpr (CLUSTER > 1) ptx::cluster_sync();
  else __syncthreads();

  if (wg == 0) {
    // ---- PRODUCER ----
    ptx::setmaxnreg_dec<kProducerRegs>();
    if (tid == 0) {
      int s = 0;
      uint32_t phase = 0;
      for (int t = unit0; t < units; t += units_step) {
        int um, tn;
        tile::grouped_tile(t, units_m, tiles_n, group, um, tn);
        const int tm = um * CLUSTER + int(rank);
        for (int kb = 0; kb < kblocks; ++kb) {
          // a fresh barrier passes parity 1; with clusters, both blocks' consumers are done with the stage
          ptx::mbarrier_wait_parity(ptx::smem_u32(&ss.empty[s]), phase ^ 1);
          load_stage<B_COL, CLUSTER>(ss, s, &tma_a, &tma_e, &tma_b, tm * BM, tn * BN, kb, a_rows, rank);
          if (++s == STAGES) s = 0, phase ^= 1;
        }
      }
    }
  } else {
    // ---- CONSUMERS: MAIN LOOP per tile, then EPILOGUE ----
    ptx::setmaxnreg_inc<kConsumerRegs>();
    hopper::Accum<BN, ACC> acc;
    const int slab = (wg - 1) * 64, warp = tid / 32, lane = tid % 32;
    const int e_word = slab + 16 * warp + 2 * (lane / 4) + lane % 2;  // within a k32 step's BM words
    const int mblocks = hopper::cdiv(M, 16);
    int s = 0;
    uint32_t phase = 0;
    // One arrival per warpgroup on empty[stage] of every block of the cluster (a stage is written in all of them):
    // lane r signals block r, so the arrivals leave as one instruction (as wgmma_cluster.cu).
    auto release = [&](int stage) {
      if constexpr (CLUSTER == 1) {
        if (tid == 0) ptx::mbarrier_arrive(ptx::smem_u32(&ss.empty[stage]));
      } else {
        if (tid < CLUSTER) ptx::mbarrier_arrive_cluster(ptx::mapa_shared(ptx::smem_u32(&ss.empty[stage]), tid));
      }
    };
    for (int t = unit0; t < units; t += units_step) {
      int um, tn;
      tile::grouped_tile(t, units_m, tiles_n, group, um, tn);
      const int tm = um * CLUSTER + int(rank);
      const bool rows_ok = (tm * BM + slab) / 16 + warp < mblocks;  // this warp's row block has metadata
      int prev = -1;
      for (int kb = 0; kb < kblocks; ++kb) {
        ptx::mbarrier_wait_parity(ptx::smem_u32(&ss.full[s]), phase);
        uint32_t e[KSTEPS];
#pragma unroll
        for (int j = 0; j < KSTEPS; ++j) {
          const bool ok = rows_ok && kb * KSTEPS + j < ksteps;
          e[j] = ok ? ss.E[s][j * BM + e_word] : hopper_sp::kValidMeta;
        }
        ptx::wgmma_fence();
        hopper_sp::mma_stage<B_COL>(acc.d, ss.A[s] + slab * BKC, ss.B[s], e, kb == 0);
        ptx::wgmma_commit_group();
        ptx::wgmma_wait_group<1>();  // the previous stage's group is done: it may be refilled
        if (prev >= 0) release(prev);
        prev = s;
        if (++s == STAGES) s = 0, phase ^= 1;
      }
      ptx::wgmma_wait_group<0>();
      ptx::fence_operands(acc.d);
      release(prev);
      if constexpr (TMA_STORE) {
        hopper::store_accumulators_tma<BN, EPI_COLS>(acc.d, ss.out[wg - 1], &tma_c, tm * BM + slab, tn * BN,
                                                     /*bar_id=*/wg);
      } else {
        hopper::store_accumulators<BN>(acc.d, C, ldc, M, N, tm * BM + slab, tn * BN, pairs);
      }
    }
    if (TMA_STORE && tid == 0) ptx::bulk_wait_group_read<0>();  // the staging buffer outlives the last stores
  }
  // ---- END: no block leaves while a peer may still copy into it or arrive on its barriers ----
  if constexpr (CLUSTER > 1) ptx::cluster_sync();
}

// The tensor maps: compressed A ((M, Kp / 2) halves, box 32 x a_rows, 64-byte swizzle), metadata ((Kp / 32) rows of
// 16 ceil(M / 16) words, box 2 x BM), and B and C as hopper::make_operands describes them (B with the dense K).
struct SparseOperands {
  CUtensorMap a, e, b, c;
  bool pairs, tma_store;  // as hopper::Operands
};

cudaError_t make_sparse_operands(const GemmArgs& p, int cluster, SparseOperands* ops) {
  const uint64_t ksteps = uint64_t(hopper::cdiv(p.K, 32)), words = uint64_t(hopper::cdiv(p.M, 16)) * 16;
  host::TensorMapKey a{p.A, uint64_t(p.M), ksteps * 16, uint64_t(p.sam), uint32_t(hopper::a_box_rows(p.M, BM)),
                       BKC, false};
  a.swizzle64 = true;
  host::TensorMapKey e{p.E, ksteps, words, words, KSTEPS, BM, false};
  e.words = true;
  const uint64_t ldb = uint64_t(p.b_col_major ? p.sbn : p.sbk);
  const host::TensorMapKey b = p.b_col_major
                                   ? host::TensorMapKey{p.B, uint64_t(p.N), uint64_t(p.K), ldb,
                                                        uint32_t(BN / cluster), hopper::BK, true}
                                   : host::TensorMapKey{p.B, uint64_t(p.K), uint64_t(p.N), ldb, hopper::BK, 64, true};
  cudaError_t err;
  if ((err = host::cached_tensor_map(a, &ops->a)) != cudaSuccess) return err;
  if ((err = host::cached_tensor_map(e, &ops->e)) != cudaSuccess) return err;
  if ((err = host::cached_tensor_map(b, &ops->b)) != cudaSuccess) return err;
  ops->pairs = p.ldc % 2 == 0 && reinterpret_cast<uintptr_t>(p.C) % 4 == 0;
  ops->tma_store = host::tma_describable(p.C, uint64_t(p.ldc)) &&
                   host::cached_tensor_map({p.C, uint64_t(p.M), uint64_t(p.N), uint64_t(p.ldc), 64, 64, true},
                                           &ops->c) == cudaSuccess;
  return cudaSuccess;
}

template <Acc ACC, bool B_COL, bool TMA_STORE, int CLUSTER>
cudaError_t launch_kernel(const GemmArgs& p, const SparseOperands& ops, cudaStream_t stream, LaunchInfo* info) {
  constexpr auto kernel = wgmma_sp_kernel<ACC, B_COL, TMA_STORE, CLUSTER>;
  const int smem = hopper::smem_request<Storage>();
  cudaError_t err = tile::prepare_smem(kernel, smem, info);  // opt-in above 48 KB, limit checked
  if (err != cudaSuccess) return err;
  const int group_m = p.schedule == 2 ? 16 : kGroupM;
  const int units = hopper::cdiv(hopper::cdiv(p.M, BM), CLUSTER) * hopper::cdiv(p.N, BN);
  if constexpr (CLUSTER == 1) {
    const dim3 grid(hopper::persistent_blocks(units, hopper::sm_count(), p.grid));
    if (info) *info = LaunchInfo{grid.x, grid.y, unsigned(kThreads), smem, info->smem_limit, BM, BN, 0};
    kernel<<<grid, kThreads, smem, stream>>>(ops.a, ops.e, ops.b, ops.c, p.C, p.ldc, p.M, p.N, p.K, ops.pairs,
                                             group_m);
    return cudaGetLastError();
  } else {
    int max_clusters = 0;  // clusters that fit at once (the GPCs decide, not SMs / CLUSTER)
    if ((err = hopper::max_active_clusters<kernel>(kThreads, smem, CLUSTER, stream, &max_clusters)) != cudaSuccess)
      return err;
    const dim3 grid(CLUSTER * hopper::persistent_blocks(units, max_clusters, p.grid));
    if (info) *info = LaunchInfo{grid.x, grid.y, unsigned(kThreads), smem, info->smem_limit, BM, BN, 0};
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = hopper::cluster_config(grid, kThreads, smem, CLUSTER, stream, &attr);
    return cudaLaunchKernelEx(&cfg, kernel, ops.a, ops.e, ops.b, ops.c, p.C, p.ldc, p.M, p.N, p.K, ops.pairs,
                              group_m);
  }
}

}  // namespace

// ---- HOST: check -> tensor maps -> launch. p.A: compressed values (M x Kp / 2, row stride p.sam), p.E: metadata
// (hgemm.cuh), p.K: the dense K. Values and metadata the maps cannot describe are refused (the Python wrapper copies
// values to 16-byte aligned rows and the metadata to a 16-byte aligned contiguous tensor first).
cudaError_t launch_wgmma_sp(const GemmArgs& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  if (!p.E || p.K <= 0 || (p.sak != 1 && p.K > 1)) return cudaErrorInvalidValue;
  // Clusters of two (B multicast) where the tiles make many rounds of the GPU, where they measured faster than single
  // blocks; on fewer rounds they measured slower (docs/design/sparse.md). GemmArgs::schedule 3 pins them, 1 and 2 pin
  // single blocks.
  const int tiles = hopper::cdiv(p.M, BM) * hopper::cdiv(p.N, BN);
  const int cluster = p.schedule == 3 || (p.schedule == 0 && tiles >= kClusterRounds * hopper::sm_count()) ? 2 : 1;
  SparseOperands ops;
  const cudaError_t err = make_sparse_operands(p, cluster, &ops);
  if (err != cudaSuccess) return err;
  return tile::dispatch(acc, p.b_col_major, [&](auto acc_c, auto b_col_c) {
    if (cluster == 2) {
      if (ops.tma_store) return launch_kernel<acc_c.value, b_col_c.value, true, 2>(p, ops, stream, info);
      return launch_kernel<acc_c.value, b_col_c.value, false, 2>(p, ops, stream, info);
    }
    if (ops.tma_store) return launch_kernel<acc_c.value, b_col_c.value, true, 1>(p, ops, stream, info);
    return launch_kernel<acc_c.value, b_col_c.value, false, 1>(p, ops, stream, info);
  });
}

HGEMM_VARIANT(wgmma_sp, launch_wgmma_sp, RowMajorA);
