"""`HGEMMLinear`: a drop-in `nn.Linear` (fp16) whose matrix product runs on this project's kernels, for trying a
kernel inside a model. Forward is x @ W^T (+ bias) through the registered operators, so autograd and
torch.compile work as they do for those operators. It lives in `compare`, the one package that may import both
kernel packages (neither kernel package imports the other)."""
from __future__ import annotations

import math

import torch
from torch import nn

PACKAGES = ("triton", "ptx")  # the kernel package (a record's `package`)


class HGEMMLinear(nn.Module):
    """y = x W^T + b with fp16 weights, like `nn.Linear`.

    package: "triton" (the blocked Triton kernel) or "ptx" (a hand-written kernel, `variant`, see
    `ptx_kernels.variants()`). acc: "fp32" or "fp16" accumulation. Inputs of any leading shape (..., in_features).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, package: str = "triton",
                 variant: str = "mma_stmatrix", acc: str = "fp32", device=None) -> None:
        super().__init__()
        if package not in PACKAGES:
            raise ValueError(f"HGEMMLinear: package must be one of {PACKAGES}, got {package!r}")
        self.in_features, self.out_features = in_features, out_features
        self.package, self.variant, self.acc = package, variant, acc
        self.weight = nn.Parameter(torch.empty((out_features, in_features), dtype=torch.float16, device=device))
        self.bias = nn.Parameter(torch.empty(out_features, dtype=torch.float16, device=device)) if bias else None
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
        """The same layer (weights converted to fp16) on this project's kernels."""
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
        x2 = x.reshape(-1, self.in_features)
        if self.package == "ptx":
            y = torch.ops.tensorcore_hgemm.ptx_hgemm(x2, self.weight.t(), self.variant, self.acc)
        else:
            y = torch.ops.tensorcore_hgemm.triton_hgemm(x2, self.weight.t(), self.acc)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        kernel = self.variant if self.package == "ptx" else "triton blocked"
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, kernel={kernel}, acc={self.acc}")
