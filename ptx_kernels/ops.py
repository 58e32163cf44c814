"""The hand-written HGEMMs as a PyTorch operator: `torch.ops.tensorcore_hgemm.ptx_hgemm(a, b, variant, acc)`.

An operator registered by `hgemm_common.oplib.define` (opaque to torch.compile, which keeps it as one node of the
graph) with a fake implementation for shape propagation (the same validation, an empty (M, N) result) and autograd
(dA = dC B^T and dB = A^T dC on the same variant; the wrapper reads column-major B in place and copies column-major
A, as `last_launch()["copies"]` reports). The 2:4 sparse operator has no autograd formula: it stays a
`torch.library.custom_op`, which refuses inputs that require grad instead of dropping their gradients.
"""
from __future__ import annotations

import torch

from hgemm_common.oplib import NAMESPACE, define
from hgemm_common.validation import validate

from . import check_dtype, check_variant, hgemm


def _impl(a: torch.Tensor, b: torch.Tensor, variant: str = "mma_stmatrix", acc: str = "fp32") -> torch.Tensor:
    """C = A @ B (fp16 or bf16 in and out, one dtype) on one hand-written kernel (`ptx_kernels.variants()`)."""
    return hgemm(a.detach(), b.detach(), variant=variant, acc=acc)  # detached: hgemm would route back here


def _fake(a: torch.Tensor, b: torch.Tensor, variant: str = "mma_stmatrix", acc: str = "fp32") -> torch.Tensor:
    v = check_variant(variant, acc)
    p = validate(a, b, allow_cpu=True)
    check_dtype(v, p.dtype, acc)
    return p.out


def _setup_context(ctx, inputs, output):
    a, b, variant, acc = inputs
    ctx.save_for_backward(a, b)
    ctx.variant, ctx.acc = variant, acc


def _backward(ctx, grad):
    a, b = ctx.saved_tensors
    grad_a = grad_b = None
    if ctx.needs_input_grad[0]:
        grad_a = ptx_hgemm(grad, b.t(), ctx.variant, ctx.acc)
    if ctx.needs_input_grad[1]:
        grad_b = ptx_hgemm(a.t(), grad, ctx.variant, ctx.acc)
    return grad_a, grad_b, None, None


ptx_hgemm = define("ptx_hgemm", '(Tensor a, Tensor b, str variant="mma_stmatrix", str acc="fp32") -> Tensor', _impl,
                   _fake, _backward, _setup_context)


@torch.library.custom_op(f"{NAMESPACE}::ptx_sparse_hgemm", mutates_args=())
def ptx_sparse_hgemm(values: torch.Tensor, meta: torch.Tensor, b: torch.Tensor, variant: str = "auto",
                     acc: str = "fp32") -> torch.Tensor:
    """C = A @ B with A 2:4 sparse, compressed (`ptx_kernels.sparse.compress`): `ptx_kernels.sparse_hgemm`."""
    from . import sparse_hgemm
    with torch.no_grad():  # below the dispatcher's autograd layer: sparse_hgemm's own grad check is not for here
        return sparse_hgemm(values, meta, b, variant=variant, acc=acc)


@ptx_sparse_hgemm.register_fake
def _(values: torch.Tensor, meta: torch.Tensor, b: torch.Tensor, variant: str = "auto",
      acc: str = "fp32") -> torch.Tensor:
    from . import sparse as S
    S.check_compressed(values, meta, values.shape[0], b.shape[0])
    if variant != "auto":
        check_variant(variant, acc, kind="sparse")
    return validate(values.new_zeros(()).expand(values.shape[0], b.shape[0]), b, allow_cpu=True).out
