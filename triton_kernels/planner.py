"""kernel="auto"'s model step: every candidate plan of a call scored by the cost model, the fastest predicted taken
(a kernel named by the call: its own configurations only, `dispatch.model_plan`).

Where a call's shape class has no entry of its own in the GPU's plan table (`plan_table`), or one that does not
hold for the call (`dispatch.table_holds`: its plan fills the SMs' rounds far less here than where it was timed),
`dispatch.model_plan` asks `ranked`. The candidates are `dispatch.model_candidates`: what tune="exact" would time
(each kernel offered on the GPU, in place or with its unreadable operands staged), with each TMA kernel's needed
staging even where tune="exact" judges the copies too dear to time (the model prices them) and its copies of
operands whose rows lie off the 32-byte sectors, times each kernel's configurations that fit the problem
(`problem_configs`). Each is described to the cost model (`hgemm_common.cost_model`: compute at the kernel's
fitted efficiency, the tile grid's waves, HBM and L2 bytes (off-sector reads weighted), staging copies, split-K
partials, latency per launch, tile, k-iteration and, for pointer kernels, load instruction); the fastest predicted
that can run is the plan, its source naming the term that decided ("model: compute", "model: waves", ...).

The model's parameters for a GPU are fitted by `python -m compare sweep --fit` to candidates timed on shapes drawn
at random (`python -m compare sweep`); the fitted files ship in `triton_kernels/models/`, one per kind of GPU
(compute capability and SM count), each saying what it was fitted on. A GPU with no file gets no model step
(`dispatch.table_plan` goes on to the nearest class and the heuristic). Nothing here times, synchronizes or
allocates: a prediction is arithmetic on the call's sizes, made once per kind of call.
"""
from __future__ import annotations

import functools
import os
import threading
import warnings
from pathlib import Path

import torch

from hgemm_common import cost_model as cm
from hgemm_common.validation import DTYPE_NAMES

from .plan_table import Plan, align_class, layout_class, stage_text

MODEL_DIR = Path(__file__).parent / "models"
MODEL_ENV = "TENSORCORE_HGEMM_COST_MODEL"  # a parameter file to use instead of the shipped ones ("off": none)


def model_file(arch: int, sms: int) -> Path | None:
    """The parameter file of a GPU: TENSORCORE_HGEMM_COST_MODEL's, else the shipped `sm{arch}-{sms}.json`."""
    env = os.environ.get(MODEL_ENV)
    if env:
        return None if env == "off" else Path(env)
    path = MODEL_DIR / f"sm{arch}-{sms}.json"
    return path if path.exists() else None


_params: dict[tuple, cm.Params | None] = {}
_lock = threading.Lock()


def params_for(arch: int, sms: int) -> cm.Params | None:
    """The fitted parameters for a GPU of compute capability `arch` (x10) with `sms` SMs, loaded once; None where
    there is no file, or (with one warning) where the file cannot be read or was fitted for another SM count."""
    path = model_file(arch, sms)
    key = (arch, sms, str(path))
    if key not in _params:
        with _lock:
            if key not in _params:
                got = None
                if path is not None:
                    try:
                        got = cm.load(path)
                    except (OSError, ValueError) as e:
                        warnings.warn(f"ignoring cost model file {path}: {type(e).__name__}: {e}", RuntimeWarning,
                                      stacklevel=3)
                    if got is not None and got.gpu.sms != sms:  # its waves would be counted on other SMs
                        warnings.warn(f"ignoring cost model file {path}: fitted for {got.gpu.sms} SMs, this GPU has "
                                      f"{sms}", RuntimeWarning, stacklevel=3)
                        got = None
                _params[key] = got
    return _params[key]


def fitted_kernels(params: cm.Params) -> frozenset:
    """The kernels a parameter file has fitted parameters for (`cost_model.param_key`'s kernel part)."""
    return frozenset(key.split(".")[0] for key in params.kernels)


def clear() -> None:
    """Forget the loaded parameter files (tests)."""
    with _lock:
        _params.clear()


def effective_split(kernel: str, k: int, cfg) -> int:
    """The K slices a Triton configuration launches on K (fewer than its split where K is short)."""
    if cfg.split_k == 1:
        return 1
    if kernel == "gluon_persistent":
        from .gluon_persistent import split_slices
        return split_slices(k, cfg.split_k)[1]
    from .splitk import slices
    return slices(k, cfg)[1]


def model_plan_of(kernel: str, cfg, stage: tuple, k: int) -> cm.Plan:
    """The cost model's description of a Triton (kernel, configuration, staging) on a K this long."""
    return _model_plan(kernel, cfg, tuple(stage), effective_split(kernel, k, cfg))


@functools.lru_cache(maxsize=4096)
def _model_plan(kernel: str, cfg, stage: tuple, split: int) -> cm.Plan:
    return cm.plan_for(kernel, cfg.block_m, cfg.block_n, cfg.block_k, cfg.num_stages, cfg.num_warps, split,
                       stage_text(stage))


def problem_of(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None, acc: str) -> cm.Problem:
    m, k = a.shape
    return cm.Problem(m, b.shape[1], k, layout_class(a, b), align_class(a, b, out), DTYPE_NAMES[a.dtype], acc)


def ranked(problem: cm.Problem, pairs: list[tuple[str, tuple]], sms: int, params: cm.Params,
           listed_only: bool = False) -> list[tuple[cm.Prediction, Plan]]:
    """Every candidate plan of a problem, (kernel, staging) `pairs` (`dispatch.candidates`) times each kernel's
    configurations that fit it (`problem_configs`), with its prediction, fastest predicted first; wide and swapped
    tiles the parameters have not measured are left out (`cost_model.unmeasured`). `listed_only`: only those its
    module lists (`configs()`), without what a kernel's own rule adds to them (the Gluon kernel's K splits past 2,
    which no sweep had timed when the shipped parameters were fitted)."""
    from .common import problem_configs
    from .variants import BY_KERNEL, kernel_module

    scored = []
    for kernel, stage in pairs:
        module = kernel_module(BY_KERNEL[kernel])
        listed = module.configs() if listed_only else None
        for cfg in problem_configs(module, problem.m, problem.n, problem.k, sms):
            if listed is not None and cfg not in listed:
                continue
            plan = model_plan_of(kernel, cfg, stage, problem.k)
            if cm.unmeasured(plan, params):
                continue
            pred = cm.predict(problem, plan, params)
            scored.append((pred, Plan(kernel, cfg, stage, source=f"model: {pred.decided}")))
    scored.sort(key=lambda t: t[0].seconds)
    return scored
