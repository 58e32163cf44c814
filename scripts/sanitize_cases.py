"""The workload scripts/sanitize.sh runs under compute-sanitizer: every hand-written variant (the 2:4 sparse ones on
pruned inputs too), both accumulations
(fp16 on both of its tiles where it has two), B row- and column-major, and A column-major (TN: read in place by the
records that list it, copied by the wrapper for the others), at small odd shapes that leave partial tiles in M, N and K
(stream-K also with its SM count lowered: `SM_SHAPES`), wgmma_persistent's pinned cut, swapped and paired tiles
whole and split over the grid (`pinned_tiles`); then the Triton kernels with pinned small
configurations (autotuning under the sanitizer would only time instrumented code), the Gluon kernel on Hopper
in each kind of configuration and in its stream-K mode (pattern "triton", "gluon_persistent" or "gluon_streamk":
`gluon_cases`). Each result is also checked
exactly, so a wrong answer fails the run too. SANITIZE_QUICK=1: each Gluon configuration kind at one shape, one
accumulation and one layout (a racecheck pass that must stay short).

Pattern "ws_probe" (named exactly, never part of "*": it exists to be reported on) runs instead a minimal
`gl.warp_specialize` kernel, `ws_add_kernel`, in the form of Triton's own warp-specialization tutorial
(python/tutorials/gluon/08-warp-specialization.py in triton-lang/triton, at the revision docs/design/levels.md
names; its `elementwise_add_warp_specialized_kernel`: a default partition and worker partitions given as (function,
arguments) pairs, then the workers' warps and registers), cut down to an elementwise add shared by the default
partition and one worker, on int32 and checked exactly. It allocates no shared memory of its own: what racecheck
reports on it comes from the warp_specialize lowering alone, which hgemm_gluon_kernel shares (issue 48's reports:
a read at the kernel's entry against writes at its `def` line and its last statement). "ws_probe_bar0" runs its
control: the same compile with the lowering's `barrier.sync 1` made barrier 0 in the PTX (`ws_control_ptx`), the
protocol unchanged. The same add in hgemm_gluon_kernel's partition layouts (`WS_LAYOUTS`, each partition adding its
own BLOCK, launched with the GEMM's register budget MAXNREG): "ws_probe_gemm" its 128-row layout (workers of 4 and
PRODUCER_WARPS warps, CONSUMER_REGS and PRODUCER_REGS registers: the lowering pads the second to a warpgroup),
"ws_probe_1w" its 64-row layout (one worker of PRODUCER_WARPS warps, padded), "ws_probe_2w" two workers of 4 warps
with the 128-row registers (no padding), "ws_probe_flat" the 128-row warps with registers the workers already hold
(no reallocation), "ws_probe_sync" the tutorial's layout with each partition staging its sum through shared
memory of its own between barriers of its own threads (the GEMM's partitions meet such barriers: the default one's
on barrier 0 with a thread count). Then the GEMM's own machinery added to its 64-row layout one piece at a time
(`ws_ring_kernel`, `WS_RINGS`: a producer worker filling a ring of shared-memory stages that the default partition
adds and releases, each stage guarded by `ready` and `empty` mbarriers initialised and fenced before
`warp_specialize`): "ws_probe_mbar" the ring through registers and mbarriers alone, "ws_probe_tma" one block loaded
by TMA and "ws_probe_ld" its control (the same block, stage and mbarriers, loaded through registers), "ws_probe_loop" a persistent loop of 16 blocks through 4 stages with the sum stored by TMA, "ws_probe_big"
the loop in 224 KB of shared memory, as much as the GEMM's widest configurations take. Several of them,
comma-separated, run in one process; each kernel has its own name.

`python scripts/sanitize_cases.py --ws-entry` (no GPU: sm_90a compiles) prints that protocol as it stands in the
SASS of the probe and of hgemm_gluon_kernel's 128 x 128, 4-stage configuration (`ws_entry`): the state byte each
worker warp reads at its entry, the default warps' stores of it, and the barriers between them, with offsets and
source lines."""
import copy
import fnmatch
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

import ptx_kernels
import triton_kernels
from ptx_kernels import sparse, toolchain
from compare.reference import make_inputs, reference
from hgemm_common.cost_model import cdiv

SHAPES = [(7, 9, 15), (33, 17, 100), (129, 257, 72)]
# The kernels whose schedule reads hgemm(sms=...) (ptx_kernels.call.SM_SCHEDULED: stream-K) also run with the SM count
# lowered, so that small shapes take its cut tiles and their fix-up: (M, N, K, sms) -> one tile in 2 slices of 10
# k-blocks (5, 5); 4 tiles (edges among them) in 2 of 9 (4, 5); 2 whole rounds of 4 tiles, then 1 cut in 4 of 18.
SM_SHAPES = [(33, 17, 600, 7), (129, 257, 520, 8), (300, 520, 1100, 4)]


def gluon_cases() -> tuple:
    """The Gluon kernel (triton_kernels/gluon_persistent.py), one configuration of each kind, as (kernel, shapes,
    config, accumulations, layouts): two consumers on the smallest ring (128x128, 4 stages: partial tiles, K past
    the ring's depth, both accumulations, B both ways, operands with no dimension a multiple of 8, which the
    dispatcher stages), the 128x256 tile's two-round epilogue, one consumer (64x32, 16 stages, K past them) and
    split-K (the partial kernel's plain stores, then the reduction), a swapped short tile (16 x 128: C^T = B^T A^T,
    stored transposed; also staged) whole and split (its partials C^T's); then its stream-K mode (kernel
    "gluon_streamk"), on shapes whose tiles the schedule cuts on 132 SMs: 4 tiles of 128x256 in 4 slices each (the
    slices' fp32 rows, the slab counters, each consumer's sum stored in two rounds), and 150 tiles of 64x32, 18 of
    them in 4 slices beside a whole round (one consumer)."""
    cfgs = triton_kernels.configs("gluon_persistent")
    streamk = triton_kernels.configs("gluon_streamk")
    ring4 = next(c for c in cfgs if c.block_n == 128 and c.num_stages == 4)
    wide = next(c for c in cfgs if c.block_n == 256 and c.epilogue_split == 2)
    one = next(c for c in cfgs if c.block_m == 64 and c.block_n == 32 and c.split_k == 1)
    split = next(c for c in cfgs if c.split_k > 1 and c.block_m == 64)
    swap = next(c for c in cfgs if c.block_m == 16 and c.block_n == 128 and c.split_k == 1)
    swap_split = next(c for c in cfgs if c.block_m == 16 and c.split_k > 1)
    cases = (("gluon_persistent", [(40, 72, 48), (136, 264, 88), (136, 264, 328), (33, 61, 70)], ring4,
              ("fp32", "fp16"), ("NN", "NT")),
             ("gluon_persistent", [(9, 520, 264), (13, 61, 70)], swap, ("fp32",), ("NN", "NT")),
             ("gluon_persistent", [(16, 264, 4096)], swap_split, ("fp32",), ("NN",)),
             ("gluon_persistent", [(136, 264, 88)], wide, ("fp32",), ("NN",)),
             ("gluon_persistent", [(17, 40, 1100)], one, ("fp32",), ("NN", "NT")),
             ("gluon_persistent", [(17, 40, 1100)], split, ("fp32",), ("NN",)),
             ("gluon_streamk", [(136, 264, 1032)], streamk[0], ("fp32",), ("NN", "TT")),
             ("gluon_streamk", [(264, 936, 1032)], streamk[-1], ("fp32",), ("NN",)))
    if os.environ.get("SANITIZE_QUICK") == "1":  # each kind once: its first shape, accumulation and layout
        cases = tuple((k, shapes[:1], cfg, accs[:1], layouts[:1]) for k, shapes, cfg, accs, layouts in cases)
    return cases


# ---- the minimal warp_specialize kernel (pattern "ws_probe"; see the module's header) ---------------------------
WS_BLOCK = 128  # elements per partition and program: one per thread of a 4-warp partition
WS_N = 1000  # elements: the last program's worker partition is partial (masked)
# hgemm_gluon_kernel's partition layouts (see the module's header): pattern -> (kernel's name, partitions)
WS_LAYOUTS = {"ws_probe_gemm": ("ws_add_gemm_kernel", 3), "ws_probe_1w": ("ws_add_1w_kernel", 2),
              "ws_probe_2w": ("ws_add_2w_kernel", 3), "ws_probe_flat": ("ws_add_flat_kernel", 3),
              "ws_probe_sync": ("ws_add_sync_kernel", 2)}
# The probes that add the GEMM's own machinery to the 64-row layout, one piece at a time (`ws_ring_kernel`): pattern ->
# (TMA loads, TMA stores of the sum, ring stages, blocks per program, rows per block)
WS_RINGS = {"ws_probe_mbar": (False, False, 2, 4, 32), "ws_probe_ld": (False, False, 1, 1, 32),
            "ws_probe_tma": (True, False, 1, 1, 32),
            "ws_probe_loop": (True, True, 4, 16, 32), "ws_probe_big": (True, True, 3, 8, 256)}
WS_RING_COLS = 32  # int32 columns of a block: 128-byte rows, the widest the 128-byte swizzle's box takes
WS_RING_PROGRAMS = 4
WS_PATTERNS = ("ws_probe", "ws_probe_bar0", *WS_LAYOUTS, *WS_RINGS)
# "ws_probe_flat"'s registers: what the lowering gives each worker warp while it waits in 12 warps under MAXNREG,
# (168 x 384 - 256 x 128) / 256 rounded down to 8 (the default partition holds 256 there), so its partitions start
# without a setmaxnreg that moves registers (tests/test_gluon.py pins it in the SASS)
WS_FLAT_REGS = 120
# The control ("ws_probe_bar0"): the lowering's `barrier.sync 1;` (a named barrier of every thread in the CTA) made
# barrier 0, the one __syncthreads() uses, still of every thread: its SASS differs from the probe's in the barrier's
# number alone (BAR.SYNC.DEFER_BLOCKING 0x0 for 0x1). (The .aligned form is no control: ptxas emits the same
# BAR.SYNC for it.)
_WS_BARRIER = re.compile(r"\bbarrier\.sync\s+1;")
_ANY_BARRIER_0 = re.compile(r"\b(?:bar|barrier)(?:\.cta)?\.(?:sync|arrive|red)(?:\.\w+)*\s+0\b")

if triton_kernels.gluon_persistent.UNAVAILABLE is None:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl

    @gluon.jit
    def ws_add_block(x_ptr, y_ptr, z_ptr, n, start, BLOCK: gl.constexpr):
        """z = x + y on [start, start + BLOCK), by the warps of the partition that calls it."""
        layout: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
        offs = start + gl.arange(0, BLOCK, layout)
        mask = offs < n
        x = gl.load(x_ptr + offs, mask=mask)
        y = gl.load(y_ptr + offs, mask=mask)
        gl.store(z_ptr + offs, x + y, mask=mask)

    @gluon.jit
    def ws_add_kernel(x_ptr, y_ptr, z_ptr, n, BLOCK: gl.constexpr):
        """z = x + y, 2 BLOCK elements a program: the first BLOCK by the default partition (the launch's num_warps),
        the next by one worker partition of 4 warps and 24 registers (the tutorial's budget for a worker). The
        arguments are kernel arguments or computed from them, which the lowering recomputes in the worker
        (`elideTrivialCaptures`) instead of passing them through shared memory."""
        start = gl.program_id(0) * 2 * BLOCK
        gl.warp_specialize([
            (ws_add_block, (x_ptr, y_ptr, z_ptr, n, start, BLOCK)),
            (ws_add_block, (x_ptr, y_ptr, z_ptr, n, start + BLOCK, BLOCK)),
        ], [4], [24])

    @gluon.jit
    def ws_add_sync_block(x_ptr, y_ptr, z_ptr, n, start, BLOCK: gl.constexpr):
        """ws_add_block, the sum staged through the partition's own shared memory between two barriers of the
        partition's threads (`gl.thread_barrier`: a `bar.sync` with the partition's thread count, as the GEMM's
        epilogue meets before its TMA stores)."""
        layout: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
        offs = start + gl.arange(0, BLOCK, layout)
        mask = offs < n
        z = gl.load(x_ptr + offs, mask=mask) + gl.load(y_ptr + offs, mask=mask)
        buf = gl.allocate_shared_memory(gl.int32, [BLOCK], gl.SwizzledSharedLayout(1, 1, 1, [0]))
        buf.store(z)
        gl.thread_barrier()
        z = buf.load(layout)
        gl.thread_barrier()
        gl.store(z_ptr + offs, z, mask=mask)

    @gluon.jit
    def ws_add_sync_kernel(x_ptr, y_ptr, z_ptr, n, BLOCK: gl.constexpr):
        """ws_add_kernel with each partition meeting barriers of its own threads (`ws_add_sync_block`)."""
        start = gl.program_id(0) * 2 * BLOCK
        gl.warp_specialize([
            (ws_add_sync_block, (x_ptr, y_ptr, z_ptr, n, start, BLOCK)),
            (ws_add_sync_block, (x_ptr, y_ptr, z_ptr, n, start + BLOCK, BLOCK)),
        ], [4], [24])

    from triton_kernels.gluon_persistent import _CONSUMER_REGS, _PRODUCER_REGS, _PRODUCER_WARPS
    _WS_FLAT_REGS = gl.constexpr(WS_FLAT_REGS)

    @gluon.jit
    def ws_add_gemm_kernel(x_ptr, y_ptr, z_ptr, n, BLOCK: gl.constexpr):
        """hgemm_gluon_kernel's 128-row layout: the default partition and workers of 4 and _PRODUCER_WARPS warps."""
        start = gl.program_id(0) * 3 * BLOCK
        gl.warp_specialize([
            (ws_add_block, (x_ptr, y_ptr, z_ptr, n, start, BLOCK)),
            (ws_add_block, (x_ptr, y_ptr, z_ptr, n, start + BLOCK, BLOCK)),
            (ws_add_block, (x_ptr, y_ptr, z_ptr, n, start + 2 * BLOCK, BLOCK)),
        ], [4, _PRODUCER_WARPS], [_CONSUMER_REGS, _PRODUCER_REGS])

    @gluon.jit
    def ws_add_1w_kernel(x_ptr, y_ptr, z_ptr, n, BLOCK: gl.constexpr):
        """hgemm_gluon_kernel's 64-row layout: the default partition and one worker of _PRODUCER_WARPS warps."""
        start = gl.program_id(0) * 2 * BLOCK
        gl.warp_specialize([
            (ws_add_block, (x_ptr, y_ptr, z_ptr, n, start, BLOCK)),
            (ws_add_block, (x_ptr, y_ptr, z_ptr, n, start + BLOCK, BLOCK)),
        ], [_PRODUCER_WARPS], [_PRODUCER_REGS])

    @gluon.jit
    def ws_add_2w_kernel(x_ptr, y_ptr, z_ptr, n, BLOCK: gl.constexpr):
        """Two workers of 4 warps with the 128-row layout's registers: no warp the lowering pads."""
        start = gl.program_id(0) * 3 * BLOCK
        gl.warp_specialize([
            (ws_add_block, (x_ptr, y_ptr, z_ptr, n, start, BLOCK)),
            (ws_add_block, (x_ptr, y_ptr, z_ptr, n, start + BLOCK, BLOCK)),
            (ws_add_block, (x_ptr, y_ptr, z_ptr, n, start + 2 * BLOCK, BLOCK)),
        ], [4, 4], [_CONSUMER_REGS, _PRODUCER_REGS])

    @gluon.jit
    def ws_add_flat_kernel(x_ptr, y_ptr, z_ptr, n, BLOCK: gl.constexpr):
        """The 128-row layout's warps, each worker keeping the registers it waits with (_WS_FLAT_REGS)."""
        start = gl.program_id(0) * 3 * BLOCK
        gl.warp_specialize([
            (ws_add_block, (x_ptr, y_ptr, z_ptr, n, start, BLOCK)),
            (ws_add_block, (x_ptr, y_ptr, z_ptr, n, start + BLOCK, BLOCK)),
            (ws_add_block, (x_ptr, y_ptr, z_ptr, n, start + 2 * BLOCK, BLOCK)),
        ], [4, _PRODUCER_WARPS], [_WS_FLAT_REGS, _WS_FLAT_REGS])

    from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma

    @gluon.jit
    def ws_ring_producer(x_ptr, y_ptr, x_desc, y_desc, xs, ys, ready, empty, BLOCKS: gl.constexpr,
                         STAGES: gl.constexpr, TMA: gl.constexpr):
        """The worker: fills the ring's stages with this program's blocks of x and y, as the GEMM's producer does:
        waits for a stage to be empty, then TMA loads completing `ready` by their bytes (TMA), or loads through
        registers, stores into the stage, and arrives on `ready` after a barrier of its warps (not TMA)."""
        ROWS: gl.constexpr = xs.shape[1]
        COLS: gl.constexpr = xs.shape[2]
        for it in range(BLOCKS):
            s = it % STAGES
            row = (gl.program_id(0) * BLOCKS + it) * ROWS
            mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)  # a fresh mbarrier's phase 1 counts as done
            if TMA:
                mbarrier.expect(ready.index(s), 2 * x_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(x_desc, [row, 0], ready.index(s), xs.index(s))
                tma.async_copy_global_to_shared(y_desc, [row, 0], ready.index(s), ys.index(s))
            else:
                layout: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [gl.num_warps(), 1], [1, 0])
                rows = row + gl.arange(0, ROWS, gl.SliceLayout(1, layout))
                offs = rows[:, None] * COLS + gl.arange(0, COLS, gl.SliceLayout(0, layout))[None, :]
                xs.index(s).store(gl.load(x_ptr + offs))
                ys.index(s).store(gl.load(y_ptr + offs))
                gl.thread_barrier()
                mbarrier.arrive(ready.index(s))

    @gluon.jit
    def ws_ring_consumer(z_ptr, z_desc, xs, ys, zs, ready, empty, BLOCKS: gl.constexpr, STAGES: gl.constexpr,
                         TMA_STORE: gl.constexpr):
        """The default partition: waits for each stage, adds its x and y blocks, releases the stage (a barrier of its
        warps, then one arrival), and stores the sum: by TMA from its staging buffer (TMA_STORE: the staging
        buffer's reuse waits for the previous store, as the GEMM's epilogue does), or through pointers."""
        ROWS: gl.constexpr = xs.shape[1]
        COLS: gl.constexpr = xs.shape[2]
        layout: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [gl.num_warps(), 1], [1, 0])
        for it in range(BLOCKS):
            s = it % STAGES
            row = (gl.program_id(0) * BLOCKS + it) * ROWS
            mbarrier.wait(ready.index(s), (it // STAGES) & 1)
            z = xs.index(s).load(layout) + ys.index(s).load(layout)
            gl.thread_barrier()
            mbarrier.arrive(empty.index(s))
            if TMA_STORE:
                tma.store_wait(pendings=0)
                zs.store(z)
                fence_async_shared()  # the generic-proxy writes are visible to the TMA engine
                gl.thread_barrier()
                tma.async_copy_shared_to_global(z_desc, [row, 0], zs)
            else:
                rows = row + gl.arange(0, ROWS, gl.SliceLayout(1, layout))
                gl.store(z_ptr + rows[:, None] * COLS + gl.arange(0, COLS, gl.SliceLayout(0, layout))[None, :], z)
        tma.store_wait(pendings=0)

    @gluon.jit
    def ws_ring_kernel(x_ptr, y_ptr, z_ptr, x_desc, y_desc, z_desc, BLOCKS: gl.constexpr, STAGES: gl.constexpr,
                       TMA: gl.constexpr, TMA_STORE: gl.constexpr):
        """z = x + y over a ring of shared-memory stages between a producer worker (the GEMM's: _PRODUCER_WARPS
        warps, _PRODUCER_REGS registers) and the default partition (`ws_ring_producer`, `ws_ring_consumer`): the
        GEMM's 64-row layout with its mbarriers (initialised and fenced before `warp_specialize`), its TMA loads and
        stores and its persistent loop, each switched on by the pattern (`WS_RINGS`), without the wgmmas."""
        xs = gl.allocate_shared_memory(gl.int32, [STAGES] + x_desc.block_type.shape, x_desc.layout)
        ys = gl.allocate_shared_memory(gl.int32, [STAGES] + y_desc.block_type.shape, y_desc.layout)
        zs = gl.allocate_shared_memory(gl.int32, z_desc.block_type.shape, z_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(STAGES):
            mbarrier.init(ready.index(i), count=1)
            mbarrier.init(empty.index(i), count=1)
        fence_async_shared()
        gl.warp_specialize([
            (ws_ring_consumer, (z_ptr, z_desc, xs, ys, zs, ready, empty, BLOCKS, STAGES, TMA_STORE)),
            (ws_ring_producer, (x_ptr, y_ptr, x_desc, y_desc, xs, ys, ready, empty, BLOCKS, STAGES, TMA)),
        ], [_PRODUCER_WARPS], [_PRODUCER_REGS])
else:
    ws_add_kernel = None


def ws_control_ptx(ptx: str) -> str:
    """The probe's PTX with each `barrier.sync 1;` of the warp_specialize lowering made `barrier.sync 0;`. Every
    thread still meets the same barriers in the same order; barrier 0 can take them over only because the probe uses
    it nowhere else."""
    if not _WS_BARRIER.search(ptx):
        raise RuntimeError("the probe's PTX has no `barrier.sync 1;`: the warp_specialize lowering has changed")
    if _ANY_BARRIER_0.search(ptx):
        raise RuntimeError("the probe's PTX already uses barrier 0: the control would merge two barriers")
    return _WS_BARRIER.sub("barrier.sync 0;", ptx)


def ws_control_kernel(compiled):
    """A copy of the probe's CompiledKernel that runs the cubin of `ws_control_ptx`, built by Triton's ptxas with the
    options Triton gave the probe: the same name, metadata, arguments and launcher."""
    from triton.compiler.compiler import make_backend

    backend = make_backend(compiled.metadata.target)
    options = backend.parse_options({"num_warps": compiled.metadata.num_warps,
                                     "enable_fp_fusion": compiled.metadata.enable_fp_fusion})
    ptx = ws_control_ptx(compiled.asm["ptx"])
    cubin = backend.make_cubin(ptx, {}, options, compiled.metadata.target.arch)
    ck = copy.copy(compiled)
    ck.asm = {**compiled.asm, "ptx": ptx, "cubin": cubin}
    ck.kernel, ck.module, ck.function, ck._run = cubin, None, None, None  # loaded at its first launch
    return ck


def ws_probe(pattern: str) -> list[str]:
    """Run the probe (pattern "ws_probe"), its control ("ws_probe_bar0") or one of WS_LAYOUTS once; the wrong
    results, named."""
    if ws_add_kernel is None:
        return [f"ws_probe: {triton_kernels.gluon_persistent.UNAVAILABLE}"]
    gen = torch.Generator(device="cuda").manual_seed(48)
    if pattern in WS_RINGS:
        return ws_ring(pattern, gen)
    x, y = (torch.randint(-2**20, 2**20, (WS_N,), dtype=torch.int32, device="cuda", generator=gen) for _ in "xy")
    z = torch.full_like(x, -2**31)  # poisoned: every element must be written
    grid = (cdiv(WS_N, 2 * WS_BLOCK),)
    print(f"launch: {pattern}", flush=True)  # the sanitizer's reports on it follow this line
    if pattern in WS_LAYOUTS:
        name, partitions = WS_LAYOUTS[pattern]
        globals()[name][(cdiv(WS_N, partitions * WS_BLOCK),)](x, y, z, WS_N, WS_BLOCK,
                                                             maxnreg=triton_kernels.gluon_persistent.MAXNREG)
    elif pattern == "ws_probe":
        ws_add_kernel[grid](x, y, z, WS_N, WS_BLOCK)
    else:
        compiled = ws_add_kernel.warmup(x, y, z, WS_N, WS_BLOCK, grid=grid)
        # a CompiledKernel's own launch: a 3-D grid and every argument, the constexpr too (as kernel[grid] passes it)
        ws_control_kernel(compiled)[(*grid, 1, 1)](x, y, z, WS_N, WS_BLOCK)
    torch.cuda.synchronize()
    bad = (z != x + y).nonzero().flatten().tolist()
    return [f"{pattern}: {len(bad)} of {WS_N} elements wrong, first at {bad[:4]}"] if bad else []


def ws_ring(pattern: str, gen: torch.Generator) -> list[str]:
    """Run one of WS_RINGS once (`ws_ring_kernel`, WS_RING_PROGRAMS programs); the wrong results, named."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    tma_loads, tma_store, stages, blocks, rows = WS_RINGS[pattern]
    shape = (WS_RING_PROGRAMS * blocks * rows, WS_RING_COLS)
    x, y = (torch.randint(-2**20, 2**20, shape, dtype=torch.int32, device="cuda", generator=gen) for _ in "xy")
    z = torch.full_like(x, -2**31)  # poisoned: every element must be written
    layout = gl.NVMMASharedLayout.get_default_for([rows, WS_RING_COLS], gl.int32)
    x_desc, y_desc, z_desc = (TensorDescriptor(t, list(t.shape), list(t.stride()), [rows, WS_RING_COLS], layout)
                              for t in (x, y, z))
    print(f"launch: {pattern}", flush=True)  # the sanitizer's reports on it follow this line
    ws_ring_kernel[(WS_RING_PROGRAMS,)](x, y, z, x_desc, y_desc, z_desc, blocks, stages, tma_loads, tma_store,
                                        num_warps=4, maxnreg=triton_kernels.gluon_persistent.MAXNREG)
    torch.cuda.synchronize()
    bad = (z != x + y).flatten().nonzero().flatten().tolist()
    return [f"{pattern}: {len(bad)} of {z.numel()} elements wrong, first at {bad[:4]}"] if bad else []


# ---- the warp_specialize entry protocol in SASS (`--ws-entry`, tests/test_gluon.py) -----------------------------
_NVDISASM_FILE = re.compile(r'//## File "([^"]+)", line (\d+)')
_FULL_BARRIER_1 = re.compile(r"^BAR\.SYNC(?:\.DEFER_BLOCKING)? 0x1$")  # barrier 1, no thread count: every thread
_STATE_READ = re.compile(r"^LDS\.U8 \w+, \[[^\]]*\+0x([0-9a-f]+)\]")


@dataclass(frozen=True)
class SassLine:
    offset: int
    text: str  # as nvdisasm prints it, predicate included, without the ';'
    file: str  # the source line nvdisasm -g gives it (the innermost, where inlined)
    line: int


@dataclass(frozen=True)
class WsEntry:
    """How a compiled warp_specialize kernel starts its worker warps and ends them (Triton's NVIDIA lowering,
    third_party/nvidia/lib/TritonNVIDIAGPUToLLVM/ConvertWarpSpecializeToLLVM.cpp): one state byte per worker warp
    in shared memory, written by the default warps (the partition to run; at the kernel's end, "exit"), read by each
    worker warp at the top of the loop it waits in, with barrier 1 of every thread in the CTA between them."""
    state: int  # shared-memory offset of the first worker warp's state byte
    read: SassLine  # the worker warps' read of their state byte
    barrier_before_read: SassLine
    writes: tuple  # the default warps' stores of the state bytes, in code order (SassLine)
    barriers_after_writes: tuple  # the first barrier after each store
    protocol: tuple  # every line above and every all-thread barrier 1, in code order
    arrives: int  # BAR.ARV anywhere in the kernel (a barrier that orders without waiting)


def sass_lines(cubin: bytes) -> list[SassLine]:
    """Every instruction of a cubin's (one) function with its offset and source line (nvdisasm -c -g)."""
    from triton_kernels.triton_internals import nvdisasm_path

    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([nvdisasm_path(), "-c", "-g", f.name], capture_output=True, text=True,
                              check=True).stdout
    where, at = ("", 0), []
    for line in text.splitlines():  # each line's nearest source annotation above it
        m = _NVDISASM_FILE.search(line)
        where = (m.group(1), int(m.group(2))) if m else where
        at.append(where)
    return [SassLine(ins.offset, ins.text.split("*/", 1)[1].strip().rstrip(" ;"), *at[ins.line])
            for ins in toolchain.sass_instructions(text)]


def sass_op(s: SassLine) -> str:
    """The instruction without its guard predicate."""
    return re.sub(r"^@!?U?P\w+\s+", "", s.text)


def ws_entry(lines: list[SassLine], default_warps: int) -> WsEntry:
    """The entry protocol of a warp_specialize kernel whose default partition has `default_warps` warps: the first
    byte load from shared memory is a worker warp reading its state at state + (warp id - default_warps)."""
    i = next(i for i, s in enumerate(lines) if _STATE_READ.match(sass_op(s)))
    state = int(_STATE_READ.match(sass_op(lines[i])).group(1), 16) + default_warps
    writes = [j for j, s in enumerate(lines) if sass_op(s).startswith("STS") and f"+0x{state:x}]" in s.text]
    bars = [j for j, s in enumerate(lines) if sass_op(s).startswith("BAR")]
    before = max(j for j in bars if j < i)
    after = [min(j for j in bars if j > w) for w in writes]
    keep = {i, *writes} | {j for j in bars if _FULL_BARRIER_1.match(sass_op(lines[j]))}
    return WsEntry(state, lines[i], lines[before], tuple(lines[w] for w in writes), tuple(lines[j] for j in after),
                   tuple(lines[j] for j in sorted(keep)), sum(sass_op(s).startswith("BAR.ARV") for s in lines))


def ws_entry_compiles(every_config: bool = False) -> list[tuple[str, object, int]]:
    """(name, CompiledKernel, default warps) of the probe, of its layouts (`WS_LAYOUTS`) and of hgemm_gluon_kernel's
    128 x 128, 4-stage configuration (`gluon_cases`' first; every_config: each of `gluon_cases`' configurations,
    the stream-K mode's too),
    compiled for sm_90a as their launches compile them (no GPU needed)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    from compare import disasm

    sig = {"x_ptr": "*i32", "y_ptr": "*i32", "z_ptr": "*i32", "n": "i32", "BLOCK": "constexpr"}
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(3)}  # torch's allocations, as the launch sees them
    out = []
    for pattern, (name, _) in {"ws_probe": ("ws_add_kernel", 2), **WS_LAYOUTS}.items():
        options = {"num_warps": 4} | ({"maxnreg": triton_kernels.gluon_persistent.MAXNREG}
                                      if pattern in WS_LAYOUTS else {})  # as `ws_probe` launches them
        out.append((f"{name} ({pattern})", triton.compile(GluonASTSource(globals()[name], sig, {"BLOCK": WS_BLOCK},
                                                                         attrs),
                                                          target=GPUTarget("cuda", 90, 32), options=options), 4))
    for kernel, _, cfg, _, _ in gluon_cases()[:None if every_config else 1]:
        gemm, _, _ = disasm.triton_compile(disasm.targets([f"{kernel}[{cfg.name}]"])[0])
        out.append((f"hgemm_gluon_kernel [{kernel} {cfg.name}]", gemm, cfg.num_warps))
    return out


def ws_ring_compiles() -> list[tuple[str, object]]:
    """(pattern, CompiledKernel) of each of WS_RINGS' `ws_ring_kernel`, compiled for sm_90a as `ws_ring` launches it
    (no GPU needed)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    out = []
    for pattern, (tma_loads, tma_store, stages, blocks, rows) in WS_RINGS.items():
        layout = gl.NVMMASharedLayout.get_default_for([rows, WS_RING_COLS], gl.int32)
        desc = f"tensordesc<i32[{rows}, {WS_RING_COLS}],{layout!r}>"
        consts = dict(BLOCKS=blocks, STAGES=stages, TMA=tma_loads, TMA_STORE=tma_store)
        sig = {"x_ptr": "*i32", "y_ptr": "*i32", "z_ptr": "*i32", "x_desc": desc, "y_desc": desc, "z_desc": desc,
               **{name: "constexpr" for name in consts}}
        src = GluonASTSource(ws_ring_kernel, sig, consts, {(i,): [["tt.divisibility", 16]] for i in range(3)})
        out.append((pattern, triton.compile(src, target=GPUTarget("cuda", 90, 32), options={
            "num_warps": 4, "maxnreg": triton_kernels.gluon_persistent.MAXNREG})))
    return out


def setmaxnreg(lines: list[SassLine]) -> list[tuple[int, int]]:
    """(offset, registers) of each USETMAXREG (setmaxnreg) of a kernel, in code order."""
    return [(s.offset, int(s.text.rsplit(",", 1)[-1].split()[-1], 16)) for s in lines
            if sass_op(s).startswith("USETMAXREG")]


def ws_control_diff(compiled) -> tuple[int, list[tuple[str, str]]]:
    """(instructions, the pairs that differ) between the probe's SASS and its control's, offset by offset."""
    probe, control = (sass_lines(c) for c in (compiled.asm["cubin"], ws_control_kernel(compiled).kernel))
    if [s.offset for s in probe] != [s.offset for s in control]:
        raise RuntimeError("the control's SASS is laid out differently from the probe's")
    return len(probe), [(a.text, b.text) for a, b in zip(probe, control) if a.text != b.text]


def print_ws_entry() -> int:
    """`--ws-entry`: each compile's protocol lines (offset, SASS, source line), then what they say; the control's
    difference from the probe."""
    root = Path(__file__).resolve().parent.parent
    for name, compiled, warps in ws_entry_compiles(every_config=True):
        lines = sass_lines(compiled.asm["cubin"])
        e = ws_entry(lines, warps)
        print(f"{name}: sm_90a, {compiled.metadata.num_warps} warps ({warps} default), shared "
              f"{compiled.metadata.shared} B; the worker warps' state bytes at shared offset {e.state:#x}")
        for s in e.protocol:
            where = Path(s.file).resolve()
            where = where.relative_to(root) if where.is_relative_to(root) else where.name
            mark = ("  <- a worker warp reads its state" if s == e.read else
                    "  <- the default warps store the states" if s in e.writes else "")
            print(f"  /*{s.offset:04x}*/ {s.text:<44} {where}:{s.line}{mark}")
        print(f"  before the read: {e.barrier_before_read.text}; after each store: "
              f"{'; '.join(b.text for b in e.barriers_after_writes)}; BAR.ARV in the kernel: {e.arrives}")
        print("  setmaxnreg (offset: registers): " + ", ".join(f"{o:#x}: {r}" for o, r in setmaxnreg(lines)))
        if compiled.metadata.name == "ws_add_kernel":
            n, diff = ws_control_diff(compiled)
            print(f"  its control (ws_probe_bar0): the same {n} instructions at the same offsets but for "
                  f"{len(diff)}: {sorted(set(diff))}")
        print()
    return 0


# wgmma_persistent's pinned plan tiles (the ones only a pin or the planner reaches): (M, N, K, layout, split) per tile
# code, every cut, swapped and paired tile whole (split 1) in NN and split over the grid in 3 K slices in NT (N off
# the 8-column grid there, C's rows padded to it as the pinned tiles' stores need; 9 k-blocks, the last partial), the
# grid split's own tiles in 2 slices; C NaN-poisoned
PINNED_RUNS = ((300, 520, 520, "NN", 1), (300, 517, 520, "NT", 3))


def pinned_tiles(pattern: str) -> list[str]:
    """The pinned plan tiles of wgmma_persistent (where pattern matches it) on PINNED_RUNS, each exact or named."""
    from compare.sweep import CUT_TILES, PAIR_TILES, PtxCall, SWAP_TILES

    if not fnmatch.fnmatch("wgmma_persistent", pattern) or torch.cuda.get_device_capability()[0] != 9:
        return []
    bad = []
    runs = [(code, *run) for code in (*CUT_TILES, *SWAP_TILES, *PAIR_TILES) for run in PINNED_RUNS]
    runs += [(code, 300, 520, 1100, layout, 2) for code in (1, 2, 3) for layout in ("NN", "NT")]
    for i, (code, m, n, k, layout, split) in enumerate(runs):
        if code in CUT_TILES and layout == "NN" and CUT_TILES[code][1] % 64:
            continue  # row-major B takes the cut widths of whole 64-column boxes only
        a, b = make_inputs(m, n, k, layout, device="cuda", seed=40 + i)
        print(f"launch: wgmma_persistent tile {code} split {split} {layout} {m}x{n}x{k}", flush=True)
        call = PtxCall("wgmma_persistent", "fp32", code, split)
        c = call(a, b, torch.full((m, -(-n // 8) * 8), float("nan"), dtype=a.dtype, device="cuda")[:, :n])
        torch.cuda.synchronize()
        if not torch.equal(c, reference(a, b).half()) or (split > 1 and call.report["split"] != split):
            bad.append(f"wgmma_persistent tile {code} split {split} {layout} {m}x{n}x{k} (ran {call.report})")
    return bad


def main(pattern: str = "*") -> int:
    """pattern: fnmatch pattern of the kernels to run (hand-written variant names; "triton" for the Triton ones), or
    WS_PATTERNS, comma-separated (the warp_specialize probes, alone, in that order)."""
    if set(pattern.split(",")) <= set(WS_PATTERNS):
        bad = [b for p in pattern.split(",") for b in ws_probe(p)]
        print(f"sanitize_cases: {pattern} run; {len(bad)} wrong results" + (": " + ", ".join(bad) if bad else ""))
        return 1 if bad else 0
    bad = []
    variants = [v for v in ptx_kernels.variants() if fnmatch.fnmatch(v.name, pattern)]
    for v in variants:
        # fp16 accumulation picks its large tile only on problems that fill the GPU: force it here too
        runs = [(acc, "auto") for acc in v.accs] + ([("fp16", "large")] if v.block_fp16 else [])
        for acc, tile in runs:
            for layout in ("NN", "NT", "TN"):
                for i, (m, n, k) in enumerate(SHAPES):
                    a, b = make_inputs(m, n, k, layout, device="cuda", seed=i)
                    c = ptx_kernels.hgemm(a, b, kernel=v.name, acc=acc, tile=tile)
                    if not torch.equal(c, reference(a, b).half()):
                        bad.append(f"{v.name} {acc} {tile} {layout} {m}x{n}x{k}")
                for i, (m, n, k, sms) in enumerate(SM_SHAPES if v.name in ptx_kernels.call.SM_SCHEDULED else ()):
                    a, b = make_inputs(m, n, k, layout, device="cuda", seed=30 + i)
                    c = ptx_kernels.hgemm(a, b, kernel=v.name, acc=acc, tile=tile, sms=sms)
                    if not torch.equal(c, reference(a, b).half()):
                        bad.append(f"{v.name} {acc} {tile} {layout} {m}x{n}x{k} sms={sms}")
    bad += pinned_tiles(pattern)
    major, minor = torch.cuda.get_device_capability()
    sparse_variants = [v for v in ptx_kernels.variants("sparse") if fnmatch.fnmatch(v.name, pattern)
                       and v.offered_on(10 * major + minor)]
    for v in sparse_variants:  # 2:4 sparse A (pruned integers), B row- and column-major; every tile and schedule
        runs = [(acc, {}) for acc in v.accs] + [("fp16", {"tile": t}) for t in ("large", "base")
                                                 if v.block_fp16 and major >= 9]
        runs += [(acc, {"schedule": s}) for acc in v.accs for s in ptx_kernels.SCHEDULES
                 if s != "auto" and v.name in ptx_kernels.call.SCHEDULED]
        for acc, pin in runs:
            for layout in ("NN", "NT"):
                for i, (m, n, k) in enumerate(SHAPES):
                    a, b = make_inputs(m, n, k, layout, device="cuda", seed=20 + i)
                    a = sparse.prune_2to4(a)
                    values, meta = sparse.compress(a)
                    c = ptx_kernels.sparse_hgemm(values, meta, b, kernel=v.name, acc=acc, **pin)
                    if not torch.equal(c, reference(a, b).half()):
                        bad.append(f"{v.name} {acc} {pin} {layout} {m}x{n}x{k}")
    variants = variants + sparse_variants
    small = triton_kernels.Config(32, 32, 32, group_m=4, num_warps=4, num_stages=2)
    both = ("fp32", "fp16")
    swapped = triton_kernels.Config(16, 64, 64, group_m=4, num_warps=4, num_stages=3)  # C^T = B^T A^T, stored transposed
    tritons = (("triton_blocked", SHAPES, small, both, ("NN",)),
               ("triton_tma", [(40, 72, 48), (136, 264, 88)], small, both, ("NN",)),
               ("triton_tma", [(8, 72, 48), (24, 264, 88)], swapped, both, ("NN", "NT")))
    tritons = tritons if fnmatch.fnmatch("triton", pattern) else ()
    if major == 9:  # the Gluon kernel's cases: with pattern "triton", or their own kernel's name
        tritons += tuple(c for c in gluon_cases() if fnmatch.fnmatch("triton", pattern) or
                         fnmatch.fnmatch(c[0], pattern))
    for kernel, shapes, cfg, accs, layouts in tritons:
        for acc in accs:
            for i, (m, n, k) in enumerate(shapes):
                for layout in layouts:
                    a, b = make_inputs(m, n, k, layout, device="cuda", seed=10 + i)
                    # the sanitizer's reports on this launch follow the line (the synchronize below)
                    print(f"launch: {kernel} {cfg.name} {acc} {layout} {m}x{n}x{k}", flush=True)
                    c = triton_kernels.hgemm(a, b, acc=acc, config=cfg, kernel=kernel)
                    torch.cuda.synchronize()
                    if not torch.equal(c, reference(a, b).half()):
                        bad.append(f"triton {kernel} {cfg.name} {acc} {layout} {m}x{n}x{k}")
    torch.cuda.synchronize()
    print(f"sanitize_cases: {len(variants)} variants and {len(tritons)} Triton kernels run; "
          f"{len(bad)} wrong results" + (": " + ", ".join(bad) if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(print_ws_entry() if sys.argv[1:2] == ["--ws-entry"] else main(*sys.argv[1:2]))
