"""Hand-written CUDA/PTX HGEMMs callable from PyTorch (built with load_inline on first use).

`hgemm` (one dense kernel, `kernel=`), `sparse_hgemm` and `SparseA` (2:4 sparse A), `Linear` and `route_linears`
(an nn.Linear on these kernels), `variants()` (the records: what each kernel supports), `last_launch()`. The call
path below autograd is call.py; the operators are ops.py (`torch.ops.tensorcore_hgemm.ptx_hgemm`,
`ptx_sparse_hgemm`), registered when the package is imported.
"""
from __future__ import annotations

import torch

from hgemm_common.errors import HgemmError, HgemmTypeError, HgemmValueError, pick

from . import call, ops  # noqa: F401  ops: registers torch.ops.tensorcore_hgemm.ptx_hgemm and ptx_sparse_hgemm
from .build import BuildError, load
from .call import (ACCUMULATIONS, DEFAULT_KERNEL, SCHEDULES, TILES, check_dtype, check_variant, last_launch, planned,
                   sparse_hgemm)
from .variants import BY_NAME, VARIANTS, Variant

__all__ = ["ACCUMULATIONS", "BuildError", "HgemmError", "HgemmTypeError", "HgemmValueError", "Linear", "SCHEDULES",
           "SparseA", "TILES", "Variant", "check_variant", "hgemm", "last_launch", "load", "planned", "route_linears",
           "sparse_hgemm", "variants"]


def variants(kind: str = "dense") -> tuple[Variant, ...]:
    """Every kernel of a problem kind ("dense": `hgemm`'s; "sparse": `sparse_hgemm`'s) in ladder order, with what it
    supports (`Variant`: the kernel's record)."""
    return tuple(v for v in VARIANTS if v.kind == kind)


def hgemm(a: torch.Tensor, b: torch.Tensor, *, kernel: str | None = None, acc: str = "fp32",
          out: torch.Tensor | None = None, tile: str = "auto", split: int | None = None,
          variant: str | None = None, sms: int | None = None) -> torch.Tensor:
    """C = A @ B in fp16 or bf16 (A, B and C of one dtype) on one hand-written kernel.

    kernel: a name from `variants()` (default "wmma_multistage"); bf16 inputs need a kernel whose record lists
    "bf16" (`Variant.dtypes`), else an HgemmTypeError names the dtypes it takes. variant: another name for `kernel`
    (give one of the two). acc: "fp32" or "fp16" accumulation (bf16: "fp32" only). out: preallocated (M, N) tensor of
    the inputs' dtype.
    tile: the block tile, where the kernel has two for `acc` (`Variant.block_fp16`: the pipelined kernels with fp16
    accumulation): "auto" picks by wave count, "large" forces `block_fp16`, "base" forces `block`.
    Layouts the kernel cannot read in place (column-major A, except on the kernels whose record lists "TN" in
    `native_layouts`: wgmma_persistent, wgmma_splitk, wgmma_cluster; strided views; unaligned rows for the cp.async
    and TMA kernels) are copied first; `last_launch()["copies"]` lists them.
    split: for the kernels that split K (`Variant.splits`: wgmma_persistent, wgmma_splitk, wgmma_splitk_grid,
    mma_stream), None lets the launcher choose, 1 never splits, S > 1 pins S parts: wgmma_splitk over a cluster (2 or
    4), wgmma_splitk_grid and mma_stream over the grid (up to `Variant.max_split`), wgmma_persistent 2 or 4 over a
    cluster and any other count over the grid; `last_launch()["split"]` and `["kernel"]` say what ran. Forced splits
    are cut to the K blocks there are.
    sms: for the kernels whose schedule is laid over the SMs (`call.SM_SCHEDULED`: wgmma_streamk), the SM count the
    schedule sees, below the device's (None: the device's); tests lower it so that small problems take the
    schedule's cut tiles. The kernel still runs on the whole GPU.
    Inputs that require grad go through the autograd-recording operator `torch.ops.tensorcore_hgemm.ptx_hgemm`.
    """
    if variant is not None:
        kernel = pick("hgemm", "kernel", kernel, "variant", variant, DEFAULT_KERNEL)
    elif kernel is None:
        kernel = DEFAULT_KERNEL
    if torch.is_grad_enabled() and (getattr(a, "requires_grad", False) or getattr(b, "requires_grad", False)
                                    or getattr(out, "requires_grad", False)):
        if out is not None or tile != "auto" or split is not None or sms is not None:
            raise HgemmError("hgemm(): out=, tile=, sms= and split= are not recorded by autograd, but an argument "
                             "requires grad; drop them or detach the tensors")
        from .ops import ptx_hgemm
        return ptx_hgemm(a, b, kernel, acc)
    return call.hgemm(a, b, kernel, acc, out, tile, split, sms)


def __getattr__(name: str):
    """`Linear` and `route_linears`, imported on first use."""
    if name in ("Linear", "route_linears"):
        from . import nn
        return getattr(nn, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class SparseA:
    """A 2:4-sparse fp16 matrix A (M x K) kept compressed for repeated products (a pruned weight): compressed and
    checked once, then `a @ b` / `a.matmul(b, acc=...)` run `sparse_hgemm` without re-checking the metadata."""

    def __init__(self, a: torch.Tensor, *, prune: bool = False):
        from . import sparse as S

        if prune:
            a = S.prune_2to4(a)
        self.shape = tuple(a.shape)
        self.values, self.meta = S.compress(a)

    def dense(self) -> torch.Tensor:
        """The dense (pruned) matrix the compressed form stores."""
        from . import sparse as S

        return S.decompress(self.values, self.meta, self.shape[1])

    def matmul(self, b: torch.Tensor, *, acc: str = "fp32", kernel: str | None = None,
               out: torch.Tensor | None = None, variant: str | None = None) -> torch.Tensor:
        """C = A @ b on `sparse_hgemm` (kernel: "auto" by default; variant: another name for it)."""
        if variant is not None:
            kernel, variant = pick("SparseA.matmul", "kernel", kernel, "variant", variant, "auto"), None
        if isinstance(b, torch.Tensor) and b.dim() == 2 and b.shape[0] != self.shape[1]:
            raise HgemmValueError(f"mat1 and mat2 shapes cannot be multiplied ({self.shape[0]}x{self.shape[1]} and "
                                  f"{b.shape[0]}x{b.shape[1]})")
        return sparse_hgemm(self.values, self.meta, b, kernel=kernel, acc=acc, out=out, check_meta=False,
                            variant=variant)

    __matmul__ = matmul
