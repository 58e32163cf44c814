"""python -m compare [check|bench|plot|inspect|layouts|tune|sweep|model|kernels|study] ... — see docs/harness.md.

With no subcommand: the main job — check, bench (GPU), plots (GPU), inspect, fragment maps — into one report
folder (--out). Without a GPU (or without nvcc) it does what can be done here and says which sections need what."""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

import torch

from hgemm_common.timing import FLUSHES

# Without a GPU the Triton kernels can only run in the interpreter, which must be chosen before they are imported.
# `inspect` compiles instead of running, which the interpreter prevents: it is left alone.
if not torch.cuda.is_available() and not {"inspect", "study"} & set(sys.argv[1:2]):
    os.environ.setdefault("TRITON_INTERPRET", "1")


def _progress(label: str):
    """show(i, n): on a terminal one line, rewritten in place, with elapsed time and ETA; in a log (stderr a file or
    a pipe) a plain line every 10 s and at the end, no \\r frames."""
    t0, last = time.time(), [time.time()]
    tty = sys.stderr.isatty()

    def show(i: int, n: int):
        now = time.time()
        elapsed = now - t0
        eta = elapsed / i * (n - i) if i else float("nan")
        line = f"{label}: {i}/{n}, {elapsed:.0f} s elapsed, ETA {eta:.0f} s"
        if tty:
            print(f"\r{line:<72}", end="" if i < n else "\n", file=sys.stderr, flush=True)
        elif i == n or now - last[0] >= 10:
            last[0] = now
            print(line, file=sys.stderr, flush=True)
    return show


def _user_error(msg: str) -> int:
    """A user error: one line on stderr, exit status 2 (argparse's)."""
    print(f"python -m compare: error: {msg}", file=sys.stderr)
    return 2


SPARSE_FP16_ONLY = "the 2:4 sparse kernels take fp16 only; --kind sparse runs with --dtype fp16"


def _gpu() -> bool:
    from hgemm_common.validation import interpreter_active
    return torch.cuda.is_available() and not interpreter_active()


def cmd_check(args) -> int:
    from . import check, registry

    gpu = _gpu()
    if args.kind == "sparse" and args.dtype != "fp16":
        return _user_error(SPARSE_FP16_ONLY)
    if args.kind == "sparse" and not gpu:
        return _user_error("check --kind sparse runs the 2:4 sparse kernels, which need a CUDA GPU; none is here")
    try:
        kernels = registry.select(args.kernels, include_all=args.all, kind=args.kind, dtype=args.dtype)
    except registry.UnknownKernel as e:
        return _user_error(str(e))
    if not kernels:
        return _user_error(f"none of {args.kernels} runs here: the PTX kernels need a CUDA GPU")
    if not gpu:
        print("no CUDA GPU: checking the Triton kernels under the Triton interpreter (TRITON_INTERPRET=1) on "
              "small shapes against the float64 reference and torch.matmul on the CPU; the PTX kernels and all "
              "timing need a GPU.")
    rows, names, mat = check.run_check(kernels, gpu=gpu, progress=_progress("check"), sparse=args.kind == "sparse",
                                       dtype=args.dtype)
    print(check.format_table(rows))
    if names:
        print()
        print(check.format_pairwise(names, mat))
    failed = [r for r in rows if not r.ok]
    print(f"\n{len(rows) - len(failed)} passed, {len(failed)} failed ({len(kernels)} kernels)")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        from .envinfo import environment
        (out / "check.json").write_text(json.dumps({"environment": environment(), "rows": [r.as_dict() for r in rows],
                                                    "pairwise": {"kernels": names, "max_abs_diff": mat}}, indent=1))
    return 1 if failed else 0


def cmd_bench(args) -> int:
    from . import bench, registry
    from .envinfo import Sampler, environment

    from .registry import BASELINE, DTYPES

    dtypes = list(dict.fromkeys(args.dtype.split(",")))
    if any(d not in DTYPES for d in dtypes):
        return _user_error(f"--dtype takes {' or '.join(DTYPES)} or a comma list of them, got {args.dtype!r}")
    if args.kind == "sparse" and dtypes != ["fp16"]:
        return _user_error(SPARSE_FP16_ONLY)
    rand = args.suite == "random"
    if not rand and (args.seed is not None or args.count is not None):
        return _user_error("--seed and --count go with --suite random")
    if rand and args.shapes:
        return _user_error("--shapes and --suite random are two ways to choose the shapes: give one")
    if args.rounds < 1:
        return _user_error(f"--rounds must be at least 1, got {args.rounds}")
    try:
        layouts = bench.parse_layouts(args.layout) if args.layout else None
    except ValueError as e:
        return _user_error(str(e))
    if layouts and len(layouts) > 1 and not rand:
        return _user_error("a comma list of layouts is for --suite random (each shape's layout drawn from them); "
                           "a named suite or --shapes takes one --layout")
    suite = args.suite or ("sparse" if args.kind == "sparse" else "default")
    suite_env = {"name": "shapes" if args.shapes else suite}
    try:
        if rand:
            import secrets

            seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
            count = args.count if args.count is not None else bench.RANDOM_COUNT
            layouts = layouts or list(bench.SPARSE_LAYOUTS if args.kind == "sparse" else bench.LAYOUTS)
            shapes = bench.random_shapes(seed, count, layouts)
            suite_env.update(seed=seed, count=count, layouts=layouts)
        else:
            shapes = bench.with_layouts(bench.parse_shapes(args.shapes) if args.shapes else bench.SUITES[suite],
                                        layouts[0] if layouts else None)
    except ValueError as e:  # a shape not of the form MxNxK, a bad seed or count
        return _user_error(str(e))
    bad = sorted({lay for *_, lay in shapes} - set(bench.SPARSE_LAYOUTS)) if args.kind == "sparse" else []
    if bad:
        return _user_error(f"--kind sparse takes layouts {' or '.join(bench.SPARSE_LAYOUTS)} (A is the pruned "
                           f"row-major weight), got {', '.join(bad)}")
    if not _gpu():
        print("bench needs a CUDA GPU (timing under the interpreter would measure numpy); nothing timed.")
        return 2
    try:
        kernels = {d: registry.select(args.kernels, include_all=args.all, kind=args.kind, dtype=d) for d in dtypes}
        for d, ks in kernels.items():  # ratios and the A/A control need the baseline in every bench
            if not any(k.name == BASELINE.name for k in ks):
                kernels[d] = registry.select([BASELINE.name], kind=args.kind, dtype=d) + ks
    except ValueError as e:  # UnknownKernel
        return _user_error(str(e))
    budget_ms = args.budget_ms if args.budget_ms is not None else (bench.RANDOM_BUDGET_MS if rand else 300.0)
    from . import frame as frame_mod

    if rand:
        print(f"random suite: seed {suite_env['seed']}, {count} shapes, layouts {','.join(layouts)}, {budget_ms:g} ms "
              f"timed per kernel and shape", file=sys.stderr, flush=True)
    timer = bench.Timer(flush=args.flush)
    rows = []
    show = _progress(f"bench (random, seed {suite_env['seed']})" if rand else "bench")
    env = environment()
    env["l2_flush"] = args.flush
    env["suite"] = suite_env
    with Sampler() as sampler:
        frame = frame_mod.measure(timer)
        ceilings = frame_mod.ceilings(frame)
        for i, (m, n, k, layout) in enumerate(shapes):
            for d in dtypes:  # the dtypes of one shape back to back: their ratios are compared
                rows += bench.bench_shape(kernels[d], m, n, k, layout=layout, rounds=args.rounds,
                                          budget_ms=budget_ms, timer=timer, seed=i, ceilings=ceilings,
                                          copy_gb_s=frame.get("copy_gb_s"), kind=args.kind, dtype=d)
            show(i + 1, len(shapes))
    env["during_run"] = sampler.summary()
    env["frame"] = frame
    print(bench.aa_verdict(rows).line)  # the first line: whether this run can resolve what it prints
    print(f"frame: {frame}")
    print(bench.format_table(rows))
    if rand:
        print(f"\nrandom suite, seed {suite_env['seed']}, {count} shapes ({','.join(layouts)}): ratios to torch.matmul "
              f"over the shapes each kernel ran")
    for d in dtypes:
        print(f"\n{d}:" if len(dtypes) > 1 else "")
        print(bench.summary([r for r in rows if r.dtype == d]))
    if len(dtypes) > 1:
        print(f"\nratio to torch.matmul, {dtypes[0]} vs {dtypes[1]} (each against torch in its own dtype):")
        print(bench.format_gaps(bench.dtype_gaps([r for r in rows if r.dtype == dtypes[0]],
                                                 [r for r in rows if r.dtype == dtypes[1]]), dtypes[0], dtypes[1]))
    print(f"\n{env.get('gpu')} | {env.get('during_run')} | torch {env['torch']} triton {env['triton']} "
          f"| commit {env['git_commit']}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    bench.write_bench(out, env, rows)
    print(f"wrote {out / 'bench.csv'} and {out / 'bench.json'}")
    if args.history:
        from . import history
        n = history.append(Path(args.history), json.loads((out / "bench.json").read_text()))
        print(f"appended {n} rows to {args.history}")
    return 1 if any(r.status in ("failed check", "error") for r in rows) else 0


def cmd_plot(args) -> int:
    from .plot import plot_all

    if args.history or not args.results:
        from . import history
        if not args.history:
            return _user_error("plot takes a bench.json (or its folder), or --history FILE")
        try:
            print(f"wrote {history.plot(Path(args.history), Path(args.out or Path(args.history).parent))}")
        except (OSError, ValueError) as e:  # no such file, not a history CSV, nothing to draw
            return _user_error(str(e))
        if not args.results:
            return 0
    try:
        pngs = plot_all(Path(args.results), Path(args.out or (Path(args.results).parent if Path(args.results).is_file()
                                                              else args.results)))
    except (OSError, ValueError) as e:  # no such file, not a bench.json
        return _user_error(str(e))
    for p in pngs:
        print(f"wrote {p}")
    return 0 if pngs else 1


def cmd_inspect(args) -> int:
    import tempfile

    from .disasm import format_markdown, run_inspect
    from .registry import UnknownKernel

    if args.refresh_store:
        from hgemm_common.validation import interpreter_active
        from ptx_kernels import toolchain

        from .disasm import SHIPPED, refresh_store

        if args.kernels or args.dtype != "fp16" or args.out:
            return _user_error("inspect --refresh-store writes the store of every kernel in fp16: it takes no kernel "
                               "names, --dtype or --out")
        if interpreter_active():
            return _user_error("inspect --refresh-store compiles the Triton kernels: unset TRITON_INTERPRET")
        if toolchain.find_nvcc() is None:
            return _user_error("inspect --refresh-store compiles every hand-written kernel: it needs nvcc (the CUDA "
                               "toolkit) on PATH or in CUDA_HOME")
        written = refresh_store(progress=_progress("inspect"))
        print(f"wrote {len(written)} entries in {SHIPPED} ({sum(p.stat().st_size for p in written) / 1e6:.2f} MB)")
        return 0
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="hgemm-inspect-"))
    try:
        rows, skipped = run_inspect(args.kernels or None, out, args.dtype)
    except UnknownKernel as e:
        return _user_error(str(e))
    print(format_markdown(rows, skipped))
    print(f"PTX, SASS, inspect.md and inspect.json in {out}")
    return 0


def cmd_layouts(args) -> int:
    from .layouts import default_out, draw_all

    if args.hardware and not _gpu():
        return _user_error("layouts --hardware runs the probes on a CUDA GPU, and none is here; without "
                           "--hardware it draws the fragment maps of the model")
    out = Path(args.out) if args.out else default_out()
    for p in draw_all(out, hardware=args.hardware):
        print(f"wrote {p}")
    print(f"wrote {out / 'layouts.md'}")
    return 0


def cmd_kernels(args) -> int:
    from .matrix import block, markdown

    print(block() if args.markers else markdown())
    return 0


def cmd_tune(args) -> int:
    from . import tune

    if not _gpu():
        return _user_error("tune times kernels on a CUDA GPU, and none is here")
    for d in args.dtypes.split(","):
        if d not in ("fp16", "bf16"):
            return _user_error(f"--dtypes takes fp16, bf16 or both, got {args.dtypes!r}")
    for acc in args.accs.split(","):
        if acc not in ("fp32", "fp16"):
            return _user_error(f"--accs takes fp32, fp16 or both, got {args.accs!r}")
    tune.run_tune(args.grid, args.dtypes.split(","), args.accs.split(","), args.out, args.workers,
                  merge=not args.replace, timings=Path(args.timings))
    return 0


def _macs(text: str) -> int:
    """--max-macs: an integer of at most 18 digits, or 2**E with E in 0..62 (the draw then checks its range)."""
    text = text.strip()
    if re.fullmatch(r"\d{1,18}", text):
        return int(text)
    power = re.fullmatch(r"2\*\*(\d{1,2})", text)
    if power and int(power.group(1)) <= 62:
        return 2 ** int(power.group(1))
    raise argparse.ArgumentTypeError(f"an integer or 2**E, got {text[:40]!r}")


def _int_list(text: str, flag: str) -> list[int]:
    """"101,102" -> [101, 102]; an HgemmValueError (a ValueError) naming the flag otherwise."""
    from hgemm_common.errors import HgemmValueError

    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values or any(v < 0 for v in values):
        raise HgemmValueError(f"{flag} takes a comma list of integers >= 0, got {text!r}")
    return values


def cmd_sweep(args) -> int:
    from hgemm_common.errors import HgemmValueError

    from . import bench, sweep
    from .registry import DTYPES

    try:
        if args.pair:
            if not args.data:
                return _user_error("sweep --pair FIRST SECOND needs --data FILE ... (sweep data files)")
            missing = [p for p in args.data if not Path(p).exists()]
            if missing:
                return _user_error(f"sweep --pair: no such file: {', '.join(missing)}")
            sweep.run_pair([Path(p) for p in args.data], *args.pair)
            return 0
        if args.fit:
            missing = [p for p in args.fit if not Path(p).exists()]
            if missing:
                return _user_error(f"sweep --fit: no such file: {', '.join(missing)}")
            holdout = sweep.holdout_spec(args.holdout) if args.holdout else []
            sweep.run_fit([Path(p) for p in args.fit], Path(args.params), holdout, cv=args.cv)
            return 0
        named = args.suite is not None or args.shapes is not None
        if sum(x is not None for x in (args.seeds, args.suite, args.shapes)) != 1:
            return _user_error("sweep needs one of --seeds (the random-suite seeds to draw from; keep the seeds a "
                               "result is judged on out of it), --suite NAME or --shapes LIST; or --fit DATA")
        if named and (args.max_m is not None or args.max_macs is not None or args.nk_multiple != 8):
            return _user_error("--max-m, --max-macs and --nk-multiple shape the random draw (--seeds), not named "
                               "shapes")
        if args.gluon_only and (args.ptx or args.ptx_only):
            return _user_error("--gluon-only times the Gluon kernel's configurations alone; --ptx and --ptx-only "
                               "add or time the hand-written side's: give one of them")
        seeds = _int_list(args.seeds, "--seeds") if not named else []
        layouts = bench.parse_layouts(args.layout)
        dtypes, accs = args.dtypes.split(","), args.accs.split(",")
        if any(d not in DTYPES for d in dtypes) or any(a not in ("fp32", "fp16") for a in accs):
            return _user_error(f"--dtypes takes fp16, bf16 and --accs fp32, fp16 (comma lists), got {args.dtypes!r} "
                               f"and {args.accs!r}")
        for flag, v in (("--count", args.count), ("--rounds", args.rounds), ("--block", args.block)):
            if v < 1:
                return _user_error(f"{flag} must be at least 1, got {v}")
        if named:  # each named shape in its own layout where it has one, else in each of --layout
            listed = bench.SUITES[args.suite] if args.suite is not None else bench.parse_shapes(args.shapes)
            cases = sweep.named([(m, n, k, lay) for m, n, k, *own in listed for lay in (own or layouts)], dtypes,
                                accs)
        else:
            cases = sweep.draw(seeds, args.start, args.count, layouts, dtypes, accs, args.max_m, args.max_macs,
                               args.nk_multiple)
    except (ValueError, HgemmValueError) as e:
        return _user_error(str(e))
    if not _gpu():
        return _user_error("sweep times kernels on a CUDA GPU, and none is here (sweep --fit DATA needs none)")
    if args.scored_by:
        from triton_kernels.dispatch import device_arch, sm_count

        here = torch.empty(0, device="cuda")
        try:
            cases = sweep.scored_by(cases, args.scored_by, device_arch(here), sm_count(here))
        except HgemmValueError as e:
            return _user_error(str(e))
    sweep.run_sweep(cases, Path(args.out), budget_ms=args.budget_ms, rounds=args.rounds, ptx=args.ptx,
                    gluon=args.gluon, workers=args.workers, block=args.block, budget_s=args.budget_s,
                    args={k: v for k, v in vars(args).items() if k != "cmd"}, progress=_progress("sweep"),
                    ptx_only=args.ptx_only, gluon_only=args.gluon_only)
    return 0


def cmd_study(args) -> int:
    from . import study
    from .registry import UnknownKernel

    for flag, path in (("--bench", args.bench), ("--inspect", args.inspect), ("--layouts", args.layouts)):
        if path and not Path(path).exists():
            return _user_error(f"{flag} {path}: no such file or folder")
    from shutil import which

    if args.ncu and not (_gpu() and which("ncu")):
        return _user_error("study --ncu profiles each kernel with Nsight Compute: it needs a CUDA GPU and ncu on PATH")
    try:
        if args.ncu:
            from .disasm import targets

            Path(args.out).mkdir(parents=True, exist_ok=True)
            study.collect_ncu([t.label for t in targets(args.kernels or None)], Path(args.out), log=print)
        missing = {}
        index = study.build(Path(args.out), args.kernels or None, bench=args.bench, inspect_dir=args.inspect,
                            layouts_dir=args.layouts, log=lambda line: print(f"study: {line}", flush=True),
                            progress=_progress("study: inspect"), missing=missing)
    except (UnknownKernel, study.MissingExtra) as e:
        return _user_error(str(e))
    print(f"wrote {index} (open it in a browser; the folder is self-contained)")
    if missing:  # built without them: the page names them at its top, the exit status says it is incomplete
        for part, line in missing.items():
            print(f"missing from the page: {part}: {line}")
        return 1
    if args.screenshot:
        print(f"wrote {study.screenshot(index, Path(args.screenshot))} (the side-by-side view, headless chromium)")
    return 0


def cmd_main(args) -> int:
    from . import report

    gpu = _gpu()
    if not gpu:
        print("no CUDA GPU here: the report will hold the interpreter check and the inspect tables; timing, the "
              "PTX kernels' runs and the plots need a GPU.")
    suite = args.suite or ("default" if args.full else report.SUITE)
    result = report.run(Path(args.out), gpu=gpu, suite=suite, budget_ms=args.budget_ms, progress=_progress,
                        log=lambda line: print(line, flush=True), full=args.full)
    for line in result.not_run:
        print(f"not run here: {line}")
    verdict = "all checks passed" if result.ok else f"FAILED: {'; '.join(result.failures)}"
    print(f"report: {Path(args.out) / 'index.md'} ({verdict})")
    if result.failed_phases:  # the last line names them: what a log's tail shows
        print(f"failed phases: {', '.join(result.failed_phases)} (the other phases ran; errors at the top of "
              f"{Path(args.out) / 'index.md'})")
    return 0 if result.ok else 1


def cmd_model(args) -> int:
    from .model import cli
    return cli(args, gpu=_gpu())


# Tools of the harness with their own command line (`python -m compare.NAME --help`), listed under --help.
TOOLS = {"levels": "the three levels of one Hopper GEMM side by side: Triton, Gluon, inline PTX (no GPU)",
         "first_call": "what the first call of a new shape costs, in two fresh processes (GPU)",
         "ptx_plans": "wgmma_persistent's tile speeds, and its plans against another revision's, from PTX sweep data",
         "ptx_model": "fit wgmma_persistent's time model to PTX sweep data (scipy), and judge it against the rule"}


def main(argv=None) -> int:
    from .bench import RANDOM_BUDGET_MS, RANDOM_COUNT, SUITES
    from .sweep import DEFAULT_BLOCK as SWEEP_BLOCK, DEFAULT_BUDGET_MS as SWEEP_BUDGET_MS
    from .tune import DEFAULT_TIMINGS
    from .registry import DTYPES
    from .report import MAIN_JOB_BUDGET_MS

    ap = argparse.ArgumentParser(prog="python -m compare", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="also:\n" + "\n".join(f"  python -m compare.{n:<11} {what}"
                                                               for n, what in TOOLS.items()))
    ap.add_argument("--out", default="report", help="report folder of the main job (default: report)")
    ap.add_argument("--suite", default=None, choices=sorted(SUITES),
                    help="bench suite of the main job (default: main; with --full: default)")
    ap.add_argument("--full", action="store_true", help="time every kernel over the whole suite, bf16 and sparse "
                                                        "suites (the ETA is printed first)")
    ap.add_argument("--budget-ms", type=float, default=MAIN_JOB_BUDGET_MS,
                    help="timed GPU ms per kernel and shape (main job)")
    sub = ap.add_subparsers(dest="cmd")
    c = sub.add_parser("check", help="every kernel vs the fp64 reference, torch.matmul and each other")
    c.add_argument("--kernels", nargs="*", help="fnmatch patterns of kernel names (default: the default set)")
    c.add_argument("--all", action="store_true", help="also every pinned Triton configuration")
    c.add_argument("--out", help="folder for check.json")
    c.add_argument("--kind", default="dense", choices=["dense", "sparse"],
                   help="problem kind: sparse checks the 2:4 sparse kernels and their dense peers on one pruned A")
    c.add_argument("--dtype", default="fp16", choices=list(DTYPES),
                   help="dtype of A, B and C (bf16: the kernels that take it, fp32 accumulation)")
    b = sub.add_parser("bench", help="time kernels side by side (GPU)")
    b.add_argument("--suite", default=None, choices=sorted([*SUITES, "random"]),
                   help="shape suite (default: 'default', or 'sparse' with --kind sparse); random: --count shapes "
                        "drawn from --seed (M log-uniform in 1..16384, N and K in 256..32768, half of them multiples "
                        "of 8)")
    b.add_argument("--seed", type=int, default=None,
                   help="--suite random: the seed of the draw (default: a fresh one, printed and recorded)")
    b.add_argument("--count", type=int, default=None, help=f"--suite random: how many shapes (default {RANDOM_COUNT})")
    b.add_argument("--kind", default="dense", choices=["dense", "sparse"],
                   help="problem kind: sparse times the 2:4 sparse kernels beside torch.matmul, their dense peers and "
                        "torch's semi-structured sparse matmul, all on one pruned A")
    b.add_argument("--dtype", default="fp16",
                   help="dtype of A, B and C for every kernel and torch.matmul: fp16, bf16 (the kernels that take it), "
                        "or fp16,bf16 (both, per shape back to back, with a table of each kernel's two ratios)")
    b.add_argument("--shapes", help="comma-separated MxNxK list (MxNxK:LAYOUT for a layout of its own), instead of "
                                    "--suite")
    b.add_argument("--kernels", nargs="*", help="fnmatch patterns of kernel names (torch.matmul and its A/A control "
                                                "are always timed)")
    b.add_argument("--all", action="store_true", help="also every pinned Triton configuration")
    b.add_argument("--layout", default=None,
                   help="NN, NT, TN or TT: the layout of every shape (default: a suite entry's own layout, else NN); "
                        "with --suite random a comma list to draw each shape's layout from (default: all four)")
    b.add_argument("--rounds", type=int, default=3, help="timing rounds: batches of interleaved passes, each behind "
                                                         "its own GPU sleep, with wall-time calls after each")
    b.add_argument("--budget-ms", type=float, default=None,
                   help=f"timed GPU milliseconds per kernel and shape, flushes included (default 300; "
                        f"{RANDOM_BUDGET_MS:g} with --suite random)")
    b.add_argument("--flush", default=FLUSHES[0], choices=FLUSHES,
                   help="L2 flush before each timed call: clean (256 MB written and read back; default), write (the "
                        "write alone, which leaves dirty lines for the timed call to write back), none")
    b.add_argument("--out", default="results", help="folder for bench.csv and bench.json")
    b.add_argument("--history", metavar="FILE", help="also append the timed rows to this history CSV "
                                                     "(compare/history.py; the project's: docs/results/history.csv)")
    p = sub.add_parser("plot", help="PNG figures from a bench.json")
    p.add_argument("results", nargs="?", help="bench.json, or the folder holding it")
    p.add_argument("--out", help="folder for the PNGs (default: beside the results)")
    p.add_argument("--history", metavar="FILE", help="draw a history CSV's ratios over time (history.png)")
    i = sub.add_parser("inspect", help="PTX, SASS and an instruction-mix table per kernel (no GPU needed)")
    i.add_argument("kernels", nargs="*", help="kernel names as check and bench print them (default: every kernel)")
    i.add_argument("--out", help="folder for the files (default: a new temporary folder)")
    i.add_argument("--dtype", default="fp16", choices=list(DTYPES),
                   help="inspect the instantiations for these inputs (bf16: the kernels that take it)")
    i.add_argument("--refresh-store", action="store_true",
                   help="write the rows that ship with the package (compare/inspect_store: every kernel, fp16), read "
                        "wherever this machine's compilers and the sources give the same key; needs nvcc. Run it "
                        "after changing a kernel (a test says when the store is stale)")
    lay = sub.add_parser("layouts", help="PNG fragment maps of mma/ldmatrix/stmatrix: which lane holds which "
                                         "element (no GPU)")
    lay.add_argument("--out", help="folder for the PNGs and layouts.md (default: a new temporary folder)")
    lay.add_argument("--hardware", action="store_true", help="also run the GPU probes: hardware vs model, WMMA maps")
    t = sub.add_parser("tune", help="make the plan table kernel='auto' uses on this GPU (times candidates; GPU)")
    t.add_argument("--grid", default="default", choices=["default", "quick"], help="shapes to time (compare/tune.py)")
    t.add_argument("--dtypes", default="fp16", help="comma list of fp16, bf16 (a dtype with no entries of its own "
                                                    "borrows fp16's plans)")
    t.add_argument("--accs", default="fp32,fp16", help="comma list of fp32, fp16 accumulation")
    t.add_argument("--out", help="table file (default: the package's table for this GPU, which it replaces)")
    t.add_argument("--workers", type=int, default=min(12, max(1, (os.cpu_count() or 2) - 2)),
                   help="processes compiling the candidates before the timing")
    t.add_argument("--replace", action="store_true", help="drop the file's classes this run did not time")
    t.add_argument("--timings", default=DEFAULT_TIMINGS,
                   help=f"JSON-lines file every timed configuration is appended to, the data `sweep --fit` reads "
                        f"(default: {DEFAULT_TIMINGS})")
    sw = sub.add_parser("sweep", help="time every candidate plan on random-suite shapes into a data file (GPU); "
                                      "--fit DATA: fit the cost model to it (no GPU)")
    sw.add_argument("--seeds", help="comma list of random-suite seeds to draw shapes from (not the seeds a result "
                                    "is judged on)")
    sw.add_argument("--suite", choices=sorted(SUITES), help="instead of --seeds: a named suite's shapes, each in "
                                                            "its own layout or in each of --layout")
    sw.add_argument("--shapes", help="instead of --seeds: comma-separated MxNxK list (MxNxK:LAYOUT for a layout of "
                                     "its own)")
    sw.add_argument("--start", type=int, default=0, help="first shape of each seed's draw (default 0)")
    sw.add_argument("--count", type=int, default=RANDOM_COUNT, help=f"shapes per seed from --start (default "
                                                                    f"{RANDOM_COUNT})")
    sw.add_argument("--layout", default="NN,NT", help="comma list of layouts each shape's is drawn from (default "
                                                      "NN,NT)")
    sw.add_argument("--max-m", type=int, help="draw M from 1..MAX_M only (data for the kernels of skinny problems; "
                                              "default: the random suite's whole range)")
    sw.add_argument("--max-macs", type=_macs, help="redraw problems above MAX_MACS multiply-adds, an integer or "
                                                   "2**E (data for tiny problems: 2**30, about 2 GFLOP; default: "
                                                   "the random suite's 2**37)")
    sw.add_argument("--nk-multiple", type=int, default=8, help="round the rounded half of the draw's N and K to "
                                                               "multiples of this (8-256, a power of two; 64: data "
                                                               "for whole 64-wide boxes; default 8, as the random "
                                                               "suite)")
    sw.add_argument("--scored-by", metavar="KERNEL", help="only the drawn shapes among whose candidates this Triton "
                                                          "kernel is (data for one kernel's fit, the others timed beside "
                                                          "it on those shapes only)")
    sw.add_argument("--dtypes", default="fp16", help="comma list of fp16, bf16 (default fp16)")
    sw.add_argument("--accs", default="fp32", help="comma list of fp32, fp16 accumulation (default fp32)")
    sw.add_argument("--ptx", action="store_true", help="also the hand-written side: wgmma_persistent's own plan, its "
                                                       "tiles and splits pinned, the kernels it hands problems to")
    sw.add_argument("--ptx-only", action="store_true", help="the hand-written side's plans alone, no Triton "
                                                            "candidates (its tiles' data; not for the Triton fit)")
    sw.add_argument("--gluon", action="store_true", help="also the Gluon kernel's configurations")
    sw.add_argument("--gluon-only", action="store_true", help="the Gluon kernel's configurations alone (its "
                                                              "parameters' data)")
    sw.add_argument("--budget-ms", type=float, default=SWEEP_BUDGET_MS,
                    help=f"timed GPU ms per candidate and case, flushes included (default {SWEEP_BUDGET_MS:g})")
    sw.add_argument("--rounds", type=int, default=3, help="timing rounds (as bench's)")
    sw.add_argument("--budget-s", type=float, default=None,
                    help="stop cleanly before a case or a block of cases this many seconds from the start would not "
                         "cover (a chunk that fits a time limit; rerun the command to go on)")
    sw.add_argument("--block", type=int, default=SWEEP_BLOCK, help=f"cases compiled ahead together (default "
                                                                   f"{SWEEP_BLOCK})")
    sw.add_argument("--workers", type=int, default=min(12, max(1, (os.cpu_count() or 2) - 2)),
                    help="processes compiling each block's Triton candidates before its timing (1: none)")
    sw.add_argument("--out", default="sweep.jsonl", help="the data file, appended to (default sweep.jsonl)")
    sw.add_argument("--fit", nargs="+", metavar="DATA", help="instead of timing: fit the cost model to these data "
                                                              "files (sweep's, tune's --timings) and print its quality")
    sw.add_argument("--pair", nargs=2, metavar=("FIRST", "SECOND"),
                    help="instead of timing: from --data's files, every case both kernels were timed on with the "
                         "same configuration and staging, FIRST's time over SECOND's (no GPU)")
    sw.add_argument("--data", nargs="+", metavar="DATA", help="with --pair: the sweep data files")
    sw.add_argument("--holdout", help="with --fit: comma list of seeds left out of the fit and judged apart; SEED:I "
                                      "holds out that seed's cases from index I on (its first I cases are fitted)")
    sw.add_argument("--cv", action="store_true", help="with --fit: first cross-validate the model's choices, each seed "
                                                      "of the fitted data held out in turn and fitted on the others")
    sw.add_argument("--params", default="cost_model.json", help="with --fit: where the fitted parameters go "
                                                                "(default cost_model.json)")
    from .model import add_arguments as model_arguments
    model_arguments(sub.add_parser("model", help="a Llama-style model end to end, every nn.Linear routed, vs torch: "
                                                 "logits checked, then prefill/decode/graph/train timed (GPU)"))
    kn = sub.add_parser("kernels", help="the support matrix from the records: kernel, min arch, dtypes, acc, layouts")
    kn.add_argument("--markers", action="store_true", help="with the marker lines docs/kernels.md embeds it between")
    st = sub.add_parser("study", help="the study as an offline page: ladders, source/PTX/SASS side by side, fragment "
                                      "maps (no GPU needed; measured parts from --bench)")
    st.add_argument("kernels", nargs="*", help="kernels on the page (default: every kernel inspect takes)")
    st.add_argument("--out", default="study", help="folder for index.html and its files (default: study)")
    st.add_argument("--bench", help="bench.json (or its folder) with the measured ladders, from a GPU run")
    st.add_argument("--inspect", help="a `compare inspect --out` folder to reuse instead of compiling again")
    st.add_argument("--layouts", help="a `compare layouts --out` folder to reuse (with --hardware: the probe verdict)")
    st.add_argument("--screenshot", help="also a PNG of the side-by-side view, drawn by headless chromium")
    st.add_argument("--ncu", action="store_true", help="also profile one call of each kernel with Nsight Compute "
                                                       "(GPU and ncu) into ncu.json, shown on the page")
    args = ap.parse_args(argv)
    commands = {"check": cmd_check, "bench": cmd_bench, "plot": cmd_plot, "inspect": cmd_inspect,
                "layouts": cmd_layouts, "tune": cmd_tune, "sweep": cmd_sweep, "model": cmd_model,
                "kernels": cmd_kernels, "study": cmd_study, None: cmd_main}
    return commands[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
