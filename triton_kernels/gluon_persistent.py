"""Persistent, warp-specialized Hopper HGEMM written in Gluon (`triton.experimental.gluon`): the middle level between
the Triton kernels, where the compiler decides layouts, pipelining and warp roles, and the hand-written
ptx_kernels/csrc/sm90/wgmma_persistent.cu, where we decide everything.

Here the kernel says, in Python, what tl.dot leaves to the compiler:
- shared memory: a NUM_STAGES-deep ring of A and B tiles in NVMMA-swizzled layouts (the ones wgmma reads), filled
  by TMA (`tma.async_copy_global_to_shared`, UTMALDG in SASS) and guarded by two mbarriers per stage: `ready`
  (the copies' bytes have landed: `mbarrier.expect` + the TMA transaction count) and `empty` (both consumers are
  done reading it);
- warp roles (`gl.warp_specialize`): a producer warp that only issues TMA loads, and two consumer warpgroups, each
  owning 64 rows of the 128-row tile and issuing asynchronous `warpgroup_mma` on its slab (one group in flight,
  `warpgroup_mma_wait(1)`), releasing a stage as soon as the wgmma that read it has retired; registers move from
  the producer's warpgroup to the consumers (`setmaxnreg`, USETMAXREG in SASS): the design of wgmma_persistent.cu;
- a persistent tile loop: each program walks tiles pid, pid + programs, ... in grouped order (GROUP_M tile-rows
  down one tile-column: programs running together share B tiles in L2; common.py's `grouped_pid`, a @triton.jit
  function, which Gluon code may call), the producer running ahead across tile
  boundaries, so the next tile's loads overlap this tile's epilogue;
- the epilogue: each consumer rounds its 64 x BLOCK_N slab to C's dtype, EPI_N columns at a time, into its own
  staging buffer and stores it by TMA (`tma.async_copy_shared_to_global`); only the staging buffer's next reuse
  waits for the store (`tma.store_wait`), so the last store drains while the next tile's main loop runs.
Edges: TMA reads zeros outside A and B (M, N and the K tail) and drops what falls outside C, so any M, N, K runs
with no masks. Layouts: a column-major operand is described by its row-major transpose (the descriptor of A^T or
B^T) and its tile transposed in shared memory by a view (`permute`), which wgmma reads directly (tnspA / tnspB).

Launch: the module's own path. A Gluon kernel's TMA operands are `triton.experimental.gluon.nvidia.hopper.
TensorDescriptor`s, which carry their shared-memory layout; `GluonDesc` builds them where launch.py's `Desc` builds
Triton's. The launch needs `maxnreg` (a warp-specialized kernel's register budget: `MAXNREG`), which
`launch.jit_launch` does not pass, so `launches()` returns `Spec`s whose `fn` is `GluonLaunch`: `fn[grid](...)`
launches the kernel with it and returns None, which keeps the dispatcher on the `kernel[grid]` path on every call
(triton_kernels/dispatch.py `Runner._keep`: no `Direct` launcher for it).

Written against triton 3.6's Gluon API (`GLUON_TRITON_VERSIONS`): Gluon is experimental and its names and
signatures change between releases (`warp_specialize`'s arguments did between 3.5 and 3.6), so on other versions
the record is not offered (`UNAVAILABLE` says why). Triton's interpreter cannot run Gluon: correctness is proven on
the GPU only (tests/test_gluon.py).
"""
from __future__ import annotations

from typing import NamedTuple

import torch
import triton
import triton.language as tl

from hgemm_common.errors import HgemmError, HgemmValueError
from hgemm_common.operands import major as _major
from hgemm_common.validation import interpreter_active

from .common import Config, grouped_pid
from .launch import Desc, Spec
from .tma_persistent import num_sms, operand_descs, programs

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
CONSUMERS = 2  # consumer warpgroups, 64 rows of the tile each (BLOCK_M = 64 x CONSUMERS)
PRODUCER_WARPS = 1  # one warp issues every TMA load; the compiler pads its partition to a warpgroup
# Registers per thread after setmaxnreg, as in wgmma_persistent.cu: the producer gives its registers away (40), a
# consumer's worker partition takes 232 (128 fp32 accumulators of its 64 x 256 slab, addressing, the epilogue).
# The default partition (the other consumer) gets what is left of MAXNREG x 12 warps: (168 x 384 - 40 x 128
# - 232 x 128) / 128 = 232. MAXNREG is the launch's budget: 12 warps x 32 threads x 168 <= 65,536.
PRODUCER_REGS, CONSUMER_REGS, MAXNREG = 40, 232, 168
NUM_WARPS = 4  # the default partition: consumer warpgroup 0
# the same, as the kernel reads them (a @jit function sees module globals only as constexprs)
_PRODUCER_WARPS, _PRODUCER_REGS, _CONSUMER_REGS = (tl.constexpr(x) for x in (PRODUCER_WARPS, PRODUCER_REGS,
                                                                             CONSUMER_REGS))
SMEM_LIMIT = 227 * 1024  # an H100 block's opt-in shared memory (sharedMemPerBlockOptin: 232,448 bytes)


def configs() -> list[Config]:
    """128-row tiles (two consumer warpgroups of 64 rows), 64-wide K (128-byte TMA rows, the widest swizzle).

    Shared memory: each stage holds (128 + BN) x 64 x 2 bytes, and each consumer a 64 x EPI_N staging buffer for C
    (`epilogue_split` = BN / EPI_N rounds per tile). 128x256: 4 stages (192 KB) beside 2 x 16 KB of staging (C stored
    128 columns a round, as wgmma_persistent.cu's Wide tile), or 3 stages (144 KB) beside the whole slab staged
    (2 x 32 KB, one store per tile); 128x128 for problems with few 128x256 tiles: 6 stages (192 KB) + 2 x 16 KB.
    `num_warps` is the default partition's (one consumer warpgroup); the kernel runs 12 warps."""
    return [
        Config(128, 256, 64, group_m=8, num_warps=NUM_WARPS, num_stages=4, epilogue_split=2),
        Config(128, 256, 64, group_m=8, num_warps=NUM_WARPS, num_stages=3),
        Config(128, 128, 64, group_m=8, num_warps=NUM_WARPS, num_stages=6),
        Config(128, 128, 64, group_m=8, num_warps=NUM_WARPS, num_stages=4),
    ]


INTERPRETER_CONFIG = configs()[0]  # never interpreted (launches() refuses): the record's config-free default


def smem_bytes(cfg: Config) -> int:
    """Shared memory a config's kernel allocates, bar the mbarriers: the operand ring and the C staging buffers."""
    return cfg.smem_bytes + CONSUMERS * 64 * (cfg.block_n // cfg.epilogue_split) * 2


def worth_timing(m: int, n: int, k: int, sms: int, tma_in_place: bool) -> bool:
    """Not timed by kernel="auto" yet: the plan tables decide where it runs; kernel="gluon" runs it on request."""
    return False


# ----------------------------------------------------------------------------------------------------------------
# Kernel
# ----------------------------------------------------------------------------------------------------------------
if gluon is not None:

    @gluon.jit
    def producer_partition(a_desc, b_desc, a_ring, b_ring, ready, empty, M, N, K,
                           A_T: gl.constexpr, B_T: gl.constexpr, GROUP_M: gl.constexpr):
        """One warp: for every k-block of every tile this program owns, wait until the stage is free, then TMA A's
        and B's tiles into it; the copies complete `ready[s]` with their byte count."""
        BLOCK_M: gl.constexpr = a_ring.shape[2] if A_T else a_ring.shape[1]
        BLOCK_N: gl.constexpr = b_ring.shape[1] if B_T else b_ring.shape[2]
        BLOCK_K: gl.constexpr = a_ring.shape[1] if A_T else a_ring.shape[2]
        STAGES: gl.constexpr = a_ring.shape[0]
        num_pid_m = gl.cdiv(M, BLOCK_M)
        num_pid_n = gl.cdiv(N, BLOCK_N)
        k_tiles = gl.cdiv(K, BLOCK_K)
        it = 0  # k-blocks issued so far, across tiles: stage it % STAGES, its use number it // STAGES
        for tile_id in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
            pid_m, pid_n = grouped_pid(tile_id, num_pid_m, num_pid_n, GROUP_M)
            off_m = pid_m * BLOCK_M
            off_n = pid_n * BLOCK_N
            for ki in range(k_tiles):
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

    @gluon.jit
    def store_round(c_desc, c_stage, x, off_m, off_n):
        """One epilogue round: x (64 x EPI_N, C's dtype) into the staging buffer once its last TMA store has read
        it, then stored by TMA at (off_m, off_n), left in flight."""
        tma.store_wait(pendings=0)
        c_stage.store(x)
        fence_async_shared()  # the generic-proxy writes are visible to the TMA engine (the async proxy)
        tma.async_copy_shared_to_global(c_desc, [off_m, off_n], c_stage)

    @gluon.jit
    def consumer_partition(c_desc, a_ring, b_ring, ready, empty, c_stage, M, N, K,
                           SLAB: gl.constexpr, A_T: gl.constexpr, B_T: gl.constexpr, ACC_FP16: gl.constexpr,
                           GROUP_M: gl.constexpr):
        """One warpgroup: rows [64 SLAB, 64 SLAB + 64) of every tile this program owns. MAIN LOOP: wgmma on the
        stage's slab of A and its whole B tile, one group in flight, the stage before released to the producer once
        its wgmma has retired. EPILOGUE: the slab in C's dtype through `c_stage` (64 x EPI_N) by TMA stores."""
        BLOCK_M: gl.constexpr = a_ring.shape[2] if A_T else a_ring.shape[1]
        BLOCK_N: gl.constexpr = b_ring.shape[1] if B_T else b_ring.shape[2]
        BLOCK_K: gl.constexpr = a_ring.shape[1] if A_T else a_ring.shape[2]
        STAGES: gl.constexpr = a_ring.shape[0]
        EPI_N: gl.constexpr = c_stage.shape[1]
        ACC_DTYPE: gl.constexpr = gl.float16 if ACC_FP16 else gl.float32
        # the wgmma accumulator of one warpgroup: m64nBNk16, 4 warps stacked along M
        acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                              instr_shape=[16, BLOCK_N, 16])
        num_pid_m = gl.cdiv(M, BLOCK_M)
        num_pid_n = gl.cdiv(N, BLOCK_N)
        k_tiles = gl.cdiv(K, BLOCK_K)
        it = 0  # k-blocks consumed so far, across tiles (the producer's count)
        for tile_id in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
            pid_m, pid_n = grouped_pid(tile_id, num_pid_m, num_pid_n, GROUP_M)
            acc = gl.zeros((64, BLOCK_N), dtype=ACC_DTYPE, layout=acc_layout)
            # MAIN LOOP
            for ki in range(k_tiles):
                s = it % STAGES
                mbarrier.wait(ready.index(s), (it // STAGES) & 1)
                if A_T:  # (BK, BM) tile of A^T: this slab's 64 columns, viewed as (64, BK)
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
                mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), pred=ki > 0)
                it += 1
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
            mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), pred=k_tiles > 0)
            # EPILOGUE: EPI_N columns a round; each round's store drains while the next is written or, after the
            # last, while the next tile's main loop runs
            out = acc.to(c_desc.dtype)
            off_m = pid_m * BLOCK_M + 64 * SLAB
            off_n = pid_n * BLOCK_N
            if EPI_N == BLOCK_N:
                store_round(c_desc, c_stage, out, off_m, off_n)
            else:  # two halves: (64, 2, BN/2) -> (64, BN/2, 2), split on the register dimension
                lo, hi = out.reshape([64, 2, EPI_N]).permute((0, 2, 1)).split()
                store_round(c_desc, c_stage, lo, off_m, off_n)
                store_round(c_desc, c_stage, hi, off_m, off_n + EPI_N)
        tma.store_wait(pendings=0)

    @gluon.jit
    def hgemm_gluon_kernel(
        # descriptors (gluon TensorDescriptors: they carry the shared-memory layouts)
        a_desc, b_desc, c_desc,
        # sizes
        M, N, K,
        # meta-parameters
        A_T: gl.constexpr,  # a_desc describes A^T (A is column-major)
        B_T: gl.constexpr,  # b_desc describes B^T (B is column-major)
        ACC_FP16: gl.constexpr,
        BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, GROUP_M: gl.constexpr,
        NUM_STAGES: gl.constexpr,
        EPI_SPLIT: gl.constexpr,  # C stored in BLOCK_N / EPI_SPLIT column rounds (c_desc's box: 64 x that)
    ):
        gl.static_assert(BLOCK_M == 64 * 2, "two consumer warpgroups of 64 rows")
        dtype: gl.constexpr = a_desc.dtype
        # shared memory: the operand ring (stage, tile), one C staging buffer per consumer, the ring's mbarriers
        a_ring = gl.allocate_shared_memory(dtype, [NUM_STAGES] + a_desc.block_type.shape, a_desc.layout)
        b_ring = gl.allocate_shared_memory(dtype, [NUM_STAGES] + b_desc.block_type.shape, b_desc.layout)
        c_stage0 = gl.allocate_shared_memory(dtype, c_desc.block_type.shape, c_desc.layout)  # (64, EPI_N)
        c_stage1 = gl.allocate_shared_memory(dtype, c_desc.block_type.shape, c_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(NUM_STAGES):
            mbarrier.init(ready.index(i), count=1)  # the producer's expect; the bytes complete it
            mbarrier.init(empty.index(i), count=2)  # one arrival per consumer warpgroup
        fence_async_shared()  # the inits are visible to TMA (the async proxy) before the first copy

        gl.warp_specialize([
            (consumer_partition, (c_desc, a_ring, b_ring, ready, empty, c_stage0, M, N, K, 0, A_T, B_T, ACC_FP16,
                                  GROUP_M)),
            (consumer_partition, (c_desc, a_ring, b_ring, ready, empty, c_stage1, M, N, K, 1, A_T, B_T, ACC_FP16,
                                  GROUP_M)),
            (producer_partition, (a_desc, b_desc, a_ring, b_ring, ready, empty, M, N, K, A_T, B_T, GROUP_M)),
        ], [4, _PRODUCER_WARPS], [_CONSUMER_REGS, _PRODUCER_REGS])


# ----------------------------------------------------------------------------------------------------------------
# Host launcher
# ----------------------------------------------------------------------------------------------------------------
_GL_DTYPES = {torch.float16: "float16", torch.bfloat16: "bfloat16"}


def nvmma_layout(block: tuple[int, int], dtype: torch.dtype):
    """The shared-memory layout of a TMA box of `block` elements: the widest swizzle its rows allow."""
    return gl.NVMMASharedLayout.get_default_for(list(block), getattr(gl, _GL_DTYPES[dtype]))


class GluonDesc(Desc):
    """launch.py's `Desc`, built as the Gluon descriptor, which carries its shared-memory layout."""
    __slots__ = ()

    def descriptor(self):
        t = self.tensor
        return TensorDescriptor(t, list(t.shape), list(t.stride()), list(self.block),
                                nvmma_layout(self.block, t.dtype))


class GluonLaunch(NamedTuple):
    """A `Spec.fn` for the Gluon kernel: `fn[grid](*args, num_warps=, num_stages=)` launches it with the register
    budget of its partitions (`MAXNREG`) and returns None, so that the dispatcher keeps it on this path (see the
    header)."""
    kernel: object

    def __getitem__(self, grid):
        def launch(*args, num_warps, num_stages, **options):  # options: launch.py's compile options (FP fusion)
            args = [a.descriptor() if isinstance(a, GluonDesc) else a for a in args]
            self.kernel[grid](*args, num_warps=num_warps, num_stages=num_stages, maxnreg=MAXNREG, **options)
            return None
        return launch


def _refuse_here() -> None:
    if UNAVAILABLE is not None:
        raise HgemmError(f"hgemm(kernel='gluon'): {UNAVAILABLE}")
    if interpreter_active():
        raise HgemmError("hgemm(kernel='gluon'): Triton's interpreter cannot run Gluon kernels; run it on a "
                         "Hopper GPU without TRITON_INTERPRET")


def launches(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, acc_fp16: bool, config: Config) -> list[Spec]:
    """C = A @ B as one persistent launch; the caller has validated and checked that A, B and a row-major C are
    TMA-describable (`meets_alignment("tma", ...)`)."""
    _refuse_here()
    m, k = a.shape
    n = b.shape[1]
    if _major(c) != "N":
        raise HgemmValueError("hgemm(kernel='gluon'): the output must be row-major for the TMA store")
    a_desc, b_desc, a_t, b_t = operand_descs(a, b, config)
    grid = (programs(triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n), num_sms(a.device)),)
    c_box = (64, config.block_n // config.epilogue_split)
    args = (GluonDesc(*a_desc), GluonDesc(*b_desc), GluonDesc(c, c_box), m, n, k, a_t, b_t, acc_fp16,
            *config.meta.values(), config.num_stages, config.epilogue_split)
    return [Spec(GluonLaunch(hgemm_gluon_kernel), grid, args, config.num_warps, config.num_stages)]


def inspect_source(cfg: Config, dtype: str = "fp16", a_t: bool = False, b_t: bool = False) -> tuple:
    """What `triton.compile(GluonASTSource(...))` needs to build the kernel as a 4096^3 problem on an H100
    specializes it: (kernel, signature, constexprs, attrs) for inputs of `dtype` ("fp16", "bf16"), A (a_t) and B
    (b_t) column-major or not, for `python -m compare inspect` and tests/test_gluon.py. Compile options:
    `compile_options(cfg)`."""
    bm, bn, bk = cfg.block_m, cfg.block_n, cfg.block_k
    gdt = getattr(gl, _GL_DTYPES[{"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]])

    def desc(block):
        layout = gl.NVMMASharedLayout.get_default_for(list(block), gdt)
        return f"tensordesc<{dtype}[{block[0]}, {block[1]}],{layout!r}>"

    sig = {"a_desc": desc((bk, bm) if a_t else (bm, bk)), "b_desc": desc((bn, bk) if b_t else (bk, bn)),
           "c_desc": desc((64, bn // cfg.epilogue_split)), "M": "i32", "N": "i32", "K": "i32"}
    consts = dict(A_T=a_t, B_T=b_t, ACC_FP16=False, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=cfg.group_m,
                  NUM_STAGES=cfg.num_stages, EPI_SPLIT=cfg.epilogue_split)
    attrs = {(i,): [["tt.divisibility", 16]] for i in (3, 4, 5)}
    return hgemm_gluon_kernel, sig, consts, attrs


def compile_options(cfg: Config) -> dict:
    """The options `triton.compile` takes for a config's kernel, as `GluonLaunch` launches it."""
    return dict(num_warps=cfg.num_warps, num_stages=cfg.num_stages, maxnreg=MAXNREG)
