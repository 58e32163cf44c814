// mma_naive.cu — the seed's mma.sync kernel: one warp per 16x8 tile of C; per 16-wide K step, the A (16x16) and
// B (16x8) tiles are staged in shared memory, A reaches registers with ldmatrix.x4 and B with ldmatrix.x2
// (.trans when B is row-major), and one mma.sync.m16n8k16 accumulates. C is staged through shared memory.
//
// Adds over wmma_naive: the instruction level under WMMA — fragment registers the program owns, whose layouts
// (ptx_kernels/layouts.py, tests/test_layouts.py) it addresses itself. Beyond the seed: any M, N, K (zero-filled
// staging, guarded stores), B in either layout, fp32 or fp16 accumulation.
// Measured: docs/design/mma.md.
#include "blocks/common.cuh"
#include "blocks/fragments.cuh"
#include "hgemm.cuh"
#include "host/launch.h"

namespace mma_naive {

template <Acc ACC, bool B_COL>
__global__ void __launch_bounds__(32) kernel(GemmArgs p) {
  using AccT = typename std::conditional<ACC == Acc::F32, float, half>::type;
  __shared__ __align__(16) half sA[16 * 16];  // (m, k)
  __shared__ __align__(16) half sB[16 * 8];   // (k, n), or (n, k) as 8 x 16 when B is column-major
  __shared__ __align__(16) AccT sC[16 * 8];   // (m, n)
  const int lane = threadIdx.x;
  const int row0 = blockIdx.y * 16, col0 = blockIdx.x * 8;
  const int64_t ldb = B_COL ? p.sbn : p.sbk;
  tile::MmaAcc<ACC> c;

  // MAIN LOOP
  for (int k0 = 0; k0 < p.K; k0 += 16) {
    for (int e = lane; e < 256; e += 32) {
      const int r = e / 16, q = e % 16;
      sA[e] = (row0 + r < p.M && k0 + q < p.K) ? p.A[(row0 + r) * p.sam + k0 + q] : __float2half(0.f);
    }
    for (int e = lane; e < 128; e += 32) {
      if (B_COL) {  // (n, k): 8 rows of 16
        const int n = e / 16, k = e % 16;
        sB[e] = (col0 + n < p.N && k0 + k < p.K) ? p.B[(col0 + n) * ldb + k0 + k] : __float2half(0.f);
      } else {  // (k, n): 16 rows of 8
        const int k = e / 8, n = e % 8;
        sB[e] = (k0 + k < p.K && col0 + n < p.N) ? p.B[(k0 + k) * ldb + col0 + n] : __float2half(0.f);
      }
    }
    __syncwarp();
    uint32_t a[4], b[2];
    tile::ldsm_a(a, sA, 0, 0, 16);
    tile::ldsm_b<B_COL>(b, sB, B_COL ? 16 : 8);
    c.mma(a, b);
    __syncwarp();  // the next step overwrites the staging tiles
  }

  // EPILOGUE: registers -> shared (by the accumulator layout) -> guarded global stores
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const half2 v = c.pair(i);
    sC[(g + 8 * i) * 8 + 2 * t] = static_cast<AccT>(__low2float(v));
    sC[(g + 8 * i) * 8 + 2 * t + 1] = static_cast<AccT>(__high2float(v));
  }
  __syncwarp();
  for (int e = lane; e < 128; e += 32) {
    const int r = e / 8, n = e % 8;
    if (row0 + r < p.M && col0 + n < p.N) p.C[(row0 + r) * p.ldc + col0 + n] = static_cast<half>(sC[e]);
  }
}

}  // namespace mma_naive

cudaError_t launch_mma_naive(const GemmArgs& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  using namespace mma_naive;
  const dim3 block(32), grid(tile::cdiv(p.N, 8), tile::cdiv(p.M, 16));
  tile::fill_info(info, grid, block, 0);
  return tile::dispatch(acc, p.b_col_major, [&](auto acc_c, auto b_col_c) {
    kernel<decltype(acc_c)::value, decltype(b_col_c)::value><<<grid, block, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

HGEMM_VARIANT(mma_naive, launch_mma_naive, RowMajorA);
