// wmma_regtile.cu — seed "optimisation 2": a 128x128 block tile; 8 warps (2 along M x 4 along N) each compute a
// 4x2 grid of 16x16 fragments (a 64x32 warp tile) held in registers.
//
// Adds over wmma_smem: register tiling. Each A fragment loaded from shared memory feeds 2 MMAs and each B
// fragment 4, and a block reuses each global element across 128 rows/columns instead of 64/32. Still
// synchronous loads with BK = 16 (the seed's), so the tensor cores wait on global memory every step.
// Measured: docs/design/wmma.md.
#include <mma.h>

#include "blocks/copy.cuh"
#include "blocks/epilogue.cuh"
#include "blocks/fragments.cuh"
#include "hgemm.cuh"
#include "host/launch.h"

namespace wmma_regtile {
using namespace nvcuda;

constexpr int WARPS_M = 2, WARPS_N = 4;
constexpr int FM = 4, FN = 2;  // fragments per warp along M and N
constexpr int BM = WARPS_M * FM * 16, BN = WARPS_N * FN * 16, BK = 16;
constexpr int THREADS = 32 * WARPS_M * WARPS_N;
static_assert(BM == 128 && BN == 128, "the seed's 128x128 block tile");

template <Acc ACC, bool B_COL>
__global__ void __launch_bounds__(THREADS) kernel(GemmArgs p, bool vec_ok) {
  using AccT = typename std::conditional<ACC == Acc::F32, float, half>::type;
  constexpr int B_ROWS = B_COL ? BN : BK, B_COLS = B_COL ? BK : BN;
  __shared__ __align__(32) half sA[BM * BK];          // (m, k)
  __shared__ __align__(32) half sB[B_ROWS * B_COLS];  // (k, n), or (n, k) when B is column-major
  __shared__ __align__(32) AccT scratch[THREADS / 32][16 * 16];

  const int warp = threadIdx.x / 32, wm = warp / WARPS_N, wn = warp % WARPS_N;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const int64_t ldb = B_COL ? p.sbn : p.sbk;
  wmma::fragment<wmma::accumulator, 16, 16, 16, AccT> c[FM][FN];
  tile::fill_warp_tile(c);

  // MAIN LOOP
  for (int k0 = 0; k0 < p.K; k0 += BK) {
    tile::load_operands_sync<BM, BN, BK, THREADS, B_COL>(sA, sB, p, ldb, row0, col0, k0, vec_ok);
    __syncthreads();
    tile::wmma_warp_step<FM, FN, B_COL>(c, sA + wm * FM * 16 * BK, BK,
                                        B_COL ? sB + wn * FN * 16 * BK : sB + wn * FN * 16, B_COLS);
    __syncthreads();
  }
  // EPILOGUE
  tile::store_warp_tile<FM, FN>(c, scratch[warp], p, row0 + wm * FM * 16, col0 + wn * FN * 16);
}

}  // namespace wmma_regtile

cudaError_t launch_wmma_regtile(const GemmArgs& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  using namespace wmma_regtile;
  return tile::launch_tiled<BM, BN, THREADS>(p, acc, stream, info, [](auto acc_c, auto b_col_c) {
    return kernel<decltype(acc_c)::value, decltype(b_col_c)::value>;
  });
}

HGEMM_VARIANT(wmma_regtile, launch_wmma_regtile, RowMajorA);
