// wgmma_ceiling.cu — the wgmma instruction ceiling: what m64n256k16 wgmma alone does on this GPU.
//
// Each block runs 2 warpgroups (the consumers of wgmma_ws / wgmma_persistent); each warpgroup issues `iters`
// k-blocks of 4 chained m64n256k16 wgmma on operands already in shared memory, keeping one group in flight like the
// kernels do (the loop: lab/wgmma_loop.cuh). No TMA, no epilogue: the Hopper kernels are scored against this the
// way the mma.sync ladder is scored against mma_ceiling.cu. FLOPs per launch: wgmma_ceiling_flops(blocks, iters)
// (lab/lab.h).
//
// "wgmma.random" is the same loop on random operands (lab/wgmma_loop.cuh, LoopData): no record is scored against
// it; scripts/sustained.py runs it beside the GEMMs, where the board's power and clock limits set the speed.
#include "host/registry.h"
#include "lab/lab.h"
#include "lab/wgmma_loop.cuh"

cudaError_t launch_wgmma_ceiling(int blocks, int iters, Acc acc, float* sink, cudaStream_t stream) {
  return lab::launch_wgmma_loop<256, kWgmmaCeilingWarpgroups>(blocks, iters, acc, sink, stream);
}

cudaError_t launch_wgmma_random_ceiling(int blocks, int iters, Acc acc, float* sink, cudaStream_t stream) {
  return lab::launch_wgmma_loop<256, kWgmmaCeilingWarpgroups, lab::LoopData::Random>(blocks, iters, acc, sink, stream);
}

HGEMM_CEILING(wgmma, "wgmma",
              {launch_wgmma_ceiling, wgmma_ceiling_flops, 1, kWgmmaCeilingWarpgroups * hopper::kWarpgroup});
HGEMM_CEILING(wgmma_random, "wgmma.random",
              {launch_wgmma_random_ceiling, wgmma_ceiling_flops, 1, kWgmmaCeilingWarpgroups * hopper::kWarpgroup});
