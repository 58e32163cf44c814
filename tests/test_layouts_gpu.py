"""Hardware equals model: the probes (ptx_kernels/csrc/lab/probes.cu) against ptx_kernels/layouts.py."""
import numpy as np
import pytest
import torch

from ptx_kernels import layouts as L

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def probes():
    from ptx_kernels import probes as p
    return p


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_hardware_equals_model(probes, num, trans):
    assert np.array_equal(probes.ldmatrix(num, trans), L.ldmatrix(num, trans))


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_stmatrix_hardware_equals_model(probes, num, trans):
    if torch.cuda.get_device_capability() < (9, 0):
        with pytest.raises(RuntimeError, match="needs sm_90"):
            probes.stmatrix(num, trans)
        return
    assert np.array_equal(probes.stmatrix(num, trans), L.stmatrix(num, trans))


@pytest.mark.parametrize("acc", ["fp32", "fp16"])
def test_mma_hardware_equals_model(probes, acc):
    rng = np.random.default_rng(0)
    for _ in range(5):
        a = rng.integers(-3, 4, (16, 16)).astype(np.float64)
        b = rng.integers(-3, 4, (16, 8)).astype(np.float64)
        assert np.array_equal(probes.mma(a, b, acc), a @ b)
    # indexed A, column-selecting B: D[m, n] = A[m, n] = 16 m + n names every output's position
    a = np.arange(256, dtype=np.float64).reshape(16, 16)
    b = np.eye(16, 8)
    assert np.array_equal(probes.mma(a, b, acc), a[:, :8])


@pytest.mark.parametrize("sel", [0, 1])
@pytest.mark.parametrize("acc", ["fp32", "fp16"])
def test_mma_sp_hardware_equals_model(probes, acc, sel):
    """mma.sp.m16n8k32: registers scattered by the model of the compressed A, B and metadata fragments
    (ptx_kernels/sparse.py), D gathered by the model, equal to the pruned product: every 2:4 pattern appears."""
    from ptx_kernels import sparse

    rng = np.random.default_rng(sel)
    for _ in range(8):
        a = sparse.prune_2to4(torch.from_numpy(rng.integers(-3, 4, (16, 32))).to(torch.float16)).double().numpy()
        b = rng.integers(-3, 4, (32, 8)).astype(np.float64)
        assert np.array_equal(probes.mma_sp(a, b, acc, sel), a @ b)
    # one kept element per chunk at each position in turn, B = k: D[m, 0] names the dense column kept
    for pos in range(4):
        a = np.zeros((16, 32))
        a[:, pos::4] = 1
        b = np.tile(np.arange(32, dtype=np.float64)[:, None], (1, 8))
        assert np.array_equal(probes.mma_sp(a, b, acc, sel), a @ b), pos


@pytest.mark.gpu(sm=90)
@pytest.mark.parametrize("b_col", [True, False], ids=["B-kmajor", "B-nmajor"])
@pytest.mark.parametrize("sel", [0, 1])
@pytest.mark.parametrize("acc", ["fp32", "fp16"])
def test_wgmma_sp_hardware_equals_model(probes, acc, sel, b_col):
    """One stage of wgmma_sp (two wgmma.mma_async.sp m64n256k32 through the kernel's descriptors, operands where its
    TMA boxes put them): metadata registers by the model (ptx_kernels/sparse.py, per warp the mma.sp map), D gathered
    by the model of the accumulator fragment, equal to the pruned product."""
    from ptx_kernels import sparse

    rng = np.random.default_rng(10 + sel)
    for _ in range(3):
        a = sparse.prune_2to4(torch.from_numpy(rng.integers(-3, 4, (64, 64))).to(torch.float16)).double().numpy()
        b = rng.integers(-3, 4, (64, 256)).astype(np.float64)
        assert np.array_equal(probes.wgmma_sp(a, b, acc, sel, b_col), a @ b)
    # one kept element per chunk at each position in turn, B = k: D[m, n] names the dense column kept
    for pos in range(4):
        a = np.zeros((64, 64))
        a[:, pos::4] = 1
        b = np.tile(np.arange(64, dtype=np.float64)[:, None], (1, 256))
        assert np.array_equal(probes.wgmma_sp(a, b, acc, sel, b_col), a @ b), pos


@pytest.mark.parametrize("which", [0, 1, 2, 3])
def test_wmma_fragments_recorded(probes, which):
    """WMMA's layout is the compiler's choice: record it, and check it is a cover of the 16x16 tile."""
    frag = probes.wmma(which)
    cells = {tuple(x) for x in frag.reshape(-1, 2)}
    assert len(cells) == 256, f"{probes.WMMA_KINDS[which]}: {len(cells)} distinct elements"


def test_asm_examples(probes):
    r = probes.asm_examples()
    lanes = np.arange(32, dtype=np.uint64)
    assert np.array_equal(r["cube"], (lanes ** 3).astype(np.uint32))
    assert np.array_equal(r["min"], np.minimum(np.arange(32) - 16, 16 - np.arange(32)))
    assert np.array_equal(r["laneid"], lanes.astype(np.uint32))
    assert (r["clock_delta"] > 0).all()  # volatile: two reads, two values
    assert np.array_equal(r["add_u16"], ((lanes + 65535) % 65536).astype(np.uint32))
    assert np.array_equal(r["fma_f32"], np.arange(32, dtype=np.float32) * 0.5 + 1)
    assert np.array_equal(r["shl3"], (lanes * 8).astype(np.uint32))
    assert np.array_equal(r["stored"], (lanes.astype(np.uint32) ^ np.uint32(0x5A5A5A5A)))
    assert np.array_equal(r["add_u64"], (lanes.astype(np.int64) << 40) + 7)
    assert np.array_equal(r["add_f64"], np.arange(32) + 0.25)
