"""`python -m compare check`: every kernel against the high-precision reference, torch.matmul and each other."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from .reference import LAYOUTS, compare, error_bound, make_inputs, poisoned_out, reference
from .registry import BASELINE, Kernel

# (M, N, K): odd edges, K past several tiles, 16-byte rows off the tile grid (the TMA kernel takes those), one
# square tile multiple. Every layout runs each.
GPU_EXACT = [(1, 1, 1), (17, 33, 100), (129, 7, 311), (496, 233, 4099), (136, 264, 520), (1024, 1024, 1024)]
GPU_RANDOM = [(1024, 1024, 1024), (3000, 5000, 2000)]
# Without a GPU the Triton kernels run under the interpreter, which runs every program of a grid in Python (tens of ms
# each): the CPU set is sized for it. Each shape runs in the layouts it is there for, and together they give every
# Triton entry the exact checks in all four layouts, an odd shape past its tiles and a random check, in both dtypes
# (tests/test_harness.py: test_cpu_check_set_covers_every_kernel_and_layout). The interpreter configurations'
# tiles (triton_kernels/*.py INTERPRETER_CONFIG): 32x32x32 (blocked, tma), 16x32x32 split 3 or 5 (the split-K
# kernels), 1x32x16 split 3 (gemv). Entries: (M, N, K), layouts, inputs.
CPU_CASES = [
    ((1, 7, 129), LAYOUTS, "int"),  # one row, N under a tile, K past four 32-deep steps by one
    ((2, 40, 50), ("TT",), "int"),  # gemv past one row and its 32 columns; K one 32-deep step + 18
    ((8, 24, 40), LAYOUTS, "int"),  # 16-byte rows in every layout: the TMA kernels' four layouts
    ((33, 40, 72), ("NN",), "int"),  # one row past a 32-row tile, two column tiles, K two tiles + 8 (TMA: NN)
    ((17, 33, 100), ("TN",), "int"),  # odd in every dimension, A column-major
    ((2, 40, 72), ("NN",), "randn"),  # the random check (every kernel, gemv too: two rows)
]
# bf16 adds the element type (loads and descriptors of 2-byte elements of another format, the dot's operand type, the
# store): every kernel with A and with B each row- and column-major (NN and TT, or NT and TN: the TMA kernels'
# 16-byte rows), and the random check.
CPU_BF16_CASES = [
    ((1, 7, 129), ("NN", "TT"), "int"),
    ((8, 24, 40), ("NT", "TN"), "int"),
    ((2, 40, 72), ("NN",), "randn"),
]
# A kernel whose interpreter tile is one row (gemv: one program per row of C, 32 columns and a K slice each) runs the
# CPU cases up to this M: on (33, 40, 72) it would run about 200 programs, seconds a call.
CPU_ONE_ROW_MAX_M = 2


@dataclass
class CheckRow:
    kernel: str
    shape: str
    layout: str
    inputs: str  # "int" (exact check) or "randn" (bound check)
    ok: bool
    max_abs_err: float
    err_vs_torch: float | None  # max |C - ref| over torch.matmul's own max |C - ref|; None for exact checks
    detail: str
    dtype: str = "fp16"  # of A, B and C
    rms_err: float = 0.0  # root mean square of C - ref
    rms_vs_torch: float | None = None  # rms_err over torch.matmul's on the same inputs; None for exact checks

    def as_dict(self) -> dict:
        return asdict(self)


def _run_case(kernels: list[Kernel], m: int, n: int, k: int, layout: str, kind: str, device, seed: int,
              sparse: bool = False, dtype: str = "fp16"):
    a, b = make_inputs(m, n, k, layout, device=device, seed=seed, kind=kind, dtype=dtype)
    if sparse:  # the sparse kind: every kernel gets the same 2:4-pruned A, the reference is the pruned product
        from ptx_kernels.sparse import prune_2to4
        a = prune_2to4(a)
    ref = reference(a, b)
    outs, rows, bounds = {}, [], {}
    for kern in kernels:
        if not takes_case(kern, a, b, layout, dtype):
            continue
        if kind == "int":
            bound = None
        else:
            acc = kern.bound_acc(a)
            bound = bounds.get(acc)
            if bound is None:
                bound = bounds[acc] = error_bound(a, b, ref, acc)
        out = poisoned_out(m, n, device, dtype)
        try:
            c = kern.run(a, b, out)
            if device != "cpu":
                torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - a failure of one kernel is a row, not the end of the check
            rows.append(CheckRow(kern.name, f"{m}x{n}x{k}", layout, kind, False, float("nan"), None,
                                 f"raised {type(e).__name__}: {e}", dtype))
            continue
        v = compare(c, ref, bound)
        outs[kern.name] = c
        rows.append(CheckRow(kern.name, f"{m}x{n}x{k}", layout, kind, v.ok, v.max_abs_err, None, v.detail, dtype,
                             v.rms_err))
    if kind == "randn":
        against_torch(rows)
    return rows, outs


def against_torch(rows: list[CheckRow]) -> None:
    """Each random-case row's max and rms error over torch.matmul's (cuBLAS on the GPU) on the same inputs."""
    base = next((r for r in rows if r.kernel == BASELINE.name), None)
    if base is None:
        return
    for r in rows:
        r.err_vs_torch = r.max_abs_err / base.max_abs_err if base.max_abs_err > 0 else None
        r.rms_vs_torch = r.rms_err / base.rms_err if base.rms_err > 0 else None


def pairwise(outs: dict[str, torch.Tensor]) -> tuple[list[str], list[list[float]]]:
    """Max |C_i - C_j| between every pair of kernels' outputs on the same inputs."""
    names = list(outs)
    mat = [[float((outs[x].double() - outs[y].double()).abs().nan_to_num(float("inf")).max()) for y in names]
           for x in names]
    return names, mat


# Problems of more than this many MACs (136x264x520 and up) run in NN and TT only (column-major A and B both
# covered; the GPU tests cover every layout of every kernel): each new (shape, layout) compiles every Triton
# entry's plan anew, and compiling dominates the check's time on a fresh machine.
ALL_LAYOUTS_UP_TO = 2**24


def cases_for(gpu: bool, layouts=LAYOUTS, dtype: str = "fp16") -> list[tuple[tuple[int, int, int], str, str]]:
    """The check's cases ((M, N, K), layout, inputs) on a GPU, or under the interpreter (CPU_CASES, CPU_BF16_CASES
    for bf16), of the given layouts."""
    if not gpu:
        return [(s, lay, kind) for s, lays, kind in (CPU_BF16_CASES if dtype == "bf16" else CPU_CASES)
                for lay in lays if lay in layouts]

    def lays(m, n, k):
        return layouts if m * n * k <= ALL_LAYOUTS_UP_TO else [x for x in layouts if x in ("NN", "TT")]
    return [(s, lay, "int") for s in GPU_EXACT for lay in lays(*s)] + \
        [(s, lay, "randn") for s in GPU_RANDOM for lay in lays(*s)]


def interpreter_limit(kern: Kernel) -> str | None:
    """Why the interpreter runs `kern` on fewer of the CPU cases (None: it runs them all): a kernel whose interpreter
    tile is one row runs those up to CPU_ONE_ROW_MAX_M."""
    if kern.package != "triton" or kern.record.dispatch:
        return None
    from triton_kernels.variants import kernel_module

    if kernel_module(kern.record).INTERPRETER_CONFIG.block_m != 1:
        return None
    return (f"under the interpreter a kernel of one-row tiles runs the cases up to M = {CPU_ONE_ROW_MAX_M} (a "
            "program per row of C, each run in Python)")


def takes_case(kern: Kernel, a: torch.Tensor, b: torch.Tensor, layout: str, dtype: str) -> bool:
    """Whether the check runs `kern` on these operands: what its record supports and takes (TMA kernels refuse
    operands they cannot describe, by design: they raise a clear error there), and, on the CPU, interpreter_limit."""
    if not kern.supports(layout, None, dtype) or not kern.accepts(a, b):
        return False
    if kern.skip_reason and kern.skip_reason(a, b):
        return False  # limits no record states (torch's semi-structured shapes)
    return a.device.type != "cpu" or a.shape[0] <= CPU_ONE_ROW_MAX_M or interpreter_limit(kern) is None


def run_check(kernels: list[Kernel], *, gpu: bool, layouts=LAYOUTS, progress=None, sparse: bool = False,
              dtype: str = "fp16"):
    """Run the exact and random checks in `dtype` ("fp16" or "bf16": A, B and C); returns (rows, pairwise names,
    pairwise matrix). sparse: the sparse kind (`registry.sparse_kernels()`, A pruned 2:4 along K, row-major:
    layouts NN and NT)."""
    device = "cuda" if gpu else "cpu"
    if sparse:
        layouts = [x for x in layouts if x in ("NN", "NT")]
    cases = cases_for(gpu, layouts, dtype)
    rows, pair = [], ([], [])
    for i, ((m, n, k), lay, kind) in enumerate(cases):
        r, outs = _run_case(kernels, m, n, k, lay, kind, device, seed=i, sparse=sparse, dtype=dtype)
        rows += r
        if kind == "randn" and not pair[0]:
            pair = pairwise(outs)
        if progress:
            progress(i + 1, len(cases))
    return rows, pair[0], pair[1]


def _check_worker(tasks, queue) -> None:
    """One worker of `run_check_parallel`: it takes units (lists of jobs) from `tasks` until the end mark. A job is
    ("case", index, case, names, sparse, dtype) -> its rows (and the pairwise matrix of a random case), or ("warm",
    entry name, kind, M, N, K, layout, dtype) -> nothing (a bench entry run once, so that its compiles are done).
    Triton's pass of each case as it is taken, then, once the queue is empty, the hand-written kernels' pass of the
    same cases, whose extension the parent may still be building (ptx_kernels.load waits on its lock)."""
    from .parallel import warm_one

    taken, kept = [], {}  # kept: a random case's outputs from the first pass, for its pairwise matrix after the second
    for unit in iter(tasks.get, None):
        for job in unit:
            if job[0] == "warm":
                warm_one(job[1:])
                queue.put(("warm", None))
            else:
                _check_pass(job, "triton", kept, queue)
                taken.append(job)
    for job in taken:
        _check_pass(job, "ptx", kept, queue)


def _check_pass(job: tuple, pass_: str, kept: dict, queue) -> None:
    """One case job's Triton or hand-written pass, its rows put on `queue`."""
    from .registry import select

    _, i, ((m, n, k), lay, kind), names, sparse, dtype = job
    every = select(None, include_all=True, kind="sparse" if sparse else "dense", dtype=dtype)
    kernels = [e for e in every if e.name in names and (e.package == "ptx") == (pass_ == "ptx")]
    rows, outs = (_run_case(kernels, m, n, k, lay, kind, "cuda", seed=i, sparse=sparse, dtype=dtype)
                  if kernels else ([], {}))
    pair = None
    if kind == "randn":
        if pass_ == "triton":
            kept[i] = outs
        else:
            pair = pairwise({**kept.pop(i, {}), **outs})
    queue.put(("case", (i, rows, pair, pass_)))


def compile_alike(case: tuple, dtype: str) -> tuple:
    """A key of the cases whose Triton kernels compile alike: the dtype, the layout, and which of M, N, K are 1 or
    multiples of 16 (Triton specializes integer arguments, the strides among them, on those; fresh operands share
    their pointers' alignment). The first such case compiles; the others, run after it in the same process, load."""
    (m, n, k), lay, _ = case
    return dtype, lay, tuple(x == 1 for x in (m, n, k)), tuple(x % 16 == 0 for x in (m, n, k))


def check_units(jobs: list[tuple], warm: list[tuple] = ()) -> list[list[tuple]]:
    """The units the check's workers take in turn (run_check_parallel): the case jobs whose kernels compile alike
    (`compile_alike`) in one unit, so that one process compiles what they share once, the units of more cases and
    larger problems first (the longest first, so that the last units taken are short); then each warm job alone."""
    units = {}
    for job in jobs:
        units.setdefault(compile_alike(job[2], job[5]), []).append(job)

    def size(unit):
        return len(unit), max(m * n * k for (m, n, k), _, _ in (j[2] for j in unit))
    return sorted(units.values(), key=size, reverse=True) + [[("warm", *w)] for w in warm]


def run_check_parallel(kernels: list[Kernel], *, workers: int, dtypes=("fp16",), warm: list | None = None,
                       layouts=LAYOUTS, progress=None, log=print, during=None):
    """run_check on the GPU for each dtype in `dtypes` (kernels: {dtype: list}), the cases spread over `workers`
    processes (each case whole in one process; each process its own CUDA context), plus `warm` jobs (compare.parallel:
    bench entries run once) in the same processes; each process takes the next unit of work (`check_units`) as it
    finishes one. `during()`, when given, runs in this process meanwhile (the extension's build: the workers then run
    at a lower priority, since their PTX cases wait for it, and every core it gets brings them forward). Returns
    {dtype: (rows, pairwise names, pairwise matrix)}, rows in case order."""
    from .parallel import spawn_pulling

    cases = cases_for(True, layouts)
    jobs = [("case", i + 1000 * d, case, [k.name for k in kernels[dtype]], False, dtype)
            for d, dtype in enumerate(dtypes) for i, case in enumerate(cases)]
    results = {}  # (index, pass) -> (rows, outs)
    show = progress and progress("check")
    total = len(jobs) * 2

    def collect(kind, payload):
        if kind == "case":
            i, rows, outs, pass_ = payload
            results[i, pass_] = (rows, outs)
            if show:
                show(len(results), total)

    spawn_pulling(_check_worker, check_units(jobs, warm or []), collect, workers, during=during,
                  nice=10 if during else 0)
    out = {}
    for d, dtype in enumerate(dtypes):
        rows, pair = [], ([], [])
        for i, ((m, n, k), lay, kind) in enumerate(cases):
            r1, _ = results.get((i + 1000 * d, "triton"), ([], None))
            r2, pair2 = results.get((i + 1000 * d, "ptx"), ([], None))
            if (i + 1000 * d, "triton") not in results or (i + 1000 * d, "ptx") not in results:
                rows.append(CheckRow("(worker)", f"{m}x{n}x{k}", lay, kind, False, float("nan"), None,
                                     "a check worker died before reporting this case", dtype))
            case_rows = r1 + r2
            if kind == "randn":
                against_torch(case_rows)
                if not pair[0] and pair2:
                    pair = pair2
            rows += case_rows
        out[dtype] = (rows, pair[0], pair[1])
    return out


def format_table(rows: list[CheckRow]) -> str:
    """One line per kernel: cases passed, worst error ratio, first failure."""
    by = {}
    for r in rows:
        by.setdefault(r.kernel, []).append(r)
    lines = [f"{'kernel':<44} {'exact':>9} {'random':>9} {'max err':>9} {'err/torch':>9} {'rms/torch':>9}  "
             "first failure", "-" * 120]
    for name, rs in by.items():
        ex = [r for r in rs if r.inputs == "int"]
        rn = [r for r in rs if r.inputs == "randn"]
        err = max((r.max_abs_err for r in rn), default=float("nan"))
        ratios = [r.err_vs_torch for r in rn if r.err_vs_torch is not None]
        ratio = f"{max(ratios):9.2f}" if ratios else f"{'-':>9}"
        rms = [r.rms_vs_torch for r in rn if r.rms_vs_torch is not None]
        rms_ratio = f"{max(rms):9.2f}" if rms else f"{'-':>9}"
        bad = next((r for r in rs if not r.ok), None)
        why = f"{bad.shape} {bad.layout} {bad.inputs}: {bad.detail}" if bad else ""
        lines.append(f"{name:<44} {sum(r.ok for r in ex):>4}/{len(ex):<4} {sum(r.ok for r in rn):>4}/{len(rn):<4}"
                     f" {err:9.3g} {ratio} {rms_ratio}  {why[:200]}")
    return "\n".join(lines)


def format_pairwise(names: list[str], mat: list[list[float]]) -> str:
    """The matrix with numbered columns (full kernel names are too long for column heads, and cut ones collide):
    row i is labelled `[i] name`, column i `[i]`."""
    if not names:
        return ""
    width = max(len(n) for n in names) + 6
    lines = ["max |C_i - C_j| on the first random case", " " * width + " ".join(f"{f'[{j}]':>9}" for j in range(len(names)))]
    for i, (n, row) in enumerate(zip(names, mat)):
        lines.append(f"{f'[{i}] {n}':<{width}}" + " ".join(f"{v:9.3g}" for v in row))
    return "\n".join(lines)
