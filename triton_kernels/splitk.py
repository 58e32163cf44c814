"""Split-K Triton HGEMM for skinny and mid-sized M: C = A @ B with K cut into slices computed by separate programs.

What it adds over the blocked kernel (triton_kernels/blocked.py): when M (and N) leave fewer output tiles than the
GPU has SMs (16x4096x4096: 64 tiles of 16x64 on 132 SMs), the blocked and TMA kernels leave SMs idle and a
memory-bound problem reads B at a fraction of HBM bandwidth. Here program (tile, s) computes the tile over the
s-th K slice and writes it as an fp32 block of a workspace; an acq_rel atomic on the tile's counter tells the
program that arrives last, which sums the tile's blocks in slice order (s = 0, 1, ...) and writes C (fp16 or
bf16, as A and B) in the same launch. The atomic only elects the summing program; the sum's order is fixed, so
the same inputs give the same bits on every run (for a given configuration), the bits of the two-pass form
(partials, then a reduction kernel: `FUSED = False`, kept for comparison) too. One launch instead of two
won with two slices on 1-128 x 4096 x 4096 problems on the H100 and lost with four slices of 64x128 tiles on
128x4096x4096, its last program reading four blocks in a row (the configuration sweeps: docs/design/triton.md).
Small-M tiles (16 and 32 rows; tl.dot then lowers to mma.sync rather than wgmma, which needs 64) keep the padding
a 16-row problem computes small.

The slice length is a multiple of BLOCK_K, so only the last slice can end inside a K tile (masked, as in the
blocked kernel). Any strides, like the blocked kernel: the loads go through pointers.
"""
from __future__ import annotations

import threading

import torch
import triton
import triton.language as tl

from hgemm_common.validation import needs_int64_indexing

from .common import (Config, cdiv, div8_args, dot_k_loop, grouped_pid, operand_ptrs, out_offsets, to_output,
                     unscale_strides)
from .launch import Kept, Spec


# ----------------------------------------------------------------------------------------------------------------
# Tuning constants
# ----------------------------------------------------------------------------------------------------------------
SPLITS = (2, 4, 8)  # past 8 the workspace round trip (8 x M x N x 4 bytes, twice) costs more than idle SMs
REDUCE_BLOCK = 1024  # elements of C per program of the two-pass reduction: 4 KB of each fp32 partial, coalesced
FUSED = True  # one launch, the last slice of each tile sums the partials; False: partial kernel + reduce kernel


def configs() -> list[Config]:
    """Tiles from 16 rows (decode-like M) to 128 (M = 128-512), each with every split of SPLITS; the dispatcher
    times those that fit the problem (`prune_for_problem`). BLOCK_K 128-256 on the 16- and 32-row tiles: a short
    tile row streams too few bytes of B per stage at BLOCK_K 64 to cover the memory latency. The list is the
    winners of the wide configuration sweeps on the H100 (docs/design/triton.md): deep
    pipelines (6 stages of 64x64x64) for M = 128, 256-deep K tiles for M = 1."""
    tiles = [
        Config(16, 64, 128, group_m=1, num_warps=4, num_stages=4),
        Config(16, 64, 256, group_m=1, num_warps=4, num_stages=3),
        Config(16, 128, 128, group_m=1, num_warps=4, num_stages=4),
        Config(32, 64, 128, group_m=1, num_warps=4, num_stages=4),
        Config(64, 64, 64, group_m=8, num_warps=4, num_stages=4),
        Config(64, 64, 64, group_m=8, num_warps=4, num_stages=6),
        Config(64, 128, 64, group_m=8, num_warps=4, num_stages=4),
        Config(64, 128, 128, group_m=8, num_warps=4, num_stages=4),
        Config(128, 64, 128, group_m=8, num_warps=4, num_stages=4),
        Config(128, 128, 64, group_m=8, num_warps=8, num_stages=3),
    ]
    return with_splits(tiles)


def with_splits(tiles: list[Config], splits: tuple[int, ...] = SPLITS) -> list[Config]:
    """Each tile with every split of `splits` (default: this kernel's SPLITS)."""
    return [Config(t.block_m, t.block_n, t.block_k, t.group_m, t.num_warps, t.num_stages, s)
            for t in tiles for s in splits]


INTERPRETER_CONFIG = Config(16, 32, 32, group_m=2, num_warps=4, num_stages=2, split_k=3)
TILE_FOR_FILL = 128  # the output tile whose count, against the SM count, says whether SMs would sit idle


def worth_timing(m: int, n: int, k: int, sms: int, tma_in_place: bool) -> bool:
    """Timed where a grid of 128x128 output tiles leaves SMs idle (16x4096x4096: 32 tiles on 132 SMs) and K is
    long enough to give each slice at least two K tiles of the longest BLOCK_K."""
    tiles = cdiv(m, TILE_FOR_FILL) * cdiv(n, TILE_FOR_FILL)
    return tiles < sms and long_enough_to_split(k)


def long_enough_to_split(k: int) -> bool:
    """K gives each slice of the fewest splits at least two K tiles of the longest BLOCK_K."""
    return k >= 2 * min(SPLITS) * 128


SKINNY_M = 64  # at most this many rows: the 128-row tile count says nothing of how 16- to 64-row tiles fill the SMs


def worth_scoring(m: int, n: int, k: int, sms: int, tma_in_place: bool) -> bool:
    """Scored by the cost model (and timed by the sweep) where it is timed, and on every skinny output (M up to
    SKINNY_M) with K long enough to split: there 128 x 128 tiles can fill the SMs on a wide N while this kernel's
    16- to 64-row tiles stream B with less waste, and the model, not the tile count, weighs the two."""
    return worth_timing(m, n, k, sms, tma_in_place) or (m <= SKINNY_M and long_enough_to_split(k))


# ----------------------------------------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------------------------------------
@triton.jit
def slice_product(a_ptr, b_ptr, tile, s, M, N, K, K_SLICE, stride_am, stride_ak, stride_bk, stride_bn,
                  ACC_FP16: tl.constexpr, INDEX_64: tl.constexpr, EVEN_K: tl.constexpr, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, DIV8: tl.constexpr):
    """(pid_m, pid_n, acc): output tile `tile`'s coordinates (grouped order) and its product over the s-th K slice
    (K_SLICE elements from s * K_SLICE, the last slice shorter)."""
    pid_m, pid_n = grouped_pid(tile, tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    k0 = s * K_SLICE
    a_ptrs, b_ptrs = operand_ptrs(a_ptr, b_ptr, pid_m, pid_n, k0, M, N, stride_am, stride_ak, stride_bk, stride_bn,
                                  INDEX_64, BLOCK_M, BLOCK_N, BLOCK_K, DIV8)
    # MAIN LOOP: this slice of K
    acc = dot_k_loop(a_ptrs, b_ptrs, tl.minimum(K - k0, K_SLICE), BLOCK_K * stride_ak, BLOCK_K * stride_bk,
                     ACC_FP16, EVEN_K, BLOCK_M, BLOCK_N, BLOCK_K)
    return pid_m, pid_n, acc


@triton.jit
def store_tile(acc, pid_m, pid_n, c_ptr, M, N, stride_cm, stride_cn, INDEX_64: tl.constexpr, BLOCK_M: tl.constexpr,
               BLOCK_N: tl.constexpr):
    """Output tile (pid_m, pid_n) rounded to C's dtype and stored through pointers: masked at M and N, any strides."""
    offs_cm, offs_cn = out_offsets(pid_m * BLOCK_M, pid_n * BLOCK_N, INDEX_64, BLOCK_M, BLOCK_N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    tl.store(c_ptrs, to_output(acc, c_ptr.dtype.element_ty), mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@triton.jit
def write_part(acc, tile, j, slots, p_ptr, INDEX_64: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Piece j of a tile's product as the fp32 block P[tile, j] of the workspace (`slots` whole BLOCK_M x BLOCK_N
    blocks per tile, contiguous, no mask); returns the index of P[tile, 0]."""
    block = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    first = tile * slots  # P[tile, 0]
    if INDEX_64:
        first = first.to(tl.int64)
    tl.store(p_ptr + (first + j) * (BLOCK_M * BLOCK_N) + block, acc.to(tl.float32))
    return first


@triton.jit
def sum_parts(acc, tile, j, parts, slots, pid_m, pid_n, c_ptr, p_ptr, count_ptr, M, N, stride_cm, stride_cn,
              INDEX_64: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """The deterministic fix-up of a tile computed in `parts` pieces by as many programs, `acc` being piece j's
    product: write it as the fp32 block P[tile, j] (`slots` blocks per tile, slots >= parts), count it in (an
    acq_rel atomic on the tile's counter); the program that arrives last, whichever piece it has, sums P[tile, 0],
    P[tile, 1], ..., P[tile, parts - 1] in that order, writes C (`store_tile`) and sets the counter back to zero for
    the next call on the stream. The bits do not depend on the arrival order. Split-K's slices (`sum_slices`) and
    stream-K's tile pieces (triton_kernels/streamk.py) both end here."""
    first = write_part(acc, tile, j, slots, p_ptr, INDEX_64, BLOCK_M, BLOCK_N)
    block = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    # every thread's partial is written before one thread releases it at GPU scope with the count
    tl.debug_barrier()
    arrived = tl.atomic_add(count_ptr + tile, 1, sem="acq_rel", scope="gpu")

    # EPILOGUE (last program of the tile): the fixed-order sum, read past L1 (.cg: the other SMs' writes)
    if arrived == parts - 1:
        total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for t in range(parts):
            total += tl.load(p_ptr + (first + t) * (BLOCK_M * BLOCK_N) + block, cache_modifier=".cg")
        store_tile(total, pid_m, pid_n, c_ptr, M, N, stride_cm, stride_cn, INDEX_64, BLOCK_M, BLOCK_N)
        tl.atomic_xchg(count_ptr + tile, 0, sem="relaxed", scope="gpu")


@triton.jit
def sum_slices(acc, tile, s, pid_m, pid_n, c_ptr, p_ptr, count_ptr, M, N, SPLIT, stride_cm, stride_cn,
               INDEX_64: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """The fused split-K epilogue of program (tile, s), whose product over its K slice is `acc`: `sum_parts` with
    the tile's SPLIT slices as its pieces (P[tile, s], summed in slice order by the tile's last program)."""
    sum_parts(acc, tile, s, SPLIT, SPLIT, pid_m, pid_n, c_ptr, p_ptr, count_ptr, M, N, stride_cm, stride_cn, INDEX_64,
              BLOCK_M, BLOCK_N)


@triton.jit
def splitk_fused_kernel(
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
    DIV8: tl.constexpr = 0,  # multiples of 8 Triton cannot see: strides passed divided by 8, M, N (common.div8_args)
):
    """Program (tile, s) computes the tile's product over the s-th K slice (pointer loads), then `sum_slices`."""
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn = unscale_strides(
        stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, DIV8)
    tile = tl.program_id(0)
    s = tl.program_id(1)
    pid_m, pid_n, acc = slice_product(a_ptr, b_ptr, tile, s, M, N, K, K_SLICE, stride_am, stride_ak, stride_bk,
                                      stride_bn, ACC_FP16, INDEX_64, EVEN_K, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, DIV8)

    sum_slices(acc, tile, s, pid_m, pid_n, c_ptr, p_ptr, count_ptr, M, N, SPLIT, stride_cm, stride_cn, INDEX_64,
               BLOCK_M, BLOCK_N)


@triton.jit
def splitk_partial_kernel(
    # pointers
    a_ptr, b_ptr, p_ptr,
    # sizes
    M, N, K, K_SLICE,  # K_SLICE: K elements per slice, a multiple of BLOCK_K
    # strides (elements)
    stride_am, stride_ak, stride_bk, stride_bn, stride_ps,  # stride_ps = M * N: one partial (row-major M x N)
    # meta-parameters
    ACC_FP16: tl.constexpr,
    INDEX_64: tl.constexpr,
    EVEN_K: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    s = tl.program_id(1)
    pid_m, pid_n, acc = slice_product(a_ptr, b_ptr, tl.program_id(0), s, M, N, K, K_SLICE, stride_am, stride_ak,
                                      stride_bk, stride_bn, ACC_FP16, INDEX_64, EVEN_K, BLOCK_M, BLOCK_N, BLOCK_K,
                                      GROUP_M, 0)

    # EPILOGUE: the fp32 partial of slice s
    offs_cm, offs_cn = out_offsets(pid_m * BLOCK_M, pid_n * BLOCK_N, INDEX_64, BLOCK_M, BLOCK_N)
    if INDEX_64:
        s = s.to(tl.int64)
    p_ptrs = p_ptr + s * stride_ps + offs_cm[:, None] * N + offs_cn[None, :]
    tl.store(p_ptrs, acc.to(tl.float32), mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@triton.jit
def splitk_reduce_kernel(
    p_ptr, c_ptr,
    N, SPLITS,
    stride_ps, stride_cm, stride_cn,
    INDEX_64: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """C = sum over s of P[s], in the order s = 0, 1, ..., SPLITS - 1, rounded once to C's dtype (fp16, bf16)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # flat index into the row-major (M, N) partials
    if INDEX_64:
        offs = offs.to(tl.int64)
    mask = offs < stride_ps  # M * N elements per partial
    p_ptrs = p_ptr + offs
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(SPLITS):
        acc += tl.load(p_ptrs, mask=mask, other=0.0)
        p_ptrs += stride_ps  # pointer arithmetic: 64-bit past 2^31 elements
    rows = offs // N
    cols = offs % N
    tl.store(c_ptr + rows * stride_cm + cols * stride_cn, to_output(acc, c_ptr.dtype.element_ty), mask=mask)


# ----------------------------------------------------------------------------------------------------------------
# Tile counters of the fused kernel
# ----------------------------------------------------------------------------------------------------------------
LOOK_UP = object()  # StreamBuffers.get: the caller has not looked the current stream up


class StreamBuffers:
    """Buffers of one dtype kept per (device, stream) and grown when a call needs more: the fused kernel's tile
    counters (zeroed when made, and left at zero by every call that uses them) and its partial-block workspace
    (no initial value needed). A buffer serves every later call on its stream: calls on one stream run one after
    another, calls on two streams may overlap, so they never share one (a buffer is allocated while its stream is
    current, so the caching allocator reuses a replaced one only in that stream's order). During CUDA graph capture
    each call gets a new buffer instead (a zeroed one's memset captured ahead of the kernel): a cached buffer made
    inside a capture would hold nothing until the graph's first replay. What stays allocated is the largest
    problem's need per stream: split-K only runs problems whose tiles do not fill the GPU."""

    def __init__(self, dtype: torch.dtype, zeroed: bool, minimum: int):
        self.dtype, self.zeroed, self.minimum = dtype, zeroed, minimum
        self._bufs: dict = {}
        self._lock = threading.Lock()

    def _new(self, numel: int, device: torch.device) -> torch.Tensor:
        make = torch.zeros if self.zeroed else torch.empty
        return make(numel, dtype=self.dtype, device=device)

    def get(self, device: torch.device, numel: int, stream=LOOK_UP) -> torch.Tensor:
        """The buffer for a call on device's current stream. stream: that stream's raw handle where the caller has
        it already (a cached plan's launch asks for two buffers and launches on the same stream), None while the
        stream is capturing a CUDA graph; LOOK_UP: ask CUDA here."""
        if device.type == "cuda":
            if stream is LOOK_UP:
                stream = (None if torch._C._cuda_isCurrentStreamCapturing()
                          else torch._C._cuda_getCurrentRawStream(device.index))
            if stream is None:
                return self._new(numel, device)
            key = (device.index, stream)
        else:
            key = (device.type, None)
        buf = self._bufs.get(key)
        if buf is None or buf.numel() < numel:
            with self._lock:
                buf = self._bufs.get(key)
                if buf is None or buf.numel() < numel:
                    buf = self._new(max(numel, self.minimum), device)
                    self._bufs[key] = buf
        return buf

    def clear(self) -> None:
        with self._lock:
            self._bufs.clear()


COUNTERS = StreamBuffers(torch.int32, zeroed=True, minimum=1024)
WORKSPACES = StreamBuffers(torch.float32, zeroed=False, minimum=1 << 16)


# ----------------------------------------------------------------------------------------------------------------
# Host launcher
# ----------------------------------------------------------------------------------------------------------------
def slices(k: int, config: Config) -> tuple[int, int]:
    """(slice length, number of slices): config.split_k slices of whole K tiles, fewer when K is too short to
    give every slice one."""
    k_tiles = cdiv(k, config.block_k)
    k_slice = cdiv(k_tiles, config.split_k) * config.block_k
    return k_slice, cdiv(k, k_slice)


def fused_buffers(device: torch.device, tiles: int, split: int, config: Config) -> tuple[Kept, Kept, int]:
    """The fused kernel's workspace (tiles x split fp32 blocks) and tile counters on the current stream, and the
    workspace's element count."""
    blocks = tiles * split * config.block_m * config.block_n
    return (Kept(WORKSPACES.get(device, blocks), WORKSPACES.get, blocks),
            Kept(COUNTERS.get(device, tiles), COUNTERS.get, tiles), blocks)


def launches(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, acc_fp16: bool, config: Config,
             fused: bool | None = None) -> list[Spec]:
    """C = A @ B. Fused (default, `FUSED`): one launch writing fp32 partial blocks (tiles x split x BLOCK_M x
    BLOCK_N) to the stream's workspace (`WORKSPACES`) and summing them in the last program of each tile, with the
    stream's tile counters (`COUNTERS`); no allocation per call. Two-pass: partials into a new (split, M, N)
    workspace, then a reduction kernel."""
    fused = FUSED if fused is None else fused
    m, k = a.shape
    n = b.shape[1]
    k_slice, split = slices(k, config)
    tiles = cdiv(m, config.block_m) * cdiv(n, config.block_n)
    if fused:
        p, counts, blocks = fused_buffers(a.device, tiles, split, config)
        strides, div8 = div8_args((*a.stride(), *b.stride(), *c.stride()), m, n)
        args = (a, b, c, p, counts, m, n, k, k_slice, split, *strides, acc_fp16,
                needs_int64_indexing(a, b, c) or blocks > 2**31, k % config.block_k == 0, *config.meta.values(), div8)
        return [Spec(splitk_fused_kernel, (tiles, split), args, config.num_warps, config.num_stages)]
    p = torch.empty((split, m, n), dtype=torch.float32, device=a.device)
    index_64 = needs_int64_indexing(a, b, c, p)
    partial = (a, b, p, m, n, k, k_slice, a.stride(0), a.stride(1), b.stride(0), b.stride(1), m * n,
               acc_fp16, index_64, k % config.block_k == 0, *config.meta.values())
    reduce = (p, c, n, split, m * n, c.stride(0), c.stride(1), index_64, REDUCE_BLOCK)
    return [Spec(splitk_partial_kernel, (tiles, split), partial, config.num_warps, config.num_stages),
            Spec(splitk_reduce_kernel, (cdiv(m * n, REDUCE_BLOCK),), reduce, 4, 1)]


def inspect_source(cfg: Config, dtype: str = "fp16") -> tuple:
    """What `triton.compile` needs to build the split-K kernel (fused, or the partial-product kernel of the two-pass
    form when FUSED is off) as a 16x4096x4096 NN problem specializes it: (kernel, signature, constexprs, attrs) for
    inputs of `dtype` ("fp16", "bf16"), for `python -m compare inspect`."""
    consts = dict(stride_ak=1, stride_bn=1, ACC_FP16=False, INDEX_64=False, EVEN_K=True,
                  BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m,
                  DIV8=0)
    if FUSED:
        sig = {"a_ptr": f"*{dtype}", "b_ptr": f"*{dtype}", "c_ptr": f"*{dtype}", "p_ptr": "*fp32",
               "count_ptr": "*i32", "M": "i32", "N": "i32", "K": "i32", "K_SLICE": "i32", "SPLIT": "i32",
               "stride_am": "i32", "stride_ak": "constexpr", "stride_bk": "i32", "stride_bn": "constexpr",
               "stride_cm": "i32", "stride_cn": "constexpr"}
        attrs = {(i,): [["tt.divisibility", 16]] for i in (0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14)}
        return splitk_fused_kernel, sig, dict(consts, stride_cn=1), attrs
    sig = {"a_ptr": f"*{dtype}", "b_ptr": f"*{dtype}", "p_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32",
           "K_SLICE": "i32", "stride_am": "i32", "stride_ak": "constexpr", "stride_bk": "i32",
           "stride_bn": "constexpr", "stride_ps": "i32"}
    attrs = {(i,): [["tt.divisibility", 16]] for i in (0, 1, 2, 3, 4, 5, 6, 7, 9, 11)}
    del consts["DIV8"]  # the two-pass partial kernel takes its strides as they are
    return splitk_partial_kernel, sig, consts, attrs
