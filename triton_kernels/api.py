"""The public Triton HGEMM: validation, kernel choice, launch. Kernels come from the records
(`triton_kernels.variants`); nothing here names one."""
from __future__ import annotations

import torch

from hgemm_common.operands import meets_alignment
from hgemm_common.validation import finish_empty, interpreter_active, validate

from .common import ACCUMULATIONS, Config
from .variants import AUTO, BY_KERNEL, VARIANTS

KERNELS = (AUTO.extra["kernel"], *BY_KERNEL)  # "auto", "blocked", "tma"


def _record(kernel: str, caller: str):
    v = BY_KERNEL.get(kernel)
    if v is None:
        raise ValueError(f"{caller}: kernel must be one of {tuple(BY_KERNEL)}, got {kernel!r}")
    return v


def configs(kernel: str = "blocked") -> list[Config]:
    """The autotuning list of one kernel ("blocked" or "tma")."""
    return _record(kernel, "configs").extra["module"].configs()


def kernel_for(arch: int | None, a: torch.Tensor | None = None, b: torch.Tensor | None = None,
               out: torch.Tensor | None = None) -> str:
    """What kernel="auto" runs: the last record of the ladder offered on `arch` (None: the interpreter, which
    takes the first) whose alignment the operands meet (None operands: aligned ones, as `compare inspect` assumes).
    """
    if arch is None:
        return VARIANTS[0].extra["kernel"]
    for v in reversed(VARIANTS):
        if v.offered_on(arch) and (a is None or meets_alignment(v.alignment, a, b, out)):
            return v.extra["kernel"]
    return VARIANTS[0].extra["kernel"]


def choose_kernel(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> str:
    """'tma' on Hopper (sm_90) and newer when every operand is TMA-compatible and the output is row-major;
    'blocked' otherwise (other GPUs, strided views, unaligned rows, the interpreter)."""
    if interpreter_active() or a.device.type != "cuda":
        return kernel_for(None)
    major, minor = torch.cuda.get_device_capability(a.device)
    return kernel_for(major * 10 + minor, a, b, out)


def hgemm(a: torch.Tensor, b: torch.Tensor, *, out: torch.Tensor | None = None, acc: str = "fp32",
          config: Config | None = None, kernel: str = "auto") -> torch.Tensor:
    """C = A @ B for fp16 matrices of any shape and strides, on a Triton kernel.

    acc: "fp32" (default) or "fp16" accumulation inside the kernel; the output is fp16 either way.
    out: a preallocated fp16 (M, N) tensor to write into (any strides); returned.
    config: pin one `Config` instead of autotuning (the interpreter always uses a pinned one).
    kernel: "auto" (TMA persistent where the hardware and the operands allow it, else blocked), "blocked" or
        "tma" (raises if the operands are not TMA-compatible).
    With inputs that require grad (and no `out`), the call goes through the autograd-recording operator
    `torch.ops.tensorcore_hgemm.triton_hgemm` (the blocked kernel; dA = dC B^T, dB = A^T dC), so the result has a
    grad_fn like torch.matmul's.
    """
    if acc not in ACCUMULATIONS:
        raise ValueError(f"hgemm: acc must be one of {ACCUMULATIONS}, got {acc!r}")
    if kernel not in KERNELS:
        raise ValueError(f"hgemm: kernel must be one of {KERNELS}, got {kernel!r}")
    if torch.is_grad_enabled() and (getattr(a, "requires_grad", False) or getattr(b, "requires_grad", False)):
        if out is not None:
            raise RuntimeError("hgemm(): functions with out=... arguments don't support automatic differentiation, "
                               "but one of the arguments requires grad (torch.mm's rule); drop out= or detach")
        from . import ops
        return ops.triton_hgemm(a, b, acc)
    p = validate(a, b, out)
    if p.empty:
        return finish_empty(p)
    interp = interpreter_active()
    v = BY_KERNEL[choose_kernel(a, b, p.out) if kernel == AUTO.extra["kernel"] else kernel]
    mod = v.extra["module"]
    if config is None and interp:
        config = mod.INTERPRETER_CONFIG
    if not meets_alignment(v.alignment, a, b, p.out):
        raise ValueError(f"hgemm(kernel={v.extra['kernel']!r}): TMA needs unit inner strides, 16-byte aligned bases "
                         "and leading dimensions that are multiples of 8 for A, B and a row-major out; use "
                         "kernel='auto'")
    mod.launch(a, b, p.out, acc == "fp16", config)
    return p.out


def best_config(kernel: str = "blocked") -> Config | None:
    """The configuration the autotuner chose in its most recent call of that kernel."""
    return _record(kernel, "best_config").extra["module"].best_config()
