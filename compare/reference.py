"""The one reference, input maker and error bound shared by the tests and the harness (see TESTING.md)."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import torch

from hgemm_common.errors import HgemmValueError
from hgemm_common.validation import DTYPES as TORCH_DTYPES

LAYOUTS = ("NN", "NT", "TN", "TT")
FP16_UNIT = 2.0**-11  # unit roundoff of fp16 (half an ulp at 1.0)
BF16_UNIT = 2.0**-8  # unit roundoff of bf16 (8 significand bits)
FP32_UNIT = 2.0**-24
INT_MAX = 3  # kind="int" draws integers in [-INT_MAX, INT_MAX]
BF16_EXACT = 256  # bf16 holds every integer up to 2**8 exactly (8 significand bits); fp16 up to 2**11


def dtype_unit(dtype: torch.dtype) -> float:
    """Unit roundoff of a kernel's input/output dtype (torch.float16 or torch.bfloat16)."""
    return BF16_UNIT if dtype == torch.bfloat16 else FP16_UNIT


@contextmanager
def _full_fp32():
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A @ B in high precision, as float64 on a's device.

    CPU: float64. CUDA: fp32 cuBLAS with TF32 off (float64 GEMM on the GPU is ~60x slower); for the small-integer
    inputs of the exact checks every fp32 partial sum is exact while |sum| < 2**24, so it is exact there too.
    """
    if a.device.type == "cuda":
        with _full_fp32():
            return (a.float() @ b.float()).double()
    return a.double() @ b.double()


def make_operand(rows: int, cols: int, major: str, *, device, generator: torch.Generator | None = None,
                 kind: str = "int", dtype: str = "fp16") -> torch.Tensor:
    """A (rows, cols) fp16 or bf16 matrix stored row-major (major="N") or column-major ("T", a `.t()` view).

    kind="int": integers in [-INT_MAX, INT_MAX] (exact in both dtypes: bf16 holds integers exactly up to 256, and
    with fp32 accumulation every partial sum is exact while |sum| < 2**24); kind="randn": standard normal.
    """
    shape = (rows, cols) if major == "N" else (cols, rows)
    if kind == "int":
        t = torch.randint(-INT_MAX, INT_MAX + 1, shape, generator=generator, dtype=torch.int16)
    elif kind == "randn":
        t = torch.randn(shape, generator=generator, dtype=torch.float32)
    else:
        raise HgemmValueError(f"unknown input kind {kind!r}")
    t = t.to(device=device, dtype=TORCH_DTYPES[dtype])
    return t if major == "N" else t.t()


def exact_window(k: int, count: int) -> torch.Tensor:
    """A (count, k) 0/1 mask for bf16 exact checks: row r keeps the k' with (k - 1 - k' + r) % S == 0, S = ceil(k / T),
    T = BF16_EXACT // INT_MAX**2 = 28 terms. Applied to B's columns (or A's rows), every element of C sums at most
    28 products of integers in [-3, 3]: |C| <= 252, so every result is an integer bf16 holds exactly and an
    indexing error cannot hide in the output's rounding. Each row keeps one k in every S, from the first S to the
    last S (row 0 ends on K's last element: the masked tail), and S consecutive rows together cover every k."""
    s = -(-k // (BF16_EXACT // INT_MAX**2))
    return ((k - 1 - torch.arange(k)[None, :] + torch.arange(count)[:, None]) % s == 0).to(torch.int16)


def make_inputs(m: int, n: int, k: int, layout: str = "NN", *, device="cpu", seed: int = 0, kind: str = "int",
                dtype: str = "fp16"):
    """A (m, k) and B (k, n) in the given layout: first letter A, second B; N = row-major, T = column-major.
    dtype: "fp16" or "bf16" (the same values for a seed: integers are exact in both), except that bf16 integer
    inputs with K > 28 keep only the terms `exact_window` leaves (of B's columns, or of A's rows when M > N), so
    that |C| <= 256 (TESTING.md 13)."""
    if layout not in LAYOUTS:
        raise HgemmValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    g = torch.Generator().manual_seed(seed)
    a = make_operand(m, k, layout[0], device=device, generator=g, kind=kind, dtype=dtype)
    b = make_operand(k, n, layout[1], device=device, generator=g, kind=kind, dtype=dtype)
    if kind == "int" and dtype == "bf16" and k * INT_MAX**2 > BF16_EXACT:
        if m > n:
            a.mul_(exact_window(k, m).to(device=device, dtype=a.dtype))  # in place: a keeps its layout
        else:
            b.mul_(exact_window(k, n).t().to(device=device, dtype=b.dtype))
    return a, b


def poisoned_out(m: int, n: int, device, dtype: str = "fp16") -> torch.Tensor:
    """An output buffer full of NaN, so that an unwritten element cannot pass a check."""
    return torch.full((m, n), float("nan"), dtype=TORCH_DTYPES[dtype], device=device)


def negative_view(t: torch.Tensor) -> torch.Tensor:
    """A view with the neg bit set whose values equal t's: its memory holds -t (torch._neg_view of -t), as the
    float16 .imag of a conjugated complex-half tensor does. The kernels read raw memory, so such operands test that
    the wrappers resolve the negation."""
    v = torch._neg_view(-t)
    assert v.is_neg() and torch.equal(v.resolve_neg().nan_to_num(), t.nan_to_num())
    return v


def error_bound(a: torch.Tensor, b: torch.Tensor, ref: torch.Tensor, acc: str = "fp32") -> torch.Tensor:
    """Per-element bound |C - ref| <= 2u*|ref| + K*u_acc*(|A| @ |B|) + 2**-24, u the unit of A's dtype.

    The first term covers the final rounding to the output dtype, which is A's (one ulp, generous by 2x: u = 2**-11
    for fp16, 2**-8 for bf16); the second the accumulation (u_acc = 2**-24 for fp32, 2**-11 for fp16; bf16 has
    only fp32); the last the fp16 subnormal spacing (bf16's is far smaller).
    """
    k = a.shape[1]
    unit = FP32_UNIT if acc == "fp32" else FP16_UNIT
    absprod = reference(a.abs(), b.abs())
    return 2 * dtype_unit(a.dtype) * ref.abs() + k * unit * absprod + 2.0**-24


@dataclass
class Verdict:
    """Outcome of comparing one result against the reference."""

    ok: bool
    max_abs_err: float
    max_rel_to_bound: float  # max |C - ref| / bound; <= 1 passes
    unwritten: int  # NaN outputs where the reference is finite
    first_bad: tuple[int, int] | None
    detail: str

    def __str__(self) -> str:
        return self.detail


def compare(c: torch.Tensor, ref: torch.Tensor, bound: torch.Tensor | None = None) -> Verdict:
    """Compare an fp16 or bf16 result with a float64 reference.

    bound=None: exact check, C must equal ref rounded to C's dtype bit for bit (NaN and inf must match too).
    Otherwise: |C - ref| <= bound element-wise, with NaN/inf positions equal to the reference's.
    """
    c64 = c.double()
    ref16 = ref.to(c.dtype).double()  # the reference rounded as the kernel's output is
    nan_ok = torch.isnan(c64) == torch.isnan(ref16)
    unwritten = int((torch.isnan(c64) & ~torch.isnan(ref16)).sum())
    finite = torch.isfinite(c64) & torch.isfinite(ref16)
    diff = torch.where(finite, (c64 - ref).abs(), torch.zeros_like(c64))
    inf_ok = torch.where(torch.isinf(ref16) | torch.isinf(c64), c64 == ref16, torch.ones_like(nan_ok))
    if bound is None:
        good = ((c64 == ref16) | (torch.isnan(c64) & torch.isnan(ref16)))
        ratio = float("inf") if not bool(good.all()) else 0.0
        what = "exact"
    else:
        good = nan_ok & inf_ok & (diff <= bound)
        ratio = float((diff / bound).max()) if diff.numel() else 0.0
        what = "bound"
    max_err = float(diff.max()) if diff.numel() else 0.0
    if bool(good.all()):
        return Verdict(True, max_err, ratio, 0, None, f"{what} ok, max |err| {max_err:.3g}")
    bad = (~good).nonzero()
    i, j = (int(x) for x in bad[0])
    msg = (f"{what} check failed at {bad.shape[0]} of {c.numel()} elements; first bad [{i}, {j}]: "
           f"got {float(c64[i, j])!r}, want {float(ref[i, j])!r}")
    if bound is not None:
        msg += f" (bound {float(bound[i, j]):.3g}); max |err|/bound {ratio:.3g}"
    if unwritten:
        msg += f"; {unwritten} elements unwritten (still NaN)"
    return Verdict(False, max_err, ratio, unwritten, (i, j), msg)
