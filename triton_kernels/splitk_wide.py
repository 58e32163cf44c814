"""Split-K for small outputs over very long K (Hopper and newer): wgmma-sized tiles, K cut into 8-128 slices, and
the slices' partials summed by a second kernel spread over the whole GPU.

What it adds over splitk_tma.py: there, the last program of each tile sums the tile's partials alone. That is
cheap while the slices are few and the tiles small, but a small output over a very long K (a weight gradient over
many tokens, 256 x 256 x 65536: four 128 x 128 tiles) needs 32 slices of each tile to cover the SMs, and one
program reading 32 partial blocks of 64 KB takes longer than its slice did. Small tiles instead (64 x 64: 16 tiles
in 8 slices) keep the sum short but read A and B from L2 four times over. Here the tiles stay large, so A and B
are read about once (the problem is their bytes: they stream through once, at HBM bandwidth), and the partials
go to an fp32 workspace `P[slice, M, N]` from torch's caching allocator; a reduction kernel then sums each
element's partials, a few thousand values per program over every SM, in an order fixed by the configuration (a
tree across the slices), so the same inputs give the same bits on every run.

The reduction is launched as a programmatic dependent launch (sm_90 griddepcontrol): the partial kernel lets it
be scheduled once every partial program has started, and its programs wait (`gdc_wait`) until the partial
kernel has finished and its writes are visible, so the second launch's start-up overlaps the first kernel's tail.

A and B must be TMA-describable, as in splitk_tma.py (tiles by descriptor, zero fill past M, N and the last K
tile); C is written through pointers, any strides. Slices are whole K tiles (`splitk.slices`).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from hgemm_common.validation import interpreter_active, needs_int64_indexing

from .common import Config, cdiv, out_offsets, prune_for_problem, to_output
from .launch import Spec
from .splitk import slices, with_splits
from .splitk_tma import tma_slice_product
from .tma_persistent import operand_descs


# ----------------------------------------------------------------------------------------------------------------
# Tuning constants
# ----------------------------------------------------------------------------------------------------------------
SPLITS = (8, 16, 32, 64, 128)  # past 128 slices a 128 x 128 tile's partials (8 MB) outweigh its operands' reads
# Programs x slices a configuration may launch, in rounds of one program per SM: fewer than MIN_ROUNDS leaves SMs
# without a slice, more than MAX_ROUNDS only adds partials to sum (`prune`).
MIN_ROUNDS, MAX_ROUNDS = 0.5, 2.0
REDUCE_VALUES = 8192  # partial values one reduction program loads at once (64 a thread): all of them in flight
REDUCE_WARPS = 4
PDL = True  # the reduction as a programmatic dependent launch; False: an ordinary second launch


def configs() -> list[Config]:
    """128-row tiles (two warpgroups of wgmma, 8 warps) and 64-row ones (one warpgroup), 64-wide K tiles (128-byte
    TMA rows) in 4-6 stages, each with every split of SPLITS; `prune` keeps those whose grid covers the SMs in
    MIN_ROUNDS to MAX_ROUNDS rounds."""
    tiles = [
        Config(128, 128, 64, group_m=8, num_warps=8, num_stages=4),
        Config(128, 256, 64, group_m=8, num_warps=8, num_stages=4),
        Config(128, 64, 64, group_m=8, num_warps=4, num_stages=6),
        Config(64, 128, 64, group_m=8, num_warps=4, num_stages=6),
        Config(64, 64, 128, group_m=8, num_warps=4, num_stages=6),
    ]
    return with_splits(tiles, SPLITS)


INTERPRETER_CONFIG = Config(16, 32, 32, group_m=2, num_warps=4, num_stages=2, split_k=5)


def worth_timing(m: int, n: int, k: int, sms: int, tma_in_place: bool) -> bool:
    """Timed where A and B are read in place, 128 x 128 tiles leave SMs idle, and K is long beside the output (at
    least four times its longer side): there the operands' bytes are the time, and the partials are few beside
    them."""
    tiles = cdiv(m, 128) * cdiv(n, 128)
    return tma_in_place and tiles < sms and k >= 4 * max(m, n) and k >= 2 * min(SPLITS) * 64


def prune(cfgs: list[Config], m: int, n: int, k: int, sms: int) -> list[Config]:
    """`prune_for_problem`'s configurations whose grid (output tiles x slices) is MIN_ROUNDS to MAX_ROUNDS rounds of
    the SMs; at least one (the one closest to a round)."""
    kept = prune_for_problem(cfgs, m, n, k)

    def rounds(c):
        return cdiv(m, c.block_m) * cdiv(n, c.block_n) * slices(k, c)[1] / sms
    fit = [c for c in kept if MIN_ROUNDS <= rounds(c) <= MAX_ROUNDS]
    return fit or [min(kept, key=lambda c: abs(rounds(c) - 1.0))]


# ----------------------------------------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------------------------------------
@triton.jit
def splitk_wide_partial_kernel(
    # descriptors and pointers
    a_desc, b_desc, p_ptr,
    # sizes
    M, N, K, K_SLICE,  # K_SLICE: K elements per slice, a multiple of BLOCK_K
    # meta-parameters
    A_T: tl.constexpr,  # a_desc describes A^T (A is column-major)
    B_T: tl.constexpr,  # b_desc describes B^T (B is column-major)
    ACC_FP16: tl.constexpr,
    INDEX_64: tl.constexpr,
    PDL: tl.constexpr,  # let the reduction kernel (a programmatic dependent launch) be scheduled early
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    """Program (tile, s): the tile's product over the s-th K slice from TMA tiles, stored as fp32 into P[s]
    (row-major M x N, masked at the edges)."""
    if PDL:
        gdc_launch_dependents()
    s = tl.program_id(1)
    pid_m, pid_n, acc = tma_slice_product(a_desc, b_desc, tl.program_id(0), s, M, N, K, K_SLICE, A_T, B_T,
                                          ACC_FP16, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M)
    # EPILOGUE: the fp32 partial of slice s
    offs_m, offs_n = out_offsets(pid_m * BLOCK_M, pid_n * BLOCK_N, INDEX_64, BLOCK_M, BLOCK_N)
    if INDEX_64:
        s = s.to(tl.int64)
    p_ptrs = p_ptr + s * M * N + offs_m[:, None] * N + offs_n[None, :]
    tl.store(p_ptrs, acc.to(tl.float32), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def splitk_wide_reduce_kernel(
    p_ptr, c_ptr,
    M, N, SPLIT,
    stride_cm, stride_cn,
    INDEX_64: tl.constexpr,
    PDL: tl.constexpr,  # launched as a programmatic dependent launch: wait for the partial kernel first
    SLICES: tl.constexpr,  # SPLIT rounded up to a power of two
    BLOCK: tl.constexpr,  # elements of C per program
):
    """C[e] = the sum over s of P[s, e] for BLOCK consecutive elements e of the row-major M x N result: all of
    their SPLIT partials loaded at once, summed across the slices by tl.sum (a tree fixed by the compiled
    layout), rounded once to C's dtype (fp16, bf16) and stored through C's strides."""
    if PDL:
        gdc_wait()
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    s = tl.arange(0, SLICES)
    mn = M * N
    if INDEX_64:
        offs = offs.to(tl.int64)
        s = s.to(tl.int64)
        mn = mn.to(tl.int64)
    inside = offs < mn
    parts = tl.load(p_ptr + s[:, None] * mn + offs[None, :], mask=(s[:, None] < SPLIT) & inside[None, :],
                    other=0.0)
    total = tl.sum(parts, axis=0)
    rows = offs // N
    cols = offs % N
    tl.store(c_ptr + rows * stride_cm + cols * stride_cn, to_output(total, c_ptr.dtype.element_ty), mask=inside)


# ----------------------------------------------------------------------------------------------------------------
# Host launcher
# ----------------------------------------------------------------------------------------------------------------
def reduce_shape(split: int) -> tuple[int, int]:
    """(SLICES, BLOCK) of the reduction: the split rounded up to a power of two, and as many elements per program
    as make REDUCE_VALUES partial values."""
    slices_ = triton.next_power_of_2(split)
    return slices_, max(32, REDUCE_VALUES // slices_)


def launches(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, acc_fp16: bool, config: Config) -> list[Spec]:
    """C = A @ B in two launches: the partial kernel over (tiles, slices) into a new (split, M, N) fp32 workspace,
    then the reduction over C's elements; the caller has validated and checked that A and B are TMA-describable
    (`meets_alignment("tma_ab", ...)`)."""
    m, k = a.shape
    n = b.shape[1]
    k_slice, split = slices(k, config)
    tiles = cdiv(m, config.block_m) * cdiv(n, config.block_n)
    p = torch.empty((split, m, n), dtype=torch.float32, device=a.device)
    index_64 = needs_int64_indexing(c, p)
    pdl = PDL and not interpreter_active()
    a_desc, b_desc, a_t, b_t = operand_descs(a, b, config)
    partial = (a_desc, b_desc, p, m, n, k, k_slice, a_t, b_t, acc_fp16, index_64, pdl, *config.meta.values())
    slices_, block = reduce_shape(split)
    reduce = (p, c, m, n, split, c.stride(0), c.stride(1), index_64, pdl, slices_, block)
    return [Spec(splitk_wide_partial_kernel, (tiles, split), partial, config.num_warps, config.num_stages),
            Spec(splitk_wide_reduce_kernel, (cdiv(m * n, block),), reduce, REDUCE_WARPS, 1, launch_pdl=pdl)]


def inspect_source(cfg: Config, dtype: str = "fp16") -> tuple:
    """What `triton.compile` needs to build the partial kernel as a 256x256x65536 NN problem on an H100 specializes
    it: (kernel, signature, constexprs, attrs) for inputs of `dtype` ("fp16", "bf16"), for `python -m compare
    inspect`."""
    bm, bn, bk = cfg.block_m, cfg.block_n, cfg.block_k
    sig = {"a_desc": f"tensordesc<{dtype}[{bm}, {bk}]>", "b_desc": f"tensordesc<{dtype}[{bk}, {bn}]>",
           "p_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32", "K_SLICE": "i32"}
    consts = dict(A_T=False, B_T=False, ACC_FP16=False, INDEX_64=False, PDL=PDL, BLOCK_M=bm, BLOCK_N=bn,
                  BLOCK_K=bk, GROUP_M=cfg.group_m)
    attrs = {(i,): [["tt.divisibility", 16]] for i in (2, 3, 4, 5, 6)}
    return splitk_wide_partial_kernel, sig, consts, attrs
