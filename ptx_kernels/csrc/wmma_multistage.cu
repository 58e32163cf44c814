// wmma_multistage.cu — beyond the seed: the best WMMA kernel we could make.
//
// Adds over wmma_async_dbuf: a STAGES-deep cp.async pipeline (STAGES-1 tiles in flight while one is computed,
// one barrier per K step), BK = 32, 64x64 warp tiles (4x4 fragments: every fragment loaded from shared memory
// feeds 4 MMAs), dynamic shared memory above 48 KB, and grouped block rasterization so that neighbouring blocks
// share operand tiles in L2.
//
// Tile chosen by measurement (scripts/tune_wmma_multistage.cu on the H100, NN, fp32 accumulation, TFLOPS and
// ratio to cuBLAS in the same process): 128x128x32 with 2x2 warps and 4 stages, 310 (0.41x) at 4096^3 and 322
// (0.43x) at 8192^3, two blocks per SM; 128x256x32 with 2x4 warps gave 278 / 252, 128x256x64 (3 stages)
// 295 / 296, 256x128x32 257 / 255, 128x128x32 with 2x4 warps (64x32 warp tiles) 188 / 190. All of them sit
// far below the mma.sync ceiling: the WMMA API hides the fragment registers, so loads for the next k-step cannot
// be scheduled ahead of the barrier; the mma.sync ladder (mma_*.cu) takes that control.
// Edges: cp.async zero-fill as in wmma_async_dbuf; needs 16-byte aligned rows.
#include <mma.h>

#include "hgemm.cuh"
#include "tile_io.cuh"

namespace wmma_multistage {
using namespace nvcuda;

// A tile configuration: block tile BM x BN x BK, a WARPS_M x WARPS_N grid of warps, STAGES-deep pipeline.
template <int BM_, int BN_, int BK_, int WARPS_M_, int WARPS_N_, int STAGES_>
struct Tile {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_, STAGES = STAGES_;
  static constexpr int FM = BM / (WARPS_M * 16), FN = BN / (WARPS_N * 16);  // fragments per warp
  static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
  static constexpr int PAD = 8;  // halves: rows skewed by 16 bytes, so ldmatrix's 8 row reads hit distinct banks
  static constexpr int LDA = BK + PAD;
  static_assert(FM * WARPS_M * 16 == BM && FN * WARPS_N * 16 == BN && BK % 16 == 0, "tiles of 16x16 fragments");
  static_assert(STAGES >= 2, "a pipeline needs two stages");
};

// The configuration the variant ships (chosen by the sweep in scripts/tune_wmma_multistage.cu, see the header).
using Shipped = Tile<128, 128, 32, 2, 2, 4>;
constexpr int GROUP_M = 8;

template <class T, bool B_COL>
struct Smem {
  static constexpr int B_ROWS = B_COL ? T::BN : T::BK, LDB = (B_COL ? T::BK : T::BN) + T::PAD;
  static constexpr int A_STAGE = T::BM * T::LDA, B_STAGE = B_ROWS * LDB;  // halves
  static constexpr int BYTES = T::STAGES * (A_STAGE + B_STAGE) * 2;
  static_assert((A_STAGE * 2) % 128 == 0 && (B_STAGE * 2) % 128 == 0, "stages stay 128-byte aligned");
};

template <class T, Acc ACC, bool B_COL>
__global__ void __launch_bounds__(T::THREADS, 1) kernel(GemmArgs p) {
  using AccT = typename std::conditional<ACC == Acc::F32, float, half>::type;
  using S = Smem<T, B_COL>;
  constexpr int BM = T::BM, BN = T::BN, BK = T::BK, FM = T::FM, FN = T::FN, LDA = T::LDA, STAGES = T::STAGES;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  half* sA = reinterpret_cast<half*>(smem_raw);  // (stage, m, k)
  half* sB = sA + STAGES * S::A_STAGE;            // (stage, k, n), or (stage, n, k) when B is column-major

  const int warp = threadIdx.x / 32, wm = warp / T::WARPS_N, wn = warp % T::WARPS_N;
  int tm, tn;
  tile::grouped_tile(blockIdx.x, tile::cdiv(p.M, BM), tile::cdiv(p.N, BN), GROUP_M, tm, tn);
  const int row0 = tm * BM, col0 = tn * BN;
  const int64_t ldb = B_COL ? p.sbn : p.sbk;
  const int kt_count = tile::cdiv(p.K, BK);
  auto load_stage = [&](int kt) {
    const int k0 = kt * BK, stage = kt % STAGES;
    if (kt < kt_count) {
      tile::cp_async_tile<BM, BK, T::THREADS, LDA>(sA + stage * S::A_STAGE, p.A + row0 * p.sam + k0, p.sam,
                                                   p.M - row0, p.K - k0, p.A);
      if (B_COL)
        tile::cp_async_tile<BN, BK, T::THREADS, S::LDB>(sB + stage * S::B_STAGE, p.B + col0 * ldb + k0, ldb,
                                                        p.N - col0, p.K - k0, p.B);
      else
        tile::cp_async_tile<BK, BN, T::THREADS, S::LDB>(sB + stage * S::B_STAGE, p.B + k0 * ldb + col0, ldb,
                                                        p.K - k0, p.N - col0, p.B);
    }
    ptx::cp_async_commit();  // an empty group past the end keeps the wait count uniform
  };
  wmma::fragment<wmma::accumulator, 16, 16, 16, AccT> c[FM][FN];
  tile::fill_warp_tile(c);

  // PROLOGUE: STAGES - 1 tiles in flight.
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) load_stage(s);

  // MAIN LOOP
  for (int kt = 0; kt < kt_count; ++kt) {
    ptx::cp_async_wait<STAGES - 2>();  // tile kt has landed (for this thread's copies)
    __syncthreads();                   // ... for every thread's; and everyone is done with tile kt - 1's stage
    load_stage(kt + STAGES - 1);       // refill the stage tile kt - 1 used
    const int stage = kt % STAGES;
    const half* a = sA + stage * S::A_STAGE + wm * FM * 16 * LDA;
    const half* b = sB + stage * S::B_STAGE + (B_COL ? wn * FN * 16 * S::LDB : wn * FN * 16);
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16)
      tile::wmma_warp_step<FM, FN, B_COL>(c, a + kk, LDA, B_COL ? b + kk : b + kk * S::LDB, S::LDB);
  }

  // EPILOGUE: the pipeline's shared memory becomes the per-warp scratch.
  ptx::cp_async_wait<0>();
  __syncthreads();
  AccT* scratch = reinterpret_cast<AccT*>(smem_raw) + warp * 16 * 16;
  tile::store_warp_tile<FM, FN>(c, scratch, p, row0 + wm * FM * 16, col0 + wn * FN * 16);
}

template <class T, Acc ACC, bool B_COL>
cudaError_t launch(const GemmArgs& p, cudaStream_t stream, LaunchInfo* info) {
  constexpr int bytes = Smem<T, B_COL>::BYTES;
  cudaError_t err = tile::prepare_smem(kernel<T, ACC, B_COL>, bytes, info);
  if (err != cudaSuccess) return err;
  const dim3 block(T::THREADS), grid(tile::cdiv(p.M, T::BM) * tile::cdiv(p.N, T::BN));
  tile::fill_info(info, grid, block, bytes);
  kernel<T, ACC, B_COL><<<grid, block, bytes, stream>>>(p);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_tile(const GemmArgs& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  if (!tile::rows_aligned16(p)) return cudaErrorMisalignedAddress;
  return tile::dispatch(acc, p.b_col_major, [&](auto acc_c, auto b_col_c) {
    return launch<T, decltype(acc_c)::value, decltype(b_col_c)::value>(p, stream, info);
  });
}

}  // namespace wmma_multistage

cudaError_t launch_wmma_multistage(const GemmArgs& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  return wmma_multistage::launch_tile<wmma_multistage::Shipped>(p, acc, stream, info);
}
