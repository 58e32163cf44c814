// mma_swizzle.cu — mma_multistage with XOR-swizzled shared memory (tile::Xor in blocks/swizzle.cuh): 16-byte chunk c of
// row r is stored at chunk c ^ f(r), so the 8 rows each ldmatrix reads, and the chunks each warp's cp.async
// writes, fall in 8 different bank groups. No padding: the tiles keep their natural size.
//
// Adds over mma_multistage: bank-conflict-free ldmatrix (A, and B read with ldmatrix.trans when row-major) and
// cp.async. Measure it with Nsight Compute's l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld/st counters
// (scripts/bank_conflicts.sh) before and after. Measured (bank conflicts and time): docs/design/mma.md.
#include "hgemm.cuh"
#include "sm80/mma_pipeline.cuh"

template <typename E>
cudaError_t launch_mma_swizzle(const GemmArgsOf<E>& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  using namespace mma_pipeline;
  return launch<LadderTileF32, LadderTileF16, SwizzledLayouts, DirectStore>(p, acc, stream, info);
}

HGEMM_VARIANT_FP16_BF16(mma_swizzle, launch_mma_swizzle, RowMajorA);
