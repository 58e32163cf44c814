"""Tile-to-program schedules: one rule shared by the kernel that runs it and the cost model that prices it.

Stream-K here is the hybrid of data-parallel rounds and a cut last round: T output tiles of I k-iterations each on
G programs (G = min(SMs, T x I)) run T // G whole rounds data-parallel; the R = T % G tiles of the partial round are
each cut into S equal k-slices, slice j of every cut tile covering the same k range, so that the programs of one
row or column of tiles read the same A and B blocks at the same time and share them in L2. `triton_kernels/
streamk.py` runs it; `cost_model.features` prices it.
"""
from __future__ import annotations

# Slices per stream-K tile at most: each part of a cut tile is summed over its S fp32 blocks one after another (by a
# second launch at the Triton and hand-written levels, `streamk_fixup_kernel` and `hopper::stream_k_fix_up_kernel`;
# by the last slice to arrive in the Gluon kernel), so the fix-up and the workspace round trip grow with S while each
# slice's K loop shrinks as 1/S; split-K's SPLITS (triton_kernels/splitk.py) stops at 8 for the same round trip.
MAX_SLICES = 8
# k-iterations per slice at least: a shorter slice does not fill the TMA pipeline (3-4 stages deep) before its
# fix-up, whose block write and read cost about as much as the slice's own loads.
MIN_SLICE_ITERS = 4


def stream_k_cut(tiles: int, iters: int, sms: int) -> tuple[int, int, int]:
    """(G, R, S): the programs at most, the stream-K tiles (the partial round's, R = T % G) and the k-slices each is
    cut into; R = 0 and S = 1 where cutting is not worth it (S < 2: whole rounds only, or a partial round more than
    half full, or a K too short to slice)."""
    g = max(1, min(sms, tiles * iters))
    rest = tiles % g
    slices = min(MAX_SLICES, g // rest, iters // MIN_SLICE_ITERS) if rest else 1
    return (g, rest, slices) if slices >= 2 else (g, 0, 1)
