// Sweep of wmma_multistage tile configurations against cuBLAS, in one process (GPU only), one accumulation per
// build (TUNE_ACC_F16 picks fp16):
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I ptx_kernels/csrc -I scripts [-DTUNE_ACC_F16] \
//        scripts/tune_wmma_multistage.cu -lcublas -ldl -o /tmp/tune_wmma && /tmp/tune_wmma
// Prints registers, shared memory and blocks per SM of each configuration, then for NN (or NT, B column-major:
// `/tmp/tune_wmma NT`) at 4096^3 and 8192^3 the median TFLOPS (L2 flushed before each call) and the ratio to
// cuBLAS in the same run (scripts/tune_common.cuh). Results go in docs/ladders/wmma.md.
#include "tune_common.cuh"
#include "sm80/wmma_multistage.cu"

using namespace wmma_multistage;

// The sweep times one accumulation: launch that tile alone, for the layout asked (launch_tiles builds all four).
template <class T, Acc ACC>
tune::Candidate candidate(const char* name) {
  return tune::candidate<ACC, launch<T, ACC, false>, launch<T, ACC, true>, kernel<T, ACC, false>,
                         kernel<T, ACC, true>>(name, T::THREADS, Smem<T, false, ACC>::BYTES,
                                               Smem<T, true, ACC>::BYTES);
}

#ifndef TUNE_ACC_F16
constexpr Acc ACC = Acc::F32;
const tune::Candidate cands[] = {
    candidate<Tile<128, 256, 64, 2, 4, 3, 1, 2>, ACC>("128x256x64 w2x4 s3"),
    candidate<Tile<128, 256, 64, 2, 4, 3, 1, 1>, ACC>("128x256x64 w2x4 s3 fb1"),
    candidate<Tile<256, 128, 64, 4, 2, 3, 1, 2>, ACC>("256x128x64 w4x2 s3"),
    candidate<Tile<128, 128, 64, 2, 2, 3, 2, 2>, ACC>("128x128x64 w2x2 s3 2/SM"),
    candidate<Tile<128, 256, 64, 2, 4, 3, 1, 2, false, true>, ACC>("128x256x64 w2x4 s3 rolled"),
    candidate<Tile<128, 256, 64, 2, 4, 3, 1, FRAGS_A2B1, false, true>, ACC>("128x256x64 w2x4 s3 fbA2"),
    // per-stage mbarriers instead of a block barrier per tile (copies one tile less ahead)
    candidate<Tile<128, 256, 64, 2, 4, 4, 1, 2, true>, ACC>("128x256x64 w2x4 s4 mbar"),
};
#else
// fp16 accumulator fragments take half the registers: 64x128 warp tiles fit.
constexpr Acc ACC = Acc::F16;
const tune::Candidate cands[] = {
    candidate<Tile<256, 256, 32, 2, 4, 4, 1, 1>, ACC>("256x256x32 w2x4 s4 fb1"),
    candidate<Tile<256, 256, 32, 4, 2, 4, 1, 1>, ACC>("256x256x32 w4x2 s4 fb1"),
    candidate<Tile<256, 256, 32, 4, 2, 4, 1, 1, false, true>, ACC>("256x256x32 w4x2 s4 fb1 rolled"),
    // two buffers of A fragments, one of B, MMAs column by column (FRAGS_A2B1)
    candidate<Tile<256, 256, 32, 4, 2, 4, 1, FRAGS_A2B1, false, true>, ACC>("256x256x32 w4x2 s4 fbA2"),
    candidate<Tile<256, 256, 32, 2, 4, 4, 1, FRAGS_A2B1, false, true>, ACC>("256x256x32 w2x4 s4 fbA2"),
    candidate<Tile<256, 256, 32, 4, 2, 5, 1, FRAGS_A2B1, false, true>, ACC>("256x256x32 w4x2 s5 fbA2"),
    candidate<Tile<256, 256, 32, 4, 2, 3, 1, FRAGS_A2B1, false, true>, ACC>("256x256x32 w4x2 s3 fbA2"),
    candidate<Tile<128, 256, 32, 2, 4, 4, 1, 2>, ACC>("128x256x32 w2x4 s4"),
    candidate<Tile<128, 256, 32, 2, 2, 4, 2, 1>, ACC>("128x256x32 w2x2 s4 2/SM fb1"),
    // per-stage mbarriers instead of a block barrier per tile (copies one tile less ahead)
    candidate<Tile<256, 256, 32, 4, 2, 4, 1, 1, true>, ACC>("256x256x32 w4x2 s4 fb1 mbar"),
    candidate<Tile<256, 256, 32, 4, 2, 5, 1, 1, true>, ACC>("256x256x32 w4x2 s5 fb1 mbar"),
};
#endif

int main(int argc, char** argv) {
  tune::sweep(cands, int(sizeof(cands) / sizeof(cands[0])), ACC, {4096, 8192}, tune::b_col_from_args(argc, argv));
  return 0;
}
