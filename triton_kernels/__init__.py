"""Triton HGEMMs callable from PyTorch: a blocked kernel (any GPU, any strides) and a persistent TMA kernel
(Hopper, aligned operands); `hgemm` picks one. What each kernel is: `triton_kernels.variants`."""
from hgemm_common.operands import layout_of
from hgemm_common.validation import Problem, interpreter_active, validate

from .api import KERNELS, best_config, choose_kernel, configs, hgemm
from .common import ACCUMULATIONS, Config
from .variants import VARIANTS

__all__ = ["ACCUMULATIONS", "KERNELS", "VARIANTS", "Config", "Problem", "best_config", "choose_kernel", "configs",
           "hgemm", "interpreter_active", "layout_of", "validate"]
