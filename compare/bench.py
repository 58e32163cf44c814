"""`python -m compare bench`: side-by-side timing, medians of CUDA-event timings with L2 flushed (BENCHMARKING.md).

For each shape every selected kernel is first checked on the very inputs it will be timed on; a kernel that
fails is reported as failed and not timed. The timing is per call and interleaved: each pass calls every kernel
once, the first one rotating from pass to pass, each call behind an L2 flush and between two CUDA events, the GPU
queue kept full by a sleep ahead of the passes, so clock and power drift, a clock ramp or an idle gap hit all the
kernels alike. Each kernel's median is reported with its ratio to torch.matmul.
"""
from __future__ import annotations

import csv
import json
import math
import random
import statistics
import time
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Callable

import torch

from hgemm_common.errors import HgemmValueError
from hgemm_common.timing import L2Flush, wall_us

from .reference import LAYOUTS, compare, error_bound, make_inputs, reference
from .registry import BASELINE, Kernel

SUITES = {
    "square": [(s, s, s) for s in (1024, 2048, 4096, 8192, 16384)],
    "llm": [(16, 4096, 4096), (128, 8192, 8192), (4096, 4096, 1024), (8192, 28672, 4096), (8192, 8192, 1024)],
    # decode and prefill-chunk M at N, K of 4096-14336 (BENCHMARKING.md), then the two degenerate ones
    "skinny": [(1, 4096, 4096), (16, 4096, 4096), (64, 8192, 8192), (128, 4096, 4096), (512, 4096, 14336),
               (4096, 16, 4096), (8192, 8192, 64)],
    # no dimension of the second a multiple of 8: no TMA descriptor can describe A, B or C in place
    "odd": [(3000, 5000, 2000), (3001, 4999, 2003)],
}
SUITES["default"] = SUITES["square"] + SUITES["llm"] + SUITES["odd"]
# The main job's suite (python -m compare, for the recommended entries): squares, a decode and a prefill-sized
# projection, LLM shapes, both odd shapes, M = 1, and a small output with a long K.
SUITES["main"] = [(1024, 1024, 1024), (4096, 4096, 4096), (8192, 8192, 8192), (1, 4096, 4096), (16, 4096, 4096),
                  (128, 8192, 8192), (4096, 4096, 1024), (8192, 28672, 4096), (3000, 5000, 2000), (3001, 4999, 2003),
                  (256, 256, 65536)]
# The suite issue 17 is judged on: square + LLM + skinny M in {1, 16, 64, 128, 512} + odd.
SUITES["mixed"] = SUITES["default"] + [s for s in SUITES["skinny"][:5] if s not in SUITES["default"]]
SUITES["all"] = SUITES["default"] + [s for s in SUITES["skinny"] if s not in SUITES["default"]]
# The sparse kind's suite (`bench --kind sparse`): the squares the issue judges, a large LLM projection, a decode
# shape and the odd shape.
SUITES["sparse"] = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 28672, 4096), (16, 4096, 4096), (3000, 5000, 2000)]
# bf16 beside fp16 (`bench --dtype bf16`, the main job's bf16 section): the squares the ratios are compared at, an LLM
# decode and projection shape, both odd shapes.
SUITES["bf16"] = [(4096, 4096, 4096), (8192, 8192, 8192), (16, 4096, 4096), (128, 8192, 8192), (3000, 5000, 2000),
                  (3001, 4999, 2003)]
# Issue 39's suites. An entry is (M, N, K), timed in `bench --layout` (NN unless given), or (M, N, K, layout) for a
# shape whose layout is part of what it measures, kept unless `--layout` is given (`with_layouts`).
# The three GEMMs of an nn.Linear (T tokens, I in-features, O out-features) as autograd runs them: forward
# Y = X W^T is T x O x I in NT (W^T is a view of the row-major weight), dX = dY W is T x I x O in NN, and
# dW = dY^T X is O x I x T in TN (K is the token count). Linears of a 4096-wide and an 8192-wide model: attention
# projections, the MLP's up and down, at prefill-chunk to full-batch token counts.
TRAINING_LINEARS = [(512, 4096, 4096), (4096, 4096, 14336), (4096, 14336, 4096), (16384, 8192, 8192)]  # (T, I, O)


def linear_gemms(t: int, i: int, o: int) -> list[tuple[int, int, int, str]]:
    """The forward, dX and dW GEMMs of nn.Linear(i, o) over t tokens, as (M, N, K, layout)."""
    return [(t, o, i, "NT"), (t, i, o, "NN"), (o, i, t, "TN")]


SUITES["training"] = [g for lin in TRAINING_LINEARS for g in linear_gemms(*lin)]
# Small outputs over very long reductions: a narrow layer's or a LoRA adapter's weight gradient over many tokens.
SUITES["small_out_large_k"] = [(256, 256, 65536), (128, 128, 131072), (512, 512, 16384), (256, 1024, 32768)]
# Prefill-chunk and small-batch M at the N, K of a 4096-wide model with a 14336-wide MLP.
SUITES["m_sweep"] = [(m, n, k) for m in (64, 128, 256) for n, k in ((4096, 4096), (14336, 4096), (4096, 14336))]
# Layouts the sparse kind takes: A is the pruned weight, row-major (compressed along K); B either way.
SPARSE_LAYOUTS = ("NN", "NT")


# The random suite (`bench --suite random --seed S --count N`), shapes nobody chose: M log-uniform in RANDOM_M, N and
# K log-uniform in RANDOM_NK, every other draw rounded to multiples of 8, problems above RANDOM_MAX_MACS
# multiply-adds drawn again (0.27 TFLOP: under a millisecond at the H100's dense fp16 rate, so 200 shapes fit a
# short run); the layout of each shape drawn from the given ones (all four by default).
RANDOM_M = (1, 16384)
RANDOM_NK = (256, 32768)
RANDOM_MAX_MACS = 2**37
# The smallest bound a narrowed draw takes (`random_shapes(max_macs=)`): a rounded draw is at least 8 x 256 x 256 =
# 2**19 multiply-adds, and near that bound hardly any draw is accepted.
SMALLEST_MAX_MACS = 2**24
RANDOM_COUNT = 100  # shapes when --count is not given
# Timed GPU ms per kernel and shape in the random suite, flushes included: sized so that 200 shapes of 4 kernels,
# torch.matmul and its A/A control stay well inside 10 minutes, while a call shorter than the flush (256 MB written
# and read back at HBM speed, a fraction of a millisecond) still gets about a hundred samples.
RANDOM_BUDGET_MS = 25.0


def _log_uniform(rng: random.Random, lo: int, hi: int) -> int:
    return min(hi, max(lo, math.floor(math.exp(math.log(lo) + rng.random() * math.log(hi / lo)) + 0.5)))


def round8(x: int) -> int:
    """x to the nearest multiple of 8 (halves up), at least 8."""
    return round_to(x, 8)


def round_to(x: int, step: int) -> int:
    """x to the nearest multiple of step (halves up), at least step."""
    return max(step, (x + step // 2) // step * step)


NK_MULTIPLES = (8, 16, 32, 64, 128, 256)  # what a narrowed draw may round N and K to (`random_shapes(nk_multiple=)`)


def random_shapes(seed: int, count: int, layouts=LAYOUTS, max_m: int | None = None,
                  max_macs: int | None = None, nk_multiple: int = 8) -> list[tuple[int, int, int, str]]:
    """The random suite: `count` shapes (M, N, K, layout) from `seed`, the same for the same seed on any machine
    (a generator of its own, seeded by the integer, drawing only with random(), whose sequence Python keeps across
    versions). Shape i is rounded to multiples of 8 when i is even and left as drawn when odd, so a prefix of a
    longer draw is a shorter one; its layout is drawn from `layouts` (the same shapes whatever layouts are
    given). `max_m` narrows M's range to 1..max_m (a sweep's draw aimed at the kernels of skinny problems), and
    `max_macs` redraws problems above that many multiply-adds (one aimed at tiny problems: 2**30 keeps those under
    about 2 GFLOP), and `nk_multiple` (a power of two from 8 to 256) rounds the rounded shapes' N and K to multiples
    of it (64: one aimed at whole 64-wide boxes, where wgmma_persistent's rule plans); the random suite itself never
    narrows any of them."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise HgemmValueError(f"the random suite's seed must be an integer >= 0, got {seed!r}")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise HgemmValueError(f"the random suite's count must be an integer >= 1, got {count!r}")
    layouts = list(layouts)
    bad = [lay for lay in layouts if lay not in LAYOUTS]
    if not layouts or bad:
        raise HgemmValueError(f"layouts must be among {', '.join(LAYOUTS)}, got {', '.join(layouts) or 'none'}")
    if max_m is not None and (isinstance(max_m, bool) or not isinstance(max_m, int)
                              or not RANDOM_M[0] <= max_m <= RANDOM_M[1]):
        raise HgemmValueError(f"the draw's largest M must be an integer in {RANDOM_M[0]}..{RANDOM_M[1]}, got {max_m!r}")
    if max_macs is not None and (isinstance(max_macs, bool) or not isinstance(max_macs, int)
                                 or not SMALLEST_MAX_MACS <= max_macs <= RANDOM_MAX_MACS):
        raise HgemmValueError(f"the draw's largest problem must be an integer in 2**24..2**37 multiply-adds, got "
                              f"{max_macs!r}")
    if isinstance(nk_multiple, bool) or nk_multiple not in NK_MULTIPLES:
        raise HgemmValueError(f"the draw's N and K multiple must be one of {', '.join(map(str, NK_MULTIPLES))}, got "
                              f"{nk_multiple!r}")
    m_range = RANDOM_M if max_m is None else (RANDOM_M[0], max_m)
    macs = RANDOM_MAX_MACS if max_macs is None else max_macs
    rng = random.Random(seed)
    shapes = []
    for i in range(count):
        while True:
            m, n, k = _log_uniform(rng, *m_range), _log_uniform(rng, *RANDOM_NK), _log_uniform(rng, *RANDOM_NK)
            if i % 2 == 0:
                m, n, k = round8(m), round_to(n, nk_multiple), round_to(k, nk_multiple)
            if m * n * k <= macs:
                break
        shapes.append((m, n, k, layouts[min(len(layouts) - 1, int(rng.random() * len(layouts)))]))
    return shapes


def parse_layouts(text: str) -> list[str]:
    """"NN,NT" -> ["NN", "NT"] (bench --layout), each one of LAYOUTS."""
    layouts = list(dict.fromkeys(x.strip().upper() for x in text.split(",")))
    bad = [x for x in layouts if x not in LAYOUTS]
    if bad:
        raise HgemmValueError(f"--layout takes {', '.join(LAYOUTS)} or a comma list of them, got {text!r}")
    return layouts


# The A/A control: torch.matmul timed a second time in every bench, as a row of its own beside the baseline,
# interleaved like every kernel. Its ratio to the baseline is the noise of the run's ratios: the run's geomean of it
# must lie within 1 +- AA_BAND for the run to resolve 2%. One shape's ratio rests on one median against another,
# from a few tens to a few hundred samples (the random suite's small budget gives the fewest), so it scatters more
# than the geomean over many shapes does; AA_SHAPE_BAND flags only a shape whose timing was disturbed (a clock
# change, another process on the GPU). On calls of a few microseconds the band widens to two ticks of the event
# clock (cudaEventElapsedTime's documented resolution is about 0.5 us): a median read off that clock cannot resolve
# less.
CONTROL = "torch.matmul (A/A)"
AA_BAND = 0.02
AA_SHAPE_BAND = 0.05
EVENT_RESOLUTION_MS = 0.5e-3


def shape_band(median_ms: float) -> float:
    """How far one shape's A/A ratio may leave 1.0: AA_SHAPE_BAND, or two event-clock ticks over the median."""
    return max(AA_SHAPE_BAND, 2 * EVENT_RESOLUTION_MS / median_ms)


def with_control(kernels: list[Kernel]) -> list[Kernel]:
    """kernels with the A/A control (the baseline's entry again, named CONTROL) right after the baseline; unchanged
    when the baseline is not among them or the control already is."""
    if any(x.name == CONTROL for x in kernels):
        return list(kernels)
    out = []
    for kern in kernels:
        out.append(kern)
        if kern.name == BASELINE.name:
            out.append(replace(kern, name=CONTROL))
    return out


@dataclass
class BenchRow:
    kernel: str
    family: str
    acc: str
    config: str
    m: int
    n: int
    k: int
    layout: str
    status: str  # "ok", "failed check", "error", "skipped"
    median_ms: float | None = None
    tflops: float | None = None
    ratio_to_torch: float | None = None
    pct_of_ceiling: float | None = None  # % of the measured instruction ceiling of the path the kernel uses
    samples: int = 0
    spread_pct: float | None = None  # (p90 - p10) / median
    detail: str = ""
    # Wall time per call, back to back from Python, no GPU sleep ahead (what a model's forward pass pays:
    # validation, dispatch, descriptors, launch, and the kernel), and torch.matmul's over it (> 1: faster).
    wall_us: float | None = None
    wall_ratio_to_torch: float | None = None
    hbm_pct: float | None = None  # bytes A + B + C once over the device time, % of the measured copy bandwidth
    kind: str = "dense"  # problem kind: "sparse" rows share one 2:4-pruned A (TFLOPS count the dense 2 M N K)
    dtype: str = "fp16"  # of A, B and C; torch.matmul (the ratios' base) runs the same dtype

    def as_dict(self) -> dict:
        return asdict(self)


def parse_shapes(text: str) -> list[tuple]:
    """"16x4096x4096,512x512x16384:TN" -> [(16, 4096, 4096), (512, 512, 16384, "TN")]: a layout after a colon
    travels with its shape, as in the suites."""
    shapes = []
    for part in text.split(","):
        dims_text, _, layout = part.strip().partition(":")
        dims = dims_text.lower().split("x")
        if len(dims) != 3 or not all(d.isdigit() for d in dims):
            raise HgemmValueError(f"shape {part!r} is not of the form MxNxK or MxNxK:LAYOUT")
        if layout and layout.upper() not in LAYOUTS:
            raise HgemmValueError(f"shape {part!r}: layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
        shapes.append(tuple(int(d) for d in dims) + ((layout.upper(),) if layout else ()))
    return shapes


def with_layouts(shapes: list[tuple], layout: str | None = None) -> list[tuple[int, int, int, str]]:
    """Suite or --shapes entries as (M, N, K, layout): `layout` (bench --layout) for every entry when given, else
    an entry's own layout, else NN."""
    return [(m, n, k, layout or (rest[0] if rest else "NN")) for m, n, k, *rest in shapes]


def sleep_ahead_us(host_us: list[float], gpu_us: list[float]) -> float:
    """GPU sleep ahead of a run of calls, so that the queue never drains: call j is enqueued after the host costs
    of calls 0..j (x1.5) and must be queued before the GPU finishes calls 0..j-1, so the sleep covers the largest
    such deficit, plus 1 ms of margin for the first call's launch. host_us, gpu_us: per call, in call order (the
    GPU's including the flush ahead of the call)."""
    worst, host, gpu = 0.0, 0.0, 0.0
    for h, g in zip(host_us, gpu_us):
        host += 1.5 * h
        worst = max(worst, host - gpu)
        gpu += g
    return worst + 1000.0


class Timer:
    """CUDA-event timings with the L2 flushed before every call, behind a GPU sleep.

    A Python launch path (validation, Triton's dispatcher) can take longer than a small GEMM; if the GPU ran
    dry between calls, the events would time the CPU, and the next kernel would start on a clock ramping up from
    idle. So each batch of calls starts behind a GPU sleep long enough for the CPU to enqueue the whole batch
    (`sleep_ahead_us`), and the events measure GPU time only. `time` times calls of one function (the frame's
    ceiling loops); `time_passes` the bench's interleaved passes.
    """

    # Generous, for calls whose host cost is not known yet: a launch through Triton's own path costs tens of
    # microseconds of CPU, a TMA launch more (it builds its descriptors on the host); a sleep sized at a third of
    # this still let the queue drain at 1024^3 on the H100.
    ENQUEUE_US_PER_CALL = 400.0

    def __init__(self, flush: str = "clean"):
        """flush: how L2 is emptied before each call, an `hgemm_common.timing.L2Flush` mode (FLUSHES): "clean"
        (256 MB written and read back), "write" (the write alone: the harness's before the flush study, which
        leaves the dirty lines for the timed call to write back), "none"."""
        self.flush = L2Flush(flush)
        self.clock_hz = 2.0e9  # SM clock upper bound; only sizes the sleep
        self.flush_us = statistics.median(self.time(self.flush, 5)) * 1e3  # GPU time of one flush
        ev = self._events(1)[0]
        # host time a timed call adds to the kernel's own launch: the flush and its two events
        self.flush_host_us = host_us(lambda: (self.flush(), ev.record(), ev.record()))

    # The GPU primitives, one place each (a test's fake timer replaces them to record the order of calls).
    def _events(self, n: int) -> list:
        return [torch.cuda.Event(enable_timing=True) for _ in range(n)]

    def _sleep(self, us: float) -> None:
        torch.cuda._sleep(int(us * 1e-6 * self.clock_hz))

    def _sync(self) -> None:
        torch.cuda.synchronize()

    def sleep_us(self, n: int, host_us: float | None, gpu_us: float | None) -> float:
        """GPU sleep ahead of n calls of one function (`sleep_ahead_us`, each call's GPU time with the flush's);
        ENQUEUE_US_PER_CALL per call when the host cost is not known. The sleep is idle GPU time: sizing it saves
        most of the bench."""
        if host_us is None or gpu_us is None:
            return n * self.ENQUEUE_US_PER_CALL
        return sleep_ahead_us([host_us] * n, [gpu_us + self.flush_us] * n)

    def time(self, fn, n: int, host_us: float | None = None, gpu_us: float | None = None) -> list[float]:
        starts, ends = self._events(n), self._events(n)
        self._sleep(self.sleep_us(n, host_us, gpu_us))
        for i in range(n):
            self.flush()
            starts[i].record()
            fn()
            ends[i].record()
        self._sync()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]

    def time_passes(self, fns: list, passes: list[list[int]], host_us: list[float],
                    gpu_us: list[float]) -> list[list[float]]:
        """Device ms of each call of the passes, per function: `passes` lists, pass by pass, the indices into
        `fns` in call order (`pass_schedule`). One sleep ahead of them all, sized from the measured host cost of
        the calls (host_us per function, plus the flush's and the events') against their GPU time (gpu_us per
        function, plus the flush's); each call behind its flush, between two events; one synchronization at the
        end. (The enqueue loop's own duration cannot check the sizing: once the GPU queue is full, launches wait
        for room, and a GPU-bound batch would read as a slow host.)"""
        calls = [i for p in passes for i in p]
        if not calls:
            return [[] for _ in fns]
        starts, ends = self._events(len(calls)), self._events(len(calls))
        self._sleep(sleep_ahead_us([host_us[i] + self.flush_host_us for i in calls],
                                   [gpu_us[i] + self.flush_us for i in calls]))
        for j, i in enumerate(calls):
            self.flush()
            starts[j].record()
            fns[i]()
            ends[j].record()
        self._sync()
        out = [[] for _ in fns]
        for j, i in enumerate(calls):
            out[i].append(starts[j].elapsed_time(ends[j]))
        return out


# Of each kernel's timed budget, this fraction goes to wall-time calls (spread over the rounds, at least
# WALL_MIN_CALLS a round where that many fit in the round's budget, else one): the main job's time grows by about
# a quarter. (With ten calls a round whatever their length, a 0.2 s ladder step at 16384^3 paid 33 extra calls.)
WALL_BUDGET_FRACTION = 0.25
WALL_MIN_CALLS = 10


def wall_calls(n_calls: int, est_ms: float, round_budget_ms: float) -> int:
    """Back-to-back calls one round's wall-time measurement makes: a quarter of the round's timed calls, at least
    WALL_MIN_CALLS when they fit in the round's budget (else one), at most 200."""
    floor = WALL_MIN_CALLS if WALL_MIN_CALLS * est_ms <= round_budget_ms else 1
    return max(floor, min(200, int(WALL_BUDGET_FRACTION * n_calls)))


def host_us(fn, reps: int = 5) -> float:
    """Host microseconds one call takes to enqueue (validation, dispatch, launch), the GPU not waited for; the
    largest of a few tries, so the sleep sized from it errs long."""
    worst = 0.0
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        worst = max(worst, (time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return worst


# At most this many timed calls of one kernel a round (a small kernel's budget would buy thousands).
MAX_CALLS_PER_ROUND = 200


@dataclass
class Live:
    """A kernel that passed its check on this shape, ready to time: its call (inputs bound) and what sizes the
    timing, from a short estimate."""
    name: str
    fn: Callable[[], object]
    est_ms: float  # device ms of one call
    host_us: float  # host us to enqueue one call


def call_counts(live: list[Live], budget_ms: float, rounds: int, flush_ms: float) -> list[int]:
    """Timed calls of each kernel over all rounds: its budget over the GPU time of one sample (the call and the
    flush ahead of it), at least one a round, at most MAX_CALLS_PER_ROUND a round. The A/A control is the
    baseline's call again and is timed as often as the baseline (its own estimate differs from the baseline's by
    noise, which gave it a call more or fewer)."""
    counts = [min(MAX_CALLS_PER_ROUND * rounds, max(rounds, int(budget_ms / max(x.est_ms + flush_ms, 1e-3))))
              for x in live]
    base = next((c for x, c in zip(live, counts) if x.name == BASELINE.name), None)
    return [base if x.name == CONTROL and base is not None else c for x, c in zip(live, counts)]


def pass_schedule(counts: list[int]) -> list[list[int]]:
    """The passes of an interleaved timing: max(counts) passes, each listing the kernels (indices into counts)
    it calls once, in call order. Kernel i runs in counts[i] of the passes, spread evenly over them (a slow kernel
    with fewer calls meets the same drift as the others); in pass p the first kernel is the one at p modulo the
    number of kernels, or the next one present, so no kernel always runs first (after the sleep) or last."""
    total, n = max(counts, default=0), len(counts)
    return [sorted((i for i, c in enumerate(counts) if (p + 1) * c // total > p * c // total),
                   key=lambda i: (i - p) % n) for p in range(total)]


def time_live(timer: Timer, live: list[Live], *, rounds: int, budget_ms: float
              ) -> tuple[list[list[float]], list[float]]:
    """(device ms of each timed call, wall us per call of each round) per live kernel. The passes
    (`pass_schedule` of `call_counts`) split into `rounds` batches, each behind its own sleep
    (`Timer.time_passes`); after each batch every kernel's back-to-back wall-time calls (`wall_us`, no sleep
    ahead), the first kernel rotating each round."""
    counts = call_counts(live, budget_ms, rounds, timer.flush_us * 1e-3)
    passes = pass_schedule(counts)
    fns, host, gpu = [x.fn for x in live], [x.host_us for x in live], [x.est_ms * 1e3 for x in live]
    samples, walls = [[] for _ in live], [[] for _ in live]
    n = len(live)
    for r in range(rounds if live else 0):
        batch = passes[r * len(passes) // rounds:(r + 1) * len(passes) // rounds]
        for i, got in enumerate(timer.time_passes(fns, batch, host, gpu)):
            samples[i] += got
        for i in sorted(range(n), key=lambda i: (i - r) % n):  # as many as before the timing went per call
            calls = wall_calls(max(1, int(budget_ms / rounds / max(live[i].est_ms, 1e-3))), live[i].est_ms,
                               budget_ms / rounds)
            walls[i].append(wall_us(fns[i], calls))
    return samples, walls


def percentile(sorted_xs: list[float], q: float) -> float:
    """The q-quantile of sorted values, nearest rank below (the p10 and p90 of a row's spread, the p10 of a
    kernel's ratios over shapes)."""
    return sorted_xs[int(q * (len(sorted_xs) - 1))]


def _plan_choice(kern: Kernel, a, b, out) -> str:
    """Which Triton kernel and configuration an entry runs (its cached plan) and where the plan came from."""
    import triton_kernels

    p = triton_kernels.plan(a, b, out=out, acc=kern.acc, kernel=kern.record.name,
                            tune="exact" if kern.config == "exact" else None)
    return f"{p.source}: {p.name}"


def tflops(m: int, n: int, k: int, ms: float) -> float:
    return 2.0 * m * n * k / (ms * 1e-3) / 1e12


def bench_shape(kernels: list[Kernel], m: int, n: int, k: int, *, layout: str = "NN", rounds: int = 3,
                budget_ms: float = 300.0, max_slow_tflop: float = 2.5, timer: Timer | None = None,
                ceilings: dict | None = None, seed: int = 0, copy_gb_s: float | None = None,
                kind: str = "dense", dtype: str = "fp16", control: bool = True) -> list[BenchRow]:
    """Check then time each kernel on one shape, per call and interleaved (`time_live`). `budget_ms`: timed GPU
    time per kernel over all rounds, each call counted with the L2 flush ahead of it. control: also time the A/A
    control (CONTROL, right after the baseline) where the baseline is among the kernels.
    ceilings: measured TFLOPS by instruction ceiling and accumulation ({"mma.sync": {"fp32": ..., "fp16": ...}});
    each kernel is scored against its record's `ceiling`. copy_gb_s: the measured device copy bandwidth, which
    `hbm_pct` divides by (memory-bound skinny shapes are judged by it).

    Kernels with `note` marking them naive/slow are skipped when the problem exceeds `max_slow_tflop` TFLOP.
    kind "sparse": A is pruned 2:4 along K first (every kernel gets the same pruned A; its reference is the pruned
    product); the kernels are `registry.sparse_kernels()`. dtype: "fp16" or "bf16" inputs and output, for every
    kernel and the baseline alike (kernels that do not take it are skipped with the reason).
    """
    timer = timer or Timer()
    kernels = with_control(kernels) if control else kernels
    a, b = make_inputs(m, n, k, layout, device="cuda", seed=seed, kind="randn", dtype=dtype)
    if kind == "sparse":
        from ptx_kernels.sparse import prune_2to4

        if layout not in SPARSE_LAYOUTS:
            raise HgemmValueError(f"the sparse kind takes layouts {SPARSE_LAYOUTS} (A row-major), got {layout}")
        a = prune_2to4(a)
    ref = reference(a, b)
    rows, live, bounds = [], [], {}
    for kern in kernels:
        row = BenchRow(kern.name, kern.family, kern.acc, kern.config, m, n, k, layout, "ok", kind=kind, dtype=dtype)
        rows.append(row)
        if not kern.takes(dtype):
            row.status, row.detail = "skipped", f"takes {'/'.join(kern.record.dtypes)} inputs, not {dtype}"
            continue
        if not kern.supports(layout, None, dtype):
            row.status, row.detail = "skipped", f"layout {layout} not supported"
            continue
        if not kern.accepts(a, b):
            row.status, row.detail = "skipped", f"operands not accepted (alignment {kern.record.alignment!r})"
            continue
        why = kern.skip_reason(a, b) if kern.skip_reason else None
        if not why and kern.bench_skip:
            why = kern.bench_skip(a, b)
        if why:
            row.status, row.detail = "skipped", why
            continue
        if kern.slow and 2.0 * m * n * k / 1e12 > max_slow_tflop:
            row.status, row.detail = "skipped", f"naive kernel above {max_slow_tflop} TFLOP"
            continue
        out = torch.full((m, n), float("nan"), dtype=a.dtype, device="cuda")
        try:
            c = kern.run(a, b, out)  # also warms up: builds, compiles the plan (tune='exact': times it)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001
            row.status, row.detail = "error", f"{type(e).__name__}: {e}"
            continue
        acc = kern.bound_acc(a)
        if acc not in bounds:
            bounds[acc] = error_bound(a, b, ref, acc)
        v = compare(c, ref, bounds[acc])
        if not v.ok:
            row.status, row.detail = "failed check", v.detail
            continue
        if kern.config in ("plan", "exact"):
            row.config = _plan_choice(kern, a, b, out)
        elif kern.config == "model":  # registry.model_entry: the plan its own parameter file gave
            p = kern.run.plan_of(a, b, out)
            row.config = f"{p.source}: {p.name}"
        est = statistics.median(timer.time(lambda: kern.run(a, b, out), 2))
        host = host_us(lambda: kern.run(a, b, out), reps=5 if est < 1.0 else 2)  # a slow call: its host cost is small
        live.append((kern, row, Live(kern.name, partial(kern.run, a, b, out), est, host)))
    samples, walls = time_live(timer, [x for *_, x in live], rounds=rounds, budget_ms=budget_ms)
    for (kern, row, _), s, w in zip(live, samples, walls):
        s = sorted(s)
        med = statistics.median(s)
        row.median_ms, row.tflops, row.samples = med, tflops(m, n, k, med), len(s)
        row.spread_pct = 100.0 * (percentile(s, 0.9) - percentile(s, 0.1)) / med
        row.wall_us = statistics.median(w)
        ceiling = (ceilings or {}).get(kern.ceiling, {}).get(kern.acc)  # the record's instruction ceiling
        if ceiling:
            row.pct_of_ceiling = 100.0 * row.tflops / ceiling
        if copy_gb_s:
            row.hbm_pct = 100.0 * 2 * (m * k + k * n + m * n) / (med * 1e-3) / (copy_gb_s * 1e9)
    base = next((r for r in rows if r.kernel == BASELINE.name and r.tflops), None)
    for r in rows:
        if base and r.tflops:
            r.ratio_to_torch = r.tflops / base.tflops
            r.wall_ratio_to_torch = base.wall_us / r.wall_us
    return rows


def geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def _num(x: float | None, fmt: str, width: int) -> str:
    return format(x, fmt) if x else f"{'-':>{width}}"


def format_table(rows: list[BenchRow]) -> str:
    lines = [f"{'shape':>18} {'kernel':<36} {'TFLOPS':>8} {'x torch':>8} {'%ceil':>6} {'%HBM':>5} {'ms':>9} "
             f"{'n':>4} {'spread':>7} {'wall us':>8} {'wall x':>7}  status / config", "-" * 140]
    for r in rows:
        sp = f"{r.spread_pct:6.1f}%" if r.spread_pct is not None else f"{'-':>7}"
        st = f"ok  {r.config}" if r.status == "ok" else f"{r.status}: {r.detail[:60]}"
        lines.append(f"{r.m:>6}x{r.n:>5}x{r.k:>5} {r.kernel:<36} {_num(r.tflops, '8.1f', 8)} "
                     f"{_num(r.ratio_to_torch, '8.3f', 8)} {_num(r.pct_of_ceiling, '6.1f', 6)} "
                     f"{_num(r.hbm_pct, '5.0f', 5)} {_num(r.median_ms, '9.3f', 9)} {r.samples:>4} {sp} "
                     f"{_num(r.wall_us, '8.1f', 8)} {_num(r.wall_ratio_to_torch, '7.3f', 7)}  {st}")
    return "\n".join(lines)


# A kernel "holds" a shape at this ratio to torch.matmul or better (the share reported per kernel).
SHARE_AT = 0.95


@dataclass
class KernelStats:
    """One kernel's ratios to torch.matmul over the shapes of a run (`kernel_stats`)."""
    kernel: str
    shapes: int  # shapes it was timed on
    of: int  # shapes in the run (a kernel skips those it does not take)
    geomean: float  # of its ratios (device time)
    p10: float  # 10th percentile of its ratios
    min: float
    share: float  # fraction of its timed shapes at >= SHARE_AT
    wall: float | None  # geomean of its wall-time ratios
    spread_pct: float | None  # median over its rows of the row's spread (p90 - p10 over the median)


def _case(r: BenchRow) -> tuple:
    return (r.m, r.n, r.k, r.layout, r.dtype, r.kind)


def kernel_stats(rows: list[BenchRow]) -> list[KernelStats]:
    """Per kernel, in order of appearance, the A/A control left out (`aa_verdict` reports it): geomean, p10 and
    min of its ratios to torch.matmul, the share of its timed shapes at >= SHARE_AT, the geomean of its wall-time
    ratios and its median spread, over the shapes it was timed on."""
    of = len({_case(r) for r in rows})
    out = []
    for name in dict.fromkeys(r.kernel for r in rows if r.kernel != CONTROL):
        rs = [r for r in rows if r.kernel == name and r.ratio_to_torch]
        if not rs:
            continue
        ratios = sorted(r.ratio_to_torch for r in rs)
        walls = [r.wall_ratio_to_torch for r in rs if r.wall_ratio_to_torch]
        spreads = [r.spread_pct for r in rs if r.spread_pct is not None]
        out.append(KernelStats(name, len(rs), of, geomean(ratios), percentile(ratios, 0.1), ratios[0],
                               sum(x >= SHARE_AT for x in ratios) / len(ratios), geomean(walls) if walls else None,
                               statistics.median(spreads) if spreads else None))
    return out


def geomeans(rows: list[BenchRow]) -> list[tuple[str, float, float, int]]:
    """Per kernel, in order of appearance, the A/A control left out: (name, geomean device ratio, geomean wall
    ratio, shapes timed)."""
    return [(x.kernel, x.geomean, x.wall if x.wall is not None else float("nan"), x.shapes)
            for x in kernel_stats(rows)]


@dataclass
class AAVerdict:
    """The A/A control's verdict on a run (`aa_verdict`): its `line` is the first line of what the run prints
    and writes."""
    reliable: bool
    geomean: float | None  # of the control's ratios over the shapes
    shapes: int
    outside: list  # (case "MxNxK LAYOUT dtype", ratio, band) of each shape outside its band
    line: str

    def as_dict(self) -> dict:
        return asdict(self)


def aa_verdict(rows: list[BenchRow]) -> AAVerdict:
    """Whether the run can resolve 2%: the A/A control's ratios (CONTROL over torch.matmul, per shape) have a
    geomean within 1 +- AA_BAND and each shape's within its `shape_band`. No control timed: unreliable too (the
    noise of the ratios is unknown)."""
    ctrl = [r for r in rows if r.kernel == CONTROL and r.ratio_to_torch]
    if not ctrl:
        return AAVerdict(False, None, 0, [], "UNRELIABLE RUN: no A/A control was timed (torch.matmul twice, "
                                             f"`{CONTROL}`), so the noise of these ratios is unknown.")
    g = geomean([r.ratio_to_torch for r in ctrl])
    outside = [(f"{r.m}x{r.n}x{r.k} {r.layout} {r.dtype}", r.ratio_to_torch, shape_band(r.median_ms))
               for r in ctrl if abs(r.ratio_to_torch - 1.0) > shape_band(r.median_ms)]
    lo, hi = min(r.ratio_to_torch for r in ctrl), max(r.ratio_to_torch for r in ctrl)
    what = (f"the A/A control (`{CONTROL}` over `torch.matmul`) at {g:.3f}x, geomean over {len(ctrl)} shapes "
            f"(per shape {lo:.3f} to {hi:.3f})")
    if abs(g - 1.0) <= AA_BAND and not outside:
        return AAVerdict(True, g, len(ctrl), [], f"Reliable run: {what}, within 1.00 +- {AA_BAND:.2f} and every "
                                                 "shape within its band.")
    why = [f"outside 1.00 +- {AA_BAND:.2f}"] if abs(g - 1.0) > AA_BAND else []
    if outside:
        case, ratio, band = max(outside, key=lambda o: abs(o[1] - 1.0) - o[2])
        why.append(f"{len(outside)} shape(s) outside their band (worst {ratio:.3f} at {case}, band +-{band:.2f})")
    return AAVerdict(False, g, len(ctrl), outside, f"UNRELIABLE RUN: {what}; {' and '.join(why)}: the ratios of "
                                                   "this run cannot resolve 2%.")


def _opt(x: float | None, fmt: str, width: int) -> str:
    return f"{'-':>{width}}" if x is None or not math.isfinite(x) else format(x, f"{width}{fmt}")


def summary(rows: list[BenchRow]) -> str:
    """Each kernel's ratios to torch.matmul over the shapes it was timed on (`kernel_stats`: device-time geomean,
    p10, min, share at >= SHARE_AT, wall-time geomean, median spread; torch.matmul's own spread in its line), then
    the A/A control's verdict."""
    lines = [f"{'kernel':<36} {'geomean x torch':>16} {'p10':>6} {'min':>6} {f'>={SHARE_AT}x':>7} "
             f"{'wall x torch':>13} {'spread':>7} {'shapes':>9}"]
    lines += [f"{x.kernel:<36} {x.geomean:16.3f} {x.p10:6.3f} {x.min:6.3f} {x.share:7.0%} {_opt(x.wall, '.3f', 13)} "
              f"{_opt(x.spread_pct, '.1f', 6)}% {f'{x.shapes}/{x.of}':>9}" for x in kernel_stats(rows)]
    return "\n".join(lines + [aa_verdict(rows).line])


def dtype_gaps(rows: list[BenchRow], other: list[BenchRow]) -> list[tuple[str, str, float, float]]:
    """Per (kernel, shape) timed in both row sets (e.g. fp16 and bf16 runs): (kernel, "MxNxK", ratio to torch.matmul
    in `rows`, ratio in `other`), each ratio against torch.matmul in its own dtype."""
    def ratios(rs):
        return {(r.kernel, f"{r.m}x{r.n}x{r.k}"): r.ratio_to_torch for r in rs
                if r.ratio_to_torch and r.layout == "NN" and r.kernel not in (BASELINE.name, CONTROL)}
    mine, theirs = ratios(rows), ratios(other)
    return [(kern, shape, x, theirs[kern, shape]) for (kern, shape), x in mine.items() if (kern, shape) in theirs]


def format_gaps(gaps: list[tuple[str, str, float, float]], first: str = "fp16", second: str = "bf16") -> str:
    """dtype_gaps as a text table."""
    lines = [f"{'kernel':<36} {'shape':>18} {first + ' x torch':>13} {second + ' x torch':>13} {'difference':>11}"]
    lines += [f"{kern:<36} {shape:>18} {x:13.3f} {y:13.3f} {y - x:+11.3f}" for kern, shape, x, y in gaps]
    return "\n".join(lines)


def write_bench(out: Path, env: dict, rows: list[BenchRow]) -> None:
    """bench.json (the A/A verdict on its first line, the per-kernel summary, environment, rows) and bench.csv
    (rows) in `out`."""
    dicts = [r.as_dict() for r in rows]
    verdict = aa_verdict(rows)
    stats = [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(x).items()}
             for x in kernel_stats(rows)]
    text = json.dumps({"verdict": verdict.line, "aa_control": verdict.as_dict(), "summary": stats,
                       "environment": env, "rows": dicts}, indent=1)
    (out / "bench.json").write_text("{" + text[len("{\n "):])  # the verdict's key on the first line, as it is printed
    with open(out / "bench.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(dicts[0]) if dicts else ["kernel"])
        w.writeheader()
        w.writerows(dicts)
