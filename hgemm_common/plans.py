"""Per-call plan caches of both kernel packages: the key of a call (what its operands' shapes, strides, dtypes,
devices and alignment decide) and a bounded, thread-safe LRU mapping. A call whose key was seen before skips
validation and the layout decisions its first call made (`triton_kernels.dispatch`, `ptx_kernels.hgemm`)."""
from __future__ import annotations

import threading
from collections import OrderedDict

import torch

from .validation import max_element_offset


def call_key(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None, *args) -> tuple:
    """(shapes, strides, dtypes, devices of A and B, their 16-byte alignment bits, the same facts of out or None,
    *args). The alignment bit is None for a null pointer (no memory: an empty tensor, or a ZeroTensor), so that
    such a call never reuses a plan made for real memory and goes through validation instead. Raises
    AttributeError / TypeError for non-tensors (the caller then validates, which names the problem)."""
    o = None
    if out is not None:
        po = out.data_ptr()
        o = (out.shape, out.stride(), out.dtype, out.device, po % 16 == 0 if po else None)
    pa, pb = a.data_ptr(), b.data_ptr()
    return (a.shape, b.shape, a.stride(), b.stride(), a.dtype, b.dtype, a.device, b.device,
            pa % 16 == 0 if pa else None, pb % 16 == 0 if pb else None, o, *args)


def byte_extents(*tensors: torch.Tensor) -> tuple[int, ...]:
    """Each tensor's bytes from its first element to past the last its strides reach: what a plan keeps of A, B and
    out= for `out_overlaps` (its key fixes shapes and strides; only the addresses change from call to call)."""
    return tuple((max_element_offset(t) + 1) * t.element_size() for t in tensors)


def out_overlaps(extents: tuple[int, int, int], a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> bool:
    """validate()'s overlap test of out= against A and B, from the `byte_extents` of (A, B, out) a plan keeps."""
    ea, eb, eo = extents
    o0 = out.data_ptr()
    a0, b0 = a.data_ptr(), b.data_ptr()
    return (o0 < a0 + ea and a0 < o0 + eo) or (o0 < b0 + eb and b0 < o0 + eo)


class LRU:
    """A bounded mapping (least recently used out first) that threads may share. A hit takes no lock (it is on
    every call's path): OrderedDict's get and move_to_end are single C calls under the GIL, and a key evicted by
    another thread between the two is simply not moved; inserts and evictions take the lock."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._d: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        v = self._d.get(key)
        if v is not None:
            try:
                self._d.move_to_end(key)
            except KeyError:  # evicted by another thread since the get
                pass
        return v

    def put(self, key, value):
        with self._lock:
            self._d[key] = value
            self._d.move_to_end(key)
            while len(self._d) > self.capacity:
                self._d.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._d)

    def clear(self) -> None:
        with self._lock:
            self._d.clear()
