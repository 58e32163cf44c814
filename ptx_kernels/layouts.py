"""A model of who holds what: the fragment layouts of mma.m16n8k16 (fp16 inputs; fp32 or fp16 accumulators)
and of ldmatrix / stmatrix (.x1/.x2/.x4, with and without .trans), per PTX ISA 8.x.

Every function answers, for each lane (0..31) and each element a lane holds, which matrix element it is, as
integer arrays of shape (32, elements, 2) holding (row, col) — elements in register order, two fp16 per .b32
register (the lower address in the low half). The model is written thread-first ("lane l holds ..."); the tests
check it against the ISA's element-first formulas and against the identities the kernels rely on.

ISA sections: "Matrix Fragments for mma.m16n8k16 with floating point type"
(#warp-level-matrix-fragment-mma-16816-float), "ldmatrix" (#warp-level-matrix-instructions-ldmatrix),
"stmatrix" (#warp-level-matrix-instructions-stmatrix).
"""
from __future__ import annotations

import numpy as np

from hgemm_common.errors import HgemmValueError

LANES = np.arange(32)
GROUP = LANES // 4  # groupID: the lane's row within an 8-row slab
TIG = LANES % 4  # threadID_in_group: which pair of columns


def _pairs(rows, cols0):
    """(32, 2, 2): for each lane, two consecutive columns cols0, cols0 + 1 of one row."""
    return np.stack([np.stack([rows, cols0], -1), np.stack([rows, cols0 + 1], -1)], 1)


def mma_a() -> np.ndarray:
    """A of m16n8k16, 16x16 row-major: 4 registers a0..a3 = 8 halves per lane.
    a0: (g, 2t..2t+1)  a1: (g+8, 2t..)  a2: (g, 2t+8..)  a3: (g+8, 2t+8..)"""
    regs = [_pairs(GROUP, 2 * TIG), _pairs(GROUP + 8, 2 * TIG), _pairs(GROUP, 2 * TIG + 8),
            _pairs(GROUP + 8, 2 * TIG + 8)]
    return np.concatenate(regs, 1)


def mma_b() -> np.ndarray:
    """B of m16n8k16, 16x8 (k, n), "col" operand: 2 registers = 4 halves per lane, (k, n) pairs.
    b0: k = 2t..2t+1, n = g;  b1: k = 2t+8.., n = g"""
    def kpair(k0):
        return np.stack([np.stack([k0, GROUP], -1), np.stack([k0 + 1, GROUP], -1)], 1)
    return np.concatenate([kpair(2 * TIG), kpair(2 * TIG + 8)], 1)


def mma_c() -> np.ndarray:
    """C/D of m16n8k16, 16x8: 4 values per lane (4 fp32 registers, or 2 fp16x2 registers in the same order).
    c0,c1: (g, 2t..2t+1)  c2,c3: (g+8, 2t..2t+1)"""
    return np.concatenate([_pairs(GROUP, 2 * TIG), _pairs(GROUP + 8, 2 * TIG)], 1)


def ldmatrix(num: int, trans: bool = False) -> np.ndarray:
    """What ldmatrix .x{num} delivers: (32, 2*num, 3) of (matrix, row, col) in the stored 8x8 matrices.

    Matrix i's row r is the 16-byte row whose address lane 8i + r supplies. Lane l's register i holds matrix i's
    (l/4, 2(l%4)) and (l/4, 2(l%4)+1); with .trans, the transposed matrix's: (2(l%4), l/4) and (2(l%4)+1, l/4).
    """
    if num not in (1, 2, 4):
        raise HgemmValueError(f"ldmatrix has .x1, .x2, .x4; not .x{num}")
    out = np.zeros((32, 2 * num, 3), dtype=np.int64)
    for i in range(num):
        for h in range(2):
            r, c = (2 * TIG + h, GROUP) if trans else (GROUP, 2 * TIG + h)
            out[:, 2 * i + h] = np.stack([np.full(32, i), r, c], -1)
    return out


def ldmatrix_address_lanes(num: int) -> np.ndarray:
    """(num, 8): the lane that supplies the address of row r of matrix i (lanes 8i..8i+7)."""
    return np.arange(8 * num).reshape(num, 8)


def stmatrix(num: int, trans: bool = False) -> np.ndarray:
    """Where stmatrix .x{num} puts each lane's halves: (32, 2*num, 3) of (matrix, row, col); the inverse map of
    ldmatrix with the same options (the same addressing: lane 8i + r gives matrix i's row r)."""
    return ldmatrix(num, trans)


def element_owner(layout: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Invert a (32, E, 2) layout: for each matrix element, lane * E + element index; -1 if nobody holds it."""
    owner = np.full(shape, -1, dtype=np.int64)
    lanes, elems = layout.shape[:2]
    for lane in range(lanes):
        for e in range(elems):
            r, c = layout[lane, e]
            owner[r, c] = lane * elems + e
    return owner


def gather_ldmatrix(smem: np.ndarray, row_addr: np.ndarray, num: int, trans: bool = False) -> np.ndarray:
    """Simulate ldmatrix on a 2-D array `smem` (rows of at least 8 halves): row_addr[lane] = (row, col) where the
    16-byte row segment of lane `lane` starts (only lanes 0..8*num-1 are read). Returns (32, 2*num) values."""
    src = ldmatrix(num, trans)
    out = np.zeros((32, 2 * num), dtype=smem.dtype)
    for lane in range(32):
        for e in range(2 * num):
            m, r, c = src[lane, e]
            base_r, base_c = row_addr[8 * m + r]
            out[lane, e] = smem[base_r, base_c + c]
    return out
