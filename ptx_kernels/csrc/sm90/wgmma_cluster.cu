// wgmma_cluster.cu — Hopper ladder, step 4: 2-CTA clusters share B through TMA multicast.
//
// wgmma_persistent.cu's blocks each read a 128 x 64 A box and a 256 x 64 B box per k-block from L2: 48 KB for
// 4.2 MFLOP. Here two blocks on neighbouring SMs form a cluster and take two tiles that share their B columns
// (tile rows 2p and 2p + 1, same tile column). Each block still loads its own A box, but only half of the B tile,
// multicast into both blocks' shared memory (cp.async.bulk.tensor ... .multicast::cluster): per pair of tiles
// L2 serves 2 x 16 + 32 KB instead of 2 x 48 KB, a third less traffic at the same tile size.
//
// What multicast changes in the pipeline:
//   full[s]  — still one arrival (this block's producer: expect_tx of A + the whole B) plus the bytes; half of B's
//              bytes are counted down by the peer's copy.
//   empty[s] — a stage is written in BOTH blocks by either producer, so it may be refilled only when the consumers
//              of both blocks are done with it: 2 warpgroups x 2 blocks arrive, each on its own block's and on the
//              peer's barrier (mapa + mbarrier.arrive.shared::cluster, default .release.cta: see ptx/cluster.cuh).
//   start/end — barriers initialised and fenced for the cluster (fence.mbarrier_init), then a cluster barrier, so
//              no peer copies or arrives into an uninitialised barrier; a cluster barrier at the end keeps a block
//              alive while its peer may still write into it.
// The rest is wgmma_persistent.cu: persistent grid (at most as many clusters as fit, cudaOccupancyMaxActiveClusters;
// as many as keep the rounds of tile pairs full: hopper::persistent_blocks),
// grouped tile order over tile pairs, warp-specialized producer/consumers, TMA-store epilogue.
// Edges: when the tile rows are odd the last pair's second tile lies below M: that block loads zeros for A and still
// shares its half of B, but its consumers compute and store nothing (hopper::pass_tile), as any consumer's slab
// that lies below M.
// Element types: fp16 (fp32 or fp16 accumulation) and bf16 (fp32), the template parameter E; A and B each row- or
// column-major in place (A_COL, B_COL), as wgmma_persistent.cu takes them.
// Built in two parts (host/parts.h), one per layout of A: its 24 kernels would keep one core busy far longer than
// most files of the build.
#include <algorithm>

#include "blocks/wgmma_tile.cuh"
#include "host/parts.h"
#include "host/registry.h"
#include "ptx/cluster.cuh"

namespace {

constexpr int BM = 128, BN = 256, STAGES = 4, GROUP_M = 4;  // GROUP_M in tile pairs: bands of 8 tile rows
constexpr int kCluster = 2;
constexpr int EPI_COLS = 128;  // staging per consumer 64 x 128 (16 KB): 4 stages + 2 x 16 KB fit in 227 KB
constexpr int kConsumers = BM / 64, kThreads = (1 + kConsumers) * hopper::kWarpgroup;
// 40 + 2 x 232 registers x 128 threads = 64,512 <= 65,536: a consumer's 128 fp32 accumulators plus addressing.
constexpr int kProducerRegs = 40, kConsumerRegs = 232;
template <typename E>
struct Storage {
  hopper::SharedStorage<E, BM, BN, STAGES> ring;
  hopper::EpilogueStaging<E, EPI_COLS> out[kConsumers];  // one per consumer warpgroup
};
static_assert(hopper::smem_request<Storage<half>>() <= 227 * 1024,
              "4 stages of 128x64 A + 256x64 B and the staging fit");

template <typename E, Acc ACC, bool B_COL, bool TMA_STORE, bool A_COL>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_cluster_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                         const __grid_constant__ CUtensorMap tma_c, E* __restrict__ C, int64_t ldc, int M, int N,
                         int K, bool pairs) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  Storage<E>& storage = hopper::aligned_storage<Storage<E>>(smem_raw);
  auto& ss = storage.ring;
  const int wg = threadIdx.x / hopper::kWarpgroup, tid = threadIdx.x % hopper::kWarpgroup;
  const uint32_t rank = ptx::cluster_ctarank();
  const int cluster = blockIdx.x / kCluster, clusters = gridDim.x / kCluster;
  const int tiles_m = hopper::cdiv(M, BM), tiles_n = hopper::cdiv(N, BN);
  const int pairs_m = hopper::cdiv(tiles_m, kCluster), pair_tiles = pairs_m * tiles_n;
  const int kblocks = hopper::cdiv(K, hopper::BK), a_rows = hopper::a_box_rows(M, BM);  // A box: see load_kblock

  // ---- PROLOGUE: barriers, visible to the whole cluster ----
  if (threadIdx.x == 0) {
    ptx::prefetch_tensormap(&tma_a);
    ptx::prefetch_tensormap(&tma_b);
    hopper::init_ring(ss, kConsumers * kCluster);
    ptx::fence_mbarrier_init_cluster();
  }
  ptx::cluster_sync();

  if (wg == 0) {
    // ---- PRODUCER ----
    ptx::setmaxnreg_dec<kProducerRegs>();
    if (tid == 0) {
      int s = 0;
      uint32_t phase = 0;
      for (int t = cluster; t < pair_tiles; t += clusters) {
        int pm, tn;
        hopper::tile_coords<GROUP_M>(t, pairs_m, tiles_n, pm, tn);
        const int tm = pm * kCluster + int(rank);
        for (int kb = 0; kb < kblocks; ++kb) {
          ptx::mbarrier_wait_parity(ptx::smem_u32(&ss.empty[s]), phase ^ 1);  // both blocks' consumers are done
          hopper::load_kblock_multicast<BM, BN, B_COL, A_COL, kCluster>(ss, s, &tma_a, &tma_b, tm * BM, tn * BN,
                                                                        kb * hopper::BK, a_rows, rank);
          if (++s == STAGES) s = 0, phase ^= 1;
        }
      }
    }
  } else {
    // ---- CONSUMERS: MAIN LOOP per tile, then EPILOGUE ----
    ptx::setmaxnreg_inc<kConsumerRegs>();
    hopper::Accum<BN, ACC> acc;
    const int slab = (wg - 1) * 64;  // this warpgroup's rows of the tile
    int s = 0;
    uint32_t phase = 0;
    // One arrival per warpgroup on empty[stage] of every block of the cluster: lane r signals block r, so the
    // arrivals leave as one instruction (CUTLASS's PipelineTmaAsync::consumer_release does the same).
    auto release = [&](int stage) {
      if (tid < kCluster) ptx::mbarrier_arrive_cluster(ptx::mapa_shared(ptx::smem_u32(&ss.empty[stage]), tid));
    };
    for (int t = cluster; t < pair_tiles; t += clusters) {
      int pm, tn;
      hopper::tile_coords<GROUP_M>(t, pairs_m, tiles_n, pm, tn);
      const int tm = pm * kCluster + int(rank);
      if (tm * BM + slab >= M) {  // every row of this warpgroup's slab lies past M: nothing to compute or store
        hopper::pass_tile(ss, kblocks, s, phase, release);
        continue;
      }
      hopper::mma_tile<BN, B_COL, 1, A_COL>(ss, acc.d, slab, kblocks, s, phase, release);
      if constexpr (TMA_STORE) {
        hopper::store_accumulators_tma<BN, EPI_COLS>(acc.d, storage.out[wg - 1], &tma_c, tm * BM + slab, tn * BN,
                                                     /*bar_id=*/wg);
      } else {
        hopper::store_accumulators<BN>(acc.d, C, ldc, M, N, tm * BM + slab, tn * BN, pairs);
      }
    }
    if (TMA_STORE && tid == 0) ptx::bulk_wait_group_read<0>();  // the staging buffer outlives the last stores
  }
  // ---- END: no block leaves while its peer may still copy into it or arrive on its barriers ----
  ptx::cluster_sync();
}

template <Acc ACC, bool B_COL, bool TMA_STORE, bool A_COL, typename E>
cudaError_t launch_tile(const GemmArgsOf<E>& p, const hopper::Operands& ops, cudaStream_t stream, LaunchInfo* info) {
  constexpr auto kernel = wgmma_cluster_kernel<E, ACC, B_COL, TMA_STORE, A_COL>;
  const int smem = hopper::smem_request<Storage<E>>();
  cudaError_t err = tile::prepare_smem(kernel, smem, info);
  if (err != cudaSuccess) return err;
  int max_clusters = 0;  // clusters that fit at once (the GPCs decide, not SMs / 2)
  if ((err = hopper::max_active_clusters<kernel>(kThreads, smem, kCluster, stream, &max_clusters)) != cudaSuccess)
    return err;
  const int pair_tiles = hopper::cdiv(hopper::cdiv(p.M, BM), kCluster) * hopper::cdiv(p.N, BN);
  const dim3 grid(kCluster * hopper::persistent_blocks(pair_tiles, max_clusters, p.grid));
  return hopper::launch<kernel, Storage<E>>(grid, kThreads, BM, BN, p, ops, stream, info, kCluster);
}

}  // namespace

// The launches for one layout of A: a unit of the build's parts (host/parts.h), so outside the anonymous namespace;
// declared here, so that the call below does not instantiate it, and instantiated in its part at the end.
template <bool A_COL, typename E>
cudaError_t launch_cluster_a(const GemmArgsOf<E>& p, Acc acc, const hopper::Operands& ops, cudaStream_t stream,
                             LaunchInfo* info) {
  return tile::dispatch<E>(acc, p.b_col_major, [&](auto acc_c, auto b_col_c) {
    return ops.tma_store ? launch_tile<acc_c.value, b_col_c.value, true, A_COL>(p, ops, stream, info)
                         : launch_tile<acc_c.value, b_col_c.value, false, A_COL>(p, ops, stream, info);
  });
}
#define A_UNIT(EXTERN, A_COL)                                                                                 \
  HGEMM_UNIT(HGEMM_UNIT_HALF, HGEMM_UNIT(HGEMM_UNIT_A_COL_##A_COL, EXTERN))                                     \
  template cudaError_t launch_cluster_a<A_COL, half>(const GemmArgsOf<half>&, Acc, const hopper::Operands&,    \
                                                     cudaStream_t, LaunchInfo*);                               \
  HGEMM_UNIT(HGEMM_UNIT_BF16, HGEMM_UNIT(HGEMM_UNIT_A_COL_##A_COL, EXTERN))                                     \
  template cudaError_t launch_cluster_a<A_COL, __nv_bfloat16>(const GemmArgsOf<__nv_bfloat16>&, Acc,           \
                                                              const hopper::Operands&, cudaStream_t, LaunchInfo*)
A_UNIT(extern, false);
A_UNIT(extern, true);

// ---- HOST: check -> tensor maps -> launch ----
template <typename E>
cudaError_t launch_wgmma_cluster(const GemmArgsOf<E>& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  hopper::Operands ops;
  const cudaError_t err = hopper::make_operands(p, BM, BN, &ops, /*b_box_n=*/BN / kCluster);
  if (err != cudaSuccess) return err;
  const cudaError_t launched = p.a_col_major ? launch_cluster_a<true>(p, acc, ops, stream, info)
                                             : launch_cluster_a<false>(p, acc, ops, stream, info);
  if (info) info->kernel = "wgmma_cluster";
  return launched;
}

// ---- PARTS (host/parts.h): part 0 the host code above, the registration and row-major A's kernels; part 1
// column-major A's ----
#if HGEMM_IN_PART(0)
HGEMM_VARIANT_FP16_BF16(wgmma_cluster, launch_wgmma_cluster, AnyMajor);
A_UNIT(, false);
#endif
#if HGEMM_IN_PART(1)
A_UNIT(, true);
#endif
