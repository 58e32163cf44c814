"""Stream-K Triton HGEMM with TMA loads (Hopper and newer): the persistent TMA kernel of
triton_kernels/tma_persistent.py with the tiles that would leave SMs idle shared out by k-iteration.

What it adds over tma_persistent.py: a persistent grid of G programs walking T output tiles takes cdiv(T, G)
rounds, and when T is not a multiple of G the last round leaves SMs idle (200x8192x8192 in 128x256 tiles: 64 tiles
on 132 SMs, half the GPU idle for the whole call). Stream-K (Osama et al., "Stream-K: Work-centric Parallel
Decomposition for Dense Matrix-Matrix Multiplication on GPU", PPoPP 2023; the stream-K tile scheduler of CUTLASS's
sm90 kernels) gives every program an equal share of the k-iterations instead (one k-iteration: one BLOCK_K step of
one tile), so a share can start inside one tile and end inside another, and a tile cut between programs is fixed
up: each program writes its piece as an fp32 block to a workspace, and the program that arrives last sums the
pieces in a fixed order (splitk.py's `sum_parts`, the fused split-K epilogue), so the same inputs give the same bits
on every run.

The schedule (`schedule`, on the host), the data-parallel-waves-plus-stream-K-remainder hybrid:
- T % G == 0: every tile data-parallel (the TMA kernel's walk);
- T < 2G: every tile stream-K;
- else: the last partial round and one full round before it (T % G + G tiles) stream-K, the rest (whole rounds)
  data-parallel: a share of at least one tile per program keeps the fix-ups few, where sharing only the partial
  round would cut every one of its tiles.
Stream-K tiles are tiles [0, SK_TILES) in grouped order, and each program runs its share of them first; then it
walks the data-parallel tiles SK_TILES + pid, + G, ... (`tma_persistent.data_parallel_tiles`).

Program pid's share of the SK_TILES * I stream-K k-iterations (I = cdiv(K, BLOCK_K)) is [pid * P + min(pid, R),
the next program's start), P = total // G, R = total % G: the first R programs take one more. A tile's pieces
belong to the programs `owner` maps its first and last k-iteration to, and every program between; the piece of
program pid is number pid - owner(first k-iteration) of the tile's workspace blocks. A tile one program covers
whole is stored by that program directly.

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

from .common import Config, cdiv, grouped_pid
from .launch import Desc, Spec
from .splitk import fused_buffers, store_tile, sum_parts
from .tma_persistent import _num_sms, data_parallel_tiles, operand_descs, tile_k_range


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


INTERPRETER_CONFIG = Config(32, 32, 32, group_m=4, num_warps=4, num_stages=2)
# Programs under the interpreter: few, and not dividing the small tests' tile counts, so that their stream-K tiles
# are cut between two and three programs and some shares are uneven (R > 0).
INTERPRETER_SMS = 5


# The sweep times it; kernel="auto" does not pick it yet (`contract.SWEEP_ONLY`).
SWEEP_ONLY = ("its shares start at a different k-iteration on every SM, so the tiles of one row or column of C no "
              "longer load the same A and B blocks at the same time and share them in L2: on long K it streams "
              "several times the bytes of the data-parallel TMA kernel and runs slower than it "
              "(docs/design/triton.md, \"The GPU full whatever the tile count\")")


def worth_timing(m: int, n: int, k: int, sms: int, tma_in_place: bool) -> bool:
    """Not timed by tune="exact" (nor picked by kernel="auto" untimed); the sweep times it (`worth_scoring`), and
    the cost model would weigh it once a GPU's parameter file fits it, but for SWEEP_ONLY."""
    return False


def worth_scoring(m: int, n: int, k: int, sms: int, tma_in_place: bool) -> bool:
    """Scored by the cost model (and timed by the sweep) where the widest tile's grid leaves a partial round
    (T % G != 0) and A and B are read in place; where it does not, the schedule is the TMA kernel's."""
    cfg = configs()[0]
    tiles = cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n)
    return tma_in_place and tiles % min(sms, tiles * cdiv(k, cfg.block_k)) != 0


# ----------------------------------------------------------------------------------------------------------------
# Kernel
# ----------------------------------------------------------------------------------------------------------------
@triton.jit
def owner(it, P, R):
    """The program whose share holds stream-K k-iteration `it`: shares are P + 1 long for the first R programs,
    P after (P may be 0: then only R programs have work, one k-iteration each)."""
    long_end = R * (P + 1)
    return tl.where(it < long_end, it // (P + 1), R + (it - long_end) // tl.maximum(P, 1))


@triton.jit
def stream_k_share(a_desc, b_desc, c_ptr, p_ptr, count_ptr, M, N, K, SK_TILES, SLOTS, stride_cm, stride_cn,
                   A_T: tl.constexpr, B_T: tl.constexpr, ACC_FP16: tl.constexpr, INDEX_64: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """This program's share of the stream-K k-iterations, tile piece by tile piece: each piece's K loop, then the
    tile stored (the program covers it whole) or fixed up (`sum_parts`: piece j = pid - the tile's first owner)."""
    pid = tl.program_id(0)
    G = tl.num_programs(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    iters = tl.cdiv(K, BLOCK_K)
    total = SK_TILES * iters
    P = total // G
    R = total % G
    it = pid * P + tl.minimum(pid, R)
    end = it + P + (pid < R).to(tl.int32)
    while it < end:
        tile = it // iters
        k_first = it - tile * iters
        piece_end = tl.minimum(end, (tile + 1) * iters)
        # MAIN LOOP: this piece's k-iterations of the tile
        acc = tile_k_range(a_desc, b_desc, tile, k_first, k_first + piece_end - it, num_pid_m, num_pid_n, A_T, B_T,
                           ACC_FP16, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M)
        # EPILOGUE
        pid_m, pid_n = grouped_pid(tile, num_pid_m, num_pid_n, GROUP_M)
        first = owner(tile * iters, P, R)
        parts = owner(tile * iters + iters - 1, P, R) - first + 1
        if parts == 1:
            store_tile(acc, pid_m, pid_n, c_ptr, M, N, stride_cm, stride_cn, INDEX_64, BLOCK_M, BLOCK_N)
        else:
            sum_parts(acc, tile, pid - first, parts, SLOTS, pid_m, pid_n, c_ptr, p_ptr, count_ptr, M, N, stride_cm,
                      stride_cn, INDEX_64, BLOCK_M, BLOCK_N)
        it = piece_end


@triton.jit
def hgemm_streamk_kernel(
    # descriptors and pointers
    a_desc, b_desc, c_desc, c_ptr, p_ptr, count_ptr,  # c_desc and c_ptr: the same C (TMA and pointer stores)
    # sizes
    M, N, K, SK_TILES, SLOTS,  # SK_TILES: the stream-K tiles (the first, grouped order); SLOTS: blocks per tile
    # strides of C (elements)
    stride_cm, stride_cn,
    # meta-parameters
    A_T: tl.constexpr,  # a_desc describes A^T (A is column-major)
    B_T: tl.constexpr,  # b_desc describes B^T (B is column-major)
    ACC_FP16: tl.constexpr,
    INDEX_64: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    """Each program: its share of the stream-K tiles (`stream_k_share`), then its data-parallel tiles."""
    stream_k_share(a_desc, b_desc, c_ptr, p_ptr, count_ptr, M, N, K, SK_TILES, SLOTS, stride_cm, stride_cn, A_T, B_T,
                   ACC_FP16, INDEX_64, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M)
    data_parallel_tiles(a_desc, b_desc, c_desc, M, N, K, SK_TILES, A_T, B_T, ACC_FP16, BLOCK_M, BLOCK_N, BLOCK_K,
                        GROUP_M, 1)


# ----------------------------------------------------------------------------------------------------------------
# Host launcher
# ----------------------------------------------------------------------------------------------------------------
class Schedule(NamedTuple):
    """A stream-K launch: `programs` persistent programs, the first `sk_tiles` tiles (grouped order) shared out by
    k-iteration, and `slots`, the most programs any of them is cut between (workspace blocks per tile)."""
    programs: int
    sk_tiles: int
    slots: int


def share_start(pid: int, total: int, programs: int) -> int:
    """The first stream-K k-iteration of program pid's share (the kernel's formula; `share_start(programs)` is
    `total`)."""
    p, r = divmod(total, programs)
    return pid * p + min(pid, r)


def owner_of(it: int, total: int, programs: int) -> int:
    """The program whose share holds k-iteration `it` (the kernel's `owner`)."""
    p, r = divmod(total, programs)
    long_end = r * (p + 1)
    return it // (p + 1) if it < long_end else r + (it - long_end) // max(p, 1)


@functools.lru_cache(maxsize=1024)
def schedule(tiles: int, iters: int, sms: int) -> Schedule:
    """The hybrid schedule of `tiles` output tiles of `iters` k-iterations each on at most `sms` programs (module
    header): a program for every SM that has a k-iteration to do; none, all, or the last partial round and one full
    round of the tiles stream-K; and the exact count of pieces of its most divided tile."""
    g = max(1, min(sms, tiles * iters))
    rest = tiles % g
    sk = 0 if rest == 0 else tiles if tiles < 2 * g else rest + g
    total = sk * iters
    slots = max((owner_of(t * iters + iters - 1, total, g) - owner_of(t * iters, total, g) + 1
                 for t in range(sk)), default=1)
    return Schedule(g, sk, slots)


def num_sms(device: torch.device) -> int:
    """Programs of the grid at most: one per SM (INTERPRETER_SMS under the interpreter)."""
    return INTERPRETER_SMS if interpreter_active() else _num_sms(device.index or 0)


def launches(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, acc_fp16: bool, config: Config) -> list[Spec]:
    """C = A @ B in one persistent launch (`schedule`), with the stream's workspace (stream-K tiles x slots fp32
    blocks) and tile counters (`splitk.fused_buffers`); the caller has validated and checked that A, B and a
    row-major C are TMA-describable (`meets_alignment("tma", ...)`)."""
    m, k = a.shape
    n = b.shape[1]
    if _major(c) != "N":
        raise HgemmValueError("hgemm(kernel='triton_streamk'): the output must be row-major for the TMA store")
    tiles = cdiv(m, config.block_m) * cdiv(n, config.block_n)
    grid, sk_tiles, slots = schedule(tiles, cdiv(k, config.block_k), num_sms(a.device))
    p, counts, blocks = fused_buffers(a.device, max(sk_tiles, 1), slots, config)
    a_desc, b_desc, a_t, b_t = operand_descs(a, b, config)
    args = (a_desc, b_desc, Desc(c, (config.block_m, config.block_n)), c, p, counts, m, n, k, sk_tiles, slots,
            c.stride(0), c.stride(1), a_t, b_t, acc_fp16, needs_int64_indexing(c) or blocks > 2**31,
            *config.meta.values())
    return [Spec(hgemm_streamk_kernel, (grid,), args, config.num_warps, config.num_stages)]


def inspect_source(cfg: Config, dtype: str = "fp16") -> tuple:
    """What `triton.compile` needs to build the kernel as a 4096^3 NN problem on an H100 specializes it:
    (kernel, signature, constexprs, attrs) for inputs of `dtype` ("fp16", "bf16"), for `python -m compare inspect`."""
    bm, bn, bk = cfg.block_m, cfg.block_n, cfg.block_k
    sig = {"a_desc": f"tensordesc<{dtype}[{bm}, {bk}]>", "b_desc": f"tensordesc<{dtype}[{bk}, {bn}]>",
           "c_desc": f"tensordesc<{dtype}[{bm}, {bn}]>", "c_ptr": f"*{dtype}", "p_ptr": "*fp32", "count_ptr": "*i32",
           "M": "i32", "N": "i32", "K": "i32", "SK_TILES": "i32", "SLOTS": "i32", "stride_cm": "i32",
           "stride_cn": "constexpr"}
    consts = dict(stride_cn=1, A_T=False, B_T=False, ACC_FP16=False, INDEX_64=False, BLOCK_M=bm, BLOCK_N=bn,
                  BLOCK_K=bk, GROUP_M=cfg.group_m)
    attrs = {(i,): [["tt.divisibility", 16]] for i in (3, 4, 5, 6, 7, 8, 11)}
    return hgemm_streamk_kernel, sig, consts, attrs
