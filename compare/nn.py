"""`HGEMMLinear`: a drop-in `nn.Linear` (fp16 or bf16) whose matrix product runs on this project's kernels, for
trying a kernel inside a model; `route_linears` swaps every `nn.Linear` of a model for one. Forward is x @ W^T (+ bias) through the registered operators, so autograd and
torch.compile work as they do for those operators. It lives in `compare`, the one package that may import both
kernel packages (neither kernel package imports the other)."""
from __future__ import annotations

import math

import torch
from torch import nn

PACKAGES = ("triton", "ptx")  # the kernel package (a record's `package`)


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
        if x.shape[-1] != self.in_features:
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
