// blocks/plan_model.cuh — wgmma_persistent's planner by a time model: every plan the launcher may take for a call
// (its tiles unsplit, split over a cluster or over the grid, the cluster kernel), each one's time predicted from the
// call's sizes and the GPU, and the fastest predicted taken. The model and how it was fitted to pinned times of
// shapes drawn at random: compare/ptx_model.py (model_time below is its `Model.predict`, candidates its
// `candidates`, word for word; tests/test_ptx_model.py holds the two to each other). Its parameters:
// blocks/plan_model_fit.h, written by that fit. Host code: nothing here times, synchronizes or allocates.
#pragma once
#include <cmath>

#include "blocks/plan_model_fit.h"
#include "blocks/wgmma_tile.cuh"

namespace hopper {

// What the planner knows of a call (compare.ptx_model.Call) and of the GPU.
struct ModelCall {
  int M = 0, N = 0, K = 0;
  bool a_col = false, b_col = false;
  int64_t a_row_bytes = 0, b_row_bytes = 0;  // A's and B's rows in storage order, after any staging copy
  bool c_tma = false;                          // TMA can store C
  bool f32 = true;                             // fp32 accumulation (the cut tiles' one form)
  int sms = 0, wave2 = 0, wave4 = 0;           // SMs; blocks that run at once in clusters of 2 and of 4
  int cluster_slots = 0;                       // wgmma_cluster's clusters that run at once
  double hbm_bytes_per_us = 0.0;               // the GPU's HBM bandwidth
};

// The kinds of plan, in compare.ptx_model.KINDS' order.
enum ModelKind : int { kModelPersistent = 0, kModelClusterSplit = 1, kModelGridSplit = 2, kModelCluster = 3 };

// Outputs whose N and K are whole 64-element boxes (N and K multiples of 64: the named suites' and most models'
// shapes) are what the rule (hopper::choose_plan, prefer_grid_split) was measured and tuned on, and what shapes
// drawn at random almost never are (an N and a K that are both multiples of 64: under one draw in a hundred), so
// the model's fit has next to no data there; wgmma_persistent keeps the rule for most of them (model_plans).
__host__ __device__ constexpr bool whole_boxes(int N, int K) { return N % 64 == 0 && K % 64 == 0; }

// M of two to four 128-row bands, the last one part-filled: the rule's tiles are 128 rows tall and waste the last
// band's empty rows, which the cut and swapped tiles (C's tile fitted to M) do not; the model prices that waste.
__host__ __device__ constexpr bool part_filled_bands(int M) { return M > 128 && M <= 512 && M % 128 != 0; }

// Whether the model plans an unpinned call (wgmma_persistent's launcher, compare.ptx_plans' mirror of it): row-major
// A, and on whole boxes only where the rule's plan splits K over the grid (rule_grid: a long K on a few tiles) or M
// part-fills its last 128-row band of a few (part_filled_bands) and the cut tiles' form holds (cut_form: fp32
// accumulation, C stored with TMA), where the model's picks ran faster on held-out sweeps of whole boxes than the
// rule's; elsewhere on whole boxes (M a multiple of 128, M up to one band, M past four; fp16 accumulation, which the
// sweeps did not time) the rule stays, its 128 x 64 and 128 x 128 tiles faster there than the model predicts them.
__host__ __device__ constexpr bool model_plans(int M, int N, int K, bool a_col, bool rule_grid, bool cut_form) {
  return !a_col && (!whole_boxes(N, K) || rule_grid || (part_filled_bands(M) && cut_form));
}
static_assert(model_plans(200, 4096, 4096, false, false, true) && !model_plans(200, 4096, 4096, false, false, false) &&
                  !model_plans(256, 4096, 4096, false, false, true) &&
                  model_plans(256, 4096, 4096, false, true, false) &&
                  model_plans(256, 4100, 4096, false, false, false) && !model_plans(200, 4100, 4096, true, true, true),
              "model_plans: the part-filled bands with the cut tiles' form, the rule's grid splits, off the boxes");

// The fitted figure of a kernel kind and C tile (bm rows, bn columns; swapped: a swapped cut tile), or -1 where the
// fit had none.
inline double model_rate(int kind, int bm, int bn, bool swapped) {
  for (const model_fit::Rate& r : model_fit::kRates)
    if (r.kind == kind && r.bm == bm && r.bn == bn && r.swapped == int(swapped)) return r.us_per_kblock;
  return -1.0;
}

// The terms of a plan's predicted time, in compare.ptx_model.MODEL_TERMS' order (ptx_kernels.call.MODEL_TERMS):
// the fixed latency of the launch and of each round's work unit, the k-loop where the tile's compute figure is the
// larger of its two parts, the k-loop where its operand bytes at the SM's share of L2 are, the epilogue, the
// cluster split's exchange, HBM, and the grid split's reduction.
enum ModelTerm : int {
  kTermLatency = 0, kTermCompute, kTermL2, kTermEpilogue, kTermSplit, kTermHbm, kTermReduce, kModelTerms
};

// A plan's predicted time in its pieces (compare.ptx_model.Model.terms), microseconds:
//   total = launch + (core^4 + hbm^4)^(1/4) + reduce, core = rounds x (unit + kb x per_kb + epilogue) + split.
struct ModelTime {
  double launch = 0.0, unit = 0.0, kloop = 0.0, epilogue = 0.0, split = 0.0, core = 0.0, hbm = 0.0, reduce = 0.0;
  bool l2 = false;  // the k-loop's operand bytes outweigh its compute figure
  double total() const {
    return launch + std::sqrt(std::sqrt(core * core * core * core + hbm * hbm * hbm * hbm)) + reduce;
  }
  // The term that contributed most: of the soft maximum of core and hbm only the larger side contributes (the
  // core in its parts, the launch's latency joining the units'), then the reduction adds its own.
  int decided() const {
    double part[kModelTerms] = {};
    part[kTermLatency] = launch;
    if (core >= hbm) {
      part[kTermLatency] += unit;
      part[l2 ? kTermL2 : kTermCompute] = kloop;
      part[kTermEpilogue] = epilogue;
      part[kTermSplit] = split;
    } else {
      part[kTermHbm] = hbm;
    }
    part[kTermReduce] = reduce;
    int best = 0;
    for (int i = 1; i < kModelTerms; ++i)
      if (part[i] > part[best]) best = i;
    return best;
  }
};

// A paired swapped tile halves A's reads from L2 only where A and B do not fit in L2 together (compare.ptx_model.
// PAIR_L2_BYTES); below, a pair's blocks read their whole boxes as a single tile's do.
constexpr double kPairL2Bytes = 24.0 * 1024 * 1024;

// The predicted time of a plan of `kind` on bm x bn tiles of C in `parts` K parts (compare.ptx_model.features and
// Model.predict), in its terms. false where the fit has no figure for it.
inline bool model_terms(const ModelCall& c, int kind, int bm, int bn, int parts, bool swapped, ModelTime* t) {
  const double rate = model_rate(kind, bm, bn, swapped);
  if (rate < 0.0) return false;
  // kModelCluster: wgmma_cluster's pairs of tile rows sharing B's box, or (swapped) a paired swapped tile's pairs of
  // tile columns sharing A's box (kPairFirstCode), an odd count's spare tile in each pair's column counted too
  const bool pairs_along_n = kind == kModelCluster && swapped;
  const int64_t tiles = int64_t(cdiv(c.M, bm)) * (pairs_along_n ? 2 * cdiv(cdiv(c.N, bn), 2) : cdiv(c.N, bn));
  const int64_t units = tiles * parts;
  int64_t blocks = c.sms;
  if (kind == kModelPersistent) blocks = persistent_blocks(int(units), c.sms, 0);
  if (kind == kModelCluster)
    blocks = 2 * int64_t(pairs_along_n ? persistent_blocks(cdiv(c.M, bm) * cdiv(cdiv(c.N, bn), 2), c.cluster_slots, 0)
                                       : persistent_blocks(cdiv(cdiv(c.M, bm), 2) * cdiv(c.N, bn), c.cluster_slots, 0));
  const double rounds = double((units + blocks - 1) / blocks), active = double(units < blocks ? units : blocks);
  const double kb = double(cdiv(cdiv(c.K, BK), parts));
  const bool a_halved = pairs_along_n && 2.0 * (double(c.M) * c.K + double(c.K) * c.N) > kPairL2Bytes;
  const double a_bytes = 128.0 * (bm < cdiv(c.M, 8) * 8 ? bm : cdiv(c.M, 8) * 8) / (a_halved ? 2 : 1);
  const double b_bytes =
      128.0 * (bn < cdiv(c.N, 8) * 8 ? bn : cdiv(c.N, 8) * 8) / (kind == kModelCluster && !pairs_along_n ? 2 : 1);
  using namespace model_fit;
  const double bw = k_sm_bw < k_l2_bw / active ? k_sm_bw : k_l2_bw / active;
  const double mem = (a_bytes * (c.a_row_bytes % 32 ? k_sector : 1.0) +
                      b_bytes * (c.b_row_bytes % 32 ? k_sector : 1.0)) / bw;
  const double per_kb = std::pow(std::pow(rate, k_power) + std::pow(mem, k_power), 1.0 / k_power);
  const double epi = 2.0 * (bm < c.M ? bm : c.M) * (bn < c.N ? bn : c.N) / k_epi_bw * (c.c_tma ? 1.0 : k_epi_slow);
  t->launch = kLaunchUs[kind];
  t->unit = rounds * kUnitUs[kind];
  t->kloop = rounds * kb * per_kb;
  t->l2 = mem > rate;
  t->epilogue = rounds * epi;
  t->split = kind == kModelClusterSplit ? k_split_cost * parts : 0.0;
  t->core = t->unit + t->kloop + t->epilogue + t->split;
  t->hbm = 2.0 * (double(c.M) * c.K + double(c.K) * c.N + double(c.M) * c.N) / c.hbm_bytes_per_us / k_hbm_share;
  t->reduce = kind == kModelGridSplit ? 8.0 * double(c.M) * c.N * parts / k_reduce_bw : 0.0;
  return true;
}

// The predicted time in microseconds of a plan (model_terms' total). < 0 where the fit has no figure for it.
inline double model_time(const ModelCall& c, int kind, int bm, int bn, int parts, bool swapped) {
  ModelTime t;
  return model_terms(c, kind, bm, bn, parts, swapped, &t) ? t.total() : -1.0;
}

// The plan (Plan::cluster: hand it to wgmma_cluster) the model predicts fastest among the launcher's candidates
// (compare.ptx_model.candidates): 128 x 256 / 128 / 64 unsplit; 128 x 192 where A's and B's rows are 128-byte
// aligned; 256 x 152 on column-major B; the cut tiles and the swapped ones in their one form (fp32 accumulation,
// row-major A, C stored with TMA; cut: whole 64-column boxes on row-major B; swapped: B's rows 16-byte aligned;
// rows off the 32-byte sectors too, priced by k_sector; the 128-row swapped ones also paired in clusters of two,
// kPairFirstCode, where the fit prices them), and those split over the grid inside the persistent kernel
// where the fit has timed them; 128 x 256 / 128 / 64 split in 2 or 4 over a cluster
// within one wave, >= 4 k-blocks a part; the grid's split at each of those widths (hopper::choose_grid_split,
// row-major A, >= 2 parts); the cluster kernel where B's rows lie off the 32-byte sectors (its multicast halves
// those reads; on the sectors the persistent kernel's own tiles run as fast) and M > 128 (it pairs tile rows: one
// band of them would leave half its blocks loading zeros). On whole 64-wide boxes (whole_boxes) neither the paired
// tiles nor the splits over a cluster: the fit, made on draws off those boxes, priced them faster there than they ran
// (docs/design/hopper.md, "The planner by model"). `us` gets the winner's predicted time, Plan::term the term that
// decided it.
inline Plan model_plan(const ModelCall& c, double* us = nullptr) {
  Plan best{256, 1};
  double best_us = -1.0;
  auto offer = [&](const Plan& plan, int kind, int bm, int bn, int parts, bool swapped) {
    ModelTime t;
    if (!model_terms(c, kind, bm, bn, parts, swapped, &t)) return;
    const double us = t.total();
    if (us > 0.0 && (best_us < 0.0 || us < best_us)) best = plan, best.term = t.decided(), best_us = us;
  };
  const int widths[3] = {256, 128, 64};
  for (int bn : widths) offer(Plan{bn, 1}, kModelPersistent, 128, bn, 1, false);
  if (c.a_row_bytes % 128 == 0 && c.b_row_bytes % 128 == 0) offer(Plan{192, 1}, kModelPersistent, 128, 192, 1, false);
  if (c.b_col) offer(Plan{152, 1, 256}, kModelPersistent, 256, 152, 1, false);
  const bool form = c.f32 && !c.a_col && c.c_tma;
  const bool boxes = whole_boxes(c.N, c.K);
  for (int i = 0; i < kCutTileCount && form; ++i) {
    const CutTile t = cut_tile(i);
    if (c.b_col || t.bn % 64 == 0)
      offer(Plan{t.bn, 1, t.bm, false, 0.0, kCutFirstCode + i}, kModelPersistent, t.bm, t.bn, 1, false);
  }
  for (int i = 0; i < kCutTileCount && form && c.b_row_bytes % 16 == 0; ++i) {
    const CutTile t = cut_tile(i);
    if (swappable(i))
      offer(Plan{t.bn, 1, t.bm, false, 0.0, kSwapFirstCode + i, 0.0, true}, kModelPersistent, t.bn, t.bm, 1, true);
  }
  for (int i = 0; i < kCutTileCount && form && c.b_row_bytes % 16 == 0 && !boxes; ++i) {  // the same, paired
    const CutTile t = cut_tile(i);
    if (pairable(i))
      offer(Plan{t.bn, 1, t.bm, false, 0.0, kPairFirstCode + i, 0.0, true}, kModelCluster, t.bn, t.bm, 1, true);
  }
  // the same tiles split over the grid inside the persistent kernel (GridSplit), where their tiles leave SMs idle
  // over a long K; offered only where the fit has timed them (model_rate: a grid split's figure for the tile)
  for (int i = 0; i < kCutTileCount && form; ++i) {
    const CutTile t = cut_tile(i);
    const int cut_parts = grid_parts(c.M, c.N, c.K, c.sms, t.bm, t.bn);
    if ((c.b_col || t.bn % 64 == 0) && cut_parts >= 2)
      offer(Plan{t.bn, cut_parts, t.bm, false, 0.0, kCutFirstCode + i}, kModelGridSplit, t.bm, t.bn, cut_parts, false);
    const int swap_parts = grid_parts(c.M, c.N, c.K, c.sms, t.bn, t.bm);  // C's tile: t.bn rows along M
    if (swappable(i) && c.b_row_bytes % 16 == 0 && swap_parts >= 2)
      offer(Plan{t.bn, swap_parts, t.bm, false, 0.0, kSwapFirstCode + i, 0.0, true}, kModelGridSplit, t.bn, t.bm,
            swap_parts, true);
  }
  const int kblocks = cdiv(c.K, BK);
  for (int split = 2; split <= 4 && !boxes; split *= 2)
    for (int bn : widths)
      if (kblocks >= 4 * split && int64_t(cdiv(c.M, 128)) * cdiv(c.N, bn) * split <= (split == 2 ? c.wave2 : c.wave4))
        offer(Plan{bn, split}, kModelClusterSplit, 128, bn, split, false);
  for (int bn : widths) {
    const Plan across = choose_grid_split(c.M, c.N, c.K, c.sms, bn);
    if (!c.a_col && across.split >= 2) offer(across, kModelGridSplit, 128, bn, across.split, false);
  }
  Plan cluster{256, 1};
  cluster.cluster = true;
  if (c.b_row_bytes % 32 && c.M > 128) offer(cluster, kModelCluster, 128, 256, 1, false);
  if (us) *us = best_us;
  return best;
}

}  // namespace hopper
