"""The main job (`python -m compare`): check, bench, frame, plots and inspect into one folder with index.md."""
from __future__ import annotations

import json
import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from hgemm_common.errors import HgemmError, error_line

from . import bench as bench_mod
from . import check as check_mod
from .envinfo import environment


def _md_table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def check_markdown(rows) -> str:
    by = {}
    for r in rows:
        by.setdefault(r.kernel, []).append(r)
    out = []
    for name, rs in by.items():
        ex = [r for r in rs if r.inputs == "int"]
        rn = [r for r in rs if r.inputs == "randn"]
        ratios = [r.err_vs_torch for r in rn if r.err_vs_torch is not None]
        rms = [r.rms_vs_torch for r in rn if r.rms_vs_torch is not None]
        bad = next((r for r in rs if not r.ok), None)
        out.append([f"`{name}`", f"{sum(r.ok for r in ex)}/{len(ex)}", f"{sum(r.ok for r in rn)}/{len(rn)}",
                    f"{max((r.max_abs_err for r in rn), default=float('nan')):.3g}",
                    f"{max(ratios):.2f}" if ratios else "-", f"{max(rms):.2f}" if rms else "-",
                    "" if bad is None else f"{bad.shape} {bad.layout}: {bad.detail[:80]}"])
    return _md_table(["kernel", "exact (int) checks", "random checks", "max abs err", "err / torch err",
                      "rms err / torch", "first failure"], out)


def fewer_checks_note(rows, kernels, interpreter: bool = False) -> str:
    """A sentence naming the kernels with fewer check rows than the others and why: a record that refuses operands
    its loads cannot describe (`misaligned="refuse"`: the TMA kernels) is run only on the cases whose operands it
    takes (`Kernel.accepts`); under the interpreter (`interpreter`), a kernel `check.interpreter_limit` names runs
    the small cases only; "" when every kernel ran every case."""
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.kernel] = counts.get(r.kernel, 0) + 1
    most = max(counts.values(), default=0)
    fewer = [k for k in kernels if 0 < counts.get(k.name, 0) < most]
    if not fewer:
        return ""
    limited = [k for k in fewer if interpreter and check_mod.interpreter_limit(k)]
    refusing = [k for k in fewer if k.record.misaligned == "refuse" and k not in limited]
    other = [k for k in fewer if k.record.misaligned != "refuse" and k not in limited]
    names = lambda ks: ", ".join(f"`{k.name}`" for k in ks)  # noqa: E731
    parts = [f"{names(limited)} show fewer checks: {check_mod.interpreter_limit(limited[0])}"] if limited else []
    if refusing:
        parts.append(f"{names(refusing)} show fewer checks: TMA describes only operands with 16-byte aligned bases "
                     "and rows and a unit inner stride, and these kernels refuse the others by design (their records' "
                     "`misaligned=\"refuse\"`; `hgemm(kernel=\"auto\")` runs another kernel there), so the check runs "
                     "them on the cases whose operands TMA can describe")
    if other:
        parts.append(f"{names(other)} show fewer checks: cases outside what their records support are skipped")
    return "; ".join(parts) + "."


def bench_markdown(rows) -> str:
    out = []
    for r in rows:
        out.append([f"{r.m}x{r.n}x{r.k}", f"`{r.kernel}`", f"{r.tflops:.1f}" if r.tflops else "-",
                    f"{r.ratio_to_torch:.3f}" if r.ratio_to_torch else "-",
                    f"{r.spread_pct:.1f}%" if r.spread_pct is not None else "-",
                    f"{r.pct_of_ceiling:.0f}%" if r.pct_of_ceiling else "-",
                    f"{r.hbm_pct:.0f}%" if r.hbm_pct else "-",
                    f"{r.wall_us:.1f}" if r.wall_us else "-",
                    f"{r.wall_ratio_to_torch:.3f}" if r.wall_ratio_to_torch else "-",
                    r.config if r.status == "ok" else f"{r.status}: {r.detail[:60]}"])
    return _md_table(["shape", "kernel", "TFLOPS", "x torch.matmul", "spread (p10-p90)", "% of its ceiling", "% HBM",
                      "wall us/call", "wall x torch.matmul", "config / status"], out)


def summary_markdown(rows) -> str:
    """bench.kernel_stats as a table (torch.matmul's spread beside the kernels'), then the A/A verdict."""
    out = [[f"`{x.kernel}`", f"{x.geomean:.3f}", f"{x.p10:.3f}", f"{x.min:.3f}", f"{x.share:.0%}",
            f"{x.wall:.3f}" if x.wall is not None else "-",
            f"{x.spread_pct:.1f}%" if x.spread_pct is not None else "-", f"{x.shapes}/{x.of}"]
           for x in bench_mod.kernel_stats(rows)]
    return _md_table(["kernel", "geomean x torch.matmul (device)", "p10", "min", f">= {bench_mod.SHARE_AT}x",
                      "geomean x torch.matmul (wall per call)", "median spread", "shapes timed"], out) + \
        f"\n\n{bench_mod.aa_verdict(rows).line}"


def verdict_line(rows) -> str:
    """The first line of a bench section of the report: the A/A verdict, in bold when the run is unreliable."""
    v = bench_mod.aa_verdict(rows)
    return v.line if v.reliable else f"**{v.line}**"


@dataclass
class Result:
    """What the main job found: failures (a check, a timing check, the probes, a phase that raised) and sections it
    could not run here."""
    failures: list[str] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)  # seconds per phase
    failed_phases: dict[str, str] = field(default_factory=dict)  # phase -> its error, one line

    @property
    def ok(self) -> bool:
        return not self.failures


class _Phases:
    """Wall time of each phase of the main job, printed as it ends ("phase check: 12.3 s") and kept for the
    report."""

    def __init__(self, result: Result, log):
        self.result, self.log = result, log

    @contextmanager
    def __call__(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            dt = self.result.phases[name] = time.perf_counter() - t0
            self.log(f"phase {name}: {dt:.1f} s")

    @contextmanager
    def guard(self, name: str):
        """A phase after the check, timed like the others: an exception it raises ends that phase only. It is kept
        (`Result.failed_phases`, a failure, so the exit status is non-zero) and the job goes on to the next phase:
        one broken auxiliary part (a demangler's spelling in inspect) must not cost the rest of the report."""
        with self(name):
            try:
                yield
            except Exception as e:  # noqa: BLE001 - reported in index.md and the exit status, not swallowed
                line = error_line(e)
                self.result.failed_phases[name] = line
                self.result.failures.append(f"phase {name} failed: {line}")
                self.log(f"phase {name} FAILED: {line}")


def failed_phases_markdown(failed: dict[str, str]) -> list[str]:
    """index.md's first section when a phase raised: which, and its error; the phases after it still ran."""
    if not failed:
        return []
    return ["## Failed phases", "", "These phases raised; every other phase ran, and its section is below.", "",
            *(f"- `{name}`: {line}" for name, line in failed.items()), ""]


# Timed GPU milliseconds per kernel and shape in the main job: 3 interleaved rounds still give each 1 ms kernel about
# 100 samples. `python -m compare bench` defaults to 300 for closer looks.
MAIN_JOB_BUDGET_MS = 100.0
LADDER_SHAPE = (4096, 4096, 4096)  # every step of every ladder is timed here (the ladder plot)
# What the main job times: torch.matmul and the recommended entries (Triton's choice and each family's best) over
# SUITE, every default entry at LADDER_SHAPE, and short bf16 and 2:4 sparse sections. --full: every default entry over
# the whole --suite, the whole bf16 and sparse suites.
SUITE = "main"
BF16_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (16, 4096, 4096), (3000, 5000, 2000)]
SPARSE_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192)]
# The phases whose output the study page draws on: when one fails, the page goes without it and says so.
STUDY_INPUTS = ("inspect", "fragment maps", "bench", "ladder", "bench (bf16)")
SECONDS_PER_TIMED = 0.35  # per (entry, shape) at the default budget: check, estimate, rounds, wall-time calls
# The main job's random section (GPU only): a small draw of the random suite (`bench --suite random`) for the
# recommended entries, at a budget that keeps it to seconds. A fixed seed, so that reports compare; it is a picture
# of where each family wins and loses, not an acceptance run (those use seeds of their own, with --count 200).
MAIN_RANDOM_SEED = 45
MAIN_RANDOM_COUNT = 16
MAIN_RANDOM_BUDGET_MS = 10.0


@dataclass
class BenchPlan:
    """The main job's timing: (entries, shapes) groups per section, and an estimate of how long they take."""
    suite: list
    ladder: list
    bf16: list
    sparse: list
    random: list = field(default_factory=list)

    @staticmethod
    def _pairs(groups) -> int:
        return sum(len(bench_mod.with_control(e)) * len(s) for e, s in groups)  # the A/A control is timed too

    def count(self) -> int:
        return self._pairs((*self.suite, *self.ladder, *self.bf16, *self.sparse, *self.random))

    def eta_s(self, budget_ms: float) -> float:
        # each pair's timed budget and its wall-time calls (a quarter more) move with the budget
        def per(budget):
            return SECONDS_PER_TIMED + 1.25 * (budget - MAIN_JOB_BUDGET_MS) / 1e3
        return (self._pairs((*self.suite, *self.ladder, *self.bf16, *self.sparse)) * per(budget_ms)
                + self._pairs(self.random) * per(MAIN_RANDOM_BUDGET_MS))


def bench_plan(full: bool, suite: str, nvcc: bool) -> BenchPlan:
    from . import registry

    def usable(kernels):
        return [k for k in kernels if nvcc or k.package != "ptx"]

    every = usable(registry.select(None))
    every_b = usable(registry.select(None, dtype="bf16"))
    sparse = registry.select(None, kind="sparse") if nvcc else []

    def picked(kernels):
        return [k for k in kernels if k.package == "torch" or (k.record.recommended and k.acc == "fp32")]
    rand = [(picked(every), bench_mod.random_shapes(MAIN_RANDOM_SEED, MAIN_RANDOM_COUNT))]
    if full:
        return BenchPlan([(every, bench_mod.SUITES[suite])], [], [(every_b, bench_mod.SUITES["bf16"])],
                         [(sparse, bench_mod.SUITES["sparse"])] if sparse else [], rand)
    ladder = [k for k in every if k.package != "torch" and not picked([k])]
    return BenchPlan([(picked(every), bench_mod.SUITES[suite])],
                     [(every[:1] + ladder, [LADDER_SHAPE])] if ladder else [],
                     [(picked(every_b), BF16_SHAPES)], [(sparse, SPARSE_SHAPES)] if sparse else [], rand)


def _warm_jobs(plan: BenchPlan) -> list[tuple]:
    """(entry, kind, M, N, K, layout, dtype) of every Triton entry the bench will time, and of Triton's automatic
    choice on the model phase's GEMMs (its nn.Linear calls: x W^T, B column-major): run once beside the check
    (compare.parallel.warm_one), so that the timing and the model load compiled kernels."""
    from .model import SIZES

    jobs = [("triton", "dense", m, n, k, "NT", "fp16") for m, n, k in SIZES["issue"].linear_shapes()]
    for groups, dtype in ((plan.suite + plan.ladder + plan.random, "fp16"), (plan.bf16, "bf16")):
        for entries, shapes in groups:
            for k in entries:
                if k.package == "triton":
                    jobs += [(k.name, "dense", *s[:3], s[3] if len(s) > 3 else "NN", dtype) for s in shapes]
    return list(dict.fromkeys(jobs))


def _timed(groups, progress, label: str, **kw) -> list:
    """bench_shape over each (entries, shapes) group, a progress line per shape."""
    rows, shapes = [], [(entries, s) for entries, ss in groups for s in ss]
    show = progress(label) if progress else None
    seed0 = kw.pop("seed0", 0)
    for i, (entries, s) in enumerate(shapes):
        m, n, k, *lay = s
        rows += bench_mod.bench_shape(entries, m, n, k, layout=lay[0] if lay else "NN", seed=seed0 + i, **kw)
        if show:
            show(i + 1, len(shapes))
    return rows


def _start_build(result: Result, log) -> threading.Thread:
    """The hand-written kernels' extension, built in a thread of this process (`ptx_kernels.load`: its nvcc processes
    on every core), then its on-demand kernels (`load(on_demand=True)`, which the check runs too); each phase's time
    and any failure go into `result`. Join it before reading them."""
    def build():
        import ptx_kernels

        for phase, what, on_demand in (("build (beside the check)", "the PTX extension", False),
                                       ("on-demand build (beside the check)", "the PTX on-demand kernels", True)):
            t0 = time.perf_counter()
            try:
                ptx_kernels.load(on_demand=on_demand)
            except Exception as e:  # noqa: BLE001 - a thread's exception would be lost: the report names it
                first = str(e).splitlines()[0] if str(e) else type(e).__name__
                result.failures.append(f"{what} did not build: {first}")
                return
            finally:
                result.phases[phase] = time.perf_counter() - t0
                log(f"phase {phase}: {result.phases[phase]:.1f} s")

    thread = threading.Thread(target=build, name="ptx build")
    thread.start()
    return thread


def _start_layouts(out: Path, nice: int = 0):
    """`python -m compare layouts --out out` (the model's fragment maps) in a child process, `nice` added to its
    priority; `_finish_layouts`."""
    import os
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "compare", "layouts", "--out", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if nice:
        os.setpriority(os.PRIO_PROCESS, proc.pid, nice)
    return proc


def _draw_plots(out: Path, random: bool) -> tuple[list[Path], list[Path], list[Path]]:
    """The benches' figures (compare.plot.plot_all): the main bench's, bf16's, and the random draw's where it ran."""
    from .plot import plot_all

    return (plot_all(out / "bench.json", out), plot_all(out / "bf16" / "bench.json", out / "bf16"),
            plot_all(out / "random" / "bench.json", out / "random") if random else [])


def _start_plots(out: Path, random: bool):
    """`_draw_plots` in a child process (spawned, at the lowest priority: the model phase times beside it). Its
    future's result() is the figures, or raises what the child raised."""
    import multiprocessing as mp
    import os
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn"), initializer=os.nice,
                               initargs=(19,))
    future = pool.submit(_draw_plots, out, random)
    pool.shutdown(wait=False)  # the child goes on drawing; the pool ends with it
    return future


def _finish_layouts(proc, out: Path) -> None:
    """Waits for the child; if it failed, an HgemmError with its last line (the whole stderr in out/layouts.log)."""
    from .disasm import child_failed

    _, err = proc.communicate()
    if proc.returncode != 0:
        child_failed(proc.returncode, err, out / "layouts.log")


def run(out: Path, *, gpu: bool, suite: str = SUITE, budget_ms: float = MAIN_JOB_BUDGET_MS, progress=None,
        log=lambda line: None, full: bool = False, workers: int | None = None) -> Result:
    from ptx_kernels import toolchain

    from . import disasm
    from . import frame as frame_mod
    from . import registry
    from .envinfo import Sampler
    from .parallel import default_workers

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    result = Result()
    phase = _Phases(result, log)
    t_start = time.perf_counter()
    nvcc = toolchain.find_nvcc() is not None
    # BUILD before anything else takes the CPU: the check's workers run their Triton cases meanwhile and wait for
    # the extension only for the PTX ones (ptx_kernels.load's lock), so it starts first and keeps every core.
    builder = _start_build(result, log) if gpu and nvcc else None
    # Inspect compiles on the CPU (nvcc, ptxas) while the check and the bench keep the GPU busy: a child process
    # from the start, collected at the end, at the lowest priority, so that it takes no core from the build or the
    # check (it has until the end of the bench; they are waited for).
    (out / "inspect" / "inspect.json").unlink(missing_ok=True)  # an earlier run's rows are not this run's
    inspect_job = disasm.start(out / "inspect", nice=19)
    # The fragment maps of the model (matplotlib, no GPU) likewise: drawn in a child from the start, on the core the
    # check's interpreter leaves free (on a GPU at the lowest priority, beside the build). The probes, which need
    # this process's GPU, add their section at the end (layouts.add_hardware).
    probes = gpu and nvcc
    layouts_job = _start_layouts(out / "layouts", nice=19 if gpu else 0)
    env = environment()
    md = ["# tensorcore-hgemm report", "", f"Produced by `{env['command']}` on {env.get('gpu') or 'a machine without a GPU'}"
          f", {env['date']}, commit `{env['git_commit']}` (torch {env['torch']}, triton {env['triton']}"
          + (f", driver {env.get('driver')}, CUDA {env.get('cuda_runtime')}" if gpu else "") + ").", ""]
    header = len(md)  # a failed phase is named right below the header

    # BUILD, then COMPILE AHEAD: every Triton kernel the check and the bench will run, once, in worker processes
    kernels = registry.select(None)
    if gpu and not nvcc:
        kernels = [k for k in kernels if k.package != "ptx"]
        result.not_run.append("the hand-written PTX kernels' checks and timings need nvcc (the CUDA toolkit) to "
                              "build them")
    elif not gpu:
        result.not_run.append("the hand-written PTX kernels' checks, all timing and the plots need a CUDA GPU")
    plan = bench_plan(full, suite, nvcc) if gpu else None
    if gpu:
        log(f"main job: {plan.count()} timed (kernel, shape) pairs, about {plan.eta_s(budget_ms):.0f} s of timing"
            + ("" if full else "; --full times every kernel over the whole suites"))
    bkernels = [k for k in registry.select(None, dtype="bf16") if gpu and (nvcc or k.package != "ptx")
                or k.package == "triton"]
    if gpu:
        # The check's cases spread over worker processes (compiles side by side), with the bench's Triton entries
        # run once there too; meanwhile the build started above goes on (the workers' PTX pass waits for its lock).
        with phase("build + check"):
            checked = check_mod.run_check_parallel({"fp16": kernels, "bf16": bkernels}, dtypes=("fp16", "bf16"),
                                                   workers=workers or default_workers(), warm=_warm_jobs(plan),
                                                   progress=progress, during=builder and builder.join)
        rows, names, mat = checked["fp16"]
        crows_b = checked["bf16"][0]
    else:
        with phase("check"):
            rows, names, mat = check_mod.run_check(kernels, gpu=gpu, progress=progress and progress("check"))
        with phase("check (bf16)"):
            crows_b, _, _ = check_mod.run_check(bkernels, gpu=gpu, dtype="bf16")
    failed = [r for r in rows if not r.ok]
    if failed:
        result.failures.append(f"{len(failed)} of {len(rows)} checks failed")
    (out / "check.json").write_text(json.dumps({"environment": env, "rows": [r.as_dict() for r in rows],
                                                "pairwise": {"kernels": names, "max_abs_diff": mat}}, indent=1))
    md += ["## Correctness", "",
           ("Every kernel against the high-precision reference (fp32 cuBLAS with TF32 off on the GPU, float64 on "
            "the CPU): exact checks on small-integer inputs (bit-for-bit), bound checks on random inputs, outputs "
            "poisoned with NaN first. Cases (shape, layout, inputs): "
            + ", ".join(f"{m}x{n}x{k} {lay} {kind}" for (m, n, k), lay, kind in check_mod.cases_for(gpu)) + "."
            + ("" if gpu else " Triton ran under the interpreter (TRITON_INTERPRET=1).")),
           "", check_markdown(rows), "", f"{len(rows) - len(failed)} of {len(rows)} checks passed.", ""]
    note = fewer_checks_note(rows, kernels, interpreter=not gpu)
    md += [note, ""] if note else []
    bad = [r for r in crows_b if not r.ok]
    if bad:
        result.failures.append(f"{len(bad)} of {len(crows_b)} bf16 checks failed")
    (out / "bf16").mkdir(exist_ok=True)
    (out / "bf16" / "check.json").write_text(json.dumps({"environment": env,
                                                         "rows": [r.as_dict() for r in crows_b]}, indent=1))
    md += ["## bf16 checks", "", "The kernels that take bf16 (A, B and C bf16, fp32 accumulation), checked like the "
           "fp16 ones (integers are exact in bf16 too)" + ("" if gpu else ", Triton under the interpreter, on what "
           "bf16 adds: " + ", ".join(f"{m}x{n}x{k} {lay} {kind}" for (m, n, k), lay, kind
                                     in check_mod.cases_for(gpu, dtype="bf16"))) + ".", "",
           check_markdown(crows_b), "", f"{len(crows_b) - len(bad)} of {len(crows_b)} bf16 checks passed.", ""]
    note = fewer_checks_note(crows_b, bkernels, interpreter=not gpu)
    md += [note, ""] if note else []

    # BENCH + FRAME + PLOTS
    if gpu:
        timer = bench_mod.Timer()
        frame, ceilings = {}, None
        brows, lrows, brows_b, srows, rrows = [], [], [], [], []
        with Sampler() as sampler:
            with phase.guard("frame"):
                frame = frame_mod.measure(timer)
                ceilings = frame_mod.ceilings(frame)
            common = dict(budget_ms=budget_ms, timer=timer, ceilings=ceilings, copy_gb_s=frame.get("copy_gb_s"))
            with phase.guard("bench"):
                brows = _timed(plan.suite, progress, "bench", **common)
            with phase.guard("ladder"):
                lrows = _timed(plan.ladder, progress, "ladder", seed0=50, **common)
            with phase.guard("bench (bf16)"):
                brows_b = _timed(plan.bf16, progress, "bench (bf16)", seed0=200, dtype="bf16", **common)
            with phase.guard("bench (2:4 sparse)"):
                srows = _timed(plan.sparse, progress, "bench (2:4 sparse)", seed0=100, kind="sparse", **common)
            with phase.guard("bench (random)"):
                rrows = _timed(plan.random, progress, "bench (random)", seed0=300,
                               **{**common, "budget_ms": MAIN_RANDOM_BUDGET_MS})
        env["during_run"], env["frame"] = sampler.summary(), frame
        bench_mod.write_bench(out, env, brows + lrows)
        env_r = {**env, "suite": {"name": "random", "seed": MAIN_RANDOM_SEED, "count": MAIN_RANDOM_COUNT,
                                  "layouts": list(bench_mod.LAYOUTS)}}
        for sub, rs, e in (("bf16", brows_b, env), ("sparse", srows, env), ("random", rrows, env_r)):
            (out / sub).mkdir(exist_ok=True)
            bench_mod.write_bench(out / sub, e, rs)
        sections = (("", brows + lrows), ("bf16 ", brows_b), ("sparse ", srows), ("random-shape ", rrows))
        for what, rs in sections:
            bad = [r for r in rs if r.status in ("failed check", "error")]
            if bad:
                result.failures.append(f"{len(bad)} {what}timing runs failed their check or raised")
        unreliable = [what.strip() or "main" for what, rs in sections if rs and not bench_mod.aa_verdict(rs).reliable]
        if unreliable:  # said under the title: the first line a reader sees
            md.insert(1, f"\n**UNRELIABLE TIMING** in the {', '.join(unreliable)} bench(es): the A/A control "
                         "(torch.matmul timed twice) left its band; see the first line of each section below.")
        log(bench_mod.aa_verdict(brows + lrows).line)
        # PLOTS (matplotlib, no GPU) in a child process beside the model phase below, collected before the
        # speed section is written (`speed_at`: it goes where the benches' sections belong)
        plots = _start_plots(out, random=bool(rrows))
        speed_at = len(md)

        def speed_sections(pngs, pngs_b, pngs_r) -> list[str]:
            sp = []  # the speed sections
            suite_names = f"the `{suite}` suite" + ("" if full else " (recommended entries: each family's best)")
            sp += ["## Speed", "", verdict_line(brows + lrows), "",
                   f"Device time: medians of CUDA-event timings, per call and interleaved (each pass calls every "
                   f"kernel once, the first one rotating from pass to pass, the GPU queue kept full by a sleep ahead), "
                   f"L2 flushed before every call (256 MB written and read back, so no dirty lines are left for the "
                   f"timed call to write back), random inputs checked before timing; NN layout. `{bench_mod.CONTROL}` "
                   f"is the A/A control: torch.matmul timed a second time, whose ratio is the noise of every ratio "
                   f"here. Spread: p10 to p90 of a row's samples over its median. Wall time: microseconds per call of "
                   f"back-to-back calls from Python (host clock between two synchronizations, no GPU sleep ahead: "
                   f"validation, dispatch, descriptors and launch count), in the same rounds. % HBM: A, B and C moved "
                   f"once over the device time, against the measured copy bandwidth. Physical frame measured in the "
                   f"same run: " + (f"{frame_mod.describe(frame)}, device copy {frame['copy_gb_s']:.0f} GB/s"
                                    if frame else "not measured (the frame phase failed)")
                   + f". Clocks and power during the run: {env['during_run']}.", "",
                   f"### Geometric mean over {suite_names}", "", summary_markdown(brows), "",
                   *(f"![{p.stem}]({p.name})\n" for p in pngs), "### Every measurement", "", bench_markdown(brows), "",
                   *(["### Every ladder step at " + "x".join(map(str, LADDER_SHAPE)), "", bench_markdown(lrows), ""]
                     if lrows else []),
                   "Raw numbers: `bench.csv`, `bench.json` (with the environment).", ""]
            gaps = bench_mod.dtype_gaps(brows + lrows, brows_b)
            sp += ["## bf16 beside fp16", "", verdict_line(brows_b), "",
                   "Timed against torch.matmul in bf16, same timing. % of ceiling is against the fp16 instruction "
                   "ceilings of the frame (the frame measures fp16 operands).", "", summary_markdown(brows_b), "",
                   *(f"![{p.stem}](bf16/{p.name})\n" for p in pngs_b),
                   "### Ratio to torch.matmul: fp16 vs bf16 (each against torch in its own dtype)", "",
                   _md_table(["kernel", "shape", "fp16 x torch", "bf16 x torch", "bf16 - fp16"],
                             [[f"`{kn}`", sh, f"{x:.3f}", f"{y:.3f}", f"{y - x:+.3f}"] for kn, sh, x, y in gaps]), "",
                   bench_markdown(brows_b), "", "Raw numbers: `bf16/bench.csv`, `bf16/bench.json`, `bf16/check.json`.",
                   ""]
            if srows:
                sp += ["## 2:4 sparse", "", verdict_line(srows), "",
                       "A pruned 2:4 along K (the two largest magnitudes of every 4), the same pruned A for every "
                       "kernel: dense torch.matmul on it (the ratios' base), the dense PTX kernel of each sparse "
                       "kernel's ladder, torch.sparse.to_sparse_semi_structured (cuSPARSELt where torch has it; "
                       "skipped with the reason where its shape rules refuse), and the sparse PTX kernels (compressed "
                       "once, untimed). TFLOPS count the dense 2 M N K; % ceiling is against the sparse instruction "
                       "ceilings of the frame above. Same timing as the dense bench.", "", summary_markdown(srows),
                       "", bench_markdown(srows), "",
                       "Raw numbers: `sparse/bench.csv`, `sparse/bench.json`.", ""]
            if rrows:
                sp += ["## Random shapes", "", verdict_line(rrows), "",
                       f"{MAIN_RANDOM_COUNT} shapes of the random suite, seed {MAIN_RANDOM_SEED} (`python -m compare "
                       f"bench --suite random --seed {MAIN_RANDOM_SEED} --count {MAIN_RANDOM_COUNT}`): M log-uniform "
                       "in 1..16384, N and K in 256..32768, every other shape rounded to multiples of 8, each shape's "
                       f"layout drawn from all four; the recommended entries, {MAIN_RANDOM_BUDGET_MS:g} ms timed per "
                       "kernel and shape, the same timing. A picture of where each family wins and loses, not an "
                       "acceptance run (those take --count 200 and seeds of their own).", "",
                       summary_markdown(rrows), "",
                       *(f"![{p.stem}](random/{p.name})\n" for p in pngs_r), bench_markdown(rrows), "",
                       "Raw numbers: `random/bench.csv`, `random/bench.json`.", ""]
            return sp
    else:
        result.not_run.append("bf16 timings need a CUDA GPU (its checks ran under the Triton interpreter)")
        md += ["## Speed", "", "Not measured: timing needs a CUDA GPU. On a GPU machine the same command checks "
               "every kernel there, times torch.matmul, Triton's choice and each family's best over the `main` "
               "suite and every ladder step at 4096^3, measures the instruction ceilings (mma.sync, and wgmma on "
               "Hopper) and copy bandwidth, and plots the results. The hand-written PTX kernels also need a GPU to "
               "run" + (" (they are compiled and inspected below without one)." if nvcc else "."), ""]

    # MODEL: a Llama-style decoder with every nn.Linear routed (compare/model.py), the short version
    from .model import errors as model_errors, run_model
    with phase.guard("model"):
        mrows, mmd = run_model(out / "model", gpu=gpu, quick=True, log=log)
        bad = [r for r in mrows if r.status == "failed check"]
        if bad:
            result.failures.append(f"{len(bad)} model checks failed")
        raised = model_errors(mrows)
        if raised:
            result.failures.append(f"{len(raised)} model runs raised: {'; '.join(raised)}")
        md += ["## A model end to end", "", mmd, "", "Files: `model/` (`python -m compare model` for the whole "
               "run: fp16 and bf16, a training step, torch.compile).", ""]
    if gpu:
        pngs = ([], [], [])
        with phase.guard("plot"):
            pngs = plots.result()
        md[speed_at:speed_at] = speed_sections(*pngs)

    # LAYOUTS: the model (drawn in the child started first); on a GPU also the probes, compared with it (a mismatch
    # fails the job)
    from .layouts import add_hardware, draw_all
    if gpu and not nvcc:
        result.not_run.append("the fragment-map probes on the GPU need nvcc")
    verdict = ""
    with phase.guard("fragment maps"):
        if layouts_job:  # a child that failed fails the phase (phase.guard)
            _finish_layouts(layouts_job, out / "layouts")
        else:
            draw_all(out / "layouts")
        if probes:
            try:
                add_hardware(out / "layouts")
                verdict = "; probes on this GPU agree with it for every ldmatrix, stmatrix and mma form"
            except HgemmError as e:  # the probes disagree with the model (add_hardware's verdict): a finding
                verdict = f"; {e}"
                result.failures.append(str(e))
    fragment_md = ["## Fragment maps", "", "Which lane holds which element for mma.m16n8k16 and ldmatrix/stmatrix, "
                   f"from the model the tests check against the PTX ISA{verdict}: [layouts/layouts.md]"
                   "(layouts/layouts.md).", "", "![mma.m16n8k16](layouts/mma_m16n8k16.png)", ""]
    if "fragment maps" in result.failed_phases:
        fragment_md = ["## Fragment maps", "", f"Not drawn: {result.failed_phases['fragment maps']}", ""]

    # INSPECT (started first, in a child process)
    with phase.guard("inspect"):
        irows, skipped = disasm.finish(inspect_job, out / "inspect")
        md += ["## What each kernel compiles to (sm_90)", "",
               "Triton via `triton.compile` for sm_90, hand-written kernels via nvcc for sm_90a; PTX and SASS in "
               "`inspect/`.", "", disasm.format_markdown(irows, skipped)]
        if skipped:
            result.not_run.append(f"inspecting {len(skipped)} hand-written kernels needs nvcc (the CUDA toolkit)")
    if "inspect" in result.failed_phases:
        md += ["## What each kernel compiles to", "", f"Inspect failed: {result.failed_phases['inspect']}", ""]
        if (out / "inspect" / "inspect.json").exists():  # the kernels it did inspect before it failed
            md += ["The kernels it inspected:", "", disasm.format_markdown(*disasm.load(out / "inspect"))]
    md += fragment_md

    # STUDY PAGE (compare/study.py): from the inspect dumps and fragment maps above, and the bench when a GPU ran;
    # whatever an earlier phase failed to make, the page goes without and says so
    from . import study
    with phase.guard("study page"):
        known = {name: line for name, line in result.failed_phases.items() if name in STUDY_INPUTS}
        missing = dict(known)
        try:
            study.build(out / "study", inspect_dir=out / "inspect", layouts_dir=out / "layouts",
                        bench=out / "bench.json" if gpu and (out / "bench.json").exists() else None, missing=missing)
            md += ["## The study page", "", "[study/index.html](study/index.html): the ladders, source, PTX and "
                   "SASS side by side with the main loops first, the fragment maps; offline, one folder."
                   + (f" Without what the failed phases would have given it ({', '.join(known)})." if known else ""),
                   ""]
        except study.MissingExtra as e:
            result.not_run.append(f"the study page: {e}")
        lacking = {part: line for part, line in missing.items() if part not in known}
        if lacking:
            raise HgemmError("the page lacks " + "; ".join(f"{part} ({line})" for part, line in lacking.items()))
    result.phases["total"] = time.perf_counter() - t_start
    log(f"phase total: {result.phases['total']:.1f} s")
    if result.not_run:
        md += ["## Not run here", "", *(f"- {line}" for line in result.not_run), ""]
    md += ["## Phase times", "", _md_table(["phase", "seconds"], [[k, f"{v:.1f}"] for k, v in result.phases.items()]),
           "", "Inspect runs in a child process from the start, beside the check and the bench; its row (inspect) "
           "is the time the job waited for it at the end. The model's fragment maps are drawn in a child from the "
           "start too, and the plots in one beside the model phase: their rows (fragment maps, plot) are the waits "
           "for them, with the probes' run on the GPU in fragment maps.", ""]
    md[header:header] = failed_phases_markdown(result.failed_phases)
    (out / "index.md").write_text("\n".join(md))
    env["phases_s"] = result.phases
    (out / "environment.json").write_text(json.dumps(env, indent=1))
    return result
