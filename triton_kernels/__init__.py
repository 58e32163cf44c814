"""Triton HGEMMs callable from PyTorch."""
from .blocked import ACCUMULATIONS, Config, best_config, configs, hgemm, layout_of
from .validation import Problem, interpreter_active, validate

__all__ = ["ACCUMULATIONS", "Config", "Problem", "best_config", "configs", "hgemm", "interpreter_active",
           "layout_of", "validate"]
