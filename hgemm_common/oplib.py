"""The project's PyTorch operators (`torch.ops.tensorcore_hgemm.*`), registered through `torch.library.Library`.

Both kernel packages define their operators here, so they share one namespace and one way of registering:
`define()` declares the schema, registers the implementation for every backend (CompositeExplicitAutograd, as
`torch.library.custom_op` does), the fake implementation for torch.compile and meta tensors, and an Autograd-key
kernel that records the autograd formula when grad is needed and otherwise runs the implementation directly.

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


def _plain(args: tuple) -> bool:
    """Whether a call reaching the Autograd key may run the implementation right there: every tensor argument a
    plain CUDA or CPU torch.Tensor (not meta, not a FakeTensor or another subclass, not a functionalization
    wrapper) and no dispatch mode (fake, functional, proxy, schema check) or functorch transform active. Anything
    else takes the dispatcher's way down to the keys below Autograd, which those modes and wrappers live on."""
    if torch._C._len_torch_dispatch_stack() or torch._C._are_functorch_transforms_active():
        return False
    return all(type(t) is torch.Tensor and (t.is_cuda or t.is_cpu) and not torch._is_functional_tensor(t)
               for t in args if isinstance(t, torch.Tensor))


def define(name: str, schema: str, impl: Callable, fake: Callable, backward: Callable,
           setup_context: Callable):
    """Register operator `NAMESPACE::name` with `schema` (the part after the name: "(Tensor a, ...) -> Tensor"),
    its implementation, fake implementation and autograd formula; returns `torch.ops.<NAMESPACE>.<name>`.

    The Autograd key's kernel is this module's own (what `register_autograd` builds, minus a layer): with grad
    needed it records the call through an autograd.Function whose forward redispatches below Autograd; without,
    on plain tensors (`_plain`) it runs the implementation at once instead of a second trip through the
    dispatcher into the CompositeExplicitAutograd kernel (the H100's eager operator paid that trip per call:
    docs/results/h100-185045e-triton/wall_profile.log)."""
    _LIB.define(name + schema)
    _LIB.impl(name, impl, "CompositeExplicitAutograd")
    torch.library.register_fake(f"{NAMESPACE}::{name}", fake, lib=_LIB)
    op = getattr(getattr(torch.ops, NAMESPACE), name)
    default = op.default

    def forward(*args):  # no ctx: with a separate setup_context, autograd.Function.forward takes the inputs only
        with torch._C._AutoDispatchBelowAutograd():
            return default(*args)

    recorded = type(f"Autograd_{name}", (torch.autograd.Function,), {
        "forward": staticmethod(forward),
        "setup_context": staticmethod(lambda ctx, inputs, output: setup_context(ctx, inputs, output)),
        "backward": staticmethod(lambda ctx, *grads: backward(ctx, *grads)),
    })

    # the dispatcher drops trailing arguments equal to their defaults; setup_context and backward see them all
    defaults = tuple(a.default_value if a.has_default_value() else None for a in default._schema.arguments)

    def autograd_kernel(*args):
        if torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in args):
            return recorded.apply(*args, *defaults[len(args):])
        if _plain(args):
            return impl(*args)
        with torch._C._AutoDispatchBelowAutograd():
            return default(*args)

    _LIB.impl(name, autograd_kernel, "Autograd")
    return op
