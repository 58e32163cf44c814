"""The hand-written HGEMMs as PyTorch operators: `torch.ops.tensorcore_hgemm.ptx_hgemm(a, b, kernel, acc)` and
`torch.ops.tensorcore_hgemm.ptx_sparse_hgemm(values, meta, b, kernel, acc)` (by keyword: `hgemm_kernel=`,
`hgemm_acc=`; `hgemm_common.oplib` says why the prefix).

An operator registered by `hgemm_common.oplib.define` (opaque to torch.compile, which keeps it as one node of the
graph) with a fake implementation for shape propagation (the same validation, an empty (M, N) result) and autograd
(dA = dC B^T and dB = A^T dC on the same kernel; the call path reads column-major B in place and copies column-major
A, as `last_launch()["copies"]` reports). The 2:4 sparse operator has no autograd formula: it stays a
`torch.library.custom_op`, which refuses inputs that require grad instead of dropping their gradients.
`variant=` is accepted for `hgemm_kernel=` (as the functions accept it for `kernel=`) through an overload of each
operator, `.variant`, that takes either name and raises when given both.
"""
from __future__ import annotations

import torch

from hgemm_common.linear import register_planner
from hgemm_common.oplib import NAMESPACE, define, define_alias
from hgemm_common.validation import validate

from . import call


def _impl(a: torch.Tensor, b: torch.Tensor, kernel: str = "mma_stmatrix", acc: str = "fp32") -> torch.Tensor:
    """C = A @ B (fp16 or bf16 in and out, one dtype) on one hand-written kernel (`ptx_kernels.variants()`)."""
    return call.hgemm(a.detach(), b.detach(), kernel, acc)  # detached: below autograd, nothing is recorded here


def _fake(a: torch.Tensor, b: torch.Tensor, kernel: str = "mma_stmatrix", acc: str = "fp32") -> torch.Tensor:
    v = call.check_variant(kernel, acc)
    p = validate(a, b, allow_cpu=True)
    call.check_dtype(v, p.dtype, acc)
    return p.out


def _setup_context(ctx, inputs, output):
    a, b, kernel, acc = inputs
    ctx.save_for_backward(a, b)
    ctx.kernel, ctx.acc = kernel, acc


def _backward(ctx, grad):
    a, b = ctx.saved_tensors
    grad_a = grad_b = None
    if ctx.needs_input_grad[0]:
        grad_a = ptx_hgemm(grad, b.t(), ctx.kernel, ctx.acc)
    if ctx.needs_input_grad[1]:
        grad_b = ptx_hgemm(a.t(), grad, ctx.kernel, ctx.acc)
    return grad_a, grad_b, None, None


ptx_hgemm = define("ptx_hgemm", '(Tensor a, Tensor b, str hgemm_kernel="mma_stmatrix", str hgemm_acc="fp32") '
                   '-> Tensor', _impl, _fake, _backward, _setup_context)
define_alias("ptx_hgemm", '(Tensor a, Tensor b, str? hgemm_kernel=None, *, str variant, str hgemm_acc="fp32")',
             "hgemm_kernel", "variant")


@torch.library.custom_op(f"{NAMESPACE}::ptx_sparse_hgemm", mutates_args=())
def ptx_sparse_hgemm(values: torch.Tensor, meta: torch.Tensor, b: torch.Tensor, hgemm_kernel: str = "auto",
                     hgemm_acc: str = "fp32") -> torch.Tensor:
    """C = A @ B with A 2:4 sparse, compressed (`ptx_kernels.sparse.compress`): `ptx_kernels.sparse_hgemm`."""
    with torch.no_grad():  # below the dispatcher's autograd layer: sparse_hgemm's own grad check is not for here
        return call.sparse_hgemm(values, meta, b, kernel=hgemm_kernel, acc=hgemm_acc)


@ptx_sparse_hgemm.register_fake
def _(values: torch.Tensor, meta: torch.Tensor, b: torch.Tensor, hgemm_kernel: str = "auto",
      hgemm_acc: str = "fp32") -> torch.Tensor:
    from . import sparse as S
    S.check_compressed(values, meta, values.shape[0], b.shape[0])
    if hgemm_kernel != "auto":
        call.check_variant(hgemm_kernel, hgemm_acc, kind="sparse")
    return validate(values.new_zeros(()).expand(values.shape[0], b.shape[0]), b, allow_cpu=True).out


define_alias("ptx_sparse_hgemm", '(Tensor values, Tensor meta, Tensor b, str? hgemm_kernel=None, *, str variant, '
             'str hgemm_acc="fp32")', "hgemm_kernel", "variant")

# `HGEMMLinear` keeps the launch `hgemm` planned for a kind of call (call.planned: launch(a, b, out)).
register_planner("ptx", lambda x2, wt, kernel, acc: call.planned(x2, wt, kernel=kernel, acc=acc))
