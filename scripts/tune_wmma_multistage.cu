// Sweep of wmma_multistage tile configurations against cuBLAS, in one process (GPU only):
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I ptx_kernels/csrc -I scripts \
//        scripts/tune_wmma_multistage.cu -lcublas -o /tmp/tune_wmma && /tmp/tune_wmma
// Prints registers, shared memory and blocks per SM of each configuration, then for NN at 4096^3 and 8192^3, fp32
// and fp16 accumulation, the median TFLOPS (L2 flushed before each call) and the ratio to cuBLAS in the same run
// (scripts/tune_common.cuh). Results go in wmma_multistage.cu's header.
#include "tune_common.cuh"
#include "wmma_multistage.cu"

using namespace wmma_multistage;

template <class T, Acc ACC>
tune::Candidate candidate(const char* name) {
  return {name, launch_tile<T>, reinterpret_cast<const void*>(kernel<T, ACC, false>), T::THREADS,
          Smem<T, false>::BYTES};
}

template <Acc ACC>
void run() {
  const tune::Candidate cands[] = {
      candidate<Tile<128, 128, 32, 2, 2, 4, 1>, ACC>("128x128x32 w2x2 s4"),
      candidate<Tile<128, 128, 32, 2, 2, 4, 2>, ACC>("128x128x32 w2x2 s4 2/SM"),
      candidate<Tile<128, 128, 32, 2, 2, 3, 2>, ACC>("128x128x32 w2x2 s3 2/SM"),
      candidate<Tile<128, 128, 64, 2, 2, 3, 2>, ACC>("128x128x64 w2x2 s3 2/SM"),
      candidate<Tile<128, 256, 32, 2, 4, 4, 1>, ACC>("128x256x32 w2x4 s4"),
      candidate<Tile<128, 256, 32, 2, 4, 3, 1>, ACC>("128x256x32 w2x4 s3"),
      candidate<Tile<256, 128, 32, 4, 2, 3, 1>, ACC>("256x128x32 w4x2 s3"),
      candidate<Tile<128, 128, 32, 2, 4, 4, 2>, ACC>("128x128x32 w2x4 s4 2/SM"),
  };
  tune::sweep(cands, int(sizeof(cands) / sizeof(cands[0])), ACC, {4096, 8192});
}

int main() {
  run<Acc::F32>();
  run<Acc::F16>();
  return 0;
}
