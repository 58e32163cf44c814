"""Launching a compiled Triton kernel without Triton's per-call Python machinery.

`kernel[grid](...)` binds its arguments, computes a specialization key, looks the compiled kernel up, builds a
`TensorDescriptor`'s CUtensorMap and only then launches: tens of microseconds of Python per call, more than a
16x4096x4096 GEMM takes on an H100. A plan (triton_kernels/dispatch.py) launches its kernels once through that
path (`jit_launch`, which also compiles), keeps the `CompiledKernel`s it returns and from then on calls the
compiled launcher directly (`Direct`): positional arguments in the kernel's parameter order, pointers as integers,
TMA descriptors from a cache. A plan's key fixes everything Triton specializes on (integer values, pointer
alignment), so the compiled kernel it keeps is the one `kernel[grid]` would find.

Triton's launcher internals (each release's launcher argument layout) live in
triton_kernels/triton_internals.py; on a Triton release it does not know, with a launch hook set (a profiler), or
under the interpreter, plans launch through `jit_launch` every time.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import NamedTuple

import torch
from triton.tools.tensor_descriptor import TensorDescriptor

from hgemm_common.errors import HgemmError
from hgemm_common.validation import interpreter_active, interpreter_numpy_problem

from . import triton_internals
from .common import INTERPRETED
from .triton_internals import COMPILE_OPTIONS, hooks_idle  # noqa: F401 - hooks_idle: dispatch.py's per-call check


class Desc(NamedTuple):
    """A TMA operand: a 2-D row-major view (unit inner stride) of `of` (the operand as the caller passed it; the
    view starts at its address) and the box one load or store moves."""
    tensor: torch.Tensor
    block: tuple[int, int]
    of: torch.Tensor | None = None  # None: the view is the operand itself

    def descriptor(self) -> TensorDescriptor:
        t = self.tensor
        return TensorDescriptor(t, list(t.shape), list(t.stride()), list(self.block))


class Kept(NamedTuple):
    """A buffer a call does not allocate but borrows (split-K's tile counters and workspace): `tensor` for this
    call, `get(device, size, stream)` gives the buffer of a later call on the current stream (its raw handle; None
    while capturing a graph). Passed to the kernel as a pointer."""
    tensor: torch.Tensor
    get: object  # (torch.device, int, int | None) -> torch.Tensor
    size: int


class Spec(NamedTuple):
    """One kernel launch of a call: the @triton.jit function, the grid, every parameter in order (TMA operands as
    `Desc`), warps and stages. (NamedTuples: built on every call, and cheaper to build than dataclasses.)"""
    fn: object  # triton.runtime.jit.JITFunction
    grid: tuple[int, ...]
    args: tuple
    num_warps: int
    num_stages: int
    launch_pdl: bool = False  # a programmatic dependent launch (sm_90+): may start before the previous kernel ends


# Triton's interpreter keeps its builder in module state: two threads interpreting kernels at once corrupt each
# other ("Did you forget to add @triton.jit ?" from the second), so interpreted launches take turns.
_INTERPRETER_LOCK = threading.Lock()


def interpreter_switched() -> str | None:
    """Why the kernels cannot launch when TRITON_INTERPRET changed after triton_kernels was imported (None when it
    did not): @triton.jit reads it when a kernel is defined, at import, so kernels defined for the GPU meet CPU
    tensors (Triton's own error: "0 active drivers"), or interpreted ones meet a GPU."""
    now = interpreter_active()
    if now == INTERPRETED.value:
        return None
    if now:
        return ("TRITON_INTERPRET=1 was set after triton_kernels was imported, and Triton decides at import whether "
                "its kernels are interpreted; set it before the first import (in the shell, or at the top of the "
                "script)")
    return ("TRITON_INTERPRET was unset after triton_kernels was imported under it, and the kernels stay "
            "interpreted; unset it before the first import to run them on the GPU")


def jit_launch(spec: Spec):
    """Launch through `kernel[grid]` (compiling on first use, FP fusion set explicitly); returns the CompiledKernel
    (None in the interpreter). An HgemmError if TRITON_INTERPRET changed since the kernels were defined."""
    args = [a.descriptor() if isinstance(a, Desc) else a.tensor if isinstance(a, Kept) else a for a in spec.args]
    why = interpreter_switched()
    if why is not None:
        raise HgemmError(f"hgemm: {why}")
    if interpreter_active():
        why = interpreter_numpy_problem()
        if why is not None:
            raise HgemmError(f"hgemm: {why}")
        with _INTERPRETER_LOCK:
            return spec.fn[spec.grid](*args, num_warps=spec.num_warps, num_stages=spec.num_stages)
    pdl = {"launch_pdl": True} if spec.launch_pdl else {}
    return spec.fn[spec.grid](*args, num_warps=spec.num_warps, num_stages=spec.num_stages, **COMPILE_OPTIONS, **pdl)


def direct_supported() -> bool:
    """Whether `Direct` may be used now: a Triton whose launcher layout triton_internals knows, a CUDA driver, no
    launch hooks (profilers get the JIT path, which calls them)."""
    return triton_internals.LAYOUT is not None and not interpreter_active() and hooks_idle()


class DescriptorCache:
    """CUtensorMaps by everything their encoding reads: base address, shape, strides, box, swizzle, element type.

    A cached map is therefore byte for byte the map a fresh encoding of the tensor in hand would give: a tensor
    allocated later at a freed one's address, with the same shape and strides, is described correctly by the
    same map, and one with other shape or strides has another key. The cache holds integers, never a tensor, so it
    keeps no memory alive. Bounded (oldest entry out first) and safe to share between threads: a hit is one dict
    lookup (atomic under the GIL, no lock on the per-call path); inserts and evictions take the lock."""

    def __init__(self, capacity: int = 1024):
        self.capacity = capacity
        self._maps: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._maps)

    def get(self, key: tuple, encode):
        m = self._maps.get(key)
        if m is not None:
            return m
        m = encode()
        with self._lock:
            self._maps[key] = m
            while len(self._maps) > self.capacity:
                self._maps.popitem(last=False)
        return m

    def clear(self) -> None:
        with self._lock:
            self._maps.clear()


DESCRIPTORS = DescriptorCache()

class _DescArg:
    """How one descriptor parameter is passed, as Triton's `make_tensordesc_arg` does it: a CUtensorMap (from the
    cache) followed by shape and strides; or, for a descriptor the compiler did not lower to a CUtensorMap,
    pointer, shape and strides twice (`triton_internals.unlowered_descriptor_tail`). A plan's key fixes the
    operand's shape and strides, so only the base address changes from call to call."""

    def __init__(self, d: Desc, meta: dict | None):
        t = d.tensor
        self.shape, self.strides = list(t.shape), list(t.stride())
        self.meta = meta
        if meta is not None:
            self.static = (tuple(self.shape), tuple(self.strides), tuple(meta["block_size"]), meta["swizzle"],
                           meta["elem_size"], meta["elem_type"], t.device.index)

    def encode(self, ptr: int):
        return triton_internals.encode_tma(ptr, self.meta, self.shape, self.strides)

    def head(self, ptr: int):
        """The argument that depends on the address: the CUtensorMap (cached), or the pointer itself."""
        if self.meta is None:
            return ptr
        return DESCRIPTORS.get((ptr, self.static), lambda: self.encode(ptr))

    def tail(self) -> list:
        """The arguments that follow `head` and are the same on every call of a plan: shape and strides."""
        if self.meta is None:
            return triton_internals.unlowered_descriptor_tail(self.shape, self.strides)
        return [*self.shape, *self.strides]


class Direct:
    """Launches one CompiledKernel as its launcher does after `kernel[grid]` has bound the arguments, minus the
    binding, the key and the descriptor encoding (`triton_internals.launch_head`). Built from the first call's
    `Spec` and the call's tensors (`operands`: A, B, C as the kernels saw them, then the call's scratch tensors); a
    plan's key fixes every argument but the addresses, so later calls pass only those (`ptrs`, in the order of
    `operands`)."""

    def __init__(self, compiled, spec: Spec, operands: list[torch.Tensor]):
        if not triton_internals.launcher_usable(compiled.run):
            raise NotImplementedError("kernels with global or profile scratch, or GSan, take the JIT path")
        self._launch, head = triton_internals.launch_head(compiled, spec.grid)
        metas = iter(getattr(compiled.metadata, "tensordesc_meta", None) or [])

        def index(t):
            return next(i for i, o in enumerate(operands) if o is t)

        # Every kernel argument in order, those fixed by the plan filled in; `_fill` says which positions take the
        # call's addresses: (position, operand index, None for a pointer or the _DescArg of a descriptor).
        args, fill = [], []
        for a in spec.args:
            if isinstance(a, (torch.Tensor, Kept)):
                fill.append((len(args), index(a if isinstance(a, torch.Tensor) else a.tensor), None))
                args.append(None)
            elif isinstance(a, Desc):
                d = _DescArg(a, next(metas, None))
                fill.append((len(args), index(a.tensor if a.of is None else a.of), d))
                args += [None, *d.tail()]
            else:
                args.append(a)
        if triton_internals.LAYOUT.generic:  # the kernel's arguments as one sequence, the launch's last
            self._args, self._kernel_args = [*head, None], args
        else:  # flat after the head
            self._args, self._kernel_args = head + args, None
            fill = [(pos + len(head), src, d) for pos, src, d in fill]
        self._fill = tuple(fill)

    def __call__(self, ptrs: list[int], stream: int) -> None:
        args = self._args.copy()
        args[triton_internals.STREAM_AT] = stream
        kernel_args = args if self._kernel_args is None else self._kernel_args.copy()
        for pos, src, desc in self._fill:
            kernel_args[pos] = ptrs[src] if desc is None else desc.head(ptrs[src])
        if kernel_args is not args:
            args[-1] = kernel_args
        self._launch(*args)
