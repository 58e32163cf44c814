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
CPU_EXACT = [(1, 7, 129), (17, 33, 100), (33, 16, 7), (40, 24, 72)]  # the last has 16-byte rows (TMA)
CPU_RANDOM = [(40, 24, 72)]


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

    def as_dict(self) -> dict:
        return asdict(self)


def size_bucket(m: int, n: int, k: int) -> str:
    """Check cases that share one autotuning result: the small problems (up to ALL_LAYOUTS_UP_TO MACs, a tile or
    two) and the large ones. Tuning every Triton entry anew for each large case's (shape, layout) had made the large
    cases most of the check's time on the H100."""
    return "small" if m * n * k <= ALL_LAYOUTS_UP_TO else "large"


class TunedConfigs:
    """Autotune each Triton kernel once per (kernel, accumulation, size bucket), on the bucket's first case, and
    run the bucket's other cases (other shapes and layouts) on the configuration it chose, pinned. The check asks
    whether the kernels are right, not which tile is fastest (`bench` tunes per shape). The pinned launch is the
    autotuner's kernel with that configuration (the same @triton.jit function); every configuration is still
    checked on its own by its `[config]` entry (`check --all`, the GPU tests). The auto entry's first case runs
    the dispatcher's timed choice; its bucket's other cases pin the ladder's kernel for their operands."""

    def __init__(self):
        self.best: dict = {}

    def runner(self, kern: Kernel, a, b, out, m: int, n: int, k: int):
        if kern.config != "autotuned":
            return kern.run
        import triton_kernels

        from triton_kernels import dispatch

        kernel = kern.record.extra["kernel"]
        if kern.record.extra.get("dispatch"):
            # auto: its first case times every candidate; the bucket's other cases pin the ladder's kernel for their
            # operands with the configuration that timing chose for it
            kernel = dispatch.kernel_for(dispatch.device_arch(a), a, b, out)
        key = (kernel, kern.acc, size_bucket(m, n, k))
        cfg = self.best.get(key)
        if cfg is not None:
            return lambda a, b, out=None: triton_kernels.hgemm(a, b, out=out, acc=kern.acc, config=cfg, kernel=kernel)

        def tune(a, b, out=None):
            c = kern.run(a, b, out)
            chosen = triton_kernels.best_config(kernel)  # None under the interpreter (a pinned config there)
            if chosen is not None:
                self.best[key] = chosen
            return c
        return tune


def _run_case(kernels: list[Kernel], m: int, n: int, k: int, layout: str, kind: str, device, seed: int,
              tuned: TunedConfigs | None = None, sparse: bool = False, dtype: str = "fp16"):
    a, b = make_inputs(m, n, k, layout, device=device, seed=seed, kind=kind, dtype=dtype)
    if sparse:  # the sparse kind: every kernel gets the same 2:4-pruned A, the reference is the pruned product
        from ptx_kernels.sparse import prune_2to4
        a = prune_2to4(a)
    ref = reference(a, b)
    outs, rows, bounds = {}, [], {}
    for kern in kernels:
        if not kern.supports(layout, None, dtype) or not kern.accepts(a, b):
            continue  # by design (e.g. TMA needs 16-byte rows); the kernel raises a clear error there
        if kern.skip_reason and kern.skip_reason(a, b):
            continue  # limits no record states (torch's semi-structured shapes)
        if kind == "int":
            bound = None
        else:
            bound = bounds.get(kern.acc)
            if bound is None:
                bound = bounds[kern.acc] = error_bound(a, b, ref, kern.acc)
        out = poisoned_out(m, n, device, dtype)
        run = tuned.runner(kern, a, b, out, m, n, k) if tuned else kern.run
        try:
            c = run(a, b, out)
            if device != "cpu":
                torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - a failure of one kernel is a row, not the end of the check
            rows.append(CheckRow(kern.name, f"{m}x{n}x{k}", layout, kind, False, float("nan"), None,
                                 f"raised {type(e).__name__}: {e}", dtype))
            continue
        v = compare(c, ref, bound)
        outs[kern.name] = c
        rows.append(CheckRow(kern.name, f"{m}x{n}x{k}", layout, kind, v.ok, v.max_abs_err, None, v.detail, dtype))
    if kind == "randn" and BASELINE.name in outs:
        base = next(r.max_abs_err for r in rows if r.kernel == BASELINE.name)
        for r in rows:
            r.err_vs_torch = r.max_abs_err / base if base > 0 else None
    return rows, outs


def pairwise(outs: dict[str, torch.Tensor]) -> tuple[list[str], list[list[float]]]:
    """Max |C_i - C_j| between every pair of kernels' outputs on the same inputs."""
    names = list(outs)
    mat = [[float((outs[x].double() - outs[y].double()).abs().nan_to_num(float("inf")).max()) for y in names]
           for x in names]
    return names, mat


# Problems of more than this many MACs (136x264x520 and up) run in NN and TT only (column-major A and B both
# covered; the GPU tests cover every layout of every kernel): on a fresh GPU
# machine each new (shape, layout) autotunes every Triton entry, and that dominated the main job's time.
ALL_LAYOUTS_UP_TO = 2**24


def cases_for(gpu: bool, layouts=LAYOUTS) -> list[tuple[tuple[int, int, int], str, str]]:
    exact, rand = (GPU_EXACT, GPU_RANDOM) if gpu else (CPU_EXACT, CPU_RANDOM)

    def lays(m, n, k):
        return layouts if m * n * k <= ALL_LAYOUTS_UP_TO else [x for x in layouts if x in ("NN", "TT")]
    return [(s, lay, "int") for s in exact for lay in lays(*s)] + \
        [(s, lay, "randn") for s in rand for lay in lays(*s)]


def run_check(kernels: list[Kernel], *, gpu: bool, layouts=LAYOUTS, progress=None, sparse: bool = False,
              dtype: str = "fp16"):
    """Run the exact and random checks in `dtype` ("fp16" or "bf16": A, B and C); returns (rows, pairwise names,
    pairwise matrix). sparse: the sparse kind (`registry.sparse_kernels()`, A pruned 2:4 along K, row-major:
    layouts NN and NT)."""
    device = "cuda" if gpu else "cpu"
    if sparse:
        layouts = [x for x in layouts if x in ("NN", "NT")]
    cases = cases_for(gpu, layouts)
    rows, pair, tuned = [], ([], []), TunedConfigs()
    for i, ((m, n, k), lay, kind) in enumerate(cases):
        r, outs = _run_case(kernels, m, n, k, lay, kind, device, seed=i, tuned=tuned, sparse=sparse, dtype=dtype)
        rows += r
        if kind == "randn" and not pair[0]:
            pair = pairwise(outs)
        if progress:
            progress(i + 1, len(cases))
    return rows, pair[0], pair[1]


def format_table(rows: list[CheckRow]) -> str:
    """One line per kernel: cases passed, worst error ratio, first failure."""
    by = {}
    for r in rows:
        by.setdefault(r.kernel, []).append(r)
    lines = [f"{'kernel':<44} {'exact':>9} {'random':>9} {'max err':>9} {'err/torch':>9}  first failure",
             "-" * 110]
    for name, rs in by.items():
        ex = [r for r in rs if r.inputs == "int"]
        rn = [r for r in rs if r.inputs == "randn"]
        err = max((r.max_abs_err for r in rn), default=float("nan"))
        ratios = [r.err_vs_torch for r in rn if r.err_vs_torch is not None]
        ratio = f"{max(ratios):9.2f}" if ratios else f"{'-':>9}"
        bad = next((r for r in rs if not r.ok), None)
        why = f"{bad.shape} {bad.layout} {bad.inputs}: {bad.detail}" if bad else ""
        lines.append(f"{name:<44} {sum(r.ok for r in ex):>4}/{len(ex):<4} {sum(r.ok for r in rn):>4}/{len(rn):<4}"
                     f" {err:9.3g} {ratio}  {why[:200]}")
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
