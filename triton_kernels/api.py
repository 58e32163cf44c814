"""The public Triton HGEMM: validation, kernel choice, launch."""
from __future__ import annotations

import torch

from . import blocked, tma_persistent
from .common import ACCUMULATIONS, Config
from .validation import finish_empty, interpreter_active, validate

KERNELS = ("auto", "blocked", "tma")


def configs(kernel: str = "blocked") -> list[Config]:
    """The autotuning list of one kernel ("blocked" or "tma")."""
    if kernel == "blocked":
        return blocked.configs()
    if kernel == "tma":
        return tma_persistent.configs()
    raise ValueError(f"configs: kernel must be 'blocked' or 'tma', got {kernel!r}")


def choose_kernel(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> str:
    """'tma' on Hopper (sm_90) and newer when every operand is TMA-compatible and the output is row-major;
    'blocked' otherwise (other GPUs, strided views, unaligned rows, the interpreter)."""
    if interpreter_active() or a.device.type != "cuda":
        return "blocked"
    if torch.cuda.get_device_capability(a.device) < (9, 0):
        return "blocked"
    if out.stride(1) != 1 or not tma_persistent.tma_compatible(a, b, out):
        return "blocked"
    return "tma"


def hgemm(a: torch.Tensor, b: torch.Tensor, *, out: torch.Tensor | None = None, acc: str = "fp32",
          config: Config | None = None, kernel: str = "auto") -> torch.Tensor:
    """C = A @ B for fp16 matrices of any shape and strides, on a Triton kernel.

    acc: "fp32" (default) or "fp16" accumulation inside the kernel; the output is fp16 either way.
    out: a preallocated fp16 (M, N) tensor to write into (any strides); returned.
    config: pin one `Config` instead of autotuning (the interpreter always uses a pinned one).
    kernel: "auto" (TMA persistent where the hardware and the operands allow it, else blocked), "blocked" or
        "tma" (raises if the operands are not TMA-compatible).
    """
    if acc not in ACCUMULATIONS:
        raise ValueError(f"hgemm: acc must be one of {ACCUMULATIONS}, got {acc!r}")
    if kernel not in KERNELS:
        raise ValueError(f"hgemm: kernel must be one of {KERNELS}, got {kernel!r}")
    p = validate(a, b, out)
    if p.empty:
        return finish_empty(p)
    interp = interpreter_active()
    chosen = choose_kernel(a, b, p.out) if kernel == "auto" else kernel
    if config is None and interp:
        config = blocked.INTERPRETER_CONFIG if chosen == "blocked" else tma_persistent.INTERPRETER_CONFIG
    if chosen == "tma":
        if not tma_persistent.tma_compatible(a, b, p.out) or p.out.stride(1) != 1:
            raise ValueError("hgemm(kernel='tma'): TMA needs unit inner strides, 16-byte aligned bases and leading "
                             "dimensions that are multiples of 8 for A, B and a row-major out; use kernel='auto'")
        tma_persistent.launch(a, b, p.out, acc == "fp16", config, interp)
    else:
        blocked.launch(a, b, p.out, acc == "fp16", config)
    return p.out


def best_config(kernel: str = "blocked") -> Config | None:
    """The configuration the autotuner chose in its most recent call of that kernel."""
    return blocked.best_config() if kernel == "blocked" else tma_persistent.best_config()
