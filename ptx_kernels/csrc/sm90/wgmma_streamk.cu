// wgmma_streamk.cu — Hopper ladder, step 7: stream-K, the persistent kernel's last, partial round cut into
// k-slices that fill the SMs.
//
// A persistent grid of G blocks walking T output tiles takes cdiv(T, G) rounds; where T is not a multiple of G the
// last round leaves SMs idle (200 x 8192 x 8192 in 128 x 256 tiles: 64 tiles on 132 SMs, half the GPU idle for the
// whole call). Here the tiles of that round are cut into k-slices, one block each (hopper::stream_k_cut, the rule
// of hgemm_common/schedules.py and of triton_kernels/streamk.py, with the same names): T // G whole rounds
// data-parallel, and the R = T % G tiles of the partial round cut into S slices aligned in K. Block p < R x S
// computes slice j = p % S of tile p / S, k-blocks [j I / S, (j + 1) I / S), then walks its data-parallel tiles
// R + p, R + p + G, ... as wgmma_persistent.cu walks all of them. The cut tiles are the first R in the grouped
// order, neighbours in C, and the blocks at slice j read the same K range at the same time: L2 serves one row's A
// blocks and one column's B blocks once, as for the data-parallel rounds. Where S < 2 nothing is cut and the
// schedule is wgmma_persistent.cu's (hopper::persistent_blocks).
//
// Pipeline and roles as wgmma_persistent.cu's on its 128 x 256 tile (blocks/wgmma_tile.cuh): a producer warpgroup
// whose one thread issues the TMA loads of every k-block of the block's work, slice and tiles, into a 4-stage ring;
// two consumer warpgroups of 64 rows each issuing m64n256k16 wgmma.
// Epilogue: a data-parallel tile as wgmma_persistent.cu stores it (TMA stores through swizzled staging where C is
// TMA-describable, else masked register stores). A slice writes its fp32 partial into workspace slot (tile, j)
// (blocks/stream_k.cuh) and its program goes on to its data-parallel tiles; a second launch on the stream
// (hopper::stream_k_fix_up_kernel) adds each cut tile's S slots in slot order and stores C with masked register
// stores: the same bits on every run, no counter, no atomic.
// The workspace (R x S slots of 128 x 256 fp32) is GemmArgs::workspace, from Torch's caching allocator on the
// launch's stream.
// GemmArgs::sms lowers the SM count the schedule sees (tests cut small problems so).
// Edges: TMA reads zeros outside A and B (M, N and the K tail); the stores are masked to M x N.
// Element types: fp16 (fp32 or fp16 accumulation) and bf16 (fp32); the partials are fp32 either way (fp16
// accumulators widened exactly). Layouts: A and B each row- or column-major in place, as wgmma_persistent.cu.
// Built in parts (host/parts.h), one A layout a part: its 24 kernels of the 128 x 256 tile in one unit would be the
// longest of the extension's build.
#include "blocks/stream_k.cuh"
#include "blocks/wgmma_tile.cuh"
#include "host/parts.h"
#include "host/registry.h"

namespace {

constexpr int kConsumers = 2, kThreads = (1 + kConsumers) * hopper::kWarpgroup;
constexpr int BM = 128, BN = 256, STAGES = 4;  // wgmma_persistent.cu's widest tile
constexpr int GROUP_M = 8;
constexpr int kProducerRegs = 40, kConsumerRegs = 232;  // as wgmma_persistent.cu
using Workspace = hopper::StreamKWorkspace<BM, BN>;

template <typename E>
using Staging = hopper::EpilogueStaging<E, 128>;  // 64 rows x 128 columns a round, two 128-byte-swizzled boxes
template <typename E>
struct Storage {
  hopper::SharedStorage<E, BM, BN, STAGES> ring;
  Staging<E> out[kConsumers];  // one per consumer warpgroup
};
static_assert(hopper::smem_request<Storage<half>>() <= 227 * 1024, "the ring and the staging fit");

template <typename E, Acc ACC, bool B_COL, bool TMA_STORE, bool A_COL>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_streamk_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                         const __grid_constant__ CUtensorMap tma_c, E* __restrict__ C, int64_t ldc, int M, int N,
                         int K, bool pairs, float2* __restrict__ slots, int sk_tiles, int slices) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  auto& storage = hopper::aligned_storage<Storage<E>>(smem_raw);
  auto& ss = storage.ring;
  const int wg = threadIdx.x / hopper::kWarpgroup, tid = threadIdx.x % hopper::kWarpgroup;
  const int tiles_m = hopper::cdiv(M, BM), tiles_n = hopper::cdiv(N, BN), tiles = tiles_m * tiles_n;
  const int kblocks = hopper::cdiv(K, hopper::BK), a_rows = hopper::a_box_rows(M, BM);
  // this block's slice of a cut tile, if it has one: slice j of tile sk_tile
  const bool has_slice = int(blockIdx.x) < sk_tiles * slices;
  const int sk_tile = has_slice ? int(blockIdx.x) / slices : 0, j = int(blockIdx.x) - sk_tile * slices;
  const int kb0 = hopper::slice_first(j, kblocks, slices), kb1 = hopper::slice_first(j + 1, kblocks, slices);

  // ---- PROLOGUE: barriers ----
  if (threadIdx.x == 0) {
    ptx::prefetch_tensormap(&tma_a);
    ptx::prefetch_tensormap(&tma_b);
    hopper::init_ring(ss, kConsumers);
  }
  __syncthreads();

  if (wg == 0) {
    // ---- PRODUCER: the slice's k-blocks, then the data-parallel tiles whole ----
    ptx::setmaxnreg_dec<kProducerRegs>();
    if (tid == 0) {
      int s = 0, tm, tn;
      uint32_t phase = 0;
      if (has_slice) {
        hopper::tile_coords<GROUP_M>(sk_tile, tiles_m, tiles_n, tm, tn);
        hopper::produce_tile<BM, BN, B_COL, A_COL>(ss, &tma_a, &tma_b, tm * BM, tn * BN, kb0, kb1, a_rows, s, phase);
      }
      for (int t = sk_tiles + blockIdx.x; t < tiles; t += gridDim.x) {
        hopper::tile_coords<GROUP_M>(t, tiles_m, tiles_n, tm, tn);
        hopper::produce_tile<BM, BN, B_COL, A_COL>(ss, &tma_a, &tma_b, tm * BM, tn * BN, 0, kblocks, a_rows, s,
                                                   phase);
      }
    }
  } else {
    // ---- CONSUMERS: MAIN LOOP per work item, then its EPILOGUE ----
    ptx::setmaxnreg_inc<kConsumerRegs>();
    hopper::Accum<BN, ACC> acc;
    const int half = wg - 1, slab = half * 64;  // this warpgroup's rows of the tile
    auto release = [&](int stage) {
      if (tid == 0) ptx::mbarrier_arrive(ptx::smem_u32(&ss.empty[stage]));  // one arrival per warpgroup
    };
    int s = 0, tm, tn;
    uint32_t phase = 0;
    if (has_slice) {
      hopper::tile_coords<GROUP_M>(sk_tile, tiles_m, tiles_n, tm, tn);
      hopper::mma_tile<BN, B_COL, 1, A_COL>(ss, acc.d, slab, kb1 - kb0, s, phase, release);
      hopper::stream_k_write_slot<BM, BN>(acc.d, slots, sk_tile, j, slices, half);
    }
    for (int t = sk_tiles + blockIdx.x; t < tiles; t += gridDim.x) {
      hopper::tile_coords<GROUP_M>(t, tiles_m, tiles_n, tm, tn);
      hopper::mma_tile<BN, B_COL, 1, A_COL>(ss, acc.d, slab, kblocks, s, phase, release);
      if constexpr (TMA_STORE) {
        hopper::store_accumulators_tma<BN>(acc.d, storage.out[half], &tma_c, tm * BM + slab, tn * BN,
                                           /*bar_id=*/wg);
      } else {
        hopper::store_accumulators<BN>(acc.d, C, ldc, M, N, tm * BM + slab, tn * BN, pairs);
      }
    }
    if (TMA_STORE && tid == 0) ptx::bulk_wait_group_read<0>();  // the staging buffer outlives the last stores
  }
}

}  // namespace

// The kernels' launches for one layout of A and one element type, once launch_wgmma_streamk (below) has worked out
// the schedule, the workspace and the tensor maps: a unit of the build's parts (host/parts.h), so outside the
// anonymous namespace; declared here, so that the launcher's calls do not instantiate it, and instantiated in its part
// at the end of the file. STREAMK_UNIT(extern, A_COL, HALF) declares a unit, STREAMK_UNIT(, A_COL, HALF) instantiates
// it (HALF: the element type is half, else __nv_bfloat16).
template <bool A_COL, typename E>
cudaError_t launch_streamk_kernels(const GemmArgsOf<E>& p, Acc acc, const hopper::Operands& ops,
                                   hopper::StreamKLaunch plan, float2* slots, cudaStream_t stream, LaunchInfo* info) {
  const dim3 grid(unsigned(plan.programs));
  const int smem = hopper::smem_request<Storage<E>>();
  const cudaError_t err = tile::dispatch<E>(acc, p.b_col_major, [&](auto acc_c, auto b_col_c) {
    constexpr Acc kAcc = acc_c.value;
    constexpr bool kBCol = b_col_c.value;
    auto launch = [&](auto kernel) {
      const cudaError_t prepared = tile::prepare_smem(kernel, smem, info);  // opt-in above 48 KB, limit checked
      if (prepared != cudaSuccess) return prepared;
      kernel<<<grid, kThreads, smem, stream>>>(ops.a, ops.b, ops.c, p.C, p.ldc, p.M, p.N, p.K, ops.pairs, slots,
                                               plan.sk_tiles, plan.slices);
      const cudaError_t launched = cudaGetLastError();
      if (launched != cudaSuccess || !plan.sk_tiles) return launched;
      // the fix-up, queued behind the GEMM: each cut tile's S slots added in slot order (blocks/stream_k.cuh)
      const dim3 fix_grid(unsigned(plan.sk_tiles), unsigned(Workspace::kHalves), unsigned(hopper::kFixUpParts));
      hopper::stream_k_fix_up_kernel<BM, BN, GROUP_M, E>
          <<<fix_grid, hopper::kWarpgroup, 0, stream>>>(slots, p.C, p.ldc, p.M, p.N, plan.slices, ops.pairs);
      return cudaGetLastError();
    };
    if (ops.tma_store) return launch(wgmma_streamk_kernel<E, kAcc, kBCol, true, A_COL>);
    return launch(wgmma_streamk_kernel<E, kAcc, kBCol, false, A_COL>);
  });
  if (err == cudaSuccess && info)
    *info = LaunchInfo{grid.x, 1, unsigned(kThreads), smem, info->smem_limit, BM, BN, plan.sk_tiles ? plan.slices : 0};
  return err;
}
#define STREAMK_UNIT_1(EXTERN, A_COL)                                                                             \
  HGEMM_UNIT(HGEMM_UNIT_HALF, HGEMM_UNIT(HGEMM_UNIT_A_COL_##A_COL, EXTERN))                                       \
  template cudaError_t launch_streamk_kernels<A_COL, half>(const GemmArgsOf<half>&, Acc, const hopper::Operands&,  \
                                                           hopper::StreamKLaunch, float2*, cudaStream_t,           \
                                                           LaunchInfo*)
#define STREAMK_UNIT_0(EXTERN, A_COL)                                                                             \
  HGEMM_UNIT(HGEMM_UNIT_BF16, HGEMM_UNIT(HGEMM_UNIT_A_COL_##A_COL, EXTERN))                                       \
  template cudaError_t launch_streamk_kernels<A_COL, __nv_bfloat16>(                                               \
      const GemmArgsOf<__nv_bfloat16>&, Acc, const hopper::Operands&, hopper::StreamKLaunch, float2*, cudaStream_t, \
      LaunchInfo*)
#define STREAMK_UNIT(EXTERN, A_COL, HALF) STREAMK_UNIT_##HALF(EXTERN, A_COL)
STREAMK_UNIT(extern, false, 1);
STREAMK_UNIT(extern, false, 0);
STREAMK_UNIT(extern, true, 1);
STREAMK_UNIT(extern, true, 0);

// ---- HOST: the schedule -> workspace -> tensor maps -> launch (the GEMM, then the fix-up where tiles are cut) ----
template <typename E>
cudaError_t launch_wgmma_streamk(const GemmArgsOf<E>& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  const int device_sms = hopper::sm_count();
  const int sms = p.sms > 0 && p.sms < device_sms ? p.sms : device_sms;
  const int tiles = hopper::cdiv(p.M, BM) * hopper::cdiv(p.N, BN);
  const hopper::StreamKLaunch plan = hopper::stream_k_launch(tiles, hopper::cdiv(p.K, hopper::BK), sms, p.grid);
  const int64_t bytes = plan.sk_tiles ? Workspace::bytes(plan.sk_tiles, plan.slices) : 0;
  if (info) info->workspace_bytes = bytes;
  if (p.workspace_bytes < bytes) return kWorkspaceNeeded;
  hopper::Operands ops;
  cudaError_t err = hopper::make_operands(p, BM, BN, &ops, 0, Staging<E>::kBoxCols, Staging<E>::kRows);
  if (err != cudaSuccess) return err;
  float2* slots = bytes ? static_cast<float2*>(p.workspace) : nullptr;
  err = p.a_col_major ? launch_streamk_kernels<true>(p, acc, ops, plan, slots, stream, info)
                      : launch_streamk_kernels<false>(p, acc, ops, plan, slots, stream, info);
  if (info) info->workspace_bytes = bytes;
  return err;
}

// ---- PARTS (host/parts.h): part 0 the launcher, the registration and fp16 with A row-major; the others one
// (A layout, element type) each ----
#if HGEMM_IN_PART(0)
HGEMM_VARIANT_FP16_BF16(wgmma_streamk, launch_wgmma_streamk, AnyMajor);
STREAMK_UNIT(, false, 1);
#endif
#if HGEMM_IN_PART(1)
STREAMK_UNIT(, false, 0);
#endif
#if HGEMM_IN_PART(2)
STREAMK_UNIT(, true, 1);
#endif
#if HGEMM_IN_PART(3)
STREAMK_UNIT(, true, 0);
#endif
