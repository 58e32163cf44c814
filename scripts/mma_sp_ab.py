"""A/B of mma_sp main-loop variants in one build (GPU only; an experiment, reverted after its measurement).

    python scripts/mma_sp_ab.py 0,1,2,3,4,5 517x999x1003,4096x4096x4096,8192x8192x8192 NN,NT 3

HGEMM_MMA_SP_AB=v makes launch_mma_sp (sm80/mma_sp.cu at this commit) run instantiation v: 0 the committed kernel
(metadata copy behind a branch; copies at the tile start in the 128 x 256 fp32 tile, after pair 6 in the 256 x 256
fp16 tile), 1-5 the metadata copy predicated instead (one basic block per k-tile) with the copies at other pairs
(SpTile<..., COPY_NN, COPY_NT>). Each variant is checked against the float64 product on every shape (NaN-poisoned
output), then timed beside torch.matmul (device time, L2 flushed, medians of the interleaved rounds x 20 calls).
"""
import os, statistics, sys, itertools
import torch
import ptx_kernels
from compare.bench import Timer, tflops
from compare.reference import compare, error_bound, reference
from ptx_kernels import sparse

variants = [int(v) for v in sys.argv[1].split(",")]
shapes = [tuple(int(x) for x in s.split("x")) for s in sys.argv[2].split(",")]
layouts = sys.argv[3].split(",")
reps = int(sys.argv[4]) if len(sys.argv) > 4 else 2
timer = Timer()
torch.manual_seed(0)
for (m, n, k), layout in itertools.product(shapes, layouts):
    a = sparse.prune_2to4(torch.randn(m, k, device="cuda", dtype=torch.float16))
    b = torch.randn(k, n, device="cuda", dtype=torch.float16) if layout == "NN" else \
        torch.randn(n, k, device="cuda", dtype=torch.float16).t()
    values, meta = sparse.compress(a)
    ref = reference(a, b)
    out = torch.empty((m, n), device="cuda", dtype=torch.float16)
    fns = {"torch.matmul": (None, lambda: torch.matmul(a, b, out=out))}
    for v, acc in itertools.product(variants, ["fp32", "fp16"]):
        fns[f"v{v} {acc}"] = (v, lambda acc=acc: ptx_kernels.sparse_hgemm(values, meta, b, variant="mma_sp", acc=acc,
                                                                          out=out, check_meta=False))
    ok = {}
    for name, (v, fn) in fns.items():
        if v is not None:
            os.environ["HGEMM_MMA_SP_AB"] = str(v)
        out.fill_(float("nan"))
        verdict = compare(fn(), ref, error_bound(a, b, ref, "fp32" if name.endswith("fp32") else "fp16"))
        ok[name] = verdict.ok
        if not verdict.ok:
            print(f"  {name} WRONG {verdict.detail}", flush=True)
    times = {name: [] for name in fns}
    for _ in range(reps):
        for name, (v, fn) in fns.items():
            if not ok[name]:
                continue
            if v is not None:
                os.environ["HGEMM_MMA_SP_AB"] = str(v)
            times[name] += timer.time(fn, 20)
    base = statistics.median(times["torch.matmul"])
    print(f"{m}x{n}x{k} {layout}", flush=True)
    for name in fns:
        if ok[name]:
            ms = statistics.median(times[name])
            print(f"  {name:16s} {tflops(m, n, k, ms):7.1f} TFLOPS {base / ms:6.3f}x torch.matmul {ms * 1e3:8.1f} us",
                  flush=True)
