// wmma_multistage.cu — beyond the seed: the best WMMA kernel we could make.
//
// Adds over wmma_async_dbuf: a STAGES-deep cp.async pipeline (STAGES-1 tiles in flight while one is computed,
// one barrier per tile) whose copies cost a few instructions each (tile::OperandLoads: pointers advance, edges
// are masks, no branch), 64x64 warp tiles (4x4 fragments: every fragment loaded from shared memory feeds 4
// MMAs), fragments double-buffered in registers (the next k-step's load_matrix_sync issued before this one's
// mma_sync, across tiles too), dynamic shared memory above 48 KB, two blocks per SM, and grouped block
// rasterization so that neighbouring blocks share operand tiles in L2.
//
// Tile chosen by measurement (scripts/tune_wmma_multistage.cu on the H100, NN, TFLOPS and ratio to cuBLAS in the
// same process), fp32 accumulation at 4096^3 / 8192^3: 128x128x64 with 2x2 warps, 3 stages, 2 blocks per SM
// 312 / 334 (0.42x / 0.45x); 128x128x32 4 stages 308 / 286; 128x256x32 with 2x4 warps 308 / 298; 256x128x32
// 276 / 287. With fp16 accumulation 128x256x32 reaches 393 / 388 (0.53x / 0.52x). WMMA compiles to the same
// HMMA.16816 and LDSM as the mma.sync ladder; what it cannot do is choose the shared-memory layout its
// load_matrix_sync reads (rows are padded instead of swizzled) or shape the fragments' registers, and the fp32
// accumulators of a 64x64 warp tile leave no registers for larger tiles.
// Edges: cp.async zero-fill as in wmma_async_dbuf; needs 16-byte aligned rows.
// Measured (docs/results/h100, `python -m compare` on the H100 at 7f0d87c, 4096^3 NN, fp32 accumulation):
//   312.4 TFLOPS (0.413x, 48% of the mma.sync ceiling), 1.26x wmma_async_dbuf.
#include <mma.h>

#include "hgemm.cuh"
#include "tile_io.cuh"

namespace wmma_multistage {
using namespace nvcuda;

// A tile configuration: block tile BM x BN x BK, a WARPS_M x WARPS_N grid of warps, STAGES-deep pipeline,
// MIN_BLOCKS resident blocks per SM asked of the compiler (__launch_bounds__: registers <= 64K / (MIN_BLOCKS *
// THREADS)).
template <int BM_, int BN_, int BK_, int WARPS_M_, int WARPS_N_, int STAGES_, int MIN_BLOCKS_ = 1>
struct Tile {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_, STAGES = STAGES_;
  static constexpr int MIN_BLOCKS = MIN_BLOCKS_;
  static constexpr int FM = BM / (WARPS_M * 16), FN = BN / (WARPS_N * 16);  // fragments per warp
  static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
  static constexpr int PAD = 8;  // halves: rows skewed by 16 bytes, so ldmatrix's 8 row reads hit distinct banks
  static constexpr int LDA = BK + PAD;
  static_assert(FM * WARPS_M * 16 == BM && FN * WARPS_N * 16 == BN && BK % 16 == 0, "tiles of 16x16 fragments");
  static_assert(STAGES >= 2, "a pipeline needs two stages");
  static constexpr int KSTEPS = BK / 16;
  static_assert(KSTEPS % 2 == 0, "the two fragment buffers alternate across tiles: an even number of k-steps");
};

// The configuration the variant ships (chosen by the sweep in scripts/tune_wmma_multistage.cu, see the header).
using Shipped = Tile<128, 128, 64, 2, 2, 3, 2>;
constexpr int GROUP_M = 8;

template <class T, bool B_COL>
struct Smem {
  static constexpr int B_ROWS = B_COL ? T::BN : T::BK, LDB = (B_COL ? T::BK : T::BN) + T::PAD;
  static constexpr int A_STAGE = T::BM * T::LDA, B_STAGE = B_ROWS * LDB;  // halves
  static constexpr int BYTES = T::STAGES * (A_STAGE + B_STAGE) * 2;
  static_assert((A_STAGE * 2) % 128 == 0 && (B_STAGE * 2) % 128 == 0, "stages stay 128-byte aligned");
};

template <class T, Acc ACC, bool B_COL>
__global__ void __launch_bounds__(T::THREADS, T::MIN_BLOCKS) kernel(GemmArgs p) {
  using AccT = typename std::conditional<ACC == Acc::F32, float, half>::type;
  using S = Smem<T, B_COL>;
  constexpr int BM = T::BM, BN = T::BN, BK = T::BK, FM = T::FM, FN = T::FN, LDA = T::LDA, STAGES = T::STAGES;
  constexpr int KSTEPS = T::KSTEPS;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  half* sA = reinterpret_cast<half*>(smem_raw);  // (stage, m, k)
  half* sB = sA + STAGES * S::A_STAGE;            // (stage, k, n), or (stage, n, k) when B is column-major

  const int warp = threadIdx.x / 32, wm = warp / T::WARPS_N, wn = warp % T::WARPS_N;
  int tm, tn;
  tile::grouped_tile(blockIdx.x, tile::cdiv(p.M, BM), tile::cdiv(p.N, BN), GROUP_M, tm, tn);
  const int row0 = tm * BM, col0 = tn * BN;
  const int kt_count = tile::cdiv(p.K, BK);
  tile::OperandLoads<BM, BN, BK, T::THREADS, LDA, S::LDB, tile::Plain, tile::Plain, B_COL, STAGES> loads(
      p, row0, col0, sA, sB);
  static_assert(decltype(loads)::A_STAGE_BYTES == S::A_STAGE * 2 && decltype(loads)::B_STAGE_BYTES == S::B_STAGE * 2,
                "the loader's stages are the kernel's");
  wmma::fragment<wmma::accumulator, 16, 16, 16, AccT> c[FM][FN];
  tile::fill_warp_tile(c);

  // Where the warp's operands of tile stage `stage`, k-step kk, start.
  auto warp_a = [&](int stage, int kk) { return sA + stage * S::A_STAGE + wm * FM * 16 * LDA + kk; };
  auto warp_b = [&](int stage, int kk) {
    const half* b = sB + stage * S::B_STAGE + (B_COL ? wn * FN * 16 * S::LDB : wn * FN * 16);
    return B_COL ? b + kk : b + kk * S::LDB;
  };
  tile::WmmaOperands<FM, FN, B_COL> ops[2];  // double-buffered in registers

  // PROLOGUE: STAGES - 1 tiles in flight; wait for tile 0 and load its first k-step's fragments.
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) loads.copy_stage(p, s);
  ptx::cp_async_wait<STAGES - 2>();
  __syncthreads();
  ops[0].load(warp_a(0, 0), LDA, warp_b(0, 0), S::LDB);

  // MAIN LOOP: k-step ks's MMAs run while the next k-step's fragments load, across tile boundaries too (the one
  // barrier per tile sits before the last k-step's MMAs).
  for (int kt = 0; kt < kt_count; ++kt) {
    const int stage = kt % STAGES, next = (kt + 1) % STAGES;
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks) {
      if (ks == KSTEPS - 1) {
        ptx::cp_async_wait<STAGES - 2>();  // tile kt + 1 has landed (this thread's copies) ...
        __syncthreads();                   // ... and everyone's; every warp is done reading tile kt's stage
      }
      const bool last = ks + 1 == KSTEPS;
      const int st = last ? next : stage, kk = last ? 0 : (ks + 1) * 16;
      ops[(ks + 1) % 2].load(warp_a(st, kk), LDA, warp_b(st, kk), S::LDB);
      if (ks == 0) loads.copy_stage(p, kt + STAGES - 1);  // refills tile kt - 1's stage, free since the barrier
      ops[ks % 2].mma(c);
    }
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
