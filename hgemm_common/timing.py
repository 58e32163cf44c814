"""Per-call wall time, shared by the harness (the `wall us` column) and the Triton dispatcher (the ranking of close
kernels on small problems, `triton_kernels.dispatch.per_call_ms`)."""
from __future__ import annotations

import time

import torch


def wall_and_enqueue_us(fn, calls: int) -> tuple[float, float]:
    """(wall, enqueue): microseconds per call of `calls` back-to-back calls as `wall_us` times them, and the host
    time the loop itself took per call, before the closing synchronization. A call whose enqueue time is close to
    its wall time is host-bound; one whose wall time exceeds the enqueue time is bound by the GPU, or waits on it
    somewhere in its host path (a synchronizing call then shows as enqueue time of its own)."""
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return (t2 - t0) / calls * 1e6, (t1 - t0) / calls * 1e6


def wall_us(fn, calls: int) -> float:
    """Microseconds per call of `calls` back-to-back calls, timed by the host clock between two synchronizations:
    host costs count, and the GPU queue never drains between calls (as in a model's forward pass). One call
    first, so a first call's compile and choice are not in it. The inputs stay the same, as in the device timing
    without its L2 flush: operands that fit in L2 (50 MB on an H100) are read from it after the first call, for
    every kernel alike."""
    return wall_and_enqueue_us(fn, calls)[0]
