"""2:4 structured sparsity: pruning, the compressed format the sparse kernels read, and a CPU model of the metadata
the sparse tensor-core instructions take.

A is 2:4 sparse along K when every chunk of four consecutive elements of a row, A[m, 4c..4c+3], holds at most two
non-zeros. `compress` stores such an A as

- values: (M, Kp / 2) fp16, row-major — the two kept elements of each chunk in chunk order (Kp = K rounded up to
  32, the K of one mma.sp.m16n8k32 / wgmma.mma_async.sp.m64nNk32; the padding is zeros);
- meta: (Kp / 32, ceil(M / 16), 16) int32 — for each 32-wide K block and each 16-row block, the 16 metadata words in
  the order the instructions' lanes read them (`meta_word`), so a lane loads its word with one 4-byte load.

Metadata bits (PTX ISA 9.7.14.6.1 "Sparse matrix storage", #warp-level-sparse-matrix-storage): each chunk has a
4-bit nibble holding two 2-bit indices, the first kept position in bits 0-1 and the second in bits 2-3, first <
second (for mma.sp::ordered_metadata the meaningful nibbles are 0b0100, 0b1000, 0b1001, 0b1100, 0b1101, 0b1110:
position pairs (0,1) (0,2) (1,2) (0,3) (1,3) (2,3)). A chunk with fewer than two non-zeros keeps zeros at the
lowest free positions, so every nibble is one of those six.

Which lane supplies which nibbles (ISA 9.7.14.6.2.2 "Matrix Fragments for sparse mma.m16n8k32 with .f16 and .bf16
types", Figure 122, #warp-level-matrix-fragment-sparse-mma-16832-f16bf16; the same figure is Figure 176 of
9.7.15.6.2.1 for each warp of wgmma.mma_async.sp.m64nNk32, #asynchronous-warpgroup-level-matrix-fragment-sparse-
wgmma-64n32): with the sparsity selector sel, the thread pair T(2 sel) and T(2 sel + 1) of each group of four
lanes supplies the metadata ("m16n8k32: a thread-pair within a group of four consecutive threads", 9.7.14.6.1).
Lane 4g + 2 sel + h holds, in one .b32 register, the eight nibbles of K columns 16h..16h+15 of row g (bits 0-15)
and of row g + 8 (bits 16-31), chunk c of those 16 columns in bits 4c..4c+3 of its half. The compressed A fragment
is the dense m16n8k16 A fragment laid over the 16 x 16 compressed tile (ISA: a_i of row groupID or groupID + 8,
register i / 2 covering the chunk at columns 4 threadID_in_group (+16 for i >= 4)), and B is two m16n8k16 B
fragments stacked along K (b0, b1: k 0..15; b2, b3: k 16..31).

The model below is tested against these statements (tests/test_sparse.py) and, on a GPU, against the hardware
(`ptx_kernels.probes.mma_sp`, tests/test_layouts_gpu.py).
"""
from __future__ import annotations

import numpy as np
import torch

from hgemm_common.errors import HgemmTypeError, HgemmValueError

from . import layouts

CHUNK = 4  # elements per 2:4 chunk
K_BLOCK = 32  # K of one mma.sp.m16n8k32 / wgmma.mma_async.sp.m64nNk32
M_BLOCK = 16  # rows one set of 16 metadata words covers (an mma.sp fragment; one warp's rows of a wgmma)
WORDS = 16  # metadata words per (16-row, 32-K) block
# The six nibbles ordered_metadata accepts, by kept positions (ISA 9.7.14.6.1).
VALID_NIBBLES = {(0, 1): 0b0100, (0, 2): 0b1000, (1, 2): 0b1001, (0, 3): 0b1100, (1, 3): 0b1101, (2, 3): 0b1110}


def padded_k(k: int) -> int:
    """K rounded up to the instructions' 32."""
    return -(-k // K_BLOCK) * K_BLOCK


def meta_shape(m: int, k: int) -> tuple[int, int, int]:
    """Shape of the metadata of an M x K matrix: (K blocks of 32, 16-row blocks, 16 words)."""
    return (padded_k(k) // K_BLOCK, -(-m // M_BLOCK), WORDS)


def _chunks(a: torch.Tensor, rows: int | None = None) -> torch.Tensor:
    """A (M, K) zero-padded to (rows or M, Kp) and viewed as (rows, Kp / 4, 4)."""
    m, k = a.shape
    rows = m if rows is None else rows
    pad = torch.zeros((rows, padded_k(k)), dtype=a.dtype, device=a.device)
    pad[:m, :k] = a
    return pad.view(rows, padded_k(k) // CHUNK, CHUNK)  # explicit sizes: M = 0 has no -1 to infer


def prune_2to4(a: torch.Tensor) -> torch.Tensor:
    """A copy of a (M, K) with the two smallest-magnitude elements of every chunk of 4 along K set to zero (magnitude
    pruning; ties keep the lower index). A chunk cut short by the end of K counts its missing elements as zeros."""
    if a.dim() != 2:
        raise HgemmValueError(f"prune_2to4: expected a 2-D matrix, got shape {tuple(a.shape)}")
    m, k = a.shape
    c = _chunks(a)
    order = torch.sort(c.abs().float().nan_to_num(nan=float("inf")), dim=-1, descending=True, stable=True).indices
    keep = torch.zeros_like(c, dtype=torch.bool).scatter_(-1, order[..., :2], True)
    return torch.where(keep, c, torch.zeros_like(c)).view(m, padded_k(k))[:, :k].contiguous()


def _nonzero_counts(a: torch.Tensor) -> torch.Tensor:
    return (_chunks(a) != 0).sum(-1)


def is_2to4(a: torch.Tensor) -> bool:
    """Whether every chunk of 4 along K holds at most two non-zeros (NaN counts as non-zero)."""
    return bool((_nonzero_counts(a) <= 2).all())


def check_2to4(a: torch.Tensor, who: str = "compress") -> None:
    """ValueError naming the first chunk of A with more than two non-zeros."""
    bad = (_nonzero_counts(a) > 2).nonzero()
    if len(bad):
        row, chunk = (int(x) for x in bad[0])
        raise HgemmValueError(f"{who}: A is not 2:4 sparse along K: row {row}, columns {4 * chunk}..{4 * chunk + 3} "
                              f"hold {int(_nonzero_counts(a)[row, chunk])} non-zeros (prune it with prune_2to4 first)")


def kept_positions(a: torch.Tensor, rows: int | None = None) -> torch.Tensor:
    """(rows, Kp / 4, 2) int64: the two positions kept in each chunk, ascending: the non-zeros, then the lowest free
    positions. A must be 2:4."""
    c = _chunks(a, rows)
    idx = torch.arange(CHUNK, device=a.device)
    key = (c == 0).long() * CHUNK + idx  # non-zeros first, each group by position
    first2 = torch.sort(key, dim=-1).indices[..., :2]
    return torch.sort(first2, dim=-1).values


def _to_int32(x: torch.Tensor) -> torch.Tensor:
    """int64 holding 32-bit patterns -> int32 with the same bits."""
    x = x & 0xFFFFFFFF
    return torch.where(x >= 2**31, x - 2**32, x).int()


def row_words(pos: torch.Tensor) -> torch.Tensor:
    """(rows, Kp / 32) int64: one 32-bit word per row and K block, chunk c of the block in bits 4c..4c+3."""
    nib = pos[..., 0] | (pos[..., 1] << 2)  # (rows, Kp / 4)
    nib = nib.view(nib.shape[0], nib.shape[1] // (K_BLOCK // CHUNK), K_BLOCK // CHUNK)
    shifts = torch.arange(0, 32, 4, device=pos.device)
    return (nib << shifts).sum(-1)


def meta_word(g: int, h: int) -> int:
    """The index, within a (16-row, 32-K) block's 16 words, of the word lane 4g + 2 sel + h reads: row g's and row
    g + 8's nibbles of K columns 16h..16h+15."""
    return 2 * g + h


def pack_meta(words: torch.Tensor) -> torch.Tensor:
    """Row words (Mp, Kb) (Mp a multiple of 16) -> metadata (Kb, Mp / 16, 16) in the lanes' order (`meta_word`)."""
    mp, kb = words.shape
    w = words.view(mp // M_BLOCK, 2, 8, kb)  # (block, row half r // 8, g, kb)
    out = torch.empty((kb, mp // M_BLOCK, 8, 2), dtype=torch.int64, device=words.device)
    for h in range(2):
        top = (w[:, 0] >> (16 * h)) & 0xFFFF  # row g
        bottom = (w[:, 1] >> (16 * h)) & 0xFFFF  # row g + 8
        out[..., h] = (top | (bottom << 16)).permute(2, 0, 1)
    return _to_int32(out.view(kb, mp // M_BLOCK, WORDS))


def unpack_meta(meta: torch.Tensor) -> torch.Tensor:
    """Metadata (Kb, Mb, 16) -> row words (16 Mb, Kb): the inverse of pack_meta."""
    kb, mb, _ = meta.shape
    m = meta.long().view(kb, mb, 8, 2) & 0xFFFFFFFF
    out = torch.zeros((mb, 2, 8, kb), dtype=torch.int64, device=meta.device)
    for h in range(2):
        out[:, 0] |= ((m[..., h] & 0xFFFF) << (16 * h)).permute(1, 2, 0)
        out[:, 1] |= (((m[..., h] >> 16) & 0xFFFF) << (16 * h)).permute(1, 2, 0)
    return out.view(mb * M_BLOCK, kb)


def compress(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, meta) of a 2:4-sparse fp16 A (M, K): values (M, Kp / 2) fp16, meta (Kp / 32, ceil(M / 16), 16) int32
    (see the module docstring). ValueError when A is not 2:4."""
    if a.dim() != 2:
        raise HgemmValueError(f"compress: expected a 2-D matrix, got shape {tuple(a.shape)}")
    if a.dtype != torch.float16:
        raise HgemmTypeError(f"compress: expected torch.float16, got {a.dtype}")
    check_2to4(a)
    m, k = a.shape
    mp = meta_shape(m, k)[1] * M_BLOCK
    pos = kept_positions(a, mp)
    values = torch.gather(_chunks(a, mp), -1, pos).reshape(mp, padded_k(k) // 2)[:m].contiguous()
    return values, pack_meta(row_words(pos))


def decompress(values: torch.Tensor, meta: torch.Tensor, k: int) -> torch.Tensor:
    """The dense (M, k) matrix that (values, meta) stores."""
    m = values.shape[0]
    check_compressed(values, meta, m, k, who="decompress")
    words = unpack_meta(meta)[:m]  # (M, Kb)
    shifts = torch.arange(0, 32, 4, device=meta.device)
    nib = ((words.unsqueeze(-1) >> shifts) & 0xF).reshape(m, padded_k(k) // CHUNK)  # (M, Kp / 4)
    pos = torch.stack([nib & 3, nib >> 2], -1)
    dense = torch.zeros((m, padded_k(k) // CHUNK, CHUNK), dtype=values.dtype, device=values.device)
    dense.scatter_(-1, pos, values.reshape(m, padded_k(k) // CHUNK, 2))
    return dense.view(m, padded_k(k))[:, :k]


def check_compressed(values: torch.Tensor, meta: torch.Tensor, m: int, k: int, who: str = "sparse_hgemm") -> None:
    """ValueError/TypeError when (values, meta) cannot be the compressed form of an M x K matrix."""
    kp = padded_k(k)
    if values.dtype != torch.float16:
        raise HgemmTypeError(f"{who}: compressed values must be torch.float16, got {values.dtype}")
    if meta.dtype != torch.int32:
        raise HgemmTypeError(f"{who}: metadata must be torch.int32 (from ptx_kernels.sparse.compress), got "
                             f"{meta.dtype}")
    if values.dim() != 2 or tuple(values.shape) != (m, kp // 2):
        raise HgemmValueError(f"{who}: compressed values have shape {tuple(values.shape)}; an {m}x{k} matrix "
                              f"compresses to ({m}, {kp // 2}) (K padded to {kp})")
    if tuple(meta.shape) != meta_shape(m, k):
        raise HgemmValueError(f"{who}: metadata has shape {tuple(meta.shape)}; an {m}x{k} matrix has "
                              f"{meta_shape(m, k)} (K blocks of 32, 16-row blocks, 16 words)")
    if values.device != meta.device:
        raise HgemmValueError(f"{who}: compressed values on {values.device}, metadata on {meta.device}")


def check_meta_nibbles(meta: torch.Tensor, who: str = "sparse_hgemm") -> None:
    """ValueError when some nibble is not one of the six the ordered-metadata instructions accept (metadata that
    compress did not write, or corrupted)."""
    m = meta.long() & 0xFFFFFFFF
    nib = (m.unsqueeze(-1) >> torch.arange(0, 32, 4, device=meta.device)) & 0xF
    ok = torch.zeros_like(nib, dtype=torch.bool)
    for v in VALID_NIBBLES.values():
        ok |= nib == v
    if not bool(ok.all()):
        kb, mb, w, c = (int(x) for x in (~ok).nonzero()[0])
        raise HgemmValueError(f"{who}: metadata does not match the 2:4 format: K block {kb}, row block {mb}, word {w}, "
                              f"nibble {c} is {int(nib[kb, mb, w, c]):#06b} (valid: two ascending 2-bit indices, "
                              f"{sorted(VALID_NIBBLES.values())})")


# ---- the instructions' fragment maps (the CPU model) -----------------------------------------------------------

def mma_sp_a() -> np.ndarray:
    """Compressed A of mma.sp.m16n8k32 (16 x 16 compressed): (32, 8, 2) (row, compressed column) per lane and
    element — the dense m16n8k16 A fragment over the compressed tile. Compressed column 2c + j is the j-th kept
    element of chunk c (dense columns 4c..4c+3)."""
    return layouts.mma_a()


def mma_sp_b() -> np.ndarray:
    """B of mma.sp.m16n8k32 (32 x 8, k x n): (32, 8, 2) (k, n) — two m16n8k16 B fragments, k 0..15 then 16..31."""
    b = layouts.mma_b()
    return np.concatenate([b, b + np.array([16, 0])], 1)


def mma_sp_meta(sel: int = 0) -> dict[int, np.ndarray]:
    """Metadata of mma.sp.m16n8k32 (.f16): {lane: (8, 2) int array} for the lanes that supply it (selector `sel`):
    nibble i of the lane's register (bits 4i..4i+3) is for (row, chunk) — chunk c covers dense columns 4c..4c+3."""
    if sel not in (0, 1):
        raise HgemmValueError(f"m16n8k32 takes sparsity selector 0 (threads T0, T1) or 1 (T2, T3), got {sel}")
    out = {}
    for g in range(8):
        for h in range(2):
            rows = [g] * 4 + [g + 8] * 4
            chunks = [4 * h + i for i in range(4)] * 2
            out[4 * g + 2 * sel + h] = np.array(list(zip(rows, chunks)))
    return out


def wgmma_sp_meta(sel: int = 0) -> dict[int, np.ndarray]:
    """Metadata of wgmma.mma_async.sp.m64nNk32 (.f16): {thread: (8, 2) (row, chunk)} over the warpgroup's 128
    threads — each warp w the mma.sp map of rows 16w..16w+15 (ISA Figure 176 is Figure 122, per warp)."""
    per_warp = mma_sp_meta(sel)
    return {32 * w + lane: rc + np.array([16 * w, 0]) for w in range(4) for lane, rc in per_warp.items()}


def lane_registers(meta: torch.Tensor, kb: int, mb: int, sel: int = 0) -> np.ndarray:
    """(32,) uint32: the metadata register each lane of a warp passes for the (16-row block mb, K block kb) fragment,
    loaded as the kernels load it: lane 4g + t reads word meta_word(g, t % 2) (lanes outside the selected pair read
    a word too; the instruction ignores it)."""
    m = meta[kb, mb].cpu().numpy().view(np.uint32)
    return np.array([m[meta_word(lane // 4, lane % 2)] for lane in range(32)], dtype=np.uint32)


def emulate_mma_sp(a_regs: np.ndarray, b_regs: np.ndarray, e_regs: np.ndarray, sel: int = 0) -> np.ndarray:
    """What the model says mma.sp.m16n8k32 computes from the lanes' registers: a_regs (32, 8) compressed A values per
    lane (register order, two per register), b_regs (32, 8), e_regs (32,) uint32 metadata; returns D = A @ B
    (16 x 8, float64) with A rebuilt from the compressed values by the metadata."""
    la, lb = mma_sp_a(), mma_sp_b()
    comp = np.zeros((16, 16))
    comp[la[..., 0], la[..., 1]] = a_regs
    b = np.zeros((32, 8))
    b[lb[..., 0], lb[..., 1]] = b_regs
    dense = np.zeros((16, 32))
    for lane, rc in mma_sp_meta(sel).items():
        e = int(e_regs[lane])
        for i, (row, chunk) in enumerate(rc):
            nib = (e >> (4 * i)) & 0xF
            for j, p in enumerate((nib & 3, nib >> 2)):
                dense[row, 4 * chunk + p] += comp[row, 2 * chunk + j]
    return dense @ b


# ---- wgmma_sp's stage (csrc/blocks/wgmma_sp_tile.cuh, csrc/sm90/wgmma_sp.cu) ---------------------------------

def wgmma_d(n: int = 256) -> np.ndarray:
    """The accumulator fragment of wgmma m64nN (fp32: register i of a thread): (128, N / 2, 2) (row, column) —
    warp w's rows 16w..16w+15 as mma's m16n8 C fragment, one per 8-column block j (registers 4j..4j+3)."""
    out = np.zeros((128, n // 2, 2), dtype=np.int64)
    for t in range(128):
        w, lane = t // 32, t % 32
        for j in range(n // 8):
            for i in range(4):
                out[t, 4 * j + i] = (16 * w + lane // 4 + 8 * (i // 2), 8 * j + 2 * (lane % 4) + i % 2)
    return out


def wgmma_sp_a_offset(r: int, c: int) -> int:
    """Byte offset of compressed element (r, c) (c < 32) in wgmma_sp's A stage: 64-byte rows, 64-byte swizzle
    (16-byte chunk c // 8 of row r at chunk (c // 8) ^ ((r // 2) % 4)), as TMA's SWIZZLE_64B writes a 32-half box."""
    return r * 64 + (((c // 8) ^ ((r // 2) % 4)) * 16) + (c % 8) * 2


STAGE_K = 64  # dense K of one wgmma_sp stage: two k32 steps
VALID_WORD = 0x44444444  # positions (0, 1) in every chunk: what wgmma_sp passes where no metadata exists


def wgmma_sp_stage_registers(meta: torch.Tensor, m: int, k: int, m0: int, kb: int, bm: int = 128) -> np.ndarray:
    """(2 consumer warpgroups x 128 threads, 2 k32 steps) uint32: the metadata registers wgmma_sp's consumers pass
    for the stage of 64 dense K number kb of the tile at rows m0.., as the kernel gets them: the TMA box of 2 rows
    x bm words at (row 2 kb, word m0) of the (Kp / 32, 16 ceil(M / 16)) word matrix (zeros outside it), then thread
    t of consumer c reads word j * bm + 64 c + 16 (t // 32) + 2 (lane // 4) + lane % 2 of step j, replaced by
    VALID_WORD where its row block or the step lies past the metadata."""
    kb32, mb, _ = meta.shape
    words = meta.cpu().numpy().view(np.uint32).reshape(kb32, mb * 16)
    box = np.zeros((2, bm), dtype=np.uint32)
    rows = words[2 * kb:2 * kb + 2, m0:m0 + bm]
    box[:rows.shape[0], :rows.shape[1]] = rows
    ksteps, mblocks = -(-k // K_BLOCK), -(-m // M_BLOCK)
    out = np.zeros((2 * 128, 2), dtype=np.uint32)
    for c in range(2):
        for t in range(128):
            warp, lane = t // 32, t % 32
            word = 64 * c + 16 * warp + 2 * (lane // 4) + lane % 2
            rows_ok = (m0 + 64 * c) // 16 + warp < mblocks
            for j in range(2):
                ok = rows_ok and 2 * kb + j < ksteps
                out[128 * c + t, j] = box[j, word] if ok else VALID_WORD
    return out


def dense_from_wgmma_sp_registers(values: torch.Tensor, regs: np.ndarray, m0: int, kb: int, sel: int = 0,
                                  bm: int = 128) -> np.ndarray:
    """The dense (bm, 64) A tile a wgmma_sp stage multiplies, rebuilt from the compressed values (M, Kp / 2) and the
    threads' registers (`wgmma_sp_stage_registers`) by the instruction's metadata map (`wgmma_sp_meta`, per
    consumer warpgroup of 64 rows): rows past M and steps past Kp read zero values."""
    v = values.cpu().double().numpy()
    tile = np.zeros((bm, STAGE_K // 2))
    part = v[m0:m0 + bm, kb * STAGE_K // 2:(kb + 1) * STAGE_K // 2]
    tile[:part.shape[0], :part.shape[1]] = part
    dense = np.zeros((bm, STAGE_K))
    for c in range(bm // 64):
        for j in range(2):
            for t, rc in wgmma_sp_meta(sel).items():
                e = int(regs[128 * c + t, j])
                for i, (row, chunk) in enumerate(rc):
                    nib = (e >> (4 * i)) & 0xF
                    r = 64 * c + row
                    for q, p in enumerate((nib & 3, nib >> 2)):
                        dense[r, 32 * j + 4 * chunk + p] += tile[r, 16 * j + 2 * chunk + q]
    return dense
