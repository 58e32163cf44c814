// wgmma_tma.cu — Hopper ladder, step 1: TMA loads on mbarriers feeding wgmma, one warpgroup per block.
//
// The mma.sync ladder's pipeline has every thread copy 16 bytes at a time (cp.async) and every warp load its
// fragments from shared memory (ldmatrix) before each mma.sync. On Hopper both jobs leave the threads:
//   - one thread issues a TMA box per operand and k-block (cp.async.bulk.tensor); the copy engine writes the
//     128-byte-swizzled tile and counts its bytes down on the stage's mbarrier (full[s]);
//   - wgmma.mma_async reads A and B straight from shared memory through 64-bit descriptors, for a whole
//     warpgroup (4 warps) at once: m64n128k16 per instruction, no fragments in registers but the accumulators.
// Tile 128 x 128 x 64, 4 stages: the warpgroup owns both 64-row slabs (2 x 64 fp32 accumulators a thread).
// A stage is refilled once every warp's wgmma reading it has completed (wgmma.wait_group 0, then the block barrier):
// the copies run STAGES - 1 k-blocks ahead, but the math waits for its own groups each k-block.
// Edges: TMA reads zeros outside A and B (M, N and the K tail); the epilogue masks its stores to M x N.
// Element types: fp16 (fp32 or fp16 accumulation) and bf16 (fp32), the template parameter E.
#include "blocks/wgmma_tile.cuh"
#include "host/registry.h"

namespace {

constexpr int BM = 128, BN = 128, STAGES = 4, GROUP_M = 8;
constexpr int kThreads = hopper::kWarpgroup;
template <typename E>
using Storage = hopper::SharedStorage<E, BM, BN, STAGES>;

template <typename E, Acc ACC, bool B_COL>
__global__ void __launch_bounds__(kThreads)
    wgmma_tma_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                     const __grid_constant__ CUtensorMap /*tma_c: stores go from registers*/, E* __restrict__ C,
                     int64_t ldc, int M, int N, int K, bool pairs) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  Storage<E>& ss = hopper::aligned_storage<Storage<E>>(smem_raw);
  int tm, tn;
  hopper::tile_coords<GROUP_M>(blockIdx.x, hopper::cdiv(M, BM), hopper::cdiv(N, BN), tm, tn);
  const int kblocks = hopper::cdiv(K, hopper::BK), a_rows = hopper::a_box_rows(M, BM);  // A box: see load_kblock

  // ---- PROLOGUE: barriers, the first STAGES k-blocks in flight ----
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) ptx::mbarrier_init(ptx::smem_u32(&ss.full[s]), 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int kb = 0; kb < STAGES && kb < kblocks; ++kb)
      hopper::load_kblock<BM, BN, B_COL>(ss, kb, &tma_a, &tma_b, tm * BM, tn * BN, kb * hopper::BK, a_rows);
  }

  // ---- MAIN LOOP ----
  hopper::Accum<BN, ACC> top, bottom;  // rows 0-63 and 64-127 of the tile
  for (int kb = 0; kb < kblocks; ++kb) {
    const int s = kb % STAGES;
    ptx::mbarrier_wait_parity(ptx::smem_u32(&ss.full[s]), (kb / STAGES) & 1);
    ptx::wgmma_fence();
    hopper::mma_kblock<BN, B_COL>(top.d, ss.A[s], ss.B[s], kb > 0);
    hopper::mma_kblock<BN, B_COL>(bottom.d, ss.A[s] + 64 * hopper::BK, ss.B[s], kb > 0);
    ptx::wgmma_commit_group();
    ptx::wgmma_wait_group<0>();
    __syncthreads();  // every warp's wgmma has read stage s
    if (threadIdx.x == 0 && kb + STAGES < kblocks)
      hopper::load_kblock<BM, BN, B_COL>(ss, s, &tma_a, &tma_b, tm * BM, tn * BN, (kb + STAGES) * hopper::BK,
                                         a_rows);
  }
  ptx::fence_operands(top.d);
  ptx::fence_operands(bottom.d);

  // ---- EPILOGUE ----
  hopper::store_accumulators<BN>(top.d, C, ldc, M, N, tm * BM, tn * BN, pairs);
  hopper::store_accumulators<BN>(bottom.d, C, ldc, M, N, tm * BM + 64, tn * BN, pairs);
}

}  // namespace

// ---- HOST: check -> tensor maps -> launch ----
template <typename E>
cudaError_t launch_wgmma_tma(const GemmArgsOf<E>& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  hopper::Operands ops;
  const cudaError_t err = hopper::make_operands(p, BM, BN, &ops);
  if (err != cudaSuccess) return err;
  const dim3 grid(hopper::cdiv(p.M, BM) * hopper::cdiv(p.N, BN));
  return tile::dispatch<E>(acc, p.b_col_major, [&](auto acc_c, auto b_col_c) {
    constexpr auto kernel = wgmma_tma_kernel<E, acc_c.value, b_col_c.value>;
    return hopper::launch<kernel, Storage<E>>(grid, kThreads, BM, BN, p, ops, stream, info);
  });
}

HGEMM_VARIANT_FP16_BF16(wgmma_tma, launch_wgmma_tma, RowMajorA);
