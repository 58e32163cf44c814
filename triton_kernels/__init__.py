"""Triton HGEMMs callable from PyTorch: a blocked kernel (any GPU, any strides) and a persistent TMA kernel
(Hopper, aligned operands); `hgemm` picks one."""
from .api import KERNELS, best_config, choose_kernel, configs, hgemm
from .blocked import layout_of
from .common import ACCUMULATIONS, Config
from .validation import Problem, interpreter_active, validate

__all__ = ["ACCUMULATIONS", "KERNELS", "Config", "Problem", "best_config", "choose_kernel", "configs", "hgemm",
           "interpreter_active", "layout_of", "validate"]
