// mma_swizzle.cu — mma_multistage with XOR-swizzled shared memory (tile::Xor in tile_io.cuh): 16-byte chunk c of
// row r is stored at chunk c ^ f(r), so the 8 rows each ldmatrix reads, and the chunks each warp's cp.async
// writes, fall in 8 different bank groups. No padding: the tiles keep their natural size.
//
// Adds over mma_multistage: bank-conflict-free ldmatrix (A, and B read with ldmatrix.trans when row-major) and
// cp.async. Measure it with Nsight Compute's l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld/st counters
// (scripts/bank_conflicts.sh) before and after: on the H100 at 4096^3, shared-memory load bank conflicts fell from
// 235,801,087 (mma_multistage: 32 wavefronts per ldmatrix.x4) to 1,557 (4 per ldmatrix.x4;
// docs/results/h100/hardening).
// Measured (docs/results/h100, `python -m compare` on the H100 at 22ac9e1, 4096^3 NN, fp32 accumulation):
//   421.9 TFLOPS (0.554x, 65% of the mma.sync ceiling), 3.7x mma_multistage.
#include "mma_pipeline.cuh"

cudaError_t launch_mma_swizzle(const GemmArgs& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  using namespace mma_pipeline;
  return launch<LadderTileF32, LadderTileF16, SwizzledLayouts, DirectStore>(p, acc, stream, info);
}
