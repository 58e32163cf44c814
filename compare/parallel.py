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


def spawn_shares(target, shares: list[list], collect, during=None, nice: int = 0) -> None:
    """target(share, queue) in one process per share; each puts (kind, payload) messages, which `collect(kind,
    payload)` gets here in arrival order. `during()`, when given, runs in this process meanwhile. nice > 0: the
    processes run at that lower priority (their children too)."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    _run_processes([ctx.Process(target=target, args=(share, q)) for share in shares], q, collect, during, nice)


def spawn_pulling(target, units: list, collect, workers: int, during=None, nice: int = 0) -> None:
    """target(tasks, queue) in `workers` processes that share one queue of `units`: each takes the next unit (`for
    unit in iter(tasks.get, None)`) when it has finished its last, so that no process idles while another still has a
    backlog, whatever each unit costs; give the costliest first. Messages, `collect`, `during` and `nice` as
    spawn_shares's."""
    ctx = mp.get_context("spawn")
    tasks, q = ctx.Queue(), ctx.Queue()
    for unit in units:
        tasks.put(unit)
    workers = max(1, min(workers, len(units)))
    for _ in range(workers):
        tasks.put(None)  # one end mark a process
    _run_processes([ctx.Process(target=target, args=(tasks, q)) for _ in range(workers)], q, collect, during, nice)


def _run_processes(procs: list, q, collect, during, nice: int) -> None:
    """Start `procs` (at priority `nice`), run `during()`, pass their messages on queue `q` to `collect` until every
    one has ended."""
    import queue as queue_mod

    for p in procs:
        p.start()
        if nice:
            os.setpriority(os.PRIO_PROCESS, p.pid, nice)
    if during is not None:
        during()
    while True:
        try:
            collect(*q.get(timeout=0.5))
        except queue_mod.Empty:
            if not any(p.is_alive() for p in procs):
                break
    for p in procs:
        p.join()


def run_shares(target, shares: list[list], label: str, log=print, every_s: float = 10.0) -> None:
    """spawn_shares for jobs that report nothing but their end (each puts 1): logs progress every `every_s`."""
    total, t0, state = sum(len(s) for s in shares), time.time(), {"done": 0, "shown": time.time()}

    def collect(*msg):
        state["done"] += 1
        if time.time() - state["shown"] > every_s:
            state["shown"] = time.time()
            log(f"{label}: {state['done']}/{total} ({state['shown'] - t0:.0f} s)")

    spawn_shares(_Counted(target), shares, collect)
    log(f"{label}: {state['done']}/{total} in {time.time() - t0:.0f} s ({len(shares)} processes)")


class _Counted:
    """target(share, queue) whose jobs put a bare 1, as spawn_shares's (kind, payload) messages (a class, not a
    closure: spawned processes get it by pickling)."""

    def __init__(self, target):
        self.target = target

    def __call__(self, share, q):
        self.target(share, _Tagging(q))


class _Tagging:
    def __init__(self, q):
        self.q = q

    def put(self, item):
        self.q.put(("done", item))


def warm_one(job: tuple) -> None:
    """Run one (entry name, kind, M, N, K, layout, dtype) once: its first call compiles what it runs. Errors are
    left to the check and the bench, which meet them again and report them."""
    from .registry import select

    name, kind, m, n, k, layout, dtype = job
    found = [e for e in select(None, include_all=True, kind=kind, dtype=dtype) if e.name == name]
    try:
        if found:
            a, b = gpu_operands(m, n, k, layout, dtype)
            if kind == "sparse":
                from ptx_kernels.sparse import prune_2to4
                a = prune_2to4(a)
            found[0].run(a, b, torch.empty((m, n), dtype=a.dtype, device="cuda"))
    except Exception:  # noqa: BLE001 - the check and the bench meet it again and report it
        pass
