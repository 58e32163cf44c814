"""Stream-K on the Gluon kernel (Hopper, triton 3.6's Gluon): triton_kernels/gluon_persistent.py's warp-specialized
persistent TMA + wgmma kernel in its stream-K mode (SPLIT_MODE STREAM_K), walking triton_kernels/streamk.py's
schedule with its fused fix-up (streamk.py's SEPARATE_FIXUP = False form). This file is the record's host side;
the kernel is gluon_persistent's.

What it adds over gluon_persistent: a persistent grid of G programs walking T output tiles takes cdiv(T, G) rounds,
and when T is not a multiple of G the last round leaves SMs idle; stream-K hands that round's k-iterations to
them. The schedule is the Triton level's, by the same names (docs/design/levels.md, "One stream-K schedule"):
`streamk.schedule(tiles, iters, sms)` (`hgemm_common.schedules.stream_k_cut`): G programs, T // G whole rounds
data-parallel, and the R = T % G tiles of the partial round each cut into S k-slices aligned in K; program
p < R x S computes slice j = p % S of tile p // S, k-iterations [j x I // S, (j + 1) x I // S), then the
data-parallel tiles R + p, R + p + G, ... (`streamk.program_work`). In the kernel, the producer warp and every
consumer warpgroup walk that list alike, item by item (gluon_persistent's `stream_k_items`, `stream_k_item`): the
producer loads each item's k-blocks into the ring, the consumers multiply them, and then store a whole tile by TMA
as gluon_persistent does, or fix up a slice.

The fix-up is splitk.py's `sum_parts` (gluon_persistent's `sum_parts`), per consumer warpgroup: each warpgroup
writes its 64 rows of the slice as fp32 into block (tile, j) of the stream's workspace, counts them in on its own
counter (an acq_rel atomic), and the last to arrive sums the S blocks' rows in slot order, stores them by TMA and
sets the counter back to zero. A tile's two consumer warpgroups are separate partitions with no barrier between
them, so each 64-row slab has its counter: cut tiles x consumers counters. The order of the sum is fixed, so the
same inputs give the same bits on every run; no atomic touches the data.

Configurations: gluon_persistent's tiles, each shape with its deepest ring, none split (the schedule cuts K). One
compiled kernel per configuration serves every shape: where the schedule cuts nothing (SK_TILES = 0) the walk is
gluon_persistent's data-parallel one on its grid (`tma_persistent.programs`).
"""
from __future__ import annotations

import torch

from hgemm_common.errors import HgemmValueError

from . import gluon_persistent as gp
from .common import Config, cdiv
from .launch import Kept, Spec
from .splitk import COUNTERS, WORKSPACES
from .streamk import schedule
from .tma_persistent import num_sms

NAME = "gluon_streamk"
UNAVAILABLE = gp.UNAVAILABLE  # the Gluon API of gluon_persistent's kernel

# The sweep times it; kernel="auto" does not pick it yet (`contract.SWEEP_ONLY`).
SWEEP_ONLY = ("no sweep has timed it yet, and its schedule at the Triton level (triton_streamk) is sweep-only on its "
              "own measurements (docs/design/triton.md, \"The GPU full whatever the tile count\")")


# ----------------------------------------------------------------------------------------------------------------
# Tuning constants
# ----------------------------------------------------------------------------------------------------------------
def configs() -> list[Config]:
    """gluon_persistent's tiles (not its swapped short ones), the first configuration of each shape (its deepest
    ring), unsplit: 128 x 256 (C stored in two rounds), 128 x 128, 128 x 64, and the 64-row tiles of decode-sized
    M. The widest first:
    `worth_scoring` counts its tiles, and kernel="gluon_streamk" takes the first that fits a problem."""
    tiles: dict = {}
    for c in gp.configs():
        if c.split_k == 1 and not gp.swapped(c):  # (swapped short tiles: gluon_persistent's only)
            tiles.setdefault((c.block_m, c.block_n), c)
    return list(tiles.values())


INTERPRETER_CONFIG = configs()[0]  # never interpreted (launches() refuses): the record's config-free default


def check_config(cfg: Config) -> Config:
    """gluon_persistent's ranges (tile, shared memory), and no split_k: the schedule cuts K itself."""
    gp.check_tile(cfg, NAME)
    if cfg.split_k != 1:
        raise HgemmValueError(f"hgemm(kernel='{NAME}') config {cfg.name}: split_k must be 1 (stream-K cuts K by its "
                              "schedule)")
    return cfg


def worth_timing(m: int, n: int, k: int, sms: int, tma_in_place: bool) -> bool:
    """Not timed by tune="exact" (nor picked by kernel="auto" untimed); the sweep times it (`worth_scoring`), but
    for SWEEP_ONLY the cost model would weigh it once a GPU's parameter file fits it."""
    return False


def worth_scoring(m: int, n: int, k: int, sms: int, tma_in_place: bool) -> bool:
    """Timed by the sweep where the widest tile's schedule cuts tiles into k-slices and A and B are read in place
    (streamk.py's rule); elsewhere the schedule is gluon_persistent's."""
    cfg = configs()[0]
    tiles = cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n)
    return tma_in_place and schedule(tiles, cdiv(k, cfg.block_k), sms).sk_tiles > 0


# ----------------------------------------------------------------------------------------------------------------
# Host launcher
# ----------------------------------------------------------------------------------------------------------------
def workspace(device: torch.device, sk_tiles: int, slices: int, config: Config) -> tuple[Kept, Kept]:
    """The stream's fp32 workspace (sk_tiles x slices blocks of BLOCK_M x BLOCK_N) and slab counters (sk_tiles x
    consumers, zero between calls), splitk.py's `WORKSPACES` and `COUNTERS`; one of each where nothing is cut (the
    kernel's pointers keep their types, so one compile serves every shape)."""
    blocks = max(sk_tiles, 1) * slices * config.block_m * config.block_n
    counts = max(sk_tiles, 1) * gp.consumers(config)
    return (Kept(WORKSPACES.get(device, blocks), WORKSPACES.get, blocks),
            Kept(COUNTERS.get(device, counts), COUNTERS.get, counts))


def launches(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, acc_fp16: bool, config: Config) -> list[Spec]:
    """C = A @ B in one persistent launch of gluon_persistent's kernel in its stream-K mode (`schedule`), with the
    stream's workspace and counters (`workspace`); the caller has validated and checked that A, B and a row-major C
    are TMA-describable (`meets_alignment("tma", ...)`)."""
    gp.refuse_here(NAME)
    check_config(config)
    m, k = a.shape
    tiles = cdiv(m, config.block_m) * cdiv(b.shape[1], config.block_n)
    grid, sk_tiles, slices = schedule(tiles, cdiv(k, config.block_k), num_sms(a.device))
    p, counts = workspace(a.device, sk_tiles, slices, config)
    return [gp.kernel_spec(a, b, c, acc_fp16, config, grid, p, counts, slices, 1, sk_tiles, gp.STREAM_K, NAME)]


def inspect_source(cfg: Config, dtype: str = "fp16", a_t: bool = False, b_t: bool = False) -> tuple:
    """What `triton.compile(GluonASTSource(...))` needs to build the kernel (gluon_persistent's `inspect_source` in
    its stream-K mode): (kernel, signature, constexprs, attrs) for inputs of `dtype` ("fp16", "bf16"), A (a_t) and
    B (b_t) column-major or not."""
    return gp.inspect_source(cfg, dtype, a_t, b_t, mode=gp.STREAM_K)


def compile_options(cfg: Config) -> dict:
    """gluon_persistent's: its register budget (`MAXNREG`) with the config's warps and stages."""
    return gp.compile_options(cfg)
