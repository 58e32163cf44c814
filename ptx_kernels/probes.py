"""Run the fragment-layout probes (csrc/lab/probes.cu) on the GPU and decode what each lane held, in the same array
shapes as the model in `layouts.py`, so tests can compare hardware and model directly."""
from __future__ import annotations

import numpy as np
import torch

from . import layouts
from .build import load


def _u16(t: torch.Tensor) -> np.ndarray:
    return t.cpu().numpy().astype(np.int64) & 0xFFFF


def ldmatrix(num: int, trans: bool = False) -> np.ndarray:
    """(32, 2*num, 3): (matrix, row, col) of the element each lane received, as the hardware did it."""
    v = _u16(load().probe_ldmatrix(num, trans))
    return np.stack([v // 64, (v % 64) // 8, v % 8], -1)


def stmatrix(num: int, trans: bool = False) -> np.ndarray:
    """(32, 2*num, 3): where each lane's (register, half) landed: (matrix, row, col)."""
    stored = _u16(load().probe_stmatrix(num, trans))  # (num*64,) the value lane*8 + 2*reg + half
    out = np.full((32, 2 * num, 3), -1, dtype=np.int64)
    for pos, v in enumerate(stored):
        if v == 0xFFFF:
            continue
        lane, e = v // 8, v % 8
        out[lane, e] = (pos // 64, (pos % 64) // 8, pos % 8)
    return out


def _pack(values: np.ndarray) -> np.ndarray:
    """(32, 2k) fp16 values -> (32, k) int32 registers, element 2i in the low half."""
    bits = values.astype(np.float16).view(np.uint16).astype(np.uint32)
    return (bits[:, 0::2] | (bits[:, 1::2] << 16)).view(np.int32)


def mma(a: np.ndarray, b: np.ndarray, acc: str = "fp32") -> np.ndarray:
    """D = A @ B (A 16x16, B 16x8 small integers) through one mma.sync, operands scattered into registers by the
    model and D gathered back by the model: equal to A @ B only if all three layouts are right."""
    la, lb, lc = layouts.mma_a(), layouts.mma_b(), layouts.mma_c()
    ra = _pack(a[la[..., 0], la[..., 1]])
    rb = _pack(b[lb[..., 0], lb[..., 1]])
    dev = dict(device="cuda")
    ta, tb = torch.from_numpy(ra).to(**dev), torch.from_numpy(rb).to(**dev)
    if acc == "fp32":
        d = load().probe_mma(ta, tb, torch.zeros(32, 4, dtype=torch.float32, **dev), False).cpu().numpy()
    else:
        d = load().probe_mma(ta, tb, torch.zeros(32, 2, dtype=torch.int32, **dev), True).cpu().numpy()
        d = d.view(np.uint32)
        halves = np.stack([d & 0xFFFF, d >> 16], -1).reshape(32, 4).astype(np.uint16)
        d = halves.view(np.float16).astype(np.float32)
    out = np.full((16, 8), np.nan, dtype=np.float64)
    out[lc[..., 0], lc[..., 1]] = d
    return out


def mma_sp(a: np.ndarray, b: np.ndarray, acc: str = "fp32", sel: int = 0) -> np.ndarray:
    """D = A @ B (A 16x32 2:4 sparse, B 32x8, small integers) through one mma.sp.m16n8k32 with sparsity selector
    `sel`: A compressed by ptx_kernels.sparse.compress, the registers filled by the model (sparse.mma_sp_a/_b and
    the metadata words as the kernels load them) and D gathered by the model: equal to A @ B only if the model of
    the fragments and of the metadata is the hardware's."""
    from . import sparse

    values, meta = sparse.compress(torch.from_numpy(a.astype(np.float16)))
    la, lb, lc = sparse.mma_sp_a(), sparse.mma_sp_b(), layouts.mma_c()
    v = values.numpy().astype(np.float64)
    ra, rb = _pack(v[la[..., 0], la[..., 1]]), _pack(b[lb[..., 0], lb[..., 1]])
    re = sparse.lane_registers(meta, 0, 0, sel).view(np.int32)
    dev = dict(device="cuda")
    t = [torch.from_numpy(np.ascontiguousarray(x)).to(**dev) for x in (ra, rb, re)]
    if acc == "fp32":
        d = load().probe_mma_sp(*t, torch.zeros(32, 4, dtype=torch.float32, **dev), False, sel).cpu().numpy()
    else:
        d = load().probe_mma_sp(*t, torch.zeros(32, 2, dtype=torch.int32, **dev), True, sel).cpu().numpy()
        d = d.view(np.uint32)
        d = np.stack([d & 0xFFFF, d >> 16], -1).reshape(32, 4).astype(np.uint16).view(np.float16).astype(np.float32)
    out = np.full((16, 8), np.nan, dtype=np.float64)
    out[lc[..., 0], lc[..., 1]] = d
    return out


WMMA_KINDS = {0: "matrix_a row_major", 1: "matrix_b row_major", 2: "matrix_b col_major", 3: "accumulator float"}


def wmma(which: int) -> np.ndarray:
    """(32, num_elements, 2): the (row, col) of the 16x16 element each fragment slot holds, as compiled."""
    out, n = load().probe_wmma(which)
    n = int(n.item())
    raw = out.cpu().numpy()[:, :n].astype(np.int64)
    idx = (raw.view(np.uint32).view(np.float32).astype(np.int64) if which == 3 else raw & 0xFFFF)
    return np.stack([idx // 16, idx % 16], -1)


def asm_examples() -> dict[str, np.ndarray]:
    out, out64, outd = (t.cpu().numpy() for t in load().probe_asm())
    u = out.view(np.uint32)
    return {"cube": u[:, 0], "min": out[:, 1], "laneid": u[:, 2], "clock_delta": u[:, 3], "add_u16": u[:, 4],
            "fma_f32": u[:, 5].view(np.float32), "shl3": u[:, 6], "stored": u[:, 7], "add_u64": out64,
            "add_f64": outd}


def wgmma_sp(a: np.ndarray, b: np.ndarray, acc: str = "fp32", sel: int = 0, b_col: bool = True) -> np.ndarray:
    """D = A @ B (A 64x64 2:4 sparse, B 64x256, small integers) through one stage of wgmma_sp's MMAs (two
    wgmma.mma_async.sp m64n256k32, sparsity selector `sel`, B K-major or N-major): A compressed by
    ptx_kernels.sparse.compress and placed where the kernel's TMA boxes put it, the metadata registers given per
    thread by the model (sparse.lane_registers per warp and k32 step), D gathered by the model (sparse.wgmma_d): equal
    to A @ B only if the metadata map and the kernel's descriptors are the hardware's."""
    from . import sparse

    values, meta = sparse.compress(torch.from_numpy(a.astype(np.float16)))
    e = np.zeros((128, 2), dtype=np.uint32)
    for w in range(4):
        for j in range(2):
            e[32 * w:32 * w + 32, j] = sparse.lane_registers(meta, j, w, sel)
    dev = dict(device="cuda")
    ta = torch.from_numpy(values.numpy().view(np.int16).copy()).to(**dev)
    tb = torch.from_numpy(np.ascontiguousarray(b.T).astype(np.float16).view(np.int16)).to(**dev)  # (n, k)
    te = torch.from_numpy(e.view(np.int32)).to(**dev)
    d = load().probe_wgmma_sp(ta, tb, te, acc == "fp16", b_col, sel).cpu().numpy().view(np.uint32)
    if acc == "fp32":
        vals = d.view(np.float32).astype(np.float64)
    else:
        vals = np.stack([d & 0xFFFF, d >> 16], -1).reshape(128, 128).astype(np.uint16).view(np.float16)
        vals = vals.astype(np.float64)
    ld = sparse.wgmma_d(256)
    out = np.full((64, 256), np.nan)
    out[ld[..., 0], ld[..., 1]] = vals
    return out
