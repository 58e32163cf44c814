"""One registry of every kernel the harness and the tests know: torch.matmul, Triton configs, PTX variants.

Adding a kernel = one entry here (PTX variants come in through `ptx_kernels.variants()`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

import triton_kernels
from triton_kernels.validation import interpreter_active

from .reference import LAYOUTS

Runner = Callable[[torch.Tensor, torch.Tensor, "torch.Tensor | None"], torch.Tensor]


@dataclass(frozen=True)
class Kernel:
    name: str
    family: str  # "torch" | "triton" | "simt" | "wmma" | "mma" (later "wgmma", "sparse")
    acc: str  # "fp32" | "fp16": accumulation inside the kernel
    run: Runner = field(repr=False, compare=False)
    layouts: tuple[str, ...] = LAYOUTS
    min_arch: int = 80  # compute capability x 10
    config: str = ""  # tile configuration, or "autotuned"
    default: bool = True  # in the default bench set (per-config entries are checked, not timed, by default)
    cpu_ok: bool = False  # runs without a GPU (Triton interpreter, or torch on the CPU)
    note: str = ""  # what the entry adds, for the ladder
    slow: bool = False  # a naive teaching kernel: the harness skips it on very large problems
    layouts_note: str = ""  # a condition on the operands beyond `layouts` ("aligned rows": 16-byte rows, TMA)

    def accepts(self, a: torch.Tensor, b: torch.Tensor) -> bool:
        """Whether this kernel takes these operands (the TMA kernel refuses unaligned rows by design)."""
        if self.layouts_note == "aligned rows":
            from triton_kernels.tma_persistent import tma_compatible
            return tma_compatible(a, b) and b.shape[1] % 8 == 0  # and a row-major C with 16-byte rows
        return True

    def supports(self, layout: str, arch: int | None) -> bool:
        return layout in self.layouts and (arch is None or arch >= self.min_arch)


def _torch_matmul(a, b, out=None):
    return torch.matmul(a, b, out=out) if out is not None else torch.matmul(a, b)


def _triton(acc: str, config: triton_kernels.Config | None, kernel: str) -> Runner:
    def run(a, b, out=None):
        return triton_kernels.hgemm(a, b, out=out, acc=acc, config=config, kernel=kernel)
    return run


TRITON_KERNELS = {
    "auto": "tl.dot; TMA persistent when operands allow, else blocked",
    "blocked": "tl.dot blocked kernel (tutorial 03), cp.async pipeline, any strides",
    "tma": "tl.dot persistent kernel, TMA loads/stores (tutorial 09), aligned operands",
}


def triton_entries() -> list[Kernel]:
    """`triton` (auto), `triton_blocked`, `triton_tma`, each autotuned and per pinned configuration."""
    out = []
    for acc in triton_kernels.ACCUMULATIONS:
        suffix = "" if acc == "fp32" else "_fp16acc"
        for kernel, note in TRITON_KERNELS.items():
            base = "triton" if kernel == "auto" else f"triton_{kernel}"
            out.append(Kernel(f"{base}{suffix}", "triton", acc, _triton(acc, None, kernel), config="autotuned",
                              cpu_ok=True, note=note, default=kernel != "auto" or acc == "fp32",
                              layouts_note=("aligned rows" if kernel == "tma" else "")))
            if kernel == "auto":
                continue
            for cfg in triton_kernels.configs(kernel):
                out.append(Kernel(f"{base}{suffix}[{cfg.name}]", "triton", acc, _triton(acc, cfg, kernel),
                                  config=cfg.name, default=False, cpu_ok=True, note="one pinned configuration",
                                  layouts_note=("aligned rows" if kernel == "tma" else "")))
    return out


def ptx_entries() -> list[Kernel]:
    """One entry per hand-written variant and accumulation: `wmma_multistage`, `wmma_multistage_fp16acc`, ..."""
    import ptx_kernels

    out = []
    for v in ptx_kernels.variants():
        for acc in v.accs:
            def run(a, b, out=None, _name=v.name, _acc=acc):
                return ptx_kernels.hgemm(a, b, variant=_name, acc=_acc, out=out)
            suffix = "" if acc == "fp32" else "_fp16acc"
            out.append(Kernel(v.name + suffix, v.family, acc, run, min_arch=v.min_arch, config=v.tile,
                              note=v.adds, slow=v.slow))
    return out


def kernels() -> list[Kernel]:
    """Every kernel: the baseline first, then Triton, then the hand-written ladder in order."""
    base = Kernel("torch.matmul", "torch", "fp32", _torch_matmul, config="cuBLAS", cpu_ok=True,
                  note="baseline (cuBLAS on CUDA)")
    return [base, *triton_entries(), *ptx_entries()]


def select(patterns: list[str] | None = None, *, include_all: bool = False, gpu: bool | None = None,
           arch: int | None = None) -> list[Kernel]:
    """Kernels whose name matches one of `patterns` (fnmatch; None = the defaults), runnable here."""
    from fnmatch import fnmatchcase

    if gpu is None:
        gpu = torch.cuda.is_available() and not interpreter_active()
    chosen = []
    for k in kernels():
        if patterns:
            if not any(fnmatchcase(k.name, p) for p in patterns):
                continue
        elif not (k.default or include_all):
            continue
        if not gpu and not k.cpu_ok:
            continue
        if arch is not None and arch < k.min_arch:
            continue
        chosen.append(k)
    return chosen
