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
#pragma once

namespace hopper::model_fit {
// microseconds per 64-deep k-block of one work unit, by kind (wgmma_persistent 0, the cluster split 1, the grid
// split 2, wgmma_cluster 3) and C's tile (a swapped cut tile's: rows along M, columns along N)
struct Rate {
  int kind, bm, bn, swapped;
  double us_per_kblock;
};
constexpr Rate kRates[] = {
    {3, 128, 256, 0, 0.564304},
    {0, 128, 128, 0, 0.264594},
    {0, 128, 144, 0, 0.292782},
    {0, 128, 160, 0, 0.341966},
    {0, 128, 176, 0, 0.365787},
    {0, 128, 192, 0, 0.419528},
    {0, 128, 208, 0, 0.444553},
    {0, 128, 224, 0, 0.495776},
    {0, 128, 240, 0, 0.522021},
    {0, 128, 256, 0, 0.548027},
    {0, 128, 64, 0, 0.163865},
    {0, 144, 128, 1, 0.289394},
    {0, 144, 256, 1, 0.625937},
    {0, 160, 128, 1, 0.326437},
    {0, 160, 256, 1, 0.717376},
    {0, 176, 128, 1, 0.358973},
    {0, 176, 256, 1, 0.79871},
    {0, 208, 128, 1, 0.436922},
    {0, 224, 128, 1, 0.479941},
    {0, 240, 128, 1, 0.511399},
    {0, 256, 128, 0, 0.553678},
    {0, 256, 144, 0, 0.658062},
    {0, 256, 152, 0, 0.693608},
    {0, 256, 160, 0, 0.753949},
    {0, 256, 176, 0, 0.828092},
    {1, 128, 128, 0, 0.265853},
    {1, 128, 256, 0, 0.55958},
    {1, 128, 64, 0, 0.172992},
    {2, 128, 128, 0, 0.248895},
    {2, 128, 144, 0, 0.396388},
    {2, 128, 160, 0, 0.412189},
    {2, 128, 176, 0, 0.421961},
    {2, 128, 208, 0, 0.519752},
    {2, 128, 224, 0, 0.554184},
    {2, 128, 240, 0, 0.593386},
    {2, 128, 256, 0, 0.577723},
    {2, 128, 64, 0, 0.118233},
    {2, 144, 128, 1, 0.388162},
    {2, 144, 256, 1, 0.757124},
    {2, 160, 128, 1, 0.420361},
    {2, 160, 256, 1, 0.800199},
    {2, 176, 128, 1, 0.462873},
    {2, 176, 256, 1, 0.882122},
    {2, 208, 128, 1, 0.548644},
    {2, 224, 128, 1, 0.61125},
    {2, 240, 128, 1, 0.658796},
    {2, 256, 128, 0, 0.631413},
    {2, 256, 144, 0, 0.732371},
    {2, 256, 160, 0, 0.852604},
    {2, 256, 176, 0, 0.911247}};
constexpr double kLaunchUs[4] = {6.41714, 7.67484, 8.36193, 7.29086};  // by kind
constexpr double kUnitUs[4] = {5.70123e-08, 2.26801e-06, 5.18374e-07, 1.57779e-05};
constexpr double k_sm_bw = 160186;
constexpr double k_l2_bw = 1.05427e+07;
constexpr double k_hbm_share = 0.915361;
constexpr double k_reduce_bw = 4.29155e+06;
constexpr double k_split_cost = 0.000758125;
constexpr double k_epi_bw = 47364.9;
constexpr double k_power = 2.8678;
constexpr double k_sector = 1.52614;
constexpr double k_epi_slow = 5.35595;
constexpr double k_stage_bw = 1.82568e+06;
constexpr double k_stage_launch = 3.23221;
}  // namespace hopper::model_fit
