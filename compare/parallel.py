"""Compiling ahead in worker processes: the main job and the tuner run every Triton kernel they are about to check or
time once, spread over processes (spawned: each its own CUDA context), so that the compiles (CPU-bound, one at a
time in a process) happen side by side and the serial check and timing that follow load compiled kernels from
Triton's disk cache."""
from __future__ import annotations

import multiprocessing as mp
import os
import time
import zlib

import torch


def gpu_operands(m: int, n: int, k: int, layout: str, dtype: str = "fp16", seed: int = 0):
    """Random A (M, K) and B (K, N) stored as `layout` says, made on the GPU (a large grid's operands would take
    seconds each from the CPU generator). For compiling and timing: the checks use compare.reference.make_inputs."""
    dt = torch.float16 if dtype == "fp16" else torch.bfloat16
    g = torch.Generator(device="cuda").manual_seed(seed)

    def one(rows, cols, order):
        t = torch.randn((rows, cols) if order == "N" else (cols, rows), generator=g, device="cuda", dtype=dt)
        return t if order == "N" else t.t()
    return one(m, k, layout[0]), one(k, n, layout[1])


def default_workers() -> int:
    return min(12, max(1, (os.cpu_count() or 2) - 2))


def shares_by(jobs: list, key, workers: int) -> list[list]:
    """Jobs split over `workers` by a stable hash of key(job): jobs with one key (one kernel) go to one worker, so
    no two workers compile the same kernel for the same specialization."""
    shares = [[] for _ in range(workers)]
    for j in jobs:
        shares[zlib.crc32(repr(key(j)).encode()) % workers].append(j)
    return [s for s in shares if s]


def run_shares(target, shares: list[list], label: str, log=print, every_s: float = 10.0) -> None:
    """target(share, queue) in one process per share; each job puts 1 on the queue when done. Logs progress."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=target, args=(share, queue)) for share in shares]
    for p in procs:
        p.start()
    total, done = sum(len(s) for s in shares), 0
    t0 = shown = time.time()
    while done < total and any(p.is_alive() for p in procs):
        try:
            done += queue.get(timeout=1.0)
        except Exception:  # noqa: BLE001 - queue.Empty: poll the processes again
            continue
        if time.time() - shown > every_s:
            shown = time.time()
            log(f"{label}: {done}/{total} ({shown - t0:.0f} s)")
    for p in procs:
        p.join()
    log(f"{label}: {done}/{total} in {time.time() - t0:.0f} s ({len(procs)} processes)")


def _warm_entries(jobs: list, queue) -> None:
    """Run each (entry name, kind, M, N, K, layout, dtype) once: its first call compiles what it runs."""
    from .registry import select

    by_name: dict = {}
    for name, kind, m, n, k, layout, dtype in jobs:
        if (name, kind, dtype) not in by_name:
            found = [e for e in select(None, include_all=True, kind=kind, dtype=dtype) if e.name == name]
            by_name[name, kind, dtype] = found[0] if found else None
        entry = by_name[name, kind, dtype]
        try:
            if entry is not None:
                a, b = gpu_operands(m, n, k, layout, dtype)
                if kind == "sparse":
                    from ptx_kernels.sparse import prune_2to4
                    a = prune_2to4(a)
                entry.run(a, b, torch.empty((m, n), dtype=a.dtype, device="cuda"))
        except Exception:  # noqa: BLE001 - the check and the bench meet it again and report it
            pass
        queue.put(1)
    torch.cuda.synchronize()


def warm_entries(jobs: list, workers: int, log=print) -> None:
    """Compile ahead: every job (entry name, kind, M, N, K, layout, dtype) run once in `workers` processes."""
    jobs = list(dict.fromkeys(jobs))
    if workers > 1 and jobs:
        run_shares(_warm_entries, shares_by(jobs, lambda j: j[0], workers), "compile ahead", log)
