"""Sustained throughput under the board's power cap: each kernel called back to back for seconds (GPU only).

    python scripts/sustained.py [--shapes 4096x4096x4096,8192x8192x8192] [--layout NN]
                                [--kernels torch.matmul wgmma_persistent wgmma_cluster] [--seconds 3] [--rounds 2]
    python scripts/sustained.py --kind sparse [--kernels torch.matmul torch.sparse_semi_structured 'wgmma_sp*']
    python scripts/sustained.py --shapes 8192x8192x8192 --kernels torch.matmul wgmma_persistent \
                                --ceilings wgmma wgmma.random

The harness (`python -m compare bench`) times short batches behind a GPU sleep with L2 flushed before every call:
each call starts on a board that has just idled. A model's forward pass instead runs GEMMs back to back, and on a
700 W H100 a long run of large GEMMs reaches the power cap, where the SM clock drops and what decides the speed is
energy per FLOP (data moved from L2 and DRAM costs energy as well as the tensor cores' work). This script runs each
kernel back to back (no flush: each operand set is the same, as a layer's weight is) for --seconds, in --rounds
interleaved rounds (round 1 of every kernel, then round 2, ...), and prints per kernel and round: TFLOPS over the
whole run (CUDA events around it), the ratio to the first kernel of the list in the same round, and nvidia-smi's SM
clock and power (medians of samples every 0.1 s while it ran) with TFLOPS per watt. Every kernel's output is
checked against the high-precision reference before timing (the harness's error bound), so a wrong kernel is not
timed. --kind sparse takes the 2:4 sparse problem of `compare bench --kind sparse`: A pruned 2:4 along K for every
kernel (dense torch.matmul on the pruned A, torch's semi-structured sparse matmul, the sparse PTX kernels), FLOPs
counted as the dense product's. --flush flushes L2 before every call as the harness does and times each call alone
(the harness's timing without its GPU sleeps), to tell the flush's part in a difference from the clocks'.
--ceilings NAME... also runs those instruction-ceiling loops (the extension's `hgemm_ceilings()`: "wgmma", its
random-operand form "wgmma.random", ...) back to back in every round, after the kernels, fp32 accumulation: the
tensor cores' work alone, with nothing loaded from memory, under the same power and clock limits. Its TFLOPS over
a GEMM's in the same round bounds what any schedule of that GEMM could gain by moving its operands more cheaply
(what it showed on the H100: docs/design/hopper.md).
"""
from __future__ import annotations

import argparse
import statistics

import torch

from compare import registry
from compare.bench import parse_shapes
from compare.envinfo import Sampler
from compare.reference import compare, error_bound, make_inputs, reference
from hgemm_common.timing import L2Flush


def run_for(fn, seconds: float, flush=None) -> tuple[int, float]:
    """Calls `fn` back to back for about `seconds` of GPU time: (calls, milliseconds of GPU time). Without `flush`,
    the time between two events around all the calls; with it, `flush()` runs before every call (the harness's L2
    flush) and each call is timed by its own pair of events, so the time is the calls' alone."""
    fn()
    torch.cuda.synchronize()
    start, probe, end = (torch.cuda.Event(enable_timing=True) for _ in range(3))
    start.record()
    fn()
    probe.record()
    probe.synchronize()
    per_call_ms = max(start.elapsed_time(probe), 1e-3)
    calls = max(1, int(seconds * 1e3 / per_call_ms))
    if flush is not None:
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(calls)]
        for e0, e1 in pairs:
            flush()
            e0.record()
            fn()
            e1.record()
        torch.cuda.synchronize()
        return calls, sum(e0.elapsed_time(e1) for e0, e1 in pairs)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return calls, start.elapsed_time(end)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="4096x4096x4096,8192x8192x8192")
    ap.add_argument("--layout", default="NN")
    ap.add_argument("--kernels", nargs="+", default=["torch.matmul", "wgmma_persistent", "wgmma_cluster"])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--kind", choices=("dense", "sparse"), default="dense")
    ap.add_argument("--ceilings", nargs="*", default=[],
                    help="instruction-ceiling loops to run back to back after the kernels in every round")
    ap.add_argument("--flush", action="store_true",
                    help="flush L2 before every call as the harness does (each call timed alone, no GPU sleep)")
    args = ap.parse_args()
    flush = L2Flush() if args.flush else None
    kernels = registry.select(args.kernels, kind=args.kind)
    ceilings = ceiling_runners(args.ceilings)
    print(f"{'shape':>18} {'layout':6} {'round':>5} {'kernel':28} {'TFLOPS':>8} {'x first':>8} "
          f"{'SM MHz':>7} {'W':>6} {'TFLOPS/W':>9}")
    for m, n, k in parse_shapes(args.shapes):
        a, b = make_inputs(m, n, k, args.layout, device="cuda", seed=0, kind="randn")
        if args.kind == "sparse":
            from ptx_kernels.sparse import prune_2to4
            a = prune_2to4(a)  # every kernel multiplies the same pruned A
        ref = reference(a, b)
        outs = {kern.name: torch.empty((m, n), dtype=a.dtype, device="cuda") for kern in kernels}
        for kern in kernels:
            out = outs[kern.name]
            out.fill_(float("nan"))
            got = kern.run(a, b, out)  # the output written: `out`, or the entry's own (torch's sparse matmul)
            verdict = compare(got, ref, error_bound(a, b, ref, kern.acc))
            if not verdict.ok:
                raise SystemExit(f"{kern.name} is wrong on {m}x{n}x{k} {args.layout}: {verdict.detail}")
        flop = 2.0 * m * n * k
        runs = [(kern.name, (lambda kern=kern: kern.run(a, b, outs[kern.name])), flop) for kern in kernels]
        for r in range(args.rounds):
            first = None
            for name, fn, fn_flop in runs + ceilings:
                with Sampler(period=0.1) as sampler:
                    calls, ms = run_for(fn, args.seconds, None if name.startswith("ceiling:") else flush)
                tflops = fn_flop * calls / (ms * 1e-3) / 1e12
                first = first or tflops
                s = sampler.summary()
                clock = s.get("sm_clock_mhz_median", float("nan"))
                watts = statistics.median([x[1] for x in sampler.samples]) if sampler.samples else float("nan")
                print(f"{m:>6}x{n}x{k:<6} {args.layout:6} {r + 1:>5} {name:28} {tflops:8.1f} "
                      f"{tflops / first:8.3f} {clock:7.0f} {watts:6.0f} {tflops / watts:9.3f}", flush=True)
    return 0


def ceiling_runners(names: list[str]) -> list[tuple[str, object, float]]:
    """(row name, launch, FLOPs per launch) of each named instruction-ceiling loop at the harness's loop length
    (`compare.frame.ITERS`), fp32 accumulation, on its own number of blocks per SM."""
    if not names:
        return []
    import ptx_kernels
    from compare.frame import ITERS

    ext = ptx_kernels.load()
    missing = sorted(set(names) - set(ext.hgemm_ceilings()))
    if missing:
        raise SystemExit(f"no instruction ceiling named {missing} in this build; it has {ext.hgemm_ceilings()}")
    sink = torch.empty(32 * 2**20 // 4, dtype=torch.float32, device="cuda")
    out = []
    for name in names:
        iters = ITERS.get(name, 4096)
        flop = ext.hgemm_ceiling(name, sink, iters, False, 0)  # one launch, which also returns its FLOPs
        out.append((f"ceiling:{name}", lambda name=name, iters=iters: ext.hgemm_ceiling(name, sink, iters, False, 0),
                    flop))
    return out


if __name__ == "__main__":
    raise SystemExit(main())
