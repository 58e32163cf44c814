"""The helpers the test files share (TESTING.md): small-integer operands, the exact check against the float64
reference, and a kernel call into a NaN-poisoned output. One place, so every test checks the same way; the harness
uses the same reference and comparison (`compare.reference`)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
import torch

from compare.reference import MMA_K, Bound, compare, k_steps, make_inputs, poisoned_out, reference
from hgemm_common.plans import LRU
from hgemm_common.validation import DTYPES

# bf16's largest run of consecutive integers (8 significant bits): past it the rounded reference could hide an
# off-by-one sum (257 rounds to 256), so an exact bf16 check asserts |C| stays within it.
BF16_EXACT_LIMIT = 256
ROOT = Path(__file__).resolve().parent.parent
# shared_inputs' operands, by make_inputs' arguments -> (A, B, pristine copies of A and B)
_SHARED = LRU(64)


def ints(*shape: int, seed: int = 0, dtype: str = "fp16", device="cpu",
         generator: torch.Generator | None = None) -> torch.Tensor:
    """Integers in [-3, 3] of `dtype` ("fp16" or "bf16"): every product sum of a few terms is exact. Drawn on the
    CPU from `generator` (or a new one seeded with `seed`), then moved to `device`."""
    g = generator if generator is not None else torch.Generator().manual_seed(seed)
    return torch.randint(-3, 4, shape, generator=g).to(DTYPES[dtype]).to(device)


def assert_exact(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor, what: str = "", ref: torch.Tensor | None = None,
                 bound: Bound | None = None) -> None:
    """C equals the float64 product of A and B rounded to C's dtype, bit for bit (or, given `bound` from
    `error_bound`, passes that random-input check); the message names `what`, the first bad indices and the largest
    error."""
    ref = reference(a, b) if ref is None else ref
    if bound is None and c.dtype == torch.bfloat16:
        assert float(ref.abs().max()) <= BF16_EXACT_LIMIT, \
            f"{what}: |C| past {BF16_EXACT_LIMIT}, the bf16 check would lose bits"
    verdict = compare(c, ref, bound)
    assert verdict.ok, f"{what}: {verdict.detail}" if what else verdict.detail


def a_copies(launch: dict) -> list[str]:
    """The copies of A that a PTX call (`ptx_kernels.last_launch()`) made before its kernel read it."""
    return [c for c in launch["copies"] if c.startswith("A ")]


def in_place_operand(t: torch.Tensor, col: bool) -> torch.Tensor:
    """t's values in its layout (col: column-major) in storage the Hopper kernels read in place whatever the shape:
    the leading dimension rounded up to 8 elements (16-byte rows) plus 8, and 3 more rows of the other dimension;
    the padding is NaN, so a kernel reading past the operand's edges writes NaN into C."""
    rows, cols = t.shape
    lines, length = (cols, rows) if col else (rows, cols)  # storage order: `lines` rows of `length` elements
    buf = torch.full((lines + 3, -(-length // 8) * 8 + 8), float("nan"), dtype=t.dtype, device=t.device)
    view = buf[:lines, :length]
    view = view.t() if col else view
    view.copy_(t)
    return view


def on_side_stream_and_in_graph(run: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], ins, refs,
                                 after_side: Callable[[], None]) -> None:
    """run(a, b) for each (a, b) of `ins` on a side stream (each result compared with its ref of `refs`; then
    after_side(), the caller's check of what launched), then one call captured in a CUDA graph on copies of ins[0]
    and replayed on each input copied in: for a launcher that allocates a workspace from the caching allocator on the
    current stream and queues a second kernel behind the first."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        outs = [run(a, b) for a, b in ins]
    side.synchronize()
    after_side()
    assert all(compare(c, r).ok for c, r in zip(outs, refs))
    a, b = (t.clone() for t in ins[0])
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        out = run(a, b)
    for i in (1, 2, 0):
        a.copy_(ins[i][0])
        b.copy_(ins[i][1])
        graph.replay()
        torch.cuda.synchronize()
        assert compare(out, refs[i]).ok, i


def poisoned_call(run: Callable[[torch.Tensor], torch.Tensor], m: int, n: int, device,
                  dtype: str = "fp16") -> torch.Tensor:
    """run(out) with `out` an (m, n) tensor full of NaN, so an element the kernel does not write fails the check;
    the call must return `out` itself. Synchronizes a CUDA device, so errors surface here."""
    out = poisoned_out(m, n, device, dtype)
    c = run(out)
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
    assert c is out, "the kernel returned another tensor than out="
    return c


def emulated(a: torch.Tensor, b: torch.Tensor, acc: str = "fp32", step: int = MMA_K, splits: int = 1) -> torch.Tensor:
    """A kernel's C = A @ B emulated on the CPU, for checking the random-input check: products exact, the partial
    sum rounded to the accumulator (fp16 or fp32, to nearest) after every `step` terms in K order (16: a tensor-core
    k-step, as mma.sync m16n8k16 and wgmma k16 round an fp16 accumulator; 1: an FMA chain, as simt_naive's __hfma),
    K cut into `splits` slices of whole steps, each accumulated from zero and then added in fp32 in slice order (a
    split-K kernel), the sum rounded to A's dtype."""
    acc_dtype = np.float16 if acc == "fp16" else np.float32
    m, n = a.shape[0], b.shape[1]
    parts = torch.bmm(*k_steps(a, b, step, torch.float64)).numpy()  # (step, m, n): its products summed exactly
    steps = parts.shape[0]
    total = np.zeros((m, n), dtype=np.float32)
    for s in range(splits):  # numpy: the loop runs thousands of small steps, a fraction of torch's cost per call
        s_sum = np.zeros((m, n), dtype=np.float64)
        for j in range(steps * s // splits, steps * (s + 1) // splits):
            s_sum = (s_sum + parts[j]).astype(acc_dtype).astype(np.float64)
        total = total + s_sum.astype(np.float32)
    return torch.from_numpy(total).to(a.dtype)


def shared_inputs(m: int, n: int, k: int, layout: str = "NN", *, device="cuda", seed: int = 0, kind: str = "int",
                  dtype: str = "fp16") -> tuple[torch.Tensor, torch.Tensor]:
    """`compare.reference.make_inputs` with these arguments, made once and shared by every test that reads the same
    operands (the split-K tests check every kernel, accumulation and split on one set per shape and layout). They are
    drawn on the CPU, and a large bf16 operand is masked there too (`exact_window`): per test, that cost more than
    the kernels it fed. Callers must not write into them; each reuse checks against a pristine copy that nothing
    did (a kernel writing into its inputs fails there, by name)."""
    key = (m, n, k, layout, str(device), seed, kind, dtype)
    hit = _SHARED.get(key)
    if hit is None:
        a, b = make_inputs(m, n, k, layout, device=device, seed=seed, kind=kind, dtype=dtype)
        hit = _SHARED.put(key, (a, b, a.clone(), b.clone()))
    a, b, a0, b0 = hit
    assert torch.equal(a, a0) and torch.equal(b, b0), \
        f"the shared operands of {m}x{n}x{k} {layout} seed {seed} were written into since a test made them"
    return a, b


def run_children(code: str, *, timeout: float, parts: int | None = None) -> list[dict]:
    """Run `code` in `parts` child Pythons side by side and return the JSON each prints last on stdout, in order.

    The children run without TRITON_INTERPRET (they compile for, or run on, the real GPU) and learn their share from
    a first line `PART, PARTS = j, parts` (j = 0 .. parts - 1): Triton's compiles are CPU-bound and one at a time in
    a process, so a probe that compiles every configuration splits them among parts (by default as many as the CPUs,
    at most 4). A child still running after `timeout` seconds (a hung kernel: a wrong mbarrier phase or expect_tx
    count waits forever, TESTING.md 12) is killed with the others and fails the test with the end of its output;
    a child that exits with an error fails it with its stderr."""
    parts = parts or max(1, min(4, len(os.sched_getaffinity(0))))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory() as tmp:
        logs = [(Path(tmp) / f"{j}.out", Path(tmp) / f"{j}.err") for j in range(parts)]
        procs = []
        for j, (out, err) in enumerate(logs):  # files, not pipes: a child that prints much never blocks on a reader
            with open(out, "w") as o, open(err, "w") as e:
                procs.append(subprocess.Popen([sys.executable, "-c", f"PART, PARTS = {j}, {parts}\n{code}"],
                                              cwd=ROOT, env=env, stdout=o, stderr=e))
        deadline = time.monotonic() + timeout
        try:
            for p in procs:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            running = [j for j, p in enumerate(procs) if p.poll() is None]
            for p in procs:
                p.kill()
                p.wait()
            tails = "\n".join(f"child {j}: {(logs[j][0].read_text() + logs[j][1].read_text())[-1500:]}"
                              for j in running)
            pytest.fail(f"{len(running)} of {parts} children still running after {timeout} s (a hung kernel?); "
                        f"their output:\n{tails}")
        results = []
        for j, (p, (out, err)) in enumerate(zip(procs, logs)):
            assert p.returncode == 0, f"child {j} of {parts} exited {p.returncode}: {err.read_text()[-3000:]}"
            results.append(json.loads(out.read_text().strip().splitlines()[-1]))
    return results


def table_of(entries: dict, arch: int = 90, sms: int = 132):
    """A plan table (`triton_kernels.plan_table.Table`) of these entries (class key -> `table_entry`) for a GPU."""
    from triton_kernels import plan_table

    return plan_table.Table({"format": plan_table.FORMAT, "kind": "tensorcore_hgemm plan table",
                             "device": {"name": "test", "arch": arch, "sms": sms}, "versions": {}, "commit": "c",
                             "date": "d", "command": "python -m compare tune", "entries": entries})


def table_entry(kernel: str = "triton_tma", config: str = "128x256x64_w8_s3_g8", stage: str = "",
                shapes: tuple = ()) -> dict:
    """A table entry naming one plan (and that kernel's configuration), timed at `shapes` ("MxNxK"; none: it
    holds for every shape of its class)."""
    return {"plan": {"kernel": kernel, "config": config, "stage": stage, "ms": 1.0},
            "kernels": {kernel: config}, "shapes": list(shapes)}
