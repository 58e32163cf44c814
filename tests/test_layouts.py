"""The fragment-layout model (ptx_kernels/layouts.py) against the PTX ISA's own formulas, written here element
first as the ISA states them, and against the identities the mma kernels rely on (ldmatrix feeding mma.sync,
stmatrix storing its result)."""
import numpy as np
import pytest
import torch

from ptx_kernels import layouts as L


def isa_g_t(lane):
    return lane >> 2, lane % 4  # groupID, threadID_in_group


def test_mma_a_matches_isa_formula():
    # ISA, m16n8k16 .f16 A: row = groupID for a_i with i < 2 or 4 <= i < 6, else groupID + 8;
    # col = threadID_in_group * 2 + (i & 1), + 8 for i >= 4.
    a = L.mma_a()
    for lane in range(32):
        g, t = isa_g_t(lane)
        for i in range(8):
            row = g if (i < 2 or 4 <= i < 6) else g + 8
            col = t * 2 + (i & 1) + (8 if i >= 4 else 0)
            assert tuple(a[lane, i]) == (row, col), (lane, i)


def test_mma_b_matches_isa_formula():
    # ISA, m16n8k16 .f16 B: row (k) = threadID_in_group * 2 + (i & 1), + 8 for i >= 2; col (n) = groupID.
    b = L.mma_b()
    for lane in range(32):
        g, t = isa_g_t(lane)
        for i in range(4):
            assert tuple(b[lane, i]) == (t * 2 + (i & 1) + (8 if i >= 2 else 0), g), (lane, i)


def test_mma_c_matches_isa_formula():
    # ISA, m16n8k16 C/D (.f32 and .f16): row = groupID for c_i with i < 2, else groupID + 8;
    # col = threadID_in_group * 2 + (i & 1).
    c = L.mma_c()
    for lane in range(32):
        g, t = isa_g_t(lane)
        for i in range(4):
            assert tuple(c[lane, i]) == (g if i < 2 else g + 8, t * 2 + (i & 1)), (lane, i)


@pytest.mark.parametrize("layout,shape", [(L.mma_a(), (16, 16)), (L.mma_b(), (16, 8)), (L.mma_c(), (16, 8))])
def test_each_element_held_exactly_once(layout, shape):
    owner = L.element_owner(layout, shape)
    assert (owner >= 0).all()
    assert len(np.unique(owner)) == shape[0] * shape[1] == layout.shape[0] * layout.shape[1]


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_matches_isa_description(num, trans):
    # ISA: "each thread receives ... one 32-bit register per matrix, holding two consecutive elements of row
    # (laneid / 4)" (column pair 2 * (laneid % 4)); .trans delivers the element at (col, row) instead.
    m = L.ldmatrix(num, trans)
    assert m.shape == (32, 2 * num, 3)
    for lane in range(32):
        for reg in range(num):
            for h in range(2):
                row, col = lane // 4, 2 * (lane % 4) + h
                want = (reg, col, row) if trans else (reg, row, col)
                assert tuple(m[lane, 2 * reg + h]) == want
    # every element of every matrix delivered exactly once
    flat = {tuple(x) for x in m.reshape(-1, 3)}
    assert len(flat) == 64 * num


def test_ldmatrix_address_lanes():
    assert L.ldmatrix_address_lanes(4)[2].tolist() == list(range(16, 24))
    assert L.ldmatrix_address_lanes(1).shape == (1, 8)
    with pytest.raises(ValueError, match="not .x3"):
        L.ldmatrix(3)


def _tile(rows, cols):
    return np.arange(rows * cols).reshape(rows, cols)


def test_ldmatrix_x4_feeds_mma_a():
    """A 16x16 row-major tile; lane l points at row l % 16, column 8 * (l // 16): ldmatrix.x4 yields exactly the
    mma.m16n8k16 A fragment (the addressing every mma kernel uses)."""
    smem = _tile(16, 16)
    addr = np.array([(lane % 16, 8 * (lane // 16)) for lane in range(32)])
    got = L.gather_ldmatrix(smem, addr, 4)
    a = L.mma_a()
    want = smem[a[..., 0], a[..., 1]]
    assert np.array_equal(got, want)


def test_ldmatrix_x2_trans_feeds_mma_b_from_row_major_b():
    """B stored (k, n) row-major, 16x8: lanes 0..15 point at rows k = 0..15; ldmatrix.x2.trans yields the B
    fragment (so a row-major B needs no transposition in memory)."""
    smem = _tile(16, 8)
    addr = np.array([(lane % 16, 0) for lane in range(32)])
    got = L.gather_ldmatrix(smem, addr, 2, trans=True)
    b = L.mma_b()
    assert np.array_equal(got, smem[b[..., 0], b[..., 1]])


def test_ldmatrix_x2_feeds_mma_b_from_column_major_b():
    """B stored (n, k), 8 rows of 16: lanes 0..7 point at (n, k=0), lanes 8..15 at (n, k=8); plain ldmatrix.x2
    yields the B fragment."""
    smem_nk = _tile(8, 16)
    addr = np.array([(lane % 8, 8 * ((lane // 8) % 2)) for lane in range(32)])
    got = L.gather_ldmatrix(smem_nk, addr, 2)
    b = L.mma_b()  # (k, n) pairs
    assert np.array_equal(got, smem_nk[b[..., 1], b[..., 0]])


def test_stmatrix_x2_writes_fp16_c_row_major():
    """The fp16 C fragment (two .f16x2 registers) stored with stmatrix.x2, lanes 0..7 giving rows 0..7 and lanes
    8..15 rows 8..15, lands as the row-major 16x8 tile: the stmatrix epilogue of the mma ladder."""
    c = L.mma_c()
    st = L.stmatrix(2)
    for lane in range(32):
        for e in range(4):  # element e = half (e % 2) of register (e // 2)
            m, r, col = st[lane, e]
            assert (8 * m + r, col) == tuple(c[lane, e])


def test_trans_is_transposition():
    for num in (1, 2, 4):
        plain, tr = L.ldmatrix(num), L.ldmatrix(num, trans=True)
        assert np.array_equal(plain[..., 0], tr[..., 0])
        assert np.array_equal(plain[..., 1:], tr[..., 1:][..., ::-1])


def test_layout_maps_rendered(tmp_path):
    from compare.layouts import draw_all

    pngs = draw_all(tmp_path)
    assert [p.name for p in pngs] == ["mma_m16n8k16.png", "ldmatrix_x4.png", "ldmatrix_x4_trans.png",
                                      "mma_sp_m16n8k32.png"]
    for p in pngs:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 50_000
    md = (tmp_path / "layouts.md").read_text()
    assert all(f"]({p.name})" in md for p in pngs)


class _FakeProbeExtension:
    """Emulates probes.cu from the ISA's element-first formulas (as in the tests above), so the decoding in
    ptx_kernels/probes.py (register packing, fp16 halves, stmatrix inversion) runs without a GPU."""

    @staticmethod
    def _ldm_src(lane, reg, half, trans):
        row, col = lane // 4, 2 * (lane % 4) + half
        return (col, row) if trans else (row, col)

    def probe_ldmatrix(self, num, trans):
        out = np.zeros((32, 2 * num), dtype=np.int64)
        for lane in range(32):
            for reg in range(num):
                for h in range(2):
                    r, c = self._ldm_src(lane, reg, h, trans)
                    out[lane, 2 * reg + h] = reg * 64 + r * 8 + c
        return torch.from_numpy(out.astype(np.int16))

    def probe_stmatrix(self, num, trans):
        s = np.full(num * 64, 0xFFFF, dtype=np.int64)
        for lane in range(32):
            for reg in range(num):
                for h in range(2):
                    r, c = self._ldm_src(lane, reg, h, trans)
                    s[reg * 64 + r * 8 + c] = lane * 8 + 2 * reg + h
        return torch.from_numpy(s.astype(np.uint16).view(np.int16))

    def probe_mma(self, a, b, c, fp16):
        ra, rb = a.numpy().view(np.uint32), b.numpy().view(np.uint32)
        halves = lambda regs: np.stack([regs & 0xFFFF, regs >> 16], -1).reshape(32, -1).astype(np.uint16).view(
            np.float16).astype(np.float64)  # noqa: E731
        av, bv = halves(ra), halves(rb)
        A, B = np.zeros((16, 16)), np.zeros((16, 8))
        for lane in range(32):
            g, t = lane >> 2, lane % 4
            for i in range(8):
                A[g if (i < 2 or 4 <= i < 6) else g + 8, t * 2 + (i & 1) + (8 if i >= 4 else 0)] = av[lane, i]
            for i in range(4):
                B[t * 2 + (i & 1) + (8 if i >= 2 else 0), g] = bv[lane, i]
        D = A @ B
        return self._d_registers(D, fp16)


    @staticmethod
    def _d_registers(D, fp16):
        """The 16x8 result as the lanes hold it: (32, 4) fp32, or (32, 2) registers of two fp16."""
        d = np.array([[D[(lane >> 2) + (8 if i >= 2 else 0), (lane % 4) * 2 + (i & 1)] for i in range(4)]
                      for lane in range(32)])
        if not fp16:
            return torch.from_numpy(d.astype(np.float32))
        bits = d.astype(np.float16).view(np.uint16).astype(np.uint32)
        return torch.from_numpy((bits[:, 0::2] | (bits[:, 1::2] << 16)).view(np.int32))

    def probe_mma_sp(self, a, b, e, c, fp16, sel):
        """mma.sp.m16n8k32 from the ISA-checked model (ptx_kernels/sparse.py emulate_mma_sp)."""
        from ptx_kernels import sparse
        halves = lambda regs: np.stack([regs & 0xFFFF, regs >> 16], -1).reshape(32, -1).astype(np.uint16).view(
            np.float16).astype(np.float64)  # noqa: E731
        D = sparse.emulate_mma_sp(halves(a.numpy().view(np.uint32)), halves(b.numpy().view(np.uint32)),
                                  e.numpy().view(np.uint32), sel)
        return self._d_registers(D, fp16)


@pytest.fixture
def fake_probes(monkeypatch):
    from ptx_kernels import probes
    fake = _FakeProbeExtension()
    monkeypatch.setattr(probes, "load", lambda: fake)
    # probes.py moves inputs to "cuda"; here they stay on the CPU
    monkeypatch.setattr(torch.Tensor, "to", lambda self, *a, **k: self)
    real_zeros = torch.zeros
    monkeypatch.setattr(torch, "zeros", lambda *s, **k: real_zeros(*s, dtype=k.get("dtype")))
    return probes


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_probe_decoding_ldmatrix_stmatrix(fake_probes, num, trans):
    assert np.array_equal(fake_probes.ldmatrix(num, trans), L.ldmatrix(num, trans))
    assert np.array_equal(fake_probes.stmatrix(num, trans), L.stmatrix(num, trans))


@pytest.mark.parametrize("sel", [0, 1])
@pytest.mark.parametrize("acc", ["fp32", "fp16"])
def test_probe_decoding_mma_sp(fake_probes, acc, sel):
    from ptx_kernels import sparse
    rng = np.random.default_rng(2)
    a = sparse.prune_2to4(torch.from_numpy(rng.integers(-3, 4, (16, 32))).to(torch.float16)).double().numpy()
    b = rng.integers(-3, 4, (32, 8)).astype(np.float64)
    assert np.array_equal(fake_probes.mma_sp(a, b, acc, sel), a @ b)


@pytest.mark.parametrize("acc", ["fp32", "fp16"])
def test_probe_decoding_mma(fake_probes, acc):
    rng = np.random.default_rng(1)
    a = rng.integers(-3, 4, (16, 16)).astype(np.float64)
    b = rng.integers(-3, 4, (16, 8)).astype(np.float64)
    assert np.array_equal(fake_probes.mma(a, b, acc), a @ b)


def test_layouts_hardware_page_from_emulated_probes(fake_probes, monkeypatch, tmp_path):
    """`compare layouts --hardware` logic with the emulated probes: every instruction agrees, the WMMA map is drawn
    from what the probe recorded, and the page says so."""
    from compare import layouts as page

    monkeypatch.setattr(fake_probes, "wmma", lambda which: L.mma_a())  # a stand-in 16x16 cover
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "emulated")
    pngs = page.draw_all(tmp_path, hardware=True)
    assert (tmp_path / "wmma_fragments.png") in pngs
    md = (tmp_path / "layouts.md").read_text()
    assert "On the hardware (emulated)" in md and "| NO |" not in md
    assert md.count("| yes |") == 6 + 6 + 2 + 4  # ldmatrix, stmatrix, mma, mma.sp (2 accumulations x 2 selectors)


def test_layouts_hardware_mismatch_is_an_error(fake_probes, monkeypatch, tmp_path):
    from compare import layouts as page

    monkeypatch.setattr(fake_probes, "wmma", lambda which: L.mma_a())
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "emulated")
    wrong = L.ldmatrix(4).copy()
    wrong[0, 0], wrong[1, 0] = wrong[1, 0].copy(), wrong[0, 0].copy()
    monkeypatch.setattr(fake_probes, "ldmatrix", lambda num, trans=False: wrong if num == 4 and not trans
                        else L.ldmatrix(num, trans))
    with pytest.raises(RuntimeError, match="hardware differs from the model"):
        page.draw_all(tmp_path, hardware=True)
    assert "| ldmatrix.x4 | NO |" in (tmp_path / "layouts.md").read_text()


# ---- the bandwidth path (csrc/sm90/mma_stream.cu): B straight into registers, k order permuted to the fragment ----
def _stream_warp_step(a, b, b_col):
    """One warp step of mma_stream modelled lane by lane on the fragment layouts above: what each lane loads (its
    16-byte chunks of B and of A), how its registers become the MMA's operands (the k slots of k16 step h: 2t, 2t+1
    from k 8t + 4h + 0, 1 and 2t + 8, 2t + 9 from 8t + 4h + 2, 3 of the lane's chunk; row-major B's rows paired by
    PRMT, its MMA rows permuted instead), the MMAs (C^T = B^T A^T: B's columns are the MMA's rows, A's 16 rows its
    two n8 tiles), and where the epilogue puts each accumulator. a: (16, K) A rows, b: (K, N) as the kernel reads it
    (row-major B: K = 32, N = 64; column-major B: K = 64, N = 32). Returns the (16, N) block of C it computes."""
    fa, fb, fc = L.mma_a(), L.mma_b(), L.mma_c()
    rb, ks = (2, 2) if b_col else (4, 1)
    out = np.zeros((16, b.shape[1]), dtype=np.int64)

    def col(j, hh, g):  # Warp<B_COL>::col: the C column of MMA row block j's row g (hh = 0) or g + 8 (hh = 1)
        return 16 * j + 8 * hh + g if b_col else 8 * g + 2 * j + hh

    for j in range(rb):
        for s in range(ks):
            for h in range(2):
                for i in range(2):
                    x = np.zeros((16, 16), dtype=np.int64)  # the MMA's A (B^T's 16 columns x 16 k slots)
                    y = np.zeros((16, 8), dtype=np.int64)  # the MMA's B (16 k slots x A's 8 rows)
                    for lane in range(32):
                        g, t = lane // 4, lane % 4
                        chunk = 32 * s + 8 * t + 4 * h  # the lane's k for slots 2t, 2t+1 (and + 2: 2t + 8, 2t + 9)
                        # the fragment's registers {q(g, 2h), q(g + 8, 2h), q(g, 2h + 1), q(g + 8, 2h + 1)}, each two
                        # consecutive k of one column: column-major B loads them as they are (a column's 8 k in 4
                        # registers), row-major B pairs rows k, k + 1 of columns 8g + 2j (+1) with PRMT 0x5410 (the
                        # low halves) and 0x7632 (the high halves)
                        halves = [b[chunk + kk + p, col(j, hh, g)] for kk in (0, 2) for hh in (0, 1) for p in (0, 1)]
                        for e, (row, kk) in enumerate(fa[lane]):
                            x[row, kk] = halves[e]
                        a_halves = [a[8 * i + g, chunk + p] for p in range(4)]  # registers 2h, 2h + 1 of A's chunk
                        for e, (kk, n) in enumerate(fb[lane]):
                            y[kk, n] = a_halves[e]
                    d = x @ y
                    for lane in range(32):
                        g, t = lane // 4, lane % 4
                        for e, (row, c) in enumerate(fc[lane]):
                            hh, m = e // 2, 8 * i + 2 * t + e % 2  # value e: row half e // 2, column 2t + e % 2
                            assert (row, c) == (g + 8 * hh, 2 * t + e % 2)
                            out[m, col(j, hh, g)] += d[row, c]
    return out


@pytest.mark.parametrize("b_col", [False, True])
def test_stream_warp_step_computes_its_block_of_c(b_col):
    """mma_stream's warp step (the loads, the k permutation, row-major B's PRMT pairing, the epilogue's columns) is
    exactly A @ B over the step: every column of the warp's block once, every k of the step once."""
    rng = np.random.default_rng(3)
    k, n = (64, 32) if b_col else (32, 64)
    a, b = rng.integers(-3, 4, (16, k)), rng.integers(-3, 4, (k, n))
    assert np.array_equal(_stream_warp_step(a, b, b_col), a @ b)
