"""A drop-in `nn.Linear` (fp16 or bf16) whose matrix product runs on this project's operators.

`triton_kernels.Linear` and `ptx_kernels.Linear` (and `compare.nn.HGEMMLinear`, the older name, which takes
`package=`) are this class with the package fixed; `route_linears` swaps every `nn.Linear` of a model for one.
Forward is x @ W^T (+ bias) through the registered operators (`torch.ops.tensorcore_hgemm.*`), so autograd and
torch.compile work as they do for those operators. This module imports no kernel package: the package that
offers the class imports its operators, and the constructor checks they are registered.
"""
from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from .errors import HgemmError, HgemmTypeError, HgemmValueError, pick
from .oplib import NAMESPACE
from .validation import DTYPE_NAMES, check_acc

# The kernel package (a record's `package`) -> (its operator, its default kernel=).
PACKAGES = {"triton": ("triton_hgemm", "auto"), "ptx": ("ptx_hgemm", "mma_stmatrix")}
# package -> planner(x2, wt, kernel, acc): the launch (x2, wt, y2) -> None the package keeps for a kind of call
# that has run without copies, else None. Each package's ops.py registers its own (`register_planner`), so this
# module imports no kernel package.
PLANNERS: dict[str, Callable] = {}
# Kinds of input (shapes, strides, alignment) a layer keeps plans for; past it they are dropped and made again. A
# model calls a layer with a few: one per prompt length and the decode step.
PLANS_PER_LAYER = 64

# Checked on every forward (bound to module names: a global lookup each, no attribute chain).
_Tensor = torch.Tensor
_PLAIN = (nn.Parameter, torch.Tensor)  # weight types whose data_ptr is the matrix (not a subclass)
_grad_enabled = torch.is_grad_enabled
_dispatch_modes = torch._C._len_torch_dispatch_stack
_functorch_active = torch._C._are_functorch_transforms_active
_function_modes = torch._C._is_torch_function_mode_enabled
_jit_tracing = torch._C._get_tracing_state
_compiling = torch.compiler.is_compiling


def register_planner(package: str, planner: Callable) -> None:
    """Let `HGEMMLinear` keep `package`'s plans (see `PLANNERS`)."""
    PLANNERS[package] = planner


class _Plans(dict):
    """A layer's plans by kind of input: {key: (output shape, launch)}. They hold compiled kernels and views of the
    weight, which neither a copy of the layer nor its pickle may carry: copies and unpickled layers start empty."""

    def __deepcopy__(self, memo):
        return _Plans()

    def __reduce__(self):
        return (_Plans, ())


class HGEMMLinear(nn.Module):
    """y = x W^T + b with fp16 or bf16 weights, like `nn.Linear`.

    package: "triton" (`triton_kernels.hgemm`) or "ptx" (the hand-written kernels, `ptx_kernels.hgemm`).
    kernel: the kernel= of that package's hgemm (default: "auto" for triton, "mma_stmatrix" for ptx); variant:
    another name for it (give one of the two). acc: "fp32" or "fp16" accumulation (bf16: fp32 only). dtype:
    torch.float16 or torch.bfloat16, the weights' and the inputs' (inputs of another dtype raise, as the kernels take
    one dtype). Inputs of any leading shape (..., in_features). A kernel, accumulation or dtype the package does not
    offer raises here, not at the first forward.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, package: str = "triton",
                 kernel: str | None = None, acc: str = "fp32", device=None, dtype=torch.float16,
                 variant: str | None = None) -> None:
        super().__init__()
        if package not in PACKAGES:
            raise HgemmValueError(f"{type(self).__name__}: package must be one of {tuple(PACKAGES)}, got {package!r}")
        if dtype not in DTYPE_NAMES:
            raise HgemmTypeError(f"{type(self).__name__}: dtype must be torch.float16 or torch.bfloat16, got {dtype}")
        check_acc(DTYPE_NAMES[dtype], acc, type(self).__name__)
        op_name, default_kernel = PACKAGES[package]
        kernel = pick(type(self).__name__, "kernel", kernel, "variant", variant, default_kernel)
        self.in_features, self.out_features = in_features, out_features
        self.package, self.kernel, self.acc = package, kernel, acc
        self.weight = nn.Parameter(torch.empty((out_features, in_features), dtype=dtype, device=device))
        self.bias = nn.Parameter(torch.empty(out_features, dtype=dtype, device=device)) if bias else None
        self.reset_parameters()
        self._plans = _Plans()
        self._plans_weight = None  # the weight's facts the plans were made for
        try:
            getattr(getattr(torch.ops, NAMESPACE), op_name)
        except AttributeError:
            raise HgemmError(f"{type(self).__name__}: torch.ops.{NAMESPACE}.{op_name} is not registered; import "
                             f"{package}_kernels.ops (or use {package}_kernels.Linear)") from None
        # the operator's fake kernel checks kernel, acc and dtype on meta tensors: the call's own one-line errors
        self._product(torch.empty((1, in_features), dtype=dtype, device="meta"),
                      torch.empty((out_features, in_features), dtype=dtype, device="meta"))

    @property
    def variant(self) -> str:
        """The kernel's older name (`kernel`)."""
        return self.kernel

    def reset_parameters(self) -> None:
        """nn.Linear's initialisation: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias."""
        bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
        with torch.no_grad():
            self.weight.uniform_(-bound, bound)
            if self.bias is not None:
                self.bias.uniform_(-bound, bound)

    @classmethod
    def from_linear(cls, linear: nn.Linear, **kwargs) -> "HGEMMLinear":
        """The same layer on this project's kernels, in its own dtype (fp16 or bf16), or converted to `dtype=` when
        that is given; weights of another dtype without `dtype=` raise (`refuse_dtype`)."""
        if "dtype" not in kwargs:
            refuse_dtype(linear, cls.__name__ + ".from_linear")
            kwargs["dtype"] = linear.weight.dtype
        m = cls(linear.in_features, linear.out_features, linear.bias is not None, device=linear.weight.device,
                **kwargs)
        with torch.no_grad():
            m.weight.copy_(linear.weight)
            if linear.bias is not None:
                m.bias.copy_(linear.bias)
        return m

    def _product(self, x2: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        ops = getattr(torch.ops, NAMESPACE)  # looked up per call: a module holding an operator would not pickle
        if self.package == "ptx":
            return ops.ptx_hgemm(x2, weight.t(), self.kernel, self.acc)
        return ops.triton_hgemm(x2, weight.t(), self.acc, self.kernel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """y = x W^T (+ b). The first call with a kind of input (shape, strides, dtype, device, 16-byte alignment of x;
        the same facts of the weight) goes through the registered operator, which validates everything and chooses
        the kernel; when it recorded nothing for autograd, the layer keeps the plan the package made for that call.
        Later calls of that kind that record nothing either (no grad needed, plain CUDA tensors, no dispatch or
        torch-function mode, functorch transform, torch.compile or JIT trace active) allocate the output and launch
        the kept plan: no operator, autograd or dispatcher round trip, no reshape, no validation. The bias is added
        in place then."""
        w = self.weight
        # torch.compile first: dynamo folds it to True and traces none of the rest (the operator joins the graph)
        if (not _compiling() and type(x) is _Tensor and type(w) in _PLAIN
                and not (_grad_enabled() and (x.requires_grad or w.requires_grad))
                and not (_dispatch_modes() or _functorch_active() or _function_modes() or _jit_tracing())):
            p = x.data_ptr()
            key = (x.shape, x.stride(), x.dtype, x.device, p % 16 == 0 if p else None, x.is_neg(), w.data_ptr(),
                   w.shape, w.stride(), w.dtype, w.device, w.is_neg())
            plan = self._plans.get(key)
            if plan is not None:
                shape, launch = plan
                y = x.new_empty(shape)
                launch(x, w, y)
                b = self.bias
                if b is not None:
                    y.add_(b)
                return y
            y = self._forward(x)
            self._keep_plan(key, x, w, y)  # the operator recorded nothing (this branch's condition)
            return y
        return self._forward(x)

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        """Every check, then the operator (which records autograd where grad is needed)."""
        if not isinstance(x, torch.Tensor):
            raise HgemmTypeError(f"{type(self).__name__}: inputs must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() == 0 or x.shape[-1] != self.in_features:
            raise HgemmValueError(f"{type(self).__name__}: expected inputs (..., {self.in_features}), got "
                                  f"{tuple(x.shape)}")
        if x.dtype != self.weight.dtype:
            raise HgemmTypeError(f"{type(self).__name__}: inputs are {x.dtype}, the weights {self.weight.dtype}; "
                                 "convert one")
        y = self._product(x.reshape(-1, self.in_features), self.weight)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*x.shape[:-1], self.out_features)

    def _keep_plan(self, key: tuple, x: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> None:
        """After a first call of a kind of input: keep the launch the package planned for it, if it planned one
        (none for an empty problem, operands it copied, or an x whose rows are no view of it). Plans of an earlier
        weight (replaced, moved, converted) are dropped first, so they keep neither its memory nor its kernels."""
        planner = PLANNERS.get(self.package)
        if planner is None or (self.bias is not None and self.bias.dtype != y.dtype):  # y + bias promoted
            return
        try:
            x2 = x.view(-1, self.in_features)
        except RuntimeError:  # the rows of x are not a view of a matrix: the operator ran on a copy
            return
        wt = w.t()
        m, k, n = x2.shape[0], self.in_features, self.out_features
        run = planner(x2, wt, self.kernel, self.acc)
        if run is None:
            return

        def launch(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> None:
            run(x.view(m, k), wt, y.view(m, n))  # wt: the key holds the weight's address, shape and strides

        facts = key[6:]
        if facts != self._plans_weight or len(self._plans) >= PLANS_PER_LAYER:
            self._plans.clear()
            self._plans_weight = facts
        self._plans[key] = (tuple(y.shape), launch)

    def _apply(self, fn, *args, **kwargs):
        self._plans.clear()  # .to(), .cuda(), .half(), ...: the weight's memory changes under the plans
        self._plans_weight = None
        return super()._apply(fn, *args, **kwargs)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, package={self.package}, kernel={self.kernel}, acc={self.acc}, "
                f"dtype={self.weight.dtype}")


def refuse_dtype(linear: nn.Linear, who: str, name: str = "") -> None:
    """One line naming the layer and its dtype when its weights are neither fp16 nor bf16: the kernels take those
    only, and a silent conversion would leave the model's other layers and its inputs in the old dtype (the first
    forward then fails on a dtype mismatch). Converting is the caller's choice: `dtype=`."""
    dtype = linear.weight.dtype
    if dtype not in DTYPE_NAMES:
        layer = f"layer {name!r}" if name else "the layer"
        raise HgemmTypeError(f"{who}: {layer} has {dtype} weights and the kernels take torch.float16 or "
                             "torch.bfloat16; convert the model first (model.half()) or pass dtype=torch.float16 to "
                             "convert while routing")


def route_linears(model: nn.Module, cls: type[HGEMMLinear] = HGEMMLinear, **kwargs) -> int:
    """Replace every `nn.Linear` inside `model` (in place) by a `cls` holding the same weights (kwargs: cls's, e.g.
    kernel, acc, dtype); returns how many were replaced. Each layer keeps its dtype (fp16 or bf16) unless `dtype=`
    converts them all; without `dtype=`, a layer of another dtype (a float32 model) is refused before any is
    replaced. The replacements are new parameters: build an optimizer after routing."""
    # every place a Linear sits (a module held twice is replaced twice, as each holder's own layer); not the model
    linears = [(name, m) for name, m in model.named_modules(remove_duplicate=False)
               if name and isinstance(m, nn.Linear)]
    if "dtype" not in kwargs:
        for name, m in linears:
            refuse_dtype(m, "route_linears", name)
    for name, m in linears:
        parent, _, attr = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, attr, cls.from_linear(m, **kwargs))
    return len(linears)


def for_package(package: str, module: str) -> tuple[type[HGEMMLinear], Callable[..., int]]:
    """`Linear` and `route_linears` with the package fixed, as `module` (`triton_kernels.nn`, `ptx_kernels.nn`)
    offers them: Linear(in_features, out_features, bias=True, *, kernel=None, acc="fp32", device=None,
    dtype=torch.float16, variant=None)."""
    default = PACKAGES[package][1]

    class Linear(HGEMMLinear):
        __doc__ = (f"y = x W^T + b like `nn.Linear`, on {package}_kernels.hgemm's kernel= (default {default!r}; "
                   "variant: another name for it). acc: \"fp32\" or \"fp16\" accumulation (bf16: fp32 only). dtype: "
                   "torch.float16 or torch.bfloat16 (weights and inputs).")

        def __init__(self, in_features: int, out_features: int, bias: bool = True, *, kernel: str | None = None,
                     acc: str = "fp32", device=None, dtype=torch.float16, variant: str | None = None) -> None:
            super().__init__(in_features, out_features, bias, package=package, kernel=kernel, acc=acc, device=device,
                             dtype=dtype, variant=variant)

    Linear.__module__, Linear.__qualname__ = module, "Linear"  # where pickle finds it

    def route(model: nn.Module, **kwargs) -> int:
        return route_linears(model, Linear, **kwargs)

    route.__doc__ = (f"Replace every `nn.Linear` inside `model` (in place) by a {module}.Linear holding the same "
                     "weights (kwargs: kernel, acc, dtype); returns how many were replaced. Build an optimizer after "
                     "routing: the parameters are new.")
    route.__module__, route.__name__, route.__qualname__ = module, "route_linears", "route_linears"
    return Linear, route
