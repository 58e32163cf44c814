// mma_multistage.cu — the pipelined kernel of mma_pipeline.cuh with plain shared memory and direct stores: a
// 128x256x64 block tile, 8 warps of 64x64 (4 x 8 m16n8 accumulators: every A fragment feeds 8 MMAs, every B
// fragment 4), a 3-stage cp.async pipeline (two tiles in flight while one is computed, one barrier per tile,
// zero-fill at the edges, copies costing a few instructions each: tile::OperandLoads), and fragments
// double-buffered in registers (the next k-step's ldmatrix issued before this one's MMAs, across tiles too).
// With fp16 accumulation on large problems: 256x256x32, 8 warps of 64x128, 4 stages, one fragment buffer.
//
// Adds over mma_tiled: overlap of global loads with tensor-core work and of shared-memory loads with MMAs,
// larger block and warp tiles (chosen by measurement: mma_pipeline.cuh's LadderTileF32 and LadderTileF16),
// grouped block order. Shared memory stays plain and unpadded: A rows of 64 halves are 128 bytes, so the 8 rows an
// ldmatrix reads sit in one bank group (8-way conflicts), and so do row-major B's 512-byte rows — the conflicts
// mma_swizzle removes. Needs 16-byte aligned rows.
// Measured: docs/design/mma.md.
#include "hgemm.cuh"
#include "sm80/mma_pipeline.cuh"

template <typename E>
cudaError_t launch_mma_multistage(const GemmArgsOf<E>& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  using namespace mma_pipeline;
  return launch<LadderTileF32, LadderTileF16, PlainLayouts, DirectStore>(p, acc, stream, info);
}

HGEMM_VARIANT_FP16_BF16(mma_multistage, launch_mma_multistage, RowMajorA);
