"""The public Triton HGEMM: `hgemm`, `plan`, `configs`. The call path below autograd (validation, kernel choice,
launch) is call.py; kernels come from the records (`triton_kernels.variants`), the choice and its cache from
`triton_kernels.dispatch`; nothing here names one."""
from __future__ import annotations

import torch

from hgemm_common.errors import HgemmError, HgemmValueError, pick
from hgemm_common.validation import validate

from . import dispatch
from .call import KERNELS, check_arguments, check_dtype, planned, run  # noqa: F401  (planned: public)
from .common import Config
from .dispatch import Plan, kernel_for  # noqa: F401  (kernel_for: `compare inspect` asks what auto runs)
from .variants import BY_KERNEL, kernel_module


def _record(kernel: str, caller: str):
    name = check_arguments("fp32", kernel, None, caller)
    if name == "auto":
        raise HgemmValueError(f"{caller}: kernel must be one of {KERNELS[1:]} (one kernel, not the choice among "
                              f"them), got {kernel!r}")
    return BY_KERNEL[name]


def configs(kernel: str = "triton_blocked") -> list[Config]:
    """The tuning list of one kernel (a kernel= name other than "auto": `KERNELS[1:]`, or an older name)."""
    return kernel_module(_record(kernel, "configs")).configs()


def hgemm(a: torch.Tensor, b: torch.Tensor, *, out: torch.Tensor | None = None, acc: str = "fp32",
          config: Config | None = None, kernel: str | None = None, tune: str | None = None,
          variant: str | None = None) -> torch.Tensor:
    """C = A @ B for fp16 or bf16 matrices (A and B of one dtype) of any shape and strides, on a Triton kernel.

    acc: "fp32" (default) or "fp16" accumulation inside the kernel (bf16 inputs: "fp32" only); the output has the
        inputs' dtype either way.
    out: a preallocated (M, N) tensor of the inputs' dtype to write into (any strides); returned.
    config: pin one `Config` (the interpreter always uses a pinned one).
    kernel: "auto" (the default: the plan of the call's shape class from the GPU's plan table,
        `triton_kernels.plan_table`; "triton", its name in the support matrix, too), or one kernel of `KERNELS` (each
        record's name, docs/kernels.md): "triton_blocked", "triton_splitk", "triton_gemv" (one row of A per
        program, CUDA cores: for M = 1), "triton_tma", "triton_splitk_tma", "triton_splitk_wide" (small outputs
        over very long K), "gluon_persistent", "gluon_streamk" (the TMA ones raise if the operands are not
        TMA-compatible). The short names these took before ("blocked", "tma", "gluon", ...: `Variant.aliases`) are
        still taken.
    variant: another name for `kernel` (the name `ptx_kernels.hgemm` used to take); give one of the two.
    tune: "table" (the default: table, cost model, nearest class or heuristic; nothing is timed on the call path)
        or "exact" (the candidates timed on this kind of call's own operands once, the result kept in the user's
        plan cache file for later processes); None takes TENSORCORE_HGEMM_TUNE, else "table".
    The first call of a kind validates, chooses and compiles the one configuration its plan names; later ones reuse
    that plan and launch the compiled kernels directly (`plan(...)` shows it).
    With inputs that require grad (and no `out` or `config`), the call goes through the autograd-recording operator
    `torch.ops.tensorcore_hgemm.triton_hgemm` (dA = dC B^T, dB = A^T dC on the same kernel choice), so the result
    has a grad_fn like torch.matmul's.
    """
    if variant is not None:
        kernel = pick("hgemm", "kernel", kernel, "variant", variant, "auto")
    elif kernel is None:
        kernel = "auto"
    if torch.is_grad_enabled() and (getattr(a, "requires_grad", False) or getattr(b, "requires_grad", False)
                                    or getattr(out, "requires_grad", False)):
        return _autograd(a, b, out, acc, config, kernel, tune)  # (an out= that requires grad is refused there)
    return run(a, b, out, acc, config, kernel, tune)


def _autograd(a, b, out, acc, config, kernel, tune) -> torch.Tensor:
    if out is not None:
        raise HgemmError("hgemm(): functions with out=... arguments don't support automatic differentiation, "
                         "but one of the arguments requires grad (torch.mm's rule); drop out= or detach")
    if config is not None:
        raise HgemmError("hgemm(): config= is not recorded by autograd, but an argument requires grad; drop it "
                         "(kernel= is recorded) or detach the tensors")
    check_arguments(acc, kernel, tune)
    from . import ops
    return ops.triton_hgemm(a, b, acc, kernel, tune)


def plan(a: torch.Tensor, b: torch.Tensor, *, out: torch.Tensor | None = None, acc: str = "fp32",
         config: Config | None = None, kernel: str | None = None, tune: str | None = None,
         variant: str | None = None) -> Plan:
    """The plan hgemm runs for these arguments (kernel, configuration, staged operands, and `source`: where it came
    from), choosing it if this kind of call is new (exact timing writes into a scratch output, never into `out`)."""
    kernel = pick("plan", "kernel", kernel, "variant", variant, "auto")
    name = check_arguments(acc, kernel, tune)
    key = dispatch.key_of(a, b, out, acc, kernel, config, tune)
    r = dispatch.PLANS.get(key)
    if r is None:
        p = validate(a, b, out)
        check_dtype(p.dtype, acc, name)
        if p.empty:
            raise HgemmValueError("hgemm plan: an empty problem launches nothing")
        scratch = p.out if out is None else torch.empty((p.m, p.n), dtype=p.out.dtype, device=a.device)
        r = dispatch.runner_for(key, a, b, scratch, out, acc, name, config, tune)
    return r.plan


def choose_kernel(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None, acc: str = "fp32") -> str:
    """The kernel hgemm(kernel="auto") runs for these operands."""
    return plan(a, b, out=out, acc=acc).kernel


def best_config(kernel: str = "triton_blocked") -> Config | None:
    """The configuration the most recent timing of that kernel chose (None before any timed call)."""
    return dispatch.LAST_TUNED.get(_record(kernel, "best_config").name)
