"""Stream-K Triton HGEMM on TMA loads (Hopper and newer): every SM gets the same number of K iterations.

What it adds over the persistent TMA kernel (triton_kernels/tma_persistent.py): a persistent grid deals whole output
tiles, so when the tile count is not a multiple of the SM count the last round runs on part of the GPU. 3000x5000x2000
in 128 x 256 tiles is 480 tiles on 132 SMs: four rounds of 120 programs, and with the 95% of each tile that lies
inside C, 87% of the machine at best. Here the unit of work is one K iteration of one tile (BLOCK_K deep): the
tiles' iterations, tile after tile, are cut into as many equal contiguous ranges as there are programs (one per SM),
so program p runs the tail of one tile, some whole tiles and the head of another, all in one loop over its range
(the TMA pipeline runs on from tile to tile, as `tl.range(..., flatten=True)` makes the persistent kernel's). A whole
tile leaves by TMA store; a piece of a tile that several programs share is written as an fp32 block of the workspace,
and an acq_rel atomic on the tile's counter elects the program that arrives last, which sums the tile's pieces in
program order (a fixed order: the same bits on every run, whoever arrives last) and stores C, as split-K's
`sum_slices` does. No program waits for another, so no schedule can deadlock. (Stream-K: Osama et al., PPoPP 2023.)

Two Triton facts shape it (its sm_90 compile): a `tl.debug_barrier()` anywhere in the loop stops the software
pipeliner (no TMA prefetch: every iteration waits for its own loads), so the barrier that orders a piece's stores
before its release is a `bar.sync` in inline assembly, which the pipeliner lets be; and a `for` loop over the pieces
inside the loop stops it too, so the sum runs over MAX_PIECES pieces unrolled, masked past the tile's last. The
workspace store converts the accumulator's layout through shared memory (64 KB at 128 x 128 fp32), which with the
pipeline and C's staging buffer leaves room for 128 x 128 tiles only. A first version with a `while` loop over tile
segments (commit c3a35d3) ran 0.55-0.58x cuBLAS on 3000x5000x2000 (docs/results/h100-c3a35d3-triton/).

A, B and C must be TMA-describable (C row-major; 16-byte aligned bases and leading dimensions, unit inner stride; a
column-major operand is described as its transpose). A tile's pieces are the programs p_first..p_last whose ranges
meet it; program p keeps two workspace blocks, slot 0 for the piece at the start of its range and slot 1 for the one
at its end, so no two pieces share a block. The launcher gives each program at least a third of a tile's iterations
(fewer programs on small problems), so at most MAX_PIECES = 4 programs share a tile.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import INTERPRETED, Config, grouped_pid, to_output
from .launch import Desc, Kept, Spec
from .splitk import COUNTERS, WORKSPACES
from .tma_persistent import num_sms, operand_descs, tma_dot_step


# ----------------------------------------------------------------------------------------------------------------
# Tuning constants
# ----------------------------------------------------------------------------------------------------------------
def configs() -> list[Config]:
    """128 x 128 tiles 64 deep in K (128-byte TMA rows): two warpgroups 3 or 4 stages deep, one warpgroup 4 deep.
    Larger tiles do not fit beside the workspace store's layout conversion (the header)."""
    return [Config(128, 128, 64, group_m=8, num_warps=w, num_stages=s) for w, s in ((8, 3), (8, 4), (4, 4))]


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
def release_barrier(x):
    """Every thread of the program past this point only after all have reached it (their stores ordered before
    what follows): `bar.sync 0` in inline assembly in compiled code, where `tl.debug_barrier()` would stop the
    loop's software pipelining; the interpreter, which runs no inline assembly, takes the debug barrier."""
    if INTERPRETED:
        tl.debug_barrier()
    else:
        tl.inline_asm_elementwise("bar.sync 0;\n mov.u32 $0, $1;", "=r,r", [x], dtype=tl.int32, is_pure=False,
                                  pack=1)


@triton.jit
def streamk_kernel(
    # descriptors and pointers
    a_desc, b_desc, c_desc, p_ptr, count_ptr,
    # sizes
    M, N, K,
    # meta-parameters
    A_T: tl.constexpr,  # a_desc describes A^T (A is column-major)
    B_T: tl.constexpr,  # b_desc describes B^T (B is column-major)
    ACC_FP16: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    MAX_PIECES: tl.constexpr,  # the most programs whose ranges meet one tile (the launcher's bound)
):
    """Program p: K iterations range_start(p) .. range_start(p + 1) - 1 of the tiles' iterations laid end to end, in
    one loop; at a tile's last iteration or the range's end, the tile's epilogue."""
    pid = tl.program_id(0)
    n_programs = tl.num_programs(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    total = (num_pid_m * num_pid_n).to(tl.int64) * k_tiles  # < 2**31 (the launcher checks)
    start = range_start(pid, total, n_programs).to(tl.int32)
    end = range_start(pid + 1, total, n_programs).to(tl.int32)
    block = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    acc_dtype = tl.float16 if ACC_FP16 else tl.float32
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=acc_dtype)
    # MAIN LOOP: this program's iterations, tile after tile (the last K tile past K is zero-filled by TMA)
    for it in tl.range(start, end):
        tile = it // k_tiles
        ki = it - tile * k_tiles
        pid_m, pid_n = grouped_pid(tile, num_pid_m, num_pid_n, GROUP_M)
        acc = tma_dot_step(a_desc, b_desc, pid_m * BLOCK_M, pid_n * BLOCK_N, ki * BLOCK_K, acc, A_T, B_T, ACC_FP16)
        if (ki == k_tiles - 1) | (it == end - 1):
            # EPILOGUE: the tile's last iteration or this range's
            tile_first = it - ki  # the tile's first iteration
            if (ki == k_tiles - 1) & (tile_first >= start):  # a whole tile: straight to C
                c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], to_output(acc, c_desc.dtype))
            else:  # a piece: to the workspace, counted in; the tile's last piece's program sums them
                slot = 2 * pid + (tile_first > start).to(tl.int32)  # 0: the piece holding this range's start
                tl.store(p_ptr + slot.to(tl.int64) * (BLOCK_M * BLOCK_N) + block, acc.to(tl.float32))
                release_barrier(tile)  # every thread's part written before one thread releases it with the count
                p_first = program_of(tile_first.to(tl.int64), total, n_programs)
                p_last = program_of(tile_first.to(tl.int64) + k_tiles - 1, total, n_programs)
                arrived = tl.atomic_add(count_ptr + tile, 1, sem="acq_rel", scope="gpu")
                if arrived == p_last - p_first:
                    sum_ = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                    for j in tl.static_range(MAX_PIECES):  # program order: fixed, whoever arrived last
                        p = p_first + j
                        p_slot = 2 * p + (range_start(p, total, n_programs) < tile_first).to(tl.int32)
                        sum_ += tl.load(p_ptr + p_slot.to(tl.int64) * (BLOCK_M * BLOCK_N) + block,
                                        mask=(p <= p_last) & (block >= 0), other=0.0, cache_modifier=".cg")
                    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], to_output(sum_, c_desc.dtype))
                    tl.atomic_xchg(count_ptr + tile, 0, sem="relaxed", scope="gpu")
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=acc_dtype)


# ----------------------------------------------------------------------------------------------------------------
# Host launcher
# ----------------------------------------------------------------------------------------------------------------
def programs(tiles: int, k_tiles: int, sms: int) -> tuple[int, int]:
    """(programs, MAX_PIECES): one per SM, fewer where that would leave a program less than a third of a tile's
    iterations (small problems), and the most programs one tile's iterations can meet."""
    total = tiles * k_tiles
    n = max(1, min(sms, total // triton.cdiv(k_tiles, 3)))
    return n, triton.cdiv(k_tiles, total // n) + 1


def launches(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, acc_fp16: bool, config: Config) -> list[Spec]:
    """C = A @ B in one launch of `programs(...)` programs, with the stream's tile counters and a workspace of two
    fp32 blocks per program (`splitk.COUNTERS`, `splitk.WORKSPACES`); the caller has validated and checked that A, B
    and a row-major C are TMA-describable (`meets_alignment("tma", ...)`)."""
    m, k = a.shape
    n = b.shape[1]
    tiles = triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n)
    k_tiles = triton.cdiv(k, config.block_k)
    if tiles * k_tiles >= 2**31 // 2:
        raise ValueError(f"hgemm(kernel='streamk'): {m}x{n}x{k} has {tiles * k_tiles} K iterations of "
                         f"{config.name} tiles, past the kernel's int32 iteration counter; use kernel='tma'")
    n_programs, max_pieces = programs(tiles, k_tiles, num_sms(a.device))
    blocks = 2 * n_programs * config.block_m * config.block_n
    p = Kept(WORKSPACES.get(a.device, blocks), WORKSPACES.get, blocks)
    counts = Kept(COUNTERS.get(a.device, tiles), COUNTERS.get, tiles)
    a_desc, b_desc, a_t, b_t = operand_descs(a, b, config)
    args = (a_desc, b_desc, Desc(c, (config.block_m, config.block_n)), p, counts, m, n, k, a_t, b_t, acc_fp16,
            *config.meta.values(), max_pieces)
    return [Spec(streamk_kernel, (n_programs,), args, config.num_warps, config.num_stages)]


def inspect_source(cfg: Config, dtype: str = "fp16") -> tuple:
    """What `triton.compile` needs to build the kernel as a 3000x5000x2000 NT problem on an H100 specializes it:
    (kernel, signature, constexprs, attrs) for inputs of `dtype` ("fp16", "bf16"), for `python -m compare inspect`."""
    bm, bn, bk = cfg.block_m, cfg.block_n, cfg.block_k
    sig = {"a_desc": f"tensordesc<{dtype}[{bm}, {bk}]>", "b_desc": f"tensordesc<{dtype}[{bn}, {bk}]>",
           "c_desc": f"tensordesc<{dtype}[{bm}, {bn}]>", "p_ptr": "*fp32", "count_ptr": "*i32", "M": "i32",
           "N": "i32", "K": "i32"}
    consts = dict(A_T=False, B_T=True, ACC_FP16=False, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=cfg.group_m,
                  MAX_PIECES=2)
    attrs = {(i,): [["tt.divisibility", 16]] for i in (3, 4, 7)}
    return streamk_kernel, sig, consts, attrs
