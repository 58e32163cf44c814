// wmma_async_dbuf.cu — seed "optimisation 3": wmma_regtile's 128x128 block and 4x2 fragments per warp, with
// cp.async double buffering: while the warps compute on one shared-memory stage, the copy engine fills the other.
//
// Adds over wmma_regtile: asynchronous global->shared copies (LDGSTS) overlapped with the MMAs, and rows padded
// by 8 halves (16 bytes) so the eight 16-byte row segments a fragment load touches fall in different banks.
// Edges: cp.async's src-size operand zero-fills what lies past M, N or K. Needs 16-byte aligned rows
// (the Python wrapper makes an aligned copy otherwise, and says so).
// Measured: docs/design/wmma.md.
#include <mma.h>

#include "blocks/common.cuh"
#include "blocks/copy.cuh"
#include "blocks/epilogue.cuh"
#include "blocks/fragments.cuh"
#include "hgemm.cuh"
#include "host/launch.h"
#include "ptx/cp_async.cuh"

namespace wmma_async_dbuf {
using namespace nvcuda;

constexpr int WARPS_M = 2, WARPS_N = 4;
constexpr int FM = 4, FN = 2;
constexpr int BM = WARPS_M * FM * 16, BN = WARPS_N * FN * 16, BK = 16;
constexpr int PAD = 8;  // halves: a 16-byte skew per row
constexpr int THREADS = 32 * WARPS_M * WARPS_N;

template <Acc ACC, bool B_COL>
__global__ void __launch_bounds__(THREADS) kernel(GemmArgs p) {
  using AccT = typename std::conditional<ACC == Acc::F32, float, half>::type;
  constexpr int LDA = BK + PAD;
  constexpr int B_ROWS = B_COL ? BN : BK, LDB = (B_COL ? BK : BN) + PAD;
  __shared__ __align__(128) half sA[2][BM * LDA];      // (stage, m, k)
  __shared__ __align__(128) half sB[2][B_ROWS * LDB];  // (stage, k, n), or (stage, n, k) when B is column-major
  __shared__ __align__(32) AccT scratch[THREADS / 32][16 * 16];

  const int warp = threadIdx.x / 32, wm = warp / WARPS_N, wn = warp % WARPS_N;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const int64_t ldb = B_COL ? p.sbn : p.sbk;
  const int kt_count = tile::cdiv(p.K, BK);
  auto load_stage = [&](int stage, int kt) {
    const int k0 = kt * BK;
    tile::cp_async_tile<BM, BK, THREADS, LDA>(sA[stage], p.A + row0 * p.sam + k0, p.sam, p.M - row0, p.K - k0, p.A);
    if (B_COL)
      tile::cp_async_tile<BN, BK, THREADS, LDB>(sB[stage], p.B + col0 * ldb + k0, ldb, p.N - col0, p.K - k0, p.B);
    else
      tile::cp_async_tile<BK, BN, THREADS, LDB>(sB[stage], p.B + k0 * ldb + col0, ldb, p.K - k0, p.N - col0, p.B);
    ptx::cp_async_commit();
  };
  wmma::fragment<wmma::accumulator, 16, 16, 16, AccT> c[FM][FN];
  tile::fill_warp_tile(c);

  // PROLOGUE
  load_stage(0, 0);
  // MAIN LOOP: stage kt & 1 is computed while stage (kt + 1) & 1 is in flight.
  for (int kt = 0; kt < kt_count; ++kt) {
    if (kt + 1 < kt_count) {
      load_stage((kt + 1) & 1, kt + 1);
      ptx::cp_async_wait<1>();
    } else {
      ptx::cp_async_wait<0>();
    }
    __syncthreads();
    const half* a = sA[kt & 1] + wm * FM * 16 * LDA;
    const half* b = B_COL ? sB[kt & 1] + wn * FN * 16 * LDB : sB[kt & 1] + wn * FN * 16;
    tile::wmma_warp_step<FM, FN, B_COL>(c, a, LDA, b, LDB);
    __syncthreads();  // the next iteration's copy overwrites this stage
  }
  // EPILOGUE
  tile::store_warp_tile<FM, FN>(c, scratch[warp], p, row0 + wm * FM * 16, col0 + wn * FN * 16);
}

}  // namespace wmma_async_dbuf

cudaError_t launch_wmma_async_dbuf(const GemmArgs& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  using namespace wmma_async_dbuf;
  if (!tile::rows_aligned16(p)) return cudaErrorMisalignedAddress;
  const dim3 block(THREADS), grid(tile::cdiv(p.N, BN), tile::cdiv(p.M, BM));
  tile::fill_info(info, grid, block, 0);
  return tile::dispatch(acc, p.b_col_major, [&](auto acc_c, auto b_col_c) {
    kernel<decltype(acc_c)::value, decltype(b_col_c)::value><<<grid, block, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

HGEMM_VARIANT(wmma_async_dbuf, launch_wmma_async_dbuf, RowMajorA);
