"""Persistent Triton HGEMM with TMA (tensor-descriptor) loads and stores, for Hopper and newer.

What it adds over the blocked kernel (triton_kernels/blocked.py):
- operand tiles arrive by the Tensor Memory Accelerator (`cp.async.bulk.tensor`, UTMALDG in SASS) on mbarriers,
  not by per-thread cp.async: no address arithmetic or masks in the main loop; the hardware zero-fills past the
  edges of the matrix, and clips the C store at them;
- a persistent grid: at most one program per SM walks tiles in grouped order (`tl.range(..., flatten=True)` lets
  the pipeline run on from one tile's K loop into the next's), so there is no tail wave of launches; as few programs
  as walk the tiles in the same number of rounds (`programs`), so that every round is full;
- layouts by descriptor: a column-major operand is described as its row-major transpose and transposed in
  shared memory (`.T`), which wgmma reads directly;
- wide tiles (`Config.n_parts`: 192 = 128 + 64 columns) as two accumulators side by side, their tiles walked
  unflattened (`data_parallel_tiles`);
- short tiles swapped (`swapped`): a tile of fewer rows than a warpgroup's 64 and at least 64 columns (for M =
  1-32, decode-like) is computed as its transpose, C^T = B^T A^T, so that B's columns fill wgmma's 64-row side
  and the problem's few rows are its narrow N side (16 or 32), as cuBLAS's small-M kernels do. The kernel is the
  same one: the launcher swaps the descriptors and the sizes, and the epilogue stores the tile transposed (`C_T`).
TMA needs 16-byte aligned base addresses and leading dimensions (multiples of 8 two-byte elements) with unit inner
stride; `hgemm_common.operands.tma_describable` says whether the inputs qualify; otherwise `hgemm(kernel="auto")`
runs another kernel or stages the operands through aligned copies (triton_kernels/dispatch.py).
"""
from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from hgemm_common.errors import HgemmValueError
from hgemm_common.operands import major as _major
from hgemm_common.validation import interpreter_active

from .common import Config, cdiv, dot_acc, grouped_pid, prune_for_problem, to_output
from .launch import Desc, Spec


def configs() -> list[Config]:
    """Hopper tiles: 128-row warpgroup tiles, 64-wide K (128-byte TMA rows, the widest swizzle).

    The C tile is staged in shared memory for the TMA store, so the pipeline gets what that leaves: 128x256x64 fits
    3 stages (3 x 48 KB + 64 KB of C), or 4 when C is stored in two halves through a 32 KB buffer (epilogue_split=2:
    faster on 8192x8192x1024 in the wide configuration sweeps, docs/design/triton.md);
    128x128x64 fits 4 to 6. 64x128 tiles 128 deep in K (4 x 48 KB) are for 1024^3-sized problems, where 128 tiles
    cover C and half as many k-steps (8 at K = 1024) as 64-deep tiles take, which ran faster there
    (measured: docs/design/triton.md). The 64x64 tiles 128 deep in K and 6
    stages (192 KB of loads in flight per SM), is for memory-bound skinny problems such as 128x4096x4096, where 128
    such tiles cover C and each streams its whole K (cuBLAS runs 64x64 tiles there, `scripts/library_kernels.py`);
    it replaced 64-deep tiles 12 stages deep (cuBLAS: 13), which were slower on cold operands (measured:
    docs/design/triton.md). The 16- and 32-row tiles at the end run swapped (`swapped`), each only where one row
    of tiles covers M (`prune`).
    """
    return [
        Config(128, 256, 64, group_m=8, num_warps=8, num_stages=3),
        Config(128, 256, 64, group_m=8, num_warps=8, num_stages=4, epilogue_split=2),
        Config(256, 128, 64, group_m=8, num_warps=8, num_stages=3),
        Config(256, 128, 64, group_m=8, num_warps=8, num_stages=4, epilogue_split=2),
        Config(128, 128, 64, group_m=8, num_warps=8, num_stages=4),
        Config(128, 128, 64, group_m=8, num_warps=8, num_stages=6),
        Config(128, 128, 64, group_m=8, num_warps=4, num_stages=4),
        Config(128, 128, 128, group_m=8, num_warps=8, num_stages=3),
        Config(128, 64, 64, group_m=8, num_warps=4, num_stages=4),
        Config(64, 128, 64, group_m=8, num_warps=4, num_stages=6, epilogue_split=2),
        Config(64, 128, 128, group_m=8, num_warps=4, num_stages=4),
        Config(64, 64, 128, group_m=8, num_warps=4, num_stages=6),
        # wide tiles (`Config.n_parts`): a power of two plus a smaller one, so that fewer columns of the last tile
        # are padding and fewer tiles are left over for a last round (N = 272 in one 272-wide tile, not three
        # 128s). kernel="auto"'s model offers them only once a sweep has measured them (`cost_model.unmeasured`).
        Config(128, 192, 64, group_m=8, num_warps=8, num_stages=4),
        Config(128, 272, 64, group_m=8, num_warps=8, num_stages=3),
        Config(256, 144, 64, group_m=8, num_warps=8, num_stages=3),
        # swapped tiles (`swapped`: fewer than 64 rows, at least 64 columns): 16 or 32 rows of C against 64-256
        # columns, deep pipelines of thin stages (a 16 x 128 x 64 stage is 18 KB), since these problems are a
        # stream of B; 64-column ones where wider tiles would leave SMs idle. kernel="auto"'s model offers them only
        # once a sweep has measured them (`cost_model.unmeasured`).
        Config(16, 64, 128, group_m=8, num_warps=4, num_stages=8),
        Config(16, 128, 64, group_m=8, num_warps=4, num_stages=10),
        Config(16, 128, 128, group_m=8, num_warps=4, num_stages=5),
        Config(16, 256, 64, group_m=8, num_warps=8, num_stages=6),
        Config(32, 64, 128, group_m=8, num_warps=4, num_stages=8),
        Config(32, 128, 64, group_m=8, num_warps=4, num_stages=8),
    ]


SWAP_BELOW = 64  # a warpgroup's wgmma rows: a tile with fewer rows and at least this many columns runs swapped


def swapped(cfg: Config) -> bool:
    """Whether the TMA kernel computes this tile as its transpose (C^T = B^T A^T): a tile of fewer rows than one
    warpgroup's wgmma (64) and at least as many columns, which then are wgmma's rows, its block_m rows of A wgmma's
    N. (A tile short both ways runs as it is: tl.dot takes mma.sync there.)"""
    return cfg.block_m < SWAP_BELOW <= cfg.block_n


def covers_m(cfg: Config, m: int) -> bool:
    """Whether a swapped tile takes M rows in one row of tiles, so that the kernel reads B once. A second row of
    short tiles reads all of B again: in the tiles' own order, most of that second read came from HBM on a B far
    larger than L2 (docs/design/triton.md, "Short tiles, swapped")."""
    return cfg.block_m >= m


def prune(cfgs: list[Config], m: int, n: int, k: int, sms: int) -> list[Config]:
    """`prune_for_problem` over the unswapped tiles, and over the swapped ones that cover M (`covers_m`) too
    (each list on its own, so that swapped 16-row tiles do not crowd the 64-row ones out of a small M's list)."""
    plain = prune_for_problem([c for c in cfgs if not swapped(c)], m, n, k)
    swap = [c for c in cfgs if swapped(c) and covers_m(c, m)]
    return plain + (prune_for_problem(swap, m, n, k) if swap else [])


def check_config(cfg: Config) -> Config:
    """A pinned configuration's ranges: block_n may be wide (`Config.n_parts`: 192 = 128 + 64), each part a TMA box
    of at most 256 columns; a swapped tile (`swapped`) is neither wide nor stored in slices."""
    cfg.check(wide_n=True)
    if cfg.n_parts[0] > 256:
        raise HgemmValueError(f"hgemm config {cfg.name}: block_n={cfg.block_n}: a TMA box holds at most 256 columns "
                              "(a wide tile's main part included)")
    if swapped(cfg) and (cfg.n_parts[1] or cfg.epilogue_split > 1):
        raise HgemmValueError(f"hgemm config {cfg.name}: a tile of fewer than {SWAP_BELOW} rows and at least "
                              f"{SWAP_BELOW} columns runs swapped (its columns are wgmma's rows): no wide part and "
                              "no epilogue split")
    return cfg


INTERPRETER_CONFIG = Config(32, 32, 32, group_m=4, num_warps=4, num_stages=2)
INTERPRETER_SMS = 3  # persistent programs under the interpreter: few, so each walks several tiles


def worth_timing(m: int, n: int, k: int, sms: int, tma_in_place: bool) -> bool:
    """Timed on every problem kernel="auto" meets (in place, or staged where staging is cheap)."""
    return True


@triton.jit
def load_tile(desc, row, col, T: tl.constexpr):
    """The operand tile at (row, col) by descriptor: A's (BLOCK_M, BLOCK_K) at (off_m, off_k), B's (BLOCK_K, width
    of its box) at (off_k, off_n). T: the operand is column-major, its descriptor describes the transpose, whose
    tile is loaded at (col, row) and transposed in shared memory (wgmma reads it directly)."""
    if T:
        x = desc.load([col, row]).T
    else:
        x = desc.load([row, col])
    return x


@triton.jit
def tma_dot_step(a_desc, b_desc, off_m, off_n, off_k, acc, A_T: tl.constexpr, B_T: tl.constexpr,
                 ACC_FP16: tl.constexpr):
    """One K tile of the TMA kernels' main loop: load A's and B's tiles at off_k by descriptor and accumulate their
    product."""
    return dot_acc(load_tile(a_desc, off_m, off_k, A_T), load_tile(b_desc, off_k, off_n, B_T), acc, ACC_FP16)


@triton.jit
def zeros_acc(BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ACC_FP16: tl.constexpr):
    """A (BLOCK_M, BLOCK_N) accumulator of zeros: fp16 when ACC_FP16, else fp32."""
    if ACC_FP16:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    return acc


@triton.jit
def tile_k_range(a_desc, b_desc, tile_id, ki_start, ki_end, num_pid_m, num_pid_n, A_T: tl.constexpr,
                 B_T: tl.constexpr, ACC_FP16: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """Output tile `tile_id`'s (grouped order) product over k-iterations [ki_start, ki_end): the whole K loop of a
    data-parallel tile, or a stream-K program's piece of one (triton_kernels/streamk.py)."""
    pid_m, pid_n = grouped_pid(tile_id, num_pid_m, num_pid_n, GROUP_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    acc = zeros_acc(BLOCK_M, BLOCK_N, ACC_FP16)
    for ki in range(ki_start, ki_end):
        acc = tma_dot_step(a_desc, b_desc, off_m, off_n, ki * BLOCK_K, acc, A_T, B_T, ACC_FP16)
    return acc


@triton.jit
def wide_tile_k_range(a_desc, b_desc, b2_desc, off_m, off_n, k_tiles, A_T: tl.constexpr, B_T: tl.constexpr,
                      ACC_FP16: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_N2: tl.constexpr,
                      BLOCK_K: tl.constexpr):
    """The K loop of a wide tile, BLOCK_N + BLOCK_N2 columns from off_n (both powers of two: tl.dot's shapes are):
    two accumulators side by side, (BLOCK_M, BLOCK_N) and (BLOCK_M, BLOCK_N2), fed by one A tile per k-step and B
    tiles from two descriptors whose boxes are the two widths."""
    acc = zeros_acc(BLOCK_M, BLOCK_N, ACC_FP16)
    acc2 = zeros_acc(BLOCK_M, BLOCK_N2, ACC_FP16)
    for ki in range(0, k_tiles):
        off_k = ki * BLOCK_K
        a = load_tile(a_desc, off_m, off_k, A_T)
        b = load_tile(b_desc, off_k, off_n, B_T)
        b2 = load_tile(b2_desc, off_k, off_n + BLOCK_N, B_T)
        acc = dot_acc(a, b, acc, ACC_FP16)
        acc2 = dot_acc(a, b2, acc2, ACC_FP16)
    return acc, acc2


@triton.jit
def data_parallel_tiles(a_desc, b_desc, c_desc, M, N, K, FIRST_TILE, A_T: tl.constexpr, B_T: tl.constexpr,
                        ACC_FP16: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                        GROUP_M: tl.constexpr, EPI_SPLIT: tl.constexpr, b2_desc=None, c2_desc=None,
                        BLOCK_N2: tl.constexpr = 0, C_T: tl.constexpr = False):
    """The persistent walk over tiles FIRST_TILE, FIRST_TILE + 1, ... (grouped order), each tile's whole K loop by
    one program: program p takes FIRST_TILE + p, then every num_programs-th tile. The TMA kernel walks every tile
    (FIRST_TILE 0); the stream-K kernel (triton_kernels/streamk.py) the whole waves after its stream-K tiles.
    BLOCK_N2 > 0: wide tiles of BLOCK_N + BLOCK_N2 columns (`wide_tile_k_range`), the last BLOCK_N2 read through
    b2_desc and stored through c2_desc. C_T: the problem is a swapped one (`swapped`: the descriptors and sizes are
    those of C^T = B^T A^T) and c_desc describes C itself, so each tile is stored transposed."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N + BLOCK_N2)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    # The epilogue recomputes its tile from its own counter: with flatten=True the K loop of the next tile is
    # already being issued when this one's result is stored.
    n_programs = tl.num_programs(0)  # the stride: the launcher sizes the grid (`programs` below)
    tile_id_c = FIRST_TILE + tl.program_id(0) - n_programs
    # Wide tiles are not flattened: ptxas then serializes their two accumulators' wgmmas (its warning C7515, "non
    # wgmma instructions defining accumulator registers ... between start and end of the pipeline stage").
    for tile_id in tl.range(FIRST_TILE + tl.program_id(0), num_tiles, n_programs, flatten=BLOCK_N2 == 0):
        # MAIN LOOP
        if BLOCK_N2 == 0:
            acc = tile_k_range(a_desc, b_desc, tile_id, 0, k_tiles, num_pid_m, num_pid_n, A_T, B_T, ACC_FP16,
                               BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M)
        else:
            pid_m, pid_n = grouped_pid(tile_id, num_pid_m, num_pid_n, GROUP_M)
            acc, acc2 = wide_tile_k_range(a_desc, b_desc, b2_desc, pid_m * BLOCK_M, pid_n * (BLOCK_N + BLOCK_N2),
                                          k_tiles, A_T, B_T, ACC_FP16, BLOCK_M, BLOCK_N, BLOCK_N2, BLOCK_K)
        # EPILOGUE
        tile_id_c += n_programs
        pid_cm, pid_cn = grouped_pid(tile_id_c, num_pid_m, num_pid_n, GROUP_M)
        off_cm = pid_cm * BLOCK_M
        off_cn = pid_cn * (BLOCK_N + BLOCK_N2)
        if C_T:  # a tile of C^T: C's (BLOCK_N, BLOCK_M) tile at the swapped offsets
            c_desc.store([off_cn, off_cm], tl.trans(to_output(acc, c_desc.dtype)))
        elif EPI_SPLIT == 2:  # columns [0, BLOCK_N / 2) and [BLOCK_N / 2, BLOCK_N) as two accumulators
            acc0, acc1 = tl.split(tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1)))
            c_desc.store([off_cm, off_cn], to_output(acc0, c_desc.dtype))
            c_desc.store([off_cm, off_cn + BLOCK_N // 2], to_output(acc1, c_desc.dtype))
        else:
            c_desc.store([off_cm, off_cn], to_output(acc, c_desc.dtype))
        if BLOCK_N2 > 0:  # (a tile past N's end: the TMA store writes nothing there)
            c2_desc.store([off_cm, off_cn + BLOCK_N], to_output(acc2, c2_desc.dtype))


@triton.jit
def hgemm_tma_kernel(
    # descriptors
    a_desc, b_desc, c_desc,
    # sizes
    M, N, K,
    # meta-parameters
    A_T: tl.constexpr,  # a_desc describes A^T (A is column-major)
    B_T: tl.constexpr,  # b_desc describes B^T (B is column-major)
    ACC_FP16: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    EPI_SPLIT: tl.constexpr = 1,  # 2: the C tile stored as two (BLOCK_M, BLOCK_N / 2) halves (c_desc's box)
    # wide tiles (BLOCK_N2 > 0): each tile BLOCK_N + BLOCK_N2 wide, its last BLOCK_N2 columns by these descriptors
    b2_desc=None, c2_desc=None, BLOCK_N2: tl.constexpr = 0,
    C_T: tl.constexpr = False,  # a swapped tile: the operands are B^T and A^T, c_desc describes C (`swapped`)
):
    """Every tile, data-parallel: `data_parallel_tiles` from tile 0."""
    data_parallel_tiles(a_desc, b_desc, c_desc, M, N, K, 0, A_T, B_T, ACC_FP16, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M,
                        EPI_SPLIT, b2_desc, c2_desc, BLOCK_N2, C_T)


@functools.lru_cache(maxsize=None)
def _num_sms(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def num_sms(device: torch.device) -> int:
    """Programs of a persistent grid at most: one per SM (a few under the interpreter, so each walks several
    tiles)."""
    return INTERPRETER_SMS if interpreter_active() else _num_sms(device.index or 0)


BALANCED = True  # False: one program per SM (min(tiles, SMs)), the grid the balanced one is measured against


def programs(tiles: int, slots: int) -> int:
    """Programs of the persistent grid over `tiles` with at most `slots` (SMs): the fewest that need as many rounds
    as `slots` programs would, cdiv(tiles, cdiv(tiles, slots)), so every round is full (4096^3 in 128 x 256 tiles:
    512 tiles in 4 rounds of 128 rather than 3.9 of 132). The Hopper ladder's launchers size their grids the same
    way (hopper::persistent_blocks); the measured gains of both are in docs/design/hopper.md and
    docs/design/triton.md."""
    if tiles <= slots:
        return tiles
    if not BALANCED:
        return slots
    return cdiv(tiles, cdiv(tiles, slots))


def operand_descs(a: torch.Tensor, b: torch.Tensor, config: Config) -> tuple[Desc, Desc, bool, bool]:
    """TMA descriptors of A and B over their row-major views (a column-major operand is described as its
    transpose, and the kernel transposes the tile in shared memory), with the config's boxes."""
    bm, bn, bk = config.block_m, config.n_parts[0], config.block_k  # (a wide tile's main part: `launches`)
    a_t, b_t = _major(a) == "T", _major(b) == "T"
    a_desc = Desc(a.t(), (bk, bm), a) if a_t else Desc(a, (bm, bk))
    b_desc = Desc(b.t(), (bn, bk), b) if b_t else Desc(b, (bk, bn))
    return a_desc, b_desc, a_t, b_t


def launches(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, acc_fp16: bool, config: Config) -> list[Spec]:
    """C = A @ B through TMA: one persistent launch; the caller has validated and checked that A, B and a
    row-major C are TMA-describable (`meets_alignment("tma", ...)`)."""
    m, k = a.shape
    n = b.shape[1]
    if _major(c) != "N":
        raise HgemmValueError("hgemm(kernel='triton_tma'): the output must be row-major for the TMA store")
    if swapped(config):
        return swapped_launches(a, b, c, acc_fp16, config)
    a_desc, b_desc, a_t, b_t = operand_descs(a, b, config)
    grid = (programs(cdiv(m, config.block_m) * cdiv(n, config.block_n), num_sms(a.device)),)
    bm, bk = config.block_m, config.block_k
    main, tail = config.n_parts
    wide = (None, None, 0)  # a wide tile's last `tail` columns: B's and C's descriptors with boxes that wide
    # (passed even where unused: `launch.Direct` passes exactly the arguments given, defaults included)
    if tail:
        b2_desc = Desc(b.t(), (tail, bk), b) if b_t else Desc(b, (bk, tail))
        wide = (b2_desc, Desc(c, (bm, tail)), tail)
    args = (a_desc, b_desc, Desc(c, (bm, main // config.epilogue_split)), m, n, k, a_t, b_t, acc_fp16, bm, main, bk,
            config.group_m, config.epilogue_split, *wide, False)
    return [Spec(hgemm_tma_kernel, grid, args, config.num_warps, config.num_stages)]


def swapped_launches(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, acc_fp16: bool, config: Config) -> list[Spec]:
    """C = A @ B as C^T = B^T A^T on a swapped tile (`swapped`): the kernel's A is B^T (N x K), its B is A^T
    (K x M), its tile block_n x block_m, and it stores each tile transposed into C through a (block_m, block_n)
    box (C_T)."""
    m, k = a.shape
    n = b.shape[1]
    check_config(config)  # (a table's or plan cache's config skipped it: no wide part, no epilogue split here)
    kernel_cfg = Config(config.block_n, config.block_m, config.block_k, config.group_m, config.num_warps,
                        config.num_stages)
    a_desc, b_desc, a_t, b_t = operand_descs(b.t(), a.t(), kernel_cfg)
    # each descriptor names the operand it views (the direct launcher finds A, B and C by identity)
    a_desc, b_desc = a_desc._replace(of=b), b_desc._replace(of=a)
    grid = (programs(cdiv(n, config.block_n) * cdiv(m, config.block_m), num_sms(a.device)),)
    args = (a_desc, b_desc, Desc(c, (config.block_m, config.block_n)), n, m, k, a_t, b_t, acc_fp16,
            config.block_n, config.block_m, config.block_k, config.group_m, 1, None, None, 0, True)
    return [Spec(hgemm_tma_kernel, grid, args, config.num_warps, config.num_stages)]


def inspect_source(cfg: Config, dtype: str = "fp16") -> tuple:
    """What `triton.compile` needs to build the kernel as a 4096^3 NN problem on an H100 specializes it:
    (kernel, signature, constexprs, attrs) for inputs of `dtype` ("fp16", "bf16"), for `python -m compare inspect`."""
    bm, bk = cfg.block_m, cfg.block_k
    bn, tail = cfg.n_parts
    swap = swapped(cfg)
    if swap:  # the kernel's A is B^T, described by B (row-major, K x N): A_T; its B is A^T, described by A: B_T
        sig = {"a_desc": f"tensordesc<{dtype}[{bk}, {bn}]>", "b_desc": f"tensordesc<{dtype}[{bm}, {bk}]>",
               "c_desc": f"tensordesc<{dtype}[{bm}, {bn}]>", "M": "i32", "N": "i32", "K": "i32"}
        bm, bn = bn, bm
    else:
        sig = {"a_desc": f"tensordesc<{dtype}[{bm}, {bk}]>", "b_desc": f"tensordesc<{dtype}[{bk}, {bn}]>",
               "c_desc": f"tensordesc<{dtype}[{bm}, {bn // cfg.epilogue_split}]>", "M": "i32", "N": "i32", "K": "i32"}
    consts = dict(A_T=swap, B_T=swap, ACC_FP16=False, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                  GROUP_M=cfg.group_m, EPI_SPLIT=cfg.epilogue_split, BLOCK_N2=tail, C_T=swap)
    if tail:
        sig.update(b2_desc=f"tensordesc<{dtype}[{bk}, {tail}]>", c2_desc=f"tensordesc<{dtype}[{bm}, {tail}]>")
    else:
        consts.update(b2_desc=None, c2_desc=None)
    attrs = {(i,): [["tt.divisibility", 16]] for i in (3, 4, 5)}
    return hgemm_tma_kernel, sig, consts, attrs
