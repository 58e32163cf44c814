// mma_ceiling.cu — the HMMA path's instruction ceiling: a register-only loop of mma.sync.m16n8k16, no memory
// traffic. What the harness compares every mma.sync/WMMA kernel against ("% of ceiling").
//
// Each warp runs CHAINS independent accumulator chains so the tensor pipe never waits on one MMA's result;
// operands are fixed registers. The accumulators are written out at the end so nothing is optimised away.
#include "hgemm.cuh"
#include "host/registry.h"
#include "lab/lab.h"
#include "ptx/mma_sync.cuh"

namespace mma_ceiling {

constexpr int CHAINS = kMmaCeilingChains;  // independent MMAs in flight per warp (8: latency ~ 8x the issue interval)
constexpr int THREADS = 32 * kMmaCeilingWarpsPerBlock;  // (hgemm.cuh's mma_ceiling_flops counts with these)

template <Acc ACC>
__global__ void __launch_bounds__(THREADS) kernel(int iters, float* sink) {
  const uint32_t x = threadIdx.x * 0x00010001u;
  const uint32_t a[4] = {x, x + 1, x + 2, x + 3}, b[2] = {x + 4, x + 5};
  float out = 0.f;
  if constexpr (ACC == Acc::F32) {
    float c[CHAINS][4] = {};
    for (int i = 0; i < iters; ++i)
#pragma unroll
      for (int j = 0; j < CHAINS; ++j) ptx::mma_m16n8k16_f32(c[j], a, b, c[j]);
#pragma unroll
    for (int j = 0; j < CHAINS; ++j) out += c[j][0] + c[j][1] + c[j][2] + c[j][3];
  } else {
    uint32_t c[CHAINS][2] = {};
    for (int i = 0; i < iters; ++i)
#pragma unroll
      for (int j = 0; j < CHAINS; ++j) ptx::mma_m16n8k16_f16(c[j], a, b, c[j]);
#pragma unroll
    for (int j = 0; j < CHAINS; ++j) out += __half2float(__ushort_as_half(c[j][0] & 0xffff));
  }
  sink[blockIdx.x * THREADS + threadIdx.x] = out;
}

}  // namespace mma_ceiling

// FLOPs done = blocks * (THREADS / 32) * iters * CHAINS * (2 * 16 * 8 * 16): mma_ceiling_flops (hgemm.cuh).
cudaError_t launch_mma_ceiling(int blocks, int iters, Acc acc, float* sink, cudaStream_t stream) {
  using namespace mma_ceiling;
  if (acc == Acc::F32)
    kernel<Acc::F32><<<blocks, THREADS, 0, stream>>>(iters, sink);
  else
    kernel<Acc::F16><<<blocks, THREADS, 0, stream>>>(iters, sink);
  return cudaGetLastError();
}

HGEMM_CEILING(mma_sync, "mma.sync", {launch_mma_ceiling, mma_ceiling_flops, 16, mma_ceiling::THREADS});
