"""Which kernel and configuration a call runs, decided once per kind of call and cached.

A call's key holds everything that decides the kernel and everything Triton specializes the compiled kernel on:
shapes, strides, dtypes, devices, whether each base address is 16-byte aligned, the accumulation, and what the
caller pinned (kernel=, config=, tune=). The first call with a key validates, picks a plan and compiles the one
configuration the plan names; every later one looks the key up (`PLANS`), checks what the key cannot say (an `out=`
overlapping an input) and launches the kept compiled kernels directly (triton_kernels/launch.py): a few
microseconds of Python instead of Triton's binder and descriptor encoding.

Choosing a plan for kernel="auto" on a GPU (`choose`):
- tune="table" (the default): the plan of the call's shape class from the GPU's plan table, else the candidate
  the GPU's fitted cost model predicts fastest (`triton_kernels.planner`), else (no model for the GPU) the nearest
  class's plan or a heuristic (`table_plan`, `triton_kernels.plan_table`). Nothing is timed, synchronized or
  allocated for it, so a first call works inside CUDA-graph capture, on any stream and under torch.compile.
- tune="exact": timed on the call's own operands (`time_auto`), once per kind of call and GPU, the result kept in
  the user's plan cache file (`exact_plan`):
  1. candidates: every record offered on the device whose kernel takes the operands (their dtype among the
     record's `dtypes`), in place or staged (TMA kernels: operands TMA cannot describe copied to 128-byte aligned
     rows first, the copy part of the call), and that its module thinks worth timing for the shape (`worth_timing`:
     split-K only where a 128x128 grid leaves SMs idle; staging only where the copies cost less than half the
     estimated GEMM). And, as more candidates, TMA on copies of the describable operands whose rows start off
     the 32-byte sectors (`rows_off_sectors`): each such operand alone, and both (`sectored_stages`);
  2. each candidate's configurations that fit the problem (`problem_configs`) are timed (`time_ms`: device
     time, L2 flushed, median), whole calls including copies and reductions;
  3. the configurations within 10% of a candidate's fastest (up to 3) are timed again in 3 interleaved rounds and
     ranked by median (`refine`), and so are the candidates' winners within 10% of each other: one timing pass
     ranks a list, but two entries a few percent apart swap places from pass to pass; where those winners run in
     under 0.1 ms on a skinny output, each is also timed back to back (`per_call_ms`: the host's work per call
     included) and ranked by the larger of its device and per-call times;
  4. the fastest (candidate, configuration) becomes the plan. `python -m compare tune` runs the same timing over a
     grid of shapes to make the plan tables.
Under the interpreter, or with config= pinned, nothing is looked up: kernel="auto" takes the last "general" record
of the ladder the operands fit in place (blocked, or TMA persistent on Hopper), with INTERPRETER_CONFIG or the
pinned config.
"""
from __future__ import annotations

import statistics
import threading
from contextlib import contextmanager
from dataclasses import replace

import torch
import triton

from hgemm_common import cost_model as cm
from hgemm_common.errors import HgemmError, HgemmValueError
from hgemm_common.operands import major, meets_alignment, tma_describable
from hgemm_common.plans import LRU, byte_extents, call_key, out_overlaps
from hgemm_common.timing import wall_us
from hgemm_common.validation import DTYPE_NAMES, interpreter_active

from . import plan_table, planner, stage_copy
from .common import Config, cdiv, problem_configs, time_ms
from .contract import optional
from .launch import Direct, Kept, direct_supported, hooks_idle, jit_launch
from .plan_table import Plan, rows_off_sectors
from .variants import BY_KERNEL, VARIANTS, kernel_module

# ----------------------------------------------------------------------------------------------------------------
# Tuning constants
# ----------------------------------------------------------------------------------------------------------------
PLAN_CAPACITY = 512  # distinct kinds of call kept; a model has a few dozen GEMM shapes, a sweep a few hundred
# Staging is timed only when its copies would cost less than this fraction of the GEMM's estimated time (EST_*: an
# H100's cuBLAS rate at 4096^3 and device copy bandwidth, rounded); past it the blocked kernel, reading the operands
# in place, wins on memory traffic alone.
STAGE_MAX_FRACTION = 0.5
EST_TFLOPS, EST_COPY_GBPS = 700.0, 3000.0
# The choice among close candidates: those within REFINE_MARGIN of the fastest (at most REFINE_MAX) are timed again
# in REFINE_ROUNDS interleaved rounds and ranked by their medians (`refine`).
REFINE_MARGIN, REFINE_MAX, REFINE_ROUNDS = 1.10, 3, 3
# Close kernels of a skinny output (a side <= WALL_SKINNY: decode-sized calls, where the host's time per call rivals
# the device's) whose device time is below WALL_BELOW_MS are also timed back to back (WALL_CALLS calls between two
# synchronizations, `per_call_ms`) and ranked by the larger of the two times: there the host's work per call
# (descriptors, buffers, launches) can exceed the device time, and back-to-back calls then pay the host's. Other
# small problems rank by device time: at 1024^3 the TMA kernel beat the blocked kernel on the device for a few
# microseconds more host time per call (docs/design/triton.md): the kernel's speed is the device time, the host's
# share is the launch path's.
WALL_BELOW_MS, WALL_CALLS, WALL_SKINNY = 0.1, 20, 128


class Runner:
    """A plan bound to its kernels: the first call launches through `kernel[grid]` (compiling) and keeps the
    compiled kernels with the call's arguments as templates; later calls allocate the call's workspace (staged
    operands' buffers, `stage_copy`) and scratch tensors (split-K partials) and launch the kept kernels directly
    with the new addresses. A staged plan's kernels are the copy into the buffers of A and B, the GEMM's, and the copy
    of C's buffer back."""

    def __init__(self, plan: Plan, acc_fp16: bool):
        self.plan = plan
        self.acc_fp16 = acc_fp16
        self.module = kernel_module(BY_KERNEL[plan.kernel])
        self.direct: list | None = None  # Direct launchers once compiled; [] = always the JIT path
        self.scratch: list = []  # per scratch tensor, in launch order: (shape, dtype) to allocate, or (get, size)
        self.buffers: stage_copy.Buffers | None = None  # where staged operands go (the first call's layout)
        self.extents: tuple | None = None  # byte extents of (A, B, out) for the overlap check of out=

    def __call__(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
        if self.direct and hooks_idle():
            self.launch(a.device, [a.data_ptr(), b.data_ptr(), c.data_ptr()])
            return
        buffers = self.buffers or stage_copy.Buffers.of(a, b, c, self.plan.stage)
        workspace = torch.empty(buffers.nbytes, dtype=torch.uint8, device=a.device) if buffers.nbytes else None
        (a2, b2, c2), into, back = buffers.staged(a, b, c, workspace)
        specs = into + self.module.launches(a2, b2, c2, self.acc_fp16, self.plan.config) + back
        with torch.cuda.device(a.device) if a.device.type == "cuda" else _nothing():
            compiled = [jit_launch(s) for s in specs]
        if self.direct is None:
            staged = [t for t, o in zip((a2, b2, c2), (a, b, c)) if t is not o]
            self.buffers = buffers
            self._keep(compiled, specs, [a, b, c, *staged])

    def launchable(self) -> bool:
        """Whether `launch` may run this plan now on the caller's own operands: its compiled kernels kept (from the
        first call on) and no launch hook set (a staged plan's copies are among its kernels, their buffers in the
        workspace `launch` allocates)."""
        return bool(self.direct) and hooks_idle()

    def launch(self, device: torch.device, ptrs: list[int]) -> None:
        """The kept kernels on operands at these addresses (A, B, C of the kind of call the plan was made for) on
        the current stream of `device`, with the call's staging buffers and scratch allocated. No checks:
        `__call__`, and callers that keep a plan per kind of call (`compare.nn.HGEMMLinear`), test `launchable()`
        first."""
        dev = device.index
        if torch._C._cuda_getDevice() != dev:
            with torch.cuda.device(dev):
                return self.launch(device, ptrs)
        stream = torch._C._cuda_getCurrentRawStream(dev)
        if self.buffers.nbytes:  # the staged operands' buffers: one workspace, freed once the kernels are queued
            workspace = torch.empty(self.buffers.nbytes, dtype=torch.uint8, device=device)
            base = workspace.data_ptr()
            ptrs = ptrs + [base + slot[0] for slot in self.buffers.slots if slot is not None]
        if self.scratch:  # stays referenced until the kernels are queued (freed after: stream-ordered reuse)
            kept = None if torch._C._cuda_isCurrentStreamCapturing() else stream  # Kept buffers' stream
            scratch = [torch.empty(x, dtype=y, device=device) if isinstance(y, torch.dtype)
                       else x(device, y, kept) for x, y in self.scratch]
            ptrs = ptrs + [t.data_ptr() for t in scratch]
        for launch in self.direct:
            launch(ptrs, stream)

    def _keep(self, compiled: list, specs: list, operands: list) -> None:
        """Set up the direct launches from the first call, or stay on the JIT path for good where they cannot be
        used. Built in locals and published last (scratch first, then direct, which callers test): two threads
        making the same first call both get a consistent runner."""
        if not (direct_supported() and all(compiled)):
            self.direct = []
            return
        operands, scratch = list(operands), []
        for spec in specs:  # tensors other than A, B, C: the call's scratch, allocated anew by each call
            for t in spec.args:
                if isinstance(t, Kept):  # borrowed, not allocated: asked for again on each call
                    operands.append(t.tensor)
                    scratch.append((t.get, t.size))
                elif isinstance(t, torch.Tensor) and not any(t is o for o in operands):
                    if not t.is_contiguous():
                        self.direct = []
                        return
                    operands.append(t)
                    scratch.append((tuple(t.shape), t.dtype))
        with torch.cuda.device(operands[0].device):
            direct = [Direct(k, s, operands) for k, s in zip(compiled, specs)]
        self.scratch = scratch
        self.direct = direct


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


# ----------------------------------------------------------------------------------------------------------------
# Keys and caches
# ----------------------------------------------------------------------------------------------------------------
# key_of(a, b, out, acc, kernel, config): everything that decides the plan and the compiled kernels' specialization
# (Triton specializes integers on == 1 and % 16, pointers on 16-byte alignment: the exact sizes and strides and the
# alignment bits of `hgemm_common.plans.call_key` cover both). The dtypes are in it, so a plan (and the kernels it
# compiled for `*fp16` or `*bf16` pointers and descriptors) only ever serves calls of its own dtype. Raises
# AttributeError / TypeError for non-tensors (the caller then validates, which names the problem). call_key itself,
# not a wrapper: it is on every call's path.
key_of = call_key


PLANS = LRU(PLAN_CAPACITY)  # key_of(...) -> Runner
TUNED = LRU(4 * PLAN_CAPACITY)  # (key facts, kernel, stage) -> (Config, ms): per-kernel timing results
LAST_TUNED: dict[str, Config] = {}  # kernel -> the configuration its most recent timing chose (best_config)
_TUNING = threading.Lock()  # one timing at a time: concurrent timings on one GPU would disturb each other
_KEPT: list[list] = []  # the lists `kept_timings` blocks collect into


@contextmanager
def kept_timings():
    """A list that receives every (kernel, stage, Config, device ms) `_tune` times inside the block: `python -m
    compare tune` keeps them beside its table, the data a cost model is fitted on. Only records; no choice reads
    it."""
    got: list = []
    _KEPT.append(got)
    try:
        yield got
    finally:
        _KEPT[:] = [x for x in _KEPT if x is not got]  # by identity: two empty lists are equal


def clear() -> None:
    """Forget every plan and timing (tests; after changing TRITON_INTERPRET or the kernels)."""
    PLANS.clear()
    TUNED.clear()
    LAST_TUNED.clear()


# ----------------------------------------------------------------------------------------------------------------
# Choosing
# ----------------------------------------------------------------------------------------------------------------
def device_arch(t: torch.Tensor) -> int | None:
    """Compute capability x 10 of the GPU holding t; None for the interpreter (CPU tensors)."""
    if interpreter_active() or t.device.type != "cuda":
        return None
    major_, minor_ = torch.cuda.get_device_capability(t.device)
    return major_ * 10 + minor_


def sm_count(t: torch.Tensor) -> int:
    from .tma_persistent import num_sms
    return num_sms(t.device)


def takes_dtype(v, a: torch.Tensor | None) -> bool:
    """Whether record v takes operands of a's dtype (None: any, as `compare inspect` asks)."""
    return a is None or DTYPE_NAMES.get(a.dtype) in v.dtypes


def kernel_for(arch: int | None, a: torch.Tensor | None = None, b: torch.Tensor | None = None,
               out: torch.Tensor | None = None) -> str:
    """kernel="auto" without timing (the interpreter, a pinned config): the last "general" record of the ladder
    taking the operands' dtype, offered on `arch` (None: the interpreter, which takes the first) whose alignment
    the operands meet in place (None operands: aligned ones, as `compare inspect` assumes)."""
    general = [v for v in VARIANTS if v.general and takes_dtype(v, a)]
    if arch is None:
        return general[0].name
    for v in reversed(general):
        if v.offered_on(arch) and (a is None or meets_alignment(v.alignment, a, b, out)):
            return v.name
    return general[0].name


def staging(alignment: str, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None) -> tuple[bool, bool, bool]:
    """Which of A, B, C a kernel with `alignment` needs copied to aligned buffers ("tma": all three describable,
    C row-major; "tma_ab": A and B only; "none": nothing). out=None: the row-major (M, N) output hgemm allocates."""
    if alignment == "none":
        return (False, False, False)
    c_ok = (b.shape[1] % 8 == 0) if out is None else (tma_describable(out) and major(out) == "N")
    return (not tma_describable(a), not tma_describable(b), alignment == "tma" and not c_ok)


def copy_stage(alignment: str, a: torch.Tensor, b: torch.Tensor,
               out: torch.Tensor | None) -> tuple[bool, bool, bool]:
    """What an explicit kernel= call copies first when its record copies what it cannot read in place
    (misaligned="copy"): the operands `staging` names, and A and B whose rows lie off the 32-byte sectors
    (`rows_off_sectors`) where those copies cost little (`staging_worth_timing`): both where both do, else the
    cheaper one that does (stagings kernel="auto" weighs among its candidates, `sectored_stages`). On the H100 the
    Gluon kernel ran 3000x5000x2000 NN faster on a copy of B (rows 10,000 bytes apart) than in place
    (docs/design/levels.md)."""
    stage = staging(alignment, a, b, out)
    if alignment == "none":
        return stage
    m, k, n = a.shape[0], a.shape[1], b.shape[1]
    worth = [s for s in sectored_stages(stage, a, b) if staging_worth_timing(m, n, k, s)]
    if not worth:
        return stage
    both = sectored_stage(stage, a, b)
    return both if both in worth else min(worth, key=lambda s: staged_elements(m, n, k, s))


def sectored_stage(stage: tuple[bool, bool, bool], a: torch.Tensor, b: torch.Tensor) -> tuple[bool, bool, bool]:
    """`stage` with A and B also copied where they are read in place with rows off the 32-byte sectors."""
    return stage[0] or rows_off_sectors(a), stage[1] or rows_off_sectors(b), stage[2]


def sectored_stages(stage: tuple[bool, bool, bool], a: torch.Tensor,
                    b: torch.Tensor) -> list[tuple[bool, bool, bool]]:
    """Every staging that adds to `stage` copies of A or B read in place with rows off the 32-byte sectors: each
    one alone and both (`sectored_stage`), where both are off. One copy alone can be the cheap one: on 10848 x 792
    x 2104 NN (both off) a copy of B (3 MB) costs a fraction of a copy of A (46 MB), and a tile with B on the
    sectors leaves only A's box rows off them (docs/design/triton.md, "Rows off the 32-byte sectors")."""
    both = sectored_stage(stage, a, b)
    if both == stage:
        return []
    one = [(both[0], stage[1], stage[2]), (stage[0], both[1], stage[2])]
    return [s for s in one if s not in (stage, both)] + [both]


def staged_elements(m: int, n: int, k: int, stage: tuple[bool, bool, bool]) -> int:
    """Elements of A (m x k), B (k x n) and C (m x n) a staging copies."""
    return stage[0] * m * k + stage[1] * k * n + stage[2] * m * n


def staging_worth_timing(m: int, n: int, k: int, stage: tuple[bool, bool, bool]) -> bool:
    """Whether the copies of a staged call (read + write of each staged matrix) cost less than STAGE_MAX_FRACTION
    of the GEMM's estimated time."""
    copy_s = 2 * 2 * staged_elements(m, n, k, stage) / (EST_COPY_GBPS * 1e9)
    gemm_s = 2.0 * m * n * k / (EST_TFLOPS * 1e12)
    return copy_s <= STAGE_MAX_FRACTION * gemm_s


def candidates(m: int, n: int, k: int, arch: int, sms: int, a: torch.Tensor, b: torch.Tensor,
               out: torch.Tensor | None, every_staging: bool = False) -> list[tuple[str, tuple[bool, bool, bool]]]:
    """(kernel, staging) pairs kernel="auto" times for this problem (see the module's header). every_staging: the
    cost model's set (`python -m compare sweep` times it all): also the staged ones whose copies
    `staging_worth_timing` judges too dear to time (the model prices the copies itself), and each kernel where its
    module's `worth_scoring` (default `worth_timing`) holds."""
    offered = [v for v in VARIANTS if v.offered_on(arch) and takes_dtype(v, a)]
    stages = {v.name: staging(v.alignment, a, b, out) for v in offered}
    tma_in_place = any(v.alignment != "none" and not any(stages[v.name]) for v in offered)
    out_ = []
    for v in offered:
        kernel, stage = v.name, stages[v.name]
        module = kernel_module(v)
        worth = (optional(module, "worth_scoring") if every_staging else None) or module.worth_timing
        if not worth(m, n, k, sms, tma_in_place):
            continue
        if not any(stage) or every_staging or staging_worth_timing(m, n, k, stage):
            out_.append((kernel, stage))
        if v.alignment != "none":  # also describable A / B whose rows lie off the 32-byte sectors, copied
            out_ += [(kernel, sectored) for sectored in sectored_stages(stage, a, b)
                     if every_staging or staging_worth_timing(m, n, k, sectored)]
    return out_ or [(kernel_for(arch, a, b, out), (False, False, False))]


def _tune(kernel: str, stage: tuple, facts: tuple, a, b, c, acc_fp16: bool) -> tuple[Config, float]:
    """The fastest configuration of one (kernel, staging) on these operands, timed whole (copies and
    reductions included); configurations that do not fit the device (shared memory, registers) are skipped."""
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import OutOfResources, PTXASError

    hit = TUNED.get((facts, kernel, stage))
    if hit is not None:
        return hit
    m, k = a.shape
    n = b.shape[1]
    timed = []  # (ms, cfg, runner)
    for cfg in problem_configs(kernel_module(BY_KERNEL[kernel]), m, n, k, sm_count(a)):
        run = Runner(Plan(kernel, cfg, stage), acc_fp16)
        try:
            timed.append((time_ms(lambda: run(a, b, c)), cfg, run))
        except (OutOfResources, PTXASError, CompilationError):
            continue
        for kept in _KEPT:
            kept.append((kernel, stage, cfg, timed[-1][0]))
    if not timed:
        raise HgemmError(f"hgemm(kernel={kernel!r}): no configuration of this kernel runs on this device")
    close = shortlist([t[0] for t in timed])
    ms = refine([timed[i][2] for i in close], a, b, c) if len(close) > 1 else [timed[close[0]][0]]
    best = min(zip(ms, close), key=lambda t: t[0])
    LAST_TUNED[kernel] = timed[best[1]][1]
    return TUNED.put((facts, kernel, stage), (timed[best[1]][1], best[0]))


def shortlist(ms: list[float]) -> list[int]:
    """Indices of the timings within REFINE_MARGIN of the fastest, fastest first, at most REFINE_MAX of them."""
    order = sorted(range(len(ms)), key=ms.__getitem__)
    return [i for i in order if ms[i] <= REFINE_MARGIN * ms[order[0]]][:REFINE_MAX]


def refine(runners: list, a, b, c) -> list[float]:
    """Median device times of a few close candidates, timed again in REFINE_ROUNDS interleaved rounds: one pass of
    `time_ms` each ranks a list, but two candidates a few percent apart swap places from pass to pass (auto's
    plans for 1024^3 and 8192x8192x1024 differed between two H100 runs when one pass decided)."""
    times = [[] for _ in runners]
    for _ in range(REFINE_ROUNDS):
        for ts, run in zip(times, runners):
            ts.append(time_ms(lambda: run(a, b, c)))
    return [statistics.median(ts) for ts in times]


def per_call_ms(runners: list, a, b, c) -> list[float]:
    """Wall time per call of each runner, WALL_CALLS calls back to back between two synchronizations (`wall_us`, as
    the harness measures it: host work included, L2 warm), median of REFINE_ROUNDS interleaved rounds; zeros off the
    GPU (the interpreter's host time says nothing about a GPU's). The second half of the ranking of close kernels
    on small problems: at 128x4096x4096 the TMA split-K kernel and the pointer one were within the device-time
    margin, but an operator call on the TMA one cost half as much again."""
    if a.device.type != "cuda":
        return [0.0] * len(runners)
    times = [[] for _ in runners]
    for _ in range(REFINE_ROUNDS):
        for ts, run in zip(times, runners):
            ts.append(wall_us(lambda: run(a, b, c), WALL_CALLS) / 1e3)
    return [statistics.median(ts) for ts in times]


def time_auto(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, out: torch.Tensor | None, acc: str, facts: tuple,
              arch: int) -> tuple[Plan, list[tuple[str, tuple, Config, float]]]:
    """kernel="auto" by timing on these operands (tune="exact", and `python -m compare tune`): every candidate
    (kernel, staging) tuned (`_tune`), close ones timed again (`refine`, `per_call_ms`); the fastest plan and every
    candidate's (kernel, stage, best configuration, device ms)."""
    m, k = a.shape
    n = b.shape[1]
    with _TUNING:
        timed = [(kern, st, *_tune(kern, st, facts, a, b, c, acc == "fp16"))
                 for kern, st in candidates(m, n, k, arch, sm_count(a), a, b, out)]
        every = list(timed)
        rank = [t[3] for t in timed]
        close = shortlist(rank)
        if len(close) > 1:  # kernels whose best configurations are close: timed again, interleaved
            runners = [Runner(Plan(timed[i][0], timed[i][2], timed[i][1]), acc == "fp16") for i in close]
            ms = refine(runners, a, b, c)
            timed = [(*timed[i][:3], t) for i, t in zip(close, ms)]
            rank = ms
            if min(ms) < WALL_BELOW_MS and min(m, n) <= WALL_SKINNY:  # back to back, the host's time may rule
                rank = [max(t, w) for t, w in zip(ms, per_call_ms(runners, a, b, c))]
    best = min(range(len(timed)), key=rank.__getitem__)
    kern, st, cfg, ms = timed[best]
    return Plan(kern, cfg, st, ms, source="exact"), every


def usable(plan: Plan, arch: int, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None) -> bool:
    """Whether a stored plan can run these operands: its kernel offered on the GPU and taking the dtype, every
    operand its kernel cannot read in place staged, split-K slices at least one K tile deep, and a TMA tile that runs
    swapped only where it is offered, on an M that one row of its tiles covers (`tma_persistent.covers_m`: a
    nearest class's swapped tile would read B once per 16 rows of a taller problem)."""
    v = BY_KERNEL.get(plan.kernel)
    if v is None or not v.offered_on(arch) or not takes_dtype(v, a):
        return False
    if plan.kernel in cm.SWAP_TILE_KERNELS:  # (the Gluon kernel's swapped tiles are the TMA kernel's)
        from . import tma_persistent

        if tma_persistent.swapped(plan.config) and not tma_persistent.covers_m(plan.config, a.shape[0]):
            return False
    if any(need and not has for need, has in zip(staging(v.alignment, a, b, out), plan.stage)):
        return False
    return plan.config.split_k == 1 or cdiv(a.shape[1], plan.config.split_k) >= plan.config.block_k


def model_candidates(m: int, n: int, k: int, arch: int, sms: int, a: torch.Tensor, b: torch.Tensor,
                     out: torch.Tensor | None,
                     fitted: frozenset | None = None) -> list[tuple[str, tuple[bool, bool, bool]]]:
    """The (kernel, staging) pairs the cost model scores: those tune="exact" times (`candidates`), each TMA
    kernel's needed staging even where tune="exact" judges its copies too dear to time (the model prices them), and
    each TMA kernel's copies of A or B whose rows lie off the 32-byte sectors (`sectored_stages`: the model prices the
    copy and the off-sector reads it saves, `cost_model`'s sector term). And kernels tune="exact" never times whose
    module marks them MODEL_CANDIDATE (the Gluon kernel), with the same stagings. `fitted`: the kernels the
    GPU's model has parameters for; where given, only those are scored (a kernel the fit has not seen, such as a
    new one the sweep times through its `worth_scoring` before any refit, would be predicted with default
    parameters, and kernel="auto" must not pick it on a guess). None: every candidate, no MODEL_CANDIDATE kernel.
    A kernel whose module gives a SWEEP_ONLY reason is never scored."""
    pairs = [(kern, stage) for kern, stage in candidates(m, n, k, arch, sms, a, b, out, every_staging=True)
             if (fitted is None or kern in fitted) and optional(kernel_module(BY_KERNEL[kern]), "SWEEP_ONLY") is None]
    for v in VARIANTS:
        if fitted is not None and v.name in fitted and v.offered_on(arch) and takes_dtype(v, a) \
                and getattr(kernel_module(v), "MODEL_CANDIDATE", False) and v.name not in (p[0] for p in pairs):
            need = staging(v.alignment, a, b, out)
            pairs += [(v.name, need)] + [(v.name, s) for s in (sectored_stages(need, a, b)
                                                                if v.alignment != "none" else [])]
    return pairs


# The kernels a named kernel hands problems to where the model predicts them faster, as wgmma_persistent hands a few
# rows against a B off the 16-byte grid to mma_stream: the Gluon kernel to the Gluon level's bandwidth path, which
# reads the operands in place (no staging copies). Each only where the fit has parameters for it.
HANDS_OFF = {"gluon_persistent": ("gluon_stream",)}


def hands_off(kernel: str, m: int) -> tuple[str, ...]:
    """The kernels of HANDS_OFF[kernel] offered here that take an M-row problem: M within the module's MAX_M, the
    rows the sweep times them at (so the fit never extrapolates a hand-off past its records)."""
    return tuple(to for to in HANDS_OFF.get(kernel, ()) if to in BY_KERNEL and m <= kernel_module(BY_KERNEL[to]).MAX_M)


def model_plan(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None, acc: str, arch: int,
               sms: int, params: cm.Params | None = None, kernel: str = "auto",
               stage: tuple[bool, bool, bool] = (False, False, False)) -> Plan | None:
    """The candidate (`model_candidates` x `problem_configs`, less the wide tiles it has not measured) that the
    GPU's fitted cost model (or `params`: another parameter file's, loaded) predicts fastest among those that can
    run these operands (`planner.ranked`, `usable`); None where the GPU has no model. kernel="auto" weighs each
    kernel's listed configurations only (`ranked`'s listed_only: a choice the model extrapolates to must not
    displace one it has measured); an explicit `kernel` its own configurations, its rule's choice among them, with
    the operands it copies first (`stage`), and the kernels it hands problems to (`hands_off`, reading in place),
    each only where the fit has parameters of its own for it (`cost_model.param_key`), and None where none has.
    Nothing is timed, synchronized or allocated."""
    params = params if params is not None else planner.params_for(arch, sms)
    if params is None:
        return None
    m, k = a.shape
    n = b.shape[1]
    fitted = planner.fitted_kernels(params)
    if kernel != "auto":
        if kernel not in fitted:
            return None
        pairs = [(kernel, tuple(stage))] + [(to, (False, False, False)) for to in hands_off(kernel, m)
                                            if to in fitted]
    else:
        pairs = model_candidates(m, n, k, arch, sms, a, b, out, fitted)
    problem = planner.problem_of(a, b, out, acc)
    for _, plan in planner.ranked(problem, pairs, sms, params, kernel == "auto"):
        if kernel != "auto" and cm.param_key(planner.model_plan_of(plan.kernel, plan.config, plan.stage, k),
                                             problem) not in params.kernels:
            continue  # a variant the fit has not seen (triton_realign on aligned operands): a guess, not a plan
        if usable(plan, arch, a, b, out):
            return plan
    return None


TABLE_FILL_TOLERANCE = 0.1  # how much less of the SMs' rounds a table plan may fill here than where it was timed


def round_fill(plan: Plan, problem: cm.Problem, sms: int) -> float:
    """The share of the SMs' time over a plan's rounds that does the problem's work: its flops over the k-iterations
    of its tiles on the busiest SM times the SMs (the cost model's `features`, so a tile past M or N, a last round
    that leaves SMs idle, a kernel's K slices or residue planes all count as the model counts them)."""
    plan_ = planner.model_plan_of(plan.kernel, plan.config, plan.stage, problem.k)
    f = cm.features(problem, plan_, replace(cm.H100, sms=sms))
    return f.flops / (f.steps * f.tile_flops * sms)


def table_holds(entry: plan_table.Entry, m: int, n: int, k: int, sms: int, plan: Plan | None = None) -> bool:
    """Whether a table entry's plan (or `plan`, its configuration of one kernel) stands for this call as it is: the
    call is one of the shapes the tuner timed for the class, or the plan fills the SMs' rounds here within
    TABLE_FILL_TOLERANCE of how it filled them at the best of those shapes (an entry that names none holds). A class
    spans a factor of two in each dimension: the 128 x 256 plan timed at 4096^3 (512 tiles, four nearly full rounds
    of 132 SMs) runs 2304x2560x4096 in 180 tiles, two rounds a third idle, where the cost model scores the call
    instead."""
    if not entry.shapes or f"{m}x{n}x{k}" in entry.shapes:
        return True
    c = entry.cls

    def fill(m_: int, n_: int, k_: int) -> float:
        return round_fill(plan or entry.plan, cm.Problem(m_, n_, k_, c.layout, c.align, c.dtype, c.acc), sms)

    timed = max(fill(*(int(x) for x in s.split("x"))) for s in entry.shapes)  # checked "MxNxK" at load
    return fill(m, n, k) >= timed - TABLE_FILL_TOLERANCE


def table_plan(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None, acc: str, kernel: str, arch: int,
               sms: int, stage: tuple[bool, bool, bool] = (False, False, False),
               params: cm.Params | None = None) -> Plan:
    """kernel="auto": the GPU's table entry of the call's shape class (`plan_table`) where it holds for the call
    (`table_holds`); else the candidate its cost model predicts fastest (`model_plan`); else, on a GPU with no
    model, the class's or the nearest class's entry, or the heuristic. For an explicit kernel= the same steps
    within that kernel's configurations, with `stage` (the operands it copies first): the one the class's timing
    chose where it holds, the one the model predicts fastest, the nearest class's, the kernel's rule (heuristic).
    `params`: a cost model's parameters to plan with instead of the GPU's file (`compare.registry.model_entry`).
    Nothing is timed."""
    m, k = a.shape
    n = b.shape[1]
    cls = plan_table.shape_class(a, b, out, DTYPE_NAMES[a.dtype], acc)
    table = plan_table.table_for(arch, sms)
    entry, distance = table.lookup(cls) if table is not None else (None, -1)
    source = "table" if distance == 0 else "nearest"
    if kernel == "auto":
        if entry is not None and distance == 0 and usable(entry.plan, arch, a, b, out) \
                and table_holds(entry, m, n, k, sms):
            return replace(entry.plan, ms=None, source=source)
        modelled = model_plan(a, b, out, acc, arch, sms, params)
        if modelled is not None:
            return modelled
        if entry is not None and usable(entry.plan, arch, a, b, out):
            return replace(entry.plan, ms=None, source=source)
        plan = plan_table.heuristic(m, n, k, arch, sms, cls.align)
        if usable(plan, arch, a, b, out):
            return plan
        kernel = kernel_for(arch, a, b, out)  # a general kernel the operands fit in place
        return Plan(kernel, plan_table.heuristic_config(kernel, m, n, k, sms), source="heuristic")
    cfg = entry.kernels.get(kernel) if entry is not None else None
    timed = cfg is not None and usable(Plan(kernel, cfg, stage), arch, a, b, out)
    if timed and distance == 0 and table_holds(entry, m, n, k, sms, Plan(kernel, cfg, stage)):
        return Plan(kernel, cfg, stage, source=source)
    modelled = model_plan(a, b, out, acc, arch, sms, params, kernel, stage)
    if modelled is not None:
        return modelled
    if not timed:
        cfg, source = plan_table.heuristic_config(kernel, m, n, k, sms), "heuristic"
    return Plan(kernel, cfg, stage, source=source)


def exact_plan(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, out: torch.Tensor | None, acc: str, kernel: str,
               facts: tuple, arch: int, stage: tuple[bool, bool, bool] = (False, False, False)) -> Plan:
    """tune="exact": the plan timed for exactly this kind of call, from the user's cache file when a process of the
    same GPU, versions and kernel sources timed it before, else timed now and stored there."""
    ctx = plan_table.context(a.device)
    key = plan_table.exact_key(a, b, out, acc, kernel)
    cache = plan_table.exact_cache()
    hit = cache.get(ctx, key)
    if hit is not None and (kernel in ("auto", hit.kernel)) and usable(hit, arch, a, b, out):
        return hit
    if kernel == "auto":
        plan = time_auto(a, b, c, out, acc, facts, arch)[0]
    else:
        with _TUNING:
            cfg, ms = _tune(kernel, stage, facts, a, b, c, acc == "fp16")
        plan = Plan(kernel, cfg, stage, ms=ms, source="exact")
    cache.put(ctx, key, plan)
    return plan


def choose(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, out: torch.Tensor | None, acc: str, kernel: str,
           config: Config | None, facts: tuple, tune: str | None = None) -> Plan:
    """The plan of a new kind of call (validated; c is the output the call writes, where exact timing may write).
    tune: "table" (`table_plan`: the table, the cost model, the nearest class or the heuristic; nothing timed),
    "exact" (timed on these operands, cached in the user's plan cache), None: TENSORCORE_HGEMM_TUNE's value, else
    "table"."""
    arch = device_arch(a)
    stage = (False, False, False)  # an explicit kernel's staged operands (kernel="auto" plans its own)
    if kernel == "auto":
        if arch is None or config is not None:
            kernel = kernel_for(arch, a, b, out)
            module = kernel_module(BY_KERNEL[kernel])
            return Plan(kernel, optional(module, "check_config")(config) if config else module.INTERPRETER_CONFIG,
                        source="pinned" if config else "interpreter")
    else:
        v = BY_KERNEL[kernel]
        if v.misaligned == "copy":  # a record that copies what it cannot read in place (alignment "none": nothing)
            stage = copy_stage(v.alignment, a, b, out)
        elif not meets_alignment(v.alignment, a, b, out):
            raise HgemmValueError(f"hgemm(kernel={kernel!r}): TMA needs unit inner strides, 16-byte aligned bases and "
                                  "leading dimensions that are multiples of 8 for A, B"
                                  + (" and a row-major out" if v.alignment == "tma" else "") + "; use kernel='auto'")
        if config is not None:  # the kernel's own ranges where its module has them (gemv: one row per program)
            return Plan(kernel, optional(kernel_module(v), "check_config")(config), stage, source="pinned")
        if arch is None:
            return Plan(kernel, kernel_module(v).INTERPRETER_CONFIG, stage, source="interpreter")
    capturing = a.device.type == "cuda" and torch.cuda.is_current_stream_capturing()
    if (tune or plan_table.default_tune()) == "exact" and not capturing:  # (capture: nothing may be timed)
        return exact_plan(a, b, c, out, acc, kernel, facts, arch, stage)
    return table_plan(a, b, out, acc, kernel, arch, sm_count(a), stage)


def runner_for(key: tuple, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, out: torch.Tensor | None,
               acc: str, kernel: str, config: Config | None, tune: str | None = None) -> Runner:
    """The cached runner of a new key: choose its plan (the caller has validated; c is where timing may write: out,
    or a tensor of the output's shape) and keep it. The runner compiles on its first call, from the operands of
    that call."""
    facts = key[:-3]  # the call's facts without (kernel, config, tune): what per-kernel timings are kept under
    r = Runner(choose(a, b, c, out, acc, kernel, config, facts, tune), acc == "fp16")
    r.extents = byte_extents(a, b, out) if out is not None else None
    return PLANS.put(key, r)


def overlaps(r: Runner, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> bool:
    """validate()'s overlap test of out= against A and B, from the extents the runner keeps."""
    return out_overlaps(r.extents, a, b, out)
