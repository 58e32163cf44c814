// sm90/handoff.h — the launches wgmma_persistent.cu hands problems to: wgmma_splitk.cu's split-K over a cluster and
// wgmma_splitk_grid.cu's over the grid, for outputs with too few tiles to fill the GPU (plan_wgmma decides),
// wgmma_cluster.cu, for B whose rows (in storage order) are not 32-byte aligned, and mma_stream.cu's bandwidth
// path, for a few rows of A against a B whose rows are off 16 bytes or, with A column-major, a large B
// (hands_to_stream). Templates over the element type E (half, __nv_bfloat16), instantiated for both in their own
// files.
#pragma once
#include "blocks/plan_model.cuh"
#include "blocks/wgmma_tile.cuh"

// The tile and K split for p on this device (hopper::choose_plan with the SM count and the blocks that run at once
// in clusters of 2 and 4). GemmArgs::plan_tile pins the tile (1/2/3/4: 128 x 256/128/64/192, 5/6: 256 x 152 in 4/3
// stages; wgmma_persistent.cu pins its cut tiles, 7-16, and the swapped ones, 17-26, itself), ::split the split: 1
// never, 2 and 4 over a cluster, any other count up to hopper::kGridMaxSplit over the grid
// (hopper::choose_grid_split). speed192 > 0 and
// speed_tall > 0 make 128 x 192 and 256 x 152 candidates of the unsplit plans (the persistent kernel's; 0 for the
// cluster kernel), cut_menu the cut tiles (hopper::CutMenu), swap the swapped cut tiles (hopper::kSwapFirstCode).
// grid: whether the plan may split over the grid where the others keep fewer than hopper::kGridBelow of the SMs
// busy (the persistent kernel's hand-off).
template <typename E>
hopper::Plan plan_wgmma(const GemmArgsOf<E>& p, double speed192 = 0.0, double speed_tall = 0.0, bool grid = false,
                        int cut_menu = hopper::kNoCut, bool swap = false);

// The plan hopper::model_plan predicts fastest for `call` on this device (its SMs, the blocks that run at once in
// clusters of 2 and 4, its HBM bandwidth from the memory clock and bus width): wgmma_persistent's plan where nothing
// pins one, A is row-major (the layouts the model was fitted on) and N or K is not a multiple of 64, or the rule
// would split whole boxes over the grid, or M part-fills the last of a few 128-row bands (hopper::model_plans).
hopper::Plan plan_by_model(hopper::ModelCall call);

template <typename E>
cudaError_t launch_wgmma_splitk_plan(const GemmArgsOf<E>& p, Acc acc, cudaStream_t stream, LaunchInfo* info,
                                     hopper::Plan plan);

template <typename E>
cudaError_t launch_wgmma_splitk_grid_plan(const GemmArgsOf<E>& p, Acc acc, cudaStream_t stream, LaunchInfo* info,
                                          hopper::Plan plan);

template <typename E>
cudaError_t launch_wgmma_cluster(const GemmArgsOf<E>& p, Acc acc, cudaStream_t stream, LaunchInfo* info);

// The shapes wgmma_persistent hands to mma_stream.cu (unless GemmArgs::plan_tile or ::split pins a plan): against a
// B whose rows (of its storage order) or base are off 16 bytes, at most kStreamOffRows rows of A at any size. There
// the tile kernels' TMA would need B copied first (a second read and write of all of B, and a launch), which
// mma_stream reads in place. The bound was measured with 16-row units, where 17-32 rows cost a second pass over B
// from L2 (less than the copy) and 33-48 a third (more than the copy: ptx_kernels.call stages A and B in one launch
// of host/stage_copy.cu); mma_stream now reads B once for up to 32 rows (its 32-row units).
// Against an aligned B, at most kStreamRows rows of a column-major A (layouts TN and TT, `a_col`) against a B of at
// least kStreamMinB elements: there the tile kernels' column-major A tiles run slower than mma_stream's reads of B;
// with row-major A their own plans (128 x 64 tiles, split over a cluster or the grid where they are few) read an
// aligned B faster than mma_stream does, so they keep it (docs/design/hopper.md, "The bandwidth path").
constexpr int kStreamRows = 16;
constexpr int64_t kStreamMinB = int64_t(1) << 22;
constexpr int kStreamOffRows = 32;
__host__ __device__ constexpr bool hands_to_stream(int M, int N, int K, bool b_rows_off16, bool a_col) {
  return (a_col && M <= kStreamRows && int64_t(N) * K >= kStreamMinB) || (b_rows_off16 && M <= kStreamOffRows);
}
static_assert(!hands_to_stream(1, 4096, 4096, false, false) && !hands_to_stream(16, 28672, 4096, false, false) &&
                  hands_to_stream(8, 4096, 4096, false, true) && hands_to_stream(16, 64, 65536, false, true) &&
                  !hands_to_stream(17, 4096, 4096, false, true) && !hands_to_stream(16, 1024, 2048, false, true) &&
                  !hands_to_stream(1, 1, 1, false, false) && hands_to_stream(1, 4096, 4096, true, false) &&
                  hands_to_stream(32, 12000, 555, true, false) && hands_to_stream(2, 270, 1015, true, false) &&
                  !hands_to_stream(48, 1913, 14747, true, false) && !hands_to_stream(33, 397, 1455, true, false) &&
                  !hands_to_stream(33, 12000, 555, true, false) && !hands_to_stream(49, 4096, 4096, true, true),
              "worked cases: an aligned B stays on the tile kernels with row-major A (decode rows against a "
              "4096 x 4096 weight among them), and goes to the bandwidth path with up to 16 rows of a column-major A "
              "and a B of 4M elements or more; against B's rows off 16 bytes up to 32 rows of any size go");

// The plans wgmma_persistent's rule hands to wgmma_cluster.cu (where the model does not plan, and unless
// GemmArgs::plan_tile pins one): a B whose rows in
// storage order lie off the 32-byte sectors, planned on 128 x 256 or 256 x 152 tiles (plan_bn) or on an output that
// 128 x 256 tiles cover in at least one round of the SMs, and more than one band of 128-row tiles. The cluster pairs
// tile rows 2p and 2p + 1 to load each B box once for both; where M <= 128 the second tile of every pair lies below
// M, so half the blocks load zeros and store nothing, and the persistent kernel's own plan runs faster (measured:
// docs/design/hopper.md, "B off the 32-byte sectors in either layout").
__host__ __device__ constexpr bool hands_to_cluster(int M, int N, int plan_bn, bool b_rows_straddle, int sms) {
  return b_rows_straddle && M > 128 &&
         (plan_bn == 256 || plan_bn == 152 || int64_t(hopper::cdiv(M, 128)) * hopper::cdiv(N, 256) >= sms);
}
static_assert(hands_to_cluster(4096, 4096, 256, true, 132) && !hands_to_cluster(4096, 4096, 256, false, 132) &&
                  hands_to_cluster(1144, 8296, 128, true, 132) && !hands_to_cluster(512, 1024, 128, true, 132) &&
                  !hands_to_cluster(32, 28648, 256, true, 132) && !hands_to_cluster(128, 31944, 256, true, 132),
              "worked cases: off-sector B on 128 x 256 tiles, or on an output 128 x 256 tiles cover in a round, goes to "
              "the cluster; a small output keeps its narrow tiles; one band of tile rows (M <= 128) never pairs");

template <typename E>
cudaError_t launch_mma_stream(const GemmArgsOf<E>& p, Acc acc, cudaStream_t stream, LaunchInfo* info);
