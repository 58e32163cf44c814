"""The helpers the test files share (TESTING.md): small-integer operands, the exact check against the float64
reference, and a kernel call into a NaN-poisoned output. One place, so every test checks the same way; the harness
uses the same reference and comparison (`compare.reference`)."""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from compare.reference import MMA_K, Bound, compare, k_steps, poisoned_out, reference
from hgemm_common.validation import DTYPES

# bf16's largest run of consecutive integers (8 significant bits): past it the rounded reference could hide an
# off-by-one sum (257 rounds to 256), so an exact bf16 check asserts |C| stays within it.
BF16_EXACT_LIMIT = 256


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
