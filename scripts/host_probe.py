"""Host time per call of the Triton path and its layers beside torch.matmul (GPU only).

    python scripts/host_probe.py

For 16x4096x4096 and 128x4096x4096 (each twice: host timings on a shared machine move by tens of percent), prints
per entry the host time of one call while the GPU sleeps (50 ms of `torch.cuda._sleep` queued first, so the host
never waits on the queue: what a call costs the CPU) and the wall time per call back to back. Entries:
torch.matmul; triton_kernels.hgemm with and without out=; api.run (hgemm without the autograd check); the
operator with and without its default argument; the operator's implementation; torch.empty of the output. Then
the plan each kind of call runs and whether it launches directly. scripts/wall_time.py is the measure of record;
this one splits the layers.
"""
import time

import torch

import triton_kernels
import triton_kernels.ops  # noqa: F401  registers the operator
from compare.bench import wall_us
from triton_kernels import dispatch

SHAPES = [(16, 4096, 4096), (128, 4096, 4096), (16, 4096, 4096), (128, 4096, 4096)]


def host_us(f, n: int = 200) -> float:
    for _ in range(20):
        f()
    torch.cuda.synchronize()
    torch.cuda._sleep(int(2e9 * 0.05))  # 50 ms of GPU sleep: the host never waits on the queue
    t = time.perf_counter()
    for _ in range(n):
        f()
    dt = (time.perf_counter() - t) / n * 1e6
    torch.cuda.synchronize()
    return dt


def main():
    op = torch.ops.tensorcore_hgemm.triton_hgemm
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda").half()
        b = torch.randn(k, n, device="cuda").half()
        out = torch.empty(m, n, device="cuda", dtype=torch.half)
        entries = {
            "torch.matmul": lambda: torch.matmul(a, b),
            "hgemm out": lambda: triton_kernels.hgemm(a, b, out=out),
            "hgemm": lambda: triton_kernels.hgemm(a, b),
            "run": lambda: triton_kernels.api.run(a, b),
            "op": lambda: op(a, b, "fp32"),
            "op 2 args": lambda: op(a, b),
            "impl": lambda: triton_kernels.ops._impl(a, b),
            "empty": lambda: torch.empty(m, n, device="cuda", dtype=torch.half),
        }
        for f in entries.values():
            f()
        for name, f in entries.items():
            print(f"{m}x{n}x{k} {name:18s} host {host_us(f):6.1f} us  wall {wall_us(f, 300):6.1f} us")
        for o in (None, out):
            r = dispatch.PLANS.get(dispatch.key_of(a, b, o, "fp32", "auto", None, None))
            print("   plan", "out" if o is not None else "none", r.plan.name, "direct", bool(r.direct))


if __name__ == "__main__":
    main()
