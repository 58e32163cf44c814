"""The Triton HGEMM as a PyTorch operator: `torch.ops.tensorcore_hgemm.triton_hgemm(a, b, acc)`.

A `torch.library.triton_op`, so torch.compile sees the Triton kernel itself (wrapped with `wrap_triton`) and
can place it in a compiled graph without a break; autograd is registered (dA = dC B^T and dB = A^T dC on the same
kernel, as transposed views: the blocked kernel takes any strides, so nothing is copied). The operator runs the
blocked kernel (autotuned): the TMA kernel's autotuner sets descriptor block shapes in a config pre_hook, which
torch.compile cannot trace. Under the Triton interpreter (no GPU) `wrap_triton` does not take interpreted
kernels: the operator then calls a plain (opaque) custom op, `triton_hgemm_interpreted`, which keeps it traceable
(opcheck's AOT-dispatch test passes on CPU too).
"""
from __future__ import annotations

import torch
from torch.library import triton_op, wrap_triton

from . import blocked
from .common import ACCUMULATIONS
from hgemm_common.validation import finish_empty, interpreter_active, validate

NAMESPACE = "tensorcore_hgemm"


@torch.library.custom_op(f"{NAMESPACE}::triton_hgemm_interpreted", mutates_args=())
def triton_hgemm_interpreted(a: torch.Tensor, b: torch.Tensor, acc: str) -> torch.Tensor:
    """The blocked kernel called plainly, for the Triton interpreter (CPU tensors, TRITON_INTERPRET=1)."""
    p = validate(a, b)
    if p.empty:
        return finish_empty(p)
    blocked.launch(a, b, p.out, acc == "fp16", blocked.INTERPRETER_CONFIG)
    return p.out


@triton_hgemm_interpreted.register_fake
def _(a: torch.Tensor, b: torch.Tensor, acc: str) -> torch.Tensor:
    return validate(a, b, allow_cpu=True).out


@triton_op(f"{NAMESPACE}::triton_hgemm", mutates_args=())
def triton_hgemm(a: torch.Tensor, b: torch.Tensor, acc: str = "fp32") -> torch.Tensor:
    """C = A @ B (fp16 in and out) on the blocked Triton kernel; acc is "fp32" or "fp16" accumulation."""
    if acc not in ACCUMULATIONS:
        raise ValueError(f"triton_hgemm: acc must be one of {ACCUMULATIONS}, got {acc!r}")
    p = validate(a, b, allow_cpu=interpreter_active() or a.device.type == "meta")
    if p.empty:
        return finish_empty(p)
    if interpreter_active():
        return triton_hgemm_interpreted(a, b, acc)
    blocked.launch(a, b, p.out, acc == "fp16", None, wrap=wrap_triton)
    return p.out


def _setup_context(ctx, inputs, output):
    a, b, acc = inputs
    ctx.save_for_backward(a, b)
    ctx.acc = acc


def _backward(ctx, grad):
    a, b = ctx.saved_tensors
    grad_a = grad_b = None
    if ctx.needs_input_grad[0]:
        grad_a = triton_hgemm(grad, b.t(), ctx.acc)  # (M, N) @ (N, K)
    if ctx.needs_input_grad[1]:
        grad_b = triton_hgemm(a.t(), grad, ctx.acc)  # (K, M) @ (M, N)
    return grad_a, grad_b, None


triton_hgemm.register_autograd(_backward, setup_context=_setup_context)
