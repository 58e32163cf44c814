"""`HGEMMLinear` and `route_linears` under their older names: the module is `hgemm_common.linear.HGEMMLinear`,
offered as `triton_kernels.Linear` and `ptx_kernels.Linear` (the package fixed); here `package=` picks it. This
module registers both packages' operators (compare is the package that may import both)."""
from __future__ import annotations

from torch import nn

from hgemm_common.linear import PACKAGES, HGEMMLinear
from hgemm_common.linear import route_linears as _route_linears
from ptx_kernels import ops as _ptx_ops  # noqa: F401  registers torch.ops.tensorcore_hgemm.ptx_hgemm
from triton_kernels import ops as _triton_ops  # noqa: F401  registers torch.ops.tensorcore_hgemm.triton_hgemm

__all__ = ["PACKAGES", "HGEMMLinear", "route_linears"]


def route_linears(model: nn.Module, **kwargs) -> int:
    """Replace every `nn.Linear` inside `model` (in place) by an `HGEMMLinear` holding the same weights (kwargs:
    package, kernel (or variant), acc, dtype); returns how many were replaced. The replacements are new parameters:
    build an optimizer after routing."""
    return _route_linears(model, HGEMMLinear, **kwargs)
