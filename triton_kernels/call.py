"""The Triton HGEMM's call path below autograd: the cached plan of a kind of call, or the first call's checks,
choice and launch. `triton_kernels.hgemm` (api.py) routes here, or through the operator (ops.py) when an input
requires grad; the operator's implementation routes here too. Nothing here imports api.py or ops.py, so the three
form no import cycle (tests/test_imports.py)."""
from __future__ import annotations

import torch

from hgemm_common.errors import HgemmTypeError, HgemmValueError
from hgemm_common.operands import resolved
from hgemm_common.validation import check_acc, check_dtype_offered, finish_empty, validate

from . import dispatch
from .common import ACCUMULATIONS, Config
from .plan_table import TUNES
from .variants import AUTO, BY_KERNEL, KERNEL_NAMES, refusal

KERNELS = ("auto", *BY_KERNEL)  # kernel=: "auto", then each offered record's name (older names: KERNEL_NAMES)


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


def check_arguments(acc: str, kernel: str, tune: str | None = None, who: str = "hgemm") -> str:
    """One-line errors for an `acc=`, `kernel=` or `tune=` that is not offered, naming what is (a kernel this
    process cannot run: why, as "gluon_persistent needs triton 3.6 (installed: 3.9.0)"). Returns the kernel's name
    as plans hold it ("auto", or a record's name for an older one: "tma" -> "triton_tma")."""
    if acc not in ACCUMULATIONS:
        raise HgemmValueError(f"{who}: acc must be one of {ACCUMULATIONS}, got {acc!r}")
    name = KERNEL_NAMES.get(kernel) if isinstance(kernel, str) else None
    if name is None:
        why = refusal(kernel) if isinstance(kernel, str) else None
        if why is not None:
            raise HgemmValueError(f"{who}: kernel={kernel!r}: {why}")
        older = ", ".join(a for v in BY_KERNEL.values() for a in v.aliases)
        raise HgemmValueError(f"{who}: kernel must be one of {KERNELS} (or an older name: {older}), got {kernel!r}")
    if tune is not None and tune not in TUNES:
        raise HgemmValueError(f"{who}: tune must be one of {TUNES} or None, got {tune!r}")
    return name


def check_dtype(dtype: str, acc: str, kernel: str) -> None:
    """The record's dtypes (`Variant.dtypes`; kernel="auto": those of AUTO) and the dtype's accumulations
    (bf16: fp32 only): one-line errors naming what is offered. kernel: as `check_arguments` returns it."""
    check_acc(dtype, acc)
    record = AUTO if kernel == "auto" else BY_KERNEL[kernel]
    check_dtype_offered(dtype, record.dtypes, f"hgemm(kernel={kernel!r})")


def _first_call(key, a, b, out, acc, config, kernel, tune) -> torch.Tensor:
    """A kind of call not seen before (or one that fails validation): every check, then the plan, cached (under
    the kernel= the caller gave, older names included: each key keeps its own plan)."""
    kernel = check_arguments(acc, kernel, tune)
    p = validate(a, b, out)
    check_dtype(p.dtype, acc, kernel)
    if p.empty:
        return finish_empty(p)
    if key is None:
        raise HgemmTypeError(f"hgemm: config must be a triton_kernels.Config, got {type(config).__name__}")
    r = dispatch.runner_for(key, a, b, p.out, out, acc, kernel, config, tune)
    r(a, b, p.out)
    return p.out


def planned(a: torch.Tensor, b: torch.Tensor, acc: str = "fp32", kernel: str = "auto") -> dispatch.Runner | None:
    """The plan `hgemm(a, b, acc=acc, kernel=kernel)` (no out=, config or tune) keeps for this kind of call, bound to
    its kernels, once a call of this kind has run (None before, and for operands that are not tensors or carry the
    neg bit, which `run` resolves into copies). For a caller that keeps one plan per kind of call of its own
    (`hgemm_common.linear.HGEMMLinear`): `runner(a, b, out)` on operands of the same kind (shapes, strides, dtypes,
    devices, 16-byte alignment, out a fresh row-major (M, N)), or, where `runner.launchable()`, `runner.launch(device,
    [a_ptr, b_ptr, out_ptr])`: no validation on either."""
    try:
        if a.is_neg() or b.is_neg():
            return None
        return dispatch.PLANS.get(dispatch.key_of(a, b, None, acc, kernel, None, None))
    except (AttributeError, TypeError):
        return None
