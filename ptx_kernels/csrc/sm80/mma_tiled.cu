// mma_tiled.cu — block and warp tiling on mma.sync: a 128x128x32 block tile, 8 warps (2 along M x 4 along N)
// each computing a 64x32 warp tile = 4 x 4 m16n8 accumulators. Per 16-wide k-step a warp loads 4 A fragments
// (ldmatrix.x4) and 4 B fragments (two ldmatrix.x4, .trans for row-major B) and issues 16 mma.sync: each
// fragment feeds 4 MMAs.
//
// Adds over mma_naive: reuse. Loads stay synchronous and shared memory unpadded (the bank conflicts this leaves
// are what mma_swizzle removes); the pipeline comes in mma_multistage.
// Measured: docs/design/mma.md.
#include "blocks/copy.cuh"
#include "blocks/epilogue.cuh"
#include "blocks/fragments.cuh"
#include "hgemm.cuh"
#include "host/launch.h"

namespace mma_tiled {

constexpr int BM = 128, BN = 128, BK = 32;
constexpr int WARPS_M = 2, WARPS_N = 4;
constexpr int MI = BM / WARPS_M / 16, NI = BN / WARPS_N / 8;  // 4 x 4 m16n8 tiles per warp
constexpr int THREADS = 32 * WARPS_M * WARPS_N;
static_assert(NI % 2 == 0, "B fragments are loaded in pairs");

template <Acc ACC, bool B_COL>
__global__ void __launch_bounds__(THREADS) kernel(GemmArgs p, bool vec_ok) {
  constexpr int B_ROWS = B_COL ? BN : BK, LDB = B_COL ? BK : BN;
  __shared__ __align__(128) half sA[BM * BK];      // (m, k)
  __shared__ __align__(128) half sB[B_ROWS * LDB];  // (k, n), or (n, k) when B is column-major
  const int warp = threadIdx.x / 32, wm = warp / WARPS_N, wn = warp % WARPS_N;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const int64_t ldb = B_COL ? p.sbn : p.sbk;
  tile::MmaAcc<ACC> c[MI][NI];

  // MAIN LOOP
  for (int k0 = 0; k0 < p.K; k0 += BK) {
    tile::load_operands_sync<BM, BN, BK, THREADS, B_COL>(sA, sB, p, ldb, row0, col0, k0, vec_ok);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      uint32_t a[MI][4], b[NI][2];
#pragma unroll
      for (int i = 0; i < MI; ++i) tile::ldsm_a(a[i], sA, wm * MI * 16 + i * 16, kk, BK);
#pragma unroll
      for (int j = 0; j < NI; j += 2) tile::ldsm_b2<B_COL>(b[j], b[j + 1], sB, kk, wn * NI * 8 + j * 8, LDB);
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j) c[i][j].mma(a[i], b[j]);
    }
    __syncthreads();
  }

  // EPILOGUE: straight from registers, 4-byte stores
  tile::store_warp_acc(c, p, row0 + wm * MI * 16, col0 + wn * NI * 8);
}

}  // namespace mma_tiled

cudaError_t launch_mma_tiled(const GemmArgs& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  using namespace mma_tiled;
  return tile::launch_tiled<BM, BN, THREADS>(p, acc, stream, info, [](auto acc_c, auto b_col_c) {
    return kernel<decltype(acc_c)::value, decltype(b_col_c)::value>;
  });
}

HGEMM_VARIANT(mma_tiled, launch_mma_tiled, RowMajorA);
