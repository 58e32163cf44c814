"""The project's PyTorch operators (`torch.ops.tensorcore_hgemm.*`), registered through `torch.library.Library`.

Both kernel packages define their operators here, so they share one namespace and one way of registering:
`define()` declares the schema, registers the implementation for every backend (CompositeExplicitAutograd, as
`torch.library.custom_op` does), the fake implementation for torch.compile and meta tensors, and the autograd
formula with `torch.library.register_autograd`.

Why not `torch.library.custom_op`: it wraps every call in a Python layer of its own on top of the dispatcher's, and
per-call host time is what a model's forward pass pays (the eager operator's wall time before and after this
change: docs/results/h100-28d9a73-bf16/, `scripts/wall_time.py --ops`). The operators behave the same: opcheck,
torch.compile (one opaque node), autograd, fake tensors.
"""
from __future__ import annotations

from typing import Callable

import torch

NAMESPACE = "tensorcore_hgemm"
_LIB = torch.library.Library(NAMESPACE, "FRAGMENT")


def define(name: str, schema: str, impl: Callable, fake: Callable, backward: Callable,
           setup_context: Callable):
    """Register operator `NAMESPACE::name` with `schema` (the part after the name: "(Tensor a, ...) -> Tensor"),
    its implementation, fake implementation and autograd formula; returns `torch.ops.<NAMESPACE>.<name>`."""
    qualname = f"{NAMESPACE}::{name}"
    _LIB.define(name + schema)
    _LIB.impl(name, impl, "CompositeExplicitAutograd")
    torch.library.register_fake(qualname, fake, lib=_LIB)
    torch.library.register_autograd(qualname, backward, setup_context=setup_context, lib=_LIB)
    return getattr(getattr(torch.ops, NAMESPACE), name)
