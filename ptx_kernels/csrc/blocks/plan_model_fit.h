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
    {3, 128, 256, 0, 0.566662},
    {3, 144, 128, 1, 0.312085},
    {3, 160, 128, 1, 0.351482},
    {3, 176, 128, 1, 0.386929},
    {3, 208, 128, 1, 0.463793},
    {3, 224, 128, 1, 0.506786},
    {3, 240, 128, 1, 0.542553},
    {0, 128, 128, 0, 0.256879},
    {0, 128, 144, 0, 0.290878},
    {0, 128, 160, 0, 0.339032},
    {0, 128, 176, 0, 0.362272},
    {0, 128, 192, 0, 0.409953},
    {0, 128, 208, 0, 0.43909},
    {0, 128, 224, 0, 0.489399},
    {0, 128, 240, 0, 0.514757},
    {0, 128, 256, 0, 0.534829},
    {0, 128, 64, 0, 0.160305},
    {0, 144, 128, 1, 0.287135},
    {0, 144, 256, 1, 0.615162},
    {0, 160, 128, 1, 0.324733},
    {0, 160, 256, 1, 0.708025},
    {0, 176, 128, 1, 0.355583},
    {0, 176, 256, 1, 0.792549},
    {0, 208, 128, 1, 0.432502},
    {0, 224, 128, 1, 0.475135},
    {0, 240, 128, 1, 0.505992},
    {0, 256, 128, 0, 0.549143},
    {0, 256, 144, 0, 0.650868},
    {0, 256, 152, 0, 0.680031},
    {0, 256, 160, 0, 0.746696},
    {0, 256, 176, 0, 0.822662},
    {1, 128, 128, 0, 0.257148},
    {1, 128, 256, 0, 0.544354},
    {1, 128, 64, 0, 0.169244},
    {2, 128, 128, 0, 0.247499},
    {2, 128, 144, 0, 0.37853},
    {2, 128, 160, 0, 0.391409},
    {2, 128, 176, 0, 0.40014},
    {2, 128, 208, 0, 0.493919},
    {2, 128, 224, 0, 0.524632},
    {2, 128, 240, 0, 0.560603},
    {2, 128, 256, 0, 0.566916},
    {2, 128, 64, 0, 0.122575},
    {2, 144, 128, 1, 0.392982},
    {2, 144, 256, 1, 0.729945},
    {2, 160, 128, 1, 0.422129},
    {2, 160, 256, 1, 0.79946},
    {2, 176, 128, 1, 0.460273},
    {2, 176, 256, 1, 0.876895},
    {2, 208, 128, 1, 0.522067},
    {2, 224, 128, 1, 0.586304},
    {2, 240, 128, 1, 0.633635},
    {2, 256, 128, 0, 0.636467},
    {2, 256, 144, 0, 0.715757},
    {2, 256, 160, 0, 0.816264},
    {2, 256, 176, 0, 0.874458}};
constexpr double kLaunchUs[4] = {6.29338, 7.60534, 8.25785, 6.7866};  // by kind
constexpr double kUnitUs[4] = {5.12061e-08, 5.519e-06, 4.57246e-07, 0.099077};
constexpr double k_sm_bw = 155234;
constexpr double k_l2_bw = 1.03615e+07;
constexpr double k_hbm_share = 0.910357;
constexpr double k_reduce_bw = 4.44929e+06;
constexpr double k_split_cost = 0.00320184;
constexpr double k_epi_bw = 44844.2;
constexpr double k_power = 2.82857;
constexpr double k_sector = 1.50491;
constexpr double k_epi_slow = 5.11987;
constexpr double k_stage_bw = 1.87119e+06;
constexpr double k_stage_launch = 3.11548;
}  // namespace hopper::model_fit
