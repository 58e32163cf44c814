"""The Triton HGEMM as a PyTorch operator: `torch.ops.tensorcore_hgemm.triton_hgemm(a, b, acc, kernel, tune)`
(by keyword: `hgemm_acc=`, `hgemm_kernel=`, `hgemm_tune=`; `hgemm_common.oplib` says why the prefix).

An operator (registered by `hgemm_common.oplib.define`: a `torch.library.Library` definition, lighter per call
than `torch.library.custom_op`) whose implementation is `triton_kernels.hgemm`'s own call path: the plan cache of
`triton_kernels.dispatch` picks the fastest kernel for each kind of call (split-K, TMA or
blocked) and launches it directly, in eager mode and inside a torch.compile'd graph alike. torch.compile keeps the
operator as one opaque node (the fake implementation gives it shapes), so the compiled graph runs the same choice
as eager code; it cannot fuse into the kernel, which inductor never did with a user's Triton kernel either. (Until
this change the operator was a `triton_op` tracing the blocked kernel: the TMA kernels' descriptors could not be
traced, so compiled models ran the blocked kernel only.) Autograd is registered: dA = dC B^T and dB = A^T dC, as
transposed views through the same operator (the kernels take any strides, so nothing is copied). The same
operator runs under the Triton interpreter on CPU tensors.
"""
from __future__ import annotations

import torch

from hgemm_common.linear import register_planner
from hgemm_common.oplib import define
from hgemm_common.validation import check_acc, interpreter_active, validate

from .call import check_arguments, planned, run


def _impl(a: torch.Tensor, b: torch.Tensor, acc: str = "fp32", kernel: str = "auto",
          tune: str | None = None) -> torch.Tensor:
    """C = A @ B (fp16 or bf16 in and out) on the Triton kernel `kernel` ("auto": the one hgemm(kernel="auto")
    picks); acc is "fp32" or "fp16" accumulation (bf16: fp32 only); tune as hgemm's."""
    return run(a, b, None, acc, None, kernel, tune)


def _fake(a: torch.Tensor, b: torch.Tensor, acc: str = "fp32", kernel: str = "auto",
          tune: str | None = None) -> torch.Tensor:
    check_arguments(acc, kernel, tune, "triton_hgemm")
    p = validate(a, b, allow_cpu=interpreter_active() or a.device.type == "meta")
    check_acc(p.dtype, acc, "triton_hgemm")
    return p.out


def _setup_context(ctx, inputs, output):
    a, b, acc, kernel, tune = inputs
    ctx.save_for_backward(a, b)
    ctx.args = acc, kernel, tune


def _backward(ctx, grad):
    a, b = ctx.saved_tensors
    grad_a = grad_b = None
    if ctx.needs_input_grad[0]:
        grad_a = triton_hgemm(grad, b.t(), *ctx.args)  # (M, N) @ (N, K)
    if ctx.needs_input_grad[1]:
        grad_b = triton_hgemm(a.t(), grad, *ctx.args)  # (K, M) @ (M, N)
    return grad_a, grad_b, None, None, None


triton_hgemm = define("triton_hgemm", '(Tensor a, Tensor b, str hgemm_acc="fp32", str hgemm_kernel="auto", '
                      'str? hgemm_tune=None) -> Tensor', _impl, _fake, _backward, _setup_context)


def _plan_for_linear(x2: torch.Tensor, wt: torch.Tensor, kernel: str, acc: str):
    """`HGEMMLinear`'s planner for this package: the kept plan of the operator's call, as launch(a, b, out)."""
    runner = planned(x2, wt, acc, kernel)
    if runner is None:
        return None

    def launch(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
        if runner.launchable():  # the addresses are those of the 2-D views the plan was made for
            runner.launch(a.device, [a.data_ptr(), b.data_ptr(), out.data_ptr()])
        else:
            runner(a, b, out)

    return launch


register_planner("triton", _plan_for_linear)
