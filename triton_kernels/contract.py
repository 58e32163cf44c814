"""What a Triton kernel module provides: the contract between a kernel file and the rest of the package.

A record in `triton_kernels/variants.py` names its kernel file (`Variant.file`); the module there is what the
dispatcher (`dispatch.py`: `launches`, `configs`, `worth_timing`, `INTERPRETER_CONFIG`), the plan tables
(`plan_table.py`: `configs`, `check_config`), the public API (`api.py`: `configs`) and the harness (`compare/`:
`configs`, `inspect_source`, `compile_options`, `MAX_M`) call. `KernelModule` declares the required members;
tests/test_triton_hgemm.py checks every record's module against it, names and parameters.

Optional members, each with the default the callers fall back to (`optional`):
- `check_config(cfg) -> Config`: a pinned configuration's ranges, raising ValueError (default `Config.check`);
- `compile_options(cfg) -> dict`: `triton.compile`'s options for a configuration (default num_warps, num_stages);
- `MAX_M: int`: the largest M the bench times it on (a kernel made for skinny outputs; default: no limit);
- `UNAVAILABLE: str | None`: why it cannot run with this Triton (the record is then not offered; default None);
- `prune(configs, m, n, k, sms) -> list[Config]`: the configurations worth trying on a problem, where that needs the
  SM count (default `common.prune_for_problem`; `common.problem_configs` asks);
- `choose_config(m, n, k, sms) -> Config`: a rule of its own for an untimed choice (default: the first of
  `problem_configs`; `plan_table.heuristic_config` asks);
- `worth_scoring(m, n, k, sms, tma_in_place) -> bool`: whether the cost model scores it on a problem (and the sweep
  times it there), where that reaches past what tune="exact" times (default `worth_timing`;
  `dispatch.candidates(every_staging=True)` asks);
- `SWEEP_ONLY: str | None`: why kernel="auto" must not pick it although the sweep times it (its data gathered for a
  later fit, its measured times not yet worth a choice; `dispatch.model_candidates` drops it; default None).
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch

from .common import Config
from .launch import Spec


@runtime_checkable
class KernelModule(Protocol):
    """The required members of a kernel module (a Python module: the methods below are its functions)."""

    INTERPRETER_CONFIG: Config  # the configuration TRITON_INTERPRET=1 runs (small: the interpreter is slow)

    def configs(self) -> list[Config]:
        """The tuning list, best-first where a rule must pick one untimed."""

    def launches(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, acc_fp16: bool,
                 config: Config) -> list[Spec]:
        """The kernel launches of C = A @ B (validated operands; c the output it writes), in order."""

    def worth_timing(self, m: int, n: int, k: int, sms: int, tma_in_place: bool) -> bool:
        """Whether kernel="auto" with tune="exact" should time it on an m x n x k problem on `sms` SMs
        (tma_in_place: a TMA kernel reads these operands without copies)."""

    def inspect_source(self, cfg: Config, dtype: str = "fp16") -> tuple:
        """(kernel, signature, constexprs, attrs) for `triton.compile` as a 4096^3 NN problem specializes it."""


# Optional members and what a caller assumes when a module lacks one.
OPTIONAL = {
    "check_config": lambda cfg: cfg.check(),
    "compile_options": lambda cfg: dict(num_warps=cfg.num_warps, num_stages=cfg.num_stages),
    "MAX_M": None,
    "UNAVAILABLE": None,
    "prune": None,
    "choose_config": None,
    "worth_scoring": None,
    "SWEEP_ONLY": None,
}


def optional(module, name: str):
    """An optional member of a kernel module, or its default (`OPTIONAL`)."""
    return getattr(module, name, OPTIONAL[name])
