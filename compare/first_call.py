"""`python -m compare.first_call`: what the first call of a new shape costs, the third clock (BENCHMARKING.md).

Two fresh processes run the same list of shapes, one call after another, each shape new to the process: the first
starts with an empty Triton cache (its first calls compile the one configuration each plan names), the second with
the cache the first left (its first calls should compile nothing). For each shape and entry: the host time of the
first call (until it returns, the GPU not waited for), its wall time (the GPU waited for), and the second call's,
in milliseconds; then how many kernels the second process compiled (new entries in Triton's cache folder).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WARMUP = (8, 512, 512)  # run first and reported apart: what the first call of any shape costs a process (library
#                          loads, handles; Triton's launcher and driver set-up), once
DEFAULT_SHAPES = "17x4096x4096,33x4096x4096,77x4096x4096,130x4096x4096,600x4096x4096,1000x4096x4096,300x14336x4096"


def _child(shapes: list[tuple[int, int, int]], layout: str, kernels: list[str]) -> list[dict]:
    import torch

    from .reference import make_operand
    from .registry import select

    entries = {k.name: k for k in select(kernels)}
    rows = []
    torch.ones(1, device="cuda").sum().item()  # the CUDA context, before any clock
    for m, n, k in [WARMUP, *shapes]:
        g = torch.Generator().manual_seed(m)
        a = make_operand(m, k, layout[0], device="cuda", generator=g, kind="randn")
        b = make_operand(k, n, layout[1], device="cuda", generator=g, kind="randn")
        for name in kernels:
            run = entries[name].run
            torch.cuda.synchronize()
            times = []
            for _ in range(2):
                t0 = time.perf_counter()
                run(a, b, None)
                t1 = time.perf_counter()
                torch.cuda.synchronize()
                times.append(((t1 - t0) * 1e3, (time.perf_counter() - t0) * 1e3))
            row = {"shape": f"{m}x{n}x{k}" if (m, n, k) != WARMUP else "process init", "kernel": name, "first_host_ms": times[0][0],
                   "first_wall_ms": times[0][1], "second_wall_ms": times[1][1]}
            if name == "triton":
                import triton_kernels

                p = triton_kernels.plan(a, b)
                row["plan"] = f"{p.name} ({p.source})"
            rows.append(row)
    return rows


def _entries(cache: Path) -> int:
    return sum(1 for p in cache.iterdir() if p.is_dir()) if cache.exists() else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m compare.first_call", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="comma-separated MxNxK, run in this order")
    ap.add_argument("--layout", default="NT", choices=["NN", "NT", "TN", "TT"])
    ap.add_argument("--kernels", nargs="*", default=["torch.matmul", "triton", "wgmma_persistent"])
    ap.add_argument("--out", help="folder for first_call.json")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    from .bench import parse_shapes

    shapes = parse_shapes(args.shapes)
    if args.child:
        Path(args.child).write_text(json.dumps(_child(shapes, args.layout, args.kernels)))
        return 0
    import torch

    if not torch.cuda.is_available():
        print("python -m compare.first_call: error: needs a CUDA GPU", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="hgemm-first-call-"))
    cache = tmp / "triton-cache"
    env = {**os.environ, "TRITON_CACHE_DIR": str(cache)}
    env.pop("TRITON_INTERPRET", None)
    runs = []
    for proc in (1, 2):
        before = _entries(cache)
        out = tmp / f"run{proc}.json"
        cmd = [sys.executable, "-m", "compare.first_call", "--child", str(out), "--shapes", args.shapes,
               "--layout", args.layout, "--kernels", *args.kernels]
        subprocess.run(cmd, env=env, check=True)
        runs.append((json.loads(out.read_text()), _entries(cache) - before))
    print(f"first calls of new shapes, layout {args.layout}, ms (host: until the call returns; wall: GPU waited "
          f"for); process 1 starts with an empty Triton cache, process 2 with the one process 1 left")
    print(f"{'shape':>16} {'kernel':<18} {'p1 first host':>13} {'p1 first wall':>13} {'p2 first host':>13} "
          f"{'p2 first wall':>13} {'second wall':>11}  plan")
    for r1, r2 in zip(runs[0][0], runs[1][0]):
        print(f"{r1['shape']:>16} {r1['kernel']:<18} {r1['first_host_ms']:13.1f} {r1['first_wall_ms']:13.1f} "
              f"{r2['first_host_ms']:13.1f} {r2['first_wall_ms']:13.1f} {r2['second_wall_ms']:11.2f}  "
              f"{r2.get('plan', '')}")
    print(f"Triton kernels compiled: process 1 {runs[0][1]}, process 2 {runs[1][1]}")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "first_call.json").write_text(json.dumps(
            {"layout": args.layout, "process1": runs[0][0], "process2": runs[1][0],
             "compiled": [runs[0][1], runs[1][1]]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
