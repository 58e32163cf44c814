"""The hand-written HGEMMs' call path below autograd: checks, layout copies, the per-call plan cache, the launch.

`ptx_kernels.hgemm` routes here, or through the operator (ops.py) when an input requires grad; the operator's
implementation routes here too. Nothing here imports the package's __init__ or ops.py, so they form no import cycle
(tests/test_imports.py).
"""
from __future__ import annotations

import torch

from hgemm_common.errors import HgemmError, HgemmTypeError, HgemmValueError, pick
from hgemm_common.operands import is_col_major, is_row_major, resolved, rows_aligned16
from hgemm_common.plans import LRU, byte_extents, call_key, out_overlaps
from hgemm_common.validation import check_acc, check_dtype_offered, finish_empty, validate

from .build import load_for
from .variants import BY_NAME, VARIANTS, Variant, a_col_in_place, any_strides

ACCUMULATIONS = ("fp32", "fp16")
DEFAULT_KERNEL = "wmma_multistage"  # hgemm's kernel= when none is given
# How a launcher that plans (wgmma_persistent) chose its plan, the binding's PlanSource (csrc/hgemm.cuh) by code:
# pinned by tile= or split=, a rule, or the time model (csrc/blocks/plan_model.cuh), named by the term of the
# winner's predicted time that contributed most (hopper::ModelTerm, in this order: compare.ptx_model's too).
MODEL_TERMS = ("latency", "compute", "l2", "epilogue", "split", "hbm", "reduce")
PLAN_SOURCES = (None, "pinned", "rule") + tuple(f"model: {t}" for t in MODEL_TERMS)
# (kernel, acc, the binding's report, (a_col, b_col), copies) of the latest hgemm / sparse_hgemm call
_last: list = [None]
# hgemm's plans: call_key(a, b, out, kernel, acc, tile, split, sms) of a call that launched with no copies -> (extension,
# a_col, b_col, byte_extents of A, B and out). A later call with the same key (same shapes, strides, dtypes, devices
# and alignment bits, so validation and every layout decision would come out the same) launches at once; only the
# overlap of out= with A and B, which depends on the addresses, is tested again.
_PLANS = LRU(256)


def last_launch() -> dict:
    """What the most recent `hgemm` / `sparse_hgemm` call launched: "variant" (the kernel= it was given, or the one
    "auto" chose), grid, block, shared memory, whether the kernel read A and B column-major (a_col_major,
    b_col_major), any copies it made, the block tile (tile_m, tile_n) where the kernel
    chose between several (else None), the K parts of a split-K launch (else None), "kernel", the one whose
    code ran (wgmma_persistent hands a few rows of A against a B off the 16-byte grid, or of a column-major A against
    a large B, to mma_stream, skinny outputs to wgmma_splitk and B with rows off the 32-byte sectors to
    wgmma_cluster; else the one given), and "plan", how wgmma_persistent chose its plan (PLAN_SOURCES: "pinned",
    "rule", or "model: TERM" with the term of the model that decided; "rule" too where this module hands the call
    to mma_stream before the launch, hands_to_stream; None for every other variant)."""
    if _last[0] is None:
        return {}
    variant, acc, (info, ran), (a_col, b_col), copies = _last[0]
    plan = PLAN_SOURCES[info[8]] if len(info) > 8 else None
    if plan is None and variant == "wgmma_persistent":
        plan = "rule"  # launched_variant handed it to mma_stream (the launcher's hands_to_stream, decided here)
    return dict(variant=variant, acc=acc, grid=(info[0], info[1]), block=info[2], smem_bytes=info[3],
                a_col_major=a_col, b_col_major=b_col, copies=list(copies), tile=(info[5], info[6]) if info[5] else None,
                split=info[7] or None, kernel=ran or variant, plan=plan)


def check_variant(kernel: str, acc: str, kind: str = "dense") -> Variant:
    """The record of `kernel`, or an HgemmValueError naming the choices when it or `acc` is not offered, or when it
    solves another problem kind (a 2:4 sparse kernel takes compressed A: `sparse_hgemm`)."""
    who = "hgemm" if kind == "dense" else "sparse_hgemm"
    v = BY_NAME.get(kernel)
    if v is None or v.kind != kind:
        other = "ptx_kernels.sparse_hgemm" if v is not None and v.kind == "sparse" else "ptx_kernels.hgemm"
        hint = f" ({kernel!r} is a {v.kind} kernel: {other})" if v is not None else ""
        raise HgemmValueError(f"{who}: unknown kernel {kernel!r}{hint}; choose one of "
                              f"{[x.name for x in VARIANTS if x.kind == kind]}")
    if acc not in v.accs:
        raise HgemmValueError(f"{who}: kernel {kernel!r} supports acc in {v.accs}, got {acc!r}")
    return v


def check_dtype(v: Variant, dtype: str, acc: str, who: str = "hgemm") -> None:
    """Raise a one-line error when kernel `v` does not take `dtype` inputs (HgemmTypeError naming the dtypes it
    takes) or `dtype` does not offer `acc` (HgemmValueError: bf16 accumulates in fp32 only)."""
    check_dtype_offered(dtype, v.dtypes, f"{who}: kernel {v.name!r}")
    check_acc(dtype, acc, who)


def _aligned_buffer(t: torch.Tensor) -> torch.Tensor:
    """An uninitialized row-major buffer of t's shape and dtype whose rows start on 128-byte boundaries (leading
    dimension rounded up to 64 elements of 2 bytes).
    16 bytes would do for cp.async and TMA, but a TMA box row that straddles five 32-byte sectors instead of four
    cost the Hopper kernels up to a quarter of their speed on odd shapes (measured: docs/design/hopper.md); the copy
    is made anyway, so it is made aligned."""
    rows, cols = t.shape
    ld = (cols + 63) // 64 * 64
    return torch.empty((rows, ld), dtype=t.dtype, device=t.device)[:, :cols]


def _aligned_copy(t: torch.Tensor) -> torch.Tensor:
    """A row-major copy of t (its dtype, any strides) in an `_aligned_buffer`, by torch's copy."""
    view = _aligned_buffer(t)
    view.copy_(t)
    return view


def _a_layout(a: torch.Tensor, col_ok: bool, copies: list[str]) -> tuple[torch.Tensor, bool]:
    """A as the kernel reads it, and whether it is column-major: row-major in place, column-major in place where the
    kernel reads it so (`col_ok`), other strides as a row-major copy (named in `copies`)."""
    if is_row_major(a):
        return a, False
    if col_ok and is_col_major(a):
        return a, True
    copies.append("A to row-major")
    return a.contiguous(), False


def _b_layout(b: torch.Tensor, copies: list[str]) -> tuple[torch.Tensor, bool]:
    """B as the kernels read it, and whether it is column-major: row- or column-major in place, other strides as a
    row-major copy (named in `copies`)."""
    if is_row_major(b):
        return b, False
    if is_col_major(b):
        return b, True
    copies.append("B to row-major")
    return b.contiguous(), False


def _aligned(t: torch.Tensor, col: bool, name: str, copies: list[str], staged: list) -> torch.Tensor:
    """Operand `name` (A or B) with 16-byte aligned rows (of its storage order: a column-major one's columns): t
    itself where they are, else an `_aligned_buffer` in the same order, named in `copies`, whose copy (source rows,
    buffer rows) is appended to `staged` for `_stage`."""
    if rows_aligned16(t, t.stride(1) if col else t.stride(0)):
        return t
    if (t.shape[1] if col else t.shape[0]) == 1 and t.data_ptr() % 16 == 0:
        # one row in storage order (a single row of A, a K of 1): its leading dimension is never stepped over, so
        # the same view with a 16-byte multiple there (what a TMA descriptor requires of it) reads the same memory
        ld = -(-(t.shape[0] if col else t.shape[1]) // 8) * 8
        return t.as_strided(tuple(t.shape), (1, ld) if col else (ld, 1))
    copies.append(f"{name} to 16-byte aligned rows")
    rows = t.t() if col else t
    buf = _aligned_buffer(rows)
    staged.append((rows, buf))
    return buf.t() if col else buf


def _stage(ext, staged: list) -> None:
    """The staging copies `_aligned` set up, A's and B's in one launch of the extension's (`ext`) stage_copy
    (csrc/host/stage_copy.cu: 16-byte stores, loads as wide as the source rows' alignment allows), not a torch
    copy each."""
    if staged:
        ext.stage_copy([src for src, _ in staged], [buf for _, buf in staged])


def _takes_split(v: Variant, split) -> bool:
    """Whether hgemm(split=split) pins a K split kernel `v` takes: one of `Variant.splits`, or any count up to
    `Variant.max_split` where the kernel splits over the grid."""
    if isinstance(split, bool) or not isinstance(split, int):
        return False
    return split in v.splits or 1 <= split <= v.max_split


def _c_for_kernel(out: torch.Tensor, copies: list[str]) -> torch.Tensor:
    """Where the kernel writes C: `out` itself when it is row-major, else a row-major temporary that is copied into
    `out` afterwards (named in `copies`); a negative view of C (neg bit set) too, since the kernels write raw memory
    and copy_ writes the values' negatives into it."""
    if is_row_major(out) and not out.is_neg():
        return out
    copies.append("C through a row-major temporary" + (" (negative view)" if out.is_neg() else ""))
    return torch.empty(tuple(out.shape), dtype=out.dtype, device=out.device)


# tile=: the block tile, where a kernel has two for an accumulation (`Variant.block_fp16`: the pipelined sm_80 kernels
# and mma_sp with fp16 accumulation); GemmArgs::tile's values (csrc/hgemm.cuh).
TILES = {"auto": 0, "large": 1, "base": 2}
# schedule=: the order and grouping of a persistent sparse kernel's tiles (GemmArgs::schedule): bands of 8 or 16 tile
# rows on single blocks, or clusters of two blocks sharing B by TMA multicast (bands of 8). The kernels that read it:
SCHEDULES = {"auto": 0, "band8": 1, "band16": 2, "cluster2": 3}
SCHEDULED = ("wgmma_sp",)
# sms=: the SM count a stream-K schedule sees (GemmArgs::sms), below the device's; the kernels that take it:
SM_SCHEDULED = ("wgmma_streamk",)
_ARCH: dict[int, int] = {}


def check_tile(v: Variant, acc: str, tile: str, who: str) -> None:
    """One-line errors for a tile= that is not a tile name, or names a second tile where `v` has one for `acc`."""
    if tile not in TILES:
        raise HgemmValueError(f"{who}: tile must be one of {sorted(TILES)}, got {tile!r}")
    if tile != "auto" and not (acc == "fp16" and v.block_fp16):
        raise HgemmValueError(f"{who}: kernel {v.name!r} has one tile for acc={acc!r}; tile={tile!r} needs a kernel "
                              "with two (fp16 accumulation on the pipelined kernels)")


def check_arch(v: Variant, device: torch.device, who: str) -> None:
    """An HgemmError when the device is older than the record's minimum arch."""
    arch = _arch(device)
    if arch < v.min_arch:
        raise HgemmError(f"{who}: kernel {v.name!r} needs sm_{v.min_arch}; {device} is sm_{arch}")


def _arch(device: torch.device) -> int:
    """Compute capability x 10 of a CUDA device, asked once per device (it is on every call's path)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _ARCH:
        major, minor = torch.cuda.get_device_capability(index)
        _ARCH[index] = major * 10 + minor
    return _ARCH[index]


def check_sms(v: Variant, sms) -> None:
    """One-line errors for an sms= that is not a positive int, or given to a kernel whose schedule does not take
    it (`SM_SCHEDULED`)."""
    if v.name not in SM_SCHEDULED:
        raise HgemmValueError(f"hgemm: sms= needs a kernel whose schedule takes it ({list(SM_SCHEDULED)}); kernel "
                              f"{v.name!r} does not")
    if isinstance(sms, bool) or not isinstance(sms, int) or not 1 <= sms <= 1 << 16:
        raise HgemmValueError(f"hgemm: sms must be an int from 1 to {1 << 16}, got {sms!r}")


def hgemm(a: torch.Tensor, b: torch.Tensor, kernel: str = DEFAULT_KERNEL, acc: str = "fp32",
          out: torch.Tensor | None = None, tile: str = "auto", split: int | None = None,
          sms: int | None = None) -> torch.Tensor:
    """`ptx_kernels.hgemm` below autograd (its arguments, positional): the cached plan of this kind of call, or
    the first call's checks, layout copies and launch."""
    try:
        key = call_key(a, b, out, kernel, acc, tile, split, sms)
        plan = _PLANS.get(key)
        if plan is not None and (a.is_neg() or b.is_neg() or (out is not None and out.is_neg())):
            plan = None  # negative views are resolved into copies (below)
    except (AttributeError, TypeError):  # not tensors, or unhashable arguments: the checks below name the problem
        key = plan = None
    if plan is not None:
        ext, a_col, b_col, extents, launched = plan
        if out is None:
            out = a.new_empty(a.shape[0], b.shape[1])  # A's dtype and device, contiguous
        elif out_overlaps(extents, a, b, out):
            validate(a, b, out, allow_cpu=False)  # raises the overlap error
        _record_launch(kernel, acc, ext.hgemm_launch(launched, a, b, out, a_col, b_col, acc == "fp16", TILES[tile],
                                                     split or 0, sms or 0), a_col, b_col, ())
        return out
    v = check_variant(kernel, acc)
    check_tile(v, acc, tile, "hgemm")
    if split is not None and not _takes_split(v, split):
        splitting = [x.name for x in VARIANTS if x.splits]
        takes = v.splits + ((f"1-{v.max_split}",) if v.max_split else ())
        raise HgemmValueError(f"hgemm: split={split!r} needs a kernel that splits K ({splitting}) and one of its "
                              f"splits; kernel {kernel!r} takes {takes}")
    if sms is not None:
        check_sms(v, sms)
    p = validate(a, b, out, allow_cpu=False)
    check_dtype(v, p.dtype, acc)
    if p.empty:
        return finish_empty(p)
    check_arch(v, a.device, "hgemm")
    if max(p.m, p.n, p.k) > 2**31 - 1 - 256:
        raise HgemmValueError(f"hgemm: PTX kernels index M, N, K with 32-bit ints; got {p.m}x{p.n}x{p.k}")
    v, launched = launched_variant(v, p.m, p.n, p.k, tile, split, b, a)
    ext = load_for(v)
    copies = []
    a, b, a_col, b_col, restrided = prepared(v, a, b, split, copies, ext)
    c = _c_for_kernel(p.out, copies)
    report = ext.hgemm_launch(launched, a, b, c, a_col, b_col, acc == "fp16", TILES[tile], split or 0, sms or 0)
    if c is not p.out:
        p.out.copy_(c)
    _record_launch(kernel, acc, report, a_col, b_col, copies)
    if key is not None and not copies and not restrided:
        _PLANS.put(key, (ext, a_col, b_col, byte_extents(a, b, p.out), launched))
    return p.out


def launched_variant(v: Variant, m: int, n: int, k: int, tile: str, split, b: torch.Tensor,
                     a: torch.Tensor) -> tuple[Variant, str]:
    """The variant `hgemm(kernel=v.name)` launches on an M x N x K problem with operands A and B, and its name:
    mma_stream where wgmma_persistent's plan hands the problem to it (`hands_to_stream`; A column-major: what
    wgmma_persistent reads in place as such), else v itself."""
    if hands_to_stream(v, m, n, k, tile, split, b_rows_off16(b), is_col_major(a) and not is_row_major(a)):
        return BY_NAME["mma_stream"], "mma_stream"
    return v, v.name


def prepared(v: Variant, a: torch.Tensor, b: torch.Tensor, split, copies: list[str], ext):
    """(a, b, a_col, b_col, restrided): the operands as variant `v` reads them on a call with hgemm's `split`
    (negative views resolved; layouts and rows off the 16-byte grid copied where the kernel needs them, each copy
    named in `copies`; rows off the grid by the extension `ext`'s staging copy), whether each is column-major, and
    whether an operand was re-strided rather than copied."""
    a, b = resolved(a, "A", copies), resolved(b, "B", copies)
    if any_strides(v):
        return a, b, False, False, False
    a, a_col = _a_layout(a, a_col_in_place(v, split), copies)
    b, b_col = _b_layout(b, copies)
    if v.a_rows_any and stream_copies_a(a, b.shape[1]):
        copies.append("A to row-major" if a_col else "A to 16-byte aligned rows")
        a, a_col = _aligned_copy(a), False
    restrided = False
    if v.alignment in ("rows16", "tma"):
        a0, b0, staged = a, b, []
        if not v.a_rows_any:
            a = _aligned(a, a_col, "A", copies, staged)
        if not v.b_rows_any:
            b = _aligned(b, b_col, "B", copies, staged)
        _stage(ext, staged)
        # an operand of one storage row re-strided (not copied): the cached plan would launch the caller's own
        # view, whose leading dimension the kernel refuses, so such a call keeps no plan
        restrided = a is not a0 or b is not b0
    return a, b, a_col, b_col, restrided


# wgmma_persistent hands a few rows of A against a B off the 16-byte grid, or of a column-major A against a large B,
# to mma_stream (csrc/sm90/handoff.h, hands_to_stream: its kStreamRows, kStreamMinB and kStreamOffRows, which a CPU
# test reads there). Such a call launches mma_stream from here, as the hand-off would, so that B's rows off the
# 16-byte grid are read in place (mma_stream's b_rows_any), not first copied for wgmma_persistent's TMA
# descriptors: the same kernel and plan, the same bits.
# STREAM_ROWS is also the rows of A one of mma_stream's 16-row units takes (its kRows; past them it runs 32-row
# units).
STREAM_ROWS, STREAM_MIN_B = 16, 1 << 22
STREAM_OFF_ROWS = 32


def b_rows_off16(b: torch.Tensor) -> bool:
    """Whether B is row- or column-major (read in place by the tile kernels) with its base or rows (of its storage
    order) off 16 bytes: what wgmma_persistent's TMA would copy first, and handoff.h's b_rows_off16."""
    if is_row_major(b):
        return not rows_aligned16(b, b.stride(0))
    if is_col_major(b):
        return not rows_aligned16(b, b.stride(1))
    return False  # copied to row-major either way, into aligned rows


# mma_stream reads A in place at any alignment, in 16-byte loads where A is row-major with aligned rows. On a large
# problem, an A read otherwise costs more than a copy of it into aligned row-major rows (measured on the H200:
# docs/design/hopper.md, "The bandwidth path"): column-major A past one 16-row block against a B of
# STREAM_COPY_A_COL elements or more, row-major A off the grid against one of STREAM_COPY_A_ROWS or more.
STREAM_COPY_A_COL, STREAM_COPY_A_ROWS = 1 << 23, 1 << 28


def stream_copies_a(a: torch.Tensor, n: int) -> bool:
    """Whether mma_stream's call copies A (row- or column-major, M x K, against a K x `n` B) into aligned row-major
    rows first (STREAM_COPY_A_COL, STREAM_COPY_A_ROWS); the kernel's 16-byte loads need unit stride along K, and the
    rows' and base's 16-byte alignment unless there is one row."""
    m, k = a.shape
    if a.stride(1) != 1:
        return m > STREAM_ROWS and n * k >= STREAM_COPY_A_COL
    vector = (a.stride(0) % 8 == 0 or m == 1) and a.data_ptr() % 16 == 0
    return not vector and n * k >= STREAM_COPY_A_ROWS


def hands_to_stream(v: Variant, m: int, n: int, k: int, tile: str, split, b_off16: bool = False,
                    a_col: bool = False) -> bool:
    """Whether `hgemm(kernel=v.name)` on an M x N x K problem runs mma_stream: wgmma_persistent's own plan (no tile or
    split pinned) with B's rows off 16 bytes (`b_off16`, `b_rows_off16`) on M <= STREAM_OFF_ROWS; with A
    column-major (`a_col`) on M <= STREAM_ROWS and N x K >= STREAM_MIN_B too. An aligned B stays on the tile kernels
    otherwise."""
    off = b_off16 and m <= STREAM_OFF_ROWS
    col = a_col and m <= STREAM_ROWS and n * k >= STREAM_MIN_B
    return v.name == "wgmma_persistent" and tile == "auto" and split is None and (off or col)


def planned(a: torch.Tensor, b: torch.Tensor, *, kernel: str, acc: str = "fp32"):
    """The launch `hgemm(a, b, kernel=kernel, acc=acc)` (no out=, tile or split) keeps for this kind of call, once
    a call of this kind has run without copies: a function (a, b, out) -> None that launches the kernel on operands
    of the same kind (shapes, strides, dtypes, devices and 16-byte alignment as a and b; out a fresh row-major
    (M, N)) with no validation in Python (the binding's own checks remain), recorded for `last_launch()`. None
    before such a call, and for operands that carry the neg bit or are not tensors. For a caller that keeps one
    plan per kind of call of its own (`compare.nn.HGEMMLinear`)."""
    try:
        if a.is_neg() or b.is_neg():
            return None
        plan = _PLANS.get(call_key(a, b, None, kernel, acc, "auto", None, None))
    except (AttributeError, TypeError):
        return None
    if plan is None:
        return None
    ext, a_col, b_col, _, launched = plan
    hgemm_launch, acc_fp16 = ext.hgemm_launch, acc == "fp16"

    def launch(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
        _last[0] = (kernel, acc, hgemm_launch(launched, a, b, out, a_col, b_col, acc_fp16, 0, 0), (a_col, b_col), ())

    return launch


def _record_launch(kernel: str, acc: str, report, a_col: bool, b_col: bool, copies) -> None:
    """Keep what the binding reported ({grid, block, smem, ..., tile, split}, the kernel that ran) for last_launch
    (which builds its dict only when asked: this runs on every call)."""
    _last[0] = (kernel, acc, report, (a_col, b_col), copies)


def _sparse_variant(kernel: str, acc: str, device: torch.device) -> Variant:
    """kernel="auto": the sparse record with the highest min_arch the device offers (the Hopper kernel on sm_90)."""
    if kernel != "auto":
        return check_variant(kernel, acc, kind="sparse")
    arch = _arch(device)
    offered = [v for v in VARIANTS if v.kind == "sparse" and v.offered_on(arch) and acc in v.accs]
    if not offered:
        raise HgemmError(f"sparse_hgemm: no 2:4 sparse kernel runs on sm_{arch}")
    return max(offered, key=lambda v: v.min_arch)


def _legacy_sparse_tile(v: Variant, acc: str, tile: int) -> tuple[str, str]:
    """(tile, schedule) for the integer tile= (0-3) sparse_hgemm took before it had schedule=, as the kernels read
    it then: 0 their choice; wgmma_sp 1 / 2 / 3 the schedules band8 / band16 / cluster2; mma_sp with fp16
    accumulation 1 / 2 the large / base tile, and 3, or any with fp32 accumulation (one tile), its choice."""
    if v.name in SCHEDULED:
        return "auto", ("auto", "band8", "band16", "cluster2")[tile]
    if acc == "fp16" and v.block_fp16:
        return ("auto", "large", "base", "auto")[tile], "auto"
    return "auto", "auto"


def sparse_hgemm(values: torch.Tensor, meta: torch.Tensor, b: torch.Tensor, *, kernel: str | None = None,
                 acc: str = "fp32", out: torch.Tensor | None = None, check_meta: bool = True,
                 tile: str | int = "auto", schedule: str = "auto", variant: str | None = None) -> torch.Tensor:
    """C = A @ B in fp16 with A 2:4 sparse along K, given compressed: `values, meta = ptx_kernels.sparse.compress(
    ptx_kernels.sparse.prune_2to4(a))` (M x K dense -> (M, Kp/2) values and (Kp/32, ceil(M/16), 16) metadata, Kp =
    K rounded up to 32). K is B's first dimension.

    kernel: "auto" (the default: the Hopper kernel on sm_90, else mma_sp) or a name from `variants("sparse")`;
    variant: another name for `kernel` (give one of the two).
    acc: "fp32" or "fp16" accumulation. out: preallocated fp16 (M, N). check_meta: reject metadata whose 4-bit
    chunks are not two ascending indices (a few small kernels per call; `SparseA` checks once).
    B: row- or column-major read in place, other strides copied (`last_launch()["copies"]`). Not differentiable: an
    argument that requires grad (with grad mode on) is refused rather than its gradient lost.
    tile: the block tile, as hgemm's: "auto" lets the kernel choose; mma_sp with acc="fp16" has two, "large"
    (256x256) and "base" (128x256). The integers 0-3 tile= took before schedule= existed are still taken.
    schedule: the order of a persistent kernel's tiles (wgmma_sp): "auto" (its choice: clusters from 8 rounds of
    tiles per SM, else single blocks), "band8" / "band16" (single blocks walking bands of 8 / 16 tile rows),
    "cluster2" (clusters of two blocks sharing B by TMA multicast, bands of 8).
    """
    from . import sparse as S

    if variant is not None:
        kernel = pick("sparse_hgemm", "kernel", kernel, "variant", variant, "auto")
    elif kernel is None:
        kernel = "auto"
    if torch.is_grad_enabled() and any(getattr(t, "requires_grad", False) for t in (values, meta, b, out)):
        raise HgemmError("sparse_hgemm: not differentiable, but an argument requires grad (its gradient would be "
                         "lost); detach the tensors or call it under torch.no_grad()")

    if not isinstance(values, torch.Tensor) or not isinstance(meta, torch.Tensor):
        raise HgemmTypeError("sparse_hgemm: values and meta must be tensors (from ptx_kernels.sparse.compress)")
    for name, t in (("values", values), ("meta", meta)):
        if t._is_zerotensor():
            raise HgemmValueError(f"sparse_hgemm: {name} is a ZeroTensor (torch._efficientzerotensor: no memory to "
                                  "read)")
    if values.dim() != 2:
        raise HgemmValueError(f"sparse_hgemm: compressed values must be 2-D, got shape {tuple(values.shape)}")
    if not isinstance(b, torch.Tensor) or b.dim() != 2:
        raise HgemmValueError("sparse_hgemm: mat2 must be a 2-D tensor")
    m, k = values.shape[0], b.shape[0]
    # the dense A's facts (dtype, device, M x K) without its memory: torch.mm's checks and words for B and out
    proxy = values.new_zeros(()).expand(m, k) if values.dtype == torch.float16 else values
    if isinstance(tile, int) and not isinstance(tile, bool):
        if tile not in (0, 1, 2, 3):
            raise HgemmValueError(f"sparse_hgemm: tile must be one of {sorted(TILES)} (or the older 0, 1, 2, 3), "
                                  f"got {tile!r}")
        if schedule != "auto":
            raise HgemmValueError(f"sparse_hgemm: the integer tile={tile} is the older form of schedule=; give one "
                                  f"of the two, got schedule={schedule!r} too")
    elif tile not in TILES:
        raise HgemmValueError(f"sparse_hgemm: tile must be one of {sorted(TILES)}, got {tile!r}")
    if schedule not in SCHEDULES:
        raise HgemmValueError(f"sparse_hgemm: schedule must be one of {list(SCHEDULES)}, got {schedule!r}")
    S.check_compressed(values, meta, m, k)
    p = validate(proxy, b, out, allow_cpu=False)
    v = _sparse_variant(kernel, acc, values.device)
    if not isinstance(tile, str):
        tile, schedule = _legacy_sparse_tile(v, acc, tile)
    check_tile(v, acc, tile, "sparse_hgemm")
    if schedule != "auto" and v.name not in SCHEDULED:
        raise HgemmValueError(f"sparse_hgemm: kernel {v.name!r} has one schedule; schedule={schedule!r} needs one of "
                              f"{list(SCHEDULED)}")
    if check_meta:
        S.check_meta_nibbles(meta)
    if p.empty:
        return finish_empty(p)
    check_arch(v, values.device, "sparse_hgemm")
    if max(p.m, p.n, S.padded_k(p.k)) > 2**31 - 1 - 256:
        raise HgemmValueError(f"sparse_hgemm: PTX kernels index M, N, K with 32-bit ints; got {p.m}x{p.n}x{p.k}")
    ext = load_for(v)
    copies = []
    values = resolved(values, "values", copies)
    if not is_row_major(values) or not rows_aligned16(values, values.stride(0)):
        values = _aligned_copy(values)
        copies.append("values to 16-byte aligned rows")
    if not meta.is_contiguous() or meta.data_ptr() % 16:
        meta = meta.clone()
        copies.append("metadata to a contiguous copy")
    b, b_col = _b_layout(resolved(b, "B", copies), copies)
    staged = []
    b = _aligned(b, b_col, "B", copies, staged)
    _stage(ext, staged)
    c = _c_for_kernel(p.out, copies)
    report = ext.sparse_launch(v.name, values, meta, b, c, p.k, b_col, acc == "fp16", TILES[tile],
                               SCHEDULES[schedule])
    if c is not p.out:
        p.out.copy_(c)
    _record_launch(v.name, acc, report, False, b_col, copies)
    return p.out
