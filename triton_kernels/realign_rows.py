"""`triton_realign`'s residue groups for an N-major B (layout NN) whose rows lie off the 16-byte grid: the groups
are taken along K, and each group's partial product is written shifted into a plane of its own.

What it adds over realign.py: there a K-major B's rows are output columns, so a group's shift moves the K index,
which A follows. With B row-major (K x N, rows `ld` elements apart, ld not a multiple of 8) B's rows are K indices:
row k starts (k x ld) mod 8 elements past a 16-byte boundary, the same for every k of one residue r mod G
(G = 8 / gcd(ld, 8)). A program takes one residue's rows k = r + G i over a slice of i and reads each row from
s_r elements before the output block's first column: 16-byte `cp.async` copies again. But now the shift moves the
output column: the tile's column c holds column c - s_r of C. The residues of one output block differ in shift, so
their sums cannot meet in one accumulator; each program writes its fp32 product into plane (slice, residue) of a
workspace at columns c - s_r, and a second kernel sums the G x slices planes in a fixed order (splitk.py's
two-pass reduction). Every element of every plane is written exactly once (a residue's column blocks, shifted,
tile the columns), so the sum's order, and its bits, are the same on every run.

A's columns r, r + G, r + 2G, ... are read per element (A is small where this kernel is for). A shifted tile
reads up to BLOCK_N + 6 elements past row k's N-th, which lie in the next rows' memory except near B's end: the
whole steps of rows below `safe_rows` load unmasked, in 16-byte vectors; the rest of a slice (its last partial
step, and the rows near B's end) loads masked on rows and columns, per element. The planes' round trip (2 x 4 x G x slices x M x N bytes) is what this costs over realign.py; the
cost model weighs it against reading B per element.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from hgemm_common.validation import needs_int64_indexing

from . import realign, splitk
from .common import Config, cdiv, dot_acc, edge_offsets, grouped_pid, out_offsets
from .launch import Spec
from .splitk import REDUCE_BLOCK, splitk_reduce_kernel

# ----------------------------------------------------------------------------------------------------------------
# Tuning constants
# ----------------------------------------------------------------------------------------------------------------
SPLITS = (1, 2, 4)  # slices per residue: G x slices planes in all
MAX_M = realign.MAX_M


def configs() -> list[Config]:
    """16- and 32-row tiles as in realign.py, shallower in K: BLOCK_K counts one residue's rows (G x BLOCK_K rows
    of B a step)."""
    tiles = [
        Config(16, 64, 64, group_m=1, num_warps=4, num_stages=4),
        Config(16, 128, 64, group_m=1, num_warps=4, num_stages=4),
        Config(16, 128, 32, group_m=1, num_warps=4, num_stages=4),
        Config(32, 64, 64, group_m=1, num_warps=4, num_stages=4),
        Config(32, 128, 32, group_m=1, num_warps=4, num_stages=4),
    ]
    return splitk.with_splits(tiles, SPLITS)


INTERPRETER_CONFIG = Config(16, 32, 16, group_m=2, num_warps=4, num_stages=2, split_k=2)


def worth_timing(m: int, n: int, k: int, sms: int, tma_in_place: bool) -> bool:
    """Where tune="exact" times it: where the cost model scores it."""
    return worth_scoring(m, n, k, sms, tma_in_place)


def worth_scoring(m: int, n: int, k: int, sms: int, tma_in_place: bool) -> bool:
    """Where realign.py is scored (skinny M, operands the TMA kernels cannot read in place)."""
    return realign.worth_timing(m, n, k, sms, tma_in_place)


# ----------------------------------------------------------------------------------------------------------------
# Kernel
# ----------------------------------------------------------------------------------------------------------------
@triton.jit
def rows_step(acc, a_ptr, b_ptr, offs_am, a_cols, b_rows, i, c, shift, i_end, N, stride_am, stride_ak,
              MASKED: tl.constexpr, ACC_FP16: tl.constexpr):
    """acc + one step: A's (BLOCK_M, BLOCK_K) columns a_cols (K indices) and B's (BLOCK_K, BLOCK_N) rows b_rows
    (offsets, aligned down by shift) at aligned columns c. MASKED: residue rows i past i_end and, for the rows near
    B's end, columns past N (c - shift >= N) are not read; otherwise nothing is masked."""
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + a_cols[None, :] * stride_ak
    b_ptrs = b_ptr + b_rows[:, None] + c[None, :]
    if MASKED:
        row_ok = i < i_end
        a = tl.load(a_ptrs, mask=row_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=row_ok[:, None] & (c - shift < N)[None, :], other=0.0)
    else:
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
    return dot_acc(a, b, acc, ACC_FP16)


@triton.jit
def realign_rows_kernel(
    # pointers: A, B, the planes (G x SPLIT fp32 planes of M x N)
    a_ptr, b_ptr, p_ptr,
    # sizes; I_SLICE: a residue's rows per slice, a multiple of BLOCK_K; K_SAFE: rows below it read unmasked
    M, N, K, I_SLICE, K_SAFE,
    # strides (elements); LD: B's row stride; LD8G: G x LD / 8; stride_ps: M x N, one plane
    stride_am, stride_ak, LD, LD8G, stride_ps,
    # meta-parameters
    G: tl.constexpr,  # residues: 8 / gcd(LD, 8)
    ACC_FP16: tl.constexpr,
    INDEX_64: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    """Program (G x q + r, s): residue r's rows of the s-th slice times A's matching columns for output tile q
    (grouped order over row blocks and aligned column blocks), written into plane s x G + r at columns c - s_r."""
    tile = tl.program_id(0)
    s = tl.program_id(1)
    r = tile % G
    pid_m, pid_j = grouped_pid(tile // G, tl.cdiv(M, BLOCK_M), tl.cdiv(N + 7, BLOCK_N), GROUP_M)
    row_r = r * LD  # where residue r's first row starts
    if INDEX_64:
        row_r = r.to(tl.int64) * LD
    shift = row_r % 8
    base = (row_r // 8) * 8
    rows_r = (K - r + G - 1) // G  # residue r's rows of B
    i0 = s * I_SLICE
    i1 = tl.maximum(i0, tl.minimum(i0 + I_SLICE, rows_r))  # (a slice past the residue's rows: empty)
    safe = tl.minimum(i1, tl.maximum(i0, (K_SAFE - r + G - 1) // G))  # rows i < safe read unmasked
    hi = i0 + (safe - i0) // BLOCK_K * BLOCK_K

    offs_am = edge_offsets(pid_m * BLOCK_M, M, BLOCK_M, 0)
    c = pid_j * BLOCK_N + tl.arange(0, BLOCK_N)
    k_steps = tl.arange(0, BLOCK_K)
    if INDEX_64:
        offs_am = offs_am.to(tl.int64)
        k_steps = k_steps.to(tl.int64)
    if ACC_FP16:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # MAIN LOOP: whole steps of safe rows unmasked, the rest of the slice masked
    for ib in range(i0, hi, BLOCK_K):
        i = ib + k_steps
        acc = rows_step(acc, a_ptr, b_ptr, offs_am, r + G * i, base + (i * LD8G) * 8, i, c, shift,
                        i1, N, stride_am, stride_ak, False, ACC_FP16)
    for ib in range(hi, i1, BLOCK_K):
        i = ib + k_steps
        acc = rows_step(acc, a_ptr, b_ptr, offs_am, r + G * i, base + (i * LD8G) * 8, i, c, shift,
                        i1, N, stride_am, stride_ak, True, ACC_FP16)

    # EPILOGUE: plane (s, r), columns c - shift inside C
    offs_cm, offs_cn = out_offsets(pid_m * BLOCK_M, pid_j * BLOCK_N, INDEX_64, BLOCK_M, BLOCK_N)
    offs_cn = offs_cn - shift
    plane = s * G + r
    if INDEX_64:
        plane = plane.to(tl.int64)
    p_ptrs = p_ptr + plane * stride_ps + offs_cm[:, None] * N + offs_cn[None, :]
    tl.store(p_ptrs, acc.to(tl.float32), mask=(offs_cm[:, None] < M) & (offs_cn[None, :] >= 0) & (offs_cn[None, :] < N))


# ----------------------------------------------------------------------------------------------------------------
# Host launcher
# ----------------------------------------------------------------------------------------------------------------
def residues(b: torch.Tensor) -> int:
    """G: how many residue groups an N-major B's rows fall into (1 where they are all on the grid)."""
    return realign.residues(b.t())[0]


def safe_rows(k: int, ld: int, block_n: int) -> int:
    """Rows of B a shifted tile reads unmasked: row k's tile reaches at most BLOCK_N + 6 elements past its N-th,
    which lie inside B while at least that many elements of later rows follow."""
    return max(0, k - cdiv(block_n + 7, ld))


def slices(rows: int, config: Config) -> tuple[int, int]:
    """(a residue's rows per slice, slices): config.split_k slices of whole BLOCK_K steps, fewer when a residue
    has too few rows to give every slice one."""
    steps = cdiv(rows, config.block_k)
    per = cdiv(steps, config.split_k) * config.block_k
    return per, cdiv(rows, per)


def launches(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, acc_fp16: bool, config: Config) -> list[Spec]:
    """C = A @ B for an N-major B: the planes (G x slices fp32 M x N, from torch's allocator) by one launch over
    (tiles x G, slices), then splitk.py's reduction in plane order into C. A B that is not N-major, or whose rows
    are on the grid, goes to realign.py."""
    g = residues(b) if b.stride(1) == 1 and b.shape[1] > 1 else 1
    if g == 1:
        return realign.launches(a, b, c, acc_fp16, config)
    m, k = a.shape
    n = b.shape[1]
    ld = b.stride(0)
    i_slice, split = slices(cdiv(k, g), config)
    tiles = cdiv(m, config.block_m) * cdiv(n + 7, config.block_n) * g
    p = torch.empty((g * split, m, n), dtype=torch.float32, device=a.device)
    index_64 = realign.index_64(a, b, c, p.numel(), g * ld) or needs_int64_indexing(p)
    main = (a, b, p, m, n, k, i_slice, safe_rows(k, ld, config.block_n), *a.stride(), ld, g * ld // 8, m * n,
            g, acc_fp16, index_64, *config.meta.values())
    reduce = (p, c, n, g * split, m * n, c.stride(0), c.stride(1), index_64, REDUCE_BLOCK)
    return [Spec(realign_rows_kernel, (tiles, split), main, config.num_warps, config.num_stages),
            Spec(splitk_reduce_kernel, (cdiv(m * n, REDUCE_BLOCK),), reduce, 4, 1)]


def inspect_source(cfg: Config, dtype: str = "fp16") -> tuple:
    """What `triton.compile` needs to build the plane kernel as a 16x4095x4096 NN problem specializes it (B's rows
    4095 elements apart: eight residues): (kernel, signature, constexprs, attrs) for inputs of `dtype` ("fp16",
    "bf16"), for `python -m compare inspect`."""
    sig = {"a_ptr": f"*{dtype}", "b_ptr": f"*{dtype}", "p_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32",
           "I_SLICE": "i32", "K_SAFE": "i32", "stride_am": "i32", "stride_ak": "constexpr", "LD": "i32",
           "LD8G": "i32", "stride_ps": "i32"}
    consts = dict(stride_ak=1, G=8, ACC_FP16=False, INDEX_64=False, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
                  BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m)
    attrs = {(i,): [["tt.divisibility", 16]] for i in (0, 1, 2, 3, 5, 6, 8, 12)}
    return realign_rows_kernel, sig, consts, attrs
