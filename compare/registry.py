"""One registry of every kernel the harness and the tests know, built from the variant records: torch.matmul,
then the Triton records (`triton_kernels.variants`), then the hand-written ladder (`ptx_kernels.variants()`).

Adding a kernel = its file + its record; nothing here names one. Each entry is a (record, accumulation) pair,
plus, for Triton kernels, one entry per pinned configuration.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Callable

import torch

import triton_kernels
from hgemm_common.errors import HgemmValueError
from hgemm_common.operands import meets_alignment
from hgemm_common.record import ACCS_FOR, LAYOUTS, Variant
from hgemm_common.validation import interpreter_active

Runner = Callable[[torch.Tensor, torch.Tensor, "torch.Tensor | None"], torch.Tensor]

BASELINE = Variant("torch.matmul", "torch", "torch", "", "cuBLAS", "baseline (cuBLAS on CUDA)", "cublas",
                   accs=("fp32",), native_layouts=LAYOUTS, dtypes=("fp16", "bf16"))
DTYPES = tuple(ACCS_FOR)  # the input dtypes the harness can run: "fp16", "bf16"


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
    config: str = ""  # tile configuration, "plan" (the plan table's) or "exact" (tune="exact")
    default: bool = True  # in the default bench set (per-config entries are checked, not timed, by default)
    note: str = ""  # what the entry adds, for the ladder
    # Why these operands cannot run here (a reason, or None): for entries whose limits no record states (cuSPARSELt's
    # shape rules); the harness skips the case with the reason instead of reporting an error.
    skip_reason: Callable[[torch.Tensor, torch.Tensor], "str | None"] | None = field(default=None, repr=False,
                                                                                    compare=False)
    # Why the bench does not time these operands though the kernel runs them (the check does): a kernel made for
    # skinny outputs on a large problem.
    bench_skip: Callable[[torch.Tensor, torch.Tensor], "str | None"] | None = field(default=None, repr=False,
                                                                                   compare=False)

    def bound_acc(self, a: torch.Tensor) -> str:
        """The accumulation its random-input check assumes (`error_bound`) on operands like `a`: its own, except
        torch.matmul's (`torch_matmul_acc`: cuBLAS may add split-K partials in the output's dtype)."""
        from .reference import torch_matmul_acc

        return torch_matmul_acc(a.dtype) if self.record.package == "torch" and self.acc == "fp32" else self.acc

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

    def supports(self, layout: str, arch: int | None, dtype: str = "fp16") -> bool:
        return self.record.supports(dtype=dtype, acc=self.acc, layout=layout, arch=arch, kind=self.record.kind)

    def takes(self, dtype: str) -> bool:
        """Whether this entry runs inputs of `dtype` (its record lists the dtype, and the dtype offers its
        accumulation: bf16 entries accumulate in fp32)."""
        return dtype in self.record.dtypes and self.acc in ACCS_FOR[dtype]


def entry_name(record: Variant, acc: str, config: str | None = None) -> str:
    """`wmma_multistage`, `wmma_multistage_fp16acc`, `triton_blocked_fp16acc[128x256x64_w8_s3_g8]`."""
    return record.name + ("" if acc == "fp32" else f"_{acc}acc") + (f"[{config}]" if config else "")


def _torch_matmul(a, b, out=None):
    return torch.matmul(a, b, out=out) if out is not None else torch.matmul(a, b)


def _triton(acc: str, config, kernel: str, tune: str | None = None) -> Runner:
    def run(a, b, out=None):
        return triton_kernels.hgemm(a, b, out=out, acc=acc, config=config, kernel=kernel, tune=tune)
    return run


def _ptx(name: str, acc: str) -> Runner:
    def run(a, b, out=None):
        import ptx_kernels
        return ptx_kernels.hgemm(a, b, kernel=name, acc=acc, out=out)
    return run


def _torch_entries(v: Variant) -> list[Kernel]:
    return [Kernel(v.name, v, acc, _torch_matmul, config=v.tile, note=v.adds) for acc in v.accs]


def _max_m_skip(max_m: int | None, why: str = "each row of A re-reads B"):
    """A kernel made for skinny outputs (its module's MAX_M: gemv's one row of A per program re-reads B for every
    row, a second a call at 8192^3; a PTX record's `max_m`) is timed up to that M only; the check and the tests run
    it on every shape."""
    if max_m is None:
        return None
    return lambda a, b: None if a.shape[0] <= max_m else f"made for M <= {max_m} ({why})"


def _triton_entries(v: Variant) -> list[Kernel]:
    """The plan table's choice, and one entry per pinned configuration (the auto choice runs kernels listed already: in the
    default set once, with fp32 accumulation, and no configurations of its own)."""
    from triton_kernels.contract import optional
    from triton_kernels.variants import kernel_module

    kernel, dispatch = v.name, v.dispatch  # kernel= takes every record's name (AUTO's "triton": "auto")
    skip = None if dispatch else _max_m_skip(optional(kernel_module(v), "MAX_M"))
    out = []
    for acc in v.accs:
        out.append(Kernel(entry_name(v, acc), v, acc, _triton(acc, None, kernel), config="plan", note=v.adds,
                          default=not dispatch or acc == "fp32", bench_skip=skip))
        if not dispatch:
            out += [Kernel(entry_name(v, acc, cfg.name), v, acc, _triton(acc, cfg, kernel), config=cfg.name,
                           default=False, note="one pinned configuration", bench_skip=skip)
                    for cfg in triton_kernels.configs(kernel)]
        else:  # the per-shape timing the plan tables replace, for comparing the two (`triton_exact`)
            out.append(Kernel(entry_name(v, acc) + "_exact", v, acc, _triton(acc, None, kernel, "exact"),
                              config="exact", default=False, note="kernel='auto' with tune='exact'"))
    return out


MODEL_MARK = "@"  # "triton@FILE": kernel="auto" planned with another cost-model parameter file (`model_entry`)


class ModelPlanned:
    """The runner of `model_entry`: kernel="auto"'s planning (the GPU's plan table, then the cost model) with the
    parameters of one file, each kind of call planned once and run through the dispatcher's `Runner`. `plan_of`
    gives the plan a kind of call got (the bench's config column)."""

    def __init__(self, params):
        self.params = params
        self.plans: dict = {}

    def _planned(self, a, b, out):
        """(plan, Runner) of this kind of call (the dispatcher's key), planned on its first call."""
        from triton_kernels import dispatch

        key = dispatch.key_of(a, b, out, "fp32", "auto")
        if key not in self.plans:
            plan = dispatch.table_plan(a, b, out, "fp32", "auto", dispatch.device_arch(a), dispatch.sm_count(a),
                                       params=self.params)
            self.plans[key] = (plan, dispatch.Runner(plan, False))
        return self.plans[key]

    def plan_of(self, a, b, out=None):
        return self._planned(a, b, out)[0]

    def __call__(self, a, b, out=None):
        out = out if out is not None else a.new_empty(a.shape[0], b.shape[1])
        self._planned(a, b, out)[1](a, b, out)
        return out


def model_entry(pattern: str) -> Kernel:
    """`triton@FILE`: `triton` (kernel="auto", fp32 accumulation) planned with the cost-model parameter file FILE
    in place of the GPU's shipped one, beside it in one run: `python -m compare bench --kernels torch.matmul
    triton triton@old.json` times two models' plans on the same draw, interleaved, with the A/A control. Only
    the model step differs: the same plan table (an entry that holds is taken by both), the same candidates."""
    from pathlib import Path

    from hgemm_common import cost_model as cm
    from triton_kernels.variants import AUTO

    name, _, path = pattern.partition(MODEL_MARK)
    if name != AUTO.name or not path:
        raise UnknownKernel(f"{pattern!r}: a model-file entry is '{AUTO.name}{MODEL_MARK}FILE' (a cost-model "
                            "parameter file, as `python -m compare sweep --fit` writes)")
    params = cm.load(Path(path))
    return Kernel(f"{AUTO.name}{MODEL_MARK}{Path(path).stem}", AUTO, "fp32", ModelPlanned(params), config="model",
                  note=f"kernel='auto' planned with the cost model of {path}")


def _ptx_entries(v: Variant) -> list[Kernel]:
    skip = _max_m_skip(v.max_m, "each block of 16 rows of A reads all of B again")
    return [Kernel(entry_name(v, acc), v, acc, _ptx(v.name, acc), config=v.tile, note=v.adds, bench_skip=skip)
            for acc in v.accs]


ENTRIES = {"torch": _torch_entries, "triton": _triton_entries, "ptx": _ptx_entries}  # by the record's package


def kernels() -> list[Kernel]:
    """Every kernel: the baseline first, then Triton, then the hand-written ladder in order."""
    return [k for v in records() for k in ENTRIES[v.package](v)]


# ---- the sparse problem kind: C = A @ B with A 2:4 sparse along K (`bench --kind sparse`, `check --kind sparse`) ----
# Every entry takes the same pruned dense A: torch.matmul on it (the baseline), the dense PTX kernel each sparse
# record names as its peer (`Variant.dense_peer`), torch's semi-structured sparse tensor (cuSPARSELt where torch
# has it, else its CUTLASS kernels), and the sparse PTX variants. The compressed forms are made once per A (the
# first, untimed call) and reused: the timed calls run the kernel, as a pruned weight would.
SEMI_STRUCTURED = Variant("torch.sparse_semi_structured", "torch", "sparse", "", "cuSPARSELt",
                          "torch.sparse.to_sparse_semi_structured(A) @ B (cuSPARSELt; CUTLASS where torch lacks it)",
                          "cusparselt", kind="sparse", accs=("fp32",), native_layouts=("NN", "NT"))


class _PerA:
    """make(a) kept for the last A it was made from: the same tensor object, alive since, unmodified (its version).
    Not by address: the caching allocator hands a freed A's block to the next A of that size, and a key of pointer,
    shape and strides then served the old A's compressed form for the new one (a wrong product)."""

    def __init__(self, make):
        self.make, self.key, self.value = make, None, None

    def __call__(self, a: torch.Tensor):
        if self.key is None or self.key[0]() is not a or self.key[1] != a._version:
            self.key, self.value = None, self.make(a)
            self.key = (weakref.ref(a), a._version)
        return self.value


def _sparse_a():
    import ptx_kernels
    return _PerA(ptx_kernels.SparseA)


def _ptx_sparse(name: str, acc: str, compressed: _PerA) -> Runner:
    def run(a, b, out=None):
        return compressed(a).matmul(b, kernel=name, acc=acc, out=out)
    return run


def _semi_structured_entry() -> Kernel:
    sparse_a = _PerA(lambda a: torch.sparse.to_sparse_semi_structured(a))

    def run(a, b, out=None):  # torch's sparse matmul takes no out=: its own output is checked and timed
        return torch.mm(sparse_a(a), b)

    def skip_reason(a, b):
        try:
            run(a, b)
        except Exception as e:  # noqa: BLE001 - any refusal of these operands is a reason to skip them
            return f"torch semi-structured: {str(e).splitlines()[0][:120]}"
        return None
    return Kernel(SEMI_STRUCTURED.name, SEMI_STRUCTURED, "fp32", run, config=SEMI_STRUCTURED.tile,
                  note=SEMI_STRUCTURED.adds, skip_reason=skip_reason)


def sparse_kernels() -> list[Kernel]:
    """The sparse kind's entries: the baseline, the sparse records' dense peers, torch's semi-structured sparse
    matmul, then the sparse PTX variants in ladder order (every accumulation)."""
    import ptx_kernels

    sparse = ptx_kernels.variants("sparse")
    peers = [ptx_kernels.check_variant(name, "fp32") for name in dict.fromkeys(
        v.dense_peer for v in sparse if v.dense_peer)]
    compressed = _sparse_a()
    return [*_torch_entries(BASELINE), *(Kernel(entry_name(v, "fp32"), v, "fp32", _ptx(v.name, "fp32"),
                                                config=v.tile, note=v.adds) for v in peers),
            _semi_structured_entry(),
            *(Kernel(entry_name(v, acc), v, acc, _ptx_sparse(v.name, acc, compressed), config=v.tile, note=v.adds)
              for v in sparse for acc in v.accs)]


def names() -> list[str]:
    return [k.name for k in kernels()]


class UnknownKernel(HgemmValueError):
    """A name or pattern that matches no kernel; the message names the valid choices."""


def _choices(kern: list[Kernel]) -> str:
    base = sorted({k.name for k in kern if "[" not in k.name}, key=[k.name for k in kern].index)
    return ", ".join(base) + " (and NAME[config] for each Triton configuration; fnmatch patterns allowed)"


def _not_offered_here(pattern: str) -> str:
    """" here: why not" for Triton records matching `pattern` that this process does not offer (`NOT_OFFERED`: the
    Gluon kernel under the interpreter or on another Triton), else ""."""
    from fnmatch import fnmatchcase

    from triton_kernels.variants import NOT_OFFERED

    why = [w for name, w in NOT_OFFERED.items() if fnmatchcase(name, pattern)]
    return f" here ({'; '.join(why)})" if why else ""


def select(patterns: list[str] | None = None, *, include_all: bool = False, gpu: bool | None = None,
           arch: int | None = None, kind: str = "dense", dtype: str = "fp16") -> list[Kernel]:
    """Kernels of problem kind `kind` ("dense", or "sparse": `sparse_kernels`) that take inputs of `dtype` and whose
    name matches one of `patterns` (fnmatch; None = the defaults), runnable here; a pattern `triton@FILE` adds
    kernel="auto" planned with that cost-model file (`model_entry`), after the others.

    A pattern that matches no kernel at all raises UnknownKernel naming the valid ones (and why a kernel it names
    cannot run here); one that matches only kernels of other dtypes raises it naming the kernels that take `dtype`.
    """
    from fnmatch import fnmatchcase

    if gpu is None:
        gpu = torch.cuda.is_available() and not interpreter_active()
    if kind not in ("dense", "sparse"):
        raise UnknownKernel(f"problem kind must be 'dense' or 'sparse', got {kind!r}")
    if dtype not in DTYPES:
        raise UnknownKernel(f"dtype must be one of {DTYPES}, got {dtype!r}")
    models = [k for k in (model_entry(p) for p in patterns or [] if MODEL_MARK in p)
              if k.takes(dtype) and (gpu or k.cpu_ok) and kind == "dense"]
    if patterns and all(MODEL_MARK in p for p in patterns):
        return models
    patterns = [p for p in patterns or [] if MODEL_MARK not in p] or None
    every = kernels() if kind == "dense" else sparse_kernels()
    if kind == "sparse" and gpu and arch is None:  # the sparse set mixes sm_80 and sm_90a kernels: only this GPU's
        major, minor = torch.cuda.get_device_capability()
        arch = major * 10 + minor
    for p in patterns or []:
        if not any(fnmatchcase(k.name, p) for k in every):
            raise UnknownKernel(f"no kernel matches {p!r}{_not_offered_here(p)}; choose from: {_choices(every)}")
        if not any(fnmatchcase(k.name, p) and k.takes(dtype) for k in every):
            raise UnknownKernel(f"no kernel matching {p!r} takes {dtype} inputs; those that do: "
                                f"{_choices([k for k in every if k.takes(dtype)])}")
    chosen = []
    for k in every:
        if not k.takes(dtype):
            continue
        if patterns:
            if not any(fnmatchcase(k.name, p) for p in patterns):
                continue
        elif not (k.default or include_all):
            continue
        if not gpu and (not k.cpu_ok or kind == "sparse"):
            continue
        if arch is not None and arch < k.min_arch:
            continue
        chosen.append(k)
    return chosen + models
