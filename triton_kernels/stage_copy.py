"""Staging copies: the operands a TMA kernel cannot read in place copied into aligned buffers before the GEMM, and a
staged C copied back after it, each side in one Triton launch.

A TMA descriptor needs a 16-byte aligned base and row pitch, so a plan that stages A, B or C (`dispatch.staging`)
copies them into buffers whose rows start at multiples of 128 bytes (pitch a multiple of PITCH elements: every
128-byte TMA box row on one cache line). A column-major operand stays column-major: its transpose, row-major, is
what is copied. One launch copies A and B together (`copy_in`), one copies C back (`copy_out`), and the buffers lie
in one workspace allocated per call (`Buffers`): next to a torch `copy_` per operand, a staged call makes fewer
launches on the device and fewer allocations and operator calls on the host, which on a problem of a few
microseconds are most of its time. The launches go through the same `Spec` list as the GEMM's, so after the first
call they are launched directly (`launch.Direct`) like the GEMM's kernels.

The kernel moves tiles of BLOCK_R x BLOCK_C elements through registers, bits unchanged (NaN payloads and signed
zeros included: no arithmetic touches them). A tile whose columns all lie inside the matrix loads and stores
without a column mask, so its accesses are as wide as the rows' alignment allows: a row stride divisible by 2, 4
or 8 elements is passed divided by that factor and multiplied back in the kernel (`SRC_DIV`, `DST_DIV`), where the
compiler sees it (Triton specializes integer arguments on divisibility by 16 only, `common.div8_args`). Past the
last column, the copy into a buffer writes zeros into the row's padding (its pitch covers the tile) and the copy
back out masks them off.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
import triton
import triton.language as tl

from hgemm_common.operands import major
from hgemm_common.validation import needs_int64_indexing

from .common import cdiv
from .launch import Spec

PITCH = 64  # a staged buffer's row pitch: a multiple of this many elements (128 bytes of fp16 or bf16)
OFFSET_ALIGN = 256  # bytes: each buffer's offset in the call's workspace
BLOCK_R, BLOCK_C, WARPS = 32, 64, 4  # the copy's tile; BLOCK_C divides PITCH, so a tile never passes a row's pitch


@triton.jit
def _copy_tile(src, dst, rows, cols, s_r, s_c, d_r, d_c, tile, tiles_c, SRC_DIV: tl.constexpr,
               DST_DIV: tl.constexpr, PAD_DST: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
               INDEX_64: tl.constexpr):
    """Tile `tile` (row-major over tiles_c tiles a row) of the rows x cols matrix at src (strides s_r * SRC_DIV,
    s_c) copied to dst (strides d_r * DST_DIV, d_c). PAD_DST: dst's rows extend past cols to the tile's end (a
    staging buffer), which then receives zeros there; otherwise (a caller's C) nothing past cols is written."""
    tr = tile // tiles_c
    tc = tile - tr * tiles_c
    r = tr * BLOCK_R + tl.arange(0, BLOCK_R)
    c = tc * BLOCK_C + tl.arange(0, BLOCK_C)
    if INDEX_64:
        r = r.to(tl.int64)
        c = c.to(tl.int64)
    row_ok = r[:, None] < rows
    src_ptrs = src + r[:, None] * (s_r * SRC_DIV) + c[None, :] * s_c
    dst_ptrs = dst + r[:, None] * (d_r * DST_DIV) + c[None, :] * d_c
    if (tc + 1) * BLOCK_C <= cols:
        tl.store(dst_ptrs, tl.load(src_ptrs, mask=row_ok), mask=row_ok)
    else:
        ok = row_ok & (c[None, :] < cols)
        x = tl.load(src_ptrs, mask=ok, other=0.0)
        if PAD_DST:
            tl.store(dst_ptrs, x, mask=row_ok)
        else:
            tl.store(dst_ptrs, x, mask=ok)


@triton.jit
def stage_copy_kernel(src0, dst0, rows0, cols0, s0_r, s0_c, d0_r, d0_c, tiles0_c, tiles0,
                      src1, dst1, rows1, cols1, s1_r, s1_c, d1_r, d1_c, tiles1_c,
                      SRC_DIV0: tl.constexpr, DST_DIV0: tl.constexpr, SRC_DIV1: tl.constexpr, DST_DIV1: tl.constexpr,
                      TWO: tl.constexpr, PAD_DST: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
                      INDEX_64: tl.constexpr):
    """One or (TWO) two matrix copies in one grid: programs 0 .. tiles0 - 1 copy the first, the rest the second."""
    pid = tl.program_id(0)
    if pid < tiles0:
        _copy_tile(src0, dst0, rows0, cols0, s0_r, s0_c, d0_r, d0_c, pid, tiles0_c, SRC_DIV0, DST_DIV0, PAD_DST,
                   BLOCK_R, BLOCK_C, INDEX_64)
    elif TWO:
        _copy_tile(src1, dst1, rows1, cols1, s1_r, s1_c, d1_r, d1_c, pid - tiles0, tiles1_c, SRC_DIV1, DST_DIV1,
                   PAD_DST, BLOCK_R, BLOCK_C, INDEX_64)


def stride_div(stride: int, unit_inner: bool) -> int:
    """The factor a row stride is passed divided by (`SRC_DIV`, `DST_DIV`): the largest of 8, 4, 2 dividing it
    where the rows are contiguous (wider accesses need contiguous elements), else 1. A multiple of 16 needs none:
    Triton sees it (divided, it could lose that)."""
    if not unit_inner or stride % 16 == 0:
        return 1
    return next(d for d in (8, 4, 2, 1) if stride % d == 0)


class Buffers(NamedTuple):
    """Where a call's staged operands go: per operand of A, B, C, None (read in place) or (byte offset, rows, cols,
    transposed: the operand is column-major, so the buffer holds its transpose) in a workspace of `nbytes`. A
    plan's key fixes shapes and strides, so a plan's Buffers serve every call of it."""
    slots: tuple
    nbytes: int

    @staticmethod
    def of(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, stage: tuple[bool, bool, bool]) -> "Buffers":
        slots, offset = [], 0
        for t, staged, is_c in ((a, stage[0], False), (b, stage[1], False), (c, stage[2], True)):
            if not staged:
                slots.append(None)
                continue
            transposed = not is_c and major(t) == "T"  # C's buffer is row-major: the TMA store writes rows
            rows, cols = (t.shape[1], t.shape[0]) if transposed else t.shape
            slots.append((offset, rows, cols, transposed))
            offset += cdiv(rows * cdiv(cols, PITCH) * PITCH * t.element_size(), OFFSET_ALIGN) * OFFSET_ALIGN
        return Buffers(tuple(slots), offset)

    def staged(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor,
               workspace: torch.Tensor | None) -> tuple[list, list[Spec], list[Spec]]:
        """The operands the GEMM reads and writes (A, B, C: views of `workspace`, uint8 of `nbytes`, where staged;
        rows PITCH-aligned, a column-major operand's buffer column-major), the launch that fills the buffers of A
        and B, and the one that copies C's back (each an empty list where there is nothing to copy)."""
        operands, into, back = [], [], []
        for t, slot in zip((a, b, c), self.slots):
            if slot is None:
                operands.append(t)
                continue
            offset, rows, cols, transposed = slot
            pitch = cdiv(cols, PITCH) * PITCH
            v = workspace[offset:offset + rows * pitch * t.element_size()].view(t.dtype).view(rows, pitch)[:, :cols]
            operands.append(v.t() if transposed else v)
            if t is c:
                back.append((v, v, t, t))
            else:  # the pointers are the tensors the launch is given (A, the view); the strides the row views'
                into.append((t, t.t() if transposed else t, operands[-1], v))
        return operands, _spec(into, pad_dst=True), _spec(back, pad_dst=False)


def _copy_args(src: torch.Tensor, src_rows: torch.Tensor, dst: torch.Tensor, dst_rows: torch.Tensor) -> tuple:
    """One matrix's arguments of `stage_copy_kernel`: pointers src and dst (tensors starting where their row views
    src_rows and dst_rows, of one shape, start), then the row views' sizes and strides; its tile count and DIVs."""
    rows, cols = src_rows.shape
    sd = stride_div(src_rows.stride(0), src_rows.stride(1) == 1)
    dd = stride_div(dst_rows.stride(0), dst_rows.stride(1) == 1)
    tiles_c = cdiv(cols, BLOCK_C)
    return ((src, dst, rows, cols, src_rows.stride(0) // sd, src_rows.stride(1), dst_rows.stride(0) // dd,
             dst_rows.stride(1), tiles_c), cdiv(rows, BLOCK_R) * tiles_c, sd, dd)


def _spec(copies: list[tuple], pad_dst: bool) -> list[Spec]:
    """The launch (a list of none or one) copying each (src, src rows, dst, dst rows) of `copies` (one or two)."""
    if not copies:
        return []
    first, tiles0, sd0, dd0 = _copy_args(*copies[0])
    second, tiles1, sd1, dd1 = _copy_args(*copies[1]) if len(copies) > 1 else (first, 0, sd0, dd0)
    index_64 = needs_int64_indexing(*(t for cp in copies for t in (cp[1], cp[3])))
    args = (*first, tiles0, *second, sd0, dd0, sd1, dd1, len(copies) > 1, pad_dst, BLOCK_R, BLOCK_C, index_64)
    return [Spec(stage_copy_kernel, (tiles0 + tiles1,), args, WARPS, 1)]
