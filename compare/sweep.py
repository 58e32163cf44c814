"""`python -m compare sweep`: every candidate plan timed on shapes nobody chose, the data a cost model
(`hgemm_common.cost_model`) is fitted on; `--fit` fits it and says how well it predicts.

The draw is the random suite's (`compare.bench.random_shapes`): for each of --seeds, the shapes --start to
--start + --count - 1 of that seed's draw (a longer draw's prefix is a shorter draw, so chunks of one seed never
overlap), each shape in its drawn layout and in every --dtypes x --accs pair (bf16 accumulates in fp32 only). One
such (shape, layout, dtype, accumulation) is a *case*. Per case:

1. the candidates: every (kernel, staging, configuration) tune="exact" times and every staging it skips as too
   dear (`compare.tune.candidate_plans`, every_staging: a superset of what the cost model scores); kernel="auto" as
   a call runs it today (the plan table's choice, its source recorded); with --gluon the Gluon kernel's
   configurations; with --ptx the hand-written side's plans (`ptx_plans`: wgmma_persistent's own choice, each of
   its tiles and K splits pinned, the grid split and the cluster kernel it hands problems to), each with what the
   launch reports it ran; with --ptx-only those alone (a file of them is not for the Triton fit); with
   --gluon-only the Gluon kernel's configurations alone (data for its own parameters);
2. each candidate checked on NaN-poisoned output against the reference on the very inputs it is timed on, then
   the ones that pass timed per call and interleaved with torch.matmul and its A/A control (`compare.bench.
   bench_shape`: the bench's timer, L2 flushed before each call, the GPU queue kept full). A candidate that fails
   its check or raises is recorded with its status and no time;
3. the case's records appended to the data file in one write, the case record last.

Chunks: a run takes the cases of its draw that the data file does not hold yet (a rerun of the same command goes
on where the last one stopped), in blocks of --block cases, each block's Triton candidates compiled first in worker
processes (`compare.tune.warm`). `--budget-s` stops the run cleanly before a block or a case that the time left
would not cover, so each chunk fits a device command's limit. A case whose start is in the file twice without
its end (the process died on it twice) is recorded as crashed and skipped.

The data file: `compare.sweep_data` (its records, how it is read and appended to).
"""
from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from hgemm_common import cost_model as cm
from hgemm_common.errors import HgemmValueError
from hgemm_common.record import ACCS_FOR
from hgemm_common.validation import DTYPES as TORCH_DTYPES

from .bench import CONTROL, SHARE_AT, random_shapes
from .registry import BASELINE
from .sweep_data import Data, append, read

DEFAULT_BUDGET_MS = 10.0  # timed GPU ms per candidate and case (the bench's --budget-ms: a few dozen calls each)
DEFAULT_BLOCK = 48  # cases compiled ahead together, then timed
CRASHES = 2  # starts without an end after which a case is skipped


# ----------------------------------------------------------------------------------------------------------------
# The draw
# ----------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    seed: int
    index: int  # the shape's position in its seed's draw
    m: int
    n: int
    k: int
    layout: str
    dtype: str
    acc: str

    @property
    def key(self) -> str:
        return f"{self.seed}/{self.index}/{self.m}x{self.n}x{self.k}/{self.layout}/{self.dtype}/{self.acc}"

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.m, self.n, self.k)


def draw(seeds: list[int], start: int, count: int, layouts: list[str], dtypes: list[str],
         accs: list[str], max_m: int | None = None, max_macs: int | None = None, nk_multiple: int = 8) -> list[Case]:
    """The cases of a sweep: shapes start .. start + count - 1 of each seed's random-suite draw (M narrowed to
    1..max_m, problems to max_macs multiply-adds, where given; the rounded shapes' N and K to multiples of
    nk_multiple), each in every dtype and the accumulations it offers among `accs`."""
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise HgemmValueError(f"sweep: --start must be an integer >= 0, got {start!r}")
    out = []
    for seed in seeds:
        shapes = random_shapes(seed, start + count, layouts, max_m, max_macs, nk_multiple)
        for i, (m, n, k, layout) in enumerate(shapes[start:], start):
            out += [Case(seed, i, m, n, k, layout, d, acc) for d in dtypes for acc in accs if acc in ACCS_FOR[d]]
    return out


def named(shapes: list[tuple[int, int, int, str]], dtypes: list[str], accs: list[str]) -> list[Case]:
    """The cases of named shapes (a suite's or --shapes', each with its layout): seed 0, the shape's position in the
    list as its index, in every dtype and the accumulations it offers among `accs`."""
    return [Case(0, i, m, n, k, layout, d, acc) for i, (m, n, k, layout) in enumerate(shapes)
            for d in dtypes for acc in accs if acc in ACCS_FOR[d]]


def scored_by(cases: list[Case], kernel: str, arch: int, sms: int) -> list[Case]:
    """The cases whose candidates include `kernel` (`dispatch.candidates` with every staging, the set the sweep
    times and the cost model scores), judged on stand-in operands of the case's layout (a contiguous matrix's
    alignment is its shape's): a sweep that gathers data for one kernel without timing the draw's other shapes."""
    from triton_kernels import dispatch
    from triton_kernels.variants import BY_KERNEL

    if kernel not in BY_KERNEL:
        raise HgemmValueError(f"sweep --scored-by: no Triton kernel {kernel!r}; one of {', '.join(sorted(BY_KERNEL))}")

    def scored(c: Case) -> bool:
        a, b = stand_ins(c.m, c.n, c.k, c.layout, c.dtype)
        return any(kern == kernel for kern, _ in dispatch.candidates(c.m, c.n, c.k, arch, sms, a, b, None,
                                                                    every_staging=True))

    return [c for c in cases if scored(c)]


def stand_ins(m: int, n: int, k: int, layout: str, dtype: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A and B on the meta device, contiguous in the layout's storage order as the sweep's operands are: what the
    planner's alignment tests see of them, with no memory behind them."""
    dt = TORCH_DTYPES[dtype]
    a = torch.empty((m, k) if layout[0] == "N" else (k, m), dtype=dt, device="meta")
    b = torch.empty((k, n) if layout[1] == "N" else (n, k), dtype=dt, device="meta")
    return (a if layout[0] == "N" else a.t()), (b if layout[1] == "N" else b.t())


def planner_plans(problem: cm.Problem, sms: int, fitted: frozenset) -> frozenset | None:
    """The plans kernel="auto"'s model ranks for a problem on an sm_90 GPU of `sms` SMs (`dispatch.model_candidates`
    x `problem_configs`, as `planner.ranked` walks them), judged on stand-in operands; None where those operands
    are not the problem's (its alignment class differs: a record of strided operands)."""
    from triton_kernels import dispatch, planner
    from triton_kernels.common import problem_configs
    from triton_kernels.variants import BY_KERNEL, kernel_module

    p = problem
    a, b = stand_ins(p.m, p.n, p.k, p.layout, p.dtype)
    if planner.problem_of(a, b, None, p.acc) != p:
        return None
    pairs = dispatch.model_candidates(p.m, p.n, p.k, 90, sms, a, b, None, fitted)
    return frozenset(planner.model_plan_of(kern, cfg, stage, p.k) for kern, stage in pairs
                     for cfg in problem_configs(kernel_module(BY_KERNEL[kern]), p.m, p.n, p.k, sms))


# ----------------------------------------------------------------------------------------------------------------
# Candidates
# ----------------------------------------------------------------------------------------------------------------
GRID_SLICE_KBLOCKS = 8  # hopper::kGridSliceKblocks: the grid split cuts K in slices of at least this many k-blocks


# wgmma_persistent's cut tiles (hopper::cut_tile in ptx_kernels/csrc/blocks/wgmma_tile.cuh): (rows, columns) by
# GemmArgs::plan_tile code, in the header's order from kCutFirstCode (tests/test_hopper_cpu.py checks them against
# the header's), and every tile code's (1-6: sm90/wgmma_persistent.cu's Tiles).
CUT_FIRST_CODE = 7
CUT_TILES = {CUT_FIRST_CODE + i: t for i, t in enumerate(((128, 144), (128, 160), (128, 176), (128, 208), (128, 224),
                                                          (128, 240), (256, 128), (256, 144), (256, 160),
                                                          (256, 176)))}
# The swapped cut tiles (hopper::kSwapFirstCode: the cut tiles on C^T = B^T A^T) by code, as C's tile: the cut tile's
# columns run along M and its rows along N, so (bn, bm). 256 x 128 is not swapped (hopper::swappable).
SWAP_FIRST_CODE = CUT_FIRST_CODE + len(CUT_TILES)
SWAP_TILES = {SWAP_FIRST_CODE + i: (bn, bm) for i, (bm, bn) in enumerate(CUT_TILES.values()) if bn % 128}
PLAN_TILES = {1: (128, 256), 2: (128, 128), 3: (128, 64), 4: (128, 192), 5: (256, 152), 6: (256, 152), **CUT_TILES,
              **SWAP_TILES}
# The 128-row swapped cut tiles paired in clusters of two blocks that share A's box (hopper::kPairFirstCode), as C's
# tile: the sweep times them whole and split over the grid (`ptx_plans`); the model offers them whole.
PAIR_FIRST_CODE = SWAP_FIRST_CODE + len(CUT_TILES)
PAIR_TILES = {PAIR_FIRST_CODE + i: (bn, bm) for i, (bm, bn) in enumerate(CUT_TILES.values()) if bn % 128 and bm == 128}


def cut_epi_cols(bn: int) -> int:
    """The columns of one round of a cut tile's C staging (sm90/wgmma_persistent.cu's cut_epi_cols)."""
    if bn % 64 == 0:
        return 128 if bn % 128 == 0 else 64
    return bn if bn % 16 == 8 else cut_epi_cols(bn // 2)


def cut_stages(bm: int, bn: int) -> int:
    """A cut tile's ring depth (sm90/wgmma_persistent.cu's cut_stages): the most stages, up to 8, that fit 227 KB
    beside two 64-row staging buffers and 2 KB of barriers and alignment."""
    staging = 2 * (-(-(64 * cut_epi_cols(bn) * 2) // 1024) * 1024)
    return min(8, (227 * 1024 - 2048 - staging) // ((bm + bn) * 64 * 2))


def cut_codes(m: int, n: int, k: int, layout: str, acc: str = "fp32", sectors: bool = True) -> list[int]:
    """The cut tiles wgmma_persistent can run on a problem of this shape and layout, on operands of their own (the
    sweep's: contiguous, 16-byte aligned bases): its one form needs fp32 accumulation, row-major A, a TMA-stored C
    (N a multiple of 8) and 16-byte B rows; the launcher's rule offers them only on B rows on the 32-byte sectors (K,
    or N for row-major B, a multiple of 16), its model off them too (sectors=False: those as well);
    row-major B takes the widths of whole 64-column boxes only. None on skinny outputs (M or N <= 128), where the
    launcher never plans them."""
    b_col = layout[1] == "T"
    rows = k if b_col else n  # B's rows' length in storage order
    if acc != "fp32" or layout[0] != "N" or m <= 128 or n <= 128 or n % 8 or rows % (16 if sectors else 8):
        return []
    return [code for code, (bm, bn) in CUT_TILES.items() if b_col or bn % 64 == 0]


def swap_codes(m: int, n: int, k: int, layout: str, acc: str = "fp32", sectors: bool = True) -> list[int]:
    """The swapped cut tiles wgmma_persistent can run on a problem of this shape and layout, on operands of their
    own (contiguous, 16-byte aligned bases): their one form needs fp32 accumulation, row-major A, B's rows 16-byte
    aligned and a TMA-stored C (N a multiple of 8); the launcher's rule offers them only on A's rows on the 32-byte
    sectors (K a multiple of 16: B' = A^T is loaded as the cut tiles load column-major B), its model off them too
    (sectors=False: those as well). None
    on skinny outputs."""
    if acc != "fp32" or layout[0] != "N" or m <= 128 or n <= 128 or n % 8 or k % (16 if sectors else 8):
        return []
    return list(SWAP_TILES)


PTX_SMS = 132  # the SMs of the GPUs the hand-written side's sweeps run on (H100, H200)


def cut_grid_split(m: int, n: int, k: int, tile: tuple[int, int], sms: int = PTX_SMS) -> int:
    """The K parts of a cut or swapped tile (C's tile `tile`) split over the grid inside wgmma_persistent, counted
    as hopper::choose_grid_split counts the grid split's: slices of at least GRID_SLICE_KBLOCKS k-blocks, tiles x
    parts within the SMs (1: no split)."""
    tiles, kblocks = -(-m // tile[0]) * -(-n // tile[1]), -(-k // 64)
    return max(1, min(kblocks // GRID_SLICE_KBLOCKS, sms // tiles, kblocks, 256))


def ptx_plans(m: int, n: int, k: int, layout: str, acc: str = "fp32") -> list[tuple[str, int, int]]:
    """(record, tile code, split) of the hand-written side's plans (ptx_kernels/csrc/sm90/handoff.h, GemmArgs::
    plan_tile and ::split; 0 lets the launcher choose): wgmma_persistent's own choice; each of its tiles pinned
    unsplit (1-4: 128 x 256/128/64/192; 5, 6: 256 x 152 in 4 or 3 stages, column-major B only; the cut tiles its
    form allows, `cut_codes`, and the swapped ones, `swap_codes`, on rows off the 32-byte sectors too, where only the
    launcher's model offers them; the 128-row swapped ones also paired, `PAIR_TILES`, which the model offers whole
    off the whole 64-wide boxes);
    those cut, swapped and paired tiles split over the grid where their tiles leave SMs idle
    over a long K (`cut_grid_split`); its 128-row tiles split over clusters of 2
    and 4 (wgmma_splitk) where each part keeps 4 k-blocks; the grid split's three tiles (wgmma_splitk_grid, its own
    slice count) where K holds two slices; the cluster kernel (wgmma_cluster)."""
    kblocks = -(-k // 64)
    plans = [("wgmma_persistent", 0, 0)]
    plans += [("wgmma_persistent", t, 1) for t in (1, 2, 3, 4, *((5, 6) if layout[1] == "T" else ()))]
    cut = cut_codes(m, n, k, layout, acc) + swap_codes(m, n, k, layout, acc)
    off = cut_codes(m, n, k, layout, acc, False) + swap_codes(m, n, k, layout, acc, False)
    cut += [t for t in off if t not in cut]
    plans += [("wgmma_persistent", t, 1) for t in cut]
    pairs = [p for t in cut if (p := t - SWAP_FIRST_CODE + PAIR_FIRST_CODE) in PAIR_TILES]
    plans += [("wgmma_persistent", p, 1) for p in pairs]
    plans += [("wgmma_persistent", t, s) for t in cut if (s := cut_grid_split(m, n, k, PLAN_TILES[t])) > 1]
    plans += [("wgmma_persistent", p, s) for p in pairs if (s := cut_grid_split(m, n, k, PAIR_TILES[p])) > 1]
    plans += [("wgmma_persistent", t, s) for s in (2, 4) for t in (1, 2, 3) if kblocks >= 4 * s]
    if kblocks >= 2 * GRID_SLICE_KBLOCKS:
        plans += [("wgmma_splitk_grid", t, 0) for t in (1, 2, 3)]
    return plans + [("wgmma_cluster", 0, 0)]


# The pipeline depth of each hand-written tile (the Tile<BN, STAGES> of sm90/*.cu): by (kernel that ran, BN).
PTX_STAGES = {256: 4, 192: 5, 128: 6, 64: 8, 152: 4}


def ptx_plan(ran: str, tile_m: int, tile_n: int, split: int, tile_code: int) -> cm.Plan:
    """The cost model's plan of what a PTX launch reported it ran: its kernel, tile and split (the bandwidth path,
    mma_stream: 8 warps over 128 k of its 16 x 128 unit a step, no ring)."""
    if ran == "mma_stream":
        return cm.plan_for(ran, tile_m or 16, tile_n or 128, 128, 1, 8, max(split, 1))
    stages = (3 if tile_code == 6 else cut_stages(tile_m, tile_n) if tile_code in CUT_TILES
              else cut_stages(tile_n, tile_m) if tile_code in SWAP_TILES or tile_code in PAIR_TILES
              else PTX_STAGES.get(tile_n, 4))
    return cm.plan_for(ran, tile_m or 128, tile_n or 256, 64, stages, 12, max(split, 1))


class PtxCall:
    """A PTX plan as a harness runner (a, b, out): launched as `ptx_kernels.hgemm` launches it (the kernel it hands
    the problem to where it launches that itself, mma_stream; the operands prepared for that kernel: column-major A
    read in place where the record says so, other layouts and rows off the 16-byte grid copied unless the kernel
    reads them in place, the copies counted in the call), with its tile code and split; `report` keeps what the
    latest launch said it ran."""

    def __init__(self, kernel: str, acc: str, tile: int, split: int):
        self.kernel, self.acc, self.tile, self.split = kernel, acc, tile, split
        self.report: dict | None = None

    def __call__(self, a, b, out=None):
        from ptx_kernels import build, call
        from ptx_kernels.variants import BY_NAME

        copies: list[str] = []
        pinned = self.tile != 0 or self.split != 0  # a pinned tile or split: hgemm would not hand the problem on
        v, launched = call.launched_variant(BY_NAME[self.kernel], a.shape[0], b.shape[1], a.shape[1],
                                            "pinned" if pinned else "auto", None, b, a)
        ext = build.load_for(v)
        a, b, a_col, b_col, _ = call.prepared(v, a, b, None, copies, ext)
        out = out if out is not None else a.new_empty(a.shape[0], b.shape[1])
        c = call._c_for_kernel(out, copies)
        info, ran = ext.hgemm_launch(launched, a, b, c, a_col, b_col, self.acc == "fp16", self.tile,
                                                   self.split)
        if c is not out:
            out.copy_(c)
        self.report = {"ran": ran or self.kernel, "tile_m": info[5], "tile_n": info[6], "split": info[7],
                       "grid": [info[0], info[1]], "copies": copies}
        return out


@dataclass
class Candidate:
    side: str  # "triton" (a candidate of kernel="auto"), "auto" (kernel="auto" as called today), "ptx"
    name: str  # unique within the case (the bench row's kernel name)
    call: dict  # what is called: kernel and configuration or tile/split pins
    kernel: object  # compare.registry.Kernel: what bench_shape checks and times
    plan: cm.Plan | None  # the cost model's plan (PTX: from the launch's report, after the timing)


def case_candidates(case: Case, a: torch.Tensor, b: torch.Tensor, ptx: bool, gluon: bool,
                    ptx_only: bool = False, gluon_only: bool = False) -> list[Candidate]:
    """A case's candidates on its operands (a, b: its layout, its dtype); ptx_only: the hand-written side's alone;
    gluon_only: the Gluon kernel's configurations alone."""
    if ptx_only:
        return ptx_candidates(case)
    from triton_kernels import dispatch
    from triton_kernels.common import problem_configs
    from triton_kernels.plan_table import stage_text
    from triton_kernels.planner import model_plan_of
    from triton_kernels.variants import AUTO, BY_KERNEL, GLUON, VARIANTS, kernel_module

    from . import registry
    from .tune import candidate_plans

    def triton_entry(side, kern, cfg, stage):
        name = f"{side}:{kern}[{cfg.name}]" + (f"+{stage_text(stage)}" if any(stage) else "")
        run = dispatch.Runner(dispatch.Plan(kern, cfg, stage), case.acc == "fp16")
        entry = registry.Kernel(name, replace(BY_KERNEL[kern], misaligned="copy"), case.acc,
                                lambda a, b, out=None, run=run: (run(a, b, out), out)[1], config=cfg.name)
        return Candidate(side, name, {"kernel": kern, "config": cfg.name, "stage": stage_text(stage)}, entry,
                         model_plan_of(kern, cfg, stage, case.k))

    # the Gluon kernels (gluon_persistent, gluon_streamk) only with --gluon: their compiles are the sweep's longest
    out = [triton_entry("triton", kern, cfg, stage) for kern, stage, cfg in candidate_plans(a, b, every_staging=True)
           if (gluon or not kern.startswith("gluon")) and not gluon_only]
    if (gluon or gluon_only) and GLUON in VARIANTS:
        stage = dispatch.copy_stage(GLUON.alignment, a, b, None)
        out += [triton_entry("triton", "gluon_persistent", cfg, stage)
                for cfg in problem_configs(kernel_module(GLUON), case.m, case.n, case.k, dispatch.sm_count(a))]
        for to in dispatch.hands_off("gluon_persistent", case.m):  # what it hands problems to, reading in place
            out += [triton_entry("triton", to, cfg, (False, False, False)) for cfg in
                    problem_configs(kernel_module(BY_KERNEL[to]), case.m, case.n, case.k, dispatch.sm_count(a))]
    if gluon_only:
        return out
    import triton_kernels

    today = triton_kernels.plan(a, b, acc=case.acc)
    auto = registry.Kernel("auto:triton", AUTO, case.acc, registry._triton(case.acc, None, "auto"), config="plan")
    out.append(Candidate("auto", auto.name, {"kernel": "auto", "plan": today.name, "source": today.source}, auto,
                         model_plan_of(today.kernel, today.config, today.stage, case.k)))
    return out + (ptx_candidates(case) if ptx else [])


def ptx_candidates(case: Case) -> list[Candidate]:
    """The hand-written side's candidates (`ptx_plans`), each a `PtxCall`."""
    from ptx_kernels.variants import BY_NAME

    from . import registry

    out = []
    for kern, tile, split in ptx_plans(case.m, case.n, case.k, case.layout, case.acc):
        run = PtxCall(kern, case.acc, tile, split)
        name = f"ptx:{kern}[tile{tile},split{split}]"
        out.append(Candidate("ptx", name, {"kernel": kern, "tile": tile, "split": split},
                             registry.Kernel(name, BY_NAME[kern], case.acc, run, config=f"tile{tile}_split{split}"),
                             None))
    return out


# ----------------------------------------------------------------------------------------------------------------
# One case
# ----------------------------------------------------------------------------------------------------------------
def case_seed(case: Case) -> int:
    """The operands' seed: one per shape of the draw, the same for every dtype and accumulation."""
    return (case.seed * 1_000_003 + case.index) % 2**31


def problem_of(case: Case, a: torch.Tensor, b: torch.Tensor) -> cm.Problem:
    from triton_kernels.plan_table import align_class

    return cm.Problem(case.m, case.n, case.k, case.layout, align_class(a, b, None), case.dtype, case.acc)


def measure_case(case: Case, *, timer, budget_ms: float, rounds: int, ptx: bool, gluon: bool,
                 copy_gb_s: float | None, run_id: str, ptx_only: bool = False, gluon_only: bool = False) -> list[dict]:
    """The records of one case: its candidates checked and timed beside torch.matmul (`bench.bench_shape`), one
    record each, then the case record."""
    from . import bench, registry
    from .parallel import gpu_operands

    t0 = time.time()
    head = {"run": run_id, "case": case.key, "seed": case.seed, "index": case.index}
    try:
        a, b = gpu_operands(case.m, case.n, case.k, case.layout, case.dtype, case_seed(case))
        problem = problem_of(case, a, b)
        cands = case_candidates(case, a, b, ptx, gluon, ptx_only, gluon_only)
        del a, b
        rows = bench.bench_shape(registry._torch_entries(BASELINE) + [c.kernel for c in cands], case.m, case.n,
                                 case.k, layout=case.layout, rounds=rounds, budget_ms=budget_ms, timer=timer,
                                 seed=case_seed(case), copy_gb_s=copy_gb_s, dtype=case.dtype)
    except torch.cuda.OutOfMemoryError as e:  # the case's operands and checks do not fit: recorded, the run goes on
        torch.cuda.empty_cache()
        return [{"type": "case", **head, "status": f"out of memory: {str(e).splitlines()[0]}",
                 "seconds": round(time.time() - t0, 2)}]
    by_name = {r.kernel: r for r in rows}
    base, control = by_name.get(BASELINE.name), by_name.get(CONTROL)
    torch_ms = base.median_ms if base is not None else None
    records = []
    for c in cands:
        row = by_name[c.name]
        plan = c.plan
        if c.side == "ptx" and c.kernel.run.report is not None:
            rep = c.kernel.run.report
            c.call.update(ran=rep["ran"], tile_mn=[rep["tile_m"], rep["tile_n"]], ran_split=rep["split"],
                          grid=rep["grid"], copies=rep["copies"])
            plan = ptx_plan(rep["ran"], rep["tile_m"], rep["tile_n"], rep["split"], c.call["tile"])
        if c.side == "auto" and row.config:
            c.call["plan"] = row.config  # "<source>: <plan name>", as the call planned it
        ok = row.status == "ok" and row.median_ms is not None
        fields_ = cm.record_fields(problem, plan) if plan is not None else {"problem": asdict(problem), "plan": None}
        records.append({"type": "candidate", **head, "side": c.side, "call": c.call, **fields_,
                        "status": row.status, "detail": row.detail, "ms": row.median_ms if ok else None,
                        "spread_pct": row.spread_pct, "samples": row.samples, "wall_us": row.wall_us,
                        "torch_ms": torch_ms, "x_torch": (torch_ms / row.median_ms) if ok and torch_ms else None})
    auto = next((r for r in records if r["side"] == "auto"), None)
    own = next((r for r in records if r["side"] == "ptx" and r["call"].get("tile") == 0
                and r["call"]["kernel"] == "wgmma_persistent"), None)
    records.append({"type": "case", **head, "problem": asdict(problem), "status": "ok" if torch_ms else "no baseline",
                    "torch_ms": torch_ms, "torch_wall_us": base.wall_us if base else None,
                    "control_ratio": control.ratio_to_torch if control else None,
                    "auto": {"triton": auto["call"].get("plan") if auto else None,
                             "ptx": own["call"] if own else None},
                    "candidates": len(cands), "timed": sum(r["ms"] is not None for r in records),
                    "seconds": round(time.time() - t0, 2)})
    return records


# ----------------------------------------------------------------------------------------------------------------
# The run
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class Budget:
    """Seconds a run may take (None: no limit) and what it has learnt of its cases' and blocks' times."""
    seconds: float | None
    t0: float = field(default_factory=time.time)
    case_s: list = field(default_factory=list)
    warm_s: list = field(default_factory=list)

    def left(self) -> float:
        return math.inf if self.seconds is None else self.seconds - (time.time() - self.t0)

    def covers_case(self) -> bool:
        """Whether the time left covers one more case: 1.5 times the slowest recent case (a first case: 30 s)."""
        return self.left() >= 1.5 * max(self.case_s[-20:], default=30.0)

    def covers_block(self) -> bool:
        """Whether the time left covers compiling a block and timing one of its cases."""
        return self.left() >= max(self.warm_s[-3:], default=0.0) + 1.5 * max(self.case_s[-20:], default=30.0)


def pending(cases: list[Case], data: Data) -> tuple[list[Case], list[Case]]:
    """(cases to measure, cases to record as crashed): the draw's cases the file does not hold, those it saw start
    CRASHES times without an end apart."""
    todo = [c for c in cases if c.key not in data.cases]
    crashed = [c for c in todo if data.starts[c.key] >= CRASHES]
    return [c for c in todo if data.starts[c.key] < CRASHES], crashed


def run_sweep(cases: list[Case], out: Path, *, budget_ms: float, rounds: int, ptx: bool, gluon: bool, workers: int,
              block: int, budget_s: float | None, args: dict, log=print, progress=None, ptx_only: bool = False,
              gluon_only: bool = False) -> int:
    """Measure the cases `out` does not hold yet, appending as it goes; the number of cases measured. ptx_only:
    the hand-written side's plans alone (nothing to compile ahead); gluon_only: the Gluon kernel's configurations
    alone (compiled on their first call: one compile serves every size)."""
    from . import bench, frame as frame_mod
    from .envinfo import Sampler, environment
    from .tune import warm

    budget = Budget(budget_s)
    data = read(out)
    todo, crashed = pending(cases, data)
    run_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    for c in crashed:
        append(out, [{"type": "case", "run": run_id, "case": c.key, "seed": c.seed, "index": c.index,
                      "status": f"crashed: started {data.starts[c.key]} times without an end; skipped"}])
    log(f"sweep: {len(cases)} cases in the draw, {len(cases) - len(todo) - len(crashed)} in {out} already, "
        f"{len(crashed)} crashed twice (skipped), {len(todo)} to measure")
    if not todo:
        return 0
    timer = bench.Timer()
    ptx = ptx or ptx_only
    fr = frame_mod.measure(timer) if ptx else {"copy_gb_s": frame_mod.copy_bandwidth(timer)}
    append(out, [{"type": "run", "run": run_id, "environment": environment(), "frame": fr, "args": args}])
    done, stopped = 0, "finished"
    with Sampler() as sampler:
        for lo in range(0, len(todo), block):
            if not budget.covers_block():
                stopped = "budget"
                break
            part = todo[lo:lo + block]
            t0 = time.time()
            if not (ptx_only or gluon_only):
                warm([(c.dtype, c.acc, c.layout, c.shape) for c in part], workers, log, every_staging=True)
            budget.warm_s.append(time.time() - t0)
            for c in part:
                if not budget.covers_case():
                    stopped = "budget"
                    break
                append(out, [{"type": "start", "run": run_id, "case": c.key}])
                t1 = time.time()
                append(out, measure_case(c, timer=timer, budget_ms=budget_ms, rounds=rounds, ptx=ptx, gluon=gluon,
                                         copy_gb_s=fr.get("copy_gb_s"), run_id=run_id, ptx_only=ptx_only,
                                         gluon_only=gluon_only))
                budget.case_s.append(time.time() - t1)
                done += 1
                if progress:
                    progress(done, len(todo))
            if stopped == "budget":
                break
    append(out, [{"type": "end", "run": run_id, "cases": done, "stopped": stopped,
                  "during_run": sampler.summary()}])
    left = len(todo) - done
    log(f"sweep: measured {done} cases into {out} ({stopped}); {left} left" +
        (": run the same command again to go on" if left else ""))
    return done


# ----------------------------------------------------------------------------------------------------------------
# The fit
# ----------------------------------------------------------------------------------------------------------------
# The Triton side's staging copies became one Triton launch a side (`triton_kernels.stage_copy`, 2814280) instead of
# a torch copy per operand: a staged Triton candidate timed before (its run id, a UTC timestamp, earlier than this)
# timed the old copies, so the fit and the choice reports leave it out.
STAGING_COPIES_SINCE = "20261129T224000"


def stale_staging(r: dict) -> bool:
    """Whether a candidate record is a staged Triton plan timed with the staging copies replaced since."""
    return (r.get("side") == "triton" and bool((r.get("plan") or {}).get("staged"))
            and str(r.get("run", "")) < STAGING_COPIES_SINCE)


def fit_records(paths: list[Path]) -> tuple[list[dict], list[cm.Record], int]:
    """(the candidate records, the cost model's Records of those timed with a plan, candidates left out) of data
    files (sweep or tune). kernel="auto" as called is left out: it repeats one of the candidates; so are staged
    Triton plans timed with the old staging copies (`stale_staging`)."""
    raw = [r for p in paths for r in read(p).candidates]
    kept, recs = [], []
    for r in raw:
        if r.get("side") == "auto" or r.get("ms") is None or r.get("plan") is None or stale_staging(r):
            continue
        try:
            recs.append(cm.from_record(r))
        except (HgemmValueError, KeyError, TypeError, ValueError):
            continue
        kept.append(r)
    return kept, recs, len(raw) - len(kept)


def _geomean(xs: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(x) for x in xs)) if xs else float("nan")


def _sweep_only(kernel: str) -> bool:
    """Whether kernel="auto" never scores this kernel although the sweep times it (`contract.SWEEP_ONLY`): a choice
    report leaves it out, as `dispatch.model_candidates` does."""
    from triton_kernels.contract import optional
    from triton_kernels.variants import BY_KERNEL, kernel_module

    v = BY_KERNEL.get(kernel)
    return v is not None and optional(kernel_module(v), "SWEEP_ONLY") is not None


@dataclass(frozen=True)
class Choice:
    """One case as the model would plan it: the candidate it predicts fastest, the measured fastest, the case's
    torch.matmul time (ms; None where the data has none)."""
    case: str
    chosen: cm.Record
    best: cm.Record
    torch_ms: float | None

    @property
    def regret(self) -> float:
        """The choice's time over the fastest's (1.0: the fastest was chosen)."""
        return self.chosen.seconds / self.best.seconds


def case_choices(raw: list[dict], recs: list[cm.Record], params: cm.Params, side: str,
                 fitted_only: bool = False) -> list[Choice]:
    """Per case, how the model would choose among one side's candidates (those kernel="auto" may pick).
    fitted_only: score only the kernels the parameters were fitted for, and no wide tile they have not measured,
    as kernel="auto" does (`planner.fitted_kernels`, `cost_model.unmeasured`), and on the Triton side only the
    plans kernel="auto" ranks for the problem today (`planner_plans`: a record of a kernel, configuration or
    staging the planner no longer offers there, such as a realign tile timed before its M limit, is not a choice
    it could make); the case's fastest is still of all its candidates, so a plan the planner cannot pick counts as
    a loss where it was the fastest."""
    from triton_kernels.planner import fitted_kernels

    idx = [i for i, r in enumerate(raw) if r["side"] == side and not _sweep_only(recs[i].plan.kernel)]
    fitted = fitted_kernels(params) if fitted_only else None
    by_case: dict[str, list[int]] = {}
    for i in idx:
        by_case.setdefault(raw[i]["case"], []).append(i)
    out = []
    for case, ids in by_case.items():
        if all(recs[i].plan.kernel.startswith("gluon_") for i in ids):  # a --gluon-only case: not auto's choice
            continue
        offered = planner_plans(recs[ids[0]].problem, params.gpu.sms, fitted) if fitted is not None \
            and side == "triton" else None
        scored = [recs[i] for i in ids if fitted is None or (recs[i].plan.kernel in fitted
                                                              and not cm.unmeasured(recs[i].plan, params)
                                                              and (offered is None or recs[i].plan in offered))]
        if not scored:
            continue
        chosen = cm.choices(scored, params)[0][1]
        out.append(Choice(case, chosen, min((recs[i] for i in ids), key=lambda r: r.seconds),
                          next((raw[i]["torch_ms"] for i in ids if raw[i].get("torch_ms")), None)))
    return out


def choice_stats(picked: list[Choice]) -> dict:
    """What the choices of some cases come to: the share within 5% of the case's fastest, the geomean of choice
    over fastest, the p10 and the minimum of fastest over choice (the worst choices, as a fraction of the speed
    there was), and the geomeans x torch.matmul of the choice and of the fastest (over the cases that have it)."""
    speed = sorted(1 / c.regret for c in picked)
    with_torch = [c for c in picked if c.torch_ms]
    return {"cases": len(picked), "within_5pct": sum(c.regret <= 1.05 for c in picked) / len(picked),
            "regret": _geomean([c.regret for c in picked]), "p10": speed[int(0.1 * (len(speed) - 1))],
            "min": speed[0],
            "x_torch": _geomean([c.torch_ms * 1e-3 / c.chosen.seconds for c in with_torch]) if with_torch else None,
            "x_torch_best": _geomean([c.torch_ms * 1e-3 / c.best.seconds for c in with_torch]) if with_torch else None}


def choice_line(picked: list[Choice], side: str) -> str:
    """How the model chose among one side's candidates (`case_choices`), as one line: the share of cases where its
    choice measured within 5% of the case's fastest, the geomean of choice over fastest, and the geomeans x
    torch.matmul of its choice and of the fastest candidate."""
    if not picked:
        return f"{side}: no timed candidates"
    s = choice_stats(picked)
    line = (f"{side}: {s['cases']} cases; the model's choice within 5% of the fastest in {s['within_5pct']:.0%}, "
            f"{s['regret']:.3f}x its time (geomean)")
    if s["x_torch"] is not None:  # (tune's records have no torch.matmul beside them)
        line += f"; x torch.matmul: model's choice {s['x_torch']:.3f}, fastest candidate {s['x_torch_best']:.3f}"
    return line


def shape_class(problem) -> str:
    """The random suite's reading of a problem's class: M <= 16, 16 < M <= 256 or M > 256, and aligned (N and K
    multiples of 8) or not."""
    band = "M <= 16" if problem.m <= 16 else "16 < M <= 256" if problem.m <= 256 else "M > 256"
    return f"{band}, {'aligned' if problem.n % 8 == 0 and problem.k % 8 == 0 else 'not aligned'}"


def class_lines(picked: list[Choice]) -> list[str]:
    """`choice_line`'s cases by `shape_class`, one line a class (those with torch.matmul's time): the geomeans x
    torch.matmul of the model's choice and of the fastest candidate, and the share of each at the random suite's
    bar (`compare.bench.SHARE_AT` x torch.matmul) or above; what separates a planner's tail (the choice below the
    fastest) from the kernels' (the fastest below the bar)."""
    by: dict[str, list[tuple[float, float]]] = {}
    for c in picked:
        if c.torch_ms:
            t = c.torch_ms * 1e-3
            by.setdefault(shape_class(c.chosen.problem), []).append((t / c.chosen.seconds, t / c.best.seconds))
    order = [f"{b}, {a}" for b in ("M <= 16", "16 < M <= 256", "M > 256") for a in ("aligned", "not aligned")]
    return [f"  {name}: {len(v)} cases; x torch.matmul: choice {_geomean([x for x, _ in v]):.3f} "
            f"({sum(x >= SHARE_AT for x, _ in v) / len(v):.0%} >= {SHARE_AT}x), fastest "
            f"{_geomean([y for _, y in v]):.3f} ({sum(y >= SHARE_AT for _, y in v) / len(v):.0%})"
            for name in order if (v := by.get(name))]


def today_report(paths: list[Path]) -> str:
    """kernel="auto" as called today, x torch.matmul over the cases of the files (geomean, p10, min)."""
    xs = sorted(r["x_torch"] for p in paths for r in read(p).candidates if r.get("side") == "auto" and r.get("x_torch"))
    if not xs:
        return "kernel='auto' today: not timed in these files"
    return (f"kernel='auto' today: {len(xs)} cases, x torch.matmul geomean {_geomean(xs):.3f}, "
            f"p10 {xs[int(0.1 * (len(xs) - 1))]:.3f}, min {xs[0]:.3f}")


def ptx_today_report(paths: list[Path]) -> str:
    """The hand-written side's own plan as called today (wgmma_persistent with no tile or split pinned: its rule,
    `choose_plan` and the hand-offs) against the fastest of the side's timed plans, over the cases of the files
    that timed it (--ptx): the share within 5%, the geomean of its time over the fastest's, and both x
    torch.matmul."""
    by_case: dict[str, list[dict]] = {}
    for p in paths:
        for r in read(p).candidates:
            if r.get("side") == "ptx" and r.get("ms"):
                by_case.setdefault(r["case"], []).append(r)
    own, best = [], []
    for rs in by_case.values():
        mine = [r for r in rs if r["call"].get("kernel") == "wgmma_persistent" and not r["call"].get("tile")
                and not r["call"].get("split")]
        if mine:
            own.append(mine[0])
            best.append(min(rs, key=lambda r: r["ms"]))
    if not own:
        return "ptx own plan today: not timed in these files"
    regret = [o["ms"] / b["ms"] for o, b in zip(own, best)]
    return (f"ptx own plan today: {len(own)} cases; within 5% of the side's fastest plan in "
            f"{sum(x <= 1.05 for x in regret) / len(regret):.0%}, {_geomean(regret):.3f}x its time (geomean); "
            f"x torch.matmul: own plan {_geomean([o['torch_ms'] / o['ms'] for o in own]):.3f}, fastest "
            f"{_geomean([b['torch_ms'] / b['ms'] for b in best]):.3f}")


def format_quality(q: dict, title: str) -> str:
    lines = [f"{title}: {q['all']['records']} records, median |log error| {q['all']['median_abs_log_error']:.3f}, "
             f"p90 {q['all']['p90_abs_log_error']:.3f}",
             f"  {'kernel':<22} {'records':>8} {'median':>8} {'p90':>8}"]
    lines += [f"  {name:<22} {x['records']:>8} {x['median_abs_log_error']:>8.3f} {x['p90_abs_log_error']:>8.3f}"
              for name, x in q["kernels"].items()]
    return "\n".join(lines)


def gpu_of(paths: list[Path]) -> cm.GPU:
    """The cost model's GPU for the data files' runs: the device's name and SM count (what the model counts waves
    on), its measured device-copy bandwidth as HBM's; the model's defaults for the rest. Data from devices of
    different SM counts is refused (one parameter file describes one kind of GPU)."""
    runs = [r for p in paths for r in read(p).runs if "environment" in r]
    sms = {r["environment"].get("sm_count") for r in runs}
    if len(sms) > 1:
        raise HgemmValueError(f"sweep --fit: the data files come from GPUs of {sorted(map(str, sms))} SMs; fit "
                              "one kind of GPU at a time")
    if not runs or None in sms:
        return cm.H100
    copies = [r.get("frame", {}).get("copy_gb_s") for r in runs]
    copies = [c for c in copies if c]
    return replace(cm.H100, name=str(runs[0]["environment"].get("gpu", cm.H100.name)), sms=int(sms.pop()),
                   hbm_gbps=round(statistics.median(copies), 1) if copies else cm.H100.hbm_gbps)


def holdout_spec(text: str) -> list[tuple[int, int]]:
    """--holdout's "9106,9110:62" -> [(9106, 0), (9110, 62)]: (seed, index of its first held-out case); an
    HgemmValueError naming the flag otherwise."""
    try:
        out = [(int(seed), int(first or 0)) for seed, _, first in (x.strip().partition(":") for x in text.split(","))]
    except ValueError:
        out = []
    if not out or min(min(pair) for pair in out) < 0:
        raise HgemmValueError(f"--holdout takes a comma list of SEED or SEED:I (integers >= 0), got {text!r}")
    return out


def held_out(record: dict, holdout: list[tuple[int, int]]) -> bool:
    """Whether a candidate record is among the held-out cases: its seed's, from that seed's first held-out index on
    (the index is the case's place in its seed's draw, the second field of its name)."""
    seed = record.get("seed")
    return any(seed == s and int(str(record["case"]).split("/")[1]) >= first for s, first in holdout)


def cross_validate(raw: list[dict], recs: list[cm.Record], gpu: cm.GPU, side: str = "triton",
                   log=print) -> dict:
    """Leave-one-seed-out cross-validation of the model's choices: each seed's cases held out in turn, the model
    fitted on the others' records (those without a seed, tune's, always fitted) and the held-out cases chosen as
    kernel="auto" would choose them (with the fit's measured neighbours, scoring only the kernels it fitted:
    `case_choices`). Prints a line per fold and the pooled held-out cases; returns {seed: choice_stats, ...,
    "all": choice_stats} (seeds with no candidates of the side left out)."""
    seeds = sorted({r["seed"] for r in raw if r.get("seed") is not None})
    if len(seeds) < 2:
        raise HgemmValueError(f"sweep --cv: cross-validation holds out one seed at a time and fits on the others; "
                              f"the data has {len(seeds)} seed(s)")
    head = f"  {'held out':>8} {'cases':>6} {'<=5%':>6} {'choice/best':>11} {'p10':>6} {'min':>6} " \
           f"{'x torch':>8} {'x best':>8} {'|log err|':>9}"
    log(f"cross-validation ({side}): each seed's cases held out in turn, fitted on the others; choice/best: "
        "geomean of the choice's time over the fastest's; p10, min: of fastest over choice (the worst choices); "
        "x torch: geomean x torch.matmul of the choice, of the fastest; |log err|: the held-out records' median")
    log(head)
    out, pooled, errors = {}, [], []

    def row(name, picked, err):
        s = choice_stats(picked)
        xt = f"{s['x_torch']:>8.3f} {s['x_torch_best']:>8.3f}" if s["x_torch"] is not None else f"{'-':>8} {'-':>8}"
        log(f"  {name:>8} {s['cases']:>6} {s['within_5pct']:>6.0%} {s['regret']:>11.3f} {s['p10']:>6.3f} "
            f"{s['min']:>6.3f} {xt} {float(np.median(np.abs(err))):>9.3f}")
        return {**s, "median_abs_log_error": float(np.median(np.abs(err)))}

    for seed in seeds:
        test = [i for i, r in enumerate(raw) if r.get("seed") == seed]
        params = cm.fit([recs[i] for i, r in enumerate(raw) if r.get("seed") != seed], gpu)
        picked = case_choices([raw[i] for i in test], [recs[i] for i in test], params, side, fitted_only=True)
        if not picked:
            continue
        err = cm.log_errors([recs[i] for i in test if raw[i]["side"] == side], params)
        out[seed] = row(str(seed), picked, err)
        pooled += picked
        errors.append(err)
    if pooled:
        out["all"] = row("all", pooled, np.concatenate(errors))
    return out


def paired(paths: list[Path], first: str, second: str) -> list[dict]:
    """The cases of data files in which kernels `first` and `second` were both timed (status ok) on the same
    configuration and staging: one row each (case, its problem, the configuration and staging, both times in ms,
    and first's time over second's), in file order. What one kernel's change to the other buys, tile for tile."""
    rows = []
    for path in paths:
        times: dict = {}
        for r in read(path).candidates:
            call = r.get("call") or {}
            if r.get("status") != "ok" or r.get("ms") is None or call.get("kernel") not in (first, second):
                continue
            times.setdefault((r["case"], call.get("config"), call.get("stage", "")), {})[call["kernel"]] = r
        for (case, config, stage), by in times.items():
            if first in by and second in by:
                a, b = by[first], by[second]
                rows.append(dict(case=case, problem=a["problem"], config=config, stage=stage, first_ms=a["ms"],
                                 second_ms=b["ms"], ratio=a["ms"] / b["ms"]))
    return rows


def run_pair(paths: list[Path], first: str, second: str, log=print) -> list[dict]:
    """`sweep --pair FIRST SECOND --data FILES`: `paired`'s rows printed, and their summary (the geomean of
    first's time over second's, and how often first was the faster)."""
    rows = paired(paths, first, second)
    if not rows:
        raise HgemmValueError(f"sweep --pair: no case in {', '.join(map(str, paths))} timed both {first} and "
                              f"{second} on one configuration and staging")
    log(f"{first} against {second}, the same configuration and staging: time of {first} over {second}'s")
    log(f"{'case':<34} {'configuration':<24} {'staged':<6} {first + ' ms':>14} {second + ' ms':>14} {'ratio':>7}")
    for r in rows:
        log(f"{r['case']:<34} {r['config'] or '-':<24} {r['stage'] or '-':<6} {r['first_ms']:>14.4f} "
            f"{r['second_ms']:>14.4f} {r['ratio']:>7.3f}")
    faster = sum(r["ratio"] < 1.0 for r in rows)
    log(f"{len(rows)} pairs: geomean {_geomean([r['ratio'] for r in rows]):.3f}; {first} faster in {faster} "
        f"({100 * faster / len(rows):.0f}%)")
    return rows


def run_fit(paths: list[Path], params_out: Path, holdout: list[tuple[int, int]], log=print,
            cv: bool = False) -> cm.Params:
    """Fit the cost model to data files (the candidates of `holdout`'s cases left out of the fit and judged apart:
    `holdout_spec`), print its quality and how it would choose, write its parameters. cv: first cross-validate
    over the seeds of the records it fits (`cross_validate`)."""
    raw, recs, skipped = fit_records(paths)
    train = [i for i, r in enumerate(raw) if not held_out(r, holdout)]
    test = [i for i, r in enumerate(raw) if held_out(r, holdout)]
    spec = ",".join(f"{s}:{first}" if first else str(s) for s, first in holdout)
    if not train:
        raise HgemmValueError(f"sweep --fit: no timed candidate records to fit in {', '.join(map(str, paths))}"
                              + (" outside the held-out seeds" if holdout else ""))
    log(f"sweep --fit: {len(recs)} timed candidates ({skipped} left out: kernel='auto' as called, untimed or "
        f"without a plan) from {len(paths)} file(s); fitting on {len(train)}" +
        (f", judging on {len(test)} of seeds {spec}" if holdout else ""))
    if cv:
        cross_validate([raw[i] for i in train], [recs[i] for i in train], gpu_of(paths), log=log)
    params = cm.fit([recs[i] for i in train], gpu_of(paths))
    log(format_quality(params.about["quality"], "fit (the records it was fitted on)"))
    log(f"measured neighbours: {sum(map(len, params.neighbours.values()))} records of "
        f"{len(params.neighbours)} plans (cost_model.neighbour_correction)")
    if test:
        q = cm.quality([recs[i] for i in test], params)
        params.about["holdout"] = {"seeds": spec, "quality": q}
        log(format_quality(q, "held out"))
    # On the records it was fitted on, the model chooses without its measured neighbours (each record would be
    # its own nearest); held out, with them, as a planner would.
    for which, ids, p in (("fitted", train, replace(params, neighbours={})), ("held out", test, params)):
        if ids:
            for side in ("triton", "ptx"):
                sub = [raw[i] for i in ids]
                if any(r["side"] == side for r in sub):
                    picked = case_choices(sub, [recs[i] for i in ids], p, side, fitted_only=which == "held out")
                    log(f"choice ({which}) " + choice_line(picked, side))
                    if which == "held out":
                        for line in class_lines(picked):
                            log(line)
    log(today_report(paths))
    log(ptx_today_report(paths))
    runs = [r for p in paths for r in read(p).runs]
    envs = [r["environment"] for r in runs if "environment" in r]
    params.about.update(sources=[str(p) for p in paths], commits=sorted({e.get("git_commit", "?") for e in envs}),
                        devices=sorted({e.get("gpu", "?") for e in envs}),
                        commands=sorted({e.get("command", "?") for e in envs}),
                        fit_command="python -m compare sweep --fit " + " ".join(map(str, paths))
                        + (f" --holdout {spec}" if holdout else "") + f" --params {params_out}")
    cm.save(params, params_out)
    log(f"wrote {params_out}")
    return params
