"""What the vendor libraries run and how they accumulate (GPU only): the yardsticks' side of the comparison.

    python scripts/library_kernels.py [--shapes 1024x1024x1024,...] [--layouts NN,NT] [--sparse-shapes ...]
        [--probe-shapes ...] [--calls 5] [--ours]

1. Kernels: torch.matmul (cuBLAS) on each shape and layout, and torch's semi-structured sparse matmul (cuSPARSELt) on
   each sparse shape, run under the CUDA profiler; every kernel a call launches is listed with its grid, block,
   registers per thread, shared memory and median device time (L2 flushed before each call; from the profiler's
   trace). cuBLAS's and cuSPARSELt's kernel names spell their tile, cluster and split-K choices, which is what a
   hand-written kernel competes with on that shape. --ours lists this project's calls beside each torch.matmul
   (triton_kernels.hgemm with kernel="auto", its plan chosen on the first call, and ptx_kernels' wgmma_persistent,
   both writing into a preallocated out as the harness times them): every kernel a call launches, at boost clock.
2. Accumulation: each library and, as calibration, this project's kernels with fp32 and fp16 accumulation, on
   inputs whose fp16 accumulation shows: positive integers 1..3 (2:4 pruned for the sparse entries), K large enough
   that the sums pass 2048, where fp16's spacing exceeds 1. With fp32 accumulation every partial sum is exact and only
   the final rounding to fp16 errs, by at most half a unit in the last place (ulp) of the output; every rounding of
   an fp16 accumulator adds up to half an ulp of the running sum. The table gives the largest and mean error in
   output ulps against the exact (float64) product, and for torch.matmul both settings of
   torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction (default True: cuBLAS may reduce split-K
   partials in fp16).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile

import torch

from compare.bench import parse_shapes
from hgemm_common.timing import L2Flush

DEFAULT_SHAPES = ("1024x1024x1024,2048x2048x2048,4096x4096x4096,8192x8192x8192,16x4096x4096,128x4096x4096,"
                  "1x4096x4096,64x8192x8192,128x8192x8192,3000x5000x2000,8192x28672x4096")
DEFAULT_SPARSE = "4096x4096x4096,8192x8192x8192,8192x28672x4096"
DEFAULT_PROBE = "1024x1024x8192,128x4096x4096,16x4096x4096,1024x1024x1024"


def operand(rows: int, cols: int, major: str, *, low: int = -3, high: int = 3) -> torch.Tensor:
    """A (rows, cols) fp16 CUDA matrix of random integers in [low, high], row-major ("N") or column-major ("T")."""
    shape = (rows, cols) if major == "N" else (cols, rows)
    t = torch.randint(low, high + 1, shape, device="cuda", dtype=torch.int16).half()
    return t if major == "N" else t.t()


def kernel_events(fn, calls: int) -> list[dict]:
    """The CUDA kernels `calls` calls of fn launch (after one untimed call), each with the L2 flushed ahead, as the
    profiler's trace records them: name, grid, block, registers, shared memory, duration (us)."""
    from torch.profiler import ProfilerActivity, profile

    flush = L2Flush()
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            flush()
            fn()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    events = [e for e in trace.get("traceEvents", []) if e.get("cat") == "kernel"]
    return [e for e in events if not _flush_kernel(e["name"])]


def _flush_kernel(name: str) -> bool:
    """The L2 flush's own kernels (`L2Flush`: a fill of its buffer, then a sum over it)."""
    return ("elementwise_kernel" in name and "FillFunctor" in name) or ("reduce_kernel" in name and "sum_functor" in name)


def summarize(events: list[dict]) -> list[tuple[str, str, str, int, int, float, int]]:
    """One row per distinct kernel: (name, grid, block, registers, shared memory, median us, launches)."""
    rows: dict[tuple, list[float]] = {}
    for e in events:
        a = e.get("args", {})
        key = (e["name"], "x".join(map(str, a.get("grid", []))), "x".join(map(str, a.get("block", []))),
               int(a.get("registers per thread", 0)), int(a.get("shared memory", 0)))
        rows.setdefault(key, []).append(float(e.get("dur", 0.0)))
    return [(*k, statistics.median(v), len(v)) for k, v in rows.items()]


def print_kernels(title: str, fn, calls: int) -> None:
    print(f"\n{title}")
    try:
        rows = summarize(kernel_events(fn, calls))
    except Exception as e:  # noqa: BLE001 - a library that refuses the operands is reported, not fatal
        print(f"  refused: {str(e).splitlines()[0][:160]}")
        return
    for name, grid, block, regs, smem, us, n in rows:
        print(f"  {us:9.1f} us  x{n:<3d} grid {grid:<12s} block {block:<10s} regs {regs:<4d} smem {smem:<7d} {name}")


def ulp_errors(c: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """(max, mean) of |c - ref| in units of the last place of fp16 at ref (ref float64, normal fp16 range)."""
    spacing = torch.exp2(torch.floor(torch.log2(ref.abs().clamp_min(2.0**-14))) - 10)
    err = (c.double() - ref).abs() / spacing
    return err.max().item(), err.mean().item()


def probe(m: int, n: int, k: int) -> None:
    """The accumulation table for one shape (NN)."""
    import ptx_kernels
    from ptx_kernels import sparse

    torch.manual_seed(0)
    a, b = operand(m, k, "N", low=1), operand(k, n, "N", low=1)
    ref = a.double() @ b.double()
    print(f"\n{m}x{n}x{k} NN, integers 1..3: exact |C| up to {ref.abs().max().item():.0f}; error in output ulps "
          f"(fp32 accumulation <= 0.5)")
    rows = []
    flag = torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
    for allow in (True, False):
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = allow
        rows.append((f"torch.matmul (reduced-precision reduction {'allowed' if allow else 'off'})", a @ b, ref))
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = flag
    for acc in ("fp32", "fp16"):
        rows.append((f"ptx wgmma_persistent, {acc} accumulation", ptx_kernels.hgemm(a, b, kernel="wgmma_persistent",
                                                                                    acc=acc), ref))
    ap = sparse.prune_2to4(a)
    sref = ap.double() @ b.double()
    try:
        rows.append(("torch semi-structured (cuSPARSELt)", torch.mm(torch.sparse.to_sparse_semi_structured(ap), b),
                     sref))
    except Exception as e:  # noqa: BLE001
        print(f"  torch semi-structured refused: {str(e).splitlines()[0][:160]}")
    values, meta = sparse.compress(ap)
    for acc in ("fp32", "fp16"):
        rows.append((f"ptx wgmma_sp, {acc} accumulation", ptx_kernels.sparse_hgemm(values, meta, b, kernel="wgmma_sp",
                                                                                  acc=acc), sref))
    for name, c, r in rows:
        worst, mean = ulp_errors(c, r)
        print(f"  max {worst:8.2f}  mean {mean:6.3f}  {name}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", default=DEFAULT_SHAPES)
    p.add_argument("--layouts", default="NN,NT")
    p.add_argument("--sparse-shapes", default=DEFAULT_SPARSE)
    p.add_argument("--probe-shapes", default=DEFAULT_PROBE)
    p.add_argument("--calls", type=int, default=5)
    p.add_argument("--ours", action="store_true", help="also this project's Triton (auto) and wgmma_persistent calls")
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("library_kernels.py needs a CUDA GPU")
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"cuSPARSELt {torch.backends.cusparselt.version()}")
    for m, n, k in parse_shapes(args.shapes) if args.shapes else []:
        for layout in args.layouts.split(","):
            a, b = operand(m, k, layout[0]), operand(k, n, layout[1])
            print_kernels(f"torch.matmul {m}x{n}x{k} {layout}", lambda: a @ b, args.calls)
            if args.ours:
                import ptx_kernels
                import triton_kernels
                c = torch.empty(m, n, device="cuda", dtype=torch.float16)
                chosen = triton_kernels.plan(a, b, out=c).name
                print_kernels(f"triton_kernels.hgemm (auto: {chosen}) {m}x{n}x{k} {layout}",
                              lambda: triton_kernels.hgemm(a, b, out=c), args.calls)
                print_kernels(f"ptx_kernels.hgemm wgmma_persistent {m}x{n}x{k} {layout}",
                              lambda: ptx_kernels.hgemm(a, b, kernel="wgmma_persistent", out=c), args.calls)
    from ptx_kernels import sparse
    for m, n, k in parse_shapes(args.sparse_shapes) if args.sparse_shapes else []:
        for layout in args.layouts.split(","):
            ap, b = sparse.prune_2to4(operand(m, k, "N")), operand(k, n, layout[1])
            try:
                sa = torch.sparse.to_sparse_semi_structured(ap)
            except Exception as e:  # noqa: BLE001
                print(f"\ntorch semi-structured {m}x{n}x{k} {layout}: refused: {str(e).splitlines()[0][:160]}")
                continue
            print_kernels(f"torch semi-structured (cuSPARSELt) {m}x{n}x{k} {layout}", lambda: torch.mm(sa, b),
                          args.calls)
    for m, n, k in parse_shapes(args.probe_shapes) if args.probe_shapes else []:
        probe(m, n, k)


if __name__ == "__main__":
    main()
