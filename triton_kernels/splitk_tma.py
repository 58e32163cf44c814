"""Split-K Triton HGEMM with TMA loads (Hopper and newer): the split-K kernel of triton_kernels/splitk.py with its
operand tiles brought by the Tensor Memory Accelerator instead of per-thread cp.async.

What it adds over splitk.py: A's and B's tiles arrive by descriptor (`cp.async.bulk.tensor`, UTMALDG in SASS) on
mbarriers, as in triton_kernels/tma_persistent.py: one thread issues a whole tile's copy, so a program keeps more
bytes in flight for the same registers, and no address arithmetic or masks sit in the K loop (the hardware
zero-fills past M, N and K). On skinny problems, which only read B once, the time is the memory system's: the
TMA kernel without a split already beat the pointer kernels on 64-128 x 8192 x 8192 on the H100
(docs/design/triton.md), and the split gives a 128 x 4096 x 4096 problem's few output tiles enough
programs to cover the SMs. The reduction is splitk.py's (`sum_slices`): fp32 blocks per (tile, slice), summed in
slice order by the tile's last program, in the same launch; the same bits on every run.

A and B must be TMA-describable (16-byte aligned bases and leading dimensions, unit inner stride; a column-major
operand is described as its transpose); C is stored through pointers, any strides. Slices are whole K tiles
(`splitk.slices`), so a slice's loads never reach into the next slice; only the last one runs past K, into TMA's
zero fill.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from hgemm_common.validation import needs_int64_indexing

from . import splitk
from .common import Config, cdiv, grouped_pid
from .launch import Spec
from .splitk import fused_buffers, slices, sum_slices
from .tma_persistent import operand_descs, tma_dot_step


# ----------------------------------------------------------------------------------------------------------------
# Tuning constants
# ----------------------------------------------------------------------------------------------------------------
def configs() -> list[Config]:
    """splitk.py's tiles (16-row tiles for decode-like M, 64 and 128 rows for M up to 512), each with every split of
    `splitk.SPLITS`; 64-wide K tiles are 128-byte TMA rows (the widest swizzle), deeper ones two or four of them."""
    tiles = [
        Config(16, 64, 128, group_m=1, num_warps=4, num_stages=4),
        Config(16, 64, 256, group_m=1, num_warps=4, num_stages=3),
        Config(16, 128, 128, group_m=1, num_warps=4, num_stages=4),
        Config(64, 64, 64, group_m=8, num_warps=4, num_stages=6),
        Config(64, 128, 64, group_m=8, num_warps=4, num_stages=6),
        Config(64, 128, 128, group_m=8, num_warps=4, num_stages=4),
        Config(128, 64, 64, group_m=8, num_warps=4, num_stages=6),
        Config(128, 128, 64, group_m=8, num_warps=8, num_stages=4),
    ]
    return splitk.with_splits(tiles)


INTERPRETER_CONFIG = Config(16, 32, 32, group_m=2, num_warps=4, num_stages=2, split_k=3)


def worth_timing(m: int, n: int, k: int, sms: int, tma_in_place: bool) -> bool:
    """Where splitk.py is timed (output tiles leave SMs idle, K long enough to split) and A and B are read in place
    (this kernel is never timed on staged copies: a skinny problem's time is reading B, and a copy reads it too)."""
    return tma_in_place and splitk.worth_timing(m, n, k, sms, tma_in_place)


def worth_scoring(m: int, n: int, k: int, sms: int, tma_in_place: bool) -> bool:
    """Where splitk.py is scored (`splitk.worth_scoring`: also every skinny output) and A and B are read in place."""
    return tma_in_place and splitk.worth_scoring(m, n, k, sms, tma_in_place)


# ----------------------------------------------------------------------------------------------------------------
# Kernel
# ----------------------------------------------------------------------------------------------------------------
@triton.jit
def tma_slice_product(a_desc, b_desc, tile, s, M, N, K, K_SLICE, A_T: tl.constexpr, B_T: tl.constexpr,
                      ACC_FP16: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr):
    """(pid_m, pid_n, acc): output tile `tile`'s coordinates (grouped order) and its product over the s-th K slice
    (K_SLICE elements from s * K_SLICE) from TMA tiles; the last slice's last tile past K is zero-filled by TMA."""
    pid_m, pid_n = grouped_pid(tile, tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    k0 = s * K_SLICE
    if ACC_FP16:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # MAIN LOOP: this slice of K
    for off_k in range(k0, tl.minimum(K, k0 + K_SLICE), BLOCK_K):
        acc = tma_dot_step(a_desc, b_desc, off_m, off_n, off_k, acc, A_T, B_T, ACC_FP16)
    return pid_m, pid_n, acc


@triton.jit
def splitk_tma_kernel(
    # descriptors and pointers
    a_desc, b_desc, c_ptr, p_ptr, count_ptr,
    # sizes
    M, N, K, K_SLICE, SPLIT,  # K_SLICE: K elements per slice, a multiple of BLOCK_K; SPLIT: number of slices
    # strides of C (elements)
    stride_cm, stride_cn,
    # meta-parameters
    A_T: tl.constexpr,  # a_desc describes A^T (A is column-major)
    B_T: tl.constexpr,  # b_desc describes B^T (B is column-major)
    ACC_FP16: tl.constexpr,
    INDEX_64: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    """Program (tile, s) computes the tile's product over the s-th K slice from TMA tiles, then `sum_slices`."""
    tile = tl.program_id(0)
    s = tl.program_id(1)
    pid_m, pid_n, acc = tma_slice_product(a_desc, b_desc, tile, s, M, N, K, K_SLICE, A_T, B_T, ACC_FP16, BLOCK_M,
                                          BLOCK_N, BLOCK_K, GROUP_M)
    sum_slices(acc, tile, s, pid_m, pid_n, c_ptr, p_ptr, count_ptr, M, N, SPLIT, stride_cm, stride_cn, INDEX_64,
               BLOCK_M, BLOCK_N)


# ----------------------------------------------------------------------------------------------------------------
# Host launcher
# ----------------------------------------------------------------------------------------------------------------
def launches(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, acc_fp16: bool, config: Config) -> list[Spec]:
    """C = A @ B in one launch over (tiles, slices), with the stream's workspace and tile counters
    (`splitk.fused_buffers`); the caller has validated and checked that A and B are TMA-describable
    (`meets_alignment("tma_ab", ...)`)."""
    m, k = a.shape
    n = b.shape[1]
    k_slice, split = slices(k, config)
    tiles = cdiv(m, config.block_m) * cdiv(n, config.block_n)
    p, counts, blocks = fused_buffers(a.device, tiles, split, config)
    a_desc, b_desc, a_t, b_t = operand_descs(a, b, config)
    args = (a_desc, b_desc, c, p, counts, m, n, k, k_slice, split, c.stride(0), c.stride(1), a_t, b_t, acc_fp16,
            needs_int64_indexing(c) or blocks > 2**31, *config.meta.values())
    return [Spec(splitk_tma_kernel, (tiles, split), args, config.num_warps, config.num_stages)]


def inspect_source(cfg: Config, dtype: str = "fp16") -> tuple:
    """What `triton.compile` needs to build the kernel as a 128x4096x4096 NN problem on an H100 specializes it:
    (kernel, signature, constexprs, attrs) for inputs of `dtype` ("fp16", "bf16"), for `python -m compare inspect`."""
    bm, bn, bk = cfg.block_m, cfg.block_n, cfg.block_k
    sig = {"a_desc": f"tensordesc<{dtype}[{bm}, {bk}]>", "b_desc": f"tensordesc<{dtype}[{bk}, {bn}]>",
           "c_ptr": f"*{dtype}", "p_ptr": "*fp32", "count_ptr": "*i32", "M": "i32", "N": "i32", "K": "i32",
           "K_SLICE": "i32", "SPLIT": "i32", "stride_cm": "i32", "stride_cn": "constexpr"}
    consts = dict(stride_cn=1, A_T=False, B_T=False, ACC_FP16=False, INDEX_64=False, BLOCK_M=bm, BLOCK_N=bn,
                  BLOCK_K=bk, GROUP_M=cfg.group_m)
    attrs = {(i,): [["tt.divisibility", 16]] for i in (2, 3, 4, 5, 6, 7, 8, 10)}
    return splitk_tma_kernel, sig, consts, attrs
