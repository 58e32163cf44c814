"""Triton HGEMMs callable from PyTorch: a blocked kernel (any GPU, any strides), split-K kernels (skinny M), a gemv
kernel (M = 1), persistent TMA kernels (Hopper, aligned operands); `hgemm` picks one per kind of call (`kernel=`
pins one) and caches the choice. `Linear` and `route_linears`: an nn.Linear on these kernels. Importing the package
registers its operator, `torch.ops.tensorcore_hgemm.triton_hgemm` (ops.py). What each kernel is:
`triton_kernels.variants`; how the choice is made: `triton_kernels.dispatch`."""
from hgemm_common.errors import HgemmError, HgemmTypeError, HgemmValueError
from hgemm_common.operands import layout_of
from hgemm_common.validation import Problem, interpreter_active, validate

from . import ops  # noqa: F401  registers torch.ops.tensorcore_hgemm.triton_hgemm (a few tens of ms)
from .api import KERNELS, Plan, best_config, choose_kernel, configs, hgemm, plan
from .common import ACCUMULATIONS, Config
from .variants import VARIANTS

__all__ = ["ACCUMULATIONS", "KERNELS", "VARIANTS", "Config", "HgemmError", "HgemmTypeError", "HgemmValueError",
           "Linear", "Plan", "Problem", "best_config", "choose_kernel", "configs", "hgemm", "interpreter_active",
           "layout_of", "plan", "route_linears", "validate"]


def __getattr__(name: str):
    """`Linear` and `route_linears`, imported on first use."""
    if name in ("Linear", "route_linears"):
        from . import nn
        return getattr(nn, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
