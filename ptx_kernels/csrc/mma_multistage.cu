// mma_multistage.cu — mma_tiled's tiles fed by a 4-stage cp.async pipeline (mma_pipeline.cuh): STAGES-1 tiles in
// flight while one is computed, one barrier per K step, zero-fill at the edges (cp.async src-size), and
// fragments double-buffered in registers (the ldmatrix of k-step kk+16 issued before the MMAs of kk).
//
// Adds over mma_tiled: overlap of global loads with tensor-core work and of shared-memory loads with MMAs, and
// grouped block order. Shared memory stays plain and unpadded: 64-byte A rows put the 8 rows of an ldmatrix in
// 2 bank groups and 256-byte B rows in 1 (the conflicts mma_swizzle removes). Needs 16-byte aligned rows.
#include "mma_pipeline.cuh"

cudaError_t launch_mma_multistage(const GemmArgs& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  using namespace mma_pipeline;
  return launch<tile::Plain, PlainB, DirectStore>(p, acc, stream, info);
}
