// Sweep of tile shapes for the pipelined mma.sync kernel (swizzled shared memory, stmatrix epilogue) against
// cuBLAS, in one process (GPU only). One accumulation per build (TUNE_ACC_F16 picks fp16), so the two build in
// parallel:
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I ptx_kernels/csrc -I scripts [-DTUNE_ACC_F16] \
//        scripts/tune_mma.cu -lcublas -ldl -o /tmp/tune_mma && /tmp/tune_mma
// Prints registers, shared memory and blocks per SM of each shape, then for NN (or NT: `/tmp/tune_mma NT`, B
// column-major) at 4096^3 and 8192^3 the median
// TFLOPS (L2 flushed before each call), the ratio to cuBLAS in the same run, and the SM clock and power
// (tune_common.cuh). The chosen shapes are mma_pipeline.cuh's LadderTileF32 / LadderTileF16; the results go in
// docs/ladders/mma.md.
//
// Shapes: Tile<BM, BN, BK, WARPS_M, WARPS_N, STAGES, MIN_BLOCKS, FRAG_BUFS>. Every k16-step a warp with an
// (WM x WN) tile reads (WM + WN) x 16 halves with ldmatrix for WM x WN x 16 multiply-adds, and the block fills
// (BM + BN) x BK per BM x BN x BK: the shared-memory bytes per flop that the larger warp tiles below cut.
#include "sm80/mma_stmatrix.cu"  // (its launch_mma_stmatrix is unused here)
#include "tune_common.cuh"

using namespace mma_pipeline;

using E = mma_stmatrix::StmatrixStore;
template <class T, Acc ACC, bool B_COL>
constexpr auto tile_kernel = kernel<half, T, ACC, B_COL, SwizzledLayouts::A<T>, SwizzledLayouts::B<T, B_COL>, E>;

// The sweep times one accumulation: launch that tile alone, for the layout asked (mma_pipeline::launch would
// build every tile and accumulation).
template <class T, Acc ACC>
tune::Candidate candidate(const char* name) {
  return tune::candidate<ACC, launch_tile<T, ACC, false, SwizzledLayouts, E, half>,
                         launch_tile<T, ACC, true, SwizzledLayouts, E, half>, tile_kernel<T, ACC, false>,
                         tile_kernel<T, ACC, true>>(name, T::THREADS, LaunchSmem<T, false, E>::BYTES,
                                                    LaunchSmem<T, true, E>::BYTES);
}

#ifndef TUNE_ACC_F16
// fp32 accumulators: a warp tile of WM x WN holds WM x WN / 32 of them per thread (64x64: 128 registers).
constexpr Acc ACC = Acc::F32;
const tune::Candidate cands[] = {
    candidate<Tile<128, 256, 64, 2, 4, 3, 1, 2>, ACC>("128x256x64 w2x4 s3"),
    candidate<Tile<128, 256, 64, 2, 4, 3, 1, 1>, ACC>("128x256x64 w2x4 s3 fb1"),
    candidate<Tile<256, 128, 64, 4, 2, 3, 1, 2>, ACC>("256x128x64 w4x2 s3"),
    candidate<Tile<160, 256, 64, 2, 4, 3, 1, 1>, ACC>("160x256x64 w2x4 s3 fb1"),
    candidate<Tile<128, 128, 64, 2, 2, 3, 2, 2>, ACC>("128x128x64 w2x2 s3 2/SM"),
    // per-stage mbarriers instead of a block barrier per tile (copies one tile less ahead)
    candidate<Tile<128, 256, 64, 2, 4, 3, 1, 2, true>, ACC>("128x256x64 w2x4 s3 mbar"),
    candidate<Tile<128, 256, 64, 2, 4, 4, 1, 2, true>, ACC>("128x256x64 w2x4 s4 mbar"),
    candidate<Tile<128, 256, 32, 2, 4, 6, 1, 2, true>, ACC>("128x256x32 w2x4 s6 mbar"),
};
#else
// fp16 accumulators take half the registers: 64x128 and 128x64 warp tiles fit.
constexpr Acc ACC = Acc::F16;
const tune::Candidate cands[] = {
    candidate<Tile<256, 256, 32, 2, 4, 4, 1, 1>, ACC>("256x256x32 w2x4 s4 fb1"),
    candidate<Tile<256, 256, 32, 4, 2, 4, 1, 1>, ACC>("256x256x32 w4x2 s4 fb1"),
    candidate<Tile<128, 256, 64, 2, 4, 3, 1, 2>, ACC>("128x256x64 w2x4 s3"),
    candidate<Tile<128, 256, 32, 2, 2, 4, 2, 1>, ACC>("128x256x32 w2x2 s4 2/SM fb1"),
    candidate<Tile<192, 256, 32, 2, 4, 4, 1, 2>, ACC>("192x256x32 w2x4 s4"),
    // per-stage mbarriers instead of a block barrier per tile (copies one tile less ahead)
    candidate<Tile<256, 256, 32, 4, 2, 4, 1, 1, true>, ACC>("256x256x32 w4x2 s4 fb1 mbar"),
    candidate<Tile<256, 256, 32, 4, 2, 5, 1, 1, true>, ACC>("256x256x32 w4x2 s5 fb1 mbar"),
    candidate<Tile<256, 256, 32, 4, 2, 6, 1, 1, true>, ACC>("256x256x32 w4x2 s6 fb1 mbar"),
};
#endif

int main(int argc, char** argv) {
  tune::sweep(cands, int(sizeof(cands) / sizeof(cands[0])), ACC, {4096, 8192}, tune::b_col_from_args(argc, argv));
  return 0;
}
