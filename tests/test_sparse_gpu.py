"""The 2:4 sparse kernels on a GPU: exact integer checks against the float64 product of the pruned A on odd shapes
(M, N, K around each kernel's tile and the instructions' K of 32), both B layouts, both accumulations,
NaN-poisoned outputs; random data within the bound; the API's errors; the torch.library operator."""
import pytest
import torch

import ptx_kernels
from compare.reference import compare, error_bound, make_inputs, negative_view, poisoned_out, reference
from helpers import assert_exact, poisoned_call
from ptx_kernels import sparse as S

pytestmark = pytest.mark.gpu

CASES = [(v, acc) for v in ptx_kernels.variants("sparse") for acc in v.accs]
IDS = [f"{v.name}-{acc}" for v, acc in CASES]
MN = (1, 7, 8, 15, 16, 17, 107, 233, 496)
KS = (1, 8, 31, 32, 33, 311, 4099)


def _skip_unless_offered(v):
    major, minor = torch.cuda.get_device_capability()
    if not v.offered_on(major * 10 + minor):
        pytest.skip(f"{v.name} needs sm_{v.min_arch}")


def sparse_inputs(m, n, k, b_layout, seed, kind="int"):
    """Pruned A (m, k) and B (k, n) in the given B layout ("N" row-major, "T" column-major), on the GPU."""
    a, b = make_inputs(m, n, k, "N" + b_layout, device="cuda", seed=seed, kind=kind)
    return S.prune_2to4(a), b


def run(v, acc, a, b):
    """sparse_hgemm on kernel v (A compressed here) into a NaN-poisoned out=."""
    values, meta = S.compress(a)
    c = poisoned_call(lambda out: ptx_kernels.sparse_hgemm(values, meta, b, kernel=v.name, acc=acc, out=out),
                      a.shape[0], b.shape[1], "cuda")
    assert ptx_kernels.last_launch()["variant"] == v.name
    return c


def edge_shapes(v):
    bm, bn, bk = v.block
    return [(m, n, k) for m, n, k in zip(MN, reversed(MN), KS * 2)] + \
        [(bm + 1, bn - 1, bk * v.stages + 8), (bm - 1, bn + 1, bk + 1), (bm, bn, 32), (2 * bm + 3, 2 * bn + 5, 4099)]


@pytest.mark.parametrize("b_layout", ["N", "T"])
@pytest.mark.parametrize("v,acc", CASES, ids=IDS)
def test_exact_odd_shapes(v, acc, b_layout):
    _skip_unless_offered(v)
    for i, (m, n, k) in enumerate(edge_shapes(v)):
        a, b = sparse_inputs(m, n, k, b_layout, seed=i)
        assert_exact(run(v, acc, a, b), a, b, f"{v.name} {acc} B={b_layout} {m}x{n}x{k}")


@pytest.mark.parametrize("b_layout", ["N", "T"])
@pytest.mark.parametrize("tile", ["large", "base", 1])
def test_mma_sp_fp16_tiles_pinned_exact(tile, b_layout):
    """mma_sp with fp16 accumulation has two tiles (256x256 and the fp32 one, 128x256); tile= pins each (1: the
    older integer form of "large"), on shapes around the large one (the automatic choice takes it only where it fills
    the GPU). K <= 227 keeps fp16 partial sums exact."""
    v = next(v for v in ptx_kernels.variants("sparse") if v.name == "mma_sp")
    _skip_unless_offered(v)
    large = tile in ("large", 1)
    if large and torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("the 256x256 tile needs 200 KB of shared memory (sm_90's 227 KB; sm_80 has 163 KB)")
    bm, bn, _ = v.block_fp16 if large else v.block
    for i, (m, n, k) in enumerate([(bm + 1, bn - 1, 200), (bm - 1, bn + 1, 33), (2 * bm + 3, bn + 5, 227), (7, 9, 15)]):
        a, b = sparse_inputs(m, n, k, b_layout, seed=i)
        values, meta = S.compress(a)
        out = poisoned_out(m, n, "cuda")
        ptx_kernels.sparse_hgemm(values, meta, b, kernel="mma_sp", acc="fp16", out=out, tile=tile)
        torch.cuda.synchronize()
        assert ptx_kernels.last_launch()["tile"] == (bm, bn)
        assert_exact(out, a, b, f"tile={tile} B={b_layout} {m}x{n}x{k}")


@pytest.mark.parametrize("b_layout", ["N", "T"])
@pytest.mark.parametrize("acc", ["fp32", "fp16"])
@pytest.mark.parametrize("schedule", ["cluster2", "band8", "band16"])
def test_wgmma_sp_schedules_exact(schedule, acc, b_layout):
    """wgmma_sp with each schedule pinned; schedule="cluster2": clusters of two blocks on tile rows 2p, 2p + 1 of one tile column, each loading half of
    B and multicasting it to both. Odd tile-row counts (the last cluster's second tile lies below M: it loads zeros,
    shares its half of B and stores nothing), more clusters of work than fit at once (several rounds), K tails and
    K < 32. K <= 227 keeps fp16 partial sums exact."""
    v = next(v for v in ptx_kernels.variants("sparse") if v.name == "wgmma_sp")
    _skip_unless_offered(v)
    shapes = [(1, 7, 31), (129, 255, 200), (257, 257, 33), (2177, 2600, 227), (384, 1281, 96), (100, 300, 8)]
    for i, (m, n, k) in enumerate(shapes):
        a, b = sparse_inputs(m, n, k, b_layout, seed=200 + i)
        values, meta = S.compress(a)
        out = poisoned_out(m, n, "cuda")
        ptx_kernels.sparse_hgemm(values, meta, b, kernel="wgmma_sp", acc=acc, out=out, schedule=schedule)
        torch.cuda.synchronize()
        assert_exact(out, a, b, f"schedule={schedule} {acc} B={b_layout} {m}x{n}x{k}")


@pytest.mark.parametrize("v,acc", CASES, ids=IDS)
def test_exact_every_mn_k(v, acc):
    """Every M and N of the list against a short and a long K, B row-major."""
    _skip_unless_offered(v)
    for i, (m, n) in enumerate((m, n) for m in MN for n in MN):
        k = KS[i % len(KS)]
        a, b = sparse_inputs(m, n, k, "N", seed=100 + i)
        assert_exact(run(v, acc, a, b), a, b, f"{v.name} {acc} {m}x{n}x{k}")


@pytest.mark.parametrize("v,acc", CASES, ids=IDS)
def test_random_within_bound(v, acc):
    _skip_unless_offered(v)
    a, b = sparse_inputs(1500, 1100, 2000, "T", seed=3, kind="randn")
    ref = reference(a, b)
    verdict = compare(run(v, acc, a, b), ref, error_bound(a, b, ref, acc))
    assert verdict.ok, verdict.detail


@pytest.mark.parametrize("v,acc", CASES, ids=IDS)
def test_nan_in_a_poisons_its_row_only(v, acc):
    _skip_unless_offered(v)
    a, b = sparse_inputs(40, 24, 70, "N", seed=5)
    a[3, 9] = float("nan")
    a = S.prune_2to4(a)  # keeps the NaN (pruning ranks NaN first)
    c = run(v, acc, a, b)
    assert torch.isnan(c[3]).all() and torch.isfinite(c[torch.arange(40) != 3]).all()


@pytest.mark.parametrize("b_layout", ["N", "T"])
@pytest.mark.parametrize("v", ptx_kernels.variants("sparse"), ids=lambda v: v.name)
def test_negative_views_keep_their_sign(v, b_layout):
    """Values, B and out with the neg bit set (memory holding the negatives, as the float16 .imag of a conjugated
    complex-half tensor does): resolved on the way in, C through a temporary on the way out."""
    _skip_unless_offered(v)
    a, b = sparse_inputs(65, 100, 96, b_layout, seed=13)
    values, meta = S.compress(a)
    store = poisoned_out(65, 100, "cuda")
    c = ptx_kernels.sparse_hgemm(negative_view(values), meta, negative_view(b), kernel=v.name,
                                 out=negative_view(store))
    torch.cuda.synchronize()
    assert_exact(c, a, b)
    assert {"values: negative view resolved", "B: negative view resolved"} <= set(ptx_kernels.last_launch()["copies"])


@pytest.mark.parametrize("v", ptx_kernels.variants("sparse"), ids=lambda v: v.name)
def test_deterministic_and_other_stream(v):
    _skip_unless_offered(v)
    a, b = sparse_inputs(300, 200, 500, "N", seed=7, kind="randn")
    values, meta = S.compress(a)
    c1 = ptx_kernels.sparse_hgemm(values, meta, b, kernel=v.name)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        c2 = ptx_kernels.sparse_hgemm(values, meta, b, kernel=v.name)
    s.synchronize()
    assert torch.equal(c1, c2)


def test_auto_picks_an_offered_kernel_and_sparse_a_class():
    a, b = sparse_inputs(64, 48, 100, "T", seed=9)
    sa = ptx_kernels.SparseA(a)
    assert torch.equal(sa.dense(), a)
    c = sa @ b
    assert compare(c, reference(a, b)).ok
    major, minor = torch.cuda.get_device_capability()
    assert ptx_kernels.last_launch()["variant"] == max(
        (v for v in ptx_kernels.variants("sparse") if v.offered_on(major * 10 + minor)), key=lambda v: v.min_arch).name


def test_errors_are_clear():
    a, b = sparse_inputs(32, 16, 64, "N", seed=1)
    values, meta = S.compress(a)
    with pytest.raises(ValueError, match="not 2:4 sparse along K"):
        ptx_kernels.SparseA(torch.ones(4, 8, dtype=torch.float16, device="cuda"))
    bad = meta.clone()
    bad[0, 0, 0] = 0
    with pytest.raises(ValueError, match="metadata does not match the 2:4 format"):
        ptx_kernels.sparse_hgemm(values, bad, b)
    with pytest.raises(ValueError, match="metadata has shape"):
        ptx_kernels.sparse_hgemm(values, meta[:, :1], b)
    with pytest.raises(ValueError, match="compressed values have shape"):
        ptx_kernels.sparse_hgemm(values, meta, torch.ones(100, 16, dtype=torch.float16, device="cuda"))
    with pytest.raises(TypeError, match="float16"):
        ptx_kernels.sparse_hgemm(values, meta, b.float())
    with pytest.raises(ValueError, match="same device|on cpu"):
        ptx_kernels.sparse_hgemm(values, meta, b.cpu())
    with pytest.raises(ValueError, match="unknown kernel 'mma_stmatrix'"):
        ptx_kernels.sparse_hgemm(values, meta, b, kernel="mma_stmatrix")
    with pytest.raises(ValueError, match="sparse kernel: ptx_kernels.sparse_hgemm"):
        ptx_kernels.hgemm(a, b, kernel="mma_sp")
    empty = ptx_kernels.sparse_hgemm(*S.compress(a[:0]), b)
    assert empty.shape == (0, 16)


def test_operator_and_opcheck():
    import ptx_kernels.ops  # noqa: F401 - registers the operators

    a, b = sparse_inputs(48, 40, 96, "N", seed=11)
    values, meta = S.compress(a)
    c = torch.ops.tensorcore_hgemm.ptx_sparse_hgemm(values, meta, b, "auto", "fp32")
    assert compare(c, reference(a, b)).ok
    torch.library.opcheck(torch.ops.tensorcore_hgemm.ptx_sparse_hgemm.default, (values, meta, b, "auto", "fp32"),
                          test_utils=("test_schema", "test_faketensor"))


def test_harness_sparse_kind_checks_and_times_every_entry_on_one_pruned_a():
    """`compare bench --kind sparse` on a small shape: every entry of this GPU is checked against the pruned
    product and timed (torch's semi-structured matmul may be skipped with its reason), rows say kind "sparse" and
    carry ratios to dense torch.matmul; `check --kind sparse` passes every case."""
    from compare import bench, check, registry

    kernels = registry.select(None, kind="sparse")
    names = {k.name for k in kernels}
    assert {"torch.matmul", *(v.name for v in ptx_kernels.variants("sparse") if _offered(v))} <= names
    rows = bench.bench_shape(kernels, 512, 384, 1024, budget_ms=5, rounds=1, kind="sparse")
    for r in rows:
        assert r.kind == "sparse"
        assert r.status == "ok" or (r.status == "skipped" and r.kernel == registry.SEMI_STRUCTURED.name), r
        assert r.status != "ok" or r.ratio_to_torch, r
    crow, *_ = check.run_check(kernels, gpu=True, sparse=True)
    assert crow and all(r.ok for r in crow), [r for r in crow if not r.ok][:3]


def _offered(v):
    major, minor = torch.cuda.get_device_capability()
    return v.offered_on(major * 10 + minor)
