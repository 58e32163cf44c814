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
    {3, 128, 256, 0, 0.574966},
    {3, 144, 128, 1, 0.300316},
    {3, 160, 128, 1, 0.339862},
    {3, 176, 128, 1, 0.375304},
    {3, 208, 128, 1, 0.453001},
    {3, 224, 128, 1, 0.497117},
    {3, 240, 128, 1, 0.532947},
    {0, 128, 128, 0, 0.257463},
    {0, 128, 144, 0, 0.291771},
    {0, 128, 160, 0, 0.339823},
    {0, 128, 176, 0, 0.363055},
    {0, 128, 192, 0, 0.410232},
    {0, 128, 208, 0, 0.439651},
    {0, 128, 224, 0, 0.489821},
    {0, 128, 240, 0, 0.515167},
    {0, 128, 256, 0, 0.535382},
    {0, 128, 64, 0, 0.160642},
    {0, 144, 128, 1, 0.28822},
    {0, 144, 256, 1, 0.615573},
    {0, 160, 128, 1, 0.325778},
    {0, 160, 256, 1, 0.708249},
    {0, 176, 128, 1, 0.356535},
    {0, 176, 256, 1, 0.792669},
    {0, 208, 128, 1, 0.433181},
    {0, 224, 128, 1, 0.475677},
    {0, 240, 128, 1, 0.50647},
    {0, 256, 128, 0, 0.549518},
    {0, 256, 144, 0, 0.650879},
    {0, 256, 152, 0, 0.680087},
    {0, 256, 160, 0, 0.746605},
    {0, 256, 176, 0, 0.822593},
    {1, 128, 128, 0, 0.257812},
    {1, 128, 256, 0, 0.545016},
    {1, 128, 64, 0, 0.169558},
    {2, 128, 128, 0, 0.24839},
    {2, 128, 144, 0, 0.379232},
    {2, 128, 160, 0, 0.392272},
    {2, 128, 176, 0, 0.401109},
    {2, 128, 208, 0, 0.494282},
    {2, 128, 224, 0, 0.525008},
    {2, 128, 240, 0, 0.560825},
    {2, 128, 256, 0, 0.56739},
    {2, 128, 64, 0, 0.123521},
    {2, 144, 128, 1, 0.393437},
    {2, 144, 256, 1, 0.729713},
    {2, 160, 128, 1, 0.422667},
    {2, 160, 256, 1, 0.799097},
    {2, 176, 128, 1, 0.460709},
    {2, 176, 256, 1, 0.876351},
    {2, 208, 128, 1, 0.522341},
    {2, 224, 128, 1, 0.58631},
    {2, 240, 128, 1, 0.633544},
    {2, 256, 128, 0, 0.636488},
    {2, 256, 144, 0, 0.715554},
    {2, 256, 160, 0, 0.815858},
    {2, 256, 176, 0, 0.873873}};
constexpr double kLaunchUs[4] = {6.29494, 7.60566, 8.25692, 6.60367};  // by kind
constexpr double kUnitUs[4] = {8.18843e-08, 9.80354e-06, 7.34061e-07, 3.83514e-06};
constexpr double k_sm_bw = 157261;
constexpr double k_l2_bw = 1.03994e+07;
constexpr double k_hbm_share = 0.910933;
constexpr double k_reduce_bw = 4.44248e+06;
constexpr double k_split_cost = 0.00322881;
constexpr double k_epi_bw = 44735.6;
constexpr double k_power = 2.80924;
constexpr double k_sector = 1.50585;
constexpr double k_epi_slow = 5.11511;
constexpr double k_stage_bw = 1.87132e+06;
constexpr double k_stage_launch = 3.11318;
}  // namespace hopper::model_fit
