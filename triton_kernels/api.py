"""The public Triton HGEMM: validation, kernel choice, launch. Kernels come from the records
(`triton_kernels.variants`), the choice and its cache from `triton_kernels.dispatch`; nothing here names one."""
from __future__ import annotations

import torch

from hgemm_common.operands import resolved
from hgemm_common.validation import check_acc, check_dtype_offered, finish_empty, validate

from . import dispatch
from .common import ACCUMULATIONS, Config
from .dispatch import Plan, kernel_for  # noqa: F401  (kernel_for: `compare inspect` asks what auto runs)
from .plan_table import TUNES
from .variants import AUTO, BY_KERNEL, kernel_module

KERNELS = (AUTO.selector, *BY_KERNEL)  # "auto", then each record's kernel= name (`Variant.selector`)


def _record(kernel: str, caller: str):
    v = BY_KERNEL.get(kernel)
    if v is None:
        raise ValueError(f"{caller}: kernel must be one of {tuple(BY_KERNEL)}, got {kernel!r}")
    return v


def configs(kernel: str = "blocked") -> list[Config]:
    """The tuning list of one kernel (a kernel= name other than "auto": `KERNELS[1:]`)."""
    return kernel_module(_record(kernel, "configs")).configs()


def hgemm(a: torch.Tensor, b: torch.Tensor, *, out: torch.Tensor | None = None, acc: str = "fp32",
          config: Config | None = None, kernel: str = "auto", tune: str | None = None) -> torch.Tensor:
    """C = A @ B for fp16 or bf16 matrices (A and B of one dtype) of any shape and strides, on a Triton kernel.

    acc: "fp32" (default) or "fp16" accumulation inside the kernel (bf16 inputs: "fp32" only); the output has the
        inputs' dtype either way.
    out: a preallocated (M, N) tensor of the inputs' dtype to write into (any strides); returned.
    config: pin one `Config` (the interpreter always uses a pinned one).
    kernel: "auto" (the plan of the call's shape class from the GPU's plan table, `triton_kernels.plan_table`), or
        one kernel of `KERNELS` (each record's `selector`, docs/kernels.md): "blocked", "splitk", "gemv" (one row
        of A per program, CUDA cores: for M = 1), "tma", "splitk_tma", "splitk_wide" (small outputs over very long K),
        "gluon" (the TMA ones raise if the operands
        are not TMA-compatible).
    tune: "table" (the default: table, nearest class or heuristic; nothing is timed on the call path) or "exact"
        (the candidates timed on this kind of call's own operands once, the result kept in the user's plan cache
        file for later processes); None takes TENSORCORE_HGEMM_TUNE, else "table".
    The first call of a kind validates, chooses and compiles the one configuration its plan names; later ones reuse
    that plan and launch the compiled kernels directly (`plan(...)` shows it).
    With inputs that require grad (and no `out`), the call goes through the autograd-recording operator
    `torch.ops.tensorcore_hgemm.triton_hgemm` (dA = dC B^T, dB = A^T dC on the same dispatch), so the result has a
    grad_fn like torch.matmul's.
    """
    if torch.is_grad_enabled() and (getattr(a, "requires_grad", False) or getattr(b, "requires_grad", False)
                                    or getattr(out, "requires_grad", False)):
        return _autograd(a, b, out, acc, config, kernel, tune)  # (an out= that requires grad is refused there)
    return run(a, b, out, acc, config, kernel, tune)


def run(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None, acc: str = "fp32",
        config: Config | None = None, kernel: str = "auto", tune: str | None = None) -> torch.Tensor:
    """hgemm without the autograd routing (the operators call this): the cached plan of this kind of call, or the
    first call's validation and choice."""
    try:
        key = dispatch.key_of(a, b, out, acc, kernel, config, tune)
        r = dispatch.PLANS.get(key)
        negative = a.is_neg() or b.is_neg() or (out is not None and out.is_neg())
    except (AttributeError, TypeError):  # not tensors, or an unhashable config: validation names the problem
        key = r = None
        negative = False
    if negative:
        return _negative_views(a, b, out, acc, config, kernel, tune)
    if r is None:
        return _first_call(key, a, b, out, acc, config, kernel, tune)
    if out is None:
        out = a.new_empty(a.shape[0], b.shape[1])  # A's dtype and device, contiguous; cheaper to call than empty()
    elif dispatch.overlaps(r, a, b, out):
        validate(a, b, out)  # raises the overlap error
    r(a, b, out)
    return out


def _negative_views(a, b, out, acc, config, kernel, tune) -> torch.Tensor:
    """run() on operands with the neg bit set (`hgemm_common.operands.resolved`): A and B resolved into copies; a
    negative view of C gets the product through copy_, which stores the values' negatives as such a view holds
    them. The kernels read and write raw memory, so without this the signs would be silently wrong."""
    if out is not None:
        validate(a, b, out)  # on the operands as given: an out that overlaps them is refused, not written
        if out.is_neg():
            return out.copy_(run(resolved(a), resolved(b), None, acc, config, kernel, tune))
    return run(resolved(a), resolved(b), out, acc, config, kernel, tune)


def _check_arguments(acc: str, kernel: str, tune: str | None = None) -> None:
    if acc not in ACCUMULATIONS:
        raise ValueError(f"hgemm: acc must be one of {ACCUMULATIONS}, got {acc!r}")
    if kernel not in KERNELS:
        raise ValueError(f"hgemm: kernel must be one of {KERNELS}, got {kernel!r}")
    if tune is not None and tune not in TUNES:
        raise ValueError(f"hgemm: tune must be one of {TUNES} or None, got {tune!r}")


def _check_dtype(dtype: str, acc: str, kernel: str) -> None:
    """The record's dtypes (`Variant.dtypes`; kernel="auto": those of AUTO) and the dtype's accumulations
    (bf16: fp32 only): one-line errors naming what is offered."""
    check_acc(dtype, acc)
    record = AUTO if kernel == AUTO.selector else BY_KERNEL[kernel]
    check_dtype_offered(dtype, record.dtypes, f"hgemm(kernel={kernel!r})")


def _first_call(key, a, b, out, acc, config, kernel, tune) -> torch.Tensor:
    """A kind of call not seen before (or one that fails validation): every check, then the plan, cached."""
    _check_arguments(acc, kernel, tune)
    p = validate(a, b, out)
    _check_dtype(p.dtype, acc, kernel)
    if p.empty:
        return finish_empty(p)
    if key is None:
        raise TypeError(f"hgemm: config must be a triton_kernels.Config, got {type(config).__name__}")
    r = dispatch.runner_for(key, a, b, p.out, out, acc, kernel, config, tune)
    r(a, b, p.out)
    return p.out


def _autograd(a, b, out, acc, config, kernel, tune) -> torch.Tensor:
    if out is not None:
        raise RuntimeError("hgemm(): functions with out=... arguments don't support automatic differentiation, "
                           "but one of the arguments requires grad (torch.mm's rule); drop out= or detach")
    _check_arguments(acc, kernel, tune)
    from . import ops
    return ops.triton_hgemm(a, b, acc)


def plan(a: torch.Tensor, b: torch.Tensor, *, out: torch.Tensor | None = None, acc: str = "fp32",
         config: Config | None = None, kernel: str = "auto", tune: str | None = None) -> Plan:
    """The plan hgemm runs for these arguments (kernel, configuration, staged operands, and `source`: where it came
    from), choosing it if this kind of call is new (exact timing writes into a scratch output, never into `out`)."""
    _check_arguments(acc, kernel, tune)
    key = dispatch.key_of(a, b, out, acc, kernel, config, tune)
    r = dispatch.PLANS.get(key)
    if r is None:
        p = validate(a, b, out)
        _check_dtype(p.dtype, acc, kernel)
        if p.empty:
            raise ValueError("hgemm plan: an empty problem launches nothing")
        scratch = p.out if out is None else torch.empty((p.m, p.n), dtype=p.out.dtype, device=a.device)
        r = dispatch.runner_for(key, a, b, scratch, out, acc, kernel, config, tune)
    return r.plan


def planned(a: torch.Tensor, b: torch.Tensor, acc: str = "fp32") -> dispatch.Runner | None:
    """The plan `hgemm(a, b, acc=acc)` (kernel="auto", no out=, config or tune) keeps for this kind of call, bound to
    its kernels, once a call of this kind has run (None before, and for operands that are not tensors or carry the
    neg bit, which `run` resolves into copies). For a caller that keeps one plan per kind of call of its own
    (`compare.nn.HGEMMLinear`): `runner(a, b, out)` on operands of the same kind (shapes, strides, dtypes, devices,
    16-byte alignment, out a fresh row-major (M, N)), or, where `runner.launchable()`, `runner.launch(device,
    [a_ptr, b_ptr, out_ptr])`: no validation on either."""
    try:
        if a.is_neg() or b.is_neg():
            return None
        return dispatch.PLANS.get(dispatch.key_of(a, b, None, acc, "auto", None, None))
    except (AttributeError, TypeError):
        return None


def choose_kernel(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None, acc: str = "fp32") -> str:
    """The kernel hgemm(kernel="auto") runs for these operands."""
    return plan(a, b, out=out, acc=acc).kernel


def best_config(kernel: str = "blocked") -> Config | None:
    """The configuration the most recent timing of that kernel chose (None before any timed call)."""
    _record(kernel, "best_config")
    return dispatch.LAST_TUNED.get(kernel)
