// wgmma_splitk_grid.cu — Hopper ladder, step 6: split-K over the whole grid, the partial tiles added in a fixed
// order through a global workspace by a second kernel.
//
// wgmma_splitk.cu splits K over a cluster, at most 4 parts: a 128 x 128 output (two 128 x 64 tiles) then keeps 8 of
// the 132 SMs busy, and a 256 x 256 x 65536 weight gradient 32. Here any number of blocks share a tile. Block
// (slice, tile) takes slice `slice` of the tile's k-blocks, cut in S near-equal parts, and
//   1. runs wgmma_persistent.cu's warp-specialized pipeline over them (a producer warpgroup issuing TMA loads, two
//      consumer warpgroups issuing wgmma, full/empty mbarriers);
//   2. stores its fp32 accumulators straight from registers into slice `slice` of the workspace (S slices of
//      M x ldw fp32, ldw = N rounded up to 4), rows < M and columns < N only;
//   3. a second kernel (blocks/splitk_reduce.cuh) adds the S slices of every element in a fixed order and stores C
//      in E.
// Programmatic dependent launch (ptx/griddepcontrol.cuh): the reduce kernel is queued while the product still runs
// (its launch overlaps the product's tail) and waits for the product's grid to complete before it reads.
// The workspace is GemmArgs::workspace: the binding allocates it through Torch's caching allocator on the launch's
// stream when the launcher asks (kWorkspaceNeeded). One slice (S = 1) needs none: the blocks store C themselves.
// One wave: tiles x S blocks (hopper::choose_grid_split keeps that within the SMs; forced splits may take more waves,
// correct but slower, and are cut to a workspace of splitk::kMaxWorkspaceBytes).
// Edges as in the other Hopper kernels: TMA reads zeros past M, N and K; the partial stores and C's are masked.
// Element types: fp16 (fp32 or fp16 accumulation) and bf16 (fp32), the template parameter E; the workspace is fp32
// either way (fp16 accumulators are widened exactly), so partial sums are added in fp32.
#include <algorithm>

#include "blocks/splitk_reduce.cuh"
#include "blocks/wgmma_tile.cuh"
#include "host/registry.h"
#include "ptx/griddepcontrol.cuh"
#include "sm90/handoff.h"

namespace {

// Tiles 128 x BN in STAGES stages, as wgmma_splitk.cu's (the partial tile goes to global memory from registers: no
// staging buffer).
template <int BN_, int STAGES_>
struct Tile {
  static constexpr int BM = 128, BN = BN_, STAGES = STAGES_;
  template <typename E>
  using Storage = hopper::SharedStorage<E, BM, BN, STAGES>;
  static_assert(hopper::smem_request<Storage<half>>() <= 227 * 1024, "the ring fits in 227 KB");
};
using Wide = Tile<256, 4>;
using Medium = Tile<128, 6>;
using Narrow = Tile<64, 8>;

constexpr int GROUP_M = 8;
constexpr int kConsumers = 2, kThreads = (1 + kConsumers) * hopper::kWarpgroup;
constexpr int kProducerRegs = 40, kConsumerRegs = 232;  // as wgmma_persistent.cu

template <typename E, typename T, Acc ACC, bool B_COL>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_splitk_grid_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                             float* __restrict__ ws, int ldw, E* __restrict__ C, int64_t ldc, int M, int N, int K,
                             int split, bool pairs) {
  constexpr int BM = T::BM, BN = T::BN;
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  auto& ss = hopper::aligned_storage<typename T::template Storage<E>>(smem_raw);
  const int wg = threadIdx.x / hopper::kWarpgroup, tid = threadIdx.x % hopper::kWarpgroup;
  const int tiles_m = hopper::cdiv(M, BM), tiles_n = hopper::cdiv(N, BN), tiles = tiles_m * tiles_n;
  // Blocks of one slice are adjacent: those resident together read the same k-range, sharing A and B in L2.
  const int tile = int(blockIdx.x) % tiles, slice = int(blockIdx.x) / tiles;
  int tm, tn;
  hopper::tile_coords<GROUP_M>(tile, tiles_m, tiles_n, tm, tn);
  const int kblocks = hopper::cdiv(K, hopper::BK), a_rows = hopper::a_box_rows(M, BM);  // A box: see load_kblock
  const int kb0 = int(int64_t(kblocks) * slice / split), kb1 = int(int64_t(kblocks) * (slice + 1) / split);

  // ---- PROLOGUE: barriers ----
  if (threadIdx.x == 0) {
    ptx::prefetch_tensormap(&tma_a);
    ptx::prefetch_tensormap(&tma_b);
    hopper::init_ring(ss, kConsumers);
  }
  __syncthreads();

  if (wg == 0) {
    // ---- PRODUCER ----
    ptx::setmaxnreg_dec<kProducerRegs>();
    if (tid == 0) {
      int s = 0;
      uint32_t phase = 0;
      hopper::produce_tile<BM, BN, B_COL>(ss, &tma_a, &tma_b, tm * BM, tn * BN, kb0, kb1, a_rows, s, phase);
    }
    ptx::griddepcontrol_launch_dependents();
  } else {
    // ---- CONSUMERS: MAIN LOOP over the slice's k-blocks ----
    ptx::setmaxnreg_inc<kConsumerRegs>();
    hopper::Accum<BN, ACC> acc;
    const int slab = (wg - 1) * 64;
    int s = 0;
    uint32_t phase = 0;
    auto release = [&](int stage) {
      if (tid == 0) ptx::mbarrier_arrive(ptx::smem_u32(&ss.empty[stage]));
    };
    const bool idle = tm * BM + slab >= M;  // the slab's rows all lie past M: nothing to compute or store
    if (idle) {
      hopper::pass_tile(ss, kb1 - kb0, s, phase, release);
    } else if (kb1 > kb0) {
      hopper::mma_tile<BN, B_COL>(ss, acc.d, slab, kb1 - kb0, s, phase, release);
    } else {
#pragma unroll
      for (auto& x : acc.d) x = 0;
    }
    ptx::griddepcontrol_launch_dependents();  // the reduce kernel may be scheduled as the partial tiles go out
    if (idle) return;
    // ---- EPILOGUE: the partial tile into slice `slice` of the workspace, masked to M x N ----
    if (ws == nullptr) {  // one slice (S = 1): the tile is the result, and there is no workspace
      hopper::store_accumulators<BN>(acc.d, C, ldc, M, N, tm * BM + slab, tn * BN, pairs);
      return;
    }
    float* out = ws + int64_t(slice) * M * ldw;
    const int warp = tid / 32, lane = tid % 32, r = tm * BM + slab + warp * 16 + lane / 4;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      const int c = tn * BN + 8 * j + 2 * (lane % 4);  // even, and ldw is a multiple of 4: c + 1 < ldw
      if (c >= N) continue;
      if (r < M) *reinterpret_cast<float2*>(out + int64_t(r) * ldw + c) = hopper::fragment_float2(acc.d, j, 0);
      if (r + 8 < M)
        *reinterpret_cast<float2*>(out + int64_t(r + 8) * ldw + c) = hopper::fragment_float2(acc.d, j, 1);
    }
  }
}

// Both launches of a plan: the product into the workspace, then the reduction into C (one slice: the product alone,
// straight into C).
template <typename T, typename E>
cudaError_t launch_tile(const GemmArgsOf<E>& p, Acc acc, int split, cudaStream_t stream, LaunchInfo* info) {
  const int ldw = (p.N + 3) / 4 * 4;
  const int64_t slice_bytes = int64_t(p.M) * ldw * int64_t(sizeof(float));
  split = splitk::cap_split(split, slice_bytes);
  const int64_t bytes = split > 1 ? split * slice_bytes : 0;
  if (info) info->workspace_bytes = bytes;
  if (p.workspace_bytes < bytes) return kWorkspaceNeeded;
  float* ws = split > 1 ? static_cast<float*>(p.workspace) : nullptr;
  hopper::Operands ops;
  cudaError_t err = hopper::make_operands(p, T::BM, T::BN, &ops);
  if (err != cudaSuccess) return err;
  const int tiles = hopper::cdiv(p.M, T::BM) * hopper::cdiv(p.N, T::BN);
  const dim3 grid(unsigned(tiles) * unsigned(split));
  using Storage = typename T::template Storage<E>;
  const int smem = hopper::smem_request<Storage>();
  err = tile::dispatch<E>(acc, p.b_col_major, [&](auto acc_c, auto b_col_c) {
    constexpr auto kernel = wgmma_splitk_grid_kernel<E, T, acc_c.value, b_col_c.value>;
    const cudaError_t prepared = tile::prepare_smem(kernel, smem, info);  // opt-in above 48 KB, limit checked
    if (prepared != cudaSuccess) return prepared;
    kernel<<<grid, kThreads, smem, stream>>>(ops.a, ops.b, ws, ldw, p.C, p.ldc, p.M, p.N, p.K, split, ops.pairs);
    return cudaGetLastError();
  });
  if (err != cudaSuccess) return err;
  if (info) {
    *info = LaunchInfo{grid.x, 1, unsigned(kThreads), smem, info->smem_limit, T::BM, T::BN, split};
    info->kernel = "wgmma_splitk_grid";
    info->workspace_bytes = bytes;
  }
  if (ws == nullptr) return cudaSuccess;
  // ---- the reduction, a programmatic dependent launch ----
  return splitk::launch_reduce(static_cast<const float*>(ws), split, ldw, p.C, p.ldc, p.M, p.N, stream);
}

}  // namespace

// ---- HOST: the plan -> workspace -> tensor maps -> launches ----
template <typename E>
cudaError_t launch_wgmma_splitk_grid_plan(const GemmArgsOf<E>& p, Acc acc, cudaStream_t stream, LaunchInfo* info,
                                          hopper::Plan plan) {
  if (plan.bm != 128) return cudaErrorInvalidValue;
  if (plan.bn == 256) return launch_tile<Wide>(p, acc, plan.split, stream, info);
  if (plan.bn == 128) return launch_tile<Medium>(p, acc, plan.split, stream, info);
  if (plan.bn == 64) return launch_tile<Narrow>(p, acc, plan.split, stream, info);
  return cudaErrorInvalidValue;  // persistent-only tiles (GemmArgs::tile 4-8)
}

// As a variant of its own: always this kernel, hopper::choose_grid_split's plan (on an output of a wave of tiles or
// more that is S = 1: one block per tile storing C, no workspace); GemmArgs::plan_tile (1/2/3: 128 x 256/128/64) and
// ::split (1-256) pin it.
template <typename E>
cudaError_t launch_wgmma_splitk_grid(const GemmArgsOf<E>& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  const int force_bn = p.plan_tile == 1 ? 256 : p.plan_tile == 2 ? 128 : p.plan_tile == 3 ? 64 : 0;
  if (p.plan_tile > 3) return cudaErrorInvalidValue;
  return launch_wgmma_splitk_grid_plan(
      p, acc, stream, info, hopper::choose_grid_split(p.M, p.N, p.K, hopper::sm_count(), force_bn, p.split));
}

// The hand-off's entry point (sm90/handoff.h), for wgmma_persistent.cu's translation unit (not where `compare
// inspect` compiles this file for one element type: host/registry.h, HGEMM_ONLY_ELEMENT).
#ifndef HGEMM_ONLY_ELEMENT
template cudaError_t launch_wgmma_splitk_grid_plan<half>(const GemmArgsOf<half>&, Acc, cudaStream_t, LaunchInfo*,
                                                         hopper::Plan);
template cudaError_t launch_wgmma_splitk_grid_plan<__nv_bfloat16>(const GemmArgsOf<__nv_bfloat16>&, Acc,
                                                                  cudaStream_t, LaunchInfo*, hopper::Plan);
#endif

HGEMM_VARIANT_FP16_BF16(wgmma_splitk_grid, launch_wgmma_splitk_grid, RowMajorA);
