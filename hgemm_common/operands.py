"""Operand facts both kernel packages and the harness ask: which way a matrix is stored, whether its rows are
16-byte aligned (cp.async), whether a TMA descriptor can describe it. One definition each, so the PTX wrapper's
copy decision, the Triton kernel choice and the harness's case filter agree."""
from __future__ import annotations

import torch

from .errors import HgemmValueError


def is_row_major(t: torch.Tensor) -> bool:
    """Unit stride along the columns (a single column counts as either)."""
    return t.stride(1) == 1 or t.shape[1] == 1


def is_col_major(t: torch.Tensor) -> bool:
    """Unit stride along the rows: a `.t()` view of a row-major matrix (a single row counts as either)."""
    return t.stride(0) == 1 or t.shape[0] == 1


def major(t: torch.Tensor) -> str | None:
    """'N' when rows are contiguous (unit column stride), 'T' when columns are; None otherwise (checked on the
    strides alone: what a descriptor sees)."""
    if t.stride(1) == 1:
        return "N"
    if t.stride(0) == 1:
        return "T"
    return None


def layout_of(a: torch.Tensor, b: torch.Tensor) -> str:
    """The operand layout, A then B: N = row-major, T = column-major; "strided" when either is neither."""

    def letter(t: torch.Tensor) -> str | None:
        return "N" if is_row_major(t) else "T" if is_col_major(t) else None

    la, lb = letter(a), letter(b)
    return la + lb if la and lb else "strided"


def rows_aligned16(t: torch.Tensor, ld: int) -> bool:
    """The base address and every row (leading dimension `ld`, in halves) start on a 16-byte boundary."""
    return t.data_ptr() % 16 == 0 and ld % 8 == 0


def tma_describable(*tensors: torch.Tensor) -> bool:
    """Every tensor has a unit inner stride, a 16-byte aligned base and a leading dimension that is a multiple
    of 8 halves (16 bytes): what a TMA descriptor accepts."""
    for t in tensors:
        m = major(t)
        if m is None or not rows_aligned16(t, t.stride(0) if m == "N" else t.stride(1)):
            return False
    return True


def meets_alignment(alignment: str, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> bool:
    """Whether A, B (and C; None = the row-major (M, N) output a wrapper allocates) meet a record's `alignment`:
    "none", "rows16" (16-byte aligned rows of A and B, either major), "tma" (TMA-describable, C row-major) or
    "tma_ab" (A and B TMA-describable, C anything: a kernel that stores C through pointers)."""
    if alignment == "none":
        return True
    if alignment == "rows16":
        return all(major(t) is not None and rows_aligned16(t, t.stride(0) if major(t) == "N" else t.stride(1))
                   for t in (a, b))
    if alignment == "tma":
        if out is None:
            return tma_describable(a, b) and b.shape[1] % 8 == 0
        return tma_describable(a, b, out) and major(out) == "N"
    if alignment == "tma_ab":
        return tma_describable(a, b)
    raise HgemmValueError(f"meets_alignment: unknown alignment {alignment!r}; choose one of "
                          "('none', 'rows16', 'tma', 'tma_ab')")


def resolved(t: torch.Tensor, name: str = "", copies: list[str] | None = None) -> torch.Tensor:
    """t with a lazy negation applied. A negative view (its neg bit set: `torch._neg_view`, or the `.imag` of a
    conjugated complex-half tensor, which is float16) stores the values' negatives and flips them when read; the
    kernels read raw memory, so such an operand is resolved into a copy first (named in `copies` when given)."""
    if t.is_neg():
        if copies is not None:
            copies.append(f"{name}: negative view resolved")
        return t.resolve_neg()
    return t
