"""Stream-K Triton HGEMM with TMA loads (Hopper and newer): the persistent TMA kernel of
triton_kernels/tma_persistent.py with the tiles of its last, partial round cut into k-slices that fill the SMs.

What it adds over tma_persistent.py: a persistent grid of G programs walking T output tiles takes cdiv(T, G)
rounds, and when T is not a multiple of G the last round leaves SMs idle (200x8192x8192 in 128x256 tiles: 64 tiles
on 132 SMs, half the GPU idle for the whole call). Stream-K (Osama et al., "Stream-K: Work-centric Parallel
Decomposition for Dense Matrix-Matrix Multiplication on GPU", PPoPP 2023; the stream-K tile scheduler of CUTLASS's
sm90 kernels) hands that round's k-iterations (one k-iteration: one BLOCK_K step of one tile) to the idle SMs. Here
it is the "data-parallel rounds + split remainder" hybrid, aligned in K:

The schedule (`schedule`, on the host): G = min(SMs, T x I) programs (I = cdiv(K, BLOCK_K) k-iterations a tile),
T // G whole rounds data-parallel, and the R = T % G tiles of the partial round each cut into S equal k-slices,
S = min(MAX_SLICES, G // R, I // MIN_SLICE_ITERS) (`hgemm_common.schedules`: the rule the cost model prices too).
Program p < R x S computes slice j = p % S of tile p // S, k-iterations [j x I // S, (j + 1) x I // S), then every
program walks the data-parallel tiles R + p, R + p + G, ...
(`tma_persistent.data_parallel_tiles`). The R stream-K tiles are the first in grouped order, so they are
neighbours in C, and every program at slice j reads the same K range at the same time: the tiles of one row of C
load the same A blocks together, those of one column the same B blocks, and L2 serves them once, as it does for
the data-parallel rounds. (Equal shares of the flattened k-iteration space, Osama et al.'s basic form, start each
program at its own k-iteration, so neighbouring tiles no longer read together and A and B come from HBM once per
tile.) Where S < 2 (no partial round, one more than half full, or K too short to cut), nothing is stream-K and the
schedule is the TMA kernel's (`tma_persistent.programs`).

The fix-up: each slice is written as an fp32 block of the stream's workspace at slot (tile, j) (splitk.py's
`write_part`), and a second launch (`streamk_fixup_kernel`, queued behind the first on the stream) sums each cut
tile's S blocks in slot order, FIXUP_ROWS rows of the tile a program, and stores C. With the fused split-K epilogue
instead (splitk.py's `sum_parts`: the program that arrives last at the tile's counter sums all S blocks itself;
`SEPARATE_FIXUP = False`), that one program read S x BLOCK_M x BLOCK_N x 4 bytes through its own SM's port before
it could start its data-parallel tiles, and the call waited for it (docs/design/triton.md). Either way the sum's
order is fixed, so the same inputs give the same bits on every run, whatever the timing; no atomic touches the data.

A and B must be TMA-describable and C row-major (alignment "tma", like the TMA kernel): data-parallel tiles store
C by TMA; stream-K tiles through pointers (masked: a tile at the edge, any strides).
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import torch
import triton
import triton.language as tl

from hgemm_common.errors import HgemmValueError
from hgemm_common.operands import major as _major
from hgemm_common.validation import interpreter_active, needs_int64_indexing
from hgemm_common.schedules import MAX_SLICES, MIN_SLICE_ITERS, stream_k_cut  # noqa: F401 (the rule's bounds)

from .common import Config, cdiv, grouped_pid
from .launch import Desc, Spec
from .splitk import fused_buffers, store_tile, sum_parts, write_part
from .tma_persistent import _num_sms, data_parallel_tiles, operand_descs, programs, tile_k_range


# ----------------------------------------------------------------------------------------------------------------
# Tuning constants
# ----------------------------------------------------------------------------------------------------------------
def configs() -> list[Config]:
    """tma_persistent.py's Hopper tiles with the C tile stored whole (one TMA store site for the data-parallel
    tiles; stream-K tiles are stored through pointers): 128x256x64 in 3 stages, 128x128x64 in 4, 64x128 tiles 128
    deep in K, 128x128x128 in 3. The widest first: `worth_scoring` counts its tiles."""
    return [
        Config(128, 256, 64, group_m=8, num_warps=8, num_stages=3),
        Config(128, 128, 64, group_m=8, num_warps=8, num_stages=4),
        Config(64, 128, 128, group_m=8, num_warps=4, num_stages=4),
        Config(128, 128, 128, group_m=8, num_warps=8, num_stages=3),
    ]


SEPARATE_FIXUP = True  # the cut tiles summed by a second launch; False: by the last slice to arrive (`sum_parts`)
FIXUP_ROWS = 16  # rows of a cut tile one program of `streamk_fixup_kernel` sums (a 16 x 256 fp32 stripe: 16 KB a slot)
FIXUP_WARPS = 4

INTERPRETER_CONFIG = Config(32, 32, 32, group_m=4, num_warps=4, num_stages=2)
# Programs under the interpreter: few, and odd, so that the small tests' tile counts leave partial rounds of one to
# three tiles, cut into two to seven slices of uneven length (I not a multiple of S).
INTERPRETER_SMS = 7


# The sweep times it; kernel="auto" does not pick it yet (`contract.SWEEP_ONLY`).
SWEEP_ONLY = ("its schedule (the partial round's tiles cut into k-slices aligned in K) beats the data-parallel TMA "
              "kernel where the cut round is most of the work, but the sweep's other candidates rarely lose to it, "
              "and the cost model does not tell where they do: scored, its cross-validated choices are worse "
              "(docs/design/triton.md, \"The GPU full whatever the tile count\")")


def worth_timing(m: int, n: int, k: int, sms: int, tma_in_place: bool) -> bool:
    """Not timed by tune="exact" (nor picked by kernel="auto" untimed); the sweep times it (`worth_scoring`), and
    the cost model would weigh it once a GPU's parameter file fits it, but for SWEEP_ONLY."""
    return False


def worth_scoring(m: int, n: int, k: int, sms: int, tma_in_place: bool) -> bool:
    """Scored by the cost model (and timed by the sweep) where the widest tile's schedule cuts tiles into k-slices
    (`schedule`: a partial round at most half full, K long enough) and A and B are read in place; elsewhere the
    schedule is the TMA kernel's."""
    cfg = configs()[0]
    tiles = cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n)
    return tma_in_place and schedule(tiles, cdiv(k, cfg.block_k), sms).sk_tiles > 0


# ----------------------------------------------------------------------------------------------------------------
# Kernel
# ----------------------------------------------------------------------------------------------------------------
@triton.jit
def stream_k_slice(a_desc, b_desc, c_ptr, p_ptr, count_ptr, M, N, K, SK_TILES, SLICES, stride_cm, stride_cn,
                   A_T: tl.constexpr, B_T: tl.constexpr, ACC_FP16: tl.constexpr, INDEX_64: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                   SEPARATE: tl.constexpr):
    """Program pid < SK_TILES x SLICES: k-slice j = pid % SLICES of stream-K tile pid // SLICES, k-iterations
    [j x I // SLICES, (j + 1) x I // SLICES), written to slot j of the tile's workspace blocks (`write_part`; the
    second launch sums them) or, SEPARATE false, summed in this launch (`sum_parts`)."""
    pid = tl.program_id(0)
    if pid < SK_TILES * SLICES:
        tile = pid // SLICES
        j = pid - tile * SLICES
        num_pid_m = tl.cdiv(M, BLOCK_M)
        num_pid_n = tl.cdiv(N, BLOCK_N)
        iters = tl.cdiv(K, BLOCK_K)
        # MAIN LOOP: the slice's k-iterations, the same K range for slice j of every stream-K tile
        acc = tile_k_range(a_desc, b_desc, tile, j * iters // SLICES, (j + 1) * iters // SLICES, num_pid_m,
                           num_pid_n, A_T, B_T, ACC_FP16, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M)
        # EPILOGUE
        if SEPARATE:
            write_part(acc, tile, j, SLICES, p_ptr, INDEX_64, BLOCK_M, BLOCK_N)
        else:
            pid_m, pid_n = grouped_pid(tile, num_pid_m, num_pid_n, GROUP_M)
            sum_parts(acc, tile, j, SLICES, SLICES, pid_m, pid_n, c_ptr, p_ptr, count_ptr, M, N, stride_cm, stride_cn,
                      INDEX_64, BLOCK_M, BLOCK_N)


@triton.jit
def streamk_fixup_kernel(p_ptr, c_ptr, M, N, SLICES, stride_cm, stride_cn, INDEX_64: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr,
                         FIXUP_ROWS: tl.constexpr):
    """The second launch: program pid sums rows [r, r + FIXUP_ROWS) of cut tile pid // (BLOCK_M / FIXUP_ROWS)
    (r = FIXUP_ROWS x the rest) over its SLICES workspace blocks, in slot order, and stores them into C (masked at
    M and N, any strides)."""
    pid = tl.program_id(0)
    tile = pid // (BLOCK_M // FIXUP_ROWS)
    r0 = (pid - tile * (BLOCK_M // FIXUP_ROWS)) * FIXUP_ROWS
    pid_m, pid_n = grouped_pid(tile, tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    first = tile * SLICES
    if INDEX_64:
        first = first.to(tl.int64)
    stripe = (r0 + tl.arange(0, FIXUP_ROWS))[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    total = tl.zeros((FIXUP_ROWS, BLOCK_N), dtype=tl.float32)
    for t in range(SLICES):
        total += tl.load(p_ptr + (first + t) * (BLOCK_M * BLOCK_N) + stripe)
    # the stripe is block row pid_m x (BLOCK_M / FIXUP_ROWS) + r0 / FIXUP_ROWS of C in FIXUP_ROWS x BLOCK_N blocks
    store_tile(total, pid_m * (BLOCK_M // FIXUP_ROWS) + r0 // FIXUP_ROWS, pid_n, c_ptr, M, N, stride_cm, stride_cn,
               INDEX_64, FIXUP_ROWS, BLOCK_N)


@triton.jit
def hgemm_streamk_kernel(
    # descriptors and pointers
    a_desc, b_desc, c_desc, c_ptr, p_ptr, count_ptr,  # c_desc and c_ptr: the same C (TMA and pointer stores)
    # sizes
    M, N, K, SK_TILES, SLICES,  # SK_TILES: the stream-K tiles (the first, grouped order); SLICES: k-slices of each
    # strides of C (elements)
    stride_cm, stride_cn,
    # meta-parameters
    A_T: tl.constexpr,  # a_desc describes A^T (A is column-major)
    B_T: tl.constexpr,  # b_desc describes B^T (B is column-major)
    ACC_FP16: tl.constexpr,
    INDEX_64: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    SEPARATE: tl.constexpr = True,  # the cut tiles' sums left to `streamk_fixup_kernel` (SEPARATE_FIXUP)
):
    """Each program: its k-slice of a stream-K tile, if it has one (`stream_k_slice`), then its data-parallel
    tiles, whole rounds from tile SK_TILES."""
    stream_k_slice(a_desc, b_desc, c_ptr, p_ptr, count_ptr, M, N, K, SK_TILES, SLICES, stride_cm, stride_cn, A_T, B_T,
                   ACC_FP16, INDEX_64, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, SEPARATE)
    data_parallel_tiles(a_desc, b_desc, c_desc, M, N, K, SK_TILES, A_T, B_T, ACC_FP16, BLOCK_M, BLOCK_N, BLOCK_K,
                        GROUP_M, 1)


# ----------------------------------------------------------------------------------------------------------------
# Host launcher
# ----------------------------------------------------------------------------------------------------------------
class Schedule(NamedTuple):
    """A stream-K launch: `programs` persistent programs; the first `sk_tiles` tiles (grouped order) cut into
    `slices` k-slices each, one program a slice (workspace slots per tile); the rest data-parallel."""
    programs: int
    sk_tiles: int
    slices: int


@functools.lru_cache(maxsize=1024)
def schedule(tiles: int, iters: int, sms: int) -> Schedule:
    """The hybrid schedule of `tiles` output tiles of `iters` k-iterations each on at most `sms` programs (module
    header): G programs, whole rounds data-parallel, the partial round's tiles cut into S k-slices; where S < 2 no
    tile is stream-K and the grid is the TMA kernel's (`tma_persistent.programs`). With whole rounds the grid is G
    (their stride); without, one program per slice."""
    g, rest, slices = stream_k_cut(tiles, iters, sms)
    if slices < 2:
        return Schedule(programs(tiles, sms), 0, 1)
    return Schedule(g if tiles >= g else rest * slices, rest, slices)


def slice_k_range(j: int, iters: int, slices: int) -> tuple[int, int]:
    """The k-iterations [first, end) of slice j of a stream-K tile (the kernel's formula): lengths differ by at
    most one, and slice j's range is the same for every tile."""
    return j * iters // slices, (j + 1) * iters // slices


def program_work(pid: int, s: Schedule, tiles: int, iters: int) -> list[tuple[int, int, int]]:
    """What program pid computes, in order, as (tile, first k-iteration, end): its slice of a stream-K tile, if it
    has one, then its data-parallel tiles whole (the kernel's walk)."""
    work = []
    if pid < s.sk_tiles * s.slices:
        work.append((pid // s.slices, *slice_k_range(pid % s.slices, iters, s.slices)))
    return work + [(t, 0, iters) for t in range(s.sk_tiles + pid, tiles, s.programs)]


def num_sms(device: torch.device) -> int:
    """Programs of the grid at most: one per SM (INTERPRETER_SMS under the interpreter)."""
    return INTERPRETER_SMS if interpreter_active() else _num_sms(device.index or 0)


def launches(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, acc_fp16: bool, config: Config) -> list[Spec]:
    """C = A @ B in one persistent launch (`schedule`), with the stream's workspace (stream-K tiles x slices fp32
    blocks) and tile counters (`splitk.fused_buffers`); the caller has validated and checked that A, B and a
    row-major C are TMA-describable (`meets_alignment("tma", ...)`)."""
    m, k = a.shape
    n = b.shape[1]
    if _major(c) != "N":
        raise HgemmValueError("hgemm(kernel='triton_streamk'): the output must be row-major for the TMA store")
    tiles = cdiv(m, config.block_m) * cdiv(n, config.block_n)
    grid, sk_tiles, slices = schedule(tiles, cdiv(k, config.block_k), num_sms(a.device))
    p, counts, blocks = fused_buffers(a.device, max(sk_tiles, 1), slices, config)
    a_desc, b_desc, a_t, b_t = operand_descs(a, b, config)
    index_64 = needs_int64_indexing(c) or blocks > 2**31
    separate = SEPARATE_FIXUP and sk_tiles > 0
    args = (a_desc, b_desc, Desc(c, (config.block_m, config.block_n)), c, p, counts, m, n, k, sk_tiles, slices,
            c.stride(0), c.stride(1), a_t, b_t, acc_fp16, index_64, *config.meta.values(), separate)
    specs = [Spec(hgemm_streamk_kernel, (grid,), args, config.num_warps, config.num_stages)]
    if separate:
        rows = min(FIXUP_ROWS, config.block_m)  # (powers of two: rows divides block_m)
        fixup = (p, c, m, n, slices, c.stride(0), c.stride(1), index_64, config.block_m, config.block_n,
                 config.group_m, rows)
        specs.append(Spec(streamk_fixup_kernel, (sk_tiles * (config.block_m // rows),), fixup, FIXUP_WARPS, 1))
    return specs


def inspect_source(cfg: Config, dtype: str = "fp16") -> tuple:
    """What `triton.compile` needs to build the kernel as a 4096^3 NN problem on an H100 specializes it:
    (kernel, signature, constexprs, attrs) for inputs of `dtype` ("fp16", "bf16"), for `python -m compare inspect`."""
    bm, bn, bk = cfg.block_m, cfg.block_n, cfg.block_k
    sig = {"a_desc": f"tensordesc<{dtype}[{bm}, {bk}]>", "b_desc": f"tensordesc<{dtype}[{bk}, {bn}]>",
           "c_desc": f"tensordesc<{dtype}[{bm}, {bn}]>", "c_ptr": f"*{dtype}", "p_ptr": "*fp32", "count_ptr": "*i32",
           "M": "i32", "N": "i32", "K": "i32", "SK_TILES": "i32", "SLICES": "i32", "stride_cm": "i32",
           "stride_cn": "constexpr"}
    consts = dict(stride_cn=1, A_T=False, B_T=False, ACC_FP16=False, INDEX_64=False, BLOCK_M=bm, BLOCK_N=bn,
                  BLOCK_K=bk, GROUP_M=cfg.group_m, SEPARATE=SEPARATE_FIXUP)
    attrs = {(i,): [["tt.divisibility", 16]] for i in (3, 4, 5, 6, 7, 8, 11)}
    return hgemm_streamk_kernel, sig, consts, attrs
