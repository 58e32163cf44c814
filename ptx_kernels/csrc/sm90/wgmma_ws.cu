// wgmma_ws.cu — Hopper ladder, step 2: warp specialization. A producer warpgroup feeds two consumer warpgroups.
//
// wgmma_tma.cu's one warpgroup both issues the copies and does the math, so every refill waits for the block
// barrier that proves a stage is free, and its 128 registers of accumulators cap the tile at 128 x 128. Here the
// roles split (ThunderKittens' and fast.cu's producer/consumer layout):
//   warpgroup 0 — producer: gives its registers away (setmaxnreg.dec to 40), one thread issues the TMA loads of
//                 each k-block into a STAGES-deep ring, waiting on empty[s] (per-stage mbarrier) before refilling.
//   warpgroups 1, 2 — consumers: grow to 232 registers (setmaxnreg.inc), each computes 64 rows x 256 of the
//                 128 x 256 tile with m64n256k16 wgmma; each waits on full[s], keeps one wgmma group in flight and
//                 releases a stage (one arrival per warpgroup on empty[s]) as soon as the group reading it is done.
// No block barrier after the prologue: the two sides meet only at the mbarriers. One tile per block.
// Edges: TMA reads zeros outside A and B (M, N and the K tail); the epilogue masks its stores to M x N.
// Element types: fp16 (fp32 or fp16 accumulation) and bf16 (fp32), the template parameter E.
#include "blocks/wgmma_tile.cuh"
#include "host/registry.h"

namespace {

constexpr int BM = 128, BN = 256, STAGES = 4, GROUP_M = 8;
constexpr int kConsumers = BM / 64, kThreads = (1 + kConsumers) * hopper::kWarpgroup;
// 40 + 2 x 232 registers x 128 threads = 64,512 <= 65,536: a consumer's 128 fp32 accumulators plus addressing.
constexpr int kProducerRegs = 40, kConsumerRegs = 232;
template <typename E>
using Storage = hopper::SharedStorage<E, BM, BN, STAGES>;
static_assert(hopper::smem_request<Storage<half>>() <= 227 * 1024, "4 stages of 128x64 A + 256x64 B fit in 227 KB");

template <typename E, Acc ACC, bool B_COL>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_ws_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                     const __grid_constant__ CUtensorMap /*tma_c: stores go from registers*/, E* __restrict__ C,
                     int64_t ldc, int M, int N, int K, bool pairs) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  Storage<E>& ss = hopper::aligned_storage<Storage<E>>(smem_raw);
  const int wg = threadIdx.x / hopper::kWarpgroup, tid = threadIdx.x % hopper::kWarpgroup;
  int tm, tn;
  hopper::tile_coords<GROUP_M>(blockIdx.x, hopper::cdiv(M, BM), hopper::cdiv(N, BN), tm, tn);
  const int kblocks = hopper::cdiv(K, hopper::BK), a_rows = hopper::a_box_rows(M, BM);  // A box: see load_kblock

  // ---- PROLOGUE: barriers ----
  if (threadIdx.x == 0) {
    hopper::init_ring(ss, kConsumers);
  }
  __syncthreads();

  if (wg == 0) {
    // ---- PRODUCER ----
    ptx::setmaxnreg_dec<kProducerRegs>();
    if (tid == 0) {
      int s = 0;
      uint32_t phase = 0;
      hopper::produce_tile<BM, BN, B_COL>(ss, &tma_a, &tma_b, tm * BM, tn * BN, 0, kblocks, a_rows, s,
                                          phase);
    }
  } else {
    // ---- CONSUMERS: MAIN LOOP ----
    ptx::setmaxnreg_inc<kConsumerRegs>();
    hopper::Accum<BN, ACC> acc;
    const int slab = (wg - 1) * 64;  // this warpgroup's rows of the tile
    int s = 0;
    uint32_t phase = 0;
    hopper::mma_tile<BN, B_COL>(ss, acc.d, slab, kblocks, s, phase, [&](int stage) {
      if (tid == 0) ptx::mbarrier_arrive(ptx::smem_u32(&ss.empty[stage]));  // one arrival per warpgroup
    });
    // ---- EPILOGUE ----
    hopper::store_accumulators<BN>(acc.d, C, ldc, M, N, tm * BM + slab, tn * BN, pairs);
  }
}

}  // namespace

// ---- HOST: check -> tensor maps -> launch ----
template <typename E>
cudaError_t launch_wgmma_ws(const GemmArgsOf<E>& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  hopper::Operands ops;
  const cudaError_t err = hopper::make_operands(p, BM, BN, &ops);
  if (err != cudaSuccess) return err;
  const dim3 grid(hopper::cdiv(p.M, BM) * hopper::cdiv(p.N, BN));
  return tile::dispatch<E>(acc, p.b_col_major, [&](auto acc_c, auto b_col_c) {
    constexpr auto kernel = wgmma_ws_kernel<E, acc_c.value, b_col_c.value>;
    return hopper::launch<kernel, Storage<E>>(grid, kThreads, BM, BN, p, ops, stream, info);
  });
}

HGEMM_VARIANT_FP16_BF16(wgmma_ws, launch_wgmma_ws, RowMajorA);
