"""One registry of every kernel the harness and the tests know, built from the variant records: torch.matmul,
then the Triton records (`triton_kernels.variants`), then the hand-written ladder (`ptx_kernels.variants()`).

Adding a kernel = its file + its record; nothing here names one. Each entry is a (record, accumulation) pair,
plus, for Triton kernels, one entry per pinned configuration.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

import triton_kernels
from hgemm_common.operands import meets_alignment
from hgemm_common.record import LAYOUTS, Variant
from hgemm_common.validation import interpreter_active

Runner = Callable[[torch.Tensor, torch.Tensor, "torch.Tensor | None"], torch.Tensor]

BASELINE = Variant("torch.matmul", "torch", "torch", "", "cuBLAS", "baseline (cuBLAS on CUDA)", "cublas",
                   accs=("fp32",), native_layouts=LAYOUTS)


def ptx_records() -> tuple[Variant, ...]:
    """The hand-written variants' records (ptx_kernels/variants.py)."""
    import ptx_kernels

    return ptx_kernels.variants()


def records() -> tuple[Variant, ...]:
    """Every record in ladder order: the baseline, Triton's auto choice and kernels, the hand-written ladder."""
    from triton_kernels.variants import AUTO, VARIANTS
    return (BASELINE, AUTO, *VARIANTS, *ptx_records())


@dataclass(frozen=True)
class Kernel:
    name: str  # the record's name, `_fp16acc` for fp16 accumulation, `[config]` for a pinned configuration
    record: Variant = field(repr=False, compare=False)
    acc: str  # "fp32" | "fp16": accumulation inside the kernel
    run: Runner = field(repr=False, compare=False)
    config: str = ""  # tile configuration, or "autotuned"
    default: bool = True  # in the default bench set (per-config entries are checked, not timed, by default)
    note: str = ""  # what the entry adds, for the ladder

    @property
    def family(self) -> str:
        return self.record.family

    @property
    def package(self) -> str:
        return self.record.package

    @property
    def ceiling(self) -> str | None:
        """The instruction ceiling (key of the measured ceilings) that scores it: "mma.sync", "wgmma" or None."""
        return self.record.ceiling

    @property
    def cpu_ok(self) -> bool:
        """Runs without a GPU: torch on the CPU, Triton under the interpreter."""
        return self.record.package in ("torch", "triton")

    @property
    def slow(self) -> bool:
        return self.record.slow

    @property
    def min_arch(self) -> int:
        return self.record.min_arch

    def accepts(self, a: torch.Tensor, b: torch.Tensor) -> bool:
        """Whether this kernel takes these operands (a record that refuses misaligned ones, e.g. TMA, by design)."""
        return self.record.misaligned != "refuse" or meets_alignment(self.record.alignment, a, b)

    def supports(self, layout: str, arch: int | None) -> bool:
        return self.record.supports(acc=self.acc, layout=layout, arch=arch)


def entry_name(record: Variant, acc: str, config: str | None = None) -> str:
    """`wmma_multistage`, `wmma_multistage_fp16acc`, `triton_blocked_fp16acc[128x256x64_w8_s3_g8]`."""
    return record.name + ("" if acc == "fp32" else f"_{acc}acc") + (f"[{config}]" if config else "")


def _torch_matmul(a, b, out=None):
    return torch.matmul(a, b, out=out) if out is not None else torch.matmul(a, b)


def _triton(acc: str, config, kernel: str) -> Runner:
    def run(a, b, out=None):
        return triton_kernels.hgemm(a, b, out=out, acc=acc, config=config, kernel=kernel)
    return run


def _ptx(name: str, acc: str) -> Runner:
    def run(a, b, out=None):
        import ptx_kernels
        return ptx_kernels.hgemm(a, b, variant=name, acc=acc, out=out)
    return run


def _torch_entries(v: Variant) -> list[Kernel]:
    return [Kernel(v.name, v, acc, _torch_matmul, config=v.tile, note=v.adds) for acc in v.accs]


def _triton_entries(v: Variant) -> list[Kernel]:
    """Autotuned, and one entry per pinned configuration (the auto choice times kernels listed already: in the
    default set once, with fp32 accumulation, and no configurations of its own)."""
    kernel, dispatch = v.extra["kernel"], v.extra.get("dispatch", False)
    out = []
    for acc in v.accs:
        out.append(Kernel(entry_name(v, acc), v, acc, _triton(acc, None, kernel), config="autotuned", note=v.adds,
                          default=not dispatch or acc == "fp32"))
        if not dispatch:
            out += [Kernel(entry_name(v, acc, cfg.name), v, acc, _triton(acc, cfg, kernel), config=cfg.name,
                           default=False, note="one pinned configuration") for cfg in triton_kernels.configs(kernel)]
    return out


def _ptx_entries(v: Variant) -> list[Kernel]:
    return [Kernel(entry_name(v, acc), v, acc, _ptx(v.name, acc), config=v.tile, note=v.adds) for acc in v.accs]


ENTRIES = {"torch": _torch_entries, "triton": _triton_entries, "ptx": _ptx_entries}  # by the record's package


def kernels() -> list[Kernel]:
    """Every kernel: the baseline first, then Triton, then the hand-written ladder in order."""
    return [k for v in records() for k in ENTRIES[v.package](v)]


def names() -> list[str]:
    return [k.name for k in kernels()]


class UnknownKernel(ValueError):
    """A name or pattern that matches no kernel; the message names the valid choices."""


def _choices(kern: list[Kernel]) -> str:
    base = sorted({k.name for k in kern if "[" not in k.name}, key=[k.name for k in kern].index)
    return ", ".join(base) + " (and NAME[config] for each Triton configuration; fnmatch patterns allowed)"


def select(patterns: list[str] | None = None, *, include_all: bool = False, gpu: bool | None = None,
           arch: int | None = None) -> list[Kernel]:
    """Kernels whose name matches one of `patterns` (fnmatch; None = the defaults), runnable here.

    A pattern that matches no kernel at all raises UnknownKernel naming the valid ones.
    """
    from fnmatch import fnmatchcase

    if gpu is None:
        gpu = torch.cuda.is_available() and not interpreter_active()
    every = kernels()
    for p in patterns or []:
        if not any(fnmatchcase(k.name, p) for k in every):
            raise UnknownKernel(f"no kernel matches {p!r}; choose from: {_choices(every)}")
    chosen = []
    for k in every:
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
