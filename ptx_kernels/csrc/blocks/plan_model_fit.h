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
//   compare/sweeps/h200-seed-9408-fp16-ptx-m512.jsonl.gz
//   compare/sweeps/h200-seed-9410-fp16-ptx-m1024-pairs.jsonl.gz
//   compare/sweeps/h200-pairs-8-shapes-fp16-ptx.jsonl.gz
#pragma once

namespace hopper::model_fit {
// microseconds per 64-deep k-block of one work unit, by kind (wgmma_persistent 0, the cluster split 1, the grid
// split 2, wgmma_cluster 3) and C's tile (a swapped cut tile's: rows along M, columns along N)
struct Rate {
  int kind, bm, bn, swapped;
  double us_per_kblock;
};
constexpr Rate kRates[] = {
    {3, 128, 256, 0, 0.575157},
    {3, 144, 128, 1, 0.300388},
    {3, 160, 128, 1, 0.339472},
    {3, 176, 128, 1, 0.374858},
    {3, 208, 128, 1, 0.453271},
    {3, 224, 128, 1, 0.497128},
    {3, 240, 128, 1, 0.532675},
    {0, 128, 128, 0, 0.257478},
    {0, 128, 144, 0, 0.291799},
    {0, 128, 160, 0, 0.33985},
    {0, 128, 176, 0, 0.36308},
    {0, 128, 192, 0, 0.410245},
    {0, 128, 208, 0, 0.439673},
    {0, 128, 224, 0, 0.489842},
    {0, 128, 240, 0, 0.515186},
    {0, 128, 256, 0, 0.535398},
    {0, 128, 64, 0, 0.160655},
    {0, 144, 128, 1, 0.288251},
    {0, 144, 256, 1, 0.615588},
    {0, 160, 128, 1, 0.325804},
    {0, 160, 256, 1, 0.70826},
    {0, 176, 128, 1, 0.356561},
    {0, 176, 256, 1, 0.792675},
    {0, 208, 128, 1, 0.433201},
    {0, 224, 128, 1, 0.475697},
    {0, 240, 128, 1, 0.50649},
    {0, 256, 128, 0, 0.549536},
    {0, 256, 144, 0, 0.650891},
    {0, 256, 152, 0, 0.680098},
    {0, 256, 160, 0, 0.746615},
    {0, 256, 176, 0, 0.822595},
    {1, 128, 128, 0, 0.257818},
    {1, 128, 256, 0, 0.545023},
    {1, 128, 64, 0, 0.169563},
    {2, 128, 128, 0, 0.248465},
    {2, 128, 144, 0, 0.379321},
    {2, 128, 160, 0, 0.392362},
    {2, 128, 176, 0, 0.401209},
    {2, 128, 208, 0, 0.494355},
    {2, 128, 224, 0, 0.525082},
    {2, 128, 240, 0, 0.56089},
    {2, 128, 256, 0, 0.567441},
    {2, 128, 64, 0, 0.123609},
    {2, 144, 128, 1, 0.393515},
    {2, 144, 256, 1, 0.729742},
    {2, 160, 128, 1, 0.422747},
    {2, 160, 256, 1, 0.799116},
    {2, 176, 128, 1, 0.460782},
    {2, 176, 256, 1, 0.876357},
    {2, 208, 128, 1, 0.522393},
    {2, 224, 128, 1, 0.586356},
    {2, 240, 128, 1, 0.633586},
    {2, 256, 128, 0, 0.636524},
    {2, 256, 144, 0, 0.715589},
    {2, 256, 160, 0, 0.81589},
    {2, 256, 176, 0, 0.873894}};
constexpr double kLaunchUs[4] = {6.29464, 7.60563, 8.2564, 6.5962};  // by kind
constexpr double kUnitUs[4] = {8.28668e-08, 9.85524e-06, 7.10694e-07, 3.91955e-06};
constexpr double k_sm_bw = 157264;
constexpr double k_l2_bw = 1.04008e+07;
constexpr double k_hbm_share = 0.910906;
constexpr double k_reduce_bw = 4.4419e+06;
constexpr double k_split_cost = 0.00321536;
constexpr double k_epi_bw = 44713.5;
constexpr double k_power = 2.80954;
constexpr double k_sector = 1.50586;
constexpr double k_epi_slow = 5.11318;
constexpr double k_stage_bw = 1.87131e+06;
constexpr double k_stage_launch = 3.11314;
}  // namespace hopper::model_fit
