"""Time pinned choices of the 2:4 sparse kernels beside torch.matmul and cuSPARSELt, in one process (GPU only).

    python scripts/time_sparse.py [--shapes 4096x4096x4096,8192x8192x8192] [--rounds 5] [--calls 20] [--layouts NN,NT]

Rows: torch.matmul on the pruned dense A (the baseline), torch.sparse.to_sparse_semi_structured(A) @ B
(cuSPARSELt), and `ptx_kernels.sparse_hgemm(..., tile=t)` for each (variant, tile, accumulation) in ENTRIES
(wgmma_sp: tile 1 / 2 = bands of 8 / 16 tile rows, 3 = clusters of two sharing B by multicast; 0 = the
launcher's default), for B row-major (NN) and/or column-major (NT: a transposed view of an N x K tensor, read in
place). Device time, L2 flushed before every
call (compare.bench.Timer), the rounds interleaved, medians; TFLOPS count the dense work (2 M N K). Every output is
checked first against the float64 product within the harness's bound for its accumulation (compare.reference), and a
wrong one is printed instead of a time. What to take for a default is decided here; `python -m compare bench --kind
sparse` is the benchmark of record. Its cuSPARSELt row is a plain torch.mm(sparse A, B) and has timed far slower than
the harness's at 4096^3 (not understood yet, docs/ladders/sparse.md): read cuSPARSELt from the harness.
"""
import argparse
import itertools
import statistics

import torch

import ptx_kernels
from compare.bench import Timer, parse_shapes, tflops
from compare.reference import compare, error_bound, reference
from ptx_kernels import sparse

ENTRIES = [("wgmma_sp", 1, "fp32"), ("wgmma_sp", 2, "fp32"), ("wgmma_sp", 3, "fp32"), ("wgmma_sp", 0, "fp32"),
           ("wgmma_sp", 1, "fp16"), ("wgmma_sp", 2, "fp16"), ("wgmma_sp", 3, "fp16"), ("mma_sp", 0, "fp32"),
           ("mma_sp", 0, "fp16")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="4096x4096x4096,8192x8192x8192,8192x28672x4096")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--variants", default="wgmma_sp,mma_sp")
    ap.add_argument("--layouts", default="NN", help="NN (B row-major), NT (B column-major) or both: NN,NT")
    args = ap.parse_args()
    layouts = args.layouts.split(",")
    if not set(layouts) <= {"NN", "NT"}:
        ap.error(f"--layouts takes NN and/or NT, not {args.layouts!r}")
    keep = set(args.variants.split(","))
    timer = Timer()
    torch.manual_seed(0)
    for (m, n, k), layout in itertools.product(parse_shapes(args.shapes), layouts):
        a = sparse.prune_2to4(torch.randn(m, k, device="cuda", dtype=torch.float16))
        if layout == "NN":
            b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        else:
            b = torch.randn(n, k, device="cuda", dtype=torch.float16).t()
        values, meta = sparse.compress(a)
        sa = torch.sparse.to_sparse_semi_structured(a)
        ref = reference(a, b)
        out = torch.empty((m, n), device="cuda", dtype=torch.float16)
        fns = {"torch.matmul": lambda: torch.matmul(a, b, out=out), "cuSPARSELt": lambda: torch.mm(sa, b)}
        for v, t, acc in ENTRIES:
            if v in keep:
                fns[f"{v} tile={t} {acc}"] = (lambda v=v, t=t, acc=acc: ptx_kernels.sparse_hgemm(
                    values, meta, b, variant=v, acc=acc, out=out, check_meta=False, tile=t))
        status = {}
        for name, fn in fns.items():
            verdict = compare(fn(), ref, error_bound(a, b, ref, "fp16" if name.endswith("fp16") else "fp32"))
            status[name] = "ok" if verdict.ok else f"WRONG ({verdict.detail})"
        times = {name: [] for name in fns}
        for _ in range(args.rounds):
            for name, fn in fns.items():
                if status[name] == "ok":
                    times[name] += timer.time(fn, args.calls)
        base = statistics.median(times["torch.matmul"])
        print(f"{m}x{n}x{k} {layout}")
        for name in fns:
            if status[name] != "ok":
                print(f"  {name:28s} {status[name]}")
                continue
            ms = statistics.median(times[name])
            print(f"  {name:28s} {tflops(m, n, k, ms):7.1f} TFLOPS  {base / ms:6.3f}x torch.matmul  {ms * 1e3:8.1f} us")


if __name__ == "__main__":
    main()
