// mma_sp_ceiling.cu — the sparse HMMA path's instruction ceiling: a register-only loop of mma.sp.m16n8k32, what
// mma_sp is scored against. Counted as the dense work the instruction does (2 x 16 x 8 x 32 per instruction), so
// its TFLOPS compare directly with the dense mma.sync ceiling (mma_ceiling.cu) and with torch.matmul.
//
// The shape of mma_ceiling.cu: CHAINS independent accumulator chains per warp, fixed operand registers, the
// accumulators written out at the end. The metadata is a fixed valid word (every nibble 0b0100: positions 0, 1).
#include "hgemm.cuh"
#include "host/registry.h"
#include "lab/lab.h"
#include "ptx/mma_sparse.cuh"

namespace mma_sp_ceiling {

constexpr int CHAINS = kMmaCeilingChains, THREADS = 32 * kMmaCeilingWarpsPerBlock;
constexpr uint32_t kMeta = 0x44444444u;

template <Acc ACC>
__global__ void __launch_bounds__(THREADS) kernel(int iters, float* sink) {
  const uint32_t x = threadIdx.x * 0x00010001u;
  const uint32_t a[4] = {x, x + 1, x + 2, x + 3}, b[4] = {x + 4, x + 5, x + 6, x + 7};
  float out = 0.f;
  if constexpr (ACC == Acc::F32) {
    float c[CHAINS][4] = {};
    for (int i = 0; i < iters; ++i)
#pragma unroll
      for (int j = 0; j < CHAINS; ++j) ptx::mma_sp_m16n8k32_f32<0>(c[j], a, b, c[j], kMeta);
#pragma unroll
    for (int j = 0; j < CHAINS; ++j) out += c[j][0] + c[j][3];
  } else {
    uint32_t c[CHAINS][2] = {};
    for (int i = 0; i < iters; ++i)
#pragma unroll
      for (int j = 0; j < CHAINS; ++j) ptx::mma_sp_m16n8k32_f16<0>(c[j], a, b, c[j], kMeta);
#pragma unroll
    for (int j = 0; j < CHAINS; ++j) out += __half2float(__ushort_as_half(c[j][1] >> 16));
  }
  sink[blockIdx.x * THREADS + threadIdx.x] = out;
}

}  // namespace mma_sp_ceiling

cudaError_t launch_mma_sp_ceiling(int blocks, int iters, Acc acc, float* sink, cudaStream_t stream) {
  using namespace mma_sp_ceiling;
  if (acc == Acc::F32) kernel<Acc::F32><<<blocks, THREADS, 0, stream>>>(iters, sink);
  else kernel<Acc::F16><<<blocks, THREADS, 0, stream>>>(iters, sink);
  return cudaGetLastError();
}

HGEMM_CEILING(mma_sp, "mma.sp", {launch_mma_sp_ceiling, mma_sp_ceiling_flops, 16, mma_sp_ceiling::THREADS});
