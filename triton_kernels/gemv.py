"""Decode-sized GEMM (M = 1) in Triton without tensor cores: each output column a dot product of A's row with B's.

What it adds over the split-K kernels (triton_kernels/splitk.py, splitk_tma.py): with one row of A the problem is
reading B once (1x4096x4096: 32 MB of B for 32 MFLOP), while a tensor-core tile pads M to 16 rows (mma.sync) or 64
(wgmma), brings B through shared memory and spends registers and issue slots on a dot that is 15/16 padding. Here
program (tile, s) streams BLOCK_K x BLOCK_N tiles of B straight into registers (16-byte loads, coalesced along B's
contiguous dimension, either layout), multiplies each by the matching BLOCK_K values of A's row (FFMA; HFMA2 with
fp16 accumulation) into a BLOCK_K x BLOCK_N accumulator laid out like the tile (no shuffles in the loop) and sums
it over k once, after the loop. K is split over programs as in splitk.py: each program writes its fp32 row block,
an acq_rel atomic on the tile's counter elects the last one, which reads all of the tile's row blocks in one load
and sums them in a fixed order (a reduction tree fixed by the configuration), so the same inputs give the same
bits on every run. Triton does not pipeline loads that feed no tl.dot (no cp.async at any num_stages), so the bytes
in flight come from occupancy: several programs per SM, each with its tile's loads issued together.

One row of A per program (BLOCK_M = 1; the rows of a larger M are separate programs that re-read B, from L2 where
they run together: GROUP_M puts the programs of one B tile side by side). Any strides, like the blocked kernel
(pointer loads, `operand_ptrs`' edge handling, `div8_args`).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from hgemm_common.errors import HgemmValueError
from hgemm_common.validation import needs_int64_indexing

from .common import Config, cdiv, div8_args, grouped_pid, operand_ptrs, to_output, unscale_strides
from .launch import Spec
from .splitk import fused_buffers, slices


# ----------------------------------------------------------------------------------------------------------------
# Tuning constants
# ----------------------------------------------------------------------------------------------------------------
MAX_M = 1  # timed by kernel="auto" up to this M: each row of A re-reads B (from L2 at best), so at M = 2 and past
#            the tensor-core split-K tiles, which read B once for 16 rows, win


def configs() -> list[Config]:
    """One row of A per program; B tiles of 4096-16384 elements (32-64 registers of accumulator a thread), 32-256
    columns wide, K split in 2-16 slices. The first six are the top entries of a wide sweep of gemv's space
    at 1x4096x4096 NN and NT and of the list at 1x4096x4096 and 1x8192x8192 NN on the H100 (narrow, deep
    tiles in few slices; docs/design/triton.md); the last two, wider tiles in more
    slices, are kept for other N and K (not among the top entries on those shapes)."""
    return [
        Config(1, 32, 256, group_m=8, num_warps=4, num_stages=1, split_k=2),
        Config(1, 32, 128, group_m=8, num_warps=4, num_stages=1, split_k=4),
        Config(1, 64, 128, group_m=8, num_warps=4, num_stages=1, split_k=4),
        Config(1, 64, 128, group_m=8, num_warps=4, num_stages=1, split_k=8),
        Config(1, 64, 256, group_m=8, num_warps=8, num_stages=1, split_k=2),
        Config(1, 128, 128, group_m=8, num_warps=8, num_stages=1, split_k=4),
        Config(1, 128, 64, group_m=8, num_warps=4, num_stages=1, split_k=8),
        Config(1, 256, 32, group_m=8, num_warps=4, num_stages=1, split_k=16),
    ]


INTERPRETER_CONFIG = Config(1, 32, 16, group_m=2, num_warps=4, num_stages=1, split_k=3)


def check_config(cfg: Config) -> Config:
    """A pinned configuration's ranges: Config.check's, with a row block of exactly 1."""
    cfg.check(min_block_m=1)
    if cfg.block_m != 1:
        raise HgemmValueError(f"hgemm config {cfg.name}: the gemv kernel computes one row of A per program, so "
                              f"block_m must be 1 (got {cfg.block_m})")
    return cfg


def worth_timing(m: int, n: int, k: int, sms: int, tma_in_place: bool) -> bool:
    """Timed for M <= MAX_M with K long enough to split."""
    return m <= MAX_M and k >= 256


# ----------------------------------------------------------------------------------------------------------------
# Kernel
# ----------------------------------------------------------------------------------------------------------------
@triton.jit
def gemv_kernel(
    # pointers
    a_ptr, b_ptr, c_ptr, p_ptr, count_ptr,
    # sizes
    M, N, K, K_SLICE, SPLIT,  # K_SLICE: K elements per slice, a multiple of BLOCK_K; SPLIT: number of slices
    # strides (elements)
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    # meta-parameters
    ACC_FP16: tl.constexpr,
    INDEX_64: tl.constexpr,
    EVEN_K: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    SPLIT_P2: tl.constexpr,  # SPLIT's next power of two: the rows of the last program's load of the partials
    DIV8: tl.constexpr = 0,  # multiples of 8 Triton cannot see: strides passed divided by 8, M, N (common.div8_args)
):
    """Program (tile, s): row pid_m of C, columns pid_n * BLOCK_N ..., over the s-th K slice by CUDA-core
    multiply-adds into a BLOCK_K x BLOCK_N accumulator (in B's tile layout: no shuffles in the loop), summed over k
    after the loop, then split-K's epilogue. BLOCK_M is 1: one row of A per program."""
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn = unscale_strides(
        stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, DIV8)
    tile = tl.program_id(0)
    s = tl.program_id(1)
    pid_m, pid_n = grouped_pid(tile, M, tl.cdiv(N, BLOCK_N), GROUP_M)  # programs of one B tile side by side
    k0 = s * K_SLICE
    _, b_ptrs = operand_ptrs(a_ptr, b_ptr, pid_m, pid_n, k0, M, N, stride_am, stride_ak, stride_bk, stride_bn,
                             INDEX_64, BLOCK_M, BLOCK_N, BLOCK_K, DIV8)
    offs_k = tl.arange(0, BLOCK_K)
    row = pid_m.to(tl.int64) if INDEX_64 else pid_m
    a_ptrs = a_ptr + row * stride_am + (k0 + offs_k) * stride_ak
    k_len = tl.minimum(K - k0, K_SLICE)
    dt = tl.float16 if ACC_FP16 else tl.float32
    acc = tl.zeros((BLOCK_K, BLOCK_N), dtype=dt)
    # MAIN LOOP: elementwise products, summed over k only after it
    for kt in range(0, tl.cdiv(k_len, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            k_left = k_len - kt * BLOCK_K
            a = tl.load(a_ptrs, mask=offs_k < k_left, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc += a.to(dt)[:, None] * b.to(dt)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    part = tl.sum(acc.to(tl.float32), axis=0)

    # EPILOGUE: splitk.sum_slices' protocol, the last program reading every slice's row block in one load
    first = tile * SPLIT  # P[tile, 0]
    if INDEX_64:
        first = first.to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    tl.store(p_ptr + (first + s) * BLOCK_N + cols, part)
    tl.debug_barrier()  # every thread's part written before one thread releases them with the count
    arrived = tl.atomic_add(count_ptr + tile, 1, sem="acq_rel", scope="gpu")
    if arrived == SPLIT - 1:
        rows = tl.arange(0, SPLIT_P2)
        parts = tl.load(p_ptr + (first + rows[:, None]) * BLOCK_N + cols[None, :], mask=rows[:, None] < SPLIT,
                        other=0.0, cache_modifier=".cg")
        offs_cn = pid_n * BLOCK_N + cols
        if INDEX_64:
            offs_cn = offs_cn.to(tl.int64)
        total = tl.sum(parts, axis=0)  # a fixed tree over the slices: the same bits on every run
        tl.store(c_ptr + row * stride_cm + offs_cn * stride_cn, to_output(total, c_ptr.dtype.element_ty),
                 mask=offs_cn < N)
        tl.atomic_xchg(count_ptr + tile, 0, sem="relaxed", scope="gpu")


# ----------------------------------------------------------------------------------------------------------------
# Host launcher
# ----------------------------------------------------------------------------------------------------------------
def launches(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, acc_fp16: bool, config: Config) -> list[Spec]:
    """C = A @ B in one launch over (tiles, slices), with the stream's workspace and tile counters
    (`splitk.fused_buffers`); the caller has validated."""
    m, k = a.shape
    n = b.shape[1]
    k_slice, split = slices(k, config)
    tiles = cdiv(m, config.block_m) * cdiv(n, config.block_n)
    p, counts, blocks = fused_buffers(a.device, tiles, split, config)
    strides, div8 = div8_args((*a.stride(), *b.stride(), *c.stride()), m, n)
    args = (a, b, c, p, counts, m, n, k, k_slice, split, *strides, acc_fp16,
            needs_int64_indexing(a, b, c) or blocks > 2**31, k % config.block_k == 0, *config.meta.values(),
            triton.next_power_of_2(split), div8)
    return [Spec(gemv_kernel, (tiles, split), args, config.num_warps, config.num_stages)]


def inspect_source(cfg: Config, dtype: str = "fp16") -> tuple:
    """What `triton.compile` needs to build the kernel as a 1x4096x4096 NN problem specializes it: (kernel,
    signature, constexprs, attrs) for inputs of `dtype` ("fp16", "bf16"), for `python -m compare inspect`."""
    sig = {"a_ptr": f"*{dtype}", "b_ptr": f"*{dtype}", "c_ptr": f"*{dtype}", "p_ptr": "*fp32",
           "count_ptr": "*i32", "M": "constexpr", "N": "i32", "K": "i32", "K_SLICE": "i32", "SPLIT": "i32",
           "stride_am": "i32", "stride_ak": "constexpr", "stride_bk": "i32", "stride_bn": "constexpr",
           "stride_cm": "i32", "stride_cn": "constexpr"}
    consts = dict(M=1, stride_ak=1, stride_bn=1, stride_cn=1, ACC_FP16=False, INDEX_64=False, EVEN_K=True,
                  BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m,
                  SPLIT_P2=triton.next_power_of_2(cfg.split_k), DIV8=1 << 7)
    attrs = {(i,): [["tt.divisibility", 16]] for i in (0, 1, 2, 3, 4, 6, 7, 8, 10, 12, 14)}
    return gemv_kernel, sig, consts, attrs
