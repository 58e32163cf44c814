// sm90/splitk.h — the split-K launch of wgmma_splitk.cu, which wgmma_persistent.cu hands outputs with too few
// tiles to fill the GPU (hopper::choose_plan decides).
#pragma once
#include "blocks/wgmma_tile.cuh"

cudaError_t launch_wgmma_splitk_plan(const GemmArgs& p, Acc acc, cudaStream_t stream, LaunchInfo* info,
                                     hopper::Plan plan);
