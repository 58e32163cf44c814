"""What calling through `torch.ops` costs on this host, before any kernel work (runs anywhere; CUDA rows on a GPU).

    python scripts/op_entry_cost.py [--calls 200000]

The Triton operator `torch.ops.tensorcore_hgemm.triton_hgemm` costs more per call than `triton_kernels.hgemm(a, b)`
with the same plan (`scripts/wall_time.py --ops`). This script measures PyTorch's share of that on tiny tensors:
a `torch.library.Library` operator with Python kernels at the CompositeExplicitAutograd and Autograd keys whose
implementation returns its input at once, the same Python function called directly, `torch.ops.aten.alias` (a C++
operator through `torch.ops`), and `torch.mm` beside `torch.ops.aten.mm` on 4 x 4 tensors (the same kernel through
the generated binding and through `torch.ops`); then a no-op operator registered by `oplib.define` itself (its
Autograd-key kernel with `_route`), on CPU tensors and, where there is a GPU, on CUDA tensors (what the dispatcher
adds for CUDA arguments). Microseconds per call, the median of 5 timings of --calls calls each.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch


def per_call_us(fn, calls: int) -> float:
    for _ in range(1000):
        fn()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=200000)
    args = ap.parse_args()
    lib = torch.library.Library("op_entry_cost", "FRAGMENT")
    lib.define("noop(Tensor a, Tensor b, str acc='fp32') -> Tensor")

    def noop(a, b, acc="fp32"):
        return a

    lib.impl("noop", noop, "CompositeExplicitAutograd")
    lib.impl("noop", lambda *args: noop(*args), "Autograd")
    op = torch.ops.op_entry_cost.noop
    a, b = torch.zeros(4, 4), torch.zeros(4, 4)
    rows = [("Python function, called directly", lambda: noop(a, b, "fp32")),
            ("no-op operator (Python kernels), torch.ops", lambda: op(a, b, "fp32")),
            ("torch.ops.aten.alias (C++)", lambda: torch.ops.aten.alias(a)),
            ("torch.mm, 4 x 4", lambda: torch.mm(a, b)),
            ("torch.ops.aten.mm, 4 x 4", lambda: torch.ops.aten.mm(a, b))]
    from hgemm_common.oplib import _route, define

    defined = define("op_entry_cost_noop", "(Tensor a, Tensor b, str acc='fp32') -> Tensor", noop, noop,
                     lambda ctx, grad: (grad, None, None), lambda ctx, inputs, output: None)
    rows += [("no-op operator by oplib.define, CPU tensors", lambda: defined(a, b, "fp32"))]
    if torch.cuda.is_available():
        ca, cb = a.cuda(), b.cuda()
        rows += [("no-op operator by oplib.define, CUDA tensors", lambda: defined(ca, cb, "fp32")),
                 ("no-op operator (Python kernels), CUDA tensors", lambda: op(ca, cb, "fp32")),
                 ("oplib._route((a, b, 'fp32')), CUDA tensors", lambda: _route((ca, cb, "fp32"))),
                 ("ca.new_empty(4, 4)", lambda: ca.new_empty(4, 4))]
    for name, fn in rows:
        print(f"{name:45s} {per_call_us(fn, args.calls):7.2f} us/call", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
