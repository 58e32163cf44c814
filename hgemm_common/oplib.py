"""The project's PyTorch operators (`torch.ops.tensorcore_hgemm.*`), registered through `torch.library.Library`.

Both kernel packages define their operators here, so they share one namespace and one way of registering:
`define()` declares the schema, registers the implementation for every backend (CompositeExplicitAutograd, as
`torch.library.custom_op` does), the fake implementation for torch.compile and meta tensors, and the autograd
formula with `torch.library.register_autograd`.

Why not `torch.library.custom_op`: it wraps every call in its own Python layer on top of the dispatcher's; on this
project's CPU machine a custom op with a trivial body cost 9.1 us per call against 6.7 us for the same op defined
here (and 1.2 us for the body alone), and on the H100's host the Triton operator spent about 50 us per call beyond
the kernel launch (docs/results/h100-28d9a73-bf16/wall). The operators behave the same: opcheck, torch.compile
(one opaque node), autograd, fake tensors.
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
