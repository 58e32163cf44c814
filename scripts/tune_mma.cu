// Sweep of tile shapes for the pipelined mma.sync kernel (swizzled shared memory, stmatrix epilogue) against
// cuBLAS, in one process (GPU only):
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I ptx_kernels/csrc -I scripts \
//        scripts/tune_mma.cu -lcublas -o /tmp/tune_mma && /tmp/tune_mma
// Prints registers, shared memory and blocks per SM of each shape, then for NN at 4096^3 and 8192^3, fp32 and fp16
// accumulation, the median TFLOPS (L2 flushed before each call) and the ratio to cuBLAS in the same run. The
// chosen shape is mma_pipeline.cuh's LadderTile; the results go in its comment.
#include "mma_stmatrix.cu"
#include "tune_common.cuh"

using namespace mma_pipeline;

template <class T, Acc ACC>
tune::Candidate candidate(const char* name) {
  using E = mma_stmatrix::StmatrixStore;
  constexpr int pipe = Smem<T, false>::BYTES, epi = E::smem_bytes<T>();
  return {name, launch<T, SwizzledLayouts, E>,
          reinterpret_cast<const void*>(
              kernel<T, ACC, false, SwizzledLayouts::A<T>, SwizzledLayouts::B<T, false>, E>),
          T::THREADS, pipe > epi ? pipe : epi};
}

template <Acc ACC>
void run() {
  const tune::Candidate cands[] = {
      candidate<Tile<128, 128, 32, 2, 4, 4, 1>, ACC>("128x128x32 w2x4 s4"),
      candidate<Tile<128, 128, 32, 2, 2, 4, 2>, ACC>("128x128x32 w2x2 s4 2/SM"),
      candidate<Tile<128, 128, 64, 2, 2, 3, 2>, ACC>("128x128x64 w2x2 s3 2/SM"),
      candidate<Tile<128, 256, 32, 2, 4, 4, 1>, ACC>("128x256x32 w2x4 s4"),
      candidate<Tile<128, 256, 64, 2, 4, 3, 1>, ACC>("128x256x64 w2x4 s3"),
      candidate<Tile<256, 128, 64, 4, 2, 3, 1>, ACC>("256x128x64 w4x2 s3"),
      candidate<Tile<256, 128, 64, 4, 2, 4, 1>, ACC>("256x128x64 w4x2 s4"),
      candidate<Tile<128, 256, 64, 2, 4, 4, 1>, ACC>("128x256x64 w2x4 s4"),
  };
  tune::sweep(cands, int(sizeof(cands) / sizeof(cands[0])), ACC, {4096, 8192});
}

int main() {
  run<Acc::F32>();
  run<Acc::F16>();
  return 0;
}
