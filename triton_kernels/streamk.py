"""Stream-K Triton HGEMM on TMA loads (Hopper and newer): every SM gets the same number of K iterations.

What it adds over the persistent TMA kernel (triton_kernels/tma_persistent.py): a persistent grid deals whole output
tiles, so when the tile count is not a multiple of the SM count the last round runs on part of the GPU. 3000x5000x2000
in 128 x 256 tiles is 480 tiles on 132 SMs: four rounds of 120 programs, and with the 95% of each tile that lies
inside C, 87% of the machine at best. Here the unit of work is one K iteration of one tile (BLOCK_K deep): the
tiles' iterations, tile after tile, are cut into as many equal contiguous ranges as there are programs (one per SM),
so program p runs the tail of one tile, some whole tiles and the head of another. A whole tile is stored straight
to C; a piece of a tile that several programs share is written as an fp32 block of the workspace, and an acq_rel
atomic on the tile's counter elects the program that arrives last, which sums the tile's pieces in program order (a
fixed order: the same bits on every run, whoever arrives last) and writes C, as split-K's `sum_slices` does. No
program waits for another, so no schedule can deadlock. (Stream-K: Osama et al., PPoPP 2023; cuBLAS and CUTLASS
run it on Hopper.)

A and B must be TMA-describable (16-byte aligned bases and leading dimensions, unit inner stride; a column-major
operand is described as its transpose); C is stored through pointers, any strides. A tile's pieces are the
programs p_first..p_last whose ranges meet it; program p keeps two workspace blocks, slot 0 for the piece at the
start of its range and slot 1 for the one at its end, so no two pieces share a block.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from hgemm_common.validation import needs_int64_indexing

from .common import Config, grouped_pid, out_offsets, to_output
from .launch import Kept, Spec
from .splitk import COUNTERS, WORKSPACES
from .tma_persistent import num_sms, operand_descs, tma_dot_step


# ----------------------------------------------------------------------------------------------------------------
# Tuning constants
# ----------------------------------------------------------------------------------------------------------------
def configs() -> list[Config]:
    """128 x 128 tiles, 64 deep in K (128-byte TMA rows), 4-6 stages, two warpgroups. C is stored from registers
    through pointers, and a shared tile's last program holds its sum and the pointers beside the accumulator: at
    128 x 256 (or 256 x 128, or 128 x 128 on one warpgroup) that epilogue spills to local memory (300 LDL, 210
    STL in the sm_90 SASS), at 128 x 128 on two warpgroups it does not."""
    return [Config(128, 128, 64, group_m=8, num_warps=8, num_stages=s) for s in (4, 5, 6)]


INTERPRETER_CONFIG = Config(32, 32, 32, group_m=2, num_warps=4, num_stages=2)
FILL_BELOW = 0.95  # timed where the TMA kernel's rounds of 128 x 256 tiles keep less of the SMs busy than this
WAVE_TILE = (128, 256)


def worth_timing(m: int, n: int, k: int, sms: int, tma_in_place: bool) -> bool:
    """Timed where A and B are read in place (never on staged copies) and whole-tile rounds of 128 x 256 tiles leave
    SMs idle: at least one full round, and the rounds' fill (tiles over rounds x SMs) under FILL_BELOW, with K at
    least four K tiles deep (3000x5000x2000: 480 tiles, fill 0.91; 4096^3: 512 tiles, 0.97)."""
    tiles = triton.cdiv(m, WAVE_TILE[0]) * triton.cdiv(n, WAVE_TILE[1])
    fill = tiles / (triton.cdiv(tiles, sms) * sms)
    return tma_in_place and tiles >= sms and fill < FILL_BELOW and k >= 4 * 64


# ----------------------------------------------------------------------------------------------------------------
# Kernel
# ----------------------------------------------------------------------------------------------------------------
@triton.jit
def range_start(p, total, n_programs):
    """First K iteration (tile-major) of program p's range: floor(p * total / n_programs), in int64 (total is)."""
    return (p * total) // n_programs


@triton.jit
def program_of(it, total, n_programs):
    """The program whose range holds iteration `it`: the largest p with range_start(p) <= it."""
    return (((it + 1) * n_programs - 1) // total).to(tl.int32)


@triton.jit
def streamk_kernel(
    # descriptors and pointers
    a_desc, b_desc, c_ptr, p_ptr, count_ptr,
    # sizes
    M, N, K,
    # strides of C (elements)
    stride_cm, stride_cn,
    # meta-parameters
    A_T: tl.constexpr,  # a_desc describes A^T (A is column-major)
    B_T: tl.constexpr,  # b_desc describes B^T (B is column-major)
    ACC_FP16: tl.constexpr,
    INDEX_64: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    """Program p: K iterations range_start(p) .. range_start(p + 1) - 1 of the tiles' iterations laid end to end,
    one tile segment at a time."""
    pid = tl.program_id(0)
    n_programs = tl.num_programs(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    total = (num_pid_m * num_pid_n).to(tl.int64) * k_tiles
    start = range_start(pid, total, n_programs)
    end = range_start(pid + 1, total, n_programs)
    block = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    it = start
    while it < end:
        tile = (it // k_tiles).to(tl.int32)
        tile_first = tile.to(tl.int64) * k_tiles  # the tile's first iteration
        kb = (it - tile_first).to(tl.int32)  # this segment's K tiles: kb .. ke - 1
        ke = tl.minimum(k_tiles, kb + (end - it)).to(tl.int32)
        pid_m, pid_n = grouped_pid(tile, num_pid_m, num_pid_n, GROUP_M)
        if ACC_FP16:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)
        else:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        # MAIN LOOP: this segment of the tile's K (the last K tile past K is zero-filled by TMA)
        for ki in range(kb, ke):
            acc = tma_dot_step(a_desc, b_desc, pid_m * BLOCK_M, pid_n * BLOCK_N, ki * BLOCK_K, acc, A_T, B_T,
                               ACC_FP16)
        offs_cm, offs_cn = out_offsets(pid_m * BLOCK_M, pid_n * BLOCK_N, INDEX_64, BLOCK_M, BLOCK_N)
        c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
        c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
        if kb == 0 and ke == k_tiles:  # a whole tile: straight to C
            tl.store(c_ptrs, to_output(acc, c_ptr.dtype.element_ty), mask=c_mask)
        else:
            # EPILOGUE of a shared tile: this piece to the workspace, counted in; the last piece's program sums them
            slot = 2 * pid + (it != start).to(tl.int32)  # 0: the piece at the start of this program's range
            tl.store(p_ptr + slot.to(tl.int64) * (BLOCK_M * BLOCK_N) + block, acc.to(tl.float32))
            tl.debug_barrier()  # every thread's part written before one thread releases it with the count
            p_first = program_of(tile_first, total, n_programs)
            p_last = program_of(tile_first + k_tiles - 1, total, n_programs)
            arrived = tl.atomic_add(count_ptr + tile, 1, sem="acq_rel", scope="gpu")
            if arrived == p_last - p_first:
                sum_ = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                for p in range(p_first, p_last + 1):  # program order: fixed, whoever arrived last
                    p_slot = 2 * p + (range_start(p, total, n_programs) < tile_first).to(tl.int32)
                    sum_ += tl.load(p_ptr + p_slot.to(tl.int64) * (BLOCK_M * BLOCK_N) + block, cache_modifier=".cg")
                tl.store(c_ptrs, to_output(sum_, c_ptr.dtype.element_ty), mask=c_mask)
                tl.atomic_xchg(count_ptr + tile, 0, sem="relaxed", scope="gpu")
        it += ke - kb


# ----------------------------------------------------------------------------------------------------------------
# Host launcher
# ----------------------------------------------------------------------------------------------------------------
def launches(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, acc_fp16: bool, config: Config) -> list[Spec]:
    """C = A @ B in one launch of one program per SM (fewer where there are fewer K iterations), with the stream's
    tile counters and a workspace of two fp32 blocks per program (`splitk.COUNTERS`, `splitk.WORKSPACES`); the caller
    has validated and checked that A and B are TMA-describable (`meets_alignment("tma_ab", ...)`)."""
    m, k = a.shape
    n = b.shape[1]
    tiles = triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n)
    n_programs = min(num_sms(a.device), tiles * triton.cdiv(k, config.block_k))
    blocks = 2 * n_programs * config.block_m * config.block_n
    p = Kept(WORKSPACES.get(a.device, blocks), WORKSPACES.get, blocks)
    counts = Kept(COUNTERS.get(a.device, tiles), COUNTERS.get, tiles)
    a_desc, b_desc, a_t, b_t = operand_descs(a, b, config)
    args = (a_desc, b_desc, c, p, counts, m, n, k, c.stride(0), c.stride(1), a_t, b_t, acc_fp16,
            needs_int64_indexing(c), *config.meta.values())
    return [Spec(streamk_kernel, (n_programs,), args, config.num_warps, config.num_stages)]


def inspect_source(cfg: Config, dtype: str = "fp16") -> tuple:
    """What `triton.compile` needs to build the kernel as a 3000x5000x2000 NT problem on an H100 specializes it:
    (kernel, signature, constexprs, attrs) for inputs of `dtype` ("fp16", "bf16"), for `python -m compare inspect`."""
    bm, bn, bk = cfg.block_m, cfg.block_n, cfg.block_k
    sig = {"a_desc": f"tensordesc<{dtype}[{bm}, {bk}]>", "b_desc": f"tensordesc<{dtype}[{bn}, {bk}]>",
           "c_ptr": f"*{dtype}", "p_ptr": "*fp32", "count_ptr": "*i32", "M": "i32", "N": "i32", "K": "i32",
           "stride_cm": "i32", "stride_cn": "constexpr"}
    consts = dict(stride_cn=1, A_T=False, B_T=True, ACC_FP16=False, INDEX_64=False, BLOCK_M=bm, BLOCK_N=bn,
                  BLOCK_K=bk, GROUP_M=cfg.group_m)
    attrs = {(i,): [["tt.divisibility", 16]] for i in (2, 3, 4, 7)}
    return streamk_kernel, sig, consts, attrs
