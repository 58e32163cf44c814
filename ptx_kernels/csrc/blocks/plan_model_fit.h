// blocks/plan_model_fit.h: the fitted parameters of wgmma_persistent's time model (blocks/plan_model.cuh),
// written by `python -m compare.ptx_model --write FILES` (compare/ptx_model.py says what each stands for,
// docs/design/hopper.md how well they predict) on these FILES. Do not edit.
//   compare/sweeps/h200-seed-9401-fp16-ptx.jsonl.gz
//   compare/sweeps/h200-seed-9402-fp16-ptx.jsonl.gz
//   compare/sweeps/h200-seed-9403-fp16-ptx.jsonl.gz
//   compare/sweeps/h200-seed-9404-fp16-ptx.jsonl.gz
//   compare/sweeps/h200-seed-9405-fp16-ptx.jsonl.gz
//   compare/sweeps/h200-seed-9406-fp16-ptx.jsonl.gz
//   compare/sweeps/h200-seed-9407-fp16-ptx-m512.jsonl.gz
#pragma once

namespace hopper::model_fit {
// microseconds per 64-deep k-block of one work unit, by kind (wgmma_persistent 0, the cluster split 1, the grid
// split 2, wgmma_cluster 3) and C's tile (a swapped cut tile's: rows along M, columns along N)
struct Rate {
  int kind, bm, bn, swapped;
  double us_per_kblock;
};
constexpr Rate kRates[] = {
    {3, 128, 256, 0, 0.57175},
    {0, 128, 128, 0, 0.27401},
    {0, 128, 144, 0, 0.293558},
    {0, 128, 160, 0, 0.344722},
    {0, 128, 176, 0, 0.368293},
    {0, 128, 192, 0, 0.431419},
    {0, 128, 208, 0, 0.451027},
    {0, 128, 224, 0, 0.505687},
    {0, 128, 240, 0, 0.531684},
    {0, 128, 256, 0, 0.563655},
    {0, 128, 64, 0, 0.169024},
    {0, 144, 128, 1, 0.289319},
    {0, 144, 256, 1, 0.639013},
    {0, 160, 128, 1, 0.327511},
    {0, 160, 256, 1, 0.730758},
    {0, 176, 128, 1, 0.358747},
    {0, 176, 256, 1, 0.806964},
    {0, 208, 128, 1, 0.436132},
    {0, 224, 128, 1, 0.481336},
    {0, 240, 128, 1, 0.514007},
    {0, 256, 128, 0, 0.558404},
    {0, 256, 144, 0, 0.669975},
    {0, 256, 152, 0, 0.710247},
    {0, 256, 160, 0, 0.768121},
    {0, 256, 176, 0, 0.837433},
    {1, 128, 128, 0, 0.277819},
    {1, 128, 256, 0, 0.576944},
    {1, 128, 64, 0, 0.180557},
    {2, 128, 128, 0, 0.264902},
    {2, 128, 256, 0, 0.601589},
    {2, 128, 64, 0, 0.129649}};
constexpr double kLaunchUs[4] = {6.48406, 7.71413, 8.4122, 7.2806};  // by kind
constexpr double kUnitUs[4] = {2.73014e-08, 8.2449e-07, 2.16511e-07, 0.062932};
constexpr double k_sm_bw = 163234;
constexpr double k_l2_bw = 1.0714e+07;
constexpr double k_hbm_share = 0.919085;
constexpr double k_reduce_bw = 4.32541e+06;
constexpr double k_split_cost = 0.00338728;
constexpr double k_epi_bw = 48908.3;
constexpr double k_power = 2.98077;
constexpr double k_sector = 1.53819;
constexpr double k_epi_slow = 5.53964;
constexpr double k_stage_bw = 1.79012e+06;
constexpr double k_stage_launch = 3.37616;
}  // namespace hopper::model_fit
