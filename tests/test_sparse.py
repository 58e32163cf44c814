"""2:4 sparsity on the CPU: pruning, the compressed format (values + metadata in the lanes' order) and its round
trip, the errors for input that is not 2:4 or metadata that does not match, and the model of the sparse
instructions' metadata (ptx_kernels/sparse.py) against the PTX ISA's statements, written here element first."""
import itertools
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers import ints
from ptx_kernels import sparse as S

SHAPES = [(0, 100), (1, 1), (7, 8), (16, 31), (17, 32), (33, 33), (107, 311), (233, 64), (16, 4099)]


def test_prune_keeps_the_two_largest_magnitudes_of_every_chunk():
    a = ints(9, 23, seed=1) * torch.arange(1, 24, dtype=torch.float16)  # mostly distinct magnitudes
    p = S.prune_2to4(a)
    assert p.shape == a.shape and S.is_2to4(p)
    for r, c0 in itertools.product(range(9), range(0, 23, 4)):
        chunk = a[r, c0:c0 + 4].double()
        mags = sorted(chunk.abs().tolist(), reverse=True)
        kept = p[r, c0:c0 + 4].double()
        assert sorted(kept.abs().tolist(), reverse=True)[:2] == (mags + [0.0, 0.0])[:2]
        assert bool(((kept == 0) | (kept == chunk)).all())  # kept elements are unchanged


def test_prune_ties_keep_the_lower_positions_and_nan_is_kept():
    a = torch.tensor([[1, 1, 1, 1, 0, float("nan"), 2, 1]], dtype=torch.float16)
    p = S.prune_2to4(a)
    assert p[0, :4].tolist() == [1, 1, 0, 0]
    assert torch.isnan(p[0, 5]) and p[0, 6] == 2 and p[0, 4] == 0 and p[0, 7] == 0


@pytest.mark.parametrize("m,k", SHAPES)
def test_compress_decompress_round_trip(m, k):
    a = S.prune_2to4(ints(m, k, seed=m * 7 + k))
    values, meta = S.compress(a)
    kp = S.padded_k(k)
    assert values.shape == (m, kp // 2) and values.dtype == torch.float16
    assert meta.shape == S.meta_shape(m, k) == (kp // 32, -(-m // 16), 16) and meta.dtype == torch.int32
    S.check_meta_nibbles(meta)  # every nibble is one the ordered-metadata instructions accept
    assert torch.equal(S.decompress(values, meta, k), a)
    # the compressed values are the kept elements in chunk order
    dense = torch.zeros(m, kp, dtype=torch.float16)
    dense[:, :k] = a
    for r in range(min(m, 3)):
        nz = [float(x) for x in dense[r] if x != 0]
        assert [float(x) for x in values[r] if x != 0] == nz


def test_compress_of_a_chunk_with_fewer_than_two_nonzeros_uses_the_lowest_free_positions():
    a = torch.zeros(1, 32, dtype=torch.float16)
    a[0, 2] = 5  # chunk 0: one non-zero at 2 -> positions (0, 2); chunk 1: none -> (0, 1)
    a[0, 7] = -1  # chunk 1: one at 3 -> (0, 3)
    values, meta = S.compress(a)
    words = S.unpack_meta(meta)[:1]
    nibbles = [(int(words[0, 0]) >> (4 * c)) & 0xF for c in range(8)]
    assert nibbles[:3] == [S.VALID_NIBBLES[(0, 2)], S.VALID_NIBBLES[(0, 3)], S.VALID_NIBBLES[(0, 1)]]
    assert values[0, :4].tolist() == [0, 5, 0, -1]


def test_pack_unpack_meta_are_inverse_and_follow_the_lane_order():
    g = torch.Generator().manual_seed(3)
    words = torch.randint(0, 2**32, (48, 5), generator=g, dtype=torch.int64)
    meta = S.pack_meta(words)
    assert meta.shape == (5, 3, 16)
    assert torch.equal(S.unpack_meta(meta), words)
    # word 2g + h of block b: row 16b + g's half h in bits 0-15, row 16b + g + 8's in bits 16-31
    b, kb, gg, h = 2, 4, 5, 1
    w = int(meta[kb, b, S.meta_word(gg, h)]) & 0xFFFFFFFF
    assert w & 0xFFFF == (int(words[16 * b + gg, kb]) >> 16 * h) & 0xFFFF
    assert w >> 16 == (int(words[16 * b + gg + 8, kb]) >> 16 * h) & 0xFFFF


def test_not_2to4_is_a_clear_error():
    a = torch.zeros(5, 12, dtype=torch.float16)
    a[3, 4:7] = 1
    assert not S.is_2to4(a)
    with pytest.raises(ValueError, match=r"not 2:4 sparse along K: row 3, columns 4\.\.7 hold 3 non-zeros"):
        S.compress(a)
    with pytest.raises(TypeError, match="float16"):
        S.compress(a.float())


def test_metadata_that_does_not_match_is_a_clear_error():
    values, meta = S.compress(S.prune_2to4(ints(20, 40)))
    bad = meta.clone()
    bad[1, 0, 3] = 0  # nibble 0b0000: no two ascending indices
    with pytest.raises(ValueError, match="metadata does not match the 2:4 format: K block 1, row block 0, word 3"):
        S.check_meta_nibbles(bad)
    with pytest.raises(ValueError, match=r"metadata has shape \(2, 1, 16\); an 20x40 matrix has \(2, 2, 16\)"):
        S.check_compressed(values, meta[:, :1], 20, 40)
    with pytest.raises(ValueError, match=r"compressed values have shape \(20, 32\); an 20x65"):
        S.check_compressed(values, meta, 20, 65)
    with pytest.raises(TypeError, match="metadata must be torch.int32"):
        S.check_compressed(values, meta.long(), 20, 40)


def test_sparse_hgemm_rejects_a_tile_or_schedule_it_does_not_have():
    """tile= is the block tile ("auto", "large", "base"; the older integers 0-3 still taken), schedule= the order of
    a persistent kernel's tiles: anything else is refused before the device is asked."""
    import ptx_kernels

    values, meta = S.compress(S.prune_2to4(ints(20, 40)))
    b = torch.zeros(40, 8, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"^sparse_hgemm: tile must be one of \['auto', 'base', 'large'\] \(or the "
                                         r"older 0, 1, 2, 3\), got 4$"):
        ptx_kernels.sparse_hgemm(values, meta, b, tile=4)
    with pytest.raises(ValueError, match=r"^sparse_hgemm: tile must be one of \['auto', 'base', 'large'\], got 'huge'$"):
        ptx_kernels.sparse_hgemm(values, meta, b, tile="huge")
    with pytest.raises(ValueError, match=r"^sparse_hgemm: schedule must be one of \['auto', 'band8', 'band16', "
                                         r"'cluster2'\], got 'band4'$"):
        ptx_kernels.sparse_hgemm(values, meta, b, schedule="band4")
    with pytest.raises(ValueError, match=r"the integer tile=3 is the older form of schedule=; give one of the two"):
        ptx_kernels.sparse_hgemm(values, meta, b, tile=3, schedule="band8")


def test_the_older_integer_tile_maps_to_tile_and_schedule():
    """sparse_hgemm's integer tile= (before schedule=): wgmma_sp's 1-3 are its schedules, mma_sp's 1 / 2 its fp16
    tiles, and what a kernel ignored then (mma_sp's 3, any fp32 tile) is its own choice now too."""
    from ptx_kernels.call import _legacy_sparse_tile
    from ptx_kernels.variants import BY_NAME

    wgmma, mma = BY_NAME["wgmma_sp"], BY_NAME["mma_sp"]
    assert [_legacy_sparse_tile(wgmma, "fp32", t) for t in range(4)] == [
        ("auto", "auto"), ("auto", "band8"), ("auto", "band16"), ("auto", "cluster2")]
    assert [_legacy_sparse_tile(mma, "fp16", t) for t in range(4)] == [
        ("auto", "auto"), ("large", "auto"), ("base", "auto"), ("auto", "auto")]
    assert {_legacy_sparse_tile(mma, "fp32", t) for t in range(4)} == {("auto", "auto")}


# ---- the model against the ISA (9.7.14.6.2.2, Figures 120-122; 9.7.15.6.2.1, Figure 176) --------------------

def test_mma_sp_a_matches_isa_formula():
    # ISA: row = groupID for a_i with 0 <= i < 2 or 4 <= i < 6, else groupID + 8; the pair a_i (i even) holds the two
    # kept elements of the chunk at dense columns firstcol..firstcol+3, firstcol = 4 threadID_in_group (+16, i >= 4)
    a = S.mma_sp_a()
    for lane in range(32):
        g, t = lane >> 2, lane % 4
        for i in range(8):
            row = g if (i < 2 or 4 <= i < 6) else g + 8
            firstcol = 4 * t + (16 if i >= 4 else 0)
            assert tuple(a[lane, i]) == (row, firstcol // 2 + (i & 1)), (lane, i)  # compressed column


def test_mma_sp_b_is_two_k16_fragments():
    b = S.mma_sp_b()
    for lane in range(32):
        g, t = lane >> 2, lane % 4
        for i in range(8):
            assert tuple(b[lane, i]) == (2 * t + (i & 1) + 8 * (i >> 1), g), (lane, i)
    assert len({tuple(x) for x in b.reshape(-1, 2)}) == 32 * 8


@pytest.mark.parametrize("sel", [0, 1])
def test_mma_sp_metadata_comes_from_the_selected_thread_pair_and_covers_the_tile(sel):
    # ISA 9.7.14.6.1: "m16n8k32: ... the sparsity selector must be either 0 (threads T0, T1) or 1 (threads T2, T3)"
    meta = S.mma_sp_meta(sel)
    assert sorted(meta) == [4 * g + 2 * sel + h for g in range(8) for h in range(2)]
    cells = [tuple(rc) for regs in meta.values() for rc in regs]
    assert sorted(cells) == [(r, c) for r in range(16) for c in range(8)]  # 16 rows x 8 chunks, once each
    for lane, regs in meta.items():  # 16 2-bit vectors a register: rows g and g + 8, one half of K
        g, h = lane // 4, lane % 2
        assert {r for r, _ in regs} == {g, g + 8} and {c // 4 for _, c in regs} == {h}
    with pytest.raises(ValueError, match="selector 0"):
        S.mma_sp_meta(2)


def test_wgmma_sp_metadata_is_the_warp_map_per_warp():
    meta = S.wgmma_sp_meta(0)
    assert len(meta) == 64 and sorted(tuple(rc) for regs in meta.values() for rc in regs) == \
        [(r, c) for r in range(64) for c in range(8)]
    assert all(16 * (t // 32) <= r < 16 * (t // 32) + 16 for t, regs in meta.items() for r, _ in regs)


@pytest.mark.parametrize("sel", [0, 1])
def test_registers_loaded_from_the_format_compute_the_pruned_product(sel):
    """The lanes' registers built as the kernels build them (ldmatrix-shaped A fragment of the compressed tile, the
    metadata word meta_word(g, lane % 2)) make the modelled instruction compute the pruned dense product."""
    rng = np.random.default_rng(sel)
    for trial in range(4):
        a = S.prune_2to4(torch.from_numpy(rng.integers(-3, 4, (16, 32))).to(torch.float16))
        b = rng.integers(-3, 4, (32, 8)).astype(np.float64)
        values, meta = S.compress(a)
        la, lb = S.mma_sp_a(), S.mma_sp_b()
        v = values.double().numpy()
        d = S.emulate_mma_sp(v[la[..., 0], la[..., 1]], b[lb[..., 0], lb[..., 1]], S.lane_registers(meta, 0, 0), sel)
        assert np.array_equal(d, a.double().numpy() @ b), trial


def test_wgmma_sparse_header_is_what_the_generator_prints():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    import gen_wgmma_sp

    text = gen_wgmma_sp.HEADER.read_text()
    assert gen_wgmma_sp.generated() in text
    for n in gen_wgmma_sp.SHAPES:
        for acc in ("f32", "f16"):
            assert f"wgmma.mma_async.sp.sync.aligned.m64n{n}k32.{acc}.f16.f16" in text


# ---- wgmma_sp's stage: metadata registers, shared-memory placement, accumulator map -------------------------------

def test_wgmma_d_is_the_mma_c_fragment_per_warp_and_covers_the_tile():
    from ptx_kernels import layouts

    d = S.wgmma_d(256)
    assert sorted(map(tuple, d.reshape(-1, 2))) == [(r, c) for r in range(64) for c in range(256)]
    c = layouts.mma_c()  # (32, 4) (row, col) of one m16n8 tile
    for w, lane, j in ((0, 0, 0), (1, 5, 3), (3, 31, 31)):
        assert np.array_equal(d[32 * w + lane, 4 * j:4 * j + 4], c[lane] + np.array([16 * w, 8 * j]))


@pytest.mark.parametrize("m,k", [(1, 1), (16, 20), (100, 64), (128, 96), (200, 33), (233, 311), (300, 4099)])
def test_wgmma_sp_stage_registers_rebuild_the_pruned_tile(m, k):
    """The metadata registers wgmma_sp's threads pass (TMA box of 2 x 128 words, then one word per thread and k32
    step, `wgmma_sp_stage_registers`), decoded by the instruction's map (`wgmma_sp_meta`) over the stage's
    compressed values, give back every stage of every 128-row tile of the pruned A: rows past M and K steps past
    Kp get the valid stand-in word and zero values."""
    a = S.prune_2to4(ints(m, k, seed=m + k))
    values, meta = S.compress(a)
    kp = S.padded_k(k)
    dense = torch.zeros(-(-m // 128) * 128, -(-kp // 64) * 64, dtype=torch.float64)
    dense[:m, :k] = a.double()
    for m0 in range(0, m, 128):
        for kb in range(-(-kp // 64)):
            regs = S.wgmma_sp_stage_registers(meta, m, k, m0, kb)
            got = S.dense_from_wgmma_sp_registers(values, regs, m0, kb)
            want = dense[m0:m0 + 128, 64 * kb:64 * kb + 64].numpy()
            assert np.array_equal(got, want), (m0, kb, np.argwhere(got != want)[:3])
            assert all(w in S.VALID_NIBBLES.values() for r in regs.ravel() for w in
                       (((int(r) >> (4 * i)) & 0xF) for i in range(8)))


def test_wgmma_sp_registers_of_a_stage_past_kp_are_the_stand_in():
    values, meta = S.compress(S.prune_2to4(ints(40, 20)))  # Kp = 32: the stage's second k32 step is past Kp
    regs = S.wgmma_sp_stage_registers(meta, 40, 20, 0, 0)
    assert (regs[:, 1] == S.VALID_WORD).all()
    # row blocks 0..2 hold metadata (M = 40): warps 0-2 of consumer 0; warp 3 and consumer 1 get the stand-in
    assert (regs[96:, 0] == S.VALID_WORD).all() and not (regs[:96, 0] == S.VALID_WORD).all()


def _tma_swizzle(linear: int, bits: int) -> int:
    """TMA's swizzle of a byte offset within a 1024-aligned buffer: 16-byte chunk bits 4.. XORed with bits 7.."""
    return linear ^ (((linear >> 7) & ((1 << bits) - 1)) << 4)


@pytest.fixture(scope="module")
def sp_host_facts(tmp_path_factory):
    import subprocess

    from ptx_kernels import toolchain
    from ptx_kernels.variants import CSRC

    if toolchain.find_nvcc() is None:
        pytest.skip("nvcc not installed")
    exe = tmp_path_factory.mktemp("wgmma_sp") / "facts"
    src = Path(__file__).parent / "cuda" / "wgmma_sp_host_facts.cu"
    subprocess.run([toolchain.find_nvcc(), *toolchain.NVCC_FLAGS, toolchain.ARCHS["sm_90a"], f"-I{CSRC}", "-o",
                    str(exe), str(src)], check=True, capture_output=True)
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines()


def test_wgmma_sp_stage_placement_is_what_tma_writes(sp_host_facts):
    """Compressed A: 64-byte rows with TMA's 64-byte swizzle (and the Python model's formula); B: the dense kernels'
    128-byte-swizzled K-major rows and N-major 64 x 64 boxes 8 KB apart."""
    a = [tuple(map(int, x.split()[1:])) for x in sp_host_facts if x.startswith("a ")]
    assert len(a) == 128 * 32
    for r, c, off in a:
        assert off == _tma_swizzle(r * 64 + 2 * c, 2) == S.wgmma_sp_a_offset(r, c), (r, c, off)
    assert sorted(o // 2 for *_, o in a) == list(range(128 * 32))
    b = [tuple(map(int, x.split()[1:])) for x in sp_host_facts if x.startswith("b ")]
    for n, k, kmaj, nmaj in b:
        assert kmaj == _tma_swizzle(n * 128 + 2 * k, 3), (n, k)
        assert nmaj == (n // 64) * 8192 + _tma_swizzle(k * 128 + 2 * (n % 64), 3), (n, k)


def test_wgmma_sp_descriptor_is_the_isa_64b_swizzle_form(sp_host_facts):
    """PTX ISA "Matrix Descriptor Format": start address >> 4 in bits 0-13, LBO (unused: 1) in 16-29, SBO >> 4 in
    32-45, swizzle mode 2 (64-byte) in bits 62-63."""
    rows = [tuple(map(int, x.split()[1:])) for x in sp_host_facts if x.startswith("desc")]
    assert len(rows) == 6
    for addr, sbo, got in rows:
        assert got == ((addr & 0x3FFFF) >> 4) | 1 << 16 | ((sbo & 0x3FFFF) >> 4) << 32 | 2 << 62, (addr, hex(got))
