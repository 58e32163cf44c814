// wmma_smem.cu — seed "optimisation 1": 8 warps per block (4 along M x 2 along N), each owning one 16x16 tile of
// a 64x32 block tile; the block stages its A (64x16) and B (16x32) tiles in shared memory once per K step and
// every warp loads its fragments from there.
//
// Adds over wmma_naive: reuse through shared memory (each A element is read from global once per block instead
// of once per warp) and coalesced 16-byte loads. Still synchronous: load, barrier, compute, barrier.
// Measured: docs/design/wmma.md.
#include <mma.h>

#include "blocks/common.cuh"
#include "blocks/copy.cuh"
#include "blocks/epilogue.cuh"
#include "hgemm.cuh"
#include "host/launch.h"

namespace wmma_smem {
using namespace nvcuda;

constexpr int T = 16;
constexpr int WARPS_M = 4, WARPS_N = 2;  // the seed's 2x4 warp grid, one fragment per warp
constexpr int BM = WARPS_M * T, BN = WARPS_N * T, BK = T;
constexpr int THREADS = 32 * WARPS_M * WARPS_N;

template <Acc ACC, bool B_COL>
__global__ void __launch_bounds__(THREADS) kernel(GemmArgs p, bool vec_ok) {
  using AccT = typename std::conditional<ACC == Acc::F32, float, half>::type;
  using BLayout = typename std::conditional<B_COL, wmma::col_major, wmma::row_major>::type;
  constexpr int B_ROWS = B_COL ? BN : BK, B_COLS = B_COL ? BK : BN;
  __shared__ __align__(32) half sA[BM * BK];          // (m, k)
  __shared__ __align__(32) half sB[B_ROWS * B_COLS];  // (k, n), or (n, k) when B is column-major
  __shared__ __align__(32) AccT scratch[THREADS / 32][T * T];

  const int warp = threadIdx.x / 32, wm = warp / WARPS_N, wn = warp % WARPS_N;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const int64_t ldb = B_COL ? p.sbn : p.sbk;
  wmma::fragment<wmma::matrix_a, T, T, T, half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, T, T, T, half, BLayout> b;
  wmma::fragment<wmma::accumulator, T, T, T, AccT> c;
  wmma::fill_fragment(c, static_cast<AccT>(0));

  // MAIN LOOP
  for (int k0 = 0; k0 < p.K; k0 += BK) {
    tile::load_operands_sync<BM, BN, BK, THREADS, B_COL>(sA, sB, p, ldb, row0, col0, k0, vec_ok);
    __syncthreads();
    wmma::load_matrix_sync(a, sA + wm * T * BK, BK);
    if (B_COL)
      wmma::load_matrix_sync(b, sB + wn * T * BK, BK);
    else
      wmma::load_matrix_sync(b, sB + wn * T, BN);
    wmma::mma_sync(c, a, b, c);
    __syncthreads();
  }
  // EPILOGUE
  tile::store_fragment(c, scratch[warp], p.C, p.ldc, row0 + wm * T, col0 + wn * T, p.M, p.N,
                       tile::aligned16(p.C) && p.ldc % 8 == 0);
}

}  // namespace wmma_smem

cudaError_t launch_wmma_smem(const GemmArgs& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  using namespace wmma_smem;
  return tile::launch_tiled<BM, BN, THREADS>(p, acc, stream, info, [](auto acc_c, auto b_col_c) {
    return kernel<decltype(acc_c)::value, decltype(b_col_c)::value>;
  });
}

HGEMM_VARIANT(wmma_smem, launch_wmma_smem, RowMajorA);
