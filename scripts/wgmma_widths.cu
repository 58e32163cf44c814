// wgmma_widths.cu — the wgmma instruction ceiling per tile width N: m64nNk16 for N = 256, 232, 192, 128, 64.
//
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I ptx_kernels/csrc scripts/wgmma_widths.cu \
//        -o /tmp/wgmma_widths && /tmp/wgmma_widths
//
// The loop of the harness's wgmma ceiling (lab/wgmma_loop.cuh: 132 blocks x 2 warpgroups, 4 chained k16 wgmma per
// k-block from shared memory, one group in flight, nothing loaded) at each width N, both accumulations; TFLOPS
// counts the 64 x N x 16 MACs each instruction does. Where the tensor core's time for m64nNk16 is proportional to N,
// every width runs at the same TFLOPS; a width that costs as much as a wider one shows as a lower figure
// (docs/ladders/hopper.md, "A 128 x 232 tile").
#include <algorithm>
#include <cstdio>
#include <vector>

#include "lab/wgmma_loop.cuh"

namespace {

constexpr int kWarpgroups = 2, kBlocks = 132, kIters = 20000;

template <int BN>
double tflops(Acc acc, float* sink) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0), cudaEventCreate(&e1);
  std::vector<float> t;
  for (int r = 0; r < 7; ++r) {
    cudaEventRecord(e0);
    if (lab::launch_wgmma_loop<BN, kWarpgroups>(kBlocks, kIters, acc, sink, 0) != cudaSuccess) return -1.0;
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  const double flops = 2.0 * kBlocks * kWarpgroups * double(kIters) * 4 * 64 * BN * 16;
  return flops / t[t.size() / 2] / 1e9;
}

template <int BN>
void row(float* sink) {
  std::printf("m64n%dk16  fp32 acc %7.1f TFLOPS   fp16 acc %7.1f TFLOPS\n", BN, tflops<BN>(Acc::F32, sink),
              tflops<BN>(Acc::F16, sink));
}

}  // namespace

int main() {
  float* sink;
  cudaMalloc(&sink, kBlocks * kWarpgroups * hopper::kWarpgroup * sizeof(float));
  row<256>(sink);
  row<232>(sink);
  row<192>(sink);
  row<128>(sink);
  row<64>(sink);
  row<256>(sink);  // again: the first and last rows bracket the clock's drift
  return 0;
}
