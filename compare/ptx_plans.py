"""`python -m compare.ptx_plans`: wgmma_persistent's plans judged on PTX sweep data (no GPU; nvcc for --against).

A sweep with --ptx or --ptx-only (`python -m compare sweep`) times, on each case, wgmma_persistent's own plan and
each of its tiles and K splits pinned (`compare.sweep.ptx_plans`). From such files:

1. per pinned tile, its speed per output against 128 x 256 at equal fill: the pinned 128 x 256 call's time times
   its fill, over the tile's time times its fill (fill: the share of the SM-rounds its tiles fill, times the share
   of its columns and rows inside the output), as a geomean over the cases whose output is not skinny (M and N over
   128) with at least 1 GFLOP. That is the figure hopper::choose_plan's tile speeds stand for;
2. with --against REV: the plan wgmma_persistent's rule (hopper::choose_plan, then hopper::prefer_grid_split, with
   the launcher's arguments, and its hand-off to wgmma_cluster) makes for each case, at git revision REV and in
   this tree, each compiled on the CPU. Where the two differ, both plans' pinned times (the same process, the same
   operands), and the speed of this tree's plan over REV's: a geomean over the cases both were timed on, each case
   planned alike counting 1 (as do cases whose own plan went to mma_stream, which the rule does not decide).
"""
from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from hgemm_common.errors import HgemmError

from .bench import geomean
from .sweep import PAIR_FIRST_CODE, PAIR_TILES, PLAN_TILES as TILES, SWAP_FIRST_CODE, SWAP_TILES

SMS = 132  # the lent GPUs' SM count (H100 and H200): the fill the rule plans for
GRID_CODES = {256: 1, 128: 2, 64: 3}  # the grid split's tiles (wgmma_splitk_grid, pinned by width)

# The rule as wgmma_persistent's launcher calls it (launch_wgmma_persistent, plan_wgmma): 132 SMs, 120 blocks in
# clusters of 4; 128 x 192 where A's and B's rows are 128-byte aligned; 256 x 152 where B is column-major; the cut
# tiles and the swapped ones (where the header has them) in their one form; the hand-off to wgmma_cluster of a plan
# on wide tiles against B rows off the 32-byte sectors. Reads "M N K LAYOUT" lines, prints "BM BN SPLIT GRID SWAP
# CLUSTER" (a swapped plan's BM runs along N, its BN along M; CLUSTER: the launcher hands the plan to wgmma_cluster).
RULE_PROGRAM = r"""
#include <cstdio>
#include "blocks/wgmma_tile.cuh"
#if HGEMM_HANDS_TO_CLUSTER
#include "sm90/handoff.h"
#endif
#if HGEMM_PLAN_MODEL
#include "blocks/plan_model.cuh"
// the launcher's model (plan_by_model) on the sweeps' GPU; staged rows land on 128 bytes
static void print_model(int M, int N, int K, bool b_col, long row_a, long row_b) {
  hopper::ModelCall c;
  c.M = M, c.N = N, c.K = K, c.b_col = b_col, c.c_tma = N % 8 == 0;
  c.a_row_bytes = row_a % 16 ? (row_a + 127) / 128 * 128 : row_a;
  c.b_row_bytes = row_b % 16 ? (row_b + 127) / 128 * 128 : row_b;
  c.sms = 132, c.wave2 = 132, c.wave4 = 120, c.cluster_slots = 66, c.hbm_bytes_per_us = HGEMM_HBM_BYTES_PER_US;
  const hopper::Plan m = hopper::model_plan(c);
#if HGEMM_PAIR_MENU
  const int swap = m.swap ? (m.cut >= hopper::kPairFirstCode ? 2 : 1) : 0;  // 2: paired in clusters
#else
  const int swap = int(m.swap);
#endif
  std::printf("%d %d %d %d %d %d\n", m.bm, m.bn, m.split, int(m.grid), swap, int(m.cluster));
}
#endif
int main() {
  int M, N, K;
  char L[8];
  while (std::scanf("%d %d %d %7s", &M, &N, &K, L) == 4) {
    const bool b_col = L[1] == 'T', a_col = L[0] == 'T';
    const long row_a = 2L * (a_col ? M : K), row_b = 2L * (b_col ? K : N);
    const double speed192 = row_a % 128 == 0 && row_b % 128 == 0 ? 0.96 : 0.0;
    const double tall = b_col ? hopper::kSpeedTall : 0.0;
    int swapped = 0, cut = 0;
#if HGEMM_PLAN_MODEL
    if (!a_col && !hopper::whole_boxes(N, K)) {
      print_model(M, N, K, b_col, row_a, row_b);
      continue;
    }
#endif
#if HGEMM_CUT_MENU
    const bool cut_form = !a_col && row_b % 32 == 0 && N % 8 == 0;
    const int menu = !cut_form ? hopper::kNoCut : b_col ? hopper::kCutAll : hopper::kCutWholeBoxes;
#if HGEMM_SWAP_MENU
    const bool swap_form = !a_col && row_a % 32 == 0 && row_b % 16 == 0 && N % 8 == 0;
    hopper::Plan p = hopper::choose_plan(M, N, K, 132, 0, 0, 4, 132, 120, speed192, tall, menu, swap_form);
    swapped = int(p.swap);
#else
    hopper::Plan p = hopper::choose_plan(M, N, K, 132, 0, 0, 4, 132, 120, speed192, tall, menu);
#endif
#else
    hopper::Plan p = hopper::choose_plan(M, N, K, 132, 0, 0, 4, 132, 120, speed192, tall);
#endif
#if HGEMM_CUT_MENU
    cut = p.cut;
#endif
    if (!a_col) p = hopper::prefer_grid_split(p, M, N, K, 132);
#if HGEMM_PLAN_MODEL && HGEMM_MODEL_PLANS
#if HGEMM_MODEL_BANDS == 2
    if (hopper::model_plans(M, N, K, a_col, p.grid, N % 8 == 0)) {  // the rule's grid splits, part-filled bands
#elif HGEMM_MODEL_BANDS
    if (hopper::model_plans(M, N, K, a_col, p.grid)) {  // (trees af72d00 to 443f324: bands at any accumulation)
#else
    if (hopper::model_plans(N, K, a_col, p.grid)) {  // whole boxes the rule splits over the grid
#endif
      print_model(M, N, K, b_col, row_a, row_b);
      continue;
    }
#endif
    const bool unsplit = !p.grid && p.split <= 1 && !swapped && !cut;
#if HGEMM_HANDS_TO_CLUSTER
    const bool cluster = unsplit && hands_to_cluster(M, N, p.bn, row_b % 32 != 0, 132);
#else
    const long wide_tiles = long((M + 127) / 128) * ((N + 255) / 256);
    const bool cluster = unsplit && row_b % 32 != 0 && (p.bn == 256 || p.bn == 152 || wide_tiles >= 132);
#endif
    std::printf("%d %d %d %d %d %d\n", p.bm, p.bn, p.split, int(p.grid), swapped, int(cluster));
  }
  return 0;
}
"""


def read_cases(files: list[Path]) -> dict[str, dict]:
    """Per case of the files (fp32 accumulation): its problem, seed, the GPU of its run, torch.matmul's time, the
    PTX candidates' times by (kernel, tile code, split) and the own plan's record (tile 0)."""
    cases: dict[str, dict] = {}
    gpu = None
    for f in files:
        with (gzip.open(f, "rt") if str(f).endswith(".gz") else open(f)) as fh:
            for line in fh:
                r = json.loads(line)
                if r.get("type") == "run":
                    gpu = r["environment"]["gpu"]
                if r.get("type") != "candidate" or r.get("side") != "ptx" or r.get("status") != "ok":
                    continue
                if r["problem"]["acc"] != "fp32":
                    continue
                c = r["call"]
                case = cases.setdefault(r["case"], {"problem": r["problem"], "seed": r.get("seed"), "gpu": gpu,
                                                    "torch_ms": r["torch_ms"], "ms": {}})
                case["ms"][(c["kernel"], c["tile"], c["split"])] = r["ms"]
                if c["kernel"] == "wgmma_persistent" and c["tile"] == 0:
                    case["own"] = c
    return cases


def fill(m: int, n: int, bm: int, bn: int, sms: int = SMS) -> float:
    """The share of the SM-rounds bm x bn tiles fill on an m x n output, times the share of their columns inside n
    and of their rows inside m (against 128-row tiles': the other tiles share those)."""
    tiles_m, tiles_n = -(-m // bm), -(-n // bn)
    units = tiles_m * tiles_n
    rounds = -(-units // sms)
    return units / (rounds * sms) * n / (tiles_n * bn) * (-(-m // 128) * 128) / (tiles_m * bm)


def tile_speeds(cases: dict[str, dict]) -> dict[int, tuple[int, float]]:
    """Per pinned tile code: (cases, geomean speed per output against 128 x 256 at equal fill), over the cases that
    are not skinny with at least 1 GFLOP and both timed unsplit."""
    per: dict[int, list[float]] = {}
    for case in cases.values():
        p = case["problem"]
        m, n, k = p["m"], p["n"], p["k"]
        wide = case["ms"].get(("wgmma_persistent", 1, 1))
        if m <= 128 or n <= 128 or 2 * m * n * k < 1e9 or wide is None:
            continue
        base = wide * fill(m, n, *TILES[1])
        for (kernel, code, split), ms in case["ms"].items():
            if kernel == "wgmma_persistent" and split == 1 and code in TILES and code != 1:
                per.setdefault(code, []).append(base / (ms * fill(m, n, *TILES[code])))
    return {code: (len(v), geomean(v)) for code, v in sorted(per.items())}


def pair_stats(cases: dict[str, dict]) -> dict | None:
    """What the paired swapped tiles (PAIR_TILES, pinned whole or split over the grid) buy in sweep records that time
    them: the cases with a pair timed, those where a pair is the fastest pinned plan, each pair's time against the
    same tile unpaired at the same split (geomean, p10, p90 of unpaired over paired: > 1 is the pair faster), and over
    those cases the fastest pinned plan x torch.matmul without the pairs and with them (geomeans). None where no case
    times a pair."""
    cases_with, fastest, ratios, without, with_pairs = 0, 0, [], [], []
    for case in cases.values():
        ms = {k: v for k, v in case["ms"].items() if k != ("wgmma_persistent", 0, 0)}
        pairs = {k: v for k, v in ms.items() if k[0] == "wgmma_persistent" and k[1] in PAIR_TILES}
        if not pairs:
            continue
        rest = [v for k, v in ms.items() if k not in pairs]
        cases_with += 1
        fastest += min(pairs.values()) < min(rest)
        for (kernel, code, split), t in pairs.items():
            single = ms.get((kernel, code - PAIR_FIRST_CODE + SWAP_FIRST_CODE, split))
            if single is not None:
                ratios.append(single / t)
        without.append(case["torch_ms"] / min(rest))
        with_pairs.append(case["torch_ms"] / min(ms.values()))
    if not cases_with:
        return None
    return {"cases": cases_with, "fastest": fastest, "timings": len(ratios), "speed": geomean(ratios),
            "p10": float(np.percentile(ratios, 10)), "p90": float(np.percentile(ratios, 90)),
            "x_torch_without": geomean(without), "x_torch_with": geomean(with_pairs)}


def plan_key(bm: int, bn: int, split: int, grid: int, swap: int = 0, cluster: int = 0) -> tuple[str, int, int]:
    """The sweep candidate that pins a plan: the cluster kernel where the launcher hands the plan to it, the grid
    split by its width, a cluster split or an unsplit tile by its tile code (a swapped cut tile's: C's tile is
    (bn, bm); swap 2: the swapped tile paired in clusters), a cut or swapped tile split over the grid by its code and
    parts."""
    if cluster:
        return ("wgmma_cluster", 0, 0)
    if grid:
        return ("wgmma_splitk_grid", GRID_CODES[bn], 0)
    if swap == 2:  # a paired swapped tile
        return ("wgmma_persistent", next(c for c, t in PAIR_TILES.items() if t == (bn, bm)), 1)
    if swap:
        return ("wgmma_persistent", next(c for c, t in SWAP_TILES.items() if t == (bn, bm)), split if split > 1 else 1)
    code = next(c for c, t in TILES.items() if t == (bm, bn) and c not in SWAP_TILES)
    return ("wgmma_persistent", code, split if split > 1 else 1)


def rule_plans(shapes: list[tuple[int, int, int, str]], csrc: Path, workdir: Path,
               hbm_bytes_per_us: float = 4.8e6, model: bool | None = None) -> list[tuple[int, ...]]:
    """The rule's plan (bm, bn, split, grid, swap, cluster) of each shape, with the headers under csrc
    (RULE_PROGRAM); where they hold the model (blocks/plan_model.cuh) and `model` is not False, the model's plan on
    a GPU of 132 SMs with that HBM bandwidth (the default: the H200's, which the sweeps ran on)."""
    from ptx_kernels import toolchain

    nvcc = toolchain.find_nvcc()
    if nvcc is None:
        raise HgemmError("compare.ptx_plans --against compiles the rule with nvcc, and none is on this machine")
    src, exe = workdir / "rule.cu", workdir / f"rule_{abs(hash(str(csrc)))}"
    src.write_text(RULE_PROGRAM)
    header = (csrc / "blocks" / "wgmma_tile.cuh").read_text()
    cut, swap, pair = "kCutAll" in header, "kSwapFirstCode" in header, "kPairFirstCode" in header
    cluster = "hands_to_cluster" in (csrc / "sm90" / "handoff.h").read_text()
    model = (csrc / "blocks" / "plan_model.cuh").exists() and model is not False
    model_header = (csrc / "blocks" / "plan_model.cuh").read_text() if model else ""
    model_plans = "model_plans" in model_header
    model_bands = 2 if "bool cut_form)" in model_header else int("part_filled_bands" in model_header)
    subprocess.run([nvcc, "-std=c++17", "-O2", toolchain.ARCHS["sm_90a"], f"-I{csrc}", f"-DHGEMM_CUT_MENU={int(cut)}",
                    f"-DHGEMM_SWAP_MENU={int(swap)}", f"-DHGEMM_PAIR_MENU={int(pair)}",
                    f"-DHGEMM_HANDS_TO_CLUSTER={int(cluster)}", f"-DHGEMM_PLAN_MODEL={int(model)}",
                    f"-DHGEMM_MODEL_PLANS={int(model_plans)}", f"-DHGEMM_MODEL_BANDS={int(model_bands)}",
                    f"-DHGEMM_HBM_BYTES_PER_US={hbm_bytes_per_us}",
                    "-o", str(exe), str(src)], check=True, capture_output=True)
    out = subprocess.run([str(exe)], input="".join(f"{m} {n} {k} {lay}\n" for m, n, k, lay in shapes),
                         capture_output=True, text=True, check=True).stdout.split("\n")
    return [tuple(map(int, line.split())) for line in out[:len(shapes)]]


def compare_rules(cases: dict[str, dict], old: list[tuple[int, ...]],
                  new: list[tuple[int, ...]]) -> tuple[list, int, list]:
    """(rows of the cases planned differently and both timed: (speed new over old, case, old plan, new plan, old x
    torch, new x torch), the count of cases planned alike or handed to mma_stream, and (old, new) time over the
    fastest pinned plan's of each case both plans were timed on, but those handed to mma_stream)."""
    rows, alike, over = [], 0, []
    for (key, case), po, pn in zip(cases.items(), old, new):
        own = case.get("own")
        if own is None:
            continue
        ms, ko, kn = case["ms"], plan_key(*po), plan_key(*pn)
        if own.get("ran") != "mma_stream" and ko in ms and kn in ms:
            fastest = min(t for k, t in ms.items() if k != ("wgmma_persistent", 0, 0))
            over.append((ms[ko] / fastest, ms[kn] / fastest))
        if po == pn or own.get("ran") == "mma_stream":
            alike += 1
            continue
        if ko not in ms or kn not in ms:
            continue
        t_old, t_new = case["ms"][ko], case["ms"][kn]
        rows.append((t_old / t_new, key, po, pn, case["torch_ms"] / t_old, case["torch_ms"] / t_new))
    return rows, alike, over


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m compare.ptx_plans", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="+", help="sweep data files timed with --ptx or --ptx-only")
    ap.add_argument("--against", metavar="REV", help="a git revision whose rule to compare this tree's with")
    args = ap.parse_args(argv)
    missing = [p for p in args.data if not Path(p).exists()]
    if missing:
        print(f"python -m compare.ptx_plans: error: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    cases = read_cases([Path(p) for p in args.data])
    print(f"{len(cases)} cases (fp32 accumulation) in {len(args.data)} file(s)")
    print("pinned tile: cases, speed per output against 128 x 256 at equal fill (geomean)")
    for code, (count, speed) in tile_speeds(cases).items():
        bm, bn = TILES[code]
        print(f"  {code:2d}  {bm} x {bn:<3d}  {count:4d}  {speed:.3f}{'  (swapped)' if code in SWAP_TILES else ''}")
    pairs = pair_stats(cases)
    if pairs:
        print(f"paired swapped tiles: timed on {pairs['cases']} cases, the fastest plan on {pairs['fastest']}; "
              f"the same tile unpaired over paired {pairs['speed']:.3f} (geomean of {pairs['timings']}; p10 "
              f"{pairs['p10']:.3f}, p90 {pairs['p90']:.3f}); the fastest plan x torch.matmul over those cases "
              f"{pairs['x_torch_without']:.3f} without them, {pairs['x_torch_with']:.3f} with them")
    if not args.against:
        return 0
    root = Path(__file__).resolve().parents[1]
    shapes = [(c["problem"]["m"], c["problem"]["n"], c["problem"]["k"], c["problem"]["layout"]) for c in cases.values()]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        archive = subprocess.run(["git", "-C", str(root), "archive", args.against, "ptx_kernels/csrc"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
        old = rule_plans(shapes, tmp / "ptx_kernels" / "csrc", tmp)
        new = rule_plans(shapes, root / "ptx_kernels" / "csrc", tmp)
    rows, alike, over = compare_rules(cases, old, new)
    overall = geomean([r[0] for r in rows] + [1.0] * alike)
    changed = f"{geomean([r[0] for r in rows]):.4f} over the changed" if rows else "none changed"
    print(f"rule of this tree against {args.against}: {len(rows)} cases planned differently, {alike} alike; speed of "
          f"this tree's plans over {args.against}'s: {overall:.4f} over all, {changed}")
    if over:
        print(f"time over the fastest pinned plan ({len(over)} cases; geomean): this tree's "
              f"{geomean([o[1] for o in over]):.4f}, {args.against}'s {geomean([o[0] for o in over]):.4f}")
    for speed, key, po, pn, x_old, x_new in sorted(rows):
        print(f"  {speed:.3f}  {key:44s} {po} x{x_old:.3f} -> {pn} x{x_new:.3f}  "
              "(bm, bn, split, grid, swap, cluster; x torch)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
