"""Per-call wall time, back to back from Python, as a model's forward pass pays it (GPU only).

    python scripts/wall_time.py [--shapes 16x4096x4096,128x4096x4096] [--kernels 'torch*' 'wgmma_persistent']

For each shape and kernel (names as in the harness's tables): warm up, then time `calls` back-to-back calls with
the host clock between two synchronizations, so validation, dispatch, descriptor/tensor-map work and launch
latency count, and the GPU queue never drains in between. Prints microseconds per call and the ratio to
torch.matmul's (> 1: slower than torch).
"""
from __future__ import annotations

import argparse
import time

import torch

from compare import registry
from compare.bench import parse_shapes
from compare.reference import make_inputs


def per_call_us(run, a, b, out, calls: int) -> float:
    for _ in range(10):
        run(a, b, out)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        run(a, b, out)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="16x4096x4096,128x4096x4096,4096x4096x4096")
    ap.add_argument("--kernels", nargs="*", default=["torch.matmul", "triton", "wgmma_persistent", "wgmma_cluster",
                                                      "mma_stmatrix"])
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    kernels = registry.select(args.kernels)
    for m, n, k in parse_shapes(args.shapes):
        a, b = make_inputs(m, n, k, "NN", device="cuda", seed=0, kind="randn")
        out = torch.empty(m, n, dtype=torch.float16, device="cuda")
        base = None
        for kern in kernels:
            us = per_call_us(kern.run, a, b, out, args.calls)
            base = us if kern.name == "torch.matmul" else base
            ratio = f"{us / base:5.2f}x" if base else "   - "
            print(f"{m}x{n}x{k} {kern.name:28s} {us:9.1f} us/call  {ratio} torch.matmul's")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
