"""`python -m compare tune`: make a plan table (`triton_kernels.plan_table`) for the GPU it runs on.

For every case of the grid (dtype, accumulation, layout, shape) it times kernel="auto"'s candidates on random
operands exactly as `tune="exact"` does (`triton_kernels.dispatch.time_auto`); then, per shape class, it keeps the
plan that is fastest across the class's grid shapes: one shape's winner directly, several shapes' distinct winners
each timed on every shape of the class and ranked by the geometric mean of their times over each shape's best.
Each entry also keeps every candidate kernel's best configuration (what an explicit kernel= call runs where the
entry holds for the call, `dispatch.table_plan`).

Compiles first, in parallel: worker processes run every candidate configuration of every case once (a correctness
run, which compiles it into Triton's disk cache), so the timing that follows loads compiled kernels instead of
compiling them one by one between timings.

The table is written atomically as JSON, with the device, the versions, the commit, the date and the command.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from hgemm_common.errors import HgemmError
from triton_kernels.common import Config, timing

from .sweep_data import append, tune_records

# (shape, layouts): the default grid. The harness's mixed suite (square, LLM, skinny M, odd), every power-of-two M
# at N = K = 4096 (decode to prefill batch sizes), LLM projections at the M the suites and decoding meet, the
# small-output / large-K suite and the training suite in its own layouts.
_M_LADDER = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
# (N, K) of a projection -> its M: a 4096-wide model's MLP (14336) and vocabulary (32000) at decode M (1, 4, 16),
# the m_sweep suite's 64-256 and prefill 1024-4096; an 8192-wide model's at 16-4096. One (N, K) per class: 11008
# (Llama-2's MLP) shares 14336's buckets.
_PROJ = {(4096, 14336): (1, 4, 16, 64, 128, 256, 1024, 4096), (14336, 4096): (1, 4, 16, 64, 128, 256, 1024, 4096),
         (32000, 4096): (1, 4, 16, 128, 1024, 4096), (8192, 8192): (16, 128, 1024, 4096),
         (28672, 8192): (16, 128, 1024, 4096)}


def default_grid() -> list[tuple[tuple[int, int, int], tuple[str, ...]]]:
    from .bench import SUITES

    shapes = list(SUITES["mixed"])
    shapes += [(m, 4096, 4096) for m in _M_LADDER]
    shapes += [(m, n, k) for (n, k), ms in _PROJ.items() for m in ms]
    shapes += SUITES["small_out_large_k"] + SUITES["m_sweep"]
    layouts = {s: ["NN", "NT"] for s in shapes}
    # an nn.Linear's forward (NT), dX = dY W (NN) and dW = dY^T X (TN: A a transposed view, K the token count)
    for m, n, k, layout in SUITES["training"]:
        layouts.setdefault((m, n, k), [])
        if layout not in layouts[(m, n, k)]:
            layouts[(m, n, k)].append(layout)
    return [(s, tuple(lays)) for s, lays in layouts.items()]


def quick_grid() -> list[tuple[tuple[int, int, int], tuple[str, ...]]]:
    """A few cases for trying the tuner (or a CPU dry run of its logic)."""
    return [((64, 64, 64), ("NN",)), ((16, 256, 512), ("NN", "NT"))]


GRIDS = {"default": default_grid, "quick": quick_grid}


@dataclass
class CaseResult:
    dtype: str
    acc: str
    layout: str
    shape: tuple[int, int, int]
    cls: str  # ShapeClass.key
    best: dict  # Plan.as_json() of the winner
    kernels: dict  # kernel -> (config name, ms) of each candidate's best configuration
    timings: list  # every configuration timed, as candidate records (`compare.sweep.tune_records`)


def _operands(dtype: str, layout: str, shape, seed: int):
    from .parallel import gpu_operands

    return gpu_operands(*shape, layout, dtype, seed)


def cases(grid, dtypes, accs) -> list[tuple[str, str, str, tuple[int, int, int]]]:
    from hgemm_common.record import ACCS_FOR

    return [(d, acc, lay, shape) for d in dtypes for acc in accs if acc in ACCS_FOR[d]
            for shape, lays in grid for lay in lays]


def candidate_plans(a: torch.Tensor, b: torch.Tensor,
                    every_staging: bool = False) -> list[tuple[str, tuple, Config]]:
    """(kernel, stage, configuration) of every candidate kernel="auto" times on these operands (out=None):
    `dispatch.candidates` x each one's `problem_configs`, as tune="exact" times them; every_staging: also the
    stagings tune="exact" skips as too dear (the sweep's candidates, which the cost model is fitted on)."""
    from triton_kernels import dispatch
    from triton_kernels.common import problem_configs
    from triton_kernels.variants import BY_KERNEL, kernel_module

    m, k = a.shape
    n = b.shape[1]
    sms = dispatch.sm_count(a)
    pairs = dispatch.candidates(m, n, k, dispatch.device_arch(a), sms, a, b, None, every_staging)
    return [(kern, stage, cfg) for kern, stage in pairs for cfg in problem_configs(kernel_module(BY_KERNEL[kern]), m, n,
                                                                                   k, sms)]


def _jobs(todo: list, every_staging: bool = False) -> list[tuple[int, str, tuple, str]]:
    """(case index, kernel, stage, configuration name) of every candidate configuration of every case: what the
    timing will run."""
    jobs = []
    for i, (dtype, acc, layout, shape) in enumerate(todo):
        a, b = _operands(dtype, layout, shape, i)
        jobs += [(i, kern, stage, cfg.name) for kern, stage, cfg in candidate_plans(a, b, every_staging)]
        del a, b
    return jobs


def _warm_worker(job_share: list, queue) -> None:
    """Run each job once (a launch compiles its kernel into Triton's disk cache; configurations that do not fit
    the device are skipped, as the timing skips them)."""
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import OutOfResources, PTXASError

    from triton_kernels import dispatch
    from triton_kernels.common import Config
    from triton_kernels.plan_table import Plan

    last = None
    for (dtype, acc, layout, shape), i, kern, stage, cfg in job_share:
        if last is None or last[0] != i:
            a, b = _operands(dtype, layout, shape, i)
            last = (i, a, b, torch.empty((shape[0], shape[1]), dtype=a.dtype, device="cuda"))
        _, a, b, c = last
        try:
            dispatch.Runner(Plan(kern, Config.from_name(cfg), tuple(stage)), acc == "fp16")(a, b, c)
        except (OutOfResources, PTXASError, CompilationError):
            pass  # does not fit the device: the timing skips it too
        except Exception as e:  # noqa: BLE001 - the timing meets it again and reports it; warming goes on
            print(f"tune: warming {kern} {cfg} on case {i}: {type(e).__name__}: {e}", flush=True)
        queue.put(1)
    torch.cuda.synchronize()


def warm(todo: list, workers: int, log=print, every_staging: bool = False) -> None:
    """Compile every case's candidate configurations (every_staging: `candidate_plans`') in `workers` processes
    (compare/parallel.py). A configuration goes to one worker for all the cases that use it, so no two workers
    compile the same kernel for the same specialization."""
    from .parallel import run_shares, shares_by

    if workers <= 1 or not todo:
        return
    jobs = [(todo[i], i, kern, stage, cfg) for i, kern, stage, cfg in _jobs(todo, every_staging)]
    run_shares(_warm_worker, shares_by(jobs, lambda j: j[2:], workers), "tune: compiled", log)


class _Checker:
    """Whether a plan computes A @ B on the case's own operands, within the harness's error bound (checked against
    the fp32 reference, made on first use): the tuner keeps no plan it has not checked (BENCHMARKING.md: never a
    time for a wrong answer). `failed`: the kernels of the plans that did not."""

    def __init__(self, a: torch.Tensor, b: torch.Tensor, acc: str):
        self.a, self.b, self.acc = a, b, acc
        self.ref = self.bound = None
        self.failed: set[str] = set()

    def __call__(self, plan) -> bool:
        from triton_kernels import dispatch

        from .reference import compare, error_bound, reference

        if self.ref is None:
            self.ref = reference(self.a, self.b)
            self.bound = error_bound(self.a, self.b, self.ref, self.acc)
        out = torch.full_like(self.ref, float("nan"), dtype=self.a.dtype)
        dispatch.Runner(plan, self.acc == "fp16")(self.a, self.b, out)
        verdict = compare(out, self.ref, self.bound)
        if not verdict.ok:
            self.failed.add(plan.kernel)
            print(f"tune: {plan.name} fails the check: {verdict}", flush=True)
        return verdict.ok


def time_case(dtype: str, acc: str, layout: str, shape, seed: int) -> CaseResult:
    from hgemm_common.validation import DTYPE_NAMES
    from triton_kernels import dispatch, plan_table
    from triton_kernels.plan_table import Plan

    a, b = _operands(dtype, layout, shape, seed)
    m, n, k = shape
    c = torch.empty((m, n), dtype=a.dtype, device="cuda")
    facts = dispatch.key_of(a, b, None, acc)
    with dispatch.kept_timings() as timed:
        best, every = dispatch.time_auto(a, b, c, None, acc, facts, dispatch.device_arch(a))
    correct = _Checker(a, b, acc)
    if not correct(best):  # the fastest candidate that computes the product instead
        for kern, stage, cfg, ms in sorted(every, key=lambda t: t[3]):
            plan = Plan(kern, cfg, stage, ms, source="exact")
            if correct(plan):
                best = plan
                break
        else:
            raise HgemmError(f"tune: no candidate computes {dtype} {layout} {m}x{n}x{k} correctly")
    kernels = {}
    for kern, stage, cfg, ms in every:
        if not any(stage) and (kern not in kernels or ms < kernels[kern][1]) and kern not in correct.failed:
            kernels[kern] = (cfg.name, ms)
    cls = plan_table.shape_class(a, b, None, DTYPE_NAMES[a.dtype], acc)
    records = tune_records(timed, a, b, dtype, acc, layout, f"tune/{dtype}/{acc}/{layout}/{m}x{n}x{k}")
    kept = {k: best.as_json()[k] for k in ("kernel", "config", "stage")}
    for r in records:  # the tuner checks the plans it keeps: the other times are recorded as unchecked
        if r["call"]["kernel"] in correct.failed:
            r.update(status="failed check", ms=None)
        elif r["call"] != kept:
            r["status"] = "unchecked"
    return CaseResult(dtype, acc, layout, shape, cls.key, best.as_json(), kernels, records)


# Where run_tune writes every configuration's time (`--timings`): a side file, so the table stays small.
DEFAULT_TIMINGS = "tune_timings.jsonl"
# Warm-up and repetition milliseconds of each timing in the tuner: a grid of a hundred cases times some 4,000
# (kernel, configuration) pairs, and 5 ms of repetitions (after a 1 ms warm-up: twenty calls of a 0.2 ms problem,
# flush included) ranks them; the close ones are timed again in interleaved rounds (dispatch.refine) either way.
TUNE_TIMING_MS = (1.0, 5.0)


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def settle(results: list[CaseResult], log=print) -> dict[str, dict]:
    """Per class, the entry: the single case's winner, or among several cases' winners the one with the best
    geometric mean of (its time / the case's best time), each winner timed on each case of the class."""
    from triton_kernels import dispatch
    from triton_kernels.plan_table import Plan

    by_cls: dict[str, list[CaseResult]] = {}
    for r in results:
        by_cls.setdefault(r.cls, []).append(r)
    entries = {}
    for key, rs in by_cls.items():
        winners = list({json.dumps(r.best, sort_keys=True): r.best for r in rs}.values())
        if len(winners) == 1:
            chosen = winners[0]
        else:
            scores = []
            for w in winners:
                plan = Plan.from_json(w)
                rel = []
                for i, r in enumerate(rs):
                    a, b = _operands(r.dtype, r.layout, r.shape, i)
                    c = torch.empty((r.shape[0], r.shape[1]), dtype=a.dtype, device="cuda")
                    run = dispatch.Runner(plan, r.acc == "fp16")
                    rel.append(dispatch.time_ms(lambda: run(a, b, c)) / r.best["ms"])
                scores.append(_geomean(rel))
            chosen = winners[min(range(len(winners)), key=scores.__getitem__)]
            log(f"tune: {key}: {len(winners)} winners over {len(rs)} shapes, kept {chosen['kernel']} "
                f"{chosen['config']} (geomean {min(scores):.3f} of each shape's best)")
        kernels = {}
        for kern in {k for r in rs for k in r.kernels}:  # each kernel's configuration: its best on most shapes
            names = [r.kernels[kern][0] for r in rs if kern in r.kernels]
            kernels[kern] = max(set(names), key=names.count)
        entries[key] = {"plan": chosen, "kernels": dict(sorted(kernels.items())),
                        "shapes": sorted({f"{r.shape[0]}x{r.shape[1]}x{r.shape[2]}" for r in rs})}
    return entries


def write_table(path: Path, entries: dict, env: dict, earlier_runs: list | None = None,
                timings: dict | None = None) -> None:
    """The table as JSON, written atomically. Its header names this run (device, versions, commit, date,
    command); `runs` lists every run whose entries the file holds, oldest first (a merge keeps the older runs'),
    each with where its per-configuration times went (`timings`: file name, run id, records), which the table itself
    does not hold."""
    from triton_kernels.plan_table import FORMAT

    p = torch.cuda.get_device_properties(0)
    data = {"format": FORMAT, "kind": "tensorcore_hgemm plan table",
            "about": "kernel='auto' plans per shape class for one GPU, made by `python -m compare tune`; remake it "
                     "with the command below on the GPU it is for (see triton_kernels/plan_table.py)",
            "device": {"name": p.name, "arch": p.major * 10 + p.minor, "sms": p.multi_processor_count},
            "versions": {"torch": env["torch"], "triton": env["triton"], "cuda": env.get("cuda_runtime"),
                         "driver": env.get("driver")},
            "commit": env["git_commit"], "date": env["date"], "command": env["command"],
            "runs": [*(earlier_runs or []), {**{k: env[k] for k in ("git_commit", "date", "command")},
                                             **({"timings": timings} if timings else {})}],
            "entries": dict(sorted(entries.items()))}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def default_out() -> Path:
    from triton_kernels.plan_table import TABLE_DIR

    p = torch.cuda.get_device_properties(0)
    name = p.name.lower().replace("nvidia ", "").replace(" ", "-")
    return TABLE_DIR / f"{name}-sm{p.major}{p.minor}-{p.multi_processor_count}.json"


def run_tune(grid_name: str, dtypes: list[str], accs: list[str], out: Path | None, workers: int,
             merge: bool = True, log=print, timings: Path = Path(DEFAULT_TIMINGS)) -> Path:
    """Time the grid, settle each class's plan and write the table to `out`; every configuration's time goes to
    `timings` as it is measured (JSON lines, `compare.sweep`'s candidate records, appended: what `python -m compare
    sweep --fit` reads)."""
    from triton_kernels import plan_table

    from .envinfo import environment

    env = environment()
    grid = GRIDS[grid_name]()
    todo = cases(grid, dtypes, accs)
    out = Path(out) if out else default_out()
    log(f"tune: {len(todo)} cases ({grid_name} grid, {','.join(dtypes)}, acc {','.join(accs)}) -> {out}, every "
        f"configuration's time -> {timings}")
    run_id = f"tune-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    append(timings, [{"type": "run", "run": run_id, "environment": env, "source": "tune",
                      "args": {"grid": grid_name, "dtypes": dtypes, "accs": accs, "table": str(out)}}])
    t0 = time.time()
    warm(todo, workers, log)
    log(f"tune: compiled in {time.time() - t0:.0f} s; timing")
    results, t1 = [], time.time()
    kept = 0
    for i, case in enumerate(todo):
        with timing(*TUNE_TIMING_MS):
            results.append(time_case(*case, seed=i))
        r = results[-1]
        append(timings, [{**x, "run": run_id} for x in r.timings])
        kept += len(r.timings)
        eta = (time.time() - t1) / (i + 1) * (len(todo) - i - 1)
        log(f"tune: [{i + 1}/{len(todo)}] {r.dtype} {r.acc} {r.layout} {r.shape[0]}x{r.shape[1]}x{r.shape[2]}: "
            f"{r.best['kernel']} {r.best['config']} {r.best['ms'] * 1e3:.1f} us  (ETA {eta:.0f} s)")
    entries = settle(results, log)
    earlier = []
    if merge and out.exists():  # classes this run did not time keep their entries
        try:
            old = json.loads(out.read_text())
            entries = {**old["entries"], **entries}
            earlier = old.get("runs") or [{"git_commit": old["commit"], "date": old["date"], "command": old["command"]}]
        except (OSError, ValueError, KeyError) as e:
            log(f"tune: not merging with {out}: {e}")
    write_table(out, entries, env, earlier, {"file": timings.name, "run": run_id, "records": kept})
    plan_table.clear_tables()
    log(f"tune: wrote {len(entries)} classes to {out} and {kept} timings to {timings} in {time.time() - t0:.0f} s")
    return out
