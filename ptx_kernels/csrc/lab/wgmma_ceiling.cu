// wgmma_ceiling.cu — the wgmma instruction ceiling: what m64n256k16 wgmma alone does on this GPU.
//
// Each block runs 2 warpgroups (the consumers of wgmma_ws / wgmma_persistent); each warpgroup issues `iters`
// k-blocks of 4 chained m64n256k16 wgmma on operands already in shared memory (small non-zero values, written
// once; nothing is loaded in the loop), keeping one group in flight like the kernels do. No TMA,
// no epilogue: the Hopper kernels are scored against this the way the mma.sync ladder is scored against
// mma_ceiling.cu. FLOPs per launch: wgmma_ceiling_flops(blocks, iters) (lab/lab.h).
#include "blocks/wgmma_tile.cuh"
#include "host/registry.h"
#include "lab/lab.h"

namespace {

constexpr int kWarpgroups = kWgmmaCeilingWarpgroups, BN = 256;

template <Acc ACC>
__global__ void __launch_bounds__(kWarpgroups * hopper::kWarpgroup, 1)
    wgmma_ceiling_kernel(int iters, float* __restrict__ sink) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  using Storage = hopper::SharedStorage<half, 64, BN, 1>;
  Storage& ss = hopper::aligned_storage<Storage>(smem_raw);
  for (int i = threadIdx.x; i < (64 + BN) * hopper::BK; i += blockDim.x) {
    // small non-zero values: the tensor core draws the power of real data, and fp16 sums stay finite
    (i < 64 * hopper::BK ? ss.A[0][i] : ss.B[0][i - 64 * hopper::BK]) = __float2half(float((i * 37) % 7 - 3) / 64.0f);
  }
  ptx::fence_proxy_async_shared();  // generic stores above, read by wgmma (the async proxy) below
  __syncthreads();
  hopper::Accum<BN, ACC> acc;
  for (int it = 0; it < iters; ++it) {
    ptx::wgmma_fence();
    hopper::mma_kblock<BN, true>(acc.d, ss.A[0], ss.B[0], it > 0);
    ptx::wgmma_commit_group();
    ptx::wgmma_wait_group<1>();
  }
  ptx::wgmma_wait_group<0>();
  ptx::fence_operands(acc.d);
  const float v = float(acc.d[0]) + float(acc.d[sizeof(acc.d) / sizeof(acc.d[0]) - 1]);
  sink[blockIdx.x * blockDim.x + threadIdx.x] = v;  // keeps the chain alive
}

}  // namespace

cudaError_t launch_wgmma_ceiling(int blocks, int iters, Acc acc, float* sink, cudaStream_t stream) {
  using Storage = hopper::SharedStorage<half, 64, BN, 1>;
  const int smem = hopper::smem_request<Storage>();
  auto kernel = acc == Acc::F16 ? wgmma_ceiling_kernel<Acc::F16> : wgmma_ceiling_kernel<Acc::F32>;
  cudaError_t err = tile::prepare_smem(kernel, smem, nullptr);
  if (err != cudaSuccess) return err;
  kernel<<<blocks, kWarpgroups * hopper::kWarpgroup, smem, stream>>>(iters, sink);
  return cudaGetLastError();
}

HGEMM_CEILING(wgmma, "wgmma",
              {launch_wgmma_ceiling, wgmma_ceiling_flops, 1, kWgmmaCeilingWarpgroups * hopper::kWarpgroup});
