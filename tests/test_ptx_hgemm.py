"""The hand-written variants on a GPU: exact integer checks on odd shapes around each variant's own tile, every
layout, both accumulations, NaN-poisoned outputs; random data within the bound; errors and copies."""
import pytest
import torch

import ptx_kernels
from ptx_kernels.variants import BY_NAME, any_strides
from compare.reference import LAYOUTS, compare, error_bound, make_inputs, negative_view, poisoned_out, reference
from helpers import assert_exact, poisoned_call

pytestmark = pytest.mark.gpu

# (variant, accumulation, tile): variants with two fp16 tiles are tested on each, forced.
CASES = [(v, acc, tile) for v in ptx_kernels.variants() for acc in v.accs
         for tile in (("large", "base") if acc == "fp16" and v.block_fp16 else ("auto",))]
IDS = [f"{v.name}-{acc}" + ("" if tile == "auto" else f"-{tile}") for v, acc, tile in CASES]


def tile_of(v, tile):
    """(block, stages) a case runs with."""
    return (v.block_fp16, v.stages_fp16) if tile == "large" else (v.block, v.stages)


def edge_shapes(v, tile="auto"):
    """TESTING.md's list, sized to the tile the case runs: tile +- 1, partial last K tile, deep K (more tiles
    than the pipeline has stages, ending in a partial one)."""
    (bm, bn, bk), stages = tile_of(v, tile)
    shapes = [(1, 1, 1), (7, 8, 15), (17, 16, 8), (15, 17, 311), (bm + 1, bn - 1, bk * stages + 8),
              (bm - 1, bn + 1, max(bk - 1, 1)), (496, 233, bk + 1), (256, 256, 256)]
    if not v.slow:
        shapes.append((107, 233, 4099))
    return shapes


def run(v, acc, a, b, tile="auto", dtype="fp16"):
    """hgemm on kernel v into a NaN-poisoned out= (the launched tile checked where one is pinned)."""
    c = poisoned_call(lambda out: ptx_kernels.hgemm(a, b, kernel=v.name, acc=acc, out=out, tile=tile),
                      a.shape[0], b.shape[1], "cuda", dtype)
    if tile != "auto":
        assert ptx_kernels.last_launch()["tile"] == tile_of(v, tile)[0][:2]
    return c


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("v,acc,tile", CASES, ids=IDS)
def test_exact_edges(v, acc, tile, layout):
    for i, (m, n, k) in enumerate(edge_shapes(v, tile)):
        a, b = make_inputs(m, n, k, layout, device="cuda", seed=i)
        assert_exact(run(v, acc, a, b, tile=tile), a, b, f"{v.name} {acc} {layout} {m}x{n}x{k}")


@pytest.mark.parametrize("v,acc,tile", CASES, ids=IDS)
def test_random_within_bound(v, acc, tile):
    m, n, k = (512, 384, 1000) if v.slow else (1500, 1100, 2000)
    a, b = make_inputs(m, n, k, "NN", device="cuda", seed=3, kind="randn")
    ref = reference(a, b)
    verdict = compare(run(v, acc, a, b, tile=tile), ref, error_bound(a, b, ref, acc))
    assert verdict.ok, verdict.detail


@pytest.mark.parametrize("v,acc,tile", CASES, ids=IDS)
def test_misaligned_and_strided_inputs(v, acc, tile):
    """Storage offsets that break 16-byte alignment, K not a multiple of 8, a strided A view, a strided out."""
    g = torch.Generator().manual_seed(4)
    base_a = torch.randint(-3, 4, (70, 2 * 101 + 1), generator=g).half().cuda()
    base_b = torch.randint(-3, 4, (102, 131), generator=g).half().cuda()
    a = base_a[1:66, 1::2]  # 65 x 101, column stride 2, odd offset
    b = base_b[1:, 3:]  # 101 x 128, offset breaks 16-byte alignment
    out_t = torch.full((129, 65), float("nan"), dtype=torch.float16, device="cuda")
    c = ptx_kernels.hgemm(a, b, kernel=v.name, acc=acc, out=out_t.t()[:, 1:], tile=tile)  # column-major out
    torch.cuda.synchronize()
    assert c.data_ptr() == out_t.t()[:, 1:].data_ptr()
    assert_exact(c, a, b)
    copies = ptx_kernels.last_launch()["copies"]
    if any_strides(v):  # reads A and B with their strides: only the column-major out goes through a temporary
        assert copies == ["C through a row-major temporary"]
    else:
        assert "A to row-major" in copies
        assert ("B to 16-byte aligned rows" in copies) == (v.alignment in ("rows16", "tma"))  # cp.async or TMA


@pytest.mark.parametrize("layout", ("NN", "NT"))
@pytest.mark.parametrize("v", ptx_kernels.variants(), ids=lambda v: v.name)
def test_negative_views_keep_their_sign(v, layout):
    """The kernels read and write raw memory, and a negative view stores its values' negatives: A and B are resolved
    into copies and a negative view of C goes through a temporary (last_launch()["copies"] names them)."""
    a, b = make_inputs(65, 100, 77, layout, device="cuda", seed=12)
    ref = reference(a, b)
    store = poisoned_out(65, 100, "cuda")
    c = ptx_kernels.hgemm(negative_view(a), negative_view(b), kernel=v.name, out=negative_view(store))
    torch.cuda.synchronize()
    verdict = compare(c, ref)
    assert verdict.ok, verdict.detail
    copies = ptx_kernels.last_launch()["copies"]
    assert {"A: negative view resolved", "B: negative view resolved",
            "C through a row-major temporary (negative view)"} <= set(copies), copies
    assert compare(ptx_kernels.hgemm(a, negative_view(b), kernel=v.name), ref).ok


@pytest.mark.parametrize("v", ptx_kernels.variants(), ids=lambda v: v.name)
def test_broadcast_operands_with_zero_strides(v):
    """Expanded (broadcast) operands, a leading dimension of 0: A = one row repeated, B = one column repeated (and
    row-repeated, the other major): exact like torch.matmul, whatever the kernel reads them with."""
    g = torch.Generator().manual_seed(14)
    row = torch.randint(-3, 4, (1, 136), generator=g).half().cuda()
    col = torch.randint(-3, 4, (136, 1), generator=g).half().cuda()
    full_a = torch.randint(-3, 4, (72, 136), generator=g).half().cuda()
    full_b = torch.randint(-3, 4, (136, 200), generator=g).half().cuda()
    cases = [(row.expand(72, 136), full_b), (full_a, col.expand(136, 200)),
             (full_a, torch.randint(-3, 4, (1, 200), generator=g).half().cuda().expand(136, 200)),
             (row.expand(72, 136), col.expand(136, 200))]
    for a, b in cases:
        c = ptx_kernels.hgemm(a, b, kernel=v.name)
        torch.cuda.synchronize()
        assert_exact(c, a, b, f"{v.name} A strides {a.stride()} B strides {b.stride()}")


@pytest.mark.parametrize("v", ptx_kernels.variants(), ids=lambda v: v.name)
def test_deterministic_and_nan_rows(v):
    a, b = make_inputs(200, 150, 333, "NT", device="cuda", seed=5, kind="randn")
    a = a.clone()
    a[17, 3] = float("nan")
    c1 = ptx_kernels.hgemm(a, b, kernel=v.name)
    c2 = ptx_kernels.hgemm(a, b, kernel=v.name)
    assert torch.equal(c1.nan_to_num(), c2.nan_to_num()) and torch.equal(c1.isnan(), c2.isnan())
    rows_nan = c1.isnan().any(dim=1)
    assert rows_nan[17] and c1[17].isnan().all() and int(rows_nan.sum()) == 1


SPLIT_CASES = [(v, acc, split) for v in ptx_kernels.variants() for acc in v.accs
               for split in v.extra.get("splits", ())]


@pytest.mark.parametrize("layout", ("NN", "NT"))
@pytest.mark.parametrize("v,acc,split", SPLIT_CASES, ids=[f"{v.name}-{acc}-split{s}" for v, acc, s in SPLIT_CASES])
def test_split_k_exact_and_deterministic(v, acc, split, layout):
    """Every K split the launcher can take, forced: skinny and odd outputs, K shorter than the parts (cut to the
    k-blocks there are), K tails; and the same bits on a second run (the partial tiles are added in rank order)."""
    for i, (m, n, k) in enumerate([(16, 4096, 4096), (1, 1000, 777), (33, 500, 300), (17, 1000, 4099),
                                   (16, 4096, 8), (130, 250, 70), (7, 9, 13)]):
        a, b = make_inputs(m, n, k, layout, device="cuda", seed=i)
        c = poisoned_out(m, n, "cuda")
        ptx_kernels.hgemm(a, b, kernel=v.name, acc=acc, out=c, split=split)
        torch.cuda.synchronize()
        ran = ptx_kernels.last_launch()["split"]
        assert ran is None or 1 <= ran <= split, ran
        assert_exact(c, a, b, f"{v.name} {acc} split={split} {layout} {m}x{n}x{k}")
    a, b = make_inputs(16, 4096, 4096, layout, device="cuda", seed=9, kind="randn")
    c1 = ptx_kernels.hgemm(a, b, kernel=v.name, acc=acc, split=split)
    c2 = ptx_kernels.hgemm(a, b, kernel=v.name, acc=acc, split=split)
    assert torch.equal(c1, c2)
    if split > 1:  # 16 x 4096 fills the GPU only when split: the launcher ran the forced split
        assert ptx_kernels.last_launch()["split"] == split


@pytest.mark.gpu(sm=90)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype,acc", (("fp16", "fp32"), ("fp16", "fp16"), ("bf16", "fp32")))
def test_persistent_128x192_plan_exact(dtype, acc, layout):
    """wgmma_persistent's 128x192 tile, taken where its rounds are fuller than 128x256's and the operands' rows are
    128-byte aligned (3072x5120x2048: 648 tiles against 480 on 132 SMs), is exact; 3000x5000x2000 (4,000-byte rows)
    stays on 128x256 (or the cluster kernel)."""
    for i, (m, n, k) in enumerate([(3072, 5120, 2048), (3000, 5000, 2000)]):
        kk = k if acc == "fp32" else 192  # fp16 accumulation is exact while partial sums stay small
        a, b = make_inputs(m, n, kk, layout, device="cuda", seed=i, dtype=dtype)
        c = run(BY_NAME["wgmma_persistent"], acc, a, b, dtype=dtype)
        launch = ptx_kernels.last_launch()
        assert_exact(c, a, b, f"{dtype} {acc} {layout} {m}x{n}x{kk}")
        aligned = a.stride(0) % 64 == 0 and max(b.stride()) % 64 == 0
        if kk == 2048 and layout in ("NN", "NT") and aligned:
            assert launch["tile"] == (128, 192), launch
        if kk == 2000:
            assert launch["tile"] != (128, 192), launch


@pytest.mark.gpu(sm=90)
@pytest.mark.parametrize("dtype,acc", (("fp16", "fp32"), ("fp16", "fp16"), ("bf16", "fp32")))
def test_persistent_256x152_plan_exact(dtype, acc):
    """wgmma_persistent's 256x152 tile (two 64-row slabs per consumer warpgroup, C staged unswizzled in 32-row
    rounds), planned for B column-major where its 396 tiles are 3 full rounds: 3000x5000 in place (4,000-byte rows)
    and 3001x4999x2003 (copied to 16-byte rows first). Exact on integer inputs with NaN-poisoned outputs; row-major B
    never takes it."""
    for i, (m, n, k) in enumerate([(3000, 5000, 2000), (3001, 4999, 2003)]):
        kk = k if acc == "fp32" else 192 + i  # fp16 accumulation is exact while partial sums stay small
        for layout in ("NT", "NN"):
            a, b = make_inputs(m, n, kk, layout, device="cuda", seed=i, dtype=dtype)
            c = run(BY_NAME["wgmma_persistent"], acc, a, b, dtype=dtype)
            launch = ptx_kernels.last_launch()
            assert_exact(c, a, b, f"{dtype} {acc} {layout} {m}x{n}x{kk}")
            if layout == "NT":  # the plan follows M x N (and K only where it splits)
                assert launch["tile"] == (256, 152), launch
            if layout == "NN":
                assert launch["tile"] != (256, 152), launch


def test_multistage_dynamic_smem_and_grid():
    """The launch geometry of the tiles (ptx_kernels/variants.py, mma_pipeline.cuh): fp16 accumulation takes the
    256x256 tile where it fills the GPU in whole waves, else the fp32 tile."""
    a, b = make_inputs(300, 600, 64, "NN", device="cuda", seed=6)
    b_col = b.t().contiguous().t()
    ptx_kernels.hgemm(a, b, kernel="wmma_multistage")  # fp32: 3 stages of padded 128x64 A, 64x256 B tiles
    info = ptx_kernels.last_launch()
    assert info["smem_bytes"] == 3 * (128 * 72 + 64 * 264) * 2
    assert info["grid"][0] == 3 * 3 and info["block"] == 256 and info["tile"] == (128, 256)
    ptx_kernels.hgemm(a, b_col, kernel="wmma_multistage")
    assert ptx_kernels.last_launch()["smem_bytes"] == 3 * (128 * 72 + 256 * 72) * 2
    ptx_kernels.hgemm(a, b, kernel="wmma_multistage", acc="fp16")  # 6 blocks of 256x256 would idle the GPU
    assert ptx_kernels.last_launch()["tile"] == (128, 256)
    ptx_kernels.hgemm(a, b, kernel="wmma_multistage", acc="fp16", tile="large")  # 4 stages of 256x32, 32x256
    info = ptx_kernels.last_launch()
    assert info["smem_bytes"] == 4 * (256 * 40 + 32 * 264) * 2 and info["grid"][0] == 2 * 3
    ptx_kernels.hgemm(a, b, kernel="mma_stmatrix")  # 3 stages of 128x64 A and 64x256 B, unpadded
    info = ptx_kernels.last_launch()
    assert info["smem_bytes"] == 3 * (128 * 64 + 64 * 256) * 2 and info["grid"][0] == 3 * 3 and info["block"] == 256
    ptx_kernels.hgemm(a, b, kernel="mma_stmatrix", acc="fp16", tile="large")  # the 256x264 C tile outgrows 4 stages
    info = ptx_kernels.last_launch()
    assert info["smem_bytes"] == 256 * 264 * 2 > 4 * (256 * 32 + 32 * 256) * 2
    assert info["grid"][0] == 2 * 3 and info["block"] == 256
    big_a, big_b = make_inputs(4096, 4096, 64, "NN", device="cuda", seed=7)
    ptx_kernels.hgemm(big_a, big_b, kernel="mma_stmatrix", acc="fp16")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    waves = lambda tiles: -(-tiles // sms)  # noqa: E731
    large = 10 * waves(16 * 16) * 256 * 256 <= 11 * waves(32 * 16) * 128 * 256  # on 132 SMs: 2 waves vs 4, large
    assert ptx_kernels.last_launch()["tile"] == ((256, 256) if large else (128, 256))


def test_errors():
    a, b = make_inputs(8, 8, 8, "NN", device="cuda")
    with pytest.raises(ValueError, match="unknown kernel 'nope'"):
        ptx_kernels.hgemm(a, b, kernel="nope")
    with pytest.raises(ValueError, match="supports acc in"):
        ptx_kernels.hgemm(a, b, kernel="wmma_smem", acc="tf32")
    with pytest.raises(ValueError, match=r"mat1 and mat2 shapes cannot be multiplied \(8x8 and 7x8\)"):
        ptx_kernels.hgemm(a, b[:7], kernel="wmma_smem")
    with pytest.raises(ValueError, match="inputs are on cpu"):
        ptx_kernels.hgemm(a.cpu(), b.cpu())


def test_empty_and_k_zero():
    e = torch.empty(0, 5, dtype=torch.float16, device="cuda")
    assert ptx_kernels.hgemm(e, torch.ones(5, 3, dtype=torch.float16, device="cuda")).shape == (0, 3)
    z = ptx_kernels.hgemm(torch.ones(4, 0, dtype=torch.float16, device="cuda"),
                          torch.ones(0, 6, dtype=torch.float16, device="cuda"))
    assert torch.equal(z, torch.zeros(4, 6, dtype=torch.float16, device="cuda"))


def test_non_default_stream():
    a, b = make_inputs(700, 500, 900, "NN", device="cuda", seed=7)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        a2 = a * 1
        cs = [ptx_kernels.hgemm(a2, b, kernel=v.name) for v in ptx_kernels.variants()]
    s.synchronize()
    ref = reference(a, b)
    for v, c in zip(ptx_kernels.variants(), cs):
        assert compare(c, ref).ok, v.name


@pytest.mark.gpu
def test_inputs_that_require_grad_record_autograd():
    """hgemm on inputs that require grad goes through the operator: the result has a grad_fn, and the gradients
    (dA = dC B^T, dB = A^T dC on the same variant) are exact on small integers."""
    a, b = make_inputs(64, 48, 40, "NN", device="cuda", seed=5)
    a.requires_grad_()
    b.requires_grad_()
    c = ptx_kernels.hgemm(a, b, kernel="mma_tiled")
    assert c.grad_fn is not None
    g = torch.randint(-2, 3, c.shape, device="cuda").half()
    c.backward(g)
    assert torch.equal(a.grad, (g.double() @ b.detach().double().t()).half())
    assert torch.equal(b.grad, (a.detach().double().t() @ g.double()).half())
    with pytest.raises(RuntimeError, match="not recorded by autograd"):
        ptx_kernels.hgemm(a, b, kernel="mma_tiled", out=torch.empty_like(c.detach()))
