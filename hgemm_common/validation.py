"""Input validation shared by every HGEMM entry point (Triton and PTX) and the operators.

One implementation, so that `triton_kernels.hgemm` and `ptx_kernels.hgemm` reject the same bad input with the
same words. Messages follow torch.mm's where torch.mm has one
("mat1 and mat2 shapes cannot be multiplied (3x4 and 5x6)").
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import torch

from .errors import HgemmTypeError, HgemmValueError
from .record import ACCS_FOR

INT32_MAX = 2**31 - 1

# The input dtypes the project knows, by the names records and the harness use. Every kernel reads A and B of one
# dtype and writes C in that dtype; bf16 accumulates in fp32 only (mma.sync and wgmma have no bf16 accumulator).
DTYPES: dict[str, torch.dtype] = {"fp16": torch.float16, "bf16": torch.bfloat16}
DTYPE_NAMES: dict[torch.dtype, str] = {v: k for k, v in DTYPES.items()}


def dtype_name(dtype: torch.dtype) -> str:
    """"fp16" / "bf16" for torch.float16 / torch.bfloat16 (a KeyError for others: validate() has rejected them)."""
    return DTYPE_NAMES[dtype]


def check_acc(dtype: str, acc: str, who: str = "hgemm") -> None:
    """Raise a one-line ValueError when accumulation `acc` is not offered for inputs of `dtype`."""
    if acc not in ACCS_FOR[dtype]:
        if dtype == "bf16":
            raise HgemmValueError(f"{who}: bf16 inputs accumulate in fp32 only (mma.sync and wgmma have no bf16 "
                                  f"accumulator), got acc={acc!r}")
        raise HgemmValueError(f"{who}: acc must be one of {ACCS_FOR[dtype]} for {dtype} inputs, got {acc!r}")


def check_dtype_offered(dtype: str, offered: tuple[str, ...], who: str) -> None:
    """Raise a one-line TypeError when a kernel (`who`) does not take `dtype`, naming the dtypes it does."""
    if dtype not in offered:
        raise HgemmTypeError(f"{who} takes {' or '.join(offered)} inputs, got {DTYPES[dtype]}")


def interpreter_active() -> bool:
    """True when Triton runs kernels in its CPU interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@functools.cache
def interpreter_numpy_problem() -> str | None:
    """Why Triton's interpreter cannot run kernels with the installed numpy (None when it can): from numpy 2.4 on,
    int() of a one-element array raises, and the interpreter (Triton 3.6) relies on it for every index it reads."""
    import numpy as np

    major, minor = (int(x) for x in np.__version__.split(".")[:2])
    if (major, minor) >= (2, 4):
        return (f"Triton's interpreter (TRITON_INTERPRET=1) needs numpy<2.4, and numpy {np.__version__} is "
                "installed: pip install 'numpy<2.4'")
    return None


@dataclass(frozen=True)
class Problem:
    """A validated C[M, N] = A[M, K] @ B[K, N] with the output tensor chosen; dtype names A's, B's and C's
    ("fp16" or "bf16")."""

    m: int
    n: int
    k: int
    out: torch.Tensor
    dtype: str = "fp16"

    @property
    def empty(self) -> bool:
        """Nothing to launch: the output has no elements, or K == 0 and it is all zeros."""
        return self.m == 0 or self.n == 0 or self.k == 0


def _shape(t: torch.Tensor) -> str:
    return "x".join(str(s) for s in t.shape)


def max_element_offset(t: torch.Tensor) -> int:
    """Largest element offset (from the data pointer) that a kernel indexing `t` by its strides reaches."""
    if t.numel() == 0:
        return 0
    return sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride()))


def needs_int64_indexing(*tensors: torch.Tensor) -> bool:
    """True when some element offset of some tensor does not fit in int32."""
    return any(max_element_offset(t) > INT32_MAX for t in tensors)


def _check_matrix(name: str, t: object) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise HgemmTypeError(f"hgemm: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != 2:
        raise HgemmValueError(f"hgemm: {name} must be a 2-D matrix, got a {t.dim()}-D tensor of shape ({_shape(t)})")
    return t


def _extent(t: torch.Tensor) -> tuple[int, int]:
    """[first, last + 1) byte addresses a 2-D tensor with elements can reach through its strides."""
    (rows, cols), (sr, sc) = t.shape, t.stride()
    p = t.data_ptr()
    return p, p + ((rows - 1) * abs(sr) + (cols - 1) * abs(sc) + 1) * t.element_size()


def _self_overlapping(t: torch.Tensor) -> bool:
    """Whether two elements of the 2-D tensor t share memory (strides such as (1, 1) on 3 x 5): the smaller stride
    times its dimension's size reaches past the larger stride. A kernel's stores would race there."""
    (rows, cols), (sr, sc) = t.shape, t.stride()
    if rows <= 1 or cols <= 1:
        return False
    (s_small, n_small), (s_big, _) = sorted([(abs(sr), rows), (abs(sc), cols)])
    return s_small == 0 or s_big < s_small * n_small


def _overlaps_any(out: torch.Tensor, *inputs: torch.Tensor) -> bool:
    """Whether out's byte extent meets an input's (all 2-D, one device; empty tensors meet nothing). On every call
    with out= (a few microseconds matter there): 2-D arithmetic instead of max_element_offset's general loop."""
    if out.numel() == 0:
        return False
    o0, o1 = _extent(out)
    for t in inputs:
        if t.numel():
            t0, t1 = _extent(t)
            if o0 < t1 and t0 < o1:
                return True
    return False


def validate(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None, *,
             allow_cpu: bool | None = None) -> Problem:
    """Check a, b (and out) for an fp16 or bf16 GEMM (A, B and C of one dtype); allocate the output when `out` is
    None. Whether a kernel takes the dtype is the caller's question (`Variant.dtypes`, `check_dtype_offered`).

    allow_cpu: accept CPU tensors (only the Triton interpreter can run on them). Defaults to
    `interpreter_active()`.
    """
    if allow_cpu is None:
        allow_cpu = interpreter_active()
    a = _check_matrix("mat1", a)
    b = _check_matrix("mat2", b)
    for name, t in (("mat1", a), ("mat2", b), ("out", out)):
        if isinstance(t, torch.Tensor) and t._is_zerotensor():
            raise HgemmValueError(f"hgemm: {name} is a ZeroTensor (torch._efficientzerotensor: no memory to read or "
                                  f"write); pass a materialized tensor such as torch.zeros_like({name})")
    if a.dtype not in DTYPE_NAMES or b.dtype != a.dtype:
        raise HgemmTypeError(
            f"hgemm: expected both inputs to be torch.float16 or both torch.bfloat16, got mat1 {a.dtype} and "
            f"mat2 {b.dtype}")
    if a.shape[1] != b.shape[0]:
        raise HgemmValueError(f"mat1 and mat2 shapes cannot be multiplied ({_shape(a)} and {_shape(b)})")
    if a.device != b.device:
        raise HgemmValueError(
            f"Expected all tensors to be on the same device, but found at least two devices, "
            f"{a.device} and {b.device}!")
    if a.device.type != "cuda" and not allow_cpu:
        # Under the interpreter the caller is a kernel the interpreter cannot run (PTX): pointing at
        # TRITON_INTERPRET would send the user round in a circle.
        hint = ("the Triton interpreter runs only the Triton kernels on CPU tensors" if interpreter_active() else
                "CPU tensors are accepted only by the Triton kernels under the interpreter, TRITON_INTERPRET=1 "
                "set before triton_kernels is imported")
        raise HgemmValueError(f"hgemm: inputs are on {a.device}; these kernels need CUDA tensors ({hint})")
    m, k = a.shape
    n = b.shape[1]
    if out is None:
        out = torch.empty((m, n), dtype=a.dtype, device=a.device)
    else:
        if not isinstance(out, torch.Tensor):
            raise HgemmTypeError(f"hgemm: out must be a torch.Tensor, got {type(out).__name__}")
        if out.dtype != a.dtype:
            raise HgemmTypeError(f"hgemm: out must be {a.dtype} like the inputs, got {out.dtype}")
        if tuple(out.shape) != (m, n):
            raise HgemmValueError(f"hgemm: out has shape ({_shape(out)}), expected ({m}x{n}) for "
                                  f"({_shape(a)}) @ ({_shape(b)})")
        if out.device != a.device:
            raise HgemmValueError(
                f"Expected all tensors to be on the same device, but found at least two devices, "
                f"{a.device} and {out.device}!")
        (rows, cols), (sr, sc) = out.shape, out.stride()
        if (sr == 0 and rows > 1 and cols) or (sc == 0 and cols > 1 and rows):
            raise HgemmValueError(f"hgemm: out has a zero stride {(sr, sc)}: elements would alias")
        if _self_overlapping(out):
            raise HgemmValueError(f"hgemm: out's strides {(sr, sc)} for shape ({_shape(out)}) make some of its "
                                  "elements share memory; pass an out whose elements are distinct")
        if _overlaps_any(out, a, b):
            raise HgemmValueError("hgemm: out overlaps an input; some elements of the output and an input "
                                  "refer to a single memory location")
    return Problem(m=m, n=n, k=k, out=out, dtype=DTYPE_NAMES[a.dtype])


def finish_empty(p: Problem) -> torch.Tensor:
    """Result of an empty problem without a launch: nothing for M or N == 0, zeros for K == 0."""
    if p.k == 0 and p.out.numel() > 0:
        p.out.zero_()
    return p.out
