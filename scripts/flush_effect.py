"""What an L2 flush leaves behind, and what that costs a memory-bound call (GPU only).

    python scripts/flush_effect.py [--shapes 1x4096x4096,16x4096x4096,128x4096x4096,128x8192x8192]
                                   [--kernels torch.matmul triton] [--layout NN] [--calls 100]

Timing a call on cold operands needs L2 emptied first. Writing a 256 MB buffer (triton.testing.do_bench's flush, and
this project's harness's until this study) does that, but L2 is a write-back cache: after such a flush it holds ~50
MB of dirty lines, and a call that then reads its operands from DRAM must first write those lines back: a
decode-sized GEMM reading 32 MB of B then moves up to twice its own bytes through HBM. This script times each kernel
(CUDA events around each call, median of --calls calls) after each of `hgemm_common.timing.L2Flush`'s modes: "clean"
(the write, then the 256 MB read back, so L2 holds clean lines and the call's misses cost reads only: the harness's
flush since), "write" and "none" (operands left in L2 by the previous call). Per row: microseconds, the HBM
bandwidth the call's own bytes imply (A, B and C once, as the harness's %HBM column counts them) as a % of the
measured device copy, and the ratio to the first kernel's time under the same flush (> 1: faster). Every kernel's
output is checked against the reference first.
"""
from __future__ import annotations

import argparse
import statistics

import torch

from compare import registry
from compare.bench import Timer, parse_shapes
from compare.frame import copy_bandwidth
from compare.reference import compare, error_bound, make_inputs, reference
from hgemm_common.timing import FLUSHES


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="1x4096x4096,16x4096x4096,128x4096x4096,128x8192x8192")
    ap.add_argument("--kernels", nargs="+", default=["torch.matmul", "triton"])
    ap.add_argument("--layout", default="NN")
    ap.add_argument("--calls", type=int, default=100)
    args = ap.parse_args()
    kernels = registry.select(args.kernels)
    timers = {f: Timer(flush=f) for f in FLUSHES}
    copy_gb_s = copy_bandwidth(timers["write"])
    print(f"device copy {copy_gb_s:.0f} GB/s (read + write); flush GPU time: "
          + ", ".join(f"{f} {t.flush_us:.0f} us" for f, t in timers.items()))
    print(f"{'shape':>18} {'kernel':28} {'flush':6} {'us':>8} {'%HBM':>6} {'x first':>8}")
    for m, n, k in parse_shapes(args.shapes):
        a, b = make_inputs(m, n, k, args.layout, device="cuda", seed=0, kind="randn")
        ref = reference(a, b)
        out = torch.empty((m, n), dtype=a.dtype, device="cuda")
        for kern in kernels:
            out.fill_(float("nan"))
            verdict = compare(kern.run(a, b, out), ref, error_bound(a, b, ref, kern.acc))
            if not verdict.ok:
                raise SystemExit(f"{kern.name} is wrong on {m}x{n}x{k} {args.layout}: {verdict.detail}")
        nbytes = 2 * (m * k + k * n + m * n)
        for flush, timer in timers.items():
            first = None
            for kern in kernels:
                us = statistics.median(timer.time(lambda: kern.run(a, b, out), args.calls)) * 1e3
                first = first or us
                hbm = nbytes / (us * 1e-6) / (copy_gb_s * 1e9) * 100
                print(f"{m:>6}x{n}x{k:<6} {kern.name:28} {flush:6} {us:8.1f} {hbm:6.1f} {first / us:8.3f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
