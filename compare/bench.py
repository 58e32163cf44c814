"""`python -m compare bench`: side-by-side timing, medians of CUDA-event timings with L2 flushed (BENCHMARKING.md).

For each shape every selected kernel is first checked on the very inputs it will be timed on; a kernel that
fails is reported as failed and not timed. Timing rounds interleave the kernels so that clock and power drift
hit all of them alike; each kernel's median over all rounds is reported with its ratio to torch.matmul.
"""
from __future__ import annotations

import csv
import json
import math
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path

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


class Timer:
    """Median-of-many CUDA-event timings with the L2 flushed before every call.

    A Python launch path (validation, Triton's dispatcher) can take longer than a small GEMM; if the GPU ran
    dry between calls, the events would time the CPU. So each batch starts behind a GPU sleep long enough for
    the CPU to enqueue the whole batch, and the events measure GPU time only.
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

    def sleep_us(self, n: int, host_us: float | None, gpu_us: float | None) -> float:
        """GPU sleep ahead of n calls: long enough that the CPU, enqueueing a call every host_us while the GPU
        takes flush + gpu_us per call, never lets the queue drain (x1.5 and 1 ms of margin); ENQUEUE_US_PER_CALL
        per call when the host cost is not known. The sleep is idle GPU time: sizing it saves most of the bench."""
        if host_us is None or gpu_us is None:
            return n * self.ENQUEUE_US_PER_CALL
        return n * max(0.0, 1.5 * host_us - gpu_us - self.flush_us) + 1000.0

    def time(self, fn, n: int, host_us: float | None = None, gpu_us: float | None = None) -> list[float]:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        torch.cuda._sleep(int(self.sleep_us(n, host_us, gpu_us) * 1e-6 * self.clock_hz))
        for i in range(n):
            self.flush()
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]


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
                kind: str = "dense", dtype: str = "fp16") -> list[BenchRow]:
    """Check then time each kernel on one shape. `budget_ms`: timed GPU time per kernel (all rounds).
    ceilings: measured TFLOPS by instruction ceiling and accumulation ({"mma.sync": {"fp32": ..., "fp16": ...}});
    each kernel is scored against its record's `ceiling`. copy_gb_s: the measured device copy bandwidth, which
    `hbm_pct` divides by (memory-bound skinny shapes are judged by it).

    Kernels with `note` marking them naive/slow are skipped when the problem exceeds `max_slow_tflop` TFLOP.
    kind "sparse": A is pruned 2:4 along K first (every kernel gets the same pruned A; its reference is the pruned
    product); the kernels are `registry.sparse_kernels()`. dtype: "fp16" or "bf16" inputs and output, for every
    kernel and the baseline alike (kernels that do not take it are skipped with the reason).
    """
    timer = timer or Timer()
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
        if kern.acc not in bounds:
            bounds[kern.acc] = error_bound(a, b, ref, kern.acc)
        v = compare(c, ref, bounds[kern.acc])
        if not v.ok:
            row.status, row.detail = "failed check", v.detail
            continue
        if kern.config in ("plan", "exact"):
            row.config = _plan_choice(kern, a, b, out)
        est = statistics.median(timer.time(lambda: kern.run(a, b, out), 2))
        host = host_us(lambda: kern.run(a, b, out), reps=5 if est < 1.0 else 2)  # a slow call: its host cost is small
        live.append((kern, row, out, max(1, int(budget_ms / rounds / max(est, 1e-3))), host, est * 1e3))
    samples = {row.kernel: [] for _, row, *_ in live}
    walls = {row.kernel: [] for _, row, *_ in live}
    for _ in range(rounds):
        for kern, row, out, n_calls, host, gpu_us in live:
            samples[row.kernel] += timer.time(lambda: kern.run(a, b, out), min(n_calls, 200), host, gpu_us)
        for kern, row, out, n_calls, host, gpu_us in live:  # interleaved like the device timing
            calls = wall_calls(n_calls, gpu_us * 1e-3, budget_ms / rounds)
            walls[row.kernel].append(wall_us(lambda: kern.run(a, b, out), calls))
    for kern, row, out, *_ in live:
        s = sorted(samples[row.kernel])
        med = statistics.median(s)
        row.median_ms, row.tflops, row.samples = med, tflops(m, n, k, med), len(s)
        row.spread_pct = 100.0 * (s[int(0.9 * (len(s) - 1))] - s[int(0.1 * (len(s) - 1))]) / med
        row.wall_us = statistics.median(walls[row.kernel])
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


def geomeans(rows: list[BenchRow]) -> list[tuple[str, float, float, int]]:
    """Per kernel, in order of appearance: (name, geomean device ratio, geomean wall ratio, shapes timed)."""
    names = list(dict.fromkeys(r.kernel for r in rows))
    out = []
    for name in names:
        rs = [r for r in rows if r.kernel == name and r.ratio_to_torch]
        if rs:
            out.append((name, geomean([r.ratio_to_torch for r in rs]),
                        geomean([r.wall_ratio_to_torch for r in rs if r.wall_ratio_to_torch]), len(rs)))
    return out


def summary(rows: list[BenchRow]) -> str:
    """Geometric mean of each kernel's ratios to torch.matmul (device time, wall time per call) over the shapes it
    was timed on."""
    lines = [f"{'kernel':<36} {'geomean x torch':>16} {'wall x torch':>13} {'shapes':>7}"]
    lines += [f"{name:<36} {dev:16.3f} {wall:13.3f} {n:>7}" for name, dev, wall, n in geomeans(rows)]
    return "\n".join(lines)


def dtype_gaps(rows: list[BenchRow], other: list[BenchRow]) -> list[tuple[str, str, float, float]]:
    """Per (kernel, shape) timed in both row sets (e.g. fp16 and bf16 runs): (kernel, "MxNxK", ratio to torch.matmul
    in `rows`, ratio in `other`), each ratio against torch.matmul in its own dtype."""
    def ratios(rs):
        return {(r.kernel, f"{r.m}x{r.n}x{r.k}"): r.ratio_to_torch for r in rs
                if r.ratio_to_torch and r.layout == "NN" and r.kernel != BASELINE.name}
    mine, theirs = ratios(rows), ratios(other)
    return [(kern, shape, x, theirs[kern, shape]) for (kern, shape), x in mine.items() if (kern, shape) in theirs]


def format_gaps(gaps: list[tuple[str, str, float, float]], first: str = "fp16", second: str = "bf16") -> str:
    """dtype_gaps as a text table."""
    lines = [f"{'kernel':<36} {'shape':>18} {first + ' x torch':>13} {second + ' x torch':>13} {'difference':>11}"]
    lines += [f"{kern:<36} {shape:>18} {x:13.3f} {y:13.3f} {y - x:+11.3f}" for kern, shape, x, y in gaps]
    return "\n".join(lines)


def write_bench(out: Path, env: dict, rows: list[BenchRow]) -> None:
    """bench.json (environment + rows) and bench.csv (rows) in `out`."""
    dicts = [r.as_dict() for r in rows]
    (out / "bench.json").write_text(json.dumps({"environment": env, "rows": dicts}, indent=1))
    with open(out / "bench.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(dicts[0]) if dicts else ["kernel"])
        w.writeheader()
        w.writerows(dicts)
