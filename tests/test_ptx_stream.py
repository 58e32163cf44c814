"""The bandwidth path (ptx_kernels/csrc/sm90/mma_stream.cu) on a GPU: exact integer checks for a few rows of A in every
layout, dtype and accumulation (16-row units, and 32-row units past 16 rows), on odd N and K with operands whose
padding is NaN, into NaN-poisoned outputs; bitwise the same result on every run whatever the K split;
wgmma_persistent's hand-off (sm90/handoff.h, hands_to_stream) routes M <= 32 against a B off the 16-byte grid, and
M <= 16 of a column-major A against a large B, to it, and nothing else; side streams and CUDA graphs."""
import pytest
import torch

import ptx_kernels
from compare.reference import LAYOUTS, compare, error_bound, make_inputs, poisoned_out, reference
from helpers import a_copies, assert_exact, in_place_operand, on_side_stream_and_in_graph, shared_inputs

pytestmark = pytest.mark.gpu(sm=90)

DTYPE_ACCS = (("fp16", "fp32"), ("fp16", "fp16"), ("bf16", "fp32"))
ROWS = (1, 2, 5, 8, 13, 16)
# (N, K): odd both ways, a K tail inside a lane's 8 elements, N inside one 128-column unit, K shorter than a step;
# the last a B of over 2^22 elements
SHAPES = ((1001, 777), (7, 4099), (129, 65), (3001, 1399))
HANDED = (3001, 1399)


def stream_call(a, b, kernel, acc, dtype, split=None):
    """hgemm on `kernel` into a NaN-poisoned out (synchronized), and the launch it reported."""
    c = poisoned_out(a.shape[0], b.shape[1], "cuda", dtype)
    assert ptx_kernels.hgemm(a, b, kernel=kernel, acc=acc, out=c, split=split) is c
    torch.cuda.synchronize()
    return c, ptx_kernels.last_launch()


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype,acc", DTYPE_ACCS)
def test_exact_few_rows_every_layout(dtype, acc, layout):
    """M in {1, 2, 5, 8, 13, 16} on odd N and K, A and B read in place from storage padded with NaN (a load past an
    edge would make C NaN), every element of C written, exact against the float64 product; directly and through
    wgmma_persistent where it hands the shape over (B as drawn: N and K odd, its rows off the 16-byte grid)."""
    for i, m in enumerate(ROWS):
        for j, (n, k) in enumerate(SHAPES):
            a, drawn = make_inputs(m, n, k, layout, device="cuda", seed=10 * i + j, dtype=dtype)
            a, b = in_place_operand(a, layout[0] == "T"), in_place_operand(drawn, layout[1] == "T")
            kernels = ("mma_stream", "wgmma_persistent") if (n, k) == HANDED else ("mma_stream",)
            for kernel in kernels:
                c, launch = stream_call(a, b if kernel == "mma_stream" else drawn, kernel, acc, dtype)
                what = f"{kernel} {dtype} {acc} {layout} {m}x{n}x{k}"
                assert launch["kernel"] == "mma_stream" and not launch["copies"], (what, launch)
                assert launch["a_col_major"] == (layout[0] == "T"), (what, launch)
                assert_exact(c, a, b, what)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype,acc", DTYPE_ACCS)
def test_32_row_units_exact(dtype, acc, layout):
    """Past 16 rows mma_stream runs 32-row units (four n8 tiles of A against each piece of B loaded; the launch's
    tile (32, 128)): M of 17, 24 and 32 (one unit), 40 and 72 (the last unit's second 16 rows below M, skipped), on
    aligned and odd N and K, A and B read in place (column-major A with aligned columns through ldmatrix.trans, B's
    rows off 16 bytes rebuilt), into NaN-poisoned outputs: exact, unsplit and split 3 ways, the same bits twice."""
    for i, m in enumerate((17, 24, 32, 40, 72)):
        for j, (n, k) in enumerate(((1024, 768), (1001, 777), (136, 4104))):
            a, drawn = make_inputs(m, n, k, layout, device="cuda", seed=300 + 10 * i + j, dtype=dtype)
            a = in_place_operand(a, layout[0] == "T")
            b = drawn if n % 2 else in_place_operand(drawn, layout[1] == "T")  # odd N and K: B's rows off the grid
            for split in (None, 3):
                c, launch = stream_call(a, b, "mma_stream", acc, dtype, split=split)
                what = f"{dtype} {acc} {layout} {m}x{n}x{k} split {split}"
                assert launch["kernel"] == "mma_stream" and tuple(launch["tile"]) == (32, 128), (what, launch)
                assert not launch["copies"] and (split is None or launch["split"] == split), (what, launch)
                assert_exact(c, a, b, what)
                assert torch.equal(stream_call(a, b, "mma_stream", acc, dtype, split=split)[0], c), what


def off_grid_operand(t: torch.Tensor, col: bool, ld: int, offset: int) -> torch.Tensor:
    """t's values in its layout (col: column-major) in storage of leading dimension `ld` starting `offset` elements
    into a buffer that ends where t does, the padding between its rows alternately NaN and Inf (a misread element
    makes C NaN or Inf), as is what lies before the first: rows off 16-byte boundaries where ld is not a multiple of 8
    or offset is not one of 8."""
    rows, cols = t.shape
    lines, length = (cols, rows) if col else (rows, cols)
    buf = torch.empty(offset + (lines - 1) * ld + length, dtype=t.dtype, device=t.device)
    buf[0::2], buf[1::2] = float("nan"), float("inf")
    view = buf.as_strided((lines, length), (ld, 1), offset)
    view = view.t() if col else view
    view.copy_(t)
    return view


# B's storage: (extra elements a row beyond its length, base offset in elements); the first is aligned where the
# row's length is a multiple of 8, the others put rows at every shift
OFF_GRID = ((0, 0), (1, 0), (3, 5), (8, 1), (5, 7))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype,acc", DTYPE_ACCS)
def test_b_rows_off_16_bytes_read_in_place(dtype, acc, layout):
    """B of a leading dimension that is not a multiple of 8 elements, or off a 16-byte base, in both layouts, N and
    K odd and even: mma_stream rebuilds the rows from aligned 16-byte chunks, with no copy of B (last_launch), exact
    against the float64 product with NaN/Inf between B's rows and before its start, the buffer ending where B does;
    and with random inputs (M = 5), the same bits as on an aligned copy of B (the same products in the same order)."""
    for i, m in enumerate((1, 5, 16)):
        for j, (n, k) in enumerate(((1001, 777), (1000, 776), (130, 67), (3001, 1400), (64, 4099))):
            length = k if layout[1] == "T" else n
            for extra, offset in OFF_GRID:
                for kind in ("int", "randn") if m == 5 else ("int",):
                    a, b = make_inputs(m, n, k, layout, device="cuda", seed=100 * i + 10 * j + extra, kind=kind,
                                       dtype=dtype)
                    a = in_place_operand(a, layout[0] == "T")
                    b_off = off_grid_operand(b, layout[1] == "T", length + extra, offset)
                    c, launch = stream_call(a, b_off, "mma_stream", acc, dtype)
                    what = f"{dtype} {acc} {layout} {m}x{n}x{k} ld {length + extra} offset {offset} {kind}"
                    assert launch["kernel"] == "mma_stream" and not launch["copies"], (what, launch)
                    if kind == "int":
                        assert_exact(c, a, b, what)
                    else:
                        aligned = stream_call(a, in_place_operand(b, layout[1] == "T"), "mma_stream", acc, dtype)[0]
                        assert torch.equal(c, aligned), what


@pytest.mark.parametrize("layout", ("NN", "NT"))
def test_persistent_hand_off_reads_off_grid_b_in_place(layout):
    """wgmma_persistent on a few rows of A against a large B whose rows lie off the 16-byte grid runs mma_stream with
    nothing copied (ptx_kernels.call launches it, as the hand-off would), exact, the same bits as mma_stream called
    directly; the second call of the kind (the cached plan) and `planned` launch it too."""
    from ptx_kernels.call import planned

    m, n, k = 3, 4099, 2051
    a, b = make_inputs(m, n, k, layout, device="cuda", seed=5)
    a = in_place_operand(a, False)  # A's rows 16-byte aligned: nothing at all is copied, so the plan is cached
    b = off_grid_operand(b, layout[1] == "T", (k if layout[1] == "T" else n) + 1, 3)
    direct = stream_call(a, b, "mma_stream", "fp32", "fp16")[0]
    for _ in range(2):
        c, launch = stream_call(a, b, "wgmma_persistent", "fp32", "fp16")
        assert launch["kernel"] == "mma_stream" and not launch["copies"], launch
        assert_exact(c, a, b, f"wgmma_persistent {layout} {m}x{n}x{k}")
        assert torch.equal(c, direct)
    assert torch.equal(ptx_kernels.hgemm(a, b, kernel="wgmma_persistent"), direct)  # out=None: what planned keeps
    launch = planned(a, b, kernel="wgmma_persistent")
    out = torch.full((m, n), float("nan"), dtype=a.dtype, device="cuda")
    launch(a, b, out)
    assert torch.equal(out, direct) and ptx_kernels.last_launch()["kernel"] == "mma_stream"


@pytest.mark.parametrize("layout", ("NN", "NT"))
def test_b_rows_off_16_bytes_same_bits_every_run(layout):
    """The shifted path's K split (auto plan, and a forced 17) gives the same bits on every run."""
    a, b = make_inputs(13, 5001, 7003, layout, device="cuda", seed=7, kind="randn")
    a = in_place_operand(a, False)
    b = off_grid_operand(b, layout[1] == "T", (7003 if layout[1] == "T" else 5001) + 2, 3)
    for split in (None, 17):
        first, launch = stream_call(a, b, "mma_stream", "fp32", "fp16", split=split)
        assert not launch["copies"] and (split is not None or launch["split"] > 1), launch
        for _ in range(3):
            assert torch.equal(stream_call(a, b, "mma_stream", "fp32", "fp16", split=split)[0], first), split
        verdict = compare(first, reference(a, b), error_bound(a, b, reference(a, b), "fp32"))
        assert verdict.ok, verdict.detail


@pytest.mark.parametrize("layout", ("NN", "NT", "TN"))
@pytest.mark.parametrize("dtype,acc", DTYPE_ACCS)
def test_every_split_exact_and_larger_m(dtype, acc, layout):
    """Forced K splits (GemmArgs::split, cut to the 128-deep k-steps there are) from one slice to more slices than
    steps, each exact: the workspace path and the fixed-order reduction for every count; M past 16 (16-row blocks of
    the same B, the last one partial) too."""
    for i, (m, n, k, splits) in enumerate([(5, 1000, 12000, (1, 2, 5, 64, 94, 256)), (16, 4099, 1037, (1, 3, 9)),
                                           (40, 700, 3000, (1, 4, 24)), (3, 77, 100, (1, 2))]):
        a, b = shared_inputs(m, n, k, layout, seed=40 + i, dtype=dtype)
        ref = reference(a, b)
        for split in splits:
            c, launch = stream_call(a, b, "mma_stream", acc, dtype, split=split)
            assert launch["split"] == min(split, -(-k // 128)), (split, launch)
            verdict = compare(c, ref)
            assert verdict.ok, f"{dtype} {acc} {layout} {m}x{n}x{k} split {split}: {verdict.detail}"


@pytest.mark.parametrize("dtype,acc", DTYPE_ACCS)
def test_same_bits_every_run(dtype, acc):
    """Random inputs: the same bits on every call (the warps' partials are added in warp order, the slices in slice
    order), through mma_stream and through wgmma_persistent's hand-off (the same plan; N and K odd: B off the 16-byte
    grid in every layout), within the error bound; and a forced split twice gives its own result twice."""
    for layout in ("NN", "NT", "TN"):
        a, b = shared_inputs(13, 5001, 7001, layout, seed=7, kind="randn", dtype=dtype)
        ref = reference(a, b)
        first, launch = stream_call(a, b, "mma_stream", acc, dtype)
        assert launch["split"] > 1, launch  # the auto plan splits K here: the reduction runs
        for _ in range(3):
            assert torch.equal(stream_call(a, b, "mma_stream", acc, dtype)[0], first), layout
        handed, launch = stream_call(a, b, "wgmma_persistent", acc, dtype)
        assert launch["kernel"] == "mma_stream" and torch.equal(handed, first), (layout, launch)
        verdict = compare(first, ref, error_bound(a, b, ref, acc))
        assert verdict.ok, f"{layout}: {verdict.detail}"
        forced = stream_call(a, b, "mma_stream", acc, dtype, split=17)[0]
        assert torch.equal(stream_call(a, b, "mma_stream", acc, dtype, split=17)[0], forced)


@pytest.mark.parametrize("dtype,acc", DTYPE_ACCS)
def test_persistent_hands_few_rows_against_a_large_b_to_the_stream(dtype, acc):
    """wgmma_persistent's plan (hands_to_stream): M <= 32 against a B whose rows (of its storage order: N in NN and
    TN, K in NT and TT) are off 16 bytes runs mma_stream, and so does M <= 16 of a column-major A (TN, TT) against an
    aligned B of K x N >= 2^22, in every layout with no copy of A or B; an aligned B with row-major A at any M
    (decode rows against a 4096 x 4096 weight among them), a single row of A, 33 rows or more (B staged, in one
    launch with A), or a pinned split or tile keep the tile kernels. Exact either way."""
    every = "NN NT TN TT"
    cases = [((1, 4096, 4096), ""), ((16, 4096, 4096), "TN TT"), ((8, 64, 65536), "TN TT"),
             ((1, 4097, 4096), "NN TN"), ((16, 4096, 4097), "NT TN TT"), ((8, 63, 65536), "NN TN"),
             ((17, 4096, 4096), ""), ((16, 1024, 2048), ""), ((17, 1001, 777), every),
             ((32, 129, 65), every), ((40, 129, 4097), ""), ((2, 270, 1015), every),
             ((32, 1024, 777), "NT TT"), ((40, 777, 4096), ""), ((48, 130, 999), ""),
             ((40, 4095, 2048), ""), ((49, 1001, 4097), "")]
    for i, ((m, n, k), where) in enumerate(cases):
        for layout in LAYOUTS:
            handed = layout in where.split()
            a, b = shared_inputs(m, n, k, layout, seed=60 + i, dtype=dtype)
            c, launch = stream_call(a, b, "wgmma_persistent", acc, dtype)
            what = f"{dtype} {acc} {layout} {m}x{n}x{k}"
            assert (launch["kernel"] == "mma_stream") == handed, (what, launch)
            # mma_stream reads A and B in place at any alignment; the tile kernels' TMA copies what is off the grid
            assert not handed or not launch["copies"], (what, launch)
            assert_exact(c, a, b, what)
    a, b = shared_inputs(16, 4096, 4097, "NT", seed=60, dtype=dtype)
    for split in (1, 2):
        c, launch = stream_call(a, b, "wgmma_persistent", acc, dtype, split=split)
        assert launch["kernel"] != "mma_stream", launch
        assert_exact(c, a, b, f"wgmma_persistent split={split}")


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype,acc", DTYPE_ACCS)
def test_a_rows_off_16_bytes_read_in_place(dtype, acc, layout):
    """A of a leading dimension that is not a multiple of 8 elements, or off a 16-byte base (in its storage order),
    with NaN/Inf between its rows and before its start: mma_stream reads it element by element in place, no copy
    (last_launch), exact against the float64 product, for M within one 16-row block and past it."""
    for i, m in enumerate((1, 5, 17, 40)):
        for j, (n, k) in enumerate(((1001, 777), (300, 1400))):
            length = m if layout[0] == "T" else k
            for extra, offset in OFF_GRID:
                a, b = make_inputs(m, n, k, layout, device="cuda", seed=200 + 10 * i + j + extra, dtype=dtype)
                a_off = off_grid_operand(a, layout[0] == "T", length + extra, offset)
                b = in_place_operand(b, layout[1] == "T")
                c, launch = stream_call(a_off, b, "mma_stream", acc, dtype)
                what = f"{dtype} {acc} {layout} {m}x{n}x{k} A ld {length + extra} offset {offset}"
                assert launch["kernel"] == "mma_stream" and not launch["copies"], (what, launch)
                assert_exact(c, a, b, what)


def test_the_stream_copies_a_where_reading_it_in_place_costs_more():
    """On a large problem, mma_stream's call copies a column-major A past one 16-row block into row-major rows first
    (call.stream_copies_a), named in last_launch()["copies"]; one 16-row block reads it in place. Exact either way,
    through wgmma_persistent's hand-off (B's rows off 16 bytes)."""
    for m, copied in ((24, True), (16, False)):
        a, b = shared_inputs(m, 2048, 4097, "TT", seed=90)
        c, launch = stream_call(a, b, "wgmma_persistent", "fp32", "fp16")
        assert launch["kernel"] == "mma_stream", launch
        assert launch["copies"] == (["A to row-major"] if copied else []), launch
        assert_exact(c, a, b, f"wgmma_persistent {m}x2048x4097 TT")


def test_side_streams_and_cuda_graphs():
    """The workspace comes from the caching allocator on the current stream and the reduction is a programmatic
    dependent launch: correct on a side stream, and inside a captured CUDA graph replayed on new data, through
    wgmma_persistent's hand-off."""
    ins = [make_inputs(4, 8192, 4097, "NT", device="cuda", seed=70 + s) for s in range(3)]  # K odd: B off the grid

    def ran_the_stream_split():
        launch = ptx_kernels.last_launch()
        assert launch["kernel"] == "mma_stream" and launch["split"] > 1, launch

    on_side_stream_and_in_graph(lambda a, b: ptx_kernels.hgemm(a, b, kernel="wgmma_persistent"), ins,
                                [reference(a, b) for a, b in ins], ran_the_stream_split)
