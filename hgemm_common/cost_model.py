"""A cost model of a GEMM plan: its predicted time on a problem and a GPU as named terms, and the fit of its
parameters to measured times (`python -m compare sweep --fit`).

Read top to bottom, as a prediction is made:
1. the GPU (`GPU`): SMs, clock, the instructions' rates, HBM and L2 bandwidth, memory latency; H100 defaults;
2. the problem (`Problem`): M, N, K, layout, alignment class, dtype, accumulation;
3. the candidate plan (`Plan`): kernel, tile BM x BN x BK, stages, warps, K split, schedule (data-parallel,
   persistent, split-K, stream-K, the bandwidth path), instruction, staged operands, how K-split partials are
   summed; `plan_for` says what each of the project's kernels is;
4. `features`: the counts a plan implies on a problem and a GPU (tiles, work units, rounds, k-iterations on the
   busiest SM, bytes from HBM, bytes through L2, staging copies, split-K partials, launches). None depends on a
   fitted parameter, so a fit computes them once per record;
5. the parameters (`KernelParams` per kernel: compute efficiency, HBM and L2 efficiency, the L2 cost of rows off
   the 32-byte sectors, latency per launch, per tile and per k-iteration; `Params`: those, the GPU and residual
   corrections) and `predict`: the terms, the total and the term that decided (`Prediction`); `rank`: candidate
   plans by predicted time;
6. `fit`: the parameters of each kernel from measured records (least squares in log time, Huber-weighted so that
   a few disturbed timings do not pull the fit), then the residual corrections; `quality`: median and p90 |log
   error| per kernel;
7. the parameter file (`save`, `load`): JSON, the format of the correction table a planner ships.

The time of a plan:

    total = max(compute + waves, hbm, l2) + staging + reduce + latency

- compute: the problem's 2 M N K flops at the plan's efficiency of its instruction's peak rate over all SMs;
- waves: what the tile grid adds to that: padded tiles past M and N, and the last round of work units that leaves
  SMs idle (quantization: a grid of 133 tiles on 132 SMs takes two rounds);
- hbm: the bytes that must cross HBM (A, B, C once) at the bandwidth the plan reaches: HBM's at the kernel's
  efficiency, or less where too few CTAs keep too few bytes in flight (bytes in flight / memory latency);
- l2: the operand re-reads of the tile grid (A once per tile column, B once per tile row: halved where a cluster
  multicasts B) at the kernel's efficiency of L2's bandwidth, or of the active SMs' ports to it; bytes of an
  operand read in place with rows off the 32-byte sectors (alignment class "o": each 128-byte TMA box row spans
  five sectors, two lines on every other row) count `sector` times, a factor fitted per kernel (for the pointer
  kernels it adds to what their load term and ".u" parameters carry). The factor is per byte, so a tile that
  re-reads that operand more pays it more: a 64 x 256 tile reads B once per 64 rows of C, twice as often as a
  128 x 256 tile;
- staging: copies of operands a kernel cannot read in place, made before it (read and write);
- reduce: K-split partials written and read again in fp32 (through HBM; a cluster's exchange costs none);
- latency: fixed costs per launch, per tile an SM takes (pipeline fill, epilogue) and per k-iteration.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass, field, fields, replace

import numpy as np

from .errors import HgemmValueError
from .schedules import stream_k_cut


def cdiv(a: int, b: int) -> int:
    """ceil(a / b) of host integers (b > 0); triton_kernels' host code uses it too."""
    return -(-a // b)


# ----------------------------------------------------------------------------------------------------------------
# 1. The GPU
# ----------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GPU:
    """What the model needs to know of a GPU. The defaults are an H100 SXM's: its datasheet (132 SMs; the dense
    fp16 and bf16 tensor-core rate, quoted at 1830 MHz, is 4096 flops per SM and clock; 3.35 TB/s of HBM, 50 MB of
    L2, 228 KB of shared memory per SM); the rest are estimates a fit's per-kernel efficiencies absorb."""
    name: str = "H100 SXM"
    sms: int = 132
    clock_ghz: float = 1.83
    # flops per SM and clock of each instruction path: wgmma; mma.sync (about two thirds of wgmma's rate, the
    # ceiling the harness's frame measures, compare/frame.py); CUDA-core fp32 FMA (128 lanes, 2 flops each)
    wgmma_flops: int = 4096
    mma_flops: int = 2731
    fma_flops: int = 256
    hbm_gbps: float = 3350.0
    # L2's bandwidth has no datasheet figure: an estimate, at least what 132 SMs drawing 128 x 256 x 64 tiles at the
    # peak rate need (48 KB per 4.2 MFLOP, about 11 TB/s), since such kernels run near the peak; each kernel's
    # l2_eff scales it. And each SM's port to L2, bytes per clock.
    l2_gbps: float = 12000.0
    sm_l2_bytes_per_clock: int = 64
    l2_bytes: int = 50 * 2**20
    smem_per_sm: int = 228 * 1024
    threads_per_sm: int = 2048
    # A load's round trip under load: a CTA streams at most its bytes in flight per this long (Little's law)
    mem_latency_us: float = 1.0

    def flops_per_clock(self, isa: str) -> int:
        return {"wgmma": self.wgmma_flops, "mma": self.mma_flops, "fma": self.fma_flops}[isa]

    def peak_tflops(self, isa: str = "wgmma") -> float:
        return self.sms * self.clock_ghz * 1e9 * self.flops_per_clock(isa) / 1e12


H100 = GPU()


# ----------------------------------------------------------------------------------------------------------------
# 2. The problem
# ----------------------------------------------------------------------------------------------------------------
ELEMENT_BYTES = 2  # fp16 and bf16 operands and output
PARTIAL_BYTES = 4  # fp32 split-K partials


@dataclass(frozen=True)
class Problem:
    """C (M x N) = A (M x K) @ B (K x N). align: three letters for A, B, C as `triton_kernels.plan_table.align_class`
    writes them ("t" TMA reads it in place, "o" in place with rows off the 32-byte sectors, "-" not describable)."""
    m: int
    n: int
    k: int
    layout: str = "NN"
    align: str = "ttt"
    dtype: str = "fp16"
    acc: str = "fp32"

    def __post_init__(self):
        if min(self.m, self.n, self.k) < 1:
            raise HgemmValueError(f"cost model: a problem needs M, N, K >= 1, got {self.m}x{self.n}x{self.k}")


# ----------------------------------------------------------------------------------------------------------------
# 3. The plan
# ----------------------------------------------------------------------------------------------------------------
# data_parallel: one CTA per work unit, as many resident per SM as shared memory and threads allow; persistent: one
# CTA per SM walking the tiles; split_k: K cut in `split` slices, one CTA each, partials summed after (`reduce`);
# stream_k: whole tiles in data-parallel rounds and the partial round's tiles cut into k-slices aligned in K
# (`schedules.stream_k_cut`), cut tiles fixed up through a workspace; bandwidth: the CUDA-core path for
# a single row (B streamed through registers), its K split like split_k's.
SCHEDULES = ("data_parallel", "persistent", "split_k", "stream_k", "bandwidth")
REDUCES = ("none", "fused", "two_pass", "cluster")
ISAS = ("wgmma", "mma", "fma")


@dataclass(frozen=True)
class Plan:
    kernel: str  # the kernel's name: hgemm's kernel= (Triton) or the record's (PTX)
    bm: int
    bn: int
    bk: int
    stages: int = 1
    warps: int = 4
    split: int = 1
    schedule: str = "data_parallel"
    isa: str = "wgmma"
    staged: str = ""  # the operands copied to aligned buffers first: letters of "ABC"
    reduce: str = "none"  # how K-split partials are summed: in the GEMM's launch, by a second one, over a cluster
    cluster: int = 1  # CTAs sharing each B tile by TMA multicast

    def __post_init__(self):
        if self.schedule not in SCHEDULES or self.reduce not in REDUCES or self.isa not in ISAS:
            raise HgemmValueError(f"cost model: plan {self.kernel!r}: schedule, reduce and isa must be among "
                                  f"{SCHEDULES}, {REDUCES}, {ISAS}; got {self.schedule!r}, {self.reduce!r}, "
                                  f"{self.isa!r}")
        if min(self.bm, self.bn, self.bk, self.stages, self.warps, self.split, self.cluster) < 1:
            raise HgemmValueError(f"cost model: plan {self.kernel!r}: tile, stages, warps, split and cluster must be "
                                  ">= 1")
        if not set(self.staged) <= set("ABC"):
            raise HgemmValueError(f"cost model: plan {self.kernel!r}: staged names operands among A, B, C, got "
                                  f"{self.staged!r}")


# What each kernel of the project is to the model: (schedule, how its K-split partials are summed). A split of 1
# makes a split-K kernel data-parallel. Triton (kernel= names): the blocked kernel launches one program per tile,
# the TMA kernels are persistent, split-K and gemv sum their slices in the launch (the last slice of each tile),
# splitk_wide and the Gluon kernel's splits in a second launch; streamk and gluon_streamk cut the partial round's
# tiles into k-slices (`schedules.stream_k_cut`; `features`' stream_k partials), the cut tiles summed by a second
# launch (streamk) or in the launch (gluon_streamk). PTX
# (record names): wgmma_persistent and the kernels it hands problems to (mma_stream: the bandwidth path on mma.sync).
KERNELS = {
    "triton_blocked": ("data_parallel", "none"),
    "triton_tma": ("persistent", "none"),
    "triton_splitk": ("split_k", "fused"),
    "triton_splitk_tma": ("split_k", "fused"),
    "triton_splitk_wide": ("split_k", "two_pass"),
    "triton_streamk": ("stream_k", "two_pass"),
    "triton_gemv": ("bandwidth", "fused"),
    "triton_realign": ("split_k", "fused"),
    "triton_realign_rows": ("split_k", "two_pass"),
    "gluon_persistent": ("persistent", "two_pass"),
    "gluon_streamk": ("stream_k", "fused"),
    "wgmma_persistent": ("persistent", "none"),
    "wgmma_splitk": ("split_k", "cluster"),
    "wgmma_splitk_grid": ("split_k", "two_pass"),
    "wgmma_cluster": ("persistent", "none"),
    "mma_stream": ("bandwidth", "two_pass"),
    "gluon_stream": ("bandwidth", "two_pass"),
}
PTX_KERNELS = ("wgmma_persistent", "wgmma_splitk", "wgmma_splitk_grid", "wgmma_cluster")


def plan_for(kernel: str, bm: int, bn: int, bk: int, stages: int = 1, warps: int = 4, split: int = 1,
             staged: str = "") -> Plan:
    """The model's plan of one of the project's kernels (`KERNELS`) with a tile, stages, warps and K split. The
    instruction: the CUDA-core FMA for gemv, mma.sync for mma_stream; wgmma for the hand-written Hopper kernels; for Triton's tl.dot, wgmma
    from 64-row tiles (a warpgroup's) and mma.sync below, but for the TMA kernel's short tiles, which it swaps onto
    wgmma (`SWAP_TILE_KERNELS`)."""
    if kernel not in KERNELS:
        raise HgemmValueError(f"cost model: unknown kernel {kernel!r}; known: {', '.join(KERNELS)}")
    schedule, reduce = KERNELS[kernel]
    if split == 1 and schedule == "split_k":
        schedule = "data_parallel"
    if split > 1 and schedule == "persistent":  # the Gluon kernel's split configurations
        schedule = "split_k"
    isa = ("mma" if kernel in ("mma_stream", "gluon_stream") else "fma") if schedule == "bandwidth" else \
        "wgmma" if kernel in PTX_KERNELS or bm >= 64 or (kernel in SWAP_TILE_KERNELS and bn >= 64) else "mma"
    return Plan(kernel, bm, bn, bk, stages, warps, split, schedule, isa, staged,
                reduce if split > 1 else "none", 2 if kernel == "wgmma_cluster" else 1)


# ----------------------------------------------------------------------------------------------------------------
# 4. Features: what a plan implies on a problem and a GPU, before any fitted parameter
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class Features:
    """Counts of one (problem, plan, GPU), or of many stacked as arrays (`stack`)."""
    flops: float  # 2 M N K
    tile_flops: float  # 2 BM BN BK: one k-iteration of one tile
    sm_rate: float  # the instruction's peak flops per second of one SM
    sms: float
    steps: float  # k-iterations on the busiest SM (tile padding and the last round included)
    rounds: float  # tiles the busiest SM starts
    bytes_hbm: float  # A, B and C once
    hbm_rate: float  # HBM bytes per second at full efficiency
    stream_rate: float  # what the active CTAs keep in flight, per second of memory latency
    bytes_l2: float  # operand reads of the tile grid and the C write
    l2_rate: float  # L2 bytes per second, capped by the active SMs' ports
    bytes_staging: float  # copies made before the GEMM, read and written
    bytes_reduce: float  # fp32 partials written and read again
    launches: float
    loads: float  # a pointer kernel's warp-wide load instructions on the busiest SM over its resident CTAs (0: TMA)
    bytes_l2_off: float = 0.0  # the part of bytes_l2 read from operands in place with rows off the 32-byte sectors


# Kernels that load A and B through pointers (cp.async or plain loads), not TMA: their loads are only as wide as
# Triton can prove the operands aligned, so on operands whose rows lie off the 32-byte sectors ("o") or that TMA
# cannot describe at all ("-") they issue one load per element (`pointer_loads`) and run at other efficiencies,
# fitted apart (`param_key`'s ".u").
POINTER_KERNELS = ("triton_blocked", "triton_splitk", "triton_gemv", "triton_realign", "triton_realign_rows")
# Pointer kernels whose loads are as wide as each operand's alignment allows (triton_kernels/gluon_stream.py
# `vectors`): 16-byte vectors on rows TMA could describe ("t", "o"), narrower or single elements on the others ("-"),
# where their parameters are fitted apart (`param_key`'s ".u")
VECTOR_KERNELS = ("gluon_stream",)
# Pointer kernels that read B in 16-byte vectors however its rows lie (residue groups), with the B major (the
# layout's second letter) each does that for
SHIFTED_ROWS = {"triton_realign": "T", "triton_realign_rows": "N"}


def pointer_loads(problem: Problem, plan: Plan) -> float:
    """Warp-wide load instructions one k-iteration of a pointer kernel's CTA issues, weighted by what they cost.
    Triton vectorizes a load only where it can prove 16-byte alignment, which its specialization on divisibility
    by 16 gives for rows on 32-byte sectors ("t") only (and a SHIFTED_ROWS kernel's K-major B, whatever its rows):
    other operands load one element per instruction, held in
    registers until stored to shared memory, so past SPILL_ELEMENTS elements per thread and stage the registers
    spill and the cost grows with the square."""
    threads = 32 * plan.warps
    total = 0.0
    b_letter = "t" if SHIFTED_ROWS.get(plan.kernel) == problem.layout[1] else problem.align[1]
    for letter, elems in ((problem.align[0], plan.bm * plan.bk), (b_letter, plan.bk * plan.bn)):
        if letter == "t":
            total += elems / (16 // ELEMENT_BYTES) / 32
        else:
            per_thread = elems / threads
            total += elems / 32 * (1 + max(0.0, per_thread / SPILL_ELEMENTS - 1) ** 2 * SPILL_WEIGHT)
    return total


SPILL_ELEMENTS = 32
SPILL_WEIGHT = 1.0


def staging_launches(plan: Plan) -> int:
    """The launches a plan's staging copies take: on the Triton side (kernels named triton_* and gluon_*) one
    copies A and B and one copies C back (`triton_kernels.stage_copy`); on the PTX side, one an operand, as the
    committed sweeps timed it (`ptx_kernels.call` now copies A and B in one launch too, csrc/host/stage_copy.cu)."""
    if plan.kernel.startswith(("triton_", "gluon_")):
        return ("A" in plan.staged or "B" in plan.staged) + ("C" in plan.staged)
    return len(plan.staged)


def occupancy(plan: Plan, gpu: GPU) -> int:
    """CTAs of a plan resident on one SM: one for persistent schedules (one CTA per SM by design), else as many as
    shared memory (the operand ring) and threads allow."""
    if plan.schedule in ("persistent", "stream_k"):
        return 1
    ring = plan.stages * (plan.bm + plan.bn) * plan.bk * ELEMENT_BYTES
    by_smem = gpu.smem_per_sm // ring if plan.schedule != "bandwidth" else gpu.threads_per_sm
    return max(1, min(by_smem, gpu.threads_per_sm // (32 * plan.warps)))


def resident(units: int, plan: Plan, gpu: GPU) -> int:
    """CTAs of a plan's `units` work units that run on the busiest SM at once: as many as it starts (its rounds),
    up to its occupancy. A pointer kernel's per-element loads wait on memory one after the other within a CTA,
    while CTAs resident together wait at the same time: its load term is the busiest SM's loads over this (a
    split that doubles the CTAs to two per SM halves each CTA's k-iterations and, with them resident together,
    the time its loads wait)."""
    return max(1, min(occupancy(plan, gpu), cdiv(units, gpu.sms)))


def features(problem: Problem, plan: Plan, gpu: GPU = H100) -> Features:
    m, n, k, e = problem.m, problem.n, problem.k, ELEMENT_BYTES
    tiles_m, tiles_n = cdiv(m, plan.bm), cdiv(n, plan.bn)
    tiles = tiles_m * tiles_n
    split = plan.split if plan.schedule in ("split_k", "bandwidth") else 1
    if plan.kernel == "triton_realign_rows" and problem.layout[1] == "N":  # a plane per residue and slice
        split *= 8 // math.gcd(n, 8)
    kiters = cdiv(cdiv(k, split), plan.bk)
    units = tiles * split
    g, rest, slices = stream_k_cut(tiles, kiters, gpu.sms) if plan.schedule == "stream_k" else (0, 0, 1)
    if rest:  # stream-K: whole rounds of tiles, then one k-slice of a cut tile on each of R x S programs
        steps = (tiles - rest) // g * kiters + cdiv(kiters, slices)
        rounds = (tiles - rest) // g + 1
        grid = g if tiles >= g else rest * slices
        bytes_reduce = 2 * PARTIAL_BYTES * plan.bm * plan.bn * rest * slices
    else:  # (stream-K with nothing cut is the persistent walk)
        steps = cdiv(units, gpu.sms) * kiters
        rounds = cdiv(units, gpu.sms)
        grid = min(units, gpu.sms) if plan.schedule in ("persistent", "stream_k") else units
        partials = split > 1 and plan.reduce in ("fused", "two_pass")
        bytes_reduce = 2 * PARTIAL_BYTES * split * m * n if partials else 0
    active_ctas = min(grid, gpu.sms * occupancy(plan, gpu))
    active_sms = min(grid, gpu.sms)
    in_flight = plan.stages * (plan.bm + plan.bn) * plan.bk * e
    clock = gpu.clock_ghz * 1e9
    staged = {"A": m * k, "B": k * n, "C": m * n}
    off_a = problem.align[0] == "o" and "A" not in plan.staged
    off_b = problem.align[1] == "o" and "B" not in plan.staged
    loads = 0.0
    if plan.kernel in POINTER_KERNELS:  # (never persistent: their rounds are CTAs resident together, `resident`)
        loads = steps * pointer_loads(problem, plan) / resident(units, plan, gpu)
    return Features(
        flops=2.0 * m * n * k, tile_flops=2.0 * plan.bm * plan.bn * plan.bk,
        sm_rate=gpu.flops_per_clock(plan.isa) * clock, sms=float(gpu.sms), steps=float(steps),
        rounds=float(rounds), bytes_hbm=float(e * (m * k + k * n + m * n)), hbm_rate=gpu.hbm_gbps * 1e9,
        stream_rate=active_ctas * in_flight / (gpu.mem_latency_us * 1e-6),
        bytes_l2=float(e * (k * (tiles_n * m + tiles_m * n / plan.cluster) + m * n)),
        l2_rate=min(gpu.l2_gbps * 1e9, active_sms * gpu.sm_l2_bytes_per_clock * clock),
        bytes_staging=float(2 * e * sum(staged[x] for x in plan.staged)), bytes_reduce=float(bytes_reduce),
        launches=float(1 + staging_launches(plan) + (plan.reduce == "two_pass" and (split > 1 or rest > 0))),
        loads=float(loads),
        bytes_l2_off=float(e * k * (off_a * tiles_n * m + off_b * tiles_m * n / plan.cluster)))


def stack(many: list[Features]) -> Features:
    """Features of many records as one Features of arrays (what `fit` evaluates at once)."""
    return Features(**{f.name: np.array([getattr(x, f.name) for x in many], dtype=np.float64)
                       for f in fields(Features)})


# ----------------------------------------------------------------------------------------------------------------
# 5. Parameters and the prediction
# ----------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KernelParams:
    """One kernel's fitted parameters (defaults: a reasonable kernel of its instruction, before any fit)."""
    eff: float = 0.75  # of its instruction's peak rate, at full tiles
    mem_eff: float = 0.85  # of HBM's bandwidth
    l2_eff: float = 1.0  # of L2's
    launch_us: float = 3.0  # per launch (its own, a copy's, a reduction's)
    tile_us: float = 1.0  # per tile an SM starts: the pipeline's fill and the epilogue
    kiter_us: float = 0.01  # per k-iteration on the busiest SM, beyond its flops
    load_us: float = 1e-4  # per warp-wide load instruction of a pointer kernel on the busiest SM
    sector: float = 1.0  # L2 cost of a byte read in place from rows off the 32-byte sectors, per byte on them

    def as_array(self) -> np.ndarray:
        return np.array([getattr(self, f.name) for f in fields(self)], dtype=np.float64)


PARAM_NAMES = tuple(f.name for f in fields(KernelParams))
DEFAULTS = {"wgmma": KernelParams(), "mma": KernelParams(), "fma": KernelParams(eff=0.5)}


@dataclass
class Params:
    gpu: GPU = H100
    kernels: dict[str, KernelParams] = field(default_factory=dict)
    corrections: dict[str, float] = field(default_factory=dict)  # correction_key -> log factor on the total
    about: dict = field(default_factory=dict)  # where the fit came from and how well it fits
    # neighbour_key -> the measured problems of that plan: (log2 M, log2 N, log2 K, log residual) each; a loaded
    # file's rows are text until first looked up (`neighbour_rows`)
    neighbours: dict[str, list] = field(default_factory=dict)

    def of(self, plan: Plan, problem: Problem | None = None) -> KernelParams:
        return self.kernels.get(param_key(plan, problem)) or DEFAULTS[plan.isa]


def param_key(plan: Plan, problem: Problem | None = None) -> str:
    """Whose parameters a plan takes: its kernel's, or a Triton kernel's mma.sync tiles' (below 64 rows) apart from
    its wgmma tiles' (each efficiency is of its own instruction's rate); a pointer kernel's on A or B that TMA
    cannot describe (".u", for a VECTOR_KERNELS kernel where TMA could not describe A or B) apart from its aligned
    calls'; a Triton wide tile's (".wide": a width that is not a power of two, two accumulators side by side,
    `two_accumulators`) and a swapped short tile's (".swap", `swapped_tile`) apart from its kernel's other tiles'."""
    unaligned = problem is not None and (plan.kernel in POINTER_KERNELS and problem.align[:2] != "tt"
                                         or plan.kernel in VECTOR_KERNELS and "-" in problem.align[:2])
    return (plan.kernel + (".mma" if plan.isa == "mma" else "") + (".u" if unaligned else "")
            + (".wide" if two_accumulators(plan) else "") + (".swap" if swapped_tile(plan) else ""))


# Kernels whose tiles of a width that is not a power of two are two tl.dot accumulators side by side (the
# hand-written kernels' 128x192 and 256x152 tiles are one wgmma that wide, and take their kernel's parameters)
WIDE_TILE_KERNELS = ("triton_tma",)


def two_accumulators(plan: Plan) -> bool:
    """A Triton wide tile: block_n not a power of two, computed as two accumulators (`WIDE_TILE_KERNELS`)."""
    return plan.kernel in WIDE_TILE_KERNELS and plan.bn & (plan.bn - 1) != 0


# Kernels whose tiles of fewer than 64 rows and at least 64 columns run swapped (C^T = B^T A^T: the tile's columns
# are wgmma's 64-row side, its rows wgmma's N; triton_kernels/tma_persistent.py's `swapped`, which the Gluon kernel
# shares)
SWAP_TILE_KERNELS = ("triton_tma", "gluon_persistent")


def swapped_tile(plan: Plan) -> bool:
    """A short tile run swapped: fewer than 64 rows and at least 64 columns on a `SWAP_TILE_KERNELS` kernel."""
    return plan.kernel in SWAP_TILE_KERNELS and plan.bm < 64 <= plan.bn


def unmeasured(plan: Plan, params: "Params") -> bool:
    """A wide tile (`param_key`'s ".wide") or a swapped one (".swap") with no fitted parameters of its own: the
    planner does not offer it, as nothing measured says how fast its two accumulators or its transposed wgmmas run
    (a sweep that timed such tiles gives the fit their records)."""
    return (two_accumulators(plan) or swapped_tile(plan)) and param_key(plan) not in params.kernels


TERMS = ("compute", "waves", "hbm", "l2", "staging", "reduce", "latency")


def _pick(np_op, op, x, y):
    """op on two floats (a planner's one prediction: Python's min/max, without numpy's per-call cost), np_op where
    either is an array (a fit's many records at once)."""
    return np_op(x, y) if isinstance(x, np.ndarray) or isinstance(y, np.ndarray) else op(x, y)


def terms(f: Features, p: KernelParams) -> dict:
    """The named terms (seconds) of features f under parameters p; f may hold arrays (then so do the terms)."""
    rate = f.sm_rate * p.eff
    compute = f.flops / (f.sms * rate)
    return {"compute": compute, "waves": f.steps * f.tile_flops / rate - compute,
            "hbm": f.bytes_hbm / _pick(np.minimum, min, f.hbm_rate * p.mem_eff, f.stream_rate),
            "l2": (f.bytes_l2 + (p.sector - 1.0) * f.bytes_l2_off) / (f.l2_rate * p.l2_eff),
            "staging": f.bytes_staging / (f.hbm_rate * p.mem_eff),
            "reduce": f.bytes_reduce / (f.hbm_rate * p.mem_eff),
            "latency": 1e-6 * (f.launches * p.launch_us + f.rounds * p.tile_us + f.steps * p.kiter_us
                               + f.loads * p.load_us)}


def total(t: dict):
    """max(compute + waves, hbm, l2) + staging + reduce + latency, of terms(...)."""
    memory = _pick(np.maximum, max, t["hbm"], t["l2"])
    return _pick(np.maximum, max, t["compute"] + t["waves"], memory) + t["staging"] + t["reduce"] + t["latency"]


def correction_key(problem: Problem, plan: Plan) -> str:
    """The bin a residual correction applies to: the parameter set the plan takes (`param_key`: a bin's residuals
    are of one fitted set, never of two averaged), M's power-of-two bucket, and whether every operand is
    TMA-describable in place ("a") or not ("u")."""
    return f"{param_key(plan, problem)}/m{1 << (problem.m - 1).bit_length()}/{'u' if '-' in problem.align else 'a'}"


@dataclass(frozen=True)
class Prediction:
    seconds: float  # the total, the residual correction applied
    terms: dict  # each term's seconds (TERMS)
    decided: str  # the term that contributed most to the total
    correction: float  # the factor the total was multiplied by (1.0: none)

    @property
    def us(self) -> float:
        return self.seconds * 1e6


def decided(t: dict) -> str:
    """The term that contributed most: of max(compute + waves, hbm, l2) only the larger side contributes (compute
    and waves each their part), then staging, reduce and latency add theirs."""
    core = t["compute"] + t["waves"]
    parts = {"compute": t["compute"], "waves": t["waves"]} if core >= max(t["hbm"], t["l2"]) else \
        {"hbm": t["hbm"]} if t["hbm"] >= t["l2"] else {"l2": t["l2"]}
    parts.update(staging=t["staging"], reduce=t["reduce"], latency=t["latency"])
    return max(parts, key=parts.get)


def neighbour_key(problem: Problem, plan: Plan) -> str:
    """Which measured records can correct a prediction (`neighbour_correction`): those of the same plan (kernel,
    tile, stages, warps, split, staged operands) on problems of the same layout, alignment of A and B, and
    accumulation."""
    return (f"{plan.kernel}/{plan.bm}x{plan.bn}x{plan.bk}/s{plan.stages}/w{plan.warps}/k{plan.split}/"
            f"{plan.staged or '-'}/{problem.layout}/{problem.align[:2]}/{problem.acc}")


# A prediction is corrected by what the sweep measured for the same plan on the nearest problems: the log residuals
# of at most NEIGHBOURS of them within NEIGHBOUR_DISTANCE (|log2| ratios of M, N and K, summed), each clipped to
# MAX_NEIGHBOUR_CORRECTION and weighted by exp(-distance / NEIGHBOUR_SCALE), averaged with NEIGHBOUR_PRIOR's weight
# on no correction: a record at the problem itself weighs 1, one two octaves away 0.37, so a lone record carries 83%
# of its residual there and 65% from two octaves, and several near ones carry nearly their mean. What the terms
# cannot express (a copy that runs slower on one layout, a tile that spills on one shape family) is then learned
# where it was measured, and nowhere else: far from any measured problem the terms and bins decide alone. The
# constants are the leave-one-seed-out choice of `python -m compare sweep --fit ... --cv` (docs/design/triton.md).
NEIGHBOURS = 10
NEIGHBOUR_DISTANCE = 5.0
NEIGHBOUR_SCALE = 2.0
NEIGHBOUR_PRIOR = 0.2
MAX_NEIGHBOUR_CORRECTION = 1.0


def neighbour_rows(params: Params, key: str) -> list[tuple[float, float, float, float]]:
    """The measured rows of one neighbour_key (empty if none). A parameter file's rows stay text until their key is
    first looked up: parsing every record at load would cost a process's first planned call more than the rest of
    its planning."""
    rows = params.neighbours.get(key)
    if rows and isinstance(rows[0], str):
        rows = params.neighbours[key] = [_neighbour_row(row) for row in rows]
    return rows or []


def neighbour_correction(problem: Problem, plan: Plan, params: Params) -> float:
    """The log factor the measured neighbours of (problem, plan) put on its prediction (0.0: none near)."""
    rows = neighbour_rows(params, neighbour_key(problem, plan))
    if not rows:
        return 0.0
    lm, ln, lk = math.log2(problem.m), math.log2(problem.n), math.log2(problem.k)
    near = sorted(((abs(m - lm) + abs(n - ln) + abs(k - lk), r) for m, n, k, r in rows), key=lambda t: t[0])
    weights = residuals = 0.0
    for d, r in near[:NEIGHBOURS]:
        if d > NEIGHBOUR_DISTANCE:
            break
        w = math.exp(-d / NEIGHBOUR_SCALE)
        weights += w
        residuals += w * max(-MAX_NEIGHBOUR_CORRECTION, min(MAX_NEIGHBOUR_CORRECTION, r))
    return residuals / (weights + NEIGHBOUR_PRIOR)


def predict(problem: Problem, plan: Plan, params: Params | None = None) -> Prediction:
    """The plan's predicted time on the problem: its terms, the total (times the residual correction of its bin,
    where the parameters have one, and that of its measured neighbours, where it has some) and the term that
    decided."""
    params = params or Params()
    t = terms(features(problem, plan, params.gpu), params.of(plan, problem))
    log_corr = params.corrections.get(correction_key(problem, plan), 0.0)
    if params.neighbours:
        log_corr += neighbour_correction(problem, plan, params)
    corr = math.exp(log_corr)
    return Prediction(total(t) * corr, t, decided(t), corr)


def rank(problem: Problem, plans: list[Plan], params: Params | None = None) -> list[tuple[Prediction, Plan]]:
    """The plans by predicted time, fastest first (a planner takes the first it can run)."""
    return sorted(((predict(problem, plan, params), plan) for plan in plans), key=lambda t: t[0].seconds)


# ----------------------------------------------------------------------------------------------------------------
# 6. The fit
# ----------------------------------------------------------------------------------------------------------------
# Parameters are fitted as logarithms (they stay positive) within these bounds, per PARAM_NAMES. mem_eff is a
# share of the copy bandwidth measured on the GPU (`GPU.hbm_gbps`), which HBM's peak exceeds by little: a bound of
# 2 let a kernel's fit stream B past the peak and pay it back in latency terms, and such a fit ranked a pointer
# split-K kernel above a TMA one that ran far faster (docs/design/triton.md, "One row of tiles, and held-out draws").
LOG_BOUNDS = np.log(np.array([[0.02, 2.0], [0.05, 1.15], [0.1, 4.0], [0.05, 100.0], [0.001, 50.0], [1e-5, 1.0],
                              [1e-7, 0.1], [1.0, 4.0]]))
HUBER = 0.1  # |log error| past which a record's weight falls off as 1 / |error| (about 10%)
ITERATIONS = 60
MIN_BIN = 8  # records a bin needs before its median residual becomes a correction
MIN_CORRECTION = 0.02  # smaller median residuals (|log|) are not kept
MAX_CORRECTION = 0.2  # a kept one is clipped to this |log| (x0.82-1.22): a residual fix, never a verdict on its own


@dataclass(frozen=True)
class Record:
    """One measured time of one plan on one problem (a sweep's or tune's candidate record, `from_record`)."""
    problem: Problem
    plan: Plan
    seconds: float
    case: str = ""  # which measured case it belongs to (the records of one case compete for one choice)


def record_fields(problem: Problem, plan: Plan) -> dict:
    """The problem and the plan as a data file's record holds them (`from_record` reads them back)."""
    return {"problem": asdict(problem), "plan": asdict(plan)}


def from_record(d: dict) -> Record:
    """A Record from a data file's candidate record: its "problem" and "plan" (`record_fields`), its "ms" and
    "case". Raises HgemmValueError, KeyError or TypeError on a record without them."""
    return Record(Problem(**d["problem"]), Plan(**d["plan"]), float(d["ms"]) * 1e-3, str(d.get("case", "")))


def _loss_weights(r: np.ndarray) -> np.ndarray:
    a = np.abs(r)
    return np.where(a <= HUBER, 1.0, HUBER / np.maximum(a, 1e-300))


def _fit_kernel(f: Features, y: np.ndarray, start: KernelParams) -> KernelParams:
    """Levenberg-Marquardt on log(total) - log(measured) over log-parameters, reweighted each step (Huber)."""
    theta = np.clip(np.log(start.as_array()), LOG_BOUNDS[:, 0], LOG_BOUNDS[:, 1])

    def residual(th):
        return np.log(total(terms(f, KernelParams(*np.exp(th))))) - y

    r = residual(theta)
    lam, h = 1e-2, 1e-4
    for _ in range(ITERATIONS):
        w = _loss_weights(r)
        jac = np.stack([(residual(theta + h * np.eye(len(theta))[j]) - r) / h for j in range(len(theta))], axis=1)
        jtw = jac.T * w
        a, g = jtw @ jac, jtw @ r
        loss = float(np.sum(w * r * r))
        improved = False
        while lam < 1e8:
            step = np.linalg.solve(a + lam * np.diag(np.diag(a) + 1e-12), -g)
            trial = np.clip(theta + step, LOG_BOUNDS[:, 0], LOG_BOUNDS[:, 1])
            rt = residual(trial)
            if float(np.sum(w * rt * rt)) < loss:
                theta, r, lam, improved = trial, rt, max(lam / 3, 1e-7), True
                break
            lam *= 4
        if not improved or np.max(np.abs(step)) < 1e-6:
            break
    return KernelParams(*(float(x) for x in np.exp(theta)))


def fit(records: list[Record], gpu: GPU = H100, start: Params | None = None) -> Params:
    """Parameters fitted to measured records: per kernel its KernelParams (started from `start`'s, else the
    defaults of its instruction), then the residual corrections (the median log residual of each bin of at least
    MIN_BIN records, where it exceeds MIN_CORRECTION, clipped to MAX_CORRECTION: a bin's median can stand for a
    few shapes whose parameters fit badly, and unclipped it carried them to every problem of the bin, a 16-row
    split-K tile predicted five times faster than its fit on a 2568-row output). `about` holds the fit's quality
    (`quality`)."""
    if not records:
        raise HgemmValueError("cost model: no records to fit")
    start = start or Params(gpu)
    params = Params(gpu, dict(start.kernels))
    by_kernel: dict[str, list[Record]] = {}
    for rec in records:
        by_kernel.setdefault(param_key(rec.plan, rec.problem), []).append(rec)
    residuals: dict[str, list[float]] = {}
    for name, recs in sorted(by_kernel.items()):
        f = stack([features(r.problem, r.plan, gpu) for r in recs])
        y = np.log([r.seconds for r in recs])
        params.kernels[name] = _fit_kernel(f, y, start.of(recs[0].plan, recs[0].problem))
        r = np.log(total(terms(f, params.kernels[name]))) - y
        for rec, x in zip(recs, r):
            residuals.setdefault(correction_key(rec.problem, rec.plan), []).append(-float(x))
    params.corrections = {key: round(float(np.clip(np.median(rs), -MAX_CORRECTION, MAX_CORRECTION)), 4)
                          for key, rs in sorted(residuals.items())
                          if len(rs) >= MIN_BIN and abs(float(np.median(rs))) >= MIN_CORRECTION}
    # the fit's quality is of the terms and bins: with the neighbours each record would correct itself
    params.about = {"records": len(records), "quality": quality(records, params)}
    params.neighbours = neighbours_of(records, params)
    return params


def neighbours_of(records: list[Record], params: Params) -> dict[str, list[tuple[float, float, float, float]]]:
    """Each record's place (log2 M, N, K) and log residual (measured over predicted by the terms and bins), by
    `neighbour_key`, for `neighbour_correction`."""
    out: dict[str, list[tuple[float, float, float, float]]] = {}
    for r in records:
        res = math.log(r.seconds / predict(r.problem, r.plan, params).seconds)
        out.setdefault(neighbour_key(r.problem, r.plan), []).append(
            (round(math.log2(r.problem.m), 4), round(math.log2(r.problem.n), 4), round(math.log2(r.problem.k), 4),
             round(res, 4)))
    return {key: sorted(rows) for key, rows in sorted(out.items())}


def log_errors(records: list[Record], params: Params) -> np.ndarray:
    """log(predicted / measured) of each record."""
    return np.array([math.log(predict(r.problem, r.plan, params).seconds / r.seconds) for r in records])


def _spread(errors: np.ndarray) -> dict:
    a = np.abs(errors)
    return {"records": int(a.size), "median_abs_log_error": round(float(np.median(a)), 4),
            "p90_abs_log_error": round(float(np.percentile(a, 90)), 4)}


def quality(records: list[Record], params: Params) -> dict:
    """Median and p90 |log(predicted / measured)| over all records and per kernel (`param_key`)."""
    err = log_errors(records, params)
    keys = [param_key(r.plan, r.problem) for r in records]
    return {"all": _spread(err),
            "kernels": {name: _spread(err[[i for i, x in enumerate(keys) if x == name]]) for name in sorted(set(keys))}}


def choices(records: list[Record], params: Params) -> list[tuple[str, Record, Record]]:
    """Per case (records sharing `case`): (case, the record the model predicts fastest, the measured fastest)."""
    by_case: dict[str, list[Record]] = {}
    for r in records:
        by_case.setdefault(r.case, []).append(r)
    out = []
    for case, rs in by_case.items():
        fastest = rank(rs[0].problem, [r.plan for r in rs], params)[0][1]
        out.append((case, next(r for r in rs if r.plan == fastest), min(rs, key=lambda r: r.seconds)))
    return out


# ----------------------------------------------------------------------------------------------------------------
# 7. The parameter file
# ----------------------------------------------------------------------------------------------------------------
FORMAT = 1
KIND = "tensorcore_hgemm cost model"


def as_json(params: Params) -> dict:
    return {"format": FORMAT, "kind": KIND, "gpu": asdict(params.gpu),
            "kernels": {name: asdict(p) for name, p in sorted(params.kernels.items())},
            "corrections": dict(sorted(params.corrections.items())), "about": params.about,
            # one line per measured record: "log2(M) log2(N) log2(K) log-residual"
            "neighbours": {key: [row if isinstance(row, str) else " ".join(f"{x:g}" for x in row) for row in rows]
                           for key, rows in sorted(params.neighbours.items())}}


def from_json(data: dict) -> Params:
    """Raises HgemmValueError on anything but a parameter file of this format."""
    if not isinstance(data, dict) or data.get("kind") != KIND or data.get("format") != FORMAT:
        raise HgemmValueError(f"not a {KIND} file of format {FORMAT}")
    try:
        gpu = replace(H100, **data["gpu"])
        kernels = {str(name): KernelParams(**{k: float(v) for k, v in p.items()})
                   for name, p in data["kernels"].items()}
        corrections = {str(k): float(v) for k, v in data.get("corrections", {}).items()}
        neighbours = {str(key): [str(row) for row in rows] for key, rows in data.get("neighbours", {}).items()}
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise HgemmValueError(f"{KIND} file: {type(e).__name__}: {e}") from None
    for rows in neighbours.values():  # a file of another row format fails here (the rest: `_neighbour_row`)
        if rows:
            _neighbour_row(rows[0])
    return Params(gpu, kernels, corrections, dict(data.get("about") or {}), neighbours)


def _neighbour_row(text: str) -> tuple[float, float, float, float]:
    try:
        m, n, k, r = (float(x) for x in text.split())
    except ValueError:
        raise HgemmValueError(f"{KIND} file: a neighbour row must hold 4 numbers, got {text!r}") from None
    return m, n, k, r


def save(params: Params, path) -> None:
    """The parameters as JSON, written atomically (a temporary file in the same folder, then renamed)."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp", dir=folder)
    with os.fdopen(fd, "w") as f:
        json.dump(as_json(params), f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def load(path) -> Params:
    with open(path) as f:
        try:
            data = json.load(f)
        except ValueError as e:
            raise HgemmValueError(f"{path}: not JSON: {e}") from None
    return from_json(data)
