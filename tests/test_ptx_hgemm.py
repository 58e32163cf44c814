"""The hand-written variants on a GPU: exact integer checks on odd shapes around each variant's own tile, every
layout, both accumulations, NaN-poisoned outputs; random data within the bound; errors and copies."""
import functools
import tempfile
from pathlib import Path

import pytest
import torch

import ptx_kernels
from ptx_kernels.variants import BY_NAME, CSRC, a_col_in_place, any_strides
from compare.reference import LAYOUTS, compare, error_bound, make_inputs, negative_view, poisoned_out, reference
from helpers import (a_copies, assert_exact, in_place_operand, on_side_stream_and_in_graph, poisoned_call,
                     shared_inputs)
from hgemm_common.operands import is_row_major

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
        a, b = shared_inputs(m, n, k, layout, seed=i)
        assert_exact(run(v, acc, a, b, tile=tile), a, b, f"{v.name} {acc} {layout} {m}x{n}x{k}")


@pytest.mark.parametrize("v,acc,tile", CASES, ids=IDS)
def test_random_within_bound(v, acc, tile):
    m, n, k = (512, 384, 1000) if v.slow else (1500, 1100, 2000)
    a, b = shared_inputs(m, n, k, "NN", seed=3, kind="randn")
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
        # cp.async or TMA; mma_stream rebuilds B's rows from aligned chunks (b_rows_any)
        assert ("B to 16-byte aligned rows" in copies) == (v.alignment in ("rows16", "tma") and not v.b_rows_any)


def test_staging_copy_moves_every_bit():
    """The staging copy of operands whose rows TMA cannot read (csrc/host/stage_copy.cu, through
    `ptx_kernels.call._stage`): sources at every 2-byte alignment of base and row pitch (each load width, 2 to 16
    bytes), rows of 1 to thousands of elements (a last chunk of 1 to 8; rows cut into segments and short rows packed
    in a block), one or two matrices a launch, fp16 and bf16: every bit lands, NaN payloads and signed zeros
    included, and nothing past a row's columns is written."""
    ext = ptx_kernels.load()
    g = torch.Generator().manual_seed(5)
    cases = [(1, 1, 0, 1), (3, 7, 1, 9), (5, 300, 3, 301), (17, 4093, 2, 4095), (2, 8, 4, 12), (64, 64, 0, 64),
             (129, 65, 6, 70), (1000, 13, 1, 13), (3, 5000, 5, 5002), (40, 2049, 7, 2056)]
    sentinel = 0x5a5a
    for i, (rows, cols, off, pitch) in enumerate(cases):
        dtype = torch.bfloat16 if i % 2 else torch.float16
        pairs = []
        for shift in (0, 1):
            bits = torch.randint(-32768, 32768, (off + shift + rows * pitch,), generator=g, dtype=torch.int32)
            bits = bits.to(torch.int16)
            bits[::7] = 0x7c01 if dtype == torch.float16 else 0x7f81  # NaNs with a payload
            bits[::11] = -32768  # -0.0
            src = bits.cuda()[off + shift:].view(dtype).view(rows, pitch)[:, :cols]
            ld = (cols + 63) // 64 * 64
            full = torch.full((rows, ld), sentinel, dtype=torch.int16, device="cuda")
            pairs.append((src, full))
        for batch in ([pairs[0]], pairs):  # one matrix, then two in one launch
            for _, full in batch:
                full.fill_(sentinel)
            ext.stage_copy([src for src, _ in batch], [full.view(dtype)[:, :cols] for _, full in batch])
            torch.cuda.synchronize()
            for src, full in batch:
                assert torch.equal(full[:, :cols], src.view(torch.int16)), (rows, cols, off, pitch)
                assert bool((full[:, cols:] == sentinel).all()), (rows, cols, off, pitch)


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
    """Expanded (broadcast) operands, a leading dimension of 0: A = one row repeated (or one column, A column-major),
    B = one column repeated (and row-repeated, the other major): exact like torch.matmul, whatever the kernel reads
    them with."""
    g = torch.Generator().manual_seed(14)
    row = torch.randint(-3, 4, (1, 136), generator=g).half().cuda()
    col = torch.randint(-3, 4, (136, 1), generator=g).half().cuda()
    full_a = torch.randint(-3, 4, (72, 136), generator=g).half().cuda()
    full_b = torch.randint(-3, 4, (136, 200), generator=g).half().cuda()
    cases = [(row.expand(72, 136), full_b), (full_a, col.expand(136, 200)),
             (full_a, torch.randint(-3, 4, (1, 200), generator=g).half().cuda().expand(136, 200)),
             (row.expand(72, 136), col.expand(136, 200)),
             (torch.randint(-3, 4, (72, 1), generator=g).half().cuda().expand(72, 136), full_b)]
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
               for split in v.splits]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("v,acc,split", SPLIT_CASES, ids=[f"{v.name}-{acc}-split{s}" for v, acc, s in SPLIT_CASES])
def test_split_k_exact_and_deterministic(v, acc, split, layout):
    """Every K split the launcher can take, forced: skinny and odd outputs, K shorter than the parts (cut to the
    k-blocks there are), K tails; and the same bits on a second run (the partial tiles are added in rank order)."""
    for i, (m, n, k) in enumerate([(16, 4096, 4096), (1, 1000, 777), (33, 500, 300), (17, 1000, 4099),
                                   (16, 4096, 8), (130, 250, 70), (7, 9, 13)]):
        a, b = shared_inputs(m, n, k, layout, seed=i)
        c = poisoned_out(m, n, "cuda")
        ptx_kernels.hgemm(a, b, kernel=v.name, acc=acc, out=c, split=split)
        torch.cuda.synchronize()
        launch = ptx_kernels.last_launch()
        ran = launch["split"]
        assert ran is None or 1 <= ran <= split, ran
        # a split over the grid reads row-major A only: a column-major A is copied for it, never read in place
        assert launch["a_col_major"] == (not is_row_major(a) and a_col_in_place(v, split)), launch
        assert_exact(c, a, b, f"{v.name} {acc} split={split} {layout} {m}x{n}x{k}")
    a, b = shared_inputs(16, 4096, 4096, layout, seed=9, kind="randn")
    c1 = ptx_kernels.hgemm(a, b, kernel=v.name, acc=acc, split=split)
    c2 = ptx_kernels.hgemm(a, b, kernel=v.name, acc=acc, split=split)
    assert torch.equal(c1, c2)
    if split > 1:  # 16 x 4096 fills the GPU only when split: the launcher ran the forced split
        assert ptx_kernels.last_launch()["split"] == split


@functools.lru_cache(maxsize=None)
def rule_splits_over_grid(m: int, n: int, k: int, layout: str) -> bool:
    """Whether wgmma_persistent's rule splits K over the grid on m x n x k (its mirror, compare.ptx_plans.rule_plans,
    compiled with nvcc): on whole boxes the model plans those calls (hopper::model_plans), and those whose M
    part-fills the last of a few 128-row bands."""
    from compare import ptx_plans

    with tempfile.TemporaryDirectory() as tmp:
        return bool(ptx_plans.rule_plans([(m, n, k, layout)], CSRC, Path(tmp), model=False)[0][3])


def rule_plans_call(a, b, acc) -> bool:
    """Whether the rule plans a @ b (row-major A): N and K whole boxes, where the rule does not split over the grid
    and M does not part-fill the last of a few 128-row bands with fp32 accumulation (hopper::model_plans)."""
    from compare import ptx_model

    m, k, n = a.shape[0], a.shape[1], b.shape[1]
    b_col = b.stride(0) == 1 and b.stride(1) != 1 and n > 1
    return (ptx_model.whole_boxes(n, k) and not (ptx_model.part_filled_bands(m) and acc == "fp32")
            and not rule_splits_over_grid(m, n, k, "NT" if b_col else "NN"))


def model_launch(a, b, acc):
    """What wgmma_persistent's planner by model (hopper::model_plan, for row-major A where N or K is not a multiple of
    64, or where the rule splits whole boxes over the grid or M part-fills a band with fp32 accumulation) launches
    for a @ b on this GPU, by its Python mirror (compare.ptx_model.pick, on the device's HBM bandwidth): (kernel, C's
    tile, last_launch()["plan"]: "model: " and the term that decided); None where the rule plans (rule_plans_call) or
    the mirror's GPU (132 SMs, 120 blocks in clusters of 4) is not this one."""
    import triton

    from compare import ptx_model

    if (torch.cuda.get_device_properties(a.device).multi_processor_count != ptx_model.SMS
            or rule_plans_call(a, b, acc)):
        return None
    props = triton.runtime.driver.active.utils.get_device_properties(a.device.index or 0)
    hbm = 2.0 * props["mem_clock_rate"] * 1e3 * (props["mem_bus_width"] // 8) / 1e6
    m, k, n = a.shape[0], a.shape[1], b.shape[1]
    b_col = b.stride(0) == 1 and b.stride(1) != 1 and n > 1
    rows = {"A": a.stride(0) * a.element_size(), "B": (b.stride(1) if b_col else b.stride(0)) * b.element_size()}
    staged = tuple(x for x, t in zip("AB", (a, b)) if rows[x] % 16 or t.data_ptr() % 16)
    rows = {x: -(-r // 128) * 128 if x in staged else r for x, r in rows.items()}
    call = ptx_model.Call(m, n, k, False, rows["A"], b_col, rows["B"], n % 8 == 0, staged, acc == "fp32")
    key, term = ptx_model.decision(call, hbm)
    kernel, tile, _ = ptx_model.launch_of(call, key)
    return kernel, tile, f"model: {term}"


def assert_model_plan(launch, a, b, acc, what):
    """An unpinned wgmma_persistent launch of row-major A: planned as the model's Python mirror plans, and reported
    as such, where N or K is not a multiple of 64, the rule would split whole boxes over the grid or M part-fills a
    band; reported as the rule's plan elsewhere."""
    expected = model_launch(a, b, acc)
    assert expected is None or (launch["kernel"], tuple(launch["tile"]), launch["plan"]) == expected, \
        (what, launch, expected)
    if rule_plans_call(a, b, acc):
        assert launch["plan"] == "rule", (what, launch)
    else:
        assert launch["plan"] in ptx_kernels.call.PLAN_SOURCES[3:], (what, launch)


@pytest.mark.gpu(sm=90)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype,acc", (("fp16", "fp32"), ("fp16", "fp16"), ("bf16", "fp32")))
def test_persistent_128x192_plan_exact(dtype, acc, layout):
    """wgmma_persistent's 128x192 tile, a candidate where the operands' rows are 128-byte aligned (3072x5120x2048:
    648 tiles against 480 of 128x256 on 132 SMs), is exact where pinned; planned by the rule (N and K whole boxes),
    the cut 128x240 tile fills whole rounds there with B column-major (528 tiles: 4 of 132) and takes it, and with B
    row-major the swapped 128x240 (C's tile 240x128: 13 rows of 240 along M x 40 along N, 520 tiles) scores above
    it; 3000x5000x2000 (4,000-byte rows), planned by the model (NN, NT: as its Python mirror plans), stays off
    128x192."""
    for i, (m, n, k) in enumerate([(3072, 5120, 2048), (3000, 5000, 2000)]):
        kk = k if acc == "fp32" else 192  # fp16 accumulation is exact while partial sums stay small
        a, b = make_inputs(m, n, kk, layout, device="cuda", seed=i, dtype=dtype)
        c = run(BY_NAME["wgmma_persistent"], acc, a, b, dtype=dtype)
        launch = ptx_kernels.last_launch()
        assert_exact(c, a, b, f"{dtype} {acc} {layout} {m}x{n}x{kk}")
        aligned = a.stride(0) % 64 == 0 and max(b.stride()) % 64 == 0
        if layout in ("NN", "NT"):
            assert_model_plan(launch, a, b, acc, f"{dtype} {acc} {layout} {m}x{n}x{kk}")
        if kk == 2048 and layout in ("NN", "NT") and aligned:
            assert launch["tile"] == ((240, 128) if layout == "NN" else (128, 240)), launch
            ext = ptx_kernels.load()
            c = poisoned_out(m, n, "cuda", dtype)
            info, _ = ext.hgemm_launch("wgmma_persistent", a, b, c, False, layout == "NT", acc == "fp16", 4, 0)
            torch.cuda.synchronize()
            assert (info[5], info[6]) == (128, 192), info
            assert ptx_kernels.call.PLAN_SOURCES[info[8]] == "pinned", info
            assert_exact(c, a, b, f"128x192 pinned {dtype} {acc} {layout} {m}x{n}x{kk}")
        if kk == 2000:
            assert launch["tile"] != (128, 192), launch


@pytest.mark.gpu(sm=90)
@pytest.mark.parametrize("dtype,acc", (("fp16", "fp32"), ("fp16", "fp16"), ("bf16", "fp32")))
def test_persistent_256x152_plan_exact(dtype, acc):
    """wgmma_persistent's 256x152 tile (two 64-row slabs per consumer warpgroup, C staged unswizzled in 32-row
    rounds), a candidate for B column-major, where its 396 tiles are 3 full rounds: 3000x5000 in place (4,000-byte
    rows) and 3001x4999x2003 (copied to 16-byte rows first), planned as the model's Python mirror plans, and pinned
    (GemmArgs::plan_tile 5). Exact on integer inputs with NaN-poisoned outputs; row-major B never takes it."""
    for i, (m, n, k) in enumerate([(3000, 5000, 2000), (3001, 4999, 2003)]):
        kk = k if acc == "fp32" else 192 + i  # fp16 accumulation is exact while partial sums stay small
        for layout in ("NT", "NN"):
            a, b = make_inputs(m, n, kk, layout, device="cuda", seed=i, dtype=dtype)
            c = run(BY_NAME["wgmma_persistent"], acc, a, b, dtype=dtype)
            launch = ptx_kernels.last_launch()
            assert_exact(c, a, b, f"{dtype} {acc} {layout} {m}x{n}x{kk}")
            if layout == "NT":
                assert_model_plan(launch, a, b, acc, f"{dtype} {acc} {layout} {m}x{n}x{kk}")
            if layout == "NT" and i == 0:  # 16-byte rows: the extension takes them as they are
                ext = ptx_kernels.load()
                c = poisoned_out(m, n, "cuda", dtype)
                info, _ = ext.hgemm_launch("wgmma_persistent", a, b, c, False, True, acc == "fp16", 5, 0)
                torch.cuda.synchronize()
                assert (info[5], info[6]) == (256, 152), info
                assert_exact(c, a, b, f"256x152 pinned {dtype} {acc} {layout} {m}x{n}x{kk}")
            if layout == "NN":
                assert launch["tile"] != (256, 152), launch


@pytest.mark.gpu(sm=90)
@pytest.mark.parametrize("dtype,acc", (("fp16", "fp32"), ("fp16", "fp16"), ("bf16", "fp32")))
def test_b_rows_off_the_sectors_go_to_the_cluster_kernel(dtype, acc):
    """A B whose rows in storage order lie off the 32-byte sectors (column-major B with K = 8 mod 16, row-major B
    with N = 8 mod 16): with row-major A (NN, NT) wgmma_persistent plans by its model, wgmma_cluster (which
    multicasts each B box to two blocks) among the candidates, as the model's Python mirror plans; with
    column-major A (TT) by the rule, which hands it to wgmma_cluster where 128 x 256 tiles cover the output in at
    least one round of the SMs, never runs its own 128 x 256 or 256 x 152 tile on such a B, and keeps one band of
    128-row tiles (M <= 128: the cluster pairs tile rows, hands_to_cluster) and B on the sectors off the cluster.
    Exact on integer inputs (K short enough for fp16 accumulation)."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    cases = [(4096, 4096, 200, "NT", True), (4096, 4096, 192, "NT", False), (2048, 8192, 200, "NT", True),
             (2048, 8192, 192, "NT", False), (2048, 8192, 200, "TT", True), (4096, 4088, 192, "NN", True),
             (4096, 4096, 192, "NN", False), (6000, 3000, 200, "NT", True), (3000, 5000, 200, "TT", True),
             (1144, 8296, 200, "NT", True), (1144, 8296, 192, "NT", False), (8576, 1360, 200, "NT", True),
             (512, 1024, 200, "NT", True), (64, 34000, 200, "NT", True), (96, 34008, 192, "NN", True)]
    for i, (m, n, k, layout, off) in enumerate(cases):
        a, b = make_inputs(m, n, k, layout, device="cuda", seed=i, dtype=dtype)
        c = run(BY_NAME["wgmma_persistent"], acc, a, b, dtype=dtype)
        launch = ptx_kernels.last_launch()
        what = f"{dtype} {acc} {layout} {m}x{n}x{k}"
        assert_exact(c, a, b, what)
        assert (max(b.stride()) * b.element_size() % 32 != 0) == off, (what, b.stride())
        if layout[0] == "N":
            assert_model_plan(launch, a, b, acc, what)
            assert off or launch["kernel"] != "wgmma_cluster", (what, launch)
        elif off and m <= 128:
            assert launch["kernel"] != "wgmma_cluster", (what, launch)
        elif off and -(-m // 128) * -(-n // 256) >= sms:
            assert launch["kernel"] == "wgmma_cluster", (what, launch)
        elif off:
            assert not (launch["kernel"] == "wgmma_persistent" and launch["tile"] in ((128, 256), (256, 152))), \
                (what, launch)
        else:
            assert launch["kernel"] != "wgmma_cluster", (what, launch)


# the TMA kernels that read column-major A in place (simt_naive reads any strides: it has no layout to report)
A_COL = [v for v in ptx_kernels.variants() if a_col_in_place(v) and not any_strides(v)]
DTYPE_ACCS = (("fp16", "fp32"), ("fp16", "fp16"), ("bf16", "fp32"))


def a_col_case(m, n, k, layout, dtype, seed):
    """Integer A (column-major) and B (row- or column-major by layout) stored as in_place_operand stores them."""
    a, b = make_inputs(m, n, k, layout, device="cuda", seed=seed, dtype=dtype)
    return in_place_operand(a, True), in_place_operand(b, layout[1] == "T")


@pytest.mark.parametrize("layout", ("TN", "TT"))
@pytest.mark.parametrize("dtype,acc", DTYPE_ACCS)
@pytest.mark.parametrize("v", A_COL, ids=lambda v: v.name)
def test_column_major_a_in_place_exact(v, dtype, acc, layout):
    """The variants whose record lists TN and TT (wgmma_persistent and the kernels it hands problems to) read
    column-major A in place: no copy (last_launch()["copies"] empty, a_col_major set), exact on integer inputs
    against the float64 product, every element of a NaN-poisoned out written, on odd shapes (odd M, N, K, K tails,
    one row, one column) whose padded leading dimensions keep them TMA-describable; bf16 within its exact range."""
    shapes = [(1, 1000, 777), (7, 8, 15), (17, 16, 8), (15, 17, 311), (129, 255, 520), (255, 257, 63),
              (496, 233, 65), (107, 233, 4099), (33, 500, 300), (200, 150, 333), (16, 4096, 1024)]
    if layout == "TN":  # one column of B is row-major by its strides (TT's would be copied to 16-byte rows)
        shapes.append((300, 1, 70))
    for i, (m, n, k) in enumerate(shapes):
        a, b = a_col_case(m, n, k, layout, dtype, seed=i)
        c = ptx_kernels.hgemm(a, b, variant=v.name, acc=acc, out=poisoned_out(m, n, "cuda", dtype))
        torch.cuda.synchronize()
        launch = ptx_kernels.last_launch()
        what = f"{v.name} {dtype} {acc} {layout} {m}x{n}x{k}"
        assert launch["a_col_major"] and not a_copies(launch), (what, launch)
        assert launch["b_col_major"] == (layout == "TT" and n > 1), (what, launch)
        ref = a.double() @ b.double()
        assert dtype == "fp16" or float(ref.abs().max()) <= 256, what  # bf16's exact integers
        verdict = compare(c, ref)
        assert verdict.ok, f"{what}: {verdict.detail}"


@pytest.mark.parametrize("dtype,acc", DTYPE_ACCS)
def test_column_major_a_every_persistent_plan(dtype, acc):
    """Column-major A on each kernel and tile wgmma_persistent plans, read in place and exact: 128x192 (3072 x 5120,
    128-byte rows), 256x152 (3000 x 5000, B column-major), wgmma_cluster (3000 x 5000, B row-major on 10,000-byte
    rows), wgmma_splitk (32 x 4096 x 4096 and 4096 x 16 x 4096), mma_stream (16 x 4097 x 4096: B off the grid),
    128x256 (4096 x 4096 x 512, the weight gradient's layout TN); plus NaN in A[i, k] making row i of C NaN, and the
    same bits on a second run."""
    if not torch.cuda.get_device_capability() >= (9, 0):
        pytest.skip("wgmma_persistent needs sm_90")
    v = BY_NAME["wgmma_persistent"]
    # (M, N, K, K with fp16 accumulation: exact while partial sums stay small, so the large outputs take a short K;
    # the plans do not depend on it), layout, what the launch must show
    cases = [((3072, 5120, 2048, 192), "TN", lambda l: l["tile"] == (128, 192)),
             ((3000, 5000, 2000, 193), "TT", lambda l: l["tile"] == (256, 152)),
             ((3000, 5000, 2000, 194), "TN", lambda l: l["kernel"] == "wgmma_cluster"),
             ((32, 4096, 4096, 4096), "TN", lambda l: l["kernel"] == "wgmma_splitk" and l["split"] > 1),
             ((16, 4097, 4096, 4096), "TN", lambda l: l["kernel"] == "mma_stream"),
             ((4096, 16, 4096, 4096), "TT", lambda l: l["kernel"] == "wgmma_splitk" and l["split"] > 1),
             ((4096, 4096, 512, 512), "TN", lambda l: l["tile"] == (128, 256) and l["kernel"] == "wgmma_persistent")]
    for i, ((m, n, k, k16), layout, planned) in enumerate(cases):
        kk = k if acc == "fp32" else k16
        a, b = make_inputs(m, n, kk, layout, device="cuda", seed=i, dtype=dtype)
        c = run(v, acc, a, b, dtype=dtype)
        launch = ptx_kernels.last_launch()
        what = f"{dtype} {acc} {layout} {m}x{n}x{kk}"
        assert launch["a_col_major"] and not a_copies(launch), (what, launch)
        assert planned(launch), (what, launch)
        verdict = compare(c, a.double() @ b.double())
        assert verdict.ok, f"{what}: {verdict.detail}"
    a, b = make_inputs(200, 150, 333, "TN", device="cuda", seed=5, kind="randn", dtype=dtype)
    a = in_place_operand(a, True)
    a[17, 3] = float("nan")
    c1 = ptx_kernels.hgemm(a, b, variant=v.name, acc=acc)
    assert ptx_kernels.last_launch()["a_col_major"]
    c2 = ptx_kernels.hgemm(a, b, variant=v.name, acc=acc)
    assert torch.equal(c1.nan_to_num(), c2.nan_to_num()) and torch.equal(c1.isnan(), c2.isnan())
    rows_nan = c1.isnan().any(dim=1)
    assert rows_nan[17] and c1[17].isnan().all() and int(rows_nan.sum()) == 1


# The tiles GemmArgs::plan_tile pins (sm90/handoff.h): 1-3 128 x 256/128/64, 4 128 x 192, 5 and 6 256 x 152 in 4 and 3
# stages (B column-major only).
PLAN_TILES = {1: (128, 256), 2: (128, 128), 3: (128, 64), 4: (128, 192), 5: (256, 152), 6: (256, 152)}


@pytest.mark.gpu(sm=90)
@pytest.mark.parametrize("dtype,acc", DTYPE_ACCS)
def test_every_instance_of_the_files_built_in_parts(dtype, acc):
    """The kernel files the extension build compiles in parts (csrc/host/parts.h): wgmma_persistent on each tile
    (GemmArgs::plan_tile 1-6, unsplit), wgmma_splitk on each of its tiles (split 2) and wgmma_cluster, with A and B
    each row- and column-major in place and C 16-byte aligned (TMA stores) or one element off (register stores):
    every instance those files compile runs, whichever part holds it, exact into a NaN-poisoned C, with the tile
    and kernel it was pinned to."""
    needs_hopper()
    ext = ptx_kernels.load()
    m, n, k = 520, 264, 136 if acc == "fp32" else 72  # fp16 accumulation: exact while partial sums stay small
    runs = []  # (variant, tile, split, epilogue offsets)
    runs += [("wgmma_persistent", t, 1, (0, 1)) for t in PLAN_TILES]
    runs += [("wgmma_splitk", t, 2, (0,)) for t in (1, 2, 3)]
    runs += [("wgmma_cluster", 0, 0, (0, 1))]
    for i, layout in enumerate(LAYOUTS):
        a_col, b_col = layout[0] == "T", layout[1] == "T"
        a, b = make_inputs(m, n, k, layout, device="cuda", seed=i, dtype=dtype)
        a, b = in_place_operand(a, a_col), in_place_operand(b, b_col)
        for variant, tile, split, offsets in runs:
            if tile >= 5 and not b_col:
                continue  # 256 x 152 stages B whole 64-column boxes only column-major
            for off in offsets:
                buf = poisoned_out(m, n + 8, "cuda", dtype)
                c = buf[:, off:off + n]  # off 1: C's rows 2 bytes past 16-byte alignment, no TMA store
                info, ran = ext.hgemm_launch(variant, a, b, c, a_col, b_col, acc == "fp16", tile, split)
                torch.cuda.synchronize()
                what = f"{variant} tile={tile} split={split} {dtype} {acc} {layout} C offset {off}"
                assert (ran or variant) == variant, (what, ran)
                if tile:  # the launch's tile, and its split where it splits K (an unsplit launch reports 0)
                    assert (info[5], info[6], info[7]) == (*PLAN_TILES[tile], split if split > 1 else 0), (what, info)
                assert_exact(c, a, b, what)


def in_place_pair(m: int, n: int, k: int, layout: str, seed: int, dtype: str):
    """make_inputs' A and B (layout NN or NT) in storage the Hopper kernels read in place (`in_place_operand`: A
    row-major, B in the layout's order, NaN padding), and whether B is column-major."""
    b_col = layout == "NT"
    a, b = make_inputs(m, n, k, layout, device="cuda", seed=seed, dtype=dtype)
    return in_place_operand(a, False), in_place_operand(b, b_col), b_col


@pytest.mark.gpu(sm=90)
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_cut_tiles_run_exact_in_their_form_and_refuse_the_others(dtype):
    """wgmma_persistent's cut tiles (GemmArgs::plan_tile 7-16, compare.sweep.CUT_TILES) pinned, on an output with
    partial tiles in M and N and a K tail: exact into a NaN-poisoned C with B column-major (every width) and
    row-major (the widths of whole 64-column boxes), each reporting its tile. Every other form (fp16 accumulation,
    column-major A, C rows off 16 bytes, row-major B at a width of partial boxes) is refused with an error, never
    run wrong. Unpinned, the launcher plans 8288 x 848 by its model (as the model's Python mirror plans, on 132 SMs),
    exact, and never with a cut tile of partial boxes on row-major B."""
    from compare.sweep import CUT_TILES

    needs_hopper()
    ext = ptx_kernels.load()
    m, n, k = 600, 520, 200
    for layout in ("NT", "NN"):
        a, b, b_col = in_place_pair(m, n, k, layout, 21, dtype)
        for code, (bm, bn) in CUT_TILES.items():
            what = f"cut tile {code} ({bm}x{bn}) {dtype} {layout}"
            c = poisoned_out(m, n, "cuda", dtype)
            if not b_col and bn % 64:
                with pytest.raises(RuntimeError):
                    ext.hgemm_launch("wgmma_persistent", a, b, c, False, b_col, False, code, 0)
                continue
            info, ran = ext.hgemm_launch("wgmma_persistent", a, b, c, False, b_col, False, code, 0)
            torch.cuda.synchronize()
            assert (ran or "wgmma_persistent") == "wgmma_persistent" and (info[5], info[6]) == (bm, bn), (what, info)
            assert_exact(c, a, b, what)
        runnable = next(code for code, (bm, bn) in CUT_TILES.items() if b_col or bn % 64 == 0)  # in this B layout
        buf = poisoned_out(m, n + 8, "cuda", dtype)
        for acc_fp16, c in ((True, poisoned_out(m, n, "cuda", dtype)), (False, buf[:, 1:1 + n])):
            if acc_fp16 and dtype == "bf16":
                continue
            with pytest.raises(RuntimeError):  # fp16 accumulation; C's rows 2 bytes past 16-byte alignment
                ext.hgemm_launch("wgmma_persistent", a, b, c, False, b_col, acc_fp16, runnable, 0)
        a_col = in_place_operand(a, True)
        with pytest.raises(RuntimeError):  # column-major A
            ext.hgemm_launch("wgmma_persistent", a_col, b, poisoned_out(m, n, "cuda", dtype), True, b_col, False,
                             runnable, 0)
    partial_boxes = {t for t in CUT_TILES.values() if t[1] % 64}
    for layout in ("NT", "NN"):  # planned by the model (N = 848 is not whole 64-column boxes)
        a, b = make_inputs(8288, 848, 256, layout, device="cuda", seed=22, dtype=dtype)
        c = ptx_kernels.hgemm(a, b, variant="wgmma_persistent")
        torch.cuda.synchronize()
        assert_exact(c, a, b, f"8288x848x256 {layout}")
        launch = ptx_kernels.last_launch()
        assert_model_plan(launch, a, b, "fp32", f"8288x848x256 {layout}")
        assert layout == "NT" or tuple(launch["tile"]) not in partial_boxes, (layout, launch)


@pytest.mark.gpu(sm=90)
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_cut_and_swapped_tiles_split_k_over_the_grid(dtype):
    """wgmma_persistent's cut, swapped and paired tiles pinned with a K split (GemmArgs::split S > 1: work units of a
    tile (a pair of tiles) and a K slice in the persistent kernel, fp32 partial tiles in a workspace, added in a
    fixed order by a second launch): exact into a NaN-poisoned C, with the workspace's block NaN-filled before each
    launch (the caching allocator hands it back), on outputs of partial tiles in M and N whose 16 k-blocks (the last
    partial) do not divide into the parts, in both B layouts, at N = 520 and at N = 517 (C's rows 520 apart: the
    workspace's rows padded to 520), reporting the tile and the split; on random operands, within the error bound and
    bitwise the same on a second run; a split past the k-blocks there are cut to them."""
    from compare.sweep import CUT_TILES, PAIR_TILES, SWAP_TILES

    needs_hopper()
    ext = ptx_kernels.load()

    def launch(a, b, b_col, code, split, n, c_cols=None):
        """C (NaN-poisoned, rows c_cols apart) from one pinned launch, after a NaN block of the workspace's size
        (split slices of C's rows x its columns rounded up to 4, fp32) has been freed to the allocator."""
        m = a.shape[0]
        torch.full((split * m * (-(-n // 4) * 4),), float("nan"), dtype=torch.float32, device="cuda")
        c = poisoned_out(m, c_cols or n, "cuda", dtype)[:, :n]
        info, ran = ext.hgemm_launch("wgmma_persistent", a, b, c, False, b_col, False, code, split)
        torch.cuda.synchronize()
        assert (ran or "wgmma_persistent") == "wgmma_persistent", ran
        return c, info

    m, k = 600, 1000
    for layout in ("NT", "NN"):
        for n, c_cols in ((520, None), (517, 520)):
            a, b, b_col = in_place_pair(m, n, k, layout, 25, dtype)
            for code, tile in {**CUT_TILES, **SWAP_TILES, **PAIR_TILES}.items():
                if code in CUT_TILES and not b_col and tile[1] % 64:
                    continue  # row-major B takes the cut widths of whole 64-column boxes only
                for split in (2, 3, 5):
                    what = f"tile {code} ({tile[0]}x{tile[1]}) split {split} {dtype} {layout} n={n}"
                    c, info = launch(a, b, b_col, code, split, n, c_cols)
                    assert (info[5], info[6], info[7]) == (*tile, split), (what, info)
                    assert_exact(c, a, b, what)
    a, b = make_inputs(m, 520, k, "NT", device="cuda", seed=27, dtype=dtype, kind="randn")
    ref = reference(a, b)
    a, b = in_place_operand(a, False), in_place_operand(b, True)
    for code in (min(CUT_TILES), max(CUT_TILES), min(SWAP_TILES), max(SWAP_TILES), min(PAIR_TILES),
                 max(PAIR_TILES)):
        first, _ = launch(a, b, True, code, 3, 520)
        again, _ = launch(a, b, True, code, 3, 520)
        verdict = compare(first, ref, error_bound(a, b, ref, "fp32"))
        assert verdict.ok, (code, verdict.detail)
        assert torch.equal(first.view(torch.int16), again.view(torch.int16)), code
    a, b = make_inputs(300, 200, 100, "NT", device="cuda", seed=26, dtype=dtype)  # 2 k-blocks
    a, b = in_place_operand(a, False), in_place_operand(b, True)
    for code in (min(CUT_TILES), min(SWAP_TILES), min(PAIR_TILES)):
        c, info = launch(a, b, True, code, 7, 200)
        assert info[7] == 2, (code, info)
        assert_exact(c, a, b, f"tile {code} split 7 on 2 k-blocks")


@pytest.mark.gpu(sm=90)
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_swapped_cut_tiles_run_exact_and_refuse_the_others(dtype):
    """wgmma_persistent's swapped cut tiles (GemmArgs::plan_tile 17-26, compare.sweep.SWAP_TILES: the cut tiles on
    C^T = B^T A^T, each slab stored into C transposed) pinned, on an output with partial tiles in M and N and a K
    tail: exact into a NaN-poisoned C with B column-major (A' = B^T row-major) and row-major (A' read M-major), each
    reporting C's tile (the cut tile's columns as its rows). Refused with an error, never run wrong: 256 x 128 (not
    swapped), fp16 accumulation, column-major A (B' would be row-major), C rows off 16 bytes. Unpinned on
    132 SMs, the launcher swaps 128 x 176 on 4504 x 608 (130 tiles in one round, where 128 x 256 tiles make 108 over
    768 columns) in both B layouts."""
    from compare.sweep import SWAP_FIRST_CODE, SWAP_TILES

    needs_hopper()
    ext = ptx_kernels.load()
    m, n, k = 600, 520, 200
    for layout in ("NT", "NN"):
        a, b, b_col = in_place_pair(m, n, k, layout, 23, dtype)
        for code, tile in SWAP_TILES.items():
            what = f"swapped tile {code} (C tile {tile[0]}x{tile[1]}) {dtype} {layout}"
            c = poisoned_out(m, n, "cuda", dtype)
            info, ran = ext.hgemm_launch("wgmma_persistent", a, b, c, False, b_col, False, code, 0)
            torch.cuda.synchronize()
            assert (ran or "wgmma_persistent") == "wgmma_persistent" and (info[5], info[6]) == tile, (what, info)
            assert_exact(c, a, b, what)
        code = next(iter(SWAP_TILES))
        refused = [(a, False, poisoned_out(m, n, "cuda", dtype), SWAP_FIRST_CODE + 6, 0),  # 256 x 128
                   (in_place_operand(a, True), True, poisoned_out(m, n, "cuda", dtype), code, 0),  # column-major A
                   (a, False, poisoned_out(m, n + 8, "cuda", dtype)[:, 1:1 + n], code, 0)]  # C off 16 bytes
        for a_in, a_col, c, tile_code, split in refused:
            with pytest.raises(RuntimeError):
                ext.hgemm_launch("wgmma_persistent", a_in, b, c, a_col, b_col, False, tile_code, split)
        if dtype == "fp16":
            with pytest.raises(RuntimeError):  # fp16 accumulation
                ext.hgemm_launch("wgmma_persistent", a, b, poisoned_out(m, n, "cuda", dtype), False, b_col, True,
                                 code, 0)
    if torch.cuda.get_device_properties(0).multi_processor_count == 132:
        for layout in ("NT", "NN"):
            a, b = make_inputs(4504, 608, 256, layout, device="cuda", seed=24, dtype=dtype)
            c = ptx_kernels.hgemm(a, b, variant="wgmma_persistent")
            torch.cuda.synchronize()
            assert_exact(c, a, b, f"4504x608x256 {layout}")
            assert ptx_kernels.last_launch()["tile"] == (176, 128), layout


@pytest.mark.gpu(sm=90)
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_paired_swapped_tiles_run_exact_as_the_unpaired_ones(dtype):
    """The 128-row swapped cut tiles paired in clusters of two blocks (GemmArgs::plan_tile 27-32, compare.sweep.
    PAIR_TILES: the two tiles of a cluster lie side by side along N, and each block loads half of their shared A^T
    box, multicast to both) pinned: exact into a NaN-poisoned C with B column-major and row-major, on outputs with
    an odd count of tiles along N (the last cluster's second block loads zeros and computes nothing) and an even
    one, partial tiles and a K tail, reporting C's tile; on random operands bitwise what the same tile unpaired
    computes, on every run. Refused with an error, never run wrong: column-major A (their K split over the grid:
    test_cut_and_swapped_tiles_split_k_over_the_grid)."""
    from compare.sweep import PAIR_FIRST_CODE, PAIR_TILES, SWAP_FIRST_CODE

    needs_hopper()
    ext = ptx_kernels.load()

    def launch(a, b, b_col, code, split=0, a_col=False):
        c = poisoned_out(a.shape[0], b.shape[1], "cuda", dtype)
        info, ran = ext.hgemm_launch("wgmma_persistent", a, b, c, a_col, b_col, False, code, split)
        torch.cuda.synchronize()
        assert (ran or "wgmma_persistent") == "wgmma_persistent", ran
        return c, info

    for m, n, k in ((600, 520, 200), (300, 1160, 1000)):  # 5 and 10 tiles of 128 along N
        for layout in ("NT", "NN"):
            a, b, b_col = in_place_pair(m, n, k, layout, 31, dtype)
            for code, tile in PAIR_TILES.items():
                what = f"paired tile {code} (C tile {tile[0]}x{tile[1]}) {dtype} {layout} {m}x{n}x{k}"
                c, info = launch(a, b, b_col, code)
                assert (info[5], info[6]) == tile, (what, info)
                assert_exact(c, a, b, what)
    for layout in ("NT", "NN"):
        a, b = make_inputs(300, 1160, 1000, layout, device="cuda", seed=32, dtype=dtype, kind="randn")
        a, b, b_col = in_place_operand(a, False), in_place_operand(b, layout == "NT"), layout == "NT"
        for code in PAIR_TILES:
            single, _ = launch(a, b, b_col, code - PAIR_FIRST_CODE + SWAP_FIRST_CODE)
            for _ in range(2):
                paired, _ = launch(a, b, b_col, code)
                assert torch.equal(paired.view(torch.int16), single.view(torch.int16)), (code, layout)
        code = next(iter(PAIR_TILES))
        with pytest.raises(RuntimeError):  # column-major A
            launch(in_place_operand(a, True), b, b_col, code, a_col=True)


@pytest.mark.parametrize("v", ptx_kernels.variants(), ids=lambda v: v.name)
def test_column_major_a_copies_where_not_in_place(v):
    """Column-major A: read in place by the records that list TN (a_col_major in last_launch, no copy); copied to
    row-major by the others ("A to row-major"), except the kernel that reads any strides; a column-major A whose
    columns are not 16-byte aligned gets one aligned copy, still column-major, on the in-place TMA kernels (none on
    mma_stream, which reads A at any alignment: a_rows_any)."""
    a, b = make_inputs(64, 72, 40, "TN", device="cuda", seed=15)
    c = ptx_kernels.hgemm(a, b, variant=v.name)
    torch.cuda.synchronize()
    assert compare(c, reference(a, b)).ok
    launch = ptx_kernels.last_launch()
    if any_strides(v):  # reads A's strides as they are: nothing copied, no layout to report
        assert launch["copies"] == [] and not launch["a_col_major"], launch
    elif a_col_in_place(v):
        assert launch["copies"] == [] and launch["a_col_major"], launch
    else:
        assert launch["copies"] == ["A to row-major"] and not launch["a_col_major"], launch
    odd, _ = make_inputs(61, 72, 40, "TN", device="cuda", seed=16)  # columns 122 bytes apart
    c = ptx_kernels.hgemm(odd, b, variant=v.name)
    torch.cuda.synchronize()
    assert compare(c, reference(odd, b)).ok
    if a_col_in_place(v) and not any_strides(v):
        launch = ptx_kernels.last_launch()
        aligned = [] if v.a_rows_any else ["A to 16-byte aligned rows"]
        assert launch["copies"] == aligned and launch["a_col_major"], launch


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
@pytest.mark.parametrize("variant", ("mma_tiled", "wgmma_persistent"))
def test_inputs_that_require_grad_record_autograd(variant):
    """hgemm on inputs that require grad goes through the operator: the result has a grad_fn, and the gradients
    (dA = dC B^T, dB = A^T dC on the same variant) are exact on small integers. Backward runs on torch's autograd
    thread, where a Hopper kernel's tensor maps are the first thing to need the CUDA context; wgmma_persistent reads
    dB's column-major A^T in place (the weight gradient's layout, TN)."""
    v = BY_NAME[variant]
    if not v.offered_on(torch.cuda.get_device_capability()[0] * 10 + torch.cuda.get_device_capability()[1]):
        pytest.skip(f"{variant} needs sm_{v.min_arch}")
    a, b = make_inputs(64, 48, 40, "NN", device="cuda", seed=5)
    a.requires_grad_()
    b.requires_grad_()
    c = ptx_kernels.hgemm(a, b, kernel=variant)
    assert c.grad_fn is not None
    g = torch.randint(-2, 3, c.shape, device="cuda").half()
    c.backward(g)
    assert torch.equal(a.grad, (g.double() @ b.detach().double().t()).half())
    assert torch.equal(b.grad, (a.detach().double().t() @ g.double()).half())
    launch = ptx_kernels.last_launch()  # dB's
    assert launch["a_col_major"] == a_col_in_place(v) and launch["copies"] == ([] if a_col_in_place(v) else
                                                                               ["A to row-major"]), launch
    with pytest.raises(RuntimeError, match="not recorded by autograd"):
        ptx_kernels.hgemm(a, b, kernel=variant, out=torch.empty_like(c.detach()))


# ---- split-K over the grid (sm90/wgmma_splitk_grid.cu) ------------------------------------------------------
DTYPE_ACCS = (("fp16", "fp32"), ("fp16", "fp16"), ("bf16", "fp32"))


def needs_hopper():
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("the wgmma kernels need sm_90")


def launch_pinned(variant, a, b, acc, tile, split, out=None):
    """One launch with GemmArgs::plan_tile and ::split codes that hgemm's tile= does not name (the Hopper launchers'
    tiles 1-6, sm90/handoff.h), on operands prepared as hgemm prepares them: A row-major and B row- or column-major,
    on 16-byte rows (copied where not). Returns C (NaN-poisoned before the launch) and the launch's report."""
    from hgemm_common.operands import is_row_major, rows_aligned16

    if not is_row_major(a):
        a = a.contiguous()
    if not rows_aligned16(a, a.stride(0)):
        a = ptx_kernels.call._aligned_copy(a)
    copies, staged = [], []
    b, b_col = ptx_kernels.call._b_layout(b, copies)
    b = ptx_kernels.call._aligned(b, b_col, "B", copies, staged)
    ptx_kernels.call._stage(ptx_kernels.load(), staged)
    c = poisoned_out(a.shape[0], b.shape[1], "cuda", "bf16" if a.dtype == torch.bfloat16 else "fp16") \
        if out is None else out
    report = ptx_kernels.load().hgemm_launch(variant, a, b, c, False, b_col, acc == "fp16", tile, split)
    torch.cuda.synchronize()
    info, ran = report
    return c, dict(grid=info[0], tile=(info[5], info[6]), split=info[7], kernel=ran or variant)


GRID_SHAPES = [(1, 1, 1), (7, 9, 13), (1, 1000, 777), (33, 500, 300), (130, 250, 5000), (257, 129, 4099),
               (128, 128, 8192), (17, 300, 65)]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype,acc", DTYPE_ACCS)
def test_grid_split_exact_on_every_tile_and_split(dtype, acc, layout):
    """wgmma_splitk_grid pinned to each of its tiles (128x256/128/64) and to 1, 3 and 37 slices of K (cut to the
    k-blocks there are): exact on odd shapes, K tails and outputs narrower than a tile, every element written."""
    needs_hopper()
    for i, (m, n, k) in enumerate(GRID_SHAPES):
        a, b = shared_inputs(m, n, k, layout, seed=i, dtype=dtype)
        ref = reference(a, b)
        for tile in (1, 2, 3):
            for split in (1, 3, 37):
                c, info = launch_pinned("wgmma_splitk_grid", a, b, acc, tile, split)
                assert info["kernel"] == "wgmma_splitk_grid" and info["tile"][1] == (256, 128, 64)[tile - 1]
                assert 1 <= info["split"] <= min(split, -(-k // 64)), info
                verdict = compare(c, ref)
                assert verdict.ok, f"{dtype} {acc} {layout} {m}x{n}x{k} tile {tile} split {split}: {verdict.detail}"


@pytest.mark.parametrize("dtype,acc", DTYPE_ACCS)
def test_grid_split_is_deterministic(dtype, acc):
    """The slices are added in a fixed order: random inputs give the same bits on every call, through
    wgmma_splitk_grid and through wgmma_persistent forced to the same split (the same kernels), within the error
    bound; and integer inputs give the exact product for every split count."""
    needs_hopper()
    a, b = shared_inputs(200, 300, 20000, "NT", seed=21, kind="randn", dtype=dtype)
    ref = reference(a, b)
    bound = error_bound(a, b, ref, acc)
    for split in (5, 64, 132):
        first = ptx_kernels.hgemm(a, b, variant="wgmma_splitk_grid", acc=acc, split=split)
        assert ptx_kernels.last_launch()["split"] == split
        for _ in range(3):
            assert torch.equal(ptx_kernels.hgemm(a, b, variant="wgmma_splitk_grid", acc=acc, split=split), first)
        again = ptx_kernels.hgemm(a, b, variant="wgmma_persistent", acc=acc, split=split)
        assert ptx_kernels.last_launch()["kernel"] == "wgmma_splitk_grid"
        assert torch.equal(again, first), split
        verdict = compare(first, ref, bound)
        assert verdict.ok, f"split {split}: {verdict.detail}"
    ia, ib = shared_inputs(200, 300, 20000, "NN", seed=22, dtype=dtype)
    iref = reference(ia, ib)
    for split in (2, 7, 64, 256):
        c = ptx_kernels.hgemm(ia, ib, variant="wgmma_splitk_grid", acc=acc, split=split)
        assert compare(c, iref).ok, split


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype,acc", DTYPE_ACCS)
def test_persistent_hands_small_outputs_with_long_k_to_the_grid_split(dtype, acc, layout):
    """wgmma_persistent's own plan: outputs whose best unsplit or cluster plan leaves most SMs idle, with a long K,
    go to wgmma_splitk_grid (hopper::choose_grid_split) where A is row-major; exact there, every element written.
    A column-major A (TN, TT) stays on the kernels that read it in place (wgmma_splitk_grid reads row-major A only):
    exact too, nothing copied."""
    needs_hopper()
    for i, (m, n, k) in enumerate([(128, 128, 32768), (256, 256, 16384), (200, 130, 20001), (96, 520, 9000)]):
        a, b = shared_inputs(m, n, k, layout, seed=30 + i, dtype=dtype)
        c = poisoned_out(m, n, "cuda", dtype)
        ptx_kernels.hgemm(a, b, variant="wgmma_persistent", acc=acc, out=c)
        torch.cuda.synchronize()
        launch = ptx_kernels.last_launch()
        if layout[0] == "N":
            assert launch["kernel"] == "wgmma_splitk_grid" and launch["split"] >= 8, launch
        else:
            assert launch["kernel"] != "wgmma_splitk_grid" and launch["a_col_major"] and not a_copies(launch), launch
        verdict = compare(c, reference(a, b))
        assert verdict.ok, f"{dtype} {acc} {layout} {m}x{n}x{k}: {verdict.detail}"


def test_grid_split_on_side_streams_and_in_cuda_graphs():
    """The workspace comes from the caching allocator on the current stream and the reduction is a programmatic
    dependent launch: correct on a side stream, and inside a captured CUDA graph replayed on new data."""
    needs_hopper()
    ins = [make_inputs(128, 256, 16384, "NT", device="cuda", seed=40 + s) for s in range(3)]

    def ran_the_grid_split():
        assert ptx_kernels.last_launch()["kernel"] == "wgmma_splitk_grid"

    on_side_stream_and_in_graph(lambda a, b: ptx_kernels.hgemm(a, b, variant="wgmma_persistent"), ins,
                                [reference(a, b) for a, b in ins], ran_the_grid_split)



# ---- stream-K (sm90/wgmma_streamk.cu) ---------------------------------------------------------------------------
# (M, N, K, sms): the schedule 128 x 256 tiles get on `sms` SMs (hgemm(sms=...): triton_kernels.streamk.schedule, the
# kernel's rule; tests/test_hopper_cpu.py checks that the two agree). 300 x 520 is 3 x 3 tiles, the last tile row 44
# rows and the last column 8 columns: edge tiles are cut too.
STREAMK_SHAPES = [
    (300, 520, 700, 20),  # 9 tiles on 18 programs, every tile cut in 2 slices of 11 k-blocks (5, 6)
    (300, 520, 800, 27),  # 3 slices of 13 (4, 4, 5)
    (300, 520, 1100, 40),  # 4 of 18, K tail of 12
    (300, 520, 1471, 45),  # 5 of 23, K odd
    (300, 520, 1600, 54),  # 6 of 25
    (300, 520, 1900, 63),  # 7 of 30
    (300, 520, 2100, 80),  # 8 of 33 (the most slices)
    (300, 520, 2000, 4),  # 2 whole rounds of 4 programs, then 1 tile cut in 4
    (1000, 1030, 1000, 12),  # 40 tiles: 3 whole rounds of 12 (edge tiles among them), then 4 tiles cut in 3 (5, 5, 6)
    (7, 1000, 3000, 12),  # one 7-row tile row: 4 tiles cut in 3 of 47
    (300, 520, 2000, 3),  # whole rounds only: nothing cut (wgmma_persistent's schedule)
    (300, 520, 2000, 5),  # a partial round of 4 on 5 programs, more than half full: nothing cut
    (300, 520, 100, 40),  # 2 k-blocks: too short to cut
]


def streamk_schedule(m, n, k, sms):
    """(programs, cut tiles, slices) of wgmma_streamk on an M x N x K problem seeing `sms` SMs (None: the device's)."""
    from triton_kernels import streamk

    sms = sms or torch.cuda.get_device_properties(0).multi_processor_count
    return tuple(streamk.schedule(-(-m // 128) * -(-n // 256), -(-k // 64), sms))


def check_streamk_case(m, n, k, sms, layout, dtype, acc, seed):
    """wgmma_streamk on integer inputs seeing `sms` SMs, into a NaN-poisoned C: exact (every element written), with
    the launch the schedule implies (grid, and the slices where tiles are cut) and A column-major read in place.
    Odd seeds put C one element past 16-byte alignment: the data-parallel tiles then take the register-store
    epilogue instead of TMA stores (the cut tiles always take it). Returns (cut tiles, slices)."""
    a, b = shared_inputs(m, n, k, layout, seed=seed, dtype=dtype)
    off = seed % 2
    c = poisoned_out(m, n + 8, "cuda", dtype)[:, off:off + n]
    assert ptx_kernels.hgemm(a, b, kernel="wgmma_streamk", acc=acc, out=c, sms=sms) is c
    torch.cuda.synchronize()
    launch = ptx_kernels.last_launch()
    programs, sk_tiles, slices = streamk_schedule(m, n, k, sms)
    what = f"wgmma_streamk {dtype} {acc} {layout} {m}x{n}x{k} sms={sms} C offset {off}"
    assert launch["grid"] == (programs, 1) and launch["tile"] == (128, 256), (what, launch)
    assert launch["split"] == (slices if sk_tiles else None), (what, launch)
    assert launch["a_col_major"] == (layout[0] == "T"), (what, launch)
    assert_exact(c, a, b, what)
    return sk_tiles, slices


@pytest.mark.gpu(sm=90)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("acc", ("fp32", "fp16"))
def test_streamk_exact_on_every_cut(acc, layout):
    """wgmma_streamk with the SM count lowered so that small outputs take the schedule's cut tiles: every slice
    count S = 2..8, slices of unequal length (k-blocks not a multiple of S), edge tiles cut, cut tiles after whole
    data-parallel rounds and without any, and the shapes where nothing is cut; exact in every layout, every element
    of a NaN-poisoned C written. bf16: tests/test_ptx_bf16.py."""
    needs_hopper()
    cuts = {check_streamk_case(m, n, k, sms, layout, "fp16", acc, seed=i)
            for i, (m, n, k, sms) in enumerate(STREAMK_SHAPES)}
    assert {s for r, s in cuts if r} == set(range(2, 9)) and (0, 1) in cuts


@pytest.mark.gpu(sm=90)
@pytest.mark.parametrize("dtype,acc", DTYPE_ACCS)
def test_streamk_is_deterministic(dtype, acc):
    """The S partials of a cut tile are added in slot order by the fix-up launch: random inputs give the
    same bits on every call (cut tiles in 8 slices, cut tiles after whole rounds, and the device's own SM count on
    200 x 8192, whose 64 tiles fill half a 132-SM GPU), within the error bound; NaN in A[i, k] makes row i of C NaN
    and no other."""
    needs_hopper()
    for m, n, k, sms in [(300, 520, 2100, 80), (1000, 1030, 1000, 12), (200, 8192, 2048, None)]:
        a, b = shared_inputs(m, n, k, "NT", seed=50, kind="randn", dtype=dtype)
        first = ptx_kernels.hgemm(a, b, kernel="wgmma_streamk", acc=acc, sms=sms)
        assert ptx_kernels.last_launch()["grid"][0] == streamk_schedule(m, n, k, sms)[0]
        for _ in range(3):
            assert torch.equal(ptx_kernels.hgemm(a, b, kernel="wgmma_streamk", acc=acc, sms=sms), first)
        ref = reference(a, b)
        verdict = compare(first, ref, error_bound(a, b, ref, acc))
        assert verdict.ok, f"{dtype} {acc} {m}x{n}x{k} sms={sms}: {verdict.detail}"
        a = a.clone()
        a[17, 3] = float("nan")  # k-block 0: the first slice of every cut tile
        c = ptx_kernels.hgemm(a, b, kernel="wgmma_streamk", acc=acc, sms=sms)
        rows_nan = c.isnan().any(dim=1)
        assert rows_nan[17] and c[17].isnan().all() and int(rows_nan.sum()) == 1


def test_streamk_on_side_streams_and_in_cuda_graphs():
    """The workspace comes from the caching allocator on the current stream and the fix-up is queued on it behind the
    GEMM: correct on a side stream, and inside a captured CUDA graph replayed on new data (both launches in the
    graph, in order)."""
    needs_hopper()
    ins = [make_inputs(300, 520, 1100, "NT", device="cuda", seed=60 + s) for s in range(3)]

    def cut_in_four():
        assert ptx_kernels.last_launch()["split"] == 4

    on_side_stream_and_in_graph(lambda a, b: ptx_kernels.hgemm(a, b, variant="wgmma_streamk", sms=40), ins,
                                [reference(a, b) for a, b in ins], cut_in_four)
