"""The project's PyTorch operators (`torch.ops.tensorcore_hgemm.*`), registered through `torch.library.Library`.

Both kernel packages define their operators here, so they share one namespace and one way of registering:
`define()` declares the schema, registers the implementation for every backend (CompositeExplicitAutograd, as
`torch.library.custom_op` does), the fake implementation for torch.compile and meta tensors, and an Autograd-key
kernel that records the autograd formula when grad is needed and otherwise runs the implementation directly.

Argument names: every non-tensor argument of these operators starts with `hgemm_` (`hgemm_kernel`, `hgemm_acc`,
`hgemm_tune`), while the Python functions keep `kernel=` and `acc=`. Inductor lowers an operator it cannot see into
as a fallback, `FallbackKernel.create(kernel, *args, **kwargs)`, handing it the call's arguments by name, defaults
included (`torch.fx.operator_schemas.normalize_function`): an argument named like one of that function's own
parameters (`kernel`, as the selector was once called) raises "got multiple values for argument 'kernel'" the
first time a compiled graph is lowered. Inductor names no parameter `hgemm_*`; the operands keep `a`, `b`,
`values`, `meta`, and tests/test_torch_integration.py checks every name of every overload against the parameters
of the installed torch's fallback path.

Why not `torch.library.custom_op`: it wraps every call in a Python layer of its own on top of the dispatcher's, and
per-call host time is what a model's forward pass pays (the eager operator's wall time with each:
`scripts/wall_time.py --ops`). The operators behave the same: opcheck,
torch.compile (one opaque node), autograd, fake tensors.
"""
from __future__ import annotations

from typing import Callable

import torch

NAMESPACE = "tensorcore_hgemm"
_LIB = torch.library.Library(NAMESPACE, "FRAGMENT")


_Tensor = torch.Tensor
_dispatch_modes = torch._C._len_torch_dispatch_stack
_functorch_active = torch._C._are_functorch_transforms_active
_is_functional = torch._is_functional_tensor
_grad_enabled = torch.is_grad_enabled


def _route(args: tuple) -> int:
    """Where a call reaching the Autograd key goes: RECORD (grad enabled and some tensor argument requires grad),
    PLAIN (the implementation may run right there: every tensor argument a plain CUDA or CPU torch.Tensor (not
    meta, not a FakeTensor or another subclass, not a functionalization wrapper) and no dispatch mode (fake,
    functional, proxy, schema check) or functorch transform active), or BELOW (the dispatcher's way down to the
    keys below Autograd, which those modes and wrappers live on). One pass over the arguments with the checks
    bound to module names: this runs on every eager call of an operator (its cost shows as the operator's per-call
    time against hgemm's in `scripts/wall_time.py --ops`)."""
    grad = plain = False
    modes = _dispatch_modes() or _functorch_active()
    plain = not modes
    for t in args:
        if isinstance(t, _Tensor):
            if t.requires_grad:
                grad = True
            if plain and (type(t) is not _Tensor or not (t.is_cuda or t.is_cpu) or _is_functional(t)):
                plain = False
    if grad and _grad_enabled():
        return RECORD
    return PLAIN if plain else BELOW


RECORD, PLAIN, BELOW = 0, 1, 2


def define(name: str, schema: str, impl: Callable, fake: Callable, backward: Callable,
           setup_context: Callable):
    """Register operator `NAMESPACE::name` with `schema` (the part after the name: "(Tensor a, ...) -> Tensor"),
    its implementation, fake implementation and autograd formula; returns `torch.ops.<NAMESPACE>.<name>`.

    The Autograd key's kernel is this module's own (what `register_autograd` builds, minus a layer): with grad
    needed it records the call through an autograd.Function whose forward redispatches below Autograd; without,
    on plain tensors (`_route`) it runs the implementation at once instead of a second trip through the
    dispatcher into the CompositeExplicitAutograd kernel (the eager operator paid that trip per call, as a profile
    of its calls showed: `scripts/wall_time.py --profile`)."""
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
        route = _route(args)
        if route == PLAIN:
            return impl(*args)
        if route == RECORD:
            return recorded.apply(*args, *defaults[len(args):])
        with torch._C._AutoDispatchBelowAutograd():
            return default(*args)

    _LIB.impl(name, autograd_kernel, "Autograd")
    return op


def define_alias(name: str, schema: str, selector: str, alias: str) -> None:
    """Overload `NAMESPACE::name.<alias>` that takes a keyword under its older name (`variant=` for `kernel=`) and
    calls the default overload, so `torch.ops.<NAMESPACE>.<name>(a, b, variant="x")` keeps working; given both
    names, it raises a one-line HgemmValueError. `schema` is the overload's arguments: the default's, with
    `str? <selector>=None` and a keyword-only `str <alias>`. A CompositeImplicitAutograd kernel: autograd, fake
    tensors and torch.compile see the default overload it calls."""
    from .errors import pick

    default = getattr(getattr(torch.ops, NAMESPACE), name).default
    args = default._schema.arguments
    names = [a.name for a in args]
    defaults = {a.name: a.default_value for a in args if a.has_default_value()}

    def impl(*positional, **keywords):
        bound = dict(zip(names, positional), **keywords)
        bound[selector] = pick(name, selector, bound.get(selector), alias, bound.pop(alias), defaults[selector])
        return default(*(bound[n] if n in bound else defaults[n] for n in names))

    _LIB.define(f"{name}.{alias}{schema} -> Tensor")
    _LIB.impl(f"{name}.{alias}", impl, "CompositeImplicitAutograd")
