"""`python -m compare.ptx_model`: the time model wgmma_persistent plans by, fitted to PTX sweep data (no GPU).

A sweep with --ptx-only (`python -m compare sweep`) times, on each case, each of wgmma_persistent's tiles and K
splits pinned, the grid's split at each width and the cluster kernel (`compare.sweep.ptx_plans`). This fits one
model of all those times; the launcher (ptx_kernels/csrc/blocks/plan_model.cuh) predicts each plan it may take and
launches the fastest predicted. In microseconds:

    t = launch[kind] + ((rounds * (unit[kind] + kb * t_kb + epilogue) + split_cost)^4 + hbm^4)^(1/4) + reduce

- rounds: the work units (tiles x K parts) over the blocks that run them (a persistent grid's
  hopper::persistent_blocks; one wave for a split); kb: the k-blocks (64 deep) of one unit;
- t_kb = (compute^p + memory^p)^(1/p): compute, the tile's fitted time per k-block (one figure per kernel and tile);
  memory, the A and B bytes of one k-block (rows and columns inside the output, those of an operand whose rows lie
  off the 32-byte sectors weighted by `sector`) at an SM's share of L2 (min(sm_bw, l2_bw / active blocks));
- epilogue: the tile's C bytes at `epi_bw` (`epi_slow` times longer where C cannot be stored with TMA);
- split_cost: the cluster split's exchange, per part; hbm: A, B and C once at the GPU's HBM bandwidth times
  `hbm_share`; reduce: the grid split's fp32 partials written and read again at `reduce_bw`.

Staging copies of operands TMA cannot read cost every plan of a call alike; the fit prices them (stage_bw,
stage_launch) so that they do not bias the rest, and the launcher leaves them out.

With --cv: leave-one-seed-out, the model's pick against the fastest plan timed and against the rule's
(`compare.ptx_plans`, needs nvcc), and the same over the held-out whole 64-wide boxes, where the launcher keeps the
rule (a draw with `sweep --nk-multiple 64` has them). With --write: the fit on all the files into blocks/plan_model_fit.h.
"""
from __future__ import annotations

import argparse
import math
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hgemm_common.cost_model import cdiv
from hgemm_common.errors import HgemmError
from ptx_kernels.call import MODEL_TERMS

from .bench import geomean
from .sweep import CUT_FIRST_CODE, CUT_TILES, PAIR_TILES, PLAN_TILES, SWAP_FIRST_CODE, SWAP_TILES, cut_grid_split

CSRC = Path(__file__).resolve().parents[1] / "ptx_kernels" / "csrc"
HEADER = CSRC / "blocks" / "plan_model_fit.h"
BK = 64
# HBM bandwidth by GPU (datasheet, bytes per microsecond), for the GPUs sweeps ran on: the fit's HBM term is a share
# of it, and the launcher's the same share of its own GPU's (memory clock x bus width)
HBM_BYTES_PER_US = {"NVIDIA H100 80GB HBM3": 3.35e6, "NVIDIA H200": 4.8e6}
SMS, WAVE2, WAVE4, CLUSTER_SLOTS = 132, 132, 120, 66  # the lent GPUs' SMs; blocks (clusters) that fit at once
# A paired swapped tile halves A's reads from L2 only where A and B do not fit in L2 together (sweeps of the pairs:
# docs/design/hopper.md); below, a pair's blocks read their whole boxes as a single tile's do (hopper::kPairL2Bytes)
PAIR_L2_BYTES = 24 * 2**20
KINDS = ("wgmma_persistent", "wgmma_splitk", "wgmma_splitk_grid", "wgmma_cluster")
RATE_KINDS = ("persistent", "splitk", "splitk_grid")  # rate names' prefixes, by kind (the cluster's is "cluster")
SPLIT_TILES = {1: 256, 2: 128, 3: 64}  # tile codes of the cluster and grid splits (128 x bn)
SCALARS = ("sm_bw", "l2_bw", "hbm_share", "reduce_bw", "split_cost", "epi_bw", "power", "sector", "epi_slow",
           "stage_bw", "stage_launch")


def persistent_blocks(units: int, slots: int) -> int:
    """hopper::persistent_blocks (policy 0): the fewest blocks that need the same number of rounds."""
    return units if units <= slots else cdiv(units, cdiv(units, slots))


def grid_split(m: int, n: int, k: int, bn: int, sms: int = SMS) -> int:
    """hopper::choose_grid_split's K parts at width bn (its 128-row tiles' hopper::grid_parts)."""
    return cut_grid_split(m, n, k, (128, bn), sms)


@dataclass(frozen=True)
class Call:
    """What the planner knows of a call: the sizes, A's storage order, whether A's and B's rows (after any staging
    copy, which lands on 128-byte rows) lie on 128-byte lines and 32-byte sectors, and whether TMA can store C."""
    m: int
    n: int
    k: int
    a_col: bool
    a_row_bytes: int
    b_col: bool
    b_row_bytes: int
    c_tma: bool
    staged: tuple = ()  # the operands staged ("A", "B")
    f32: bool = True  # fp32 accumulation (the cut tiles' one form; the sweeps time fp32 only)

    @classmethod
    def of(cls, problem: dict) -> "Call":
        """From a sweep record's problem: layout (A's and B's storage order), align (compare's letters: "-" is
        staged)."""
        m, n, k, lay, al = problem["m"], problem["n"], problem["k"], problem["layout"], problem["align"]
        a_col, b_col = lay[0] == "T", lay[1] == "T"
        a_bytes = 2 * (m if a_col else k)
        b_bytes = 2 * (k if b_col else n)
        staged = tuple(x for x, c in zip("AB", al) if c == "-")
        a_bytes = cdiv(a_bytes, 128) * 128 if "A" in staged else a_bytes
        b_bytes = cdiv(b_bytes, 128) * 128 if "B" in staged else b_bytes
        return cls(m, n, k, a_col, a_bytes, b_col, b_bytes, al[2] != "-", staged)


def candidates(c: Call) -> list[tuple[str, int, int]]:
    """The plans the launcher's model may take for c (hopper::model_plan), as sweep keys (kernel, tile code,
    split): the persistent kernel's tiles unsplit (128 x 192 on 128-byte rows, 256 x 152 on column-major B, the cut
    and swapped cut tiles in their one form), split over a cluster (2 or 4 parts within a wave, >= 4 k-blocks each),
    split over the grid (row-major A, >= 2 parts), and the cluster kernel; on whole 64-wide boxes (`whole_boxes`)
    neither the paired tiles nor the cluster splits."""
    boxes = whole_boxes(c.n, c.k)
    out = [("wgmma_persistent", code, 1) for code in (1, 2, 3)]
    if c.a_row_bytes % 128 == 0 and c.b_row_bytes % 128 == 0:
        out.append(("wgmma_persistent", 4, 1))
    if c.b_col:
        out.append(("wgmma_persistent", 5, 1))
    form = c.f32 and not c.a_col and c.c_tma  # the cut and swapped tiles' one form
    if form:
        out += [("wgmma_persistent", code, 1) for code, (bm, bn) in PLAN_TILES.items()
                if 7 <= code < min(SWAP_TILES) and (c.b_col or bn % 64 == 0)]
    if form and c.b_row_bytes % 16 == 0:
        out += [("wgmma_persistent", code, 1) for code in SWAP_TILES]
        if not boxes:  # the 128-row ones paired in clusters
            out += [("wgmma_persistent", code, 1) for code in PAIR_TILES]
    # those tiles split over the grid inside the persistent kernel (offered where a fit prices them: `priced`), each
    # cut tile's then its swapped one's, in the launcher's order
    offered = {code for kernel, code, split in out if code >= CUT_FIRST_CODE}
    for i in range(len(CUT_TILES)):
        for code in (CUT_FIRST_CODE + i, SWAP_FIRST_CODE + i):
            parts = cut_grid_split(c.m, c.n, c.k, PLAN_TILES[code], SMS) if code in offered else 1
            if parts >= 2:
                out.append(("wgmma_persistent", code, parts))
    kblocks = cdiv(c.k, BK)
    for split, wave in ((2, WAVE2), (4, WAVE4)) if not boxes else ():
        for code, bn in SPLIT_TILES.items():
            if kblocks >= 4 * split and cdiv(c.m, 128) * cdiv(c.n, bn) * split <= wave:
                out.append(("wgmma_persistent", code, split))
    if not c.a_col:
        out += [("wgmma_splitk_grid", code, 0) for code, bn in SPLIT_TILES.items()
                if grid_split(c.m, c.n, c.k, bn) >= 2]
    if c.b_row_bytes % 32 and c.m > 128:
        out.append(("wgmma_cluster", 0, 0))
    return out


def launch_of(c: Call, key: tuple[str, int, int]) -> tuple[str, tuple[int, int], int]:
    """What `ptx_kernels.last_launch()` shows of plan `key` on c: the kernel that ran, C's tile, the K parts."""
    kernel, code, split = key
    if kernel == "wgmma_cluster":
        return kernel, (128, 256), 1
    if code in PAIR_TILES:
        return kernel, PAIR_TILES[code], 1
    if kernel == "wgmma_splitk_grid":
        return kernel, (128, SPLIT_TILES[code]), grid_split(c.m, c.n, c.k, SPLIT_TILES[code])
    if split > 1 and code >= CUT_FIRST_CODE:
        return kernel, PLAN_TILES[code], split
    if split > 1:
        return "wgmma_splitk", (128, SPLIT_TILES[code]), split
    return kernel, PLAN_TILES[code], 1


def whole_boxes(n: int, k: int) -> bool:
    """hopper::whole_boxes: N and K multiples of 64, where wgmma_persistent keeps the rule, not the model, but for the
    rule's grid splits and M part-filling the last of a few 128-row bands (hopper::model_plans)."""
    return n % 64 == 0 and k % 64 == 0


def part_filled_bands(m: int) -> bool:
    """hopper::part_filled_bands: M of two to four 128-row bands, the last part-filled, where the model plans whole
    boxes too with fp32 accumulation (hopper::model_plans)."""
    return 128 < m <= 512 and m % 128 != 0


def pick(c: Call, hbm_bytes_per_us: float, header: Path = HEADER) -> tuple[str, int, int]:
    """The plan hopper::model_plan takes for c on a GPU of 132 SMs with that HBM bandwidth (its Python mirror)."""
    return decision(c, hbm_bytes_per_us, header)[0]


def decision(c: Call, hbm_bytes_per_us: float, header: Path = HEADER) -> tuple[tuple[str, int, int], str]:
    """`pick`'s plan and the term of its predicted time that decided it (MODEL_TERMS; the launcher reports it as
    `ptx_kernels.last_launch()["plan"]`, "model: TERM")."""
    model, x = from_header(header)
    keys = priced(model, candidates(c))
    t = model.table([features(c, k, hbm_bytes_per_us) for k in keys])
    best = int(np.argmin(model.predict(x, t)))
    return keys[best], model.decided(x, t)[best]


def rate_name(key: tuple[str, int, int]) -> str:
    """The compute figure a plan runs at: one per kernel and tile (a swapped tile's as C's tile, suffix s; a cut or
    swapped tile split over the grid runs at a grid split's figure of its own)."""
    kernel, code, split = key
    if kernel == "wgmma_cluster":
        return "cluster"
    if code in PAIR_TILES:  # a paired swapped tile: a cluster launch of its own figure
        bm, bn = PAIR_TILES[code]
        return f"cluster:{bm}x{bn}s"
    if split > 1 and code >= CUT_FIRST_CODE:
        bm, bn = PLAN_TILES[code]
        return f"{RATE_KINDS[2]}:{bm}x{bn}{'s' if code in SWAP_TILES else ''}"
    bm, bn = (128, SPLIT_TILES[code]) if kernel == "wgmma_splitk_grid" or split > 1 else PLAN_TILES[code]
    kind = RATE_KINDS[2 if kernel == "wgmma_splitk_grid" else 1 if split > 1 else 0]
    return f"{kind}:{bm}x{bn}{'s' if code in SWAP_TILES else ''}"


def priced(model: "Model", keys: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """The plans among `keys` whose compute figure the model has (hopper::model_rate >= 0): what the launcher
    offers of them."""
    return [k for k in keys if rate_name(k) in model.rates]


def features(c: Call, key: tuple[str, int, int], hbm_bytes_per_us: float) -> dict:
    """The model's inputs for plan `key` on call c (what hopper::model_time computes)."""
    kernel, code, split = key
    m, n, k = c.m, c.n, c.k
    a_shared = 1  # a paired swapped tile's blocks share A's box: half of it each
    if kernel == "wgmma_cluster":
        kind, bm, bn, parts = 3, 128, 256, 1
        units = cdiv(m, 128) * cdiv(n, 256)
        blocks = 2 * persistent_blocks(cdiv(cdiv(m, 128), 2) * cdiv(n, 256), CLUSTER_SLOTS)
    elif code in PAIR_TILES:  # two tiles side by side along N a cluster
        kind, (bm, bn), parts = 3, PAIR_TILES[code], 1
        a_shared = 2 if 2 * (m * k + k * n) > PAIR_L2_BYTES else 1
        units = cdiv(m, bm) * cdiv(cdiv(n, bn), 2) * 2  # an odd count's spare tile in each pair's column too
        blocks = 2 * persistent_blocks(cdiv(m, bm) * cdiv(cdiv(n, bn), 2), CLUSTER_SLOTS)
    elif kernel == "wgmma_splitk_grid":
        kind, bm, bn = 2, 128, SPLIT_TILES[code]
        parts = grid_split(m, n, k, bn)
        units = cdiv(m, bm) * cdiv(n, bn) * parts
        blocks = SMS
    elif split > 1 and code >= CUT_FIRST_CODE:  # a cut or swapped tile split over the grid (C's tile)
        kind, (bm, bn), parts = 2, PLAN_TILES[code], split
        units = cdiv(m, bm) * cdiv(n, bn) * parts
        blocks = SMS
    elif split > 1:
        kind, bm, bn, parts = 1, 128, SPLIT_TILES[code], split
        units = cdiv(m, bm) * cdiv(n, bn) * parts
        blocks = SMS
    else:
        kind, (bm, bn), parts = 0, PLAN_TILES[code], 1
        units = cdiv(m, bm) * cdiv(n, bn)
        blocks = persistent_blocks(units, SMS)
    a_rows, b_cols = min(bm, cdiv(m, 8) * 8), min(bn, cdiv(n, 8) * 8)
    staged_bytes = 4.0 * (m * k * ("A" in c.staged) + k * n * ("B" in c.staged))
    return dict(kind=kind, rate=rate_name(key), rounds=cdiv(units, blocks), kb=cdiv(cdiv(k, BK), parts),
                active=min(units, blocks), a_bytes=128.0 * a_rows / a_shared,
                b_bytes=128.0 * b_cols / (2 if kernel == "wgmma_cluster" else 1),
                a_off=c.a_row_bytes % 32 != 0, b_off=c.b_row_bytes % 32 != 0, parts=parts,
                epi=2.0 * min(bm, m) * min(bn, n), c_tma=c.c_tma, hbm=2.0 * (m * k + k * n + m * n) / hbm_bytes_per_us,
                reduce=8.0 * m * n * parts if kind == 2 else 0.0, stage=staged_bytes, nstage=len(c.staged))


class Model:
    """The parameters (log-space vector x: a compute figure per rate name, launch and unit latency per kind, the
    SCALARS) and the prediction over a table of features."""

    def __init__(self, rates):
        self.rates = sorted(rates)
        self.names = ([f"tc:{r}" for r in self.rates] + [f"launch:{k}" for k in KINDS] + [f"unit:{k}" for k in KINDS]
                      + list(SCALARS))

    def x0(self) -> np.ndarray:
        start = dict(sm_bw=4e4, l2_bw=8e6, hbm_share=0.85, reduce_bw=3e6, split_cost=1.0, epi_bw=3e4, power=4.0,
                     sector=1.3, epi_slow=1.5, stage_bw=3e6, stage_launch=4.0)
        v = [0.6] * len(self.rates) + [5.0] * 4 + [1.0] * 4 + [start[s] for s in SCALARS]
        return np.log(np.array(v))

    def table(self, rows: list[dict]) -> dict:
        t = {f: np.array([r[f] for r in rows], float) for f in rows[0] if f != "rate"}
        t["rate"] = np.array([self.rates.index(r["rate"]) for r in rows])
        t["kind"] = t["kind"].astype(int)
        return t

    def params(self, x: np.ndarray) -> dict:
        return dict(zip(self.names, np.exp(x)))

    def terms(self, x: np.ndarray, t: dict) -> dict:
        """The predicted time's pieces (hopper::model_terms), microseconds: launch, unit (each round's work units'
        latency), kloop (the k-loops; l2: where the operand bytes outweigh the compute figure), epilogue, split (the
        cluster split's exchange), core (their sum but the launch), hbm, reduce and stage (the staging copies)."""
        v = np.exp(x)
        nr = len(self.rates)
        tc, launch, unit = v[:nr][t["rate"]], v[nr:nr + 4][t["kind"]], v[nr + 4:nr + 8][t["kind"]]
        s = dict(zip(SCALARS, v[nr + 8:]))
        bw = np.minimum(s["sm_bw"], s["l2_bw"] / t["active"])
        mem = (t["a_bytes"] * np.where(t["a_off"], s["sector"], 1.0)
               + t["b_bytes"] * np.where(t["b_off"], s["sector"], 1.0)) / bw
        per_kb = (tc ** s["power"] + mem ** s["power"]) ** (1.0 / s["power"])
        out = dict(launch=launch, unit=t["rounds"] * unit, kloop=t["rounds"] * t["kb"] * per_kb, l2=mem > tc,
                   epilogue=t["rounds"] * t["epi"] / s["epi_bw"] * np.where(t["c_tma"], 1.0, s["epi_slow"]),
                   split=(t["kind"] == 1) * s["split_cost"] * t["parts"], hbm=t["hbm"] / s["hbm_share"],
                   reduce=t["reduce"] / s["reduce_bw"],
                   stage=t["stage"] / s["stage_bw"] + t["nstage"] * s["stage_launch"])
        out["core"] = out["unit"] + out["kloop"] + out["epilogue"] + out["split"]
        return out

    def predict(self, x: np.ndarray, t: dict) -> np.ndarray:
        p = self.terms(x, t)
        return p["launch"] + (p["core"] ** 4 + p["hbm"] ** 4) ** 0.25 + p["reduce"] + p["stage"]

    def decided(self, x: np.ndarray, t: dict) -> list[str]:
        """Per row, the term (MODEL_TERMS) that contributed most to the prediction (ModelTime::decided): of the
        soft maximum of core and hbm only the larger side, the core in its parts (the launch's latency joining the
        units'); then the reduction and the staging copies (not a term of the launcher's: it leaves them out)."""
        p = self.terms(x, t)
        out = []
        for i in range(len(p["core"])):
            part = dict.fromkeys(MODEL_TERMS, 0.0)
            part["latency"] = p["launch"][i]
            if p["core"][i] >= p["hbm"][i]:
                part["latency"] += p["unit"][i]
                part["l2" if p["l2"][i] else "compute"] = p["kloop"][i]
                part["epilogue"], part["split"] = p["epilogue"][i], p["split"][i]
            else:
                part["hbm"] = p["hbm"][i]
            part["reduce"] = p["reduce"][i]
            out.append(max(MODEL_TERMS, key=lambda name: part[name]))  # the first of equals, as the launcher's
        return out


def fit(model: Model, t: dict, y: np.ndarray, huber: float = 0.1) -> np.ndarray:
    """The parameters (log space) that fit log(predicted) to log(measured) with a Huber loss: a few badly predicted
    plans (launch noise on microsecond calls) do not pull the rest. scipy's trust-region least squares does it (the
    fit is a tool's step, `pip install -e ".[fit]"`; the planner needs no scipy)."""
    from scipy.optimize import least_squares

    return least_squares(lambda x: np.log(model.predict(x, t)) - y, model.x0(), loss="huber", f_scale=huber,
                         max_nfev=3000).x


def read(files: list[Path]) -> dict[str, dict]:
    """compare.ptx_plans.read_cases' cases, each with its Call, its GPU's HBM rate and the kernel its own plan ran
    (`own_ran`); `ms` holds the pinned plans only."""
    from .ptx_plans import read_cases

    cases = read_cases(files)
    for case in cases.values():
        if case["gpu"] not in HBM_BYTES_PER_US:
            raise HgemmError(f"compare.ptx_model: no HBM bandwidth known for the GPU {case['gpu']!r} of the sweep "
                             f"(known: {', '.join(HBM_BYTES_PER_US)}; add its datasheet figure to HBM_BYTES_PER_US)")
        case["call"], case["hbm"] = Call.of(case["problem"]), HBM_BYTES_PER_US[case["gpu"]]
        own = case["ms"].pop(("wgmma_persistent", 0, 0), None)
        if own is not None:
            case["own_ran"] = case["own"]["ran"]
    return cases


def rows_of(cases: dict[str, dict]) -> tuple[list, list[dict], np.ndarray]:
    """The timed plans the launcher's model may take (`candidates`): (case, key) pairs, their features and
    log(microseconds)."""
    keys, feats, y = [], [], []
    for name, case in cases.items():
        allowed = set(candidates(case["call"]))
        for key, ms in case["ms"].items():
            if key not in allowed:
                continue
            keys.append((name, key))
            feats.append(features(case["call"], key, case["hbm"]))
            y.append(math.log(ms * 1e3))
    return keys, feats, np.array(y)


def picks(model: Model, x: np.ndarray, cases: dict[str, dict]) -> dict[str, tuple]:
    """Per case, the candidate (of those timed) the model predicts fastest."""
    out = {}
    for name, case in cases.items():
        timed = [k for k in priced(model, candidates(case["call"])) if k in case["ms"]]
        if timed:
            t = model.table([features(case["call"], k, case["hbm"]) for k in timed])
            out[name] = timed[int(np.argmin(model.predict(x, t)))]
    return out


def rate_fields(name: str) -> tuple[int, int, int, int]:
    """A rate name's (kind, bm, bn, swapped) as the header's table holds them (kinds in KINDS order)."""
    if name == "cluster":
        return 3, 128, 256, 0
    kind, tile = name.split(":")
    bm, bn = tile.rstrip("s").split("x")
    return (*RATE_KINDS, "cluster").index(kind), int(bm), int(bn), int(tile.endswith("s"))


def from_header(path: Path = HEADER) -> tuple[Model, np.ndarray]:
    """The model and parameters a header written by write_header holds (what the launcher plans with)."""
    text = path.read_text()
    rates = {}
    for kind, bm, bn, swapped, us in re.findall(r"\{(\d), (\d+), (\d+), (\d), ([-+.\deE]+)\}", text):
        name = ("cluster" if (kind, bm, bn, swapped) == ("3", "128", "256", "0")
                else f"{(*RATE_KINDS, 'cluster')[int(kind)]}:{bm}x{bn}{'s' if swapped == '1' else ''}")
        rates[name] = float(us)
    arrays = {n: [float(v) for v in re.search(rf"{n}\[4\] = {{([^}}]*)}}", text).group(1).split(",")]
              for n in ("kLaunchUs", "kUnitUs")}
    scalars = {n: float(re.search(rf"k_{n} = ([-+.\deE]+);", text).group(1)) for n in SCALARS}
    model = Model(rates)
    values = ([rates[r] for r in model.rates] + arrays["kLaunchUs"] + arrays["kUnitUs"]
              + [scalars[n] for n in SCALARS])
    return model, np.log(np.array(values))


def write_header(model: Model, x: np.ndarray, files: list[Path], path: Path = HEADER) -> None:
    p = model.params(x)
    rates = ",\n".join("    {%d, %d, %d, %d, %.6g}" % (*rate_fields(r), p["tc:" + r]) for r in model.rates)
    kinds = ", ".join(f"{p['launch:' + k]:.6g}" for k in KINDS)
    units = ", ".join(f"{p['unit:' + k]:.6g}" for k in KINDS)
    scal = "\n".join(f"constexpr double k_{s} = {p[s]:.6g};" for s in SCALARS)
    sources = "".join(f"//   compare/sweeps/{f.name}\n" for f in files)
    path.write_text(
        "// blocks/plan_model_fit.h: the fitted parameters of wgmma_persistent's time model (blocks/plan_model.cuh),\n"
        "// written by `python -m compare.ptx_model --write FILES` (compare/ptx_model.py says what each stands for,\n"
        f"// docs/design/hopper.md how well they predict) on these FILES. Do not edit.\n{sources}"
        "#pragma once\n\nnamespace hopper::model_fit {\n"
        "// microseconds per 64-deep k-block of one work unit, by kind (wgmma_persistent 0, the cluster split 1, the "
        "grid\n// split 2, wgmma_cluster 3) and C's tile (a swapped cut tile's: rows along M, columns along N)\n"
        "struct Rate {\n  int kind, bm, bn, swapped;\n  double us_per_kblock;\n};\n"
        f"constexpr Rate kRates[] = {{\n{rates}}};\n"
        f"constexpr double kLaunchUs[4] = {{{kinds}}};  // by kind\nconstexpr double kUnitUs[4] = {{{units}}};\n"
        f"{scal}\n}}  // namespace hopper::model_fit\n")


def cross_validate(cases: dict[str, dict]) -> None:
    from .ptx_plans import plan_key, rule_plans

    names = list(cases)
    shapes = [(cases[n]["problem"]["m"], cases[n]["problem"]["n"], cases[n]["problem"]["k"],
               cases[n]["problem"]["layout"]) for n in names]
    with tempfile.TemporaryDirectory() as tmp:
        rule = dict(zip(names, (plan_key(*p) for p in rule_plans(shapes, CSRC, Path(tmp), model=False))))
    keys, feats, y = rows_of(cases)
    model = Model({f["rate"] for f in feats})
    seeds = sorted({c["seed"] for c in cases.values()})
    all_m, all_r, boxes = [], [], []
    for hold in seeds:
        train = [i for i, (n, _) in enumerate(keys) if cases[n]["seed"] != hold]
        x = fit(model, model.table([feats[i] for i in train]), y[train])
        held = {n: c for n, c in cases.items() if c["seed"] == hold}
        got = picks(model, x, held)
        reg_m, reg_r = [], []
        for n, k in got.items():
            ms, r = held[n]["ms"], rule[n]
            if r not in ms or held[n].get("own_ran") == "mma_stream":  # mma_stream's cases: neither decides
                continue
            best = min(ms.values())
            reg_m.append(ms[k] / best)
            reg_r.append(ms[r] / best)
            if whole_boxes(held[n]["problem"]["n"], held[n]["problem"]["k"]):
                boxes.append((held[n]["problem"]["m"], reg_m[-1], reg_r[-1]))
        print(f"held out seed {hold}: {len(reg_m)} cases; time over the fastest plan timed (geomean, p90): model "
              f"{geomean(reg_m):.4f} {np.percentile(reg_m, 90):.3f}, rule {geomean(reg_r):.4f} "
              f"{np.percentile(reg_r, 90):.3f}")
        all_m += reg_m
        all_r += reg_r
    print(f"all held-out cases ({len(all_m)}): model {geomean(all_m):.4f}, rule {geomean(all_r):.4f}")
    if boxes:  # where the launcher keeps the rule but for its grid splits and part-filled bands (model_plans)
        print(boxes_line(boxes))


BOX_BANDS = (128, 512)  # the M bands of boxes_line: up to one, up to four 128-row tiles, more


def boxes_line(boxes: list[tuple[int, float, float]]) -> str:
    """The held-out whole 64-wide boxes (hopper::whole_boxes, where the launcher keeps the rule but for its grid
    splits and M part-filling a few 128-row bands) as one line: per case (M, the model's time over the fastest plan
    timed, the rule's), their geomeans over all and by M band."""
    def part(sub):
        return f"model {geomean([m for _, m, _ in sub]):.4f}, rule {geomean([r for _, _, r in sub]):.4f}"

    bands, lo = [], 0
    for hi in (*BOX_BANDS, None):
        sub = [b for b in boxes if b[0] > lo and (hi is None or b[0] <= hi)]
        if sub:
            name = f"{lo} < M <= {hi}" if hi is not None else f"M > {lo}"
            bands.append(f"{name} ({len(sub)}): {part(sub)}")
        lo = hi
    return (f"of them whole 64-wide boxes, where the launcher keeps the rule but for its grid splits and part-filled "
            f"bands ({len(boxes)}): {part(boxes)}; " + "; ".join(bands))


def show(cases: dict[str, dict], text: str, header: Path = HEADER) -> list[str]:
    """For each case whose name holds `text`: a line with its name and torch.matmul's time, then each plan the
    launcher's model may take that the case timed (fastest first): its key, compute figure, measured and predicted
    microseconds and log(predicted / measured); last the plan the fit in `header` picks."""
    model, x = from_header(header)
    out = []
    for name, case in cases.items():
        if text not in name:
            continue
        keys = [k for k in priced(model, candidates(case["call"])) if k in case["ms"]]
        if not keys:
            continue
        pred = model.predict(x, model.table([features(case["call"], k, case["hbm"]) for k in keys]))
        out.append(f"{name}: torch.matmul {case['torch_ms'] * 1e3:.1f} us")
        rows = sorted(zip(keys, pred), key=lambda r: case["ms"][r[0]])
        for key, p in rows:
            us = case["ms"][key] * 1e3
            out.append(f"  {str(key):32s} {rate_name(key):26s} measured {us:8.1f}  predicted {p:8.1f}  "
                       f"log {math.log(p / us):+.3f}")
        out.append(f"  the fit picks {min(rows, key=lambda r: r[1])[0]}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m compare.ptx_model", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="+", help="sweep data files timed with --ptx-only")
    ap.add_argument("--cv", action="store_true", help="leave-one-seed-out: the model's picks against the rule's")
    ap.add_argument("--write", action="store_true", help=f"write the fit on all files to {HEADER.name}")
    ap.add_argument("--show", metavar="TEXT", help=f"no fit: for each case whose name holds TEXT (a shape, "
                    f"'256x4096x4096/NN'), its timed plans' measured and predicted times by the shipped fit "
                    f"({HEADER.name})")
    args = ap.parse_args(argv)
    files = [Path(p) for p in args.data]
    missing = [str(p) for p in files if not p.exists()]
    if missing:
        print(f"python -m compare.ptx_model: error: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    cases = {n: c for n, c in read(files).items() if not c["call"].a_col}
    if args.show:
        for line in show(cases, args.show):
            print(line)
        return 0
    keys, feats, y = rows_of(cases)
    model = Model({f["rate"] for f in feats})
    x = fit(model, model.table(feats), y)
    err = np.abs(np.log(model.predict(x, model.table(feats))) - y)
    print(f"{len(cases)} cases, {len(y)} timed plans; |log(predicted / measured)|: median {np.median(err):.3f}, "
          f"p90 {np.percentile(err, 90):.3f}")
    for name, v in model.params(x).items():
        print(f"  {name:28s} {v:.4g}")
    if args.cv:
        cross_validate(cases)
    if args.write:
        write_header(model, x, files)
        print(f"wrote {HEADER}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
