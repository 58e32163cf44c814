"""Hand-written CUDA/PTX HGEMMs callable from PyTorch (built with load_inline on first use)."""
from __future__ import annotations

import torch

from hgemm_common.operands import is_col_major, is_row_major, rows_aligned16
from hgemm_common.validation import finish_empty, validate

from .build import BuildError, load
from .variants import BY_NAME, VARIANTS, Variant, any_strides

__all__ = ["BuildError", "Variant", "check_variant", "hgemm", "last_launch", "load", "variants"]

ACCUMULATIONS = ("fp32", "fp16")
_last: dict = {}


def variants() -> tuple[Variant, ...]:
    """Every variant in ladder order, with what it supports."""
    return VARIANTS


def last_launch() -> dict:
    """What the most recent `hgemm` call launched: variant, grid, block, shared memory, any copies it made, the
    block tile (tile_m, tile_n) where the variant chose between several (else None), the K parts of a split-K
    launch (else None), and the variant whose kernel ran ("kernel": wgmma_persistent hands skinny outputs to
    wgmma_splitk and some row-major B to wgmma_cluster; else the variant itself)."""
    return dict(_last)


def check_variant(variant: str, acc: str) -> Variant:
    """The registry entry of `variant`, or a ValueError naming the choices when it or `acc` is not offered."""
    v = BY_NAME.get(variant)
    if v is None:
        raise ValueError(f"hgemm: unknown variant {variant!r}; choose one of {[x.name for x in VARIANTS]}")
    if acc not in v.accs:
        raise ValueError(f"hgemm: variant {variant!r} supports acc in {v.accs}, got {acc!r}")
    return v


def _aligned_copy(t: torch.Tensor) -> torch.Tensor:
    """A row-major copy of t whose rows start on 128-byte boundaries (leading dimension rounded up to 64 halves).
    16 bytes would do for cp.async and TMA, but a TMA box row that straddles five 32-byte sectors instead of four
    cost the Hopper kernels up to a quarter of their speed (4095 x 4097 x 4099: 318 -> 422 TFLOPS,
    docs/ladders/hopper.md); the copy is made anyway, so it is made aligned."""
    rows, cols = t.shape
    ld = (cols + 63) // 64 * 64
    buf = torch.empty((rows, ld), dtype=t.dtype, device=t.device)
    view = buf[:, :cols]
    view.copy_(t)
    return view


TILES = {"auto": 0, "large": 1, "base": 2}
_ARCH: dict[int, int] = {}


def _arch(device: torch.device) -> int:
    """Compute capability x 10 of a CUDA device, asked once per device (it is on every call's path)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _ARCH:
        major, minor = torch.cuda.get_device_capability(index)
        _ARCH[index] = major * 10 + minor
    return _ARCH[index]


def hgemm(a: torch.Tensor, b: torch.Tensor, *, variant: str = "wmma_multistage", acc: str = "fp32",
          out: torch.Tensor | None = None, tile: str = "auto", split: int | None = None) -> torch.Tensor:
    """C = A @ B in fp16 on one hand-written kernel.

    variant: a name from `variants()`. acc: "fp32" or "fp16" accumulation. out: preallocated fp16 (M, N) tensor.
    tile: where the variant has two block tiles for `acc` (`Variant.block_fp16`: the pipelined variants with fp16
    accumulation), "auto" picks by wave count, "large" forces `block_fp16`, "base" forces `block`.
    Layouts the variant cannot read in place (column-major A; strided views; unaligned rows for cp.async
    variants) are copied first; `last_launch()["copies"]` lists them.
    split: for the variants that split K over a cluster (`Variant.extra["splits"]`: wgmma_persistent, wgmma_splitk),
    None lets the launcher choose, 1 never splits, 2 or 4 pin the parts; `last_launch()["split"]` says which ran.
    Inputs that require grad go through the autograd-recording operator `torch.ops.tensorcore_hgemm.ptx_hgemm`.
    """
    if torch.is_grad_enabled() and (getattr(a, "requires_grad", False) or getattr(b, "requires_grad", False)):
        if out is not None or tile != "auto" or split is not None:
            raise RuntimeError("hgemm(): out=, tile= and split= are not recorded by autograd, but an input requires grad; "
                               "drop them or detach the inputs")
        from .ops import ptx_hgemm
        return ptx_hgemm(a, b, variant, acc)
    v = check_variant(variant, acc)
    if tile not in TILES:
        raise ValueError(f"hgemm: tile must be one of {sorted(TILES)}, got {tile!r}")
    if tile != "auto" and not (acc == "fp16" and v.block_fp16):
        raise ValueError(f"hgemm: variant {variant!r} has one tile for acc={acc!r}; tile={tile!r} needs a variant "
                         "with two (fp16 accumulation on the pipelined variants)")
    if split is not None and split not in v.extra.get("splits", ()):
        splitting = [x.name for x in VARIANTS if x.extra.get("splits")]
        raise ValueError(f"hgemm: split={split!r} needs a variant that splits K ({splitting}) and one of its splits; "
                         f"variant {variant!r} takes {v.extra.get('splits', ())}")
    p = validate(a, b, out, allow_cpu=False)
    if p.empty:
        return finish_empty(p)
    arch = _arch(a.device)
    if arch < v.min_arch:
        raise RuntimeError(f"hgemm: variant {variant!r} needs sm_{v.min_arch}; {a.device} is sm_{arch}")
    if max(p.m, p.n, p.k) > 2**31 - 1 - 256:
        raise ValueError(f"hgemm: PTX kernels index M, N, K with 32-bit ints; got {p.m}x{p.n}x{p.k}")
    ext = load()
    copies = []
    if not any_strides(v):
        if not is_row_major(a):
            a = a.contiguous()
            copies.append("A to row-major")
        if is_row_major(b):
            b_col = False
        elif is_col_major(b):
            b_col = True
        else:
            b, b_col = b.contiguous(), False
            copies.append("B to row-major")
        if v.alignment in ("rows16", "tma"):
            if not rows_aligned16(a, a.stride(0)):
                a = _aligned_copy(a)
                copies.append("A to 16-byte aligned rows")
            ldb = b.stride(1) if b_col else b.stride(0)
            if not rows_aligned16(b, ldb):
                b = _aligned_copy(b.t()).t() if b_col else _aligned_copy(b)
                copies.append("B to 16-byte aligned rows")
    else:
        b_col = False
    c = p.out
    if not is_row_major(c):
        c = torch.empty((p.m, p.n), dtype=torch.float16, device=a.device)
        copies.append("C through a row-major temporary")
    info, ran = ext.hgemm_launch(variant, a, b, c, b_col, acc == "fp16", TILES[tile], split or 0)
    if c is not p.out:
        p.out.copy_(c)
    _last.clear()
    _last.update(variant=variant, acc=acc, grid=(info[0], info[1]), block=info[2], smem_bytes=info[3],
                 b_col_major=b_col, copies=copies, tile=(info[5], info[6]) if info[5] else None,
                 split=info[7] or None, kernel=ran or variant)
    return p.out
