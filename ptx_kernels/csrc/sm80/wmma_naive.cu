// wmma_naive.cu — the seed's first tensor-core kernel: one warp per 16x16 tile of C, fragments loaded straight
// from global memory with wmma::load_matrix_sync, one wmma::mma_sync (HMMA) per 16-wide K step.
//
// Adds over simt_naive: the tensor cores. Loads stay uncoalesced-ish and nothing is reused across warps.
// Beyond the seed: edge tiles (and misaligned operands) go through a per-warp 16x16 shared-memory staging
// buffer with zero fill, so any M, N, K works; interior tiles load from global as in the seed.
// Measured: docs/design/wmma.md.
#include <mma.h>

#include "blocks/common.cuh"
#include "blocks/epilogue.cuh"
#include "hgemm.cuh"
#include "host/launch.h"

namespace wmma_naive {
using namespace nvcuda;

constexpr int T = 16;  // the WMMA tile: m16n16k16

template <Acc ACC, bool B_COL>
__global__ void __launch_bounds__(32) kernel(GemmArgs p, bool direct_ok) {
  using AccT = typename std::conditional<ACC == Acc::F32, float, half>::type;
  using BLayout = typename std::conditional<B_COL, wmma::col_major, wmma::row_major>::type;
  __shared__ __align__(32) half sA[T * T];      // (m, k) staging for edge tiles
  __shared__ __align__(32) half sB[T * T];      // (k, n), or (n, k) when B is column-major
  __shared__ __align__(32) AccT scratch[T * T]; // epilogue

  const int row0 = blockIdx.y * T, col0 = blockIdx.x * T;
  const int lane = threadIdx.x;
  wmma::fragment<wmma::matrix_a, T, T, T, half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, T, T, T, half, BLayout> b;
  wmma::fragment<wmma::accumulator, T, T, T, AccT> c;
  wmma::fill_fragment(c, static_cast<AccT>(0));

  const int64_t ldb = B_COL ? p.sbn : p.sbk;
  const bool inside_mn = row0 + T <= p.M && col0 + T <= p.N;
  // MAIN LOOP
  for (int k0 = 0; k0 < p.K; k0 += T) {
    const half* ga = p.A + row0 * p.sam + k0;
    const half* gb = B_COL ? p.B + col0 * ldb + k0 : p.B + k0 * ldb + col0;
    if (direct_ok && inside_mn && k0 + T <= p.K) {
      wmma::load_matrix_sync(a, ga, p.sam);
      wmma::load_matrix_sync(b, gb, ldb);
    } else {
      // Each lane stages 8 elements of each tile, zero past the edges.
      for (int e = lane; e < T * T; e += 32) {
        const int r = e / T, q = e % T;
        sA[e] = (row0 + r < p.M && k0 + q < p.K) ? ga[r * p.sam + q] : __float2half(0.f);
        if (B_COL)  // sB is (n, k)
          sB[e] = (col0 + r < p.N && k0 + q < p.K) ? gb[r * ldb + q] : __float2half(0.f);
        else  // sB is (k, n)
          sB[e] = (k0 + r < p.K && col0 + q < p.N) ? gb[r * ldb + q] : __float2half(0.f);
      }
      __syncwarp();
      wmma::load_matrix_sync(a, sA, T);
      wmma::load_matrix_sync(b, sB, T);
      __syncwarp();
    }
    wmma::mma_sync(c, a, b, c);
  }
  // EPILOGUE
  tile::store_fragment(c, scratch, p.C, p.ldc, row0, col0, p.M, p.N, tile::aligned16(p.C) && p.ldc % 8 == 0);
}

}  // namespace wmma_naive

cudaError_t launch_wmma_naive(const GemmArgs& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  using namespace wmma_naive;
  // wmma::load_matrix_sync from global needs a 32-byte aligned pointer and a leading dimension multiple of 8.
  const int64_t ldb = p.b_col_major ? p.sbn : p.sbk;
  const bool direct_ok = (reinterpret_cast<uintptr_t>(p.A) % 32 == 0) && (reinterpret_cast<uintptr_t>(p.B) % 32 == 0) &&
                         p.sam % 8 == 0 && ldb % 8 == 0;
  const dim3 block(32), grid(tile::cdiv(p.N, T), tile::cdiv(p.M, T));
  tile::fill_info(info, grid, block, 0);
  return tile::dispatch(acc, p.b_col_major, [&](auto acc_c, auto b_col_c) {
    kernel<decltype(acc_c)::value, decltype(b_col_c)::value><<<grid, block, 0, stream>>>(p, direct_ok);
    return cudaGetLastError();
  });
}

HGEMM_VARIANT(wmma_naive, launch_wmma_naive, RowMajorA);
