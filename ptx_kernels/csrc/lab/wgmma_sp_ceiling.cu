// wgmma_sp_ceiling.cu — the sparse wgmma instruction ceiling: what wgmma.mma_async.sp m64n256k32 alone does on this
// GPU, what wgmma_sp is scored against. Counted as the dense work the instruction does (2 x 64 x 256 x 32 each), so
// its TFLOPS compare directly with the dense wgmma ceiling (wgmma_ceiling.cu) and with torch.matmul.
//
// The shape of wgmma_ceiling.cu: 2 warpgroups a block (wgmma_sp's consumers), each issuing `iters` stages of the
// kernel's own hopper_sp::mma_stage (two chained k32 steps) on one stage of operands already in shared memory
// (small non-zero values, written once; nothing is loaded in the loop), one wgmma group in flight. The metadata is
// a fixed valid word (every chunk keeps positions 0 and 1).
#include "blocks/wgmma_sp_tile.cuh"
#include "host/registry.h"
#include "lab/lab.h"

namespace {

constexpr int kWarpgroups = kWgmmaSpCeilingWarpgroups, BN = 256;

struct CeilingStage {
  alignas(1024) half A[64 * hopper_sp::BKC];  // (m, compressed k), 64-byte swizzled (any values)
  alignas(1024) half B[BN * hopper::BK];      // (n, k), 128-byte swizzled
};

template <Acc ACC>
__global__ void __launch_bounds__(kWarpgroups * hopper::kWarpgroup, 1)
    wgmma_sp_ceiling_kernel(int iters, float* __restrict__ sink) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  CeilingStage& st = hopper::aligned_storage<CeilingStage>(smem_raw);
  constexpr int a_elems = 64 * hopper_sp::BKC, elems = a_elems + BN * hopper::BK;
  for (int i = threadIdx.x; i < elems; i += blockDim.x)  // small non-zero values: the power of real data
    (i < a_elems ? st.A[i] : st.B[i - a_elems]) = __float2half(float((i * 37) % 7 - 3) / 64.0f);
  ptx::fence_proxy_async_shared();  // generic stores above, read by wgmma (the async proxy) below
  __syncthreads();
  const uint32_t e[hopper_sp::KSTEPS] = {hopper_sp::kValidMeta, hopper_sp::kValidMeta};
  hopper::Accum<BN, ACC> acc;
  for (int it = 0; it < iters; ++it) {
    ptx::wgmma_fence();
    hopper_sp::mma_stage<true>(acc.d, st.A, st.B, e, it == 0);
    ptx::wgmma_commit_group();
    ptx::wgmma_wait_group<1>();
  }
  ptx::wgmma_wait_group<0>();
  ptx::fence_operands(acc.d);
  const float v = float(acc.d[0]) + float(acc.d[sizeof(acc.d) / sizeof(acc.d[0]) - 1]);
  sink[blockIdx.x * blockDim.x + threadIdx.x] = v;  // keeps the chain alive
}

}  // namespace

cudaError_t launch_wgmma_sp_ceiling(int blocks, int iters, Acc acc, float* sink, cudaStream_t stream) {
  const int smem = hopper::smem_request<CeilingStage>();
  auto kernel = acc == Acc::F16 ? wgmma_sp_ceiling_kernel<Acc::F16> : wgmma_sp_ceiling_kernel<Acc::F32>;
  cudaError_t err = tile::prepare_smem(kernel, smem, nullptr);
  if (err != cudaSuccess) return err;
  kernel<<<blocks, kWarpgroups * hopper::kWarpgroup, smem, stream>>>(iters, sink);
  return cudaGetLastError();
}

HGEMM_CEILING(wgmma_sp, "wgmma.sp",
              {launch_wgmma_sp_ceiling, wgmma_sp_ceiling_flops, 1, kWgmmaSpCeilingWarpgroups * hopper::kWarpgroup});
