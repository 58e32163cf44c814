"""The Gluon level's bandwidth path for a few rows of A: ptx_kernels/csrc/sm90/mma_stream.cu's design written in
Gluon, reading A and B in place at any alignment.

At M <= 32 a GEMM reads B (K x N x 2 bytes) and does a few flops per byte: its time is B's bytes over the memory's
bandwidth. gluon_persistent stages its operands by TMA, which needs 16-byte aligned rows: an operand off that grid
(half of the random suite's draws) is first copied to an aligned buffer, a second read and a write of B, which
costs more than the GEMM. This kernel reads the operands where they are:

- roles swapped: it computes C^T = B^T A^T with `mma_v2` (mma.sync.m16n8k16, HMMA in SASS): BLOCK_N of C's columns
  are the MMA's rows (16 a warp's MMA row block, the warps stacked), C's BLOCK_M rows (16 or 32) its n8 columns;
- loads by pointer (`gl.load`) along the operand's contiguous dimension, as wide as its alignment allows
  (`vectors`: 8, 4 or 2 elements a lane where the base lies on 16 bytes and the extent and leading stride divide
  by the width, else one element a lane, 32 lanes a warp reading 64 contiguous bytes an instruction), masked at M,
  N and the K slice's end, into a coalesced layout, then `convert_layout` to the MMA's operand layouts (through
  shared memory: the compiler's stores and `ldmatrix`). Triton issues a vector load only where it can prove the
  addresses aligned and the mask constant across the vector: the launcher passes each leading stride divided by
  the width, and the kernel multiplies it back and rounds the extents down to the width (a no-op the launcher
  guarantees), so the compiler sees both divisible;
- bytes in flight: the next k-block's loads are issued before this one's MMAs (a register double buffer), and
  several programs share each SM;
- K split over the grid (a configuration's split_k): program (column block, row block) x slice s writes its fp32
  partial into slice s of a workspace and triton_kernels/splitk.py's reduction kernel adds the slices in slice
  order (the same bits on every run); one slice stores C directly.

Written against triton 3.6's Gluon API (gluon_persistent's `GLUON_TRITON_VERSIONS`); Triton's interpreter cannot
run Gluon: correctness is proven on the GPU only (tests/test_gluon.py).
"""
from __future__ import annotations

import torch

from hgemm_common.errors import HgemmValueError
from hgemm_common.validation import needs_int64_indexing

from .common import Config, cdiv
from .gluon_persistent import UNAVAILABLE, refuse_here
from .launch import Spec
from .splitk import REDUCE_BLOCK, splitk_reduce_kernel

if UNAVAILABLE is None:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.ampere import mma_v2
else:  # the module still imports (the record is left out of VARIANTS); nothing below is compiled
    gluon = None

NAME = "gluon_stream"

# ----------------------------------------------------------------------------------------------------------------
# Tuning constants
# ----------------------------------------------------------------------------------------------------------------
MAX_M = 32  # rows of C a program takes at most (two n8 pairs of the MMA); a larger M runs more row blocks
SPLITS = (1, 2, 4, 8, 16, 32)  # the K splits the rule takes
MIN_SLICE_BLOCKS = 4  # k-blocks a slice keeps at least
PROGRAMS_PER_SM = 4  # programs the rule aims for per SM (bytes in flight: each holds a k-block of B ahead)
MAX_SLICES = 65535  # the grid's second dimension


def configs() -> list[Config]:
    """C's tile: 16 or 32 rows (the MMA's n8 columns) x 128 or 64 columns (the MMA's rows, 32 or 16 a warp over 4
    warps), 32 or 64 deep in K (one k-block of B in flight per program beside the one the MMAs read: 4,096
    elements); the K split is the rule's (`choose_config`), 1 here."""
    return [
        Config(16, 128, 32, group_m=1, num_warps=4, num_stages=1),
        Config(32, 128, 32, group_m=1, num_warps=4, num_stages=1),
        Config(16, 64, 64, group_m=1, num_warps=4, num_stages=1),
        Config(32, 64, 64, group_m=1, num_warps=4, num_stages=1),
    ]


INTERPRETER_CONFIG = configs()[0]  # never interpreted (launches() refuses): the record's config-free default


def check_config(cfg: Config) -> Config:
    """A pinned configuration's ranges: 16 or 32 rows, 64 or 128 columns, 32 or 64 of K, 4 warps."""
    cfg.check()
    if (cfg.block_m not in (16, 32) or cfg.block_n not in (64, 128) or cfg.block_k not in (32, 64)
            or cfg.num_warps != 4 or cfg.epilogue_split != 1):
        raise HgemmValueError(f"hgemm(kernel='{NAME}') config {cfg.name}: tiles are 16 or 32 rows x 64 or 128 "
                              "columns x 32 or 64 of K, 4 warps, stored whole")
    return cfg


def choose_config(m: int, n: int, k: int, sms: int) -> Config:
    """The configuration kernel="gluon_stream" runs where none is named: 16 rows for M <= 16, else 32; 128 columns
    where they make at least a program per SM, else 64; the smallest K split (SPLITS) that gives PROGRAMS_PER_SM
    programs an SM, every slice MIN_SLICE_BLOCKS k-blocks deep."""
    bm = 16 if m <= 16 else 32
    bn = 128 if cdiv(m, bm) * cdiv(n, 128) >= sms else 64
    cfg = next(c for c in configs() if (c.block_m, c.block_n) == (bm, bn))
    units = cdiv(m, bm) * cdiv(n, bn)
    k_blocks = cdiv(k, cfg.block_k)
    split = 1
    for s in SPLITS:
        if k_blocks < MIN_SLICE_BLOCKS * s:
            break
        split = s
        if units * s >= PROGRAMS_PER_SM * sms:
            break
    rule = Config(bm, bn, cfg.block_k, group_m=1, num_warps=4, num_stages=1, split_k=split)
    return Config(bm, bn, cfg.block_k, group_m=1, num_warps=4, num_stages=1, split_k=slices(k, rule)[1])


def prune(cfgs: list[Config], m: int, n: int, k: int, sms: int) -> list[Config]:
    """The configurations tune="exact", the sweep and the cost model weigh on a problem: configs()' (unsplit) and the
    rule's choice (`choose_config`, with its K split) where it is not among them."""
    rule = choose_config(m, n, k, sms)
    return cfgs if rule in cfgs else [*cfgs, rule]


def worth_timing(m: int, n: int, k: int, sms: int, tma_in_place: bool) -> bool:
    """Not timed by kernel="auto" yet: kernel="gluon_stream" runs it on request."""
    return False


def vectors(t: torch.Tensor, unit: int) -> int:
    """The widest load, in elements (8, 4 or 2; else 1), the kernel may issue along dimension `unit` of the 2-D
    operand `t`: its stride there is 1, its base lies on 16 bytes (Triton's specialization proves no finer
    alignment of a pointer), its extent along `unit` and its leading stride (the other dimension's, ignored where
    that dimension holds one element) divide by the width, and the leading stride's quotient times the width still
    fits the kernel's 32-bit stride argument."""
    if t.stride(unit) != 1 or t.data_ptr() % 16:
        return 1
    lead = t.stride(1 - unit) if t.shape[1 - unit] > 1 else 0
    if lead >= 2**31:
        return 1
    return next((v for v in (8, 4, 2) if t.shape[unit] % v == 0 and lead % v == 0), 1)


def slices(k: int, cfg: Config) -> tuple[int, int]:
    """(K elements per slice, a multiple of block_k; slices): cfg.split_k slices, fewer where K is too short to
    give every slice a k-block (or past MAX_SLICES: the grid's second dimension)."""
    per = cdiv(cdiv(k, cfg.block_k), min(max(cfg.split_k, 1), MAX_SLICES)) * cfg.block_k
    return per, max(cdiv(k, per), 1)


# ----------------------------------------------------------------------------------------------------------------
# Kernel
# ----------------------------------------------------------------------------------------------------------------
if gluon is not None:

    @gluon.constexpr_function
    def coalesced(rows, cols, contig, warps, vec):
        """A (rows, cols) tile's load layout: `vec` elements a lane along dimension `contig` (the operand's unit
        stride), as many lanes of a warp along it as the tile's extent there takes (32 at one element a lane: 64
        contiguous bytes an instruction), the warp's other lanes and the warps along the other dimension."""
        along = min(32, (rows if contig == 0 else cols) // vec)
        if contig == 0:
            return gl.BlockedLayout([vec, 1], [along, 32 // along], [1, warps], [0, 1])
        return gl.BlockedLayout([1, vec], [32 // along, along], [warps, 1], [1, 0])

    @gluon.jit(do_not_specialize=["M", "N", "K", "K_SLICE"])
    def hgemm_gluon_stream_kernel(
        a_ptr, b_ptr, c_ptr, p_ptr,  # p_ptr: the (slices, M, N) fp32 workspace (C where the K is not split)
        M, N, K, K_SLICE,  # K_SLICE: K elements per slice, a multiple of BLOCK_K
        stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,  # A's and B's leading strides / VEC_A, VEC_B
        ACC_FP16: gl.constexpr, INDEX_64: gl.constexpr,
        BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
        A_KMAJOR: gl.constexpr,  # A's unit stride is along K (row-major A)
        B_KMAJOR: gl.constexpr,  # B's unit stride is along K (column-major B)
        VEC_A: gl.constexpr, VEC_B: gl.constexpr,  # elements a lane loads at once along A's, B's unit stride
        PARTIAL: gl.constexpr,  # K is split: the fp32 partial into slice s of the workspace
    ):
        """Program (column block x row block, slice s): C^T's (BLOCK_N, BLOCK_M) tile over K slice s, by mma_v2 on
        B^T's (BLOCK_N, BLOCK_K) and A^T's (BLOCK_K, BLOCK_M) k-blocks, the next k-block loaded before this one's
        MMAs; stored into C (transposed addresses) or the workspace."""
        W: gl.constexpr = gl.num_warps()
        mma: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[W, 1], instr_shape=[16, 8])
        bt_op: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2)
        at_op: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=mma, k_width=2)
        bl_b: gl.constexpr = coalesced(BLOCK_N, BLOCK_K, 1 if B_KMAJOR else 0, W, VEC_B)  # B^T's tile (n, k)
        bl_a: gl.constexpr = coalesced(BLOCK_K, BLOCK_M, 0 if A_KMAJOR else 1, W, VEC_A)  # A^T's tile (k, m)
        ACC_DTYPE: gl.constexpr = gl.float16 if ACC_FP16 else gl.float32
        # The leading strides multiplied back and the extents along a unit stride rounded down to the vector width
        # (the launcher's `vectors` guarantees both divide): the compiler sees each vector's addresses aligned and
        # its mask constant
        VEC_K: gl.constexpr = max(VEC_A if A_KMAJOR else 1, VEC_B if B_KMAJOR else 1)
        K = K // VEC_K * VEC_K
        K_SLICE = K_SLICE // BLOCK_K * BLOCK_K
        if A_KMAJOR:
            stride_am = stride_am * VEC_A
        else:
            M = M // VEC_A * VEC_A
            stride_ak = stride_ak * VEC_A
        if B_KMAJOR:
            stride_bn = stride_bn * VEC_B
        else:
            N = N // VEC_B * VEC_B
            stride_bk = stride_bk * VEC_B

        num_pid_m = gl.cdiv(M, BLOCK_M)
        pid_n = gl.program_id(0) // num_pid_m  # the row blocks of one column block side by side: B shared in L2
        pid_m = gl.program_id(0) % num_pid_m
        s = gl.program_id(1)
        k_lo = s * K_SLICE
        k_hi = gl.minimum(K, k_lo + K_SLICE)

        offs_bn = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, bl_b))
        offs_bk = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, bl_b))
        offs_ak = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(1, bl_a))
        offs_am = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, bl_a))
        n_in = gl.expand_dims(offs_bn < N, 1)
        m_in = gl.expand_dims(offs_am < M, 0)
        k_base = k_lo
        step_b = BLOCK_K * stride_bk  # the pointers' step a k-block
        step_a = BLOCK_K * stride_ak
        if INDEX_64:
            offs_bn = offs_bn.to(gl.int64)
            offs_am = offs_am.to(gl.int64)
            k_base = k_lo.to(gl.int64)
            step_b = BLOCK_K * gl.to_tensor(stride_bk).to(gl.int64)  # (a unit stride is a constexpr int)
            step_a = BLOCK_K * gl.to_tensor(stride_ak).to(gl.int64)
        b_ptrs = b_ptr + gl.expand_dims(offs_bn * stride_bn, 1) + gl.expand_dims((k_base + offs_bk) * stride_bk, 0)
        a_ptrs = a_ptr + gl.expand_dims((k_base + offs_ak) * stride_ak, 1) + gl.expand_dims(offs_am * stride_am, 0)

        bt = gl.load(b_ptrs, mask=n_in & gl.expand_dims(k_lo + offs_bk < k_hi, 0), other=0.0)
        at = gl.load(a_ptrs, mask=gl.expand_dims(k_lo + offs_ak < k_hi, 1) & m_in, other=0.0)
        acc = gl.zeros([BLOCK_N, BLOCK_M], ACC_DTYPE, layout=mma)
        # MAIN LOOP: k-block k's loads issued, then the MMAs of the k-block before (the last loads are masked off)
        for k in range(k_lo + BLOCK_K, k_hi + BLOCK_K, BLOCK_K):
            b_ptrs += step_b
            a_ptrs += step_a
            bt_next = gl.load(b_ptrs, mask=n_in & gl.expand_dims(k + offs_bk < k_hi, 0), other=0.0)
            at_next = gl.load(a_ptrs, mask=gl.expand_dims(k + offs_ak < k_hi, 1) & m_in, other=0.0)
            acc = mma_v2(gl.convert_layout(bt, bt_op), gl.convert_layout(at, at_op), acc)
            bt = bt_next
            at = at_next

        # EPILOGUE: C^T's tile at C's transposed addresses (C's columns are its rows), masked at M and N
        rows = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, mma))
        cols = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, mma))
        inside = gl.expand_dims(rows < N, 1) & gl.expand_dims(cols < M, 0)
        first = s * M
        if INDEX_64:
            rows = rows.to(gl.int64)
            cols = cols.to(gl.int64)
            first = s.to(gl.int64) * M
        if PARTIAL:  # slice s of the row-major (slices, M, N) workspace: its row first + m
            offs = gl.expand_dims((first + cols) * N, 0) + gl.expand_dims(rows, 1)
            gl.store(p_ptr + offs, acc.to(gl.float32), mask=inside)
        else:
            offs = gl.expand_dims(cols * stride_cm, 0) + gl.expand_dims(rows * stride_cn, 1)
            gl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=inside)


# ----------------------------------------------------------------------------------------------------------------
# Host launcher
# ----------------------------------------------------------------------------------------------------------------
def launches(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, acc_fp16: bool, config: Config) -> list[Spec]:
    """C = A @ B reading A and B in place (any strides; the caller has validated): one launch over (column blocks
    x row blocks, slices), then, where K is split, the reduction of the slices' fp32 partials into C."""
    refuse_here(NAME)
    check_config(config)
    m, k = a.shape
    n = b.shape[1]
    k_slice, split = slices(k, config)
    p = torch.empty((split, m, n), dtype=torch.float32, device=a.device) if split > 1 else c
    grid = (cdiv(m, config.block_m) * cdiv(n, config.block_n), split)
    a_kmajor = a.stride(1) == 1  # (a layout hint: any strides give the right result)
    b_kmajor = b.stride(0) == 1 and b.stride(1) != 1
    vec_a, vec_b = vectors(a, 1 if a_kmajor else 0), vectors(b, 0 if b_kmajor else 1)
    a_strides = (a.stride(0) // vec_a, 1) if a_kmajor else (a.stride(0), a.stride(1) // vec_a)
    b_strides = (b.stride(0), b.stride(1) // vec_b) if b_kmajor else (b.stride(0) // vec_b, b.stride(1))
    args = (a, b, c, p, m, n, k, k_slice, *a_strides, *b_strides, *c.stride(), acc_fp16,
            needs_int64_indexing(a, b, c, p), config.block_m, config.block_n, config.block_k, a_kmajor, b_kmajor,
            vec_a, vec_b, split > 1)
    specs = [Spec(hgemm_gluon_stream_kernel, grid, args, config.num_warps, 1)]
    if split > 1:
        reduce = (p, c, n, split, m * n, c.stride(0), c.stride(1), needs_int64_indexing(c, p), REDUCE_BLOCK)
        specs.append(Spec(splitk_reduce_kernel, (cdiv(m * n, REDUCE_BLOCK),), reduce, 4, 1))
    return specs


def inspect_source(cfg: Config, dtype: str = "fp16", a_kmajor: bool = True, b_kmajor: bool = False,
                   vec_a: int = 1, vec_b: int = 1) -> tuple:
    """What `triton.compile(GluonASTSource(...))` needs to build the kernel as a launch on operands of `dtype`
    ("fp16", "bf16") at unit strides along K for A (a_kmajor) and along N for B (not b_kmajor), loaded `vec_a` and
    `vec_b` elements at a time (`vectors`; 1: the other strides any, their rows off the 16-byte grid), K split:
    (kernel, signature, constexprs, attrs), for `python -m compare inspect` and tests/test_gluon.py."""
    sig = {"a_ptr": f"*{dtype}", "b_ptr": f"*{dtype}", "c_ptr": f"*{dtype}", "p_ptr": "*fp32", "M": "i32",
           "N": "i32", "K": "i32", "K_SLICE": "i32", "stride_am": "i32", "stride_ak": "i32", "stride_bk": "i32",
           "stride_bn": "i32", "stride_cm": "i32", "stride_cn": "constexpr"}
    unit = {"stride_ak" if a_kmajor else "stride_am": 1, "stride_bk" if b_kmajor else "stride_bn": 1}
    sig.update(dict.fromkeys(unit, "constexpr"))
    consts = dict(stride_cn=1, **unit, ACC_FP16=False, INDEX_64=False, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
                  BLOCK_K=cfg.block_k, A_KMAJOR=a_kmajor, B_KMAJOR=b_kmajor, VEC_A=vec_a, VEC_B=vec_b, PARTIAL=True)
    attrs = {(i,): [["tt.divisibility", 16]] for i in (0, 1, 2, 3)}  # the pointers
    return hgemm_gluon_stream_kernel, sig, consts, attrs


def compile_options(cfg: Config) -> dict:
    """The options `triton.compile` takes for a config's kernel."""
    return dict(num_warps=cfg.num_warps, num_stages=1)

