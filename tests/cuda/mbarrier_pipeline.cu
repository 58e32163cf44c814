// The pipelined kernels with the stage ring kept by mbarriers (Tile<..., MBARRIERS = true>; tile::StageBarriers)
// instead of a block barrier per tile: an alternative the tile sweeps timed (docs/design/mma.md) but no shipped
// variant uses. Compiled by the CPU tests, which check its SASS: no block barrier in the main loop, the
// mbarrier waits and the cp.async arrivals instead. Not a kernel anyone runs from here.
#include "sm80/mma_pipeline.cuh"
#include "sm80/wmma_multistage.cu"

using MmaTile = mma_pipeline::Tile<256, 256, 32, 4, 2, 4, 1, 1, true>;
using WmmaTile = wmma_multistage::Tile<256, 256, 32, 4, 2, 4, 1, 1, true>;

cudaError_t launch_mbarrier_pipelines(const GemmArgs& p, cudaStream_t stream) {
  cudaError_t err = mma_pipeline::launch_tile<MmaTile, Acc::F16, false, mma_pipeline::SwizzledLayouts,
                                              mma_pipeline::DirectStore>(p, stream, nullptr);
  if (err != cudaSuccess) return err;
  return wmma_multistage::launch<WmmaTile, Acc::F16, false>(p, stream, nullptr);
}
