"""Sweep Triton configurations on given shapes beside torch.matmul, in one process (GPU only).

    python scripts/triton_sweep.py --shapes 128x4096x4096,1x4096x4096 --kernels splitk,splitk2 [--wide]
        [--configs 64x64x64_w4_s12_g8,...] [--layout NN] [--calls 10] [--top 3] [--rounds 3] [--budget-s 400]

For each shape and kernel, every configuration of the kernel's list (`configs()`; with --wide a larger grid, see
`wide()`; with --configs the named ones, in each kernel's list or not) that `prune_for_problem` keeps is run once
through the dispatcher's Runner (direct launches, as kernel="auto" runs its plan), checked against the float64
product within the harness's bound, then timed (compare.bench.Timer: CUDA events, L2 flushed before every call,
median of --calls); the --top fastest of each kernel are timed again beside torch.matmul over --rounds interleaved
rounds, and printed with their ratio to it. Kernels: blocked, gemv (M = 1 on CUDA cores), splitk (one launch: the last slice of a tile sums the
partials), splitk2 (the two-pass split-K: partial kernel + reduction kernel), splitk_tma (split-K on TMA loads),
tma, tma_full (the TMA kernel on one program per SM instead of the fewest that keep its rounds:
tma_persistent.programs), tma_lined (TMA on copies of A and B whose rows start on 128-byte lines, the copies part of
the time: what kernel="auto" weighs where rows lie off the lines), tma_lined_a / tma_lined_b (A only, B only
copied). This decides the tuning lists; `python -m compare bench` is the benchmark of record. --budget-s stops
sweeping (and prints what it has) when the time is up.
"""
import argparse
import statistics
import time

import torch

from compare.bench import Timer, parse_shapes
from compare.reference import compare, error_bound, make_inputs, reference
from triton_kernels import Config, configs, dispatch, splitk, tma_persistent
from triton_kernels.common import prune_for_problem

SMEM_LIMIT = 227 * 1024


def wide(kernel: str) -> list[Config]:
    """A grid around each kernel's list: tile shapes, K depths and stages, and (split-K) more splits."""
    out = []
    if kernel.startswith("splitk"):
        for bm in (16, 32, 64, 128):
            for bn in (32, 64, 128, 256):
                for bk, stages in ((64, 4), (64, 6), (128, 3), (128, 4), (256, 2), (256, 3)):
                    warps = 8 if bm * bn >= 128 * 128 else 4
                    for split in (2, 3, 4, 6, 8, 12, 16):
                        out.append(Config(bm, bn, bk, group_m=1 if bm <= 32 else 8, num_warps=warps,
                                          num_stages=stages, split_k=split))
    elif kernel == "gemv":  # one row per program: B tiles of 4096-16384 elements, 4 or 8 warps, 2-32 slices
        for bn in (32, 64, 128, 256, 512):
            for elems in (4096, 8192, 16384):
                bk = elems // bn
                if bk < 16:
                    continue
                for split in (2, 4, 8, 16, 32):
                    out.append(Config(1, bn, bk, group_m=8, num_warps=8 if elems > 8192 else 4, num_stages=1,
                                      split_k=split))
    elif kernel == "tma":
        for bm, bn in ((128, 256), (256, 128), (128, 128), (64, 256), (128, 64), (64, 128)):
            for stages in (3, 4, 5, 6):
                for e in (1, 2):
                    out.append(Config(bm, bn, 64, group_m=8, num_warps=8 if bm * bn >= 128 * 128 else 4,
                                      num_stages=stages, epilogue_split=e))
    else:
        for bm, bn in ((128, 256), (256, 128), (128, 128), (64, 128), (128, 64), (64, 64)):
            for bk, stages in ((64, 3), (64, 4), (64, 5), (32, 4), (128, 3)):
                for warps in (4, 8):
                    out.append(Config(bm, bn, bk, num_warps=warps, num_stages=stages))
    smem = [c for c in out if c.smem_bytes + (c.block_m * c.block_n * 2 // c.epilogue_split
                                              if kernel == "tma" else 0) <= SMEM_LIMIT]
    return smem


# sweep kernels that are the TMA kernel on aligned copies: which of A, B, C each copies
LINED = {"tma_lined": (True, True, False), "tma_lined_a": (True, False, False), "tma_lined_b": (False, True, False)}


def base_kernel(kernel: str) -> str:
    """The hgemm kernel a sweep kernel runs."""
    return "splitk" if kernel == "splitk2" else "tma" if kernel in LINED or kernel == "tma_full" else kernel


def runner(kernel: str, cfg: Config):
    """A plan's runner for one (kernel, config): splitk2 is the split-K kernel with its two-pass reduction,
    tma_lined the TMA kernel on copies of A and B with 128-byte aligned rows (the copies timed with it), tma_full
    the TMA kernel on one program per SM."""
    name = base_kernel(kernel)
    stage = LINED.get(kernel, (False, False, False))
    r = dispatch.Runner(dispatch.Plan(name, cfg, stage), acc_fp16=False)
    # module switches read by launches() on the runner's first call only: (module, name, value for this kernel)
    switch = {"splitk": (splitk, "FUSED", True), "splitk2": (splitk, "FUSED", False),
              "tma_full": (tma_persistent, "BALANCED", False)}.get(kernel)
    if switch is None:
        return r
    module, attr, value = switch

    def call(a, b, c):
        setattr(module, attr, value)
        try:
            r(a, b, c)
        finally:
            setattr(module, attr, True)
    return call


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--kernels", default="splitk,splitk2")
    ap.add_argument("--layout", default="NN")
    ap.add_argument("--wide", action="store_true")
    ap.add_argument("--configs", default="", help="comma-separated config names (Config.name), instead of the lists")
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--top", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=400.0)
    args = ap.parse_args()
    t_end = time.time() + args.budget_s
    timer = Timer()
    for m, n, k in parse_shapes(args.shapes):
        a, b = make_inputs(m, n, k, args.layout, device="cuda", kind="randn")
        ref = reference(a, b)
        bound = error_bound(a, b, ref, "fp32")
        c = torch.empty((m, n), dtype=torch.float16, device="cuda")
        results = {}  # (kernel, config name) -> (call, [ms])
        for kernel in args.kernels.split(","):
            base = base_kernel(kernel)
            cfgs = ([Config.from_name(x) for x in args.configs.split(",")] if args.configs else
                    wide(base) if args.wide else configs(base))
            cfgs = prune_for_problem(cfgs, m, n, k)
            swept = []
            for cfg in cfgs:
                if time.time() > t_end:
                    print(f"  (budget: {kernel} stopped after {len(swept)} of {len(cfgs)} configs)")
                    break
                call = runner(kernel, cfg)
                try:
                    c.fill_(float("nan"))
                    call(a, b, c)
                    torch.cuda.synchronize()
                except Exception as e:  # noqa: BLE001 - out of resources, compile errors: reported, skipped
                    print(f"  {kernel} {cfg.name}: {type(e).__name__}")
                    continue
                verdict = compare(c, ref, bound)
                if not verdict.ok:
                    print(f"  {kernel} {cfg.name}: WRONG ({verdict.detail})")
                    continue
                ms = statistics.median(timer.time(lambda: call(a, b, c), args.calls))
                swept.append((ms, cfg.name, call))
            swept.sort(key=lambda t: t[0])
            for ms, name, call in swept[:args.top]:
                results[(kernel, name)] = (call, [])
        timings = {"torch.matmul": []}
        for _ in range(args.rounds):
            timings["torch.matmul"] += timer.time(lambda: torch.matmul(a, b, out=c), args.calls)
            for key, (call, ts) in results.items():
                ts += timer.time(lambda: call(a, b, c), args.calls)
        base_ms = statistics.median(timings["torch.matmul"])
        print(f"{m}x{n}x{k} {args.layout}: torch.matmul {base_ms * 1e3:.1f} us")
        rows = sorted(((statistics.median(ts), kern, name) for (kern, name), (_, ts) in results.items()))
        for ms, kern, name in rows:
            print(f"  {kern:8s} {name:32s} {ms * 1e3:8.1f} us  {base_ms / ms:6.3f}x torch.matmul")
        print(flush=True)


if __name__ == "__main__":
    main()
