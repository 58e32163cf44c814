// lab/wgmma_loop.cuh — the wgmma instruction ceiling's kernel, at any tile width BN: each of the block's warpgroups
// issues `iters` k-blocks of 4 chained m64nBNk16 wgmma on operands already in shared memory (written once; nothing
// is loaded in the loop), keeping one group in flight like the GEMM kernels do. No TMA, no epilogue.
// lab/wgmma_ceiling.cu launches it at BN = 256 (the harness's wgmma ceiling, and the same loop on random operands);
// an instantiation per width measures the ceiling at each width the kernels use (docs/design/hopper.md).
//
// Operand values (LoopData): Pattern, small multiples of 1/64 (one or two mantissa bits set), what the harness's
// ceiling has always used; Random, uniform in [-1, 1) with all ten mantissa bits random, like a GEMM's randn inputs.
// Operand bits that toggle cost the tensor cores energy and clock, so the Random loop runs slower than the Pattern
// one (measured: docs/design/hopper.md); scripts/sustained.py runs it beside the GEMMs, under the same power and
// clock limits, to bound what a GEMM on such data could gain by moving its operands more cheaply.
#pragma once
#include "blocks/wgmma_tile.cuh"

namespace lab {

template <int BN>
using WgmmaLoopStorage = hopper::SharedStorage<half, 64, BN, 1>;

enum class LoopData { Pattern, Random };

// The operand value at flat index i of the loop's shared-memory stage.
template <LoopData DATA>
__device__ __forceinline__ half loop_value(int i) {
  if constexpr (DATA == LoopData::Random) {
    uint32_t h = uint32_t(i) * 0x9E3779B1u;  // a multiplicative hash, then two xor-shift-multiply rounds
    h ^= h >> 15, h *= 0x85EBCA77u, h ^= h >> 13, h *= 0xC2B2AE35u, h ^= h >> 16;
    // uniform in [-1, 1); an fp16 sum over `iters` k-blocks (64 products each) has std sqrt(64 * iters / 9), 171 at
    // the harness's 4096: far below 65504
    return __float2half(float(int(h & 0xFFFFu) - 32768) / 32768.0f);
  } else {
    return __float2half(float((i * 37) % 7 - 3) / 64.0f);
  }
}

template <int BN, Acc ACC, int WARPGROUPS, LoopData DATA = LoopData::Pattern>
__global__ void __launch_bounds__(WARPGROUPS * hopper::kWarpgroup, 1)
    wgmma_loop_kernel(int iters, float* __restrict__ sink) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  auto& ss = hopper::aligned_storage<WgmmaLoopStorage<BN>>(smem_raw);
  for (int i = threadIdx.x; i < (64 + BN) * hopper::BK; i += blockDim.x)
    (i < 64 * hopper::BK ? ss.A[0][i] : ss.B[0][i - 64 * hopper::BK]) = loop_value<DATA>(i);
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

// Launches the loop on `blocks` blocks of WARPGROUPS warpgroups (shared memory opted in on each call).
template <int BN, int WARPGROUPS, LoopData DATA = LoopData::Pattern>
cudaError_t launch_wgmma_loop(int blocks, int iters, Acc acc, float* sink, cudaStream_t stream) {
  const int smem = hopper::smem_request<WgmmaLoopStorage<BN>>();
  auto kernel = acc == Acc::F16 ? wgmma_loop_kernel<BN, Acc::F16, WARPGROUPS, DATA>
                                : wgmma_loop_kernel<BN, Acc::F32, WARPGROUPS, DATA>;
  cudaError_t err = tile::prepare_smem(kernel, smem, nullptr);
  if (err != cudaSuccess) return err;
  kernel<<<blocks, WARPGROUPS * hopper::kWarpgroup, smem, stream>>>(iters, sink);
  return cudaGetLastError();
}

}  // namespace lab
