"""Split-K Triton HGEMM for a K-major B whose rows lie off the 16-byte grid: the rows grouped by their misalignment,
so that every group loads in 16-byte vectors.

What it adds over splitk.py: with B K-major (layout NT: B^T is N x K row-major) and a row stride `ld` that is not a
multiple of 8 elements (K = 5001), Triton can prove no alignment for B's rows and loads them one element per
instruction: 2-byte loads, which are not cp.async-able, so they are not pipelined either, and a skinny problem,
whose time is reading B once, streams B at a fraction of HBM bandwidth. TMA cannot help: a descriptor's strides
must be multiples of 16 bytes, and so must a box's inner coordinate.

But the misalignment of row n, (n x ld) mod 8 elements, only depends on n mod G, G = 8 / gcd(ld, 8): the rows
n = r + G i (one residue r) all start s_r = (r x ld) mod 8 elements past a 16-byte boundary, and G x ld is a
multiple of 8. So a program takes the rows of one residue, and reads each from s_r elements before its start: the
address b + (r x ld - s_r) + G x ld x i + c is a multiple of 16 bytes for every aligned c, which the compiler
can see (both offsets are written as 8 times an integer), and the loads become 16-byte cp.async. The tile's
column c then holds element k = c - s_r of its row: the K index is shifted by s_r, the same for every row of the
program, so A's tile is read shifted by s_r too (A is small on the problems this kernel is for: its loads stay
per element). The first K tile (c < s_r: the previous row's last elements) and the last one (past K: the next
row's first) are loaded with masks, which zero them; the tiles between take no mask and keep their vectors.

Each program thus computes BLOCK_N output columns r, r + G, r + 2G, ... and stores them with a column step of G.
K is split as in splitk.py (whole K tiles per slice) and the slices summed by `splitk.sum_parts`: fp32 blocks per
(tile, slice), summed in slice order by the tile's last program, so the same inputs give the same bits on every
run. A B that is not K-major is read with G = 1 and no shift: the kernel is then splitk.py's with its loads as
wide as the strides let Triton prove (correct for any strides, and no faster).
"""
from __future__ import annotations

from math import gcd

import torch
import triton
import triton.language as tl

from hgemm_common.validation import needs_int64_indexing

from . import splitk
from .common import Config, cdiv, dot_acc, edge_offsets, grouped_pid
from .launch import Spec
from .splitk import fused_buffers, slices, store_tile, sum_parts

# ----------------------------------------------------------------------------------------------------------------
# Tuning constants
# ----------------------------------------------------------------------------------------------------------------
SPLITS = (1, 2, 4, 8)
MAX_M = 48  # past this the A loads (per element, shifted) and B's re-reads per row block cost more than aligned B


def configs() -> list[Config]:
    """16- and 32-row tiles (mma.sync) over 64 or 128 output columns of one residue, K tiles 64 or 128 deep, each
    with every split of SPLITS; none spills on sm_90 (the masked edge tiles load per element into registers)."""
    tiles = [
        Config(16, 64, 128, group_m=1, num_warps=4, num_stages=4),
        Config(16, 128, 64, group_m=1, num_warps=4, num_stages=4),
        Config(16, 128, 128, group_m=1, num_warps=4, num_stages=3),
        Config(32, 64, 128, group_m=1, num_warps=4, num_stages=4),
        Config(32, 128, 64, group_m=1, num_warps=4, num_stages=4),
    ]
    return splitk.with_splits(tiles, SPLITS)


INTERPRETER_CONFIG = Config(16, 32, 32, group_m=2, num_warps=4, num_stages=2, split_k=3)


def worth_timing(m: int, n: int, k: int, sms: int, tma_in_place: bool) -> bool:
    """Timed (and scored by the cost model) on skinny problems, M up to MAX_M, whose operands the TMA kernels cannot
    read in place: there the other pointer kernels' loads are as narrow as B's rows are misaligned (and masked in
    every K tile where K is not a multiple of theirs), and this kernel's are not."""
    return m <= MAX_M and not tma_in_place


# ----------------------------------------------------------------------------------------------------------------
# Kernel
# ----------------------------------------------------------------------------------------------------------------
@triton.jit
def residue_step(acc, a_ptr, b_ptr, offs_am, b_rows, n_ok, c0, shift, K, stride_am, stride_ak, stride_bk,
                 MASKED: tl.constexpr, ACC_FP16: tl.constexpr, BLOCK_K: tl.constexpr, INDEX_64: tl.constexpr):
    """acc + one K tile: A's (BLOCK_M, BLOCK_K) and B's (BLOCK_K, BLOCK_N) at aligned column c0 of B's rows, which
    is K index c0 - shift. b_rows: the rows' offsets (aligned down by shift); n_ok: the rows inside N. MASKED: the
    tile reaches before K index 0 or past K (the first and last tiles), where both operands are zeroed; otherwise
    only rows past N are masked, along B's strided dimension, which keeps its loads 16 bytes wide."""
    c = c0 + tl.arange(0, BLOCK_K)
    if INDEX_64:
        c = c.to(tl.int64)
    kk = c - shift
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + kk[None, :] * stride_ak
    b_ptrs = b_ptr + b_rows[None, :] + c[:, None] * stride_bk
    if MASKED:
        k_ok = (kk >= 0) & (kk < K)
        a = tl.load(a_ptrs, mask=k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
    else:
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs, mask=n_ok[None, :], other=0.0)
    return dot_acc(a, b, acc, ACC_FP16)


@triton.jit
def realign_kernel(
    # pointers
    a_ptr, b_ptr, c_ptr, p_ptr, count_ptr,
    # sizes
    M, N, K, K_SLICE, SPLIT,  # K_SLICE: aligned columns per slice, a multiple of BLOCK_K; SPLIT: number of slices
    # strides (elements); LD: B's row stride (K-major B); LD8G: G x LD / 8; STRIDE_CG: G x stride_cn, a residue's
    # output column step (from the host: an int64 argument where it needs one)
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, LD, LD8G, STRIDE_CG,
    # meta-parameters
    G: tl.constexpr,  # residues: 8 / gcd(LD, 8) for a K-major B, else 1
    K_MAJOR: tl.constexpr,  # B's K stride is 1: rows are grouped by residue and read shifted
    ACC_FP16: tl.constexpr,
    INDEX_64: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    """Program (G x q + r, s): residue r's output columns r + G (i0 + j), j < BLOCK_N, of output tile q (grouped
    order over row blocks and column blocks of one residue), over the s-th K slice; then stored (one slice) or
    `sum_parts` (several)."""
    tile = tl.program_id(0)
    s = tl.program_id(1)
    r = tile % G
    pid_m, pid_i = grouped_pid(tile // G, tl.cdiv(M, BLOCK_M), tl.cdiv(tl.cdiv(N, G), BLOCK_N), GROUP_M)
    rows_r = (N - r + G - 1) // G  # output columns of residue r

    # the residue's rows and where their loads start (16-byte aligned for a K-major B)
    offs_am = edge_offsets(pid_m * BLOCK_M, M, BLOCK_M, 0)
    i = pid_i * BLOCK_N + tl.arange(0, BLOCK_N)
    if INDEX_64:
        offs_am = offs_am.to(tl.int64)
        i = i.to(tl.int64)
    n_ok = i < rows_r
    if K_MAJOR:
        row_r = r * LD  # where residue r's first row starts
        if INDEX_64:
            row_r = r.to(tl.int64) * LD
        shift = row_r % 8
        b_rows = (row_r // 8) * 8 + (i * LD8G) * 8
    else:
        shift = 0
        b_rows = i * stride_bn
    # aligned K tiles [t0, t1) of this slice; those in [lo, hi) lie wholly inside K (the others are masked)
    k_tiles = tl.cdiv(K + shift, BLOCK_K)
    t0 = s * (K_SLICE // BLOCK_K)
    t1 = tl.minimum(t0 + K_SLICE // BLOCK_K, k_tiles)
    lo = tl.maximum(t0, tl.cdiv(shift, BLOCK_K))
    hi = tl.minimum(t1, (K + shift) // BLOCK_K)

    if ACC_FP16:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # MAIN LOOP: the first tile masked (before K index 0), the inner tiles unmasked, the last masked (past K)
    for t in range(t0, tl.minimum(lo, t1)):
        acc = residue_step(acc, a_ptr, b_ptr, offs_am, b_rows, n_ok, t * BLOCK_K, shift, K, stride_am, stride_ak,
                           stride_bk, True, ACC_FP16, BLOCK_K, INDEX_64)
    for t in range(lo, hi):
        acc = residue_step(acc, a_ptr, b_ptr, offs_am, b_rows, n_ok, t * BLOCK_K, shift, K, stride_am, stride_ak,
                           stride_bk, False, ACC_FP16, BLOCK_K, INDEX_64)
    for t in range(tl.maximum(hi, lo), t1):
        acc = residue_step(acc, a_ptr, b_ptr, offs_am, b_rows, n_ok, t * BLOCK_K, shift, K, stride_am, stride_ak,
                           stride_bk, True, ACC_FP16, BLOCK_K, INDEX_64)

    # EPILOGUE: residue r's columns of C, G apart
    if INDEX_64:
        c_r = c_ptr + r.to(tl.int64) * stride_cn
    else:
        c_r = c_ptr + r * stride_cn
    if SPLIT == 1:
        store_tile(acc, pid_m, pid_i, c_r, M, rows_r, stride_cm, STRIDE_CG, INDEX_64, BLOCK_M, BLOCK_N)
    else:
        sum_parts(acc, tile, s, SPLIT, SPLIT, pid_m, pid_i, c_r, p_ptr, count_ptr, M, rows_r, stride_cm,
                  STRIDE_CG, INDEX_64, BLOCK_M, BLOCK_N)


# ----------------------------------------------------------------------------------------------------------------
# Host launcher
# ----------------------------------------------------------------------------------------------------------------
def residues(b: torch.Tensor) -> tuple[int, bool]:
    """(G, K-major): how many residue groups B's rows fall into, and whether B is read as K-major rows."""
    if b.stride(0) == 1 and b.shape[0] > 1:
        return 8 // gcd(b.stride(1), 8), True
    return 1, False


def index_64(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, blocks: int, group_stride: int) -> bool:
    """Whether the kernel computes offsets in int64: an operand spans 2^31 elements or more, or the workspace does,
    or a residue group's steps (G x ld along B's rows, G x C's column stride) reach 2^31 where no span does."""
    return needs_int64_indexing(a, b, c) or blocks > 2**31 or group_stride >= 2**31


def launches(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, acc_fp16: bool, config: Config) -> list[Spec]:
    """C = A @ B in one launch over (tiles, slices): tiles = row blocks x column blocks of a residue x G, slices of
    the aligned K range (K + 7 columns where rows are shifted); fp32 partial blocks in the stream's workspace and
    tile counters (`splitk.fused_buffers`) where K is split. The caller has validated."""
    m, k = a.shape
    n = b.shape[1]
    g, k_major = residues(b)
    ld = b.stride(1) if k_major else 0
    k_slice, split = slices(k + (7 if g > 1 else 0), config)
    tiles = cdiv(m, config.block_m) * cdiv(cdiv(n, g), config.block_n) * g
    p, counts, blocks = fused_buffers(a.device, tiles, split, config)
    args = (a, b, c, p, counts, m, n, k, k_slice, split, *a.stride(), *b.stride(), *c.stride(), ld, g * ld // 8,
            c.stride(1) * g, g, k_major, acc_fp16, index_64(a, b, c, blocks, g * max(ld, abs(c.stride(1)))),
            *config.meta.values())
    return [Spec(realign_kernel, (tiles, split), args, config.num_warps, config.num_stages)]


def inspect_source(cfg: Config, dtype: str = "fp16") -> tuple:
    """What `triton.compile` needs to build the kernel as a 16x4096x4095 NT problem specializes it (B^T's rows 4095
    elements apart: eight residues): (kernel, signature, constexprs, attrs) for inputs of `dtype` ("fp16", "bf16"),
    for `python -m compare inspect`."""
    sig = {"a_ptr": f"*{dtype}", "b_ptr": f"*{dtype}", "c_ptr": f"*{dtype}", "p_ptr": "*fp32",
           "count_ptr": "*i32", "M": "i32", "N": "i32", "K": "i32", "K_SLICE": "i32", "SPLIT": "i32",
           "stride_am": "i32", "stride_ak": "constexpr", "stride_bk": "constexpr", "stride_bn": "i32",
           "stride_cm": "i32", "stride_cn": "constexpr", "LD": "i32", "LD8G": "i32", "STRIDE_CG": "i32"}
    consts = dict(stride_ak=1, stride_bk=1, stride_cn=1, G=8, K_MAJOR=True, ACC_FP16=False, INDEX_64=False,
                  BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m)
    attrs = {(i,): [["tt.divisibility", 16]] for i in (0, 1, 2, 3, 4, 5, 6, 8, 14)}
    return realign_kernel, sig, consts, attrs
