"""The main job (`python -m compare`): check, bench, frame, plots and inspect into one folder with index.md."""
from __future__ import annotations

import json
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
                    r.config if r.status == "ok" else f"{r.status}: {r.detail[:60]}"])
    return _md_table(["shape", "kernel", "TFLOPS", "x torch.matmul", "% mma.sync ceiling", "config / status"], out)


def summary_markdown(rows) -> str:
    names = []
    for r in rows:
        if r.kernel not in names:
            names.append(r.kernel)
    out = []
    for name in names:
        rs = [r.ratio_to_torch for r in rows if r.kernel == name and r.ratio_to_torch]
        if rs:
            out.append([f"`{name}`", f"{bench_mod.geomean(rs):.3f}", str(len(rs))])
    return _md_table(["kernel", "geomean x torch.matmul", "shapes timed"], out)


def run(out: Path, *, gpu: bool, suite: str = "default", budget_ms: float = 200.0, progress=None) -> int:
    from . import frame as frame_mod
    from . import inspect as inspect_mod
    from . import registry
    from .envinfo import Sampler

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    env = environment()
    md = ["# tensorcore-hgemm report", "", f"Produced by `{env['command']}` on {env.get('gpu') or 'a machine without a GPU'}"
          f", {env['date']}, commit `{env['git_commit']}` (torch {env['torch']}, triton {env['triton']}"
          + (f", driver {env.get('driver')}, CUDA {env.get('cuda_runtime')}" if gpu else "") + ").", ""]
    failed = 0

    # CHECK
    kernels = registry.select(None)
    rows, names, mat = check_mod.run_check(kernels, gpu=gpu, progress=progress and progress("check"))
    failed += sum(not r.ok for r in rows)
    (out / "check.json").write_text(json.dumps({"environment": env, "rows": [r.as_dict() for r in rows],
                                                "pairwise": {"kernels": names, "max_abs_diff": mat}}, indent=1))
    md += ["## Correctness", "",
           ("Every kernel against the high-precision reference (fp32 cuBLAS with TF32 off on the GPU, float64 on "
            "the CPU): exact checks on small-integer inputs (bit-for-bit), bound checks on random inputs, outputs "
            "poisoned with NaN first. Cases (shape, layout, inputs): "
            + ", ".join(f"{m}x{n}x{k} {lay} {kind}" for (m, n, k), lay, kind in check_mod.cases_for(gpu)) + "."
            + ("" if gpu else " Triton ran under the interpreter (TRITON_INTERPRET=1).")),
           "", check_markdown(rows), "", f"{len(rows) - failed} of {len(rows)} checks passed.", ""]

    # BENCH + FRAME + PLOTS
    if gpu:
        timer = bench_mod.Timer()
        brows = []
        shapes = bench_mod.SUITES[suite]
        show = progress and progress("bench")
        with Sampler() as sampler:
            frame = frame_mod.measure(timer)
            ceilings = frame_mod.ceilings_by_acc(frame)
            for i, (m, n, k) in enumerate(shapes):
                brows += bench_mod.bench_shape(registry.select(None), m, n, k, budget_ms=budget_ms, timer=timer,
                                               seed=i, ceilings=ceilings)
                if show:
                    show(i + 1, len(shapes))
        env["during_run"], env["frame"] = sampler.summary(), frame
        bench_mod.write_bench(out, env, brows)
        failed += sum(r.status in ("failed check", "error") for r in brows)
        from .plot import plot_all
        pngs = plot_all(out / "bench.json", out)
        md += ["## Speed", "",
               f"Medians of CUDA-event timings, L2 flushed before every call, kernels interleaved per shape, "
               f"random inputs checked before timing; NN layout. Physical frame measured in the same run: "
               f"mma.sync ceiling {frame.get('mma_sync_fp32acc_tflops', float('nan')):.0f} TFLOPS (fp32 acc) / "
               f"{frame.get('mma_sync_fp16acc_tflops', float('nan')):.0f} (fp16 acc), device copy "
               f"{frame['copy_gb_s']:.0f} GB/s. Clocks and power during the run: {env['during_run']}.", "",
               "### Geometric mean over the suite", "", summary_markdown(brows), "",
               *(f"![{p.stem}]({p.name})\n" for p in pngs), "### Every measurement", "", bench_markdown(brows), "",
               "Raw numbers: `bench.csv`, `bench.json` (with the environment).", ""]
    else:
        md += ["## Speed", "", "Not measured: timing needs a CUDA GPU. On a GPU machine the same command checks "
               "every kernel there, times them against torch.matmul (the default suite: square 1024-16384, the "
               "LLM shapes, 3000x5000x2000), measures the mma.sync ceiling and copy bandwidth, and plots the "
               "results. The hand-written PTX kernels also need a GPU to run (they are compiled and inspected "
               "below without one).", ""]

    # INSPECT
    try:
        irows = inspect_mod.run_inspect(None, out / "inspect")
        md += ["## What each kernel compiles to (sm_90)", "",
               "Triton via `triton.compile` for sm_90, hand-written kernels via nvcc for sm_90a; PTX and SASS in "
               "`inspect/`.", "", inspect_mod.format_markdown(irows)]
    except Exception as e:  # noqa: BLE001 - a missing nvcc must not hide the rest of the report
        md += ["## What each kernel compiles to", "", f"Inspect could not run here: {type(e).__name__}: {e}", ""]
        failed += 1
    # LAYOUTS: the model; on a GPU also the probes, compared with it (a mismatch fails the job)
    from .layouts import draw_all
    try:
        draw_all(out / "layouts", hardware=gpu)
        verdict = "; probes on this GPU agree with it for every ldmatrix, stmatrix and mma form" if gpu else ""
    except RuntimeError as e:
        verdict, failed = f"; {e}", failed + 1
    md += ["## Fragment layouts", "", "Lane maps of mma.m16n8k16 and ldmatrix/stmatrix from the model the tests "
           f"check against the PTX ISA{verdict}: [layouts/layouts.md](layouts/layouts.md).", "",
           "![mma.m16n8k16](layouts/mma_m16n8k16.png)", ""]
    (out / "index.md").write_text("\n".join(md))
    (out / "environment.json").write_text(json.dumps(env, indent=1))
    return 1 if failed else 0
