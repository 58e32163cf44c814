"""Triton HGEMMs callable from PyTorch: a blocked kernel (any GPU, any strides), a split-K kernel (skinny M), a
persistent TMA kernel (Hopper, aligned operands); `hgemm` picks one per kind of
call and caches the choice. What each kernel is: `triton_kernels.variants`; how the choice is made:
`triton_kernels.dispatch`."""
from hgemm_common.operands import layout_of
from hgemm_common.validation import Problem, interpreter_active, validate

from .api import KERNELS, Plan, best_config, choose_kernel, configs, hgemm, plan
from .common import ACCUMULATIONS, Config
from .variants import VARIANTS

__all__ = ["ACCUMULATIONS", "KERNELS", "VARIANTS", "Config", "Plan", "Problem", "best_config", "choose_kernel",
           "configs", "hgemm", "interpreter_active", "layout_of", "plan", "validate"]
