// sm90/handoff.h — the launches wgmma_persistent.cu hands problems to: wgmma_splitk.cu's split-K over a cluster and
// wgmma_splitk_grid.cu's over the grid, for outputs with too few tiles to fill the GPU (plan_wgmma decides), and
// wgmma_cluster.cu, for row-major B whose rows are not 32-byte aligned. Templates over the element type E (half,
// __nv_bfloat16), instantiated for both in their own files.
#pragma once
#include "blocks/wgmma_tile.cuh"

// The tile and K split for p on this device (hopper::choose_plan with the SM count and the blocks that run at once
// in clusters of 2 and 4). GemmArgs::plan_tile pins the tile (1/2/3/4: 128 x 256/128/64/192, 5/6: 256 x 152 in 4/3
// stages), ::split the split: 1 never, 2 and 4 over a cluster, any other count up to hopper::kGridMaxSplit over the
// grid (hopper::choose_grid_split). speed192 > 0 and speed_tall > 0 make 128 x 192 and 256 x 152 candidates of the
// unsplit plans (the persistent kernel's; 0 for the cluster kernel). grid: whether the plan may split over the grid
// where the others keep fewer than hopper::kGridBelow of the SMs busy (the persistent kernel's hand-off).
template <typename E>
hopper::Plan plan_wgmma(const GemmArgsOf<E>& p, double speed192 = 0.0, double speed_tall = 0.0, bool grid = false);

template <typename E>
cudaError_t launch_wgmma_splitk_plan(const GemmArgsOf<E>& p, Acc acc, cudaStream_t stream, LaunchInfo* info,
                                     hopper::Plan plan);

template <typename E>
cudaError_t launch_wgmma_splitk_grid_plan(const GemmArgsOf<E>& p, Acc acc, cudaStream_t stream, LaunchInfo* info,
                                          hopper::Plan plan);

template <typename E>
cudaError_t launch_wgmma_cluster(const GemmArgsOf<E>& p, Acc acc, cudaStream_t stream, LaunchInfo* info);
