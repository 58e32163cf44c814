"""The main job (`python -m compare`): check, bench, frame, plots and inspect into one folder with index.md."""
from __future__ import annotations

import json
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

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
        bad = next((r for r in rs if not r.ok), None)
        out.append([f"`{name}`", f"{sum(r.ok for r in ex)}/{len(ex)}", f"{sum(r.ok for r in rn)}/{len(rn)}",
                    f"{max((r.max_abs_err for r in rn), default=float('nan')):.3g}",
                    f"{max(ratios):.2f}" if ratios else "-",
                    "" if bad is None else f"{bad.shape} {bad.layout}: {bad.detail[:80]}"])
    return _md_table(["kernel", "exact (int) checks", "random checks", "max abs err", "err / torch err",
                      "first failure"], out)


def bench_markdown(rows) -> str:
    out = []
    for r in rows:
        out.append([f"{r.m}x{r.n}x{r.k}", f"`{r.kernel}`", f"{r.tflops:.1f}" if r.tflops else "-",
                    f"{r.ratio_to_torch:.3f}" if r.ratio_to_torch else "-",
                    f"{r.pct_of_ceiling:.0f}%" if r.pct_of_ceiling else "-",
                    f"{r.hbm_pct:.0f}%" if r.hbm_pct else "-",
                    f"{r.wall_us:.1f}" if r.wall_us else "-",
                    f"{r.wall_ratio_to_torch:.3f}" if r.wall_ratio_to_torch else "-",
                    r.config if r.status == "ok" else f"{r.status}: {r.detail[:60]}"])
    return _md_table(["shape", "kernel", "TFLOPS", "x torch.matmul", "% of its ceiling", "% HBM", "wall us/call",
                      "wall x torch.matmul", "config / status"], out)


def summary_markdown(rows) -> str:
    out = [[f"`{name}`", f"{dev:.3f}", f"{wall:.3f}", str(n)] for name, dev, wall, n in bench_mod.geomeans(rows)]
    return _md_table(["kernel", "geomean x torch.matmul (device)", "geomean x torch.matmul (wall per call)",
                      "shapes timed"], out)


@dataclass
class Result:
    """What the main job found: failures (a check, a timing check, the probes) and sections it could not run here."""
    failures: list[str] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)  # seconds per phase

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


# Timed GPU milliseconds per kernel and shape in the main job: 100 keeps the whole job (about 50 kernels x 11
# shapes, build and checks included) near 4 minutes on an H100; 3 interleaved rounds still give each 1 ms kernel
# about 100 samples. `python -m compare bench` defaults to 300 for closer looks. The wall-time calls beside them
# (bench.WALL_BUDGET_FRACTION) add about a quarter of that, and the dispatcher's first-call timing of each new
# (shape, kernel) adds its candidates' tuning. Measured at 36db6ee on a fresh H100: build 45 s, check 118 s, and the
# bench phase unfinished after 400 s (docs/hardening/h100-36db6ee); bench.wall_calls has bounded the slow steps'
# wall-time calls since, not yet timed on a GPU.
MAIN_JOB_BUDGET_MS = 100.0


def run(out: Path, *, gpu: bool, suite: str = "default", budget_ms: float = MAIN_JOB_BUDGET_MS, progress=None,
        log=lambda line: None) -> Result:
    from ptx_kernels import toolchain

    from . import disasm
    from . import frame as frame_mod
    from . import registry
    from .envinfo import Sampler

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    result = Result()
    phase = _Phases(result, log)
    t_start = time.perf_counter()
    nvcc = toolchain.find_nvcc() is not None
    # Inspect compiles on the CPU (nvcc, ptxas) while the check and the bench keep the GPU busy: a child process
    # from the start, collected at the end.
    inspect_job = disasm.start(out / "inspect")
    env = environment()
    md = ["# tensorcore-hgemm report", "", f"Produced by `{env['command']}` on {env.get('gpu') or 'a machine without a GPU'}"
          f", {env['date']}, commit `{env['git_commit']}` (torch {env['torch']}, triton {env['triton']}"
          + (f", driver {env.get('driver')}, CUDA {env.get('cuda_runtime')}" if gpu else "") + ").", ""]

    # CHECK
    kernels = registry.select(None)
    if gpu and not nvcc:
        kernels = [k for k in kernels if k.package != "ptx"]
        result.not_run.append("the hand-written PTX kernels' checks and timings need nvcc (the CUDA toolkit) to "
                              "build them")
    elif not gpu:
        result.not_run.append("the hand-written PTX kernels' checks, all timing and the plots need a CUDA GPU")
    if gpu and nvcc:
        import ptx_kernels
        with phase("build"):
            try:
                ptx_kernels.load()
            except ptx_kernels.BuildError as e:
                result.failures.append(f"the PTX extension did not build: {str(e).splitlines()[0]}")
    with phase("check"):
        rows, names, mat = check_mod.run_check(kernels, gpu=gpu, progress=progress and progress("check"))
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

    # BENCH + FRAME + PLOTS
    if gpu:
        timer = bench_mod.Timer()
        brows = []
        shapes = bench_mod.SUITES[suite]
        show = progress and progress("bench")
        with phase("bench"), Sampler() as sampler:
            frame = frame_mod.measure(timer)
            ceilings = frame_mod.ceilings(frame)
            for i, (m, n, k) in enumerate(shapes):
                brows += bench_mod.bench_shape(kernels, m, n, k, budget_ms=budget_ms, timer=timer, seed=i,
                                               ceilings=ceilings, copy_gb_s=frame.get("copy_gb_s"))
                if show:
                    show(i + 1, len(shapes))
        env["during_run"], env["frame"] = sampler.summary(), frame
        bench_mod.write_bench(out, env, brows)
        bad = [r for r in brows if r.status in ("failed check", "error")]
        if bad:
            result.failures.append(f"{len(bad)} timing runs failed their check or raised")
        from .plot import plot_all
        with phase("plot"):
            pngs = plot_all(out / "bench.json", out)
        md += ["## Speed", "",
               f"Device time: medians of CUDA-event timings, L2 flushed before every call (256 MB written and read "
               f"back, so no dirty lines are left for the timed call to write back), kernels interleaved per "
               f"shape, random inputs checked before timing; NN layout. Wall time: microseconds per call of "
               f"back-to-back calls from Python (host clock between two synchronizations, no GPU sleep ahead: "
               f"validation, dispatch, descriptors and launch count), in the same rounds. % HBM: A, B and C moved "
               f"once over the device time, against the measured copy bandwidth. Physical frame measured in the "
               f"same run: "
               f"{frame_mod.describe(frame)}, device copy {frame['copy_gb_s']:.0f} GB/s. Clocks and power during the run: {env['during_run']}.", "",
               "### Geometric mean over the suite", "", summary_markdown(brows), "",
               *(f"![{p.stem}]({p.name})\n" for p in pngs), "### Every measurement", "", bench_markdown(brows), "",
               "Raw numbers: `bench.csv`, `bench.json` (with the environment).", ""]
        # bf16 beside fp16: the kernels that take bf16, checked and timed in bf16 against torch.matmul in bf16
        bkernels = [k for k in registry.select(None, dtype="bf16") if nvcc or k.package != "ptx"]
        with phase("check (bf16)"):
            crows_b, _, _ = check_mod.run_check(bkernels, gpu=gpu, dtype="bf16")
        bad = [r for r in crows_b if not r.ok]
        if bad:
            result.failures.append(f"{len(bad)} of {len(crows_b)} bf16 checks failed")
        brows_b = []
        with phase("bench (bf16)"):
            for i, (m, n, k) in enumerate(bench_mod.SUITES["bf16"]):
                brows_b += bench_mod.bench_shape(bkernels, m, n, k, budget_ms=budget_ms, timer=timer, seed=200 + i,
                                                 ceilings=ceilings, copy_gb_s=frame.get("copy_gb_s"), dtype="bf16")
        (out / "bf16").mkdir(exist_ok=True)
        (out / "bf16" / "check.json").write_text(json.dumps({"environment": env,
                                                             "rows": [r.as_dict() for r in crows_b]}, indent=1))
        bench_mod.write_bench(out / "bf16", env, brows_b)
        bad = [r for r in brows_b if r.status in ("failed check", "error")]
        if bad:
            result.failures.append(f"{len(bad)} bf16 timing runs failed their check or raised")
        with phase("plot (bf16)"):
            pngs_b = plot_all(out / "bf16" / "bench.json", out / "bf16")
        gaps = bench_mod.dtype_gaps(brows, brows_b)
        md += ["## bf16 beside fp16", "",
               "The kernels that take bf16 (A, B and C bf16, fp32 accumulation), checked like the fp16 ones "
               "(integers are exact in bf16 too) and timed against torch.matmul in bf16, same timing. "
               "% of ceiling is against the fp16 instruction ceilings of the frame (the frame measures fp16 "
               "operands).", "", check_markdown(crows_b), "", summary_markdown(brows_b), "",
               *(f"![{p.stem}](bf16/{p.name})\n" for p in pngs_b),
               "### Ratio to torch.matmul: fp16 vs bf16 (each against torch in its own dtype)", "",
               _md_table(["kernel", "shape", "fp16 x torch", "bf16 x torch", "bf16 - fp16"],
                         [[f"`{kn}`", sh, f"{x:.3f}", f"{y:.3f}", f"{y - x:+.3f}"] for kn, sh, x, y in gaps]), "",
               bench_markdown(brows_b), "", "Raw numbers: `bf16/bench.csv`, `bf16/bench.json`, `bf16/check.json`.",
               ""]
        if nvcc:  # the 2:4 sparse kind: its kernels beside dense torch.matmul, the dense peers and torch's sparse
            skernels, srows = registry.select(None, kind="sparse"), []
            with phase("bench (2:4 sparse)"):
                for i, (m, n, k) in enumerate(bench_mod.SUITES["sparse"]):
                    srows += bench_mod.bench_shape(skernels, m, n, k, budget_ms=budget_ms, timer=timer, seed=100 + i,
                                                   ceilings=ceilings, copy_gb_s=frame.get("copy_gb_s"), kind="sparse")
            (out / "sparse").mkdir(exist_ok=True)
            bench_mod.write_bench(out / "sparse", env, srows)
            bad = [r for r in srows if r.status in ("failed check", "error")]
            if bad:
                result.failures.append(f"{len(bad)} sparse timing runs failed their check or raised")
            md += ["## 2:4 sparse", "",
                   "A pruned 2:4 along K (the two largest magnitudes of every 4), the same pruned A for every kernel: "
                   "dense torch.matmul on it (the ratios' base), the dense PTX kernel of each sparse kernel's ladder, "
                   "torch.sparse.to_sparse_semi_structured (cuSPARSELt where torch has it; skipped with the reason "
                   "where its shape rules refuse), and the sparse PTX kernels (compressed once, untimed). TFLOPS "
                   "count the dense 2 M N K; % ceiling is against the sparse instruction ceilings of the frame above. "
                   "Same timing as the dense bench.", "", summary_markdown(srows), "", bench_markdown(srows), "",
                   "Raw numbers: `sparse/bench.csv`, `sparse/bench.json`.", ""]
    else:
        result.not_run.append("bf16: its checks and timings need a CUDA GPU (the Triton interpreter's bf16 dot is "
                              "not exact on the CPU)")
        md += ["## Speed", "", "Not measured: timing needs a CUDA GPU. On a GPU machine the same command checks "
               "every kernel there, times them against torch.matmul (the default suite: square 1024-16384, the "
               "LLM shapes, 3000x5000x2000), measures the instruction ceilings (mma.sync, and wgmma on Hopper) and copy bandwidth, and plots the "
               "results. The hand-written PTX kernels also need a GPU to run"
               + (" (they are compiled and inspected below without one)." if nvcc else "."), ""]

    # LAYOUTS: the model; on a GPU also the probes, compared with it (a mismatch fails the job)
    from .layouts import draw_all
    probes = gpu and nvcc
    if gpu and not nvcc:
        result.not_run.append("the fragment-map probes on the GPU need nvcc")
    with phase("fragment maps"):
        try:
            draw_all(out / "layouts", hardware=probes)
            verdict = "; probes on this GPU agree with it for every ldmatrix, stmatrix and mma form" if probes else ""
        except RuntimeError as e:
            verdict = f"; {e}"
            result.failures.append(str(e))
    fragment_md = ["## Fragment maps", "", "Which lane holds which element for mma.m16n8k16 and ldmatrix/stmatrix, "
                   f"from the model the tests check against the PTX ISA{verdict}: [layouts/layouts.md]"
                   "(layouts/layouts.md).", "", "![mma.m16n8k16](layouts/mma_m16n8k16.png)", ""]

    # INSPECT (started first, in a child process)
    with phase("inspect (wait)"):
        try:
            irows, skipped = disasm.finish(inspect_job, out / "inspect")
            md += ["## What each kernel compiles to (sm_90)", "",
                   "Triton via `triton.compile` for sm_90, hand-written kernels via nvcc for sm_90a; PTX and SASS in "
                   "`inspect/`.", "", disasm.format_markdown(irows, skipped)]
            if skipped:
                result.not_run.append(f"inspecting {len(skipped)} hand-written kernels needs nvcc (the CUDA toolkit)")
        except RuntimeError as e:
            md += ["## What each kernel compiles to", "", f"Inspect failed: {e}", ""]
            result.failures.append(f"inspect failed: {e}")
    md += fragment_md

    # STUDY PAGE (compare/study.py): from the inspect dumps and fragment maps above, and the bench when a GPU ran
    if not any(f.startswith("inspect failed") for f in result.failures):
        from . import study
        with phase("study page"):
            try:
                study.build(out / "study", inspect_dir=out / "inspect", layouts_dir=out / "layouts",
                            bench=out / "bench.json" if gpu else None)
                md += ["## The study page", "", "[study/index.html](study/index.html): the ladders, source, PTX and "
                       "SASS side by side with the main loops first, the fragment maps; offline, one folder.", ""]
            except study.MissingExtra as e:
                result.not_run.append(f"the study page: {e}")
    result.phases["total"] = time.perf_counter() - t_start
    log(f"phase total: {result.phases['total']:.1f} s")
    if result.not_run:
        md += ["## Not run here", "", *(f"- {line}" for line in result.not_run), ""]
    md += ["## Phase times", "", _md_table(["phase", "seconds"], [[k, f"{v:.1f}"] for k, v in result.phases.items()]),
           "", "Inspect runs in a child process from the start, beside the check and the bench; its row is the "
           "time the job waited for it at the end.", ""]
    (out / "index.md").write_text("\n".join(md))
    env["phases_s"] = result.phases
    (out / "environment.json").write_text(json.dumps(env, indent=1))
    return result
