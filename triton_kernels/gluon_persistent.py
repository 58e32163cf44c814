"""Persistent, warp-specialized Hopper HGEMM written in Gluon (`triton.experimental.gluon`): the middle level between
the Triton kernels, where the compiler decides layouts, pipelining and warp roles, and the hand-written
ptx_kernels/csrc/sm90/wgmma_persistent.cu, where we decide everything.

Here the kernel says, in Python, what tl.dot leaves to the compiler:
- shared memory: a NUM_STAGES-deep ring of A and B tiles in NVMMA-swizzled layouts (the ones wgmma reads), filled
  by TMA (`tma.async_copy_global_to_shared`, UTMALDG in SASS) and guarded by two mbarriers per stage: `ready`
  (the copies' bytes have landed: `mbarrier.expect` + the TMA transaction count) and `empty` (every consumer is
  done reading it);
- warp roles (`gl.warp_specialize`): a producer warp that only issues TMA loads, and one consumer warpgroup per 64
  rows of the tile (two on 128-row tiles, one on the 64-row tiles of decode-sized M), each issuing asynchronous
  `warpgroup_mma` (m64nBNk16) on its slab (one group in flight, `warpgroup_mma_wait(1)`), releasing a stage as
  soon as the wgmma that read it has retired; registers move from the producer's warpgroup to the consumers
  (`setmaxnreg`, USETMAXREG in SASS): the design of wgmma_persistent.cu;
- a persistent tile loop: each program walks tiles pid, pid + programs, ... in grouped order (GROUP_M tile-rows
  down one tile-column: programs running together share B tiles in L2; common.py's `grouped_pid`, a @triton.jit
  function, which Gluon code may call), the producer running ahead across tile
  boundaries, so the next tile's loads overlap this tile's epilogue;
- the epilogue: each consumer rounds its 64 x BLOCK_N slab to C's dtype, EPI_N columns at a time, into its own
  staging buffer and stores it by TMA (`tma.async_copy_shared_to_global`); only the staging buffer's next reuse
  waits for the store (`tma.store_wait`), so the last store drains while the next tile's main loop runs;
- split-K for outputs too small to occupy the SMs even in the narrowest tiles (a config's `split_k`): the loop's
  units are (tile, K slice) pairs, each consumer stores its fp32 partial into a (split, M, N) workspace and counts
  each element in (an acq_rel atomic per element on the stream's counters: no barrier, no thread waits on
  another); the unit that arrives last at an element sums its slices in slice order and writes C (the same bits
  on every run, whichever unit is last) (`FUSED`); or (the default until the fused form has run on a GPU) the
  partials only, then triton_kernels/splitk.py's reduction kernel in a second launch;
- stream-K (SPLIT_MODE STREAM_K, the kernel of kernel="gluon_streamk": triton_kernels/gluon_streamk.py): the
  loop's units are the program's stream-K list, triton_kernels/streamk.py's schedule (`stream_k_items`,
  `stream_k_item`: a k-slice of one of the partial round's tiles, then whole tiles), walked alike by the producer
  and the consumers; whole tiles are stored as above, and a slice's slab ends in `sum_parts`, splitk.py's fix-up
  per consumer warpgroup (fp32 rows in the stream's workspace, the slab's last arrival sums the slices in slot
  order and stores them by TMA).
Which configuration: `choose_config`, wgmma_persistent's rule (the tile whose rounds of the persistent grid are
fullest, weighted by its speed; 64-row tiles for M <= 64; split-K only where even the best tile leaves more than
half of the SMs idle), where neither a plan table nor the GPU's cost model names one (`dispatch.table_plan`).
Edges: TMA reads zeros outside A and B (M, N and the K tail) and drops what falls outside C, so any M, N, K runs
with no masks. Layouts: a column-major operand is described by its row-major transpose (the descriptor of A^T or
B^T) and its tile transposed in shared memory by a view (`permute`), which wgmma reads directly (tnspA / tnspB).

Launch: the project's. A Gluon kernel's TMA operands are `triton.experimental.gluon.nvidia.hopper.
TensorDescriptor`s, which carry their shared-memory layout; `GluonDesc` builds them where launch.py's `Desc` builds
Triton's. The first launch of a plan needs `maxnreg` (a warp-specialized kernel's register budget: `MAXNREG`),
which `launch.jit_launch` does not pass, so `launches()` returns `Spec`s whose `fn` is `GluonLaunch`: `fn[grid]
(...)` compiles and launches the kernel with it through `kernel[grid]` and returns the CompiledKernel. From then on
the dispatcher launches it directly, as it does the Triton kernels (launch.py `Direct`: the budget is compiled in,
the CUtensorMaps are encoded from the compiled kernel's descriptor metadata and cached; tests/test_gluon.py proves
on the CPU that both paths hand Triton's launcher the same arguments). Operands TMA cannot describe are copied to
aligned buffers first (the record's misaligned="copy": triton_kernels/dispatch.py stages them).

Written against triton 3.6's Gluon API (`GLUON_TRITON_VERSIONS`): Gluon is experimental and its names and
signatures change between releases (`warp_specialize`'s arguments did between 3.5 and 3.6), so on other versions
the record is not offered (`UNAVAILABLE` says why). Triton's interpreter cannot run Gluon: correctness is proven on
the GPU only (tests/test_gluon.py).
"""
from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import torch
import triton
import triton.language as tl

from hgemm_common.errors import HgemmError, HgemmValueError
from hgemm_common.operands import major as _major
from hgemm_common.validation import interpreter_active, needs_int64_indexing

from .common import Config, cdiv, grouped_pid
from .launch import Desc, Kept, Spec
from .splitk import COUNTERS, REDUCE_BLOCK, WORKSPACES, splitk_reduce_kernel
from .tma_persistent import num_sms, operand_descs, programs, swapped
from .tma_persistent import prune as tma_prune

GLUON_TRITON_VERSIONS = ("3.6.",)  # the Gluon API this module is written for


def _unavailable() -> str | None:
    """Why the Gluon kernel is not offered with the installed Triton (None: it is)."""
    if not triton.__version__.startswith(GLUON_TRITON_VERSIONS):
        return (f"gluon_persistent is written for triton {'/'.join(v + 'x' for v in GLUON_TRITON_VERSIONS)}'s "
                f"experimental Gluon API; triton {triton.__version__} is installed")
    return None


UNAVAILABLE = _unavailable()

if UNAVAILABLE is None:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,
                                                                  warpgroup_mma, warpgroup_mma_wait)
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
else:  # the module still imports (the record is left out of VARIANTS); nothing below is compiled
    gluon = None

# ----------------------------------------------------------------------------------------------------------------
# Tuning constants
# ----------------------------------------------------------------------------------------------------------------
PRODUCER_WARPS = 1  # one warp issues every TMA load; the compiler pads its partition to a warpgroup
# Registers per thread after setmaxnreg, as in wgmma_persistent.cu: the producer gives its registers away (40), a
# consumer's worker partition takes 232 (128 fp32 accumulators of its 64 x 256 slab, addressing, the epilogue).
# 128-row tiles: the default partition (the other consumer) gets what is left of MAXNREG x 12 warps: (168 x 384
# - 40 x 128 - 232 x 128) / 128 = 232. MAXNREG is the launch's budget: 12 warps x 32 threads x 168 <= 65,536.
# 64-row tiles run 8 warps (one consumer, the producer's warpgroup) with the same MAXNREG: the consumer, the
# default partition, gets the most setmaxnreg allows (256). ptxas sizes the code by MAXNREG: at 136, a budget that
# would leave the consumer exactly 232, the 64 x 256 tile failed to compile ("Insufficient registers").
PRODUCER_REGS, CONSUMER_REGS, MAXNREG = 40, 232, 168
NUM_WARPS = 4  # the default partition: consumer warpgroup 0
# the same, as the kernel reads them (a @jit function sees module globals only as constexprs)
_PRODUCER_WARPS, _PRODUCER_REGS, _CONSUMER_REGS = (tl.constexpr(x) for x in (PRODUCER_WARPS, PRODUCER_REGS,
                                                                             CONSUMER_REGS))
SMEM_LIMIT = 227 * 1024  # an H100 block's opt-in shared memory (sharedMemPerBlockOptin: 232,448 bytes)
# The tile choice (`choose_config`), wgmma_persistent's rule (ptx_kernels/csrc/blocks/wgmma_tile.cuh, choose_plan):
# a tile's score is its speed at equal fill times the fill of its last round of the persistent grid times the share
# of its columns inside N. TILE_SPEED: 128 x BN relative to 128 x 256 on a problem both fill (the hand-written
# kernel's measured factors; narrow tiles reload A once per 64 columns; outputs that are not skinny take 128-row
# tiles only); skinny outputs (M or N <= 128) are bound by memory, where every tile streams at one speed.
TILE_SPEED = {256: 1.0, 128: 0.95, 64: 0.6}
# Skinny outputs: every tile streams at one speed but 32 columns, whose row-major B boxes are 64-byte rows (half a
# 128-byte line per row of B; 64 x 8192 x 8192 in 64 x 32 tiles ran slower than in 64 x 64 tiles at equal fill).
SKINNY_SPEED = {32: 0.9}
# Split-K (K cut into SPLITS slices computed by separate programs, fp32 partials summed in slice order): where
# every slice keeps at least MIN_SLICE_TILES k-blocks, the units (tiles x slices) fit one round, and the best
# unsplit tiling leaves more than half of the SMs idle (skinny outputs with FUSED: wherever it scores better; the
# two-pass form's second launch lost 16 x 4096 x 4096 in 64 x 64 tiles split in two to 64 x 32 whole); each split
# multiplies the score by SPLIT_COST (the partials' round trip).
SPLITS = (2, 4, 8, 16)
MIN_SLICE_TILES, SPLIT_COST = 4, 0.97
# Split-K sums the partials in the GEMM's own launch (True) or in a second, reduction kernel (False). False until
# the fused form has passed tests/test_gluon.py's GPU cases on an H100 (its code compiles and its launch matches
# kernel[grid]'s on the CPU; the two-pass form has run there).
FUSED = False
# the kernel's modes (its SPLIT_MODE): split-K's, and stream-K (triton_kernels/gluon_streamk.py)
NO_SPLIT, TWO_PASS, FUSED_SPLIT, STREAM_K = 0, 1, 2, 3
_STREAM_K = tl.constexpr(STREAM_K)
NO_SPLIT_, TWO_PASS_ = tl.constexpr(NO_SPLIT), tl.constexpr(TWO_PASS)  # (as the kernel reads them)


def configs() -> list[Config]:
    """Tiles of 128 rows (two consumer warpgroups of 64 rows) or 64 rows (one), 64-wide K (128-byte TMA rows, the
    widest swizzle), each with the deepest ring that fits 227 KB beside its C staging.

    Shared memory: each stage holds (BM + BN) x 64 x 2 bytes, and each consumer a 64 x EPI_N staging buffer for C
    (`epilogue_split` = BN / EPI_N rounds per tile). 128x256: 4 stages (192 KB) beside 2 x 16 KB of staging (C
    stored 128 columns a round, as wgmma_persistent.cu's Wide tile), or 3 stages (144 KB) beside the whole slab
    staged (2 x 32 KB, one store per tile); 128x128 in 6 or 4 stages, 128x64 in 8 (wgmma_persistent's Medium and
    Narrow); 64-row tiles for outputs of at most 64 rows (decode-sized M: a 128-row tile would fill half of every
    stage with TMA's zeros), 64 x 256 down to 64 x 32 with 4 to 16 stages (the narrower the tile, the more stages
    keep B's bytes in flight). Last, two split-K configurations (the rule makes any tile's; these are the ones
    the tests pin). `num_warps` is the default partition's (one consumer warpgroup); the kernel runs 12 warps
    (128-row tiles) or 8."""
    tiles = [
        Config(128, 256, 64, group_m=8, num_warps=NUM_WARPS, num_stages=4, epilogue_split=2),
        Config(128, 256, 64, group_m=8, num_warps=NUM_WARPS, num_stages=3),
        Config(128, 128, 64, group_m=8, num_warps=NUM_WARPS, num_stages=6),
        Config(128, 128, 64, group_m=8, num_warps=NUM_WARPS, num_stages=4),
        Config(128, 64, 64, group_m=8, num_warps=NUM_WARPS, num_stages=8),
        Config(64, 256, 64, group_m=8, num_warps=NUM_WARPS, num_stages=4),
        Config(64, 128, 64, group_m=8, num_warps=NUM_WARPS, num_stages=8),
        Config(64, 64, 64, group_m=8, num_warps=NUM_WARPS, num_stages=12),
        Config(64, 32, 64, group_m=8, num_warps=NUM_WARPS, num_stages=16),
    ]
    # swapped short tiles (`swapped`: 16 or 32 rows of C, 64 or 128 columns), run as C^T = B^T A^T: C's columns
    # are wgmma's 64-row side (one or two consumers), its few rows wgmma's N; deep rings of thin stages (16 x 128 x
    # 64: 18 KB), since these problems are a stream of B
    short = [
        Config(16, 128, 64, group_m=8, num_warps=NUM_WARPS, num_stages=12),
        Config(16, 64, 64, group_m=8, num_warps=NUM_WARPS, num_stages=16),
        Config(32, 128, 64, group_m=8, num_warps=NUM_WARPS, num_stages=10),
        Config(32, 64, 64, group_m=8, num_warps=NUM_WARPS, num_stages=16),
    ]
    return tiles + short + [replace(tiles[4], split_k=2), replace(tiles[7], split_k=2), replace(short[1], split_k=4)]


INTERPRETER_CONFIG = configs()[0]  # never interpreted (launches() refuses): the record's config-free default


def check_config(cfg: Config) -> Config:
    """A pinned or stored configuration's ranges: the generic ones, 64 or 128 rows (one or two consumer
    warpgroups), 64-wide K, 32 to 256 columns, or a swapped short tile (16 or 32 rows, 64 or 128 columns, stored
    whole), and shared memory within the device limit."""
    return check_tile(cfg, "gluon_persistent", swap=True)


def check_tile(cfg: Config, kernel: str, swap: bool = False) -> Config:
    """`check_config` for the kernel of record `kernel` (the name its messages give); `swap`: the record runs
    swapped short tiles (`swapped`)."""
    cfg.check()
    if swap and swapped(cfg):
        if cfg.block_m not in (16, 32) or cfg.block_k != 64 or cfg.block_n not in (64, 128) or cfg.epilogue_split > 1:
            raise HgemmValueError(f"hgemm(kernel='{kernel}') config {cfg.name}: a swapped short tile (C^T = B^T A^T) "
                                  "is 16 or 32 rows x 64 or 128 columns x 64 of K, stored whole")
    elif cfg.block_m not in (64, 128) or cfg.block_k != 64 or not 32 <= cfg.block_n <= 256:
        raise HgemmValueError(f"hgemm(kernel='{kernel}') config {cfg.name}: tiles are 64 or 128 rows x "
                              "32-256 columns x 64 of K")
    if smem_bytes(cfg) > SMEM_LIMIT - 1024:
        raise HgemmValueError(f"hgemm(kernel='{kernel}') config {cfg.name}: {smem_bytes(cfg)} bytes of "
                              f"shared memory (ring and C staging) do not fit the {SMEM_LIMIT}-byte limit with the "
                              "mbarriers")
    return cfg


def kernel_tile(cfg: Config) -> Config:
    """The tile the kernel computes: a swapped config's transpose (`swapped`: C's columns are its rows, wgmma's
    64-row side; C's rows its columns, wgmma's N), else the config."""
    return replace(cfg, block_m=cfg.block_n, block_n=cfg.block_m) if swapped(cfg) else cfg


def consumers(cfg: Config) -> int:
    """Consumer warpgroups of a config: one per 64 rows of the kernel's tile (`kernel_tile`)."""
    return kernel_tile(cfg).block_m // 64


def c_box(cfg: Config) -> tuple[int, int]:
    """The TMA box of one epilogue store: a consumer's 64 rows x EPI_N columns, or (swapped) C's block_m rows x
    the consumer's 64 columns."""
    if swapped(cfg):
        return cfg.block_m, 64
    return 64, cfg.block_n // cfg.epilogue_split


def smem_bytes(cfg: Config, partial: bool = False) -> int:
    """Shared memory a config's kernel allocates, bar the mbarriers: the operand ring and the C staging buffers;
    `partial`: the split-K kernel, which stores its partials from registers and has no staging buffers (a split
    config runs the plain kernel where K is too short to split)."""
    rows, cols = c_box(cfg)
    return cfg.smem_bytes + (0 if partial else consumers(cfg) * rows * cols * 2)


def split_slices(k: int, split: int) -> tuple[int, int]:
    """(k-blocks per slice, slices): `split` slices of whole 64-deep k-blocks, fewer where K is too short to give
    every slice one (no slice is empty)."""
    k_tiles = cdiv(k, 64)
    per = cdiv(k_tiles, max(split, 1))
    return per, max(cdiv(k_tiles, per), 1)


def choose_config(m: int, n: int, k: int, sms: int) -> Config:
    """The configuration kernel="gluon_persistent" runs where neither a plan table nor the GPU's cost model names one:
    among `configs()`' tiles (the first of each shape, the deepest ring) and their K splits, the best score (TILE_SPEED,
    SKINNY_SPEED, SPLIT_COST) over the SMs' rounds; 64-row tiles for M <= 64 and, on skinny outputs, beside the 128-row
    ones; K splits where K is long enough, their units within one round, and (bar skinny outputs with FUSED) only where
    no unsplit tile fills half a round."""
    skinny = m <= 128 or n <= 128
    tiles = {}
    for c in configs():
        if c.split_k == 1:
            tiles.setdefault((c.block_m, c.block_n), c)
    rows = (64,) if m <= 64 else (128, 64) if skinny else (128,)  # (no swapped tile: their speed is measured only)
    k_tiles = cdiv(k, 64)
    best, best_score, unsplit_fill = None, -1.0, 0.0
    for split in (1, *SPLITS):
        if split > 1 and (k_tiles < MIN_SLICE_TILES * split or
                          ((not skinny or not FUSED) and unsplit_fill >= 0.5)):
            continue
        for (bm, bn), cfg in tiles.items():
            if bm not in rows:
                continue
            units = cdiv(m, bm) * cdiv(n, bn) * split
            if split > 1 and units > sms:
                continue
            fill = units / (cdiv(units, sms) * sms)
            if split == 1:
                unsplit_fill = max(unsplit_fill, fill)
            speed = SKINNY_SPEED.get(bn, 1.0) if skinny else TILE_SPEED[bn]
            score = speed * fill * n / (cdiv(n, bn) * bn)
            score *= SPLIT_COST ** (split.bit_length() - 1)
            if score > best_score + 1e-9:
                best, best_score = replace(cfg, split_k=split), score
    return best


def swap_split(cfg: Config, m: int, n: int, k: int, sms: int) -> Config | None:
    """A swapped tile's K split for a problem its tiles leave SMs idle on: the largest of SPLITS whose units
    (tiles x slices) fit one round, every slice MIN_SLICE_TILES k-blocks deep; None where no split applies."""
    tiles, k_tiles = cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n), cdiv(k, 64)
    fits = [s for s in SPLITS if 2 * tiles <= sms and tiles * s <= sms and k_tiles >= MIN_SLICE_TILES * s]
    return replace(cfg, split_k=fits[-1]) if fits else None


def prune(cfgs: list[Config], m: int, n: int, k: int, sms: int) -> list[Config]:
    """The configurations the sweep times and the cost model weighs on a problem (`common.problem_configs`):
    tma_persistent.prune's (`prune_for_problem` over the unswapped tiles, and over the swapped ones that cover M),
    each swapped tile's K split where its tiles leave SMs idle (`swap_split`), and the rule's choice
    (`choose_config`): configs() lists few splits, the rule splits any tile up to 16 ways, and a model that never
    saw a configuration could not prefer it."""
    kept = tma_prune(cfgs, m, n, k, sms)
    extra = [swap_split(c, m, n, k, sms) for c in kept if swapped(c) and c.split_k == 1]
    extra.append(choose_config(m, n, k, sms))
    for c in extra:
        if c is not None and c not in kept:
            kept.append(c)
    return kept


def worth_timing(m: int, n: int, k: int, sms: int, tma_in_place: bool) -> bool:
    """Not timed by kernel="auto" yet: the plan tables decide where it runs; kernel="gluon_persistent" runs it on
    request."""
    return False


# kernel="auto"'s cost model scores it where the GPU's parameter file has fitted it (`dispatch.model_candidates`;
# `python -m compare sweep --gluon` times its configurations)
MODEL_CANDIDATE = True


# ----------------------------------------------------------------------------------------------------------------
# Kernel
# ----------------------------------------------------------------------------------------------------------------
@triton.jit
def stream_k_items(pid, programs, tiles, SK_TILES, SLICES):
    """How many items program pid walks under stream-K (SPLIT_MODE STREAM_K; triton_kernels/streamk.py's schedule,
    `streamk.program_work`): its k-slice of a cut tile, if it has one (pid < SK_TILES x SLICES), then its
    data-parallel tiles SK_TILES + pid, SK_TILES + pid + programs, ... below `tiles`. A @triton.jit function of
    integers, which Gluon code may call: the producer and the consumers walk the list through it and
    `stream_k_item`, and tests/test_gluon.py runs both under the interpreter against streamk.py's."""
    cut = (pid < SK_TILES * SLICES).to(tl.int32)
    return cut + tl.cdiv(tl.maximum(tiles - SK_TILES - pid, 0), programs)


@triton.jit
def stream_k_item(w, pid, programs, SK_TILES, SLICES, iters):
    """Item w of program pid's stream-K list, (tile, j, parts, k_lo, k_hi): slice j of the `parts` slices of a tile
    (grouped order), k-blocks [j x iters // parts, (j + 1) x iters // parts) (streamk.py's `slice_k_range`: the
    same K range for slice j of every cut tile). Item 0 of a program below SK_TILES x SLICES is slice pid % SLICES of
    cut tile pid // SLICES; every other item is a data-parallel tile, its only part (j = 0, parts = 1: all of K)."""
    cut = pid < SK_TILES * SLICES
    sliced = cut & (w == 0)
    tile = tl.where(sliced, pid // SLICES, SK_TILES + pid + (w - cut.to(tl.int32)) * programs)
    j = tl.where(sliced, pid % SLICES, 0)
    parts = tl.where(sliced, SLICES, 1)
    return tile, j, parts, j * iters // parts, (j + 1) * iters // parts


if gluon is not None:

    @gluon.jit
    def unit_work(unit, num_pid_m, num_pid_n, k_tiles, SPLIT, SLICE_TILES, GROUP_M: gl.constexpr):
        """One work unit of the persistent loop: output tile unit // SPLIT (grouped order) over slice unit % SPLIT of
        K, k-blocks [k_lo, k_hi). Without split-K (SPLIT = 1) a unit is a tile and its whole K."""
        pid_m, pid_n = grouped_pid(unit // SPLIT, num_pid_m, num_pid_n, GROUP_M)
        k_lo = (unit % SPLIT) * SLICE_TILES
        k_hi = gl.minimum(k_lo + SLICE_TILES, k_tiles)
        return pid_m, pid_n, k_lo, k_hi

    @gluon.jit
    def stream_k_unit(w, num_pid_m, num_pid_n, k_tiles, SK_TILES, SLICES, GROUP_M: gl.constexpr):
        """Item w of this program's stream-K list (`stream_k_item`) as `unit_work` gives a unit: (pid_m, pid_n,
        k_lo, k_hi), then the tile, its slice j and its parts (1: a whole tile)."""
        tile, j, parts, k_lo, k_hi = stream_k_item(w, gl.program_id(0), gl.num_programs(0), SK_TILES, SLICES,
                                                   k_tiles)
        pid_m, pid_n = grouped_pid(tile, num_pid_m, num_pid_n, GROUP_M)
        return pid_m, pid_n, k_lo, k_hi, tile, j, parts

    @gluon.jit
    def load_k_range(a_desc, b_desc, a_ring, b_ring, ready, empty, off_m, off_n, k_lo, k_hi, it,
                     A_T: gl.constexpr, B_T: gl.constexpr):
        """The producer's part of one unit: k-blocks [k_lo, k_hi) of A's and B's tiles at (off_m, off_n), each into
        the next stage once it is free; `it` counts the k-blocks issued before, across units (stage it % STAGES,
        its use number it // STAGES). Returns the count after them."""
        BLOCK_K: gl.constexpr = a_ring.shape[1] if A_T else a_ring.shape[2]
        STAGES: gl.constexpr = a_ring.shape[0]
        for ki in range(k_lo, k_hi):
            s = it % STAGES
            # a stage's first use waits on phase 1, which a fresh mbarrier counts as complete
            mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)
            bar = ready.index(s)
            mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            off_k = ki * BLOCK_K
            if A_T:
                tma.async_copy_global_to_shared(a_desc, [off_k, off_m], bar, a_ring.index(s))  # (BK, BM) of A^T
            else:
                tma.async_copy_global_to_shared(a_desc, [off_m, off_k], bar, a_ring.index(s))  # (BM, BK)
            if B_T:
                tma.async_copy_global_to_shared(b_desc, [off_n, off_k], bar, b_ring.index(s))  # (BN, BK) of B^T
            else:
                tma.async_copy_global_to_shared(b_desc, [off_k, off_n], bar, b_ring.index(s))  # (BK, BN)
            it += 1
        return it

    @gluon.jit
    def producer_partition(a_desc, b_desc, a_ring, b_ring, ready, empty, M, N, K, SPLIT, SLICE_TILES, SK_TILES,
                           A_T: gl.constexpr, B_T: gl.constexpr, GROUP_M: gl.constexpr, SPLIT_MODE: gl.constexpr):
        """One warp: for every k-block of every unit this program owns, wait until the stage is free, then TMA A's
        and B's tiles into it; the copies complete `ready[s]` with their byte count. The units: tiles, or (split-K)
        (tile, K slice) pairs, from pid in steps of the grid; or (stream-K) the program's list (`stream_k_item`)."""
        BLOCK_M: gl.constexpr = a_ring.shape[2] if A_T else a_ring.shape[1]
        BLOCK_N: gl.constexpr = b_ring.shape[1] if B_T else b_ring.shape[2]
        BLOCK_K: gl.constexpr = a_ring.shape[1] if A_T else a_ring.shape[2]
        num_pid_m = gl.cdiv(M, BLOCK_M)
        num_pid_n = gl.cdiv(N, BLOCK_N)
        k_tiles = gl.cdiv(K, BLOCK_K)
        it = 0  # k-blocks issued so far, across units
        if SPLIT_MODE == _STREAM_K:
            for w in range(stream_k_items(gl.program_id(0), gl.num_programs(0), num_pid_m * num_pid_n, SK_TILES,
                                          SPLIT)):
                pid_m, pid_n, k_lo, k_hi, _, _, _ = stream_k_unit(w, num_pid_m, num_pid_n, k_tiles, SK_TILES, SPLIT,
                                                                  GROUP_M)
                it = load_k_range(a_desc, b_desc, a_ring, b_ring, ready, empty, pid_m * BLOCK_M, pid_n * BLOCK_N,
                                  k_lo, k_hi, it, A_T, B_T)
        else:
            for unit in range(gl.program_id(0), num_pid_m * num_pid_n * SPLIT, gl.num_programs(0)):
                pid_m, pid_n, k_lo, k_hi = unit_work(unit, num_pid_m, num_pid_n, k_tiles, SPLIT, SLICE_TILES,
                                                     GROUP_M)
                it = load_k_range(a_desc, b_desc, a_ring, b_ring, ready, empty, pid_m * BLOCK_M, pid_n * BLOCK_N,
                                  k_lo, k_hi, it, A_T, B_T)

    @gluon.jit
    def mma_k_range(a_ring, b_ring, ready, empty, acc, k_lo, k_hi, it, SLAB: gl.constexpr, A_T: gl.constexpr,
                    B_T: gl.constexpr):
        """MAIN LOOP of one unit, for the consumer of rows [64 SLAB, 64 SLAB + 64): wgmma on the stage's slab of A
        and its whole B tile for k-blocks [k_lo, k_hi), one group in flight, the stage before released to the
        producer once its wgmma has retired; the last stage released after the final wait. `it`: the k-blocks
        consumed before (the producer's count). Returns (acc, it)."""
        BLOCK_M: gl.constexpr = a_ring.shape[2] if A_T else a_ring.shape[1]
        STAGES: gl.constexpr = a_ring.shape[0]
        for ki in range(k_lo, k_hi):
            s = it % STAGES
            mbarrier.wait(ready.index(s), (it // STAGES) & 1)
            if BLOCK_M == 64:  # one consumer: the whole A tile
                a = a_ring.index(s).permute((1, 0)) if A_T else a_ring.index(s)
            elif A_T:  # (BK, BM) tile of A^T: this slab's 64 columns, viewed as (64, BK)
                a = a_ring.index(s).slice(64 * SLAB, 64, dim=1).permute((1, 0))
            else:
                a = a_ring.index(s).slice(64 * SLAB, 64, dim=0)  # (64, BK)
            if B_T:
                b = b_ring.index(s).permute((1, 0))  # (BN, BK) tile of B^T viewed as (BK, BN)
            else:
                b = b_ring.index(s)
            acc = warpgroup_mma(a, b, acc, is_async=True)
            # the wgmma of the k-block before has retired: its stage goes back to the producer
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc, ))
            mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), pred=ki > k_lo)
            it += 1
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
        mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), pred=k_hi > k_lo)
        return acc, it

    @gluon.jit
    def store_round(c_desc, c_stage, x, off_m, off_n):
        """One epilogue round: x (64 x EPI_N, C's dtype) into the staging buffer once its last TMA store has read
        it, then stored by TMA at (off_m, off_n), left in flight."""
        tma.store_wait(pendings=0)
        c_stage.store(x)
        fence_async_shared()  # the generic-proxy writes are visible to the TMA engine (the async proxy)
        tma.async_copy_shared_to_global(c_desc, [off_m, off_n], c_stage)

    @gluon.jit
    def store_tile(c_desc, c_stage, acc, off_m, off_n, C_T: gl.constexpr = False):
        """EPILOGUE of a whole slab: rounded to C's dtype and stored by TMA, EPI_N columns a round (`store_round`);
        each round's store drains while the next is written or, after the last, while the next unit's main loop
        runs. C_T: the slab is a tile of C^T (a swapped tile: 64 of C's columns x BLOCK_N of its rows), stored
        transposed as C's (BLOCK_N, 64) box at the swapped offsets."""
        EPI_N: gl.constexpr = c_stage.shape[1]
        out = acc.to(c_desc.dtype)
        if C_T:
            store_round(c_desc, c_stage, out.permute((1, 0)), off_n, off_m)
        elif EPI_N == acc.shape[1]:
            store_round(c_desc, c_stage, out, off_m, off_n)
        else:  # two halves: (64, 2, BN/2) -> (64, BN/2, 2), split on the register dimension
            lo, hi = out.reshape([64, 2, EPI_N]).permute((0, 2, 1)).split()
            store_round(c_desc, c_stage, lo, off_m, off_n)
            store_round(c_desc, c_stage, hi, off_m, off_n + EPI_N)

    @gluon.jit
    def store_partial(c_ptr, p_ptr, count_ptr, acc, s, SPLIT, off_m, off_n, M, N, stride_cm,
                      FUSED_SUM: gl.constexpr):
        """Split-K: the slab's fp32 product over slice s into P[s] (a row-major (SPLIT, M, N) workspace), masked to
        M and N, from the accumulator's own layout (no staging: the partials are few and small). FUSED_SUM: then
        count each element in (count_ptr: an (M, N) int32 array, zero between calls); where this unit is the
        element's last, sum P[0], P[1], ... in slice order into C and zero the count. Each thread counts and sums
        only the elements it stored: the atomic's release orders a thread's partial before its count, its acquire
        another unit's partials before the sum, so no thread waits on another."""
        layout: gl.constexpr = acc.type.layout
        rows = off_m + gl.arange(0, acc.shape[0], layout=gl.SliceLayout(1, layout))
        cols = off_n + gl.arange(0, acc.shape[1], layout=gl.SliceLayout(0, layout))
        inside = gl.expand_dims(rows < M, 1) & gl.expand_dims(cols < N, 0)
        offs = gl.expand_dims(rows.to(gl.int64) * N, 1) + gl.expand_dims(cols, 0)
        slice_elems = M.to(gl.int64) * N
        gl.store(p_ptr + s * slice_elems + offs, acc.to(gl.float32), mask=inside)
        if FUSED_SUM:
            one = gl.full(acc.shape, 1, gl.int32, layout)
            arrived = gl.atomic_add(count_ptr + offs, one, mask=inside, sem="acq_rel", scope="gpu")
            last = inside & (arrived == SPLIT - 1)
            total = gl.zeros(acc.shape, gl.float32, layout)
            for t in range(SPLIT):  # read past L1 (.cg): the other SMs' writes
                total += gl.load(p_ptr + t * slice_elems + offs, mask=last, other=0.0, cache_modifier=".cg")
            c_offs = gl.expand_dims(rows.to(gl.int64) * stride_cm, 1) + gl.expand_dims(cols, 0)
            gl.store(c_ptr + c_offs, total.to(c_ptr.dtype.element_ty), mask=last)
            gl.store(count_ptr + offs, gl.zeros_like(arrived), mask=last)  # for the next call on the stream

    @gluon.jit
    def sum_parts(acc, tile, j, parts, slots, c_desc, c_stage, p_ptr, count_ptr, off_m, off_n, SLAB: gl.constexpr,
                  BLOCK_M: gl.constexpr):
        """Stream-K's fix-up of a cut tile, splitk.py's `sum_parts` for one consumer's slab, `acc` being its product
        over slice j of `parts`: write it as the fp32 rows [64 SLAB, 64 SLAB + 64) of block P[tile, j] (BLOCK_M x
        BLOCK_N, `slots` blocks per tile), count it in (an acq_rel atomic on the slab's counter, tile x consumers +
        SLAB: a tile's two consumers are separate partitions and share no barrier, so each slab is fixed up on its
        own); the slab's last arrival, whichever slice it has, sums its rows of P[tile, 0], P[tile, 1], ... in that
        order, stores them by TMA (`store_tile`) and sets the counter back to zero for the next call on the stream.
        The bits do not depend on the arrival order."""
        layout: gl.constexpr = acc.type.layout
        BLOCK_N: gl.constexpr = acc.shape[1]
        rows = gl.arange(0, 64, layout=gl.SliceLayout(1, layout))
        cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, layout))
        # PARTIAL: the slab's 64 x BLOCK_N rows of the block, contiguous, no mask
        slab = gl.expand_dims((rows + 64 * SLAB) * BLOCK_N, 1) + gl.expand_dims(cols, 0)
        first = p_ptr + tile * slots * (BLOCK_M * BLOCK_N)  # P[tile, 0]
        gl.store(first + j * (BLOCK_M * BLOCK_N) + slab, acc.to(gl.float32))
        # every thread's rows are written before one thread releases them at GPU scope with the count
        gl.thread_barrier()
        counter = count_ptr + tile * (BLOCK_M // 64) + SLAB
        arrived = gl.atomic_add(counter, 1, sem="acq_rel", scope="gpu")
        # EPILOGUE (last arrival of the slab): the fixed-order sum, read past L1 (.cg: the other SMs' writes)
        if arrived == parts - 1:
            total = gl.zeros(acc.shape, gl.float32, layout)
            for t in range(parts):
                total += gl.load(first + t * (BLOCK_M * BLOCK_N) + slab, cache_modifier=".cg")
            store_tile(c_desc, c_stage, total, off_m, off_n)
            gl.atomic_xchg(counter, 0, sem="relaxed", scope="gpu")

    @gluon.jit
    def consumer_partition(c_desc, c_ptr, p_ptr, count_ptr, a_ring, b_ring, ready, empty, c_stage, M, N, K, SPLIT,
                           SLICE_TILES, SK_TILES, stride_cm, SLAB: gl.constexpr, A_T: gl.constexpr,
                           B_T: gl.constexpr, ACC_FP16: gl.constexpr, GROUP_M: gl.constexpr,
                           SPLIT_MODE: gl.constexpr, C_T: gl.constexpr):
        """One warpgroup: rows [64 SLAB, 64 SLAB + 64) of every unit this program owns (the producer's units, in
        its order): the MAIN LOOP (`mma_k_range`), then the EPILOGUE: the slab in C's dtype through `c_stage` (64 x
        EPI_N) by TMA stores (`store_tile`), or (split-K) its fp32 partial into the workspace, summed into C by the
        last unit of each element (FUSED_SPLIT) or by the reduction kernel after this launch (TWO_PASS), or
        (stream-K) a cut tile's slice fixed up by `sum_parts`. C_T: a swapped tile's slab, stored transposed."""
        BLOCK_M: gl.constexpr = a_ring.shape[2] if A_T else a_ring.shape[1]
        BLOCK_N: gl.constexpr = b_ring.shape[1] if B_T else b_ring.shape[2]
        BLOCK_K: gl.constexpr = a_ring.shape[1] if A_T else a_ring.shape[2]
        ACC_DTYPE: gl.constexpr = gl.float16 if ACC_FP16 else gl.float32
        # the wgmma accumulator of one warpgroup: m64nBNk16, 4 warps stacked along M
        acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                              instr_shape=[16, BLOCK_N, 16])
        num_pid_m = gl.cdiv(M, BLOCK_M)
        num_pid_n = gl.cdiv(N, BLOCK_N)
        k_tiles = gl.cdiv(K, BLOCK_K)
        it = 0  # k-blocks consumed so far, across units (the producer's count)
        if SPLIT_MODE == _STREAM_K:
            for w in range(stream_k_items(gl.program_id(0), gl.num_programs(0), num_pid_m * num_pid_n, SK_TILES,
                                          SPLIT)):
                pid_m, pid_n, k_lo, k_hi, tile, j, parts = stream_k_unit(w, num_pid_m, num_pid_n, k_tiles, SK_TILES,
                                                                         SPLIT, GROUP_M)
                acc = gl.zeros((64, BLOCK_N), dtype=ACC_DTYPE, layout=acc_layout)
                acc, it = mma_k_range(a_ring, b_ring, ready, empty, acc, k_lo, k_hi, it, SLAB, A_T, B_T)
                off_m = pid_m * BLOCK_M + 64 * SLAB
                off_n = pid_n * BLOCK_N
                if parts > 1:
                    sum_parts(acc, tile, j, parts, parts, c_desc, c_stage, p_ptr, count_ptr, off_m, off_n, SLAB,
                              BLOCK_M)
                else:
                    store_tile(c_desc, c_stage, acc, off_m, off_n)
        else:
            for unit in range(gl.program_id(0), num_pid_m * num_pid_n * SPLIT, gl.num_programs(0)):
                pid_m, pid_n, k_lo, k_hi = unit_work(unit, num_pid_m, num_pid_n, k_tiles, SPLIT, SLICE_TILES,
                                                     GROUP_M)
                acc = gl.zeros((64, BLOCK_N), dtype=ACC_DTYPE, layout=acc_layout)
                acc, it = mma_k_range(a_ring, b_ring, ready, empty, acc, k_lo, k_hi, it, SLAB, A_T, B_T)
                off_m = pid_m * BLOCK_M + 64 * SLAB
                off_n = pid_n * BLOCK_N
                if SPLIT_MODE != 0:
                    store_partial(c_ptr, p_ptr, count_ptr, acc, unit % SPLIT, SPLIT, off_m, off_n, M, N, stride_cm,
                                  SPLIT_MODE == 2)
                else:
                    store_tile(c_desc, c_stage, acc, off_m, off_n, C_T)
        tma.store_wait(pendings=0)

    # Sizes are not specialized (Triton would compile a kernel per "== 1" and "% 16 == 0" of each): TMA handles the
    # edges and nothing on the per-k-block path computes with them, so one compile serves every shape.
    @gluon.jit(do_not_specialize=["M", "N", "K", "SPLIT", "SLICE_TILES", "SK_TILES", "stride_cm"])
    def hgemm_gluon_kernel(
        # descriptors (gluon TensorDescriptors: they carry the shared-memory layouts); split-K: C, the workspace
        # and the element counts (stream-K: the workspace and the slab counters; C where unused)
        a_desc, b_desc, c_desc, c_ptr, p_ptr, count_ptr,
        # sizes
        M, N, K,
        SPLIT, SLICE_TILES,  # K slices (1: none) and k-blocks per slice (`split_slices`); stream-K: SPLIT slices
        SK_TILES,  # stream-K: the cut tiles (the first, grouped order), each in SPLIT slices; 0 otherwise
        stride_cm,  # C's row stride (split-K's stores from registers)
        # meta-parameters
        A_T: gl.constexpr,  # a_desc describes A^T (A is column-major)
        B_T: gl.constexpr,  # b_desc describes B^T (B is column-major)
        ACC_FP16: gl.constexpr,
        BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, GROUP_M: gl.constexpr,
        NUM_STAGES: gl.constexpr,
        EPI_SPLIT: gl.constexpr,  # C stored in BLOCK_N / EPI_SPLIT column rounds (c_desc's box: 64 x that)
        # 0: C by TMA stores; split-K (c_desc unused): 1 partials only, 2 summed here; 3: stream-K (STREAM_K)
        SPLIT_MODE: gl.constexpr,
        # a swapped tile (`swapped`): the operands are B^T and A^T, M and N are N and M, c_desc describes C and its
        # box is (BLOCK_N, 64); the partials of split-K (TWO_PASS only) are C^T's
        C_T: gl.constexpr,
    ):
        gl.static_assert(BLOCK_M == 64 or BLOCK_M == 128, "one or two consumer warpgroups of 64 rows")
        gl.static_assert(not C_T or SPLIT_MODE == NO_SPLIT_ or SPLIT_MODE == TWO_PASS_,
                         "a swapped tile stores whole or as two-pass partials (the fused sums store C unswapped)")
        dtype: gl.constexpr = a_desc.dtype
        # shared memory: the operand ring (stage, tile), one C staging buffer per consumer, the ring's mbarriers
        a_ring = gl.allocate_shared_memory(dtype, [NUM_STAGES] + a_desc.block_type.shape, a_desc.layout)
        b_ring = gl.allocate_shared_memory(dtype, [NUM_STAGES] + b_desc.block_type.shape, b_desc.layout)
        c_stage0 = gl.allocate_shared_memory(dtype, c_desc.block_type.shape, c_desc.layout)  # (64, EPI_N)/C_T
        ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(NUM_STAGES):
            mbarrier.init(ready.index(i), count=1)  # the producer's expect; the bytes complete it
            mbarrier.init(empty.index(i), count=BLOCK_M // 64)  # one arrival per consumer warpgroup
        fence_async_shared()  # the inits are visible to TMA (the async proxy) before the first copy

        if BLOCK_M == 128:  # two consumers (the default partition and a worker) and the producer
            c_stage1 = gl.allocate_shared_memory(dtype, c_desc.block_type.shape, c_desc.layout)
            gl.warp_specialize([
                (consumer_partition, (c_desc, c_ptr, p_ptr, count_ptr, a_ring, b_ring, ready, empty, c_stage0, M,
                                      N, K, SPLIT, SLICE_TILES, SK_TILES, stride_cm, 0, A_T, B_T, ACC_FP16, GROUP_M,
                                      SPLIT_MODE, C_T)),
                (consumer_partition, (c_desc, c_ptr, p_ptr, count_ptr, a_ring, b_ring, ready, empty, c_stage1, M,
                                      N, K, SPLIT, SLICE_TILES, SK_TILES, stride_cm, 1, A_T, B_T, ACC_FP16, GROUP_M,
                                      SPLIT_MODE, C_T)),
                (producer_partition, (a_desc, b_desc, a_ring, b_ring, ready, empty, M, N, K, SPLIT, SLICE_TILES,
                                      SK_TILES, A_T, B_T, GROUP_M, SPLIT_MODE)),
            ], [4, _PRODUCER_WARPS], [_CONSUMER_REGS, _PRODUCER_REGS])
        else:  # 64 rows: one consumer (the default partition) and the producer
            gl.warp_specialize([
                (consumer_partition, (c_desc, c_ptr, p_ptr, count_ptr, a_ring, b_ring, ready, empty, c_stage0, M,
                                      N, K, SPLIT, SLICE_TILES, SK_TILES, stride_cm, 0, A_T, B_T, ACC_FP16, GROUP_M,
                                      SPLIT_MODE, C_T)),
                (producer_partition, (a_desc, b_desc, a_ring, b_ring, ready, empty, M, N, K, SPLIT, SLICE_TILES,
                                      SK_TILES, A_T, B_T, GROUP_M, SPLIT_MODE)),
            ], [_PRODUCER_WARPS], [_PRODUCER_REGS])


# ----------------------------------------------------------------------------------------------------------------
# Host launcher
# ----------------------------------------------------------------------------------------------------------------
_GL_DTYPES = {torch.float16: "float16", torch.bfloat16: "bfloat16"}


def nvmma_layout(block: tuple[int, int], dtype: torch.dtype):
    """The shared-memory layout of a TMA box of `block` elements: the widest swizzle its rows allow."""
    return gl.NVMMASharedLayout.get_default_for(list(block), getattr(gl, _GL_DTYPES[dtype]))


class GluonDesc(Desc):
    """launch.py's `Desc`, built as the Gluon descriptor, which carries its shared-memory layout. The direct launch
    (launch.py `Direct`) reads the compiled kernel's descriptor metadata as for a Triton kernel, so a plan's later
    calls encode their CUtensorMaps there, from the same layout."""
    __slots__ = ()

    def descriptor(self):
        t = self.tensor
        return TensorDescriptor(t, list(t.shape), list(t.stride()), list(self.block),
                                nvmma_layout(self.block, t.dtype))


class GluonLaunch(NamedTuple):
    """A `Spec.fn` for the Gluon kernel: `fn[grid](*args, num_warps=, num_stages=, **options)` launches it through
    `kernel[grid]` with the register budget of its partitions (`MAXNREG`, a compile option `launch.jit_launch` does
    not pass) and returns the CompiledKernel, as `kernel[grid]` does: the dispatcher then launches a plan's later
    calls directly (launch.py `Direct`: the budget is compiled into the kernel)."""
    kernel: object

    def __getitem__(self, grid):
        def launch(*args, num_warps, num_stages, **options):  # options: launch.py's compile options (FP fusion)
            args = [a.descriptor() if isinstance(a, GluonDesc) else a for a in args]
            return self.kernel[grid](*args, num_warps=num_warps, num_stages=num_stages, maxnreg=MAXNREG, **options)
        return launch


def refuse_here(kernel: str = "gluon_persistent") -> None:
    """Raise where this process cannot run a Gluon kernel (`kernel`: the record's name, for the message)."""
    if UNAVAILABLE is not None:
        raise HgemmError(f"hgemm(kernel='{kernel}'): {UNAVAILABLE}")
    if interpreter_active():
        raise HgemmError(f"hgemm(kernel='{kernel}'): Triton's interpreter cannot run Gluon kernels; run it "
                         "on a Hopper GPU without TRITON_INTERPRET")


def kernel_spec(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, acc_fp16: bool, config: Config, grid: int,
                p, counts, split: int, slice_tiles: int, sk_tiles: int, mode: int, kernel: str) -> Spec:
    """The launch of `hgemm_gluon_kernel` in `mode` on `grid` programs: A's and B's descriptors (either may be
    column-major), C's for the TMA stores (row-major C: checked here), the workspace `p` and `counts` (C where
    unused) and the schedule's sizes (`split` K slices of `slice_tiles` k-blocks; stream-K: `split` slices of each
    of the first `sk_tiles` tiles). A swapped config (`swapped`) runs C^T = B^T A^T: the kernel's operands are B^T
    and A^T, its tile `kernel_tile`'s. `kernel`: the record's name, for the message."""
    if _major(c) != "N":
        raise HgemmValueError(f"hgemm(kernel='{kernel}'): the output must be row-major for the TMA store")
    swap, tile = swapped(config), kernel_tile(config)
    a_desc, b_desc, a_t, b_t = operand_descs(b.t(), a.t(), tile) if swap else operand_descs(a, b, tile)
    if swap:  # each descriptor names the operand it views (the direct launcher finds A, B and C by identity)
        a_desc, b_desc = a_desc._replace(of=b), b_desc._replace(of=a)
    m, k = a.shape
    n = b.shape[1]
    args = (GluonDesc(*a_desc), GluonDesc(*b_desc), GluonDesc(c, c_box(config)), c, p, counts,
            *((n, m) if swap else (m, n)), k, split, slice_tiles, sk_tiles, c.stride(0), a_t, b_t, acc_fp16,
            *tile.meta.values(), tile.num_stages, tile.epilogue_split, mode, swap)
    return Spec(GluonLaunch(hgemm_gluon_kernel), (grid,), args, config.num_warps, config.num_stages)


def launches(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, acc_fp16: bool, config: Config,
             fused: bool | None = None) -> list[Spec]:
    """C = A @ B as one persistent launch; the caller has validated and checked that A, B and a row-major C are
    TMA-describable (`meets_alignment("tma", ...)`). Split-K (split_k > 1, K long enough): fused (default,
    `FUSED`), one launch with the stream's (split, M, N) fp32 workspace and (M, N) element counts (splitk.py's
    `WORKSPACES`, `COUNTERS`: no allocation per call; a pinned split-K config on a large output holds that much);
    two-pass, the partials into a new workspace and splitk.py's reduction kernel after them (a swapped tile's
    always: its partials are C^T's, which the reduction kernel writes into C transposed)."""
    refuse_here()
    check_config(config)
    m, k = a.shape
    n = b.shape[1]
    slice_tiles, split = split_slices(k, config.split_k)
    swap = swapped(config)
    fused = (FUSED if fused is None else fused) and not swap
    mode = NO_SPLIT if split == 1 else FUSED_SPLIT if fused else TWO_PASS
    p = counts = c
    if mode == FUSED_SPLIT:
        p = Kept(WORKSPACES.get(a.device, split * m * n), WORKSPACES.get, split * m * n)
        counts = Kept(COUNTERS.get(a.device, m * n), COUNTERS.get, m * n)
    elif mode == TWO_PASS:
        p = torch.empty((split, n, m) if swap else (split, m, n), dtype=torch.float32, device=a.device)
    units = cdiv(m, config.block_m) * cdiv(n, config.block_n) * split
    grid = programs(units, num_sms(a.device))
    specs = [kernel_spec(a, b, c, acc_fp16, config, grid, p, counts, split, slice_tiles, 0, mode,
                         "gluon_persistent")]
    if mode == TWO_PASS:  # (swapped: the partials' rows are C's columns)
        strides = (m, c.stride(1), c.stride(0)) if swap else (n, c.stride(0), c.stride(1))
        reduce = (p, c, strides[0], split, m * n, *strides[1:], needs_int64_indexing(c, p), REDUCE_BLOCK)
        specs.append(Spec(splitk_reduce_kernel, (cdiv(m * n, REDUCE_BLOCK),), reduce, 4, 1))
    return specs


def inspect_source(cfg: Config, dtype: str = "fp16", a_t: bool = False, b_t: bool = False,
                   fused: bool | None = None, mode: int | None = None) -> tuple:
    """What `triton.compile(GluonASTSource(...))` needs to build the kernel as every launch compiles it (sizes are
    not specialized): (kernel, signature, constexprs, attrs) for inputs of `dtype` ("fp16", "bf16"), A (a_t) and B
    (b_t) column-major or not, for `python -m compare inspect` and tests/test_gluon.py. Compile options:
    `compile_options(cfg)`. A split-K config compiles its split-K kernel, fused or not (default: `FUSED`);
    `mode`: another SPLIT_MODE (STREAM_K: triton_kernels/gluon_streamk.py's kernel). A swapped config compiles its
    kernel tile (`kernel_tile`) as a launch on that layout does: the kernel's A is B^T (column-major where B is
    row-major), its B is A^T; split-K two-pass."""
    swap = swapped(cfg)
    tile = kernel_tile(cfg)
    if swap:
        a_t, b_t = not b_t, not a_t
    bm, bn, bk = tile.block_m, tile.block_n, tile.block_k
    gdt = getattr(gl, _GL_DTYPES[{"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]])

    def desc(block):
        layout = gl.NVMMASharedLayout.get_default_for(list(block), gdt)
        return f"tensordesc<{dtype}[{block[0]}, {block[1]}],{layout!r}>"

    if mode is None:
        fuse = (FUSED if fused is None else fused) and not swap
        mode = NO_SPLIT if cfg.split_k == 1 else FUSED_SPLIT if fuse else TWO_PASS
    counted = mode in (FUSED_SPLIT, STREAM_K)  # the workspace's counts are int32
    sig = {"a_desc": desc((bk, bm) if a_t else (bm, bk)), "b_desc": desc((bn, bk) if b_t else (bk, bn)),
           "c_desc": desc(c_box(cfg)), "c_ptr": f"*{dtype}", "p_ptr": "*fp32" if mode else f"*{dtype}",
           "count_ptr": "*i32" if counted else f"*{dtype}", "M": "i32", "N": "i32", "K": "i32",
           "SPLIT": "i32", "SLICE_TILES": "i32", "SK_TILES": "i32", "stride_cm": "i32"}
    consts = dict(A_T=a_t, B_T=b_t, ACC_FP16=False, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=cfg.group_m,
                  NUM_STAGES=cfg.num_stages, EPI_SPLIT=cfg.epilogue_split, SPLIT_MODE=mode, C_T=swap)
    attrs = {(i,): [["tt.divisibility", 16]] for i in (3, 4, 5)}  # the pointers; sizes are never specialized
    return hgemm_gluon_kernel, sig, consts, attrs


def compile_options(cfg: Config) -> dict:
    """The options `triton.compile` takes for a config's kernel, as `GluonLaunch` launches it."""
    return dict(num_warps=cfg.num_warps, num_stages=cfg.num_stages, maxnreg=MAXNREG)
