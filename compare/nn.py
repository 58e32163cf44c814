"""`HGEMMLinear`: a drop-in `nn.Linear` (fp16 or bf16) whose matrix product runs on this project's kernels, for
trying a kernel inside a model; `route_linears` swaps every `nn.Linear` of a model for one. Forward is x @ W^T (+ bias)
through the registered operators, so autograd and torch.compile work as they do for those operators; an eager call
that records nothing for autograd launches the layer's kept plan for its kind of input directly (`HGEMMLinear.forward`).
It lives in `compare`, the one package that may import both kernel packages (neither kernel package imports the
other)."""
from __future__ import annotations

import math

import torch
from torch import nn

PACKAGES = ("triton", "ptx")  # the kernel package (a record's `package`)
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


class _Plans(dict):
    """A layer's plans by kind of input: {key: (output shape, launch)}. They hold compiled kernels and views of the
    weight, which neither a copy of the layer nor its pickle may carry: copies and unpickled layers start empty."""

    def __deepcopy__(self, memo):
        return _Plans()

    def __reduce__(self):
        return (_Plans, ())


class HGEMMLinear(nn.Module):
    """y = x W^T + b with fp16 or bf16 weights, like `nn.Linear`.

    package: "triton" (`triton_kernels.hgemm`'s automatic choice) or "ptx" (a hand-written kernel, `variant`, see
    `ptx_kernels.variants()`). acc: "fp32" or "fp16" accumulation (bf16: fp32 only). dtype: torch.float16 or
    torch.bfloat16, the weights' and the inputs' (inputs of another dtype raise, as the kernels take one dtype).
    Inputs of any leading shape (..., in_features).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, package: str = "triton",
                 variant: str = "mma_stmatrix", acc: str = "fp32", device=None, dtype=torch.float16) -> None:
        super().__init__()
        from hgemm_common.validation import DTYPE_NAMES, check_acc

        if package not in PACKAGES:
            raise ValueError(f"HGEMMLinear: package must be one of {PACKAGES}, got {package!r}")
        if dtype not in DTYPE_NAMES:
            raise TypeError(f"HGEMMLinear: dtype must be torch.float16 or torch.bfloat16, got {dtype}")
        check_acc(DTYPE_NAMES[dtype], acc, "HGEMMLinear")
        self.in_features, self.out_features = in_features, out_features
        self.package, self.variant, self.acc = package, variant, acc
        self.weight = nn.Parameter(torch.empty((out_features, in_features), dtype=dtype, device=device))
        self.bias = nn.Parameter(torch.empty(out_features, dtype=dtype, device=device)) if bias else None
        self.reset_parameters()
        self._plans = _Plans()
        self._plans_weight = None  # the weight's facts (`_weight_facts`) the plans were made for
        if package == "ptx":
            from ptx_kernels import ops  # noqa: F401  registers torch.ops.tensorcore_hgemm.ptx_hgemm
        else:
            from triton_kernels import ops  # noqa: F401  registers torch.ops.tensorcore_hgemm.triton_hgemm

    def reset_parameters(self) -> None:
        """nn.Linear's initialisation: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias."""
        bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
        with torch.no_grad():
            self.weight.uniform_(-bound, bound)
            if self.bias is not None:
                self.bias.uniform_(-bound, bound)

    @classmethod
    def from_linear(cls, linear: nn.Linear, **kwargs) -> "HGEMMLinear":
        """The same layer on this project's kernels: bf16 weights stay bf16, others become fp16 unless `dtype=`
        says otherwise."""
        kwargs.setdefault("dtype", torch.bfloat16 if linear.weight.dtype == torch.bfloat16 else torch.float16)
        m = cls(linear.in_features, linear.out_features, linear.bias is not None, device=linear.weight.device,
                **kwargs)
        with torch.no_grad():
            m.weight.copy_(linear.weight)
            if linear.bias is not None:
                m.bias.copy_(linear.bias)
        return m

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
            raise TypeError(f"HGEMMLinear: inputs must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() == 0 or x.shape[-1] != self.in_features:
            raise ValueError(f"HGEMMLinear: expected inputs (..., {self.in_features}), got {tuple(x.shape)}")
        if x.dtype != self.weight.dtype:
            raise TypeError(f"HGEMMLinear: inputs are {x.dtype}, the weights {self.weight.dtype}; convert one")
        x2 = x.reshape(-1, self.in_features)
        if self.package == "ptx":
            y = torch.ops.tensorcore_hgemm.ptx_hgemm(x2, self.weight.t(), self.variant, self.acc)
        else:
            y = torch.ops.tensorcore_hgemm.triton_hgemm(x2, self.weight.t(), self.acc)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*x.shape[:-1], self.out_features)

    def _keep_plan(self, key: tuple, x: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> None:
        """After a first call of a kind of input: keep the launch the package planned for it, if it planned one
        (none for an empty problem, operands it copied, or an x whose rows are no view of it). Plans of an earlier
        weight (replaced, moved, converted) are dropped first, so they keep neither its memory nor its kernels."""
        if self.bias is not None and self.bias.dtype != y.dtype:  # y + bias promoted: add_ could not
            return
        try:
            x2 = x.view(-1, self.in_features)
        except RuntimeError:  # the rows of x are not a view of a matrix: the operator ran on a copy
            return
        wt = w.t()
        m, k, n = x2.shape[0], self.in_features, self.out_features
        if self.package == "ptx":
            import ptx_kernels

            run = ptx_kernels.planned(x2, wt, variant=self.variant, acc=self.acc)
            if run is None:
                return

            def launch(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> None:
                run(x.view(m, k), wt, y.view(m, n))  # wt: the key holds the weight's address, shape and strides
        else:
            from triton_kernels import api

            runner = api.planned(x2, wt, self.acc)
            if runner is None:
                return

            def launch(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> None:
                if runner.launchable():  # the addresses are those of the 2-D views the plan was made for
                    runner.launch(x.device, [x.data_ptr(), w.data_ptr(), y.data_ptr()])
                else:
                    runner(x.view(m, k), w.t(), y.view(m, n))
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
        kernel = self.variant if self.package == "ptx" else "triton auto"
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, kernel={kernel}, acc={self.acc}, dtype={self.weight.dtype}")


def route_linears(model: nn.Module, **kwargs) -> int:
    """Replace every `nn.Linear` inside `model` (in place) by an `HGEMMLinear` holding the same weights (kwargs:
    package, variant, acc, dtype); returns how many were replaced. The replacements are new parameters: build an
    optimizer after routing."""
    count = 0
    for name, child in list(model.named_children()):
        if isinstance(child, nn.Linear):
            setattr(model, name, HGEMMLinear.from_linear(child, **kwargs))
            count += 1
        else:
            count += route_linears(child, **kwargs)
    return count
