"""Timing shared by the harness and the Triton dispatcher: the L2 flush ahead of each timed call (`L2Flush`), device
time the way the dispatcher ranks candidates (`device_ms`), and per-call wall time (the harness's `wall us` column,
and the ranking of close kernels on small problems, `triton_kernels.dispatch.per_call_ms`)."""
from __future__ import annotations

import statistics
import time

import torch

from .errors import HgemmValueError

L2_FLUSH_BYTES = 256 * 2**20  # > 5x the H100's 50 MB L2
FLUSHES = ("clean", "write", "none")  # L2Flush modes, the default first


class L2Flush:
    """Empties L2 before a timed call, so that the call reads its operands from DRAM as a call on cold data does.

    "clean" (the default): 256 MB written, then read back; L2 is left holding clean lines of that buffer, and the
    timed call's misses cost DRAM reads only. "write": the 256 MB write alone, as triton.testing.do_bench flushes
    (and this project did until a flush study, docs/design/triton.md): L2 is left full of dirty lines, which the
    timed call's misses must write back first. On the H100 that added microseconds to a decode-sized call reading
    32 MB (torch.matmul at 1x4096x4096) and pressed every
    memory-bound kernel towards the same time, hiding their differences. "none": nothing (operands stay in
    L2 from one call to the next)."""

    def __init__(self, mode: str = "clean", device=None):
        if mode not in FLUSHES:
            raise HgemmValueError(f"flush must be one of {FLUSHES}, got {mode!r}")
        self.mode = mode
        if mode != "none":
            self.buf = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device=device or "cuda")
            self._sum = torch.empty((), dtype=torch.float32, device=self.buf.device)

    def __call__(self) -> None:
        if self.mode == "none":
            return
        self.buf.zero_()
        if self.mode == "clean":
            torch.sum(self.buf, dim=0, out=self._sum)  # reads the 256 MB back (no allocation per flush)


def device_ms(fn, flush: L2Flush, warmup_ms: float = 5.0, rep_ms: float = 25.0) -> float:
    """Median device time of fn in milliseconds, CUDA events around each call with `flush` ahead of it, after a
    warm-up: triton.testing.do_bench's procedure (its call counts from a 5-call estimate that includes the flush)
    with this project's flush in place of do_bench's write-only one."""
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        flush()
        fn()
    end.record()
    torch.cuda.synchronize()
    estimate = max(start.elapsed_time(end) / 5, 1e-3)
    for _ in range(max(1, int(warmup_ms / estimate))):
        fn()
    n = max(1, int(rep_ms / estimate))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for s, e in zip(starts, ends):
        flush()
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


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
