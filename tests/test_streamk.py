"""The stream-K Triton kernel (triton_kernels/streamk.py): its host schedule (whole rounds data-parallel, the
partial round's tiles cut into S equal k-slices, S = min(MAX_SLICES, G // R, I // MIN_SLICE_ITERS)), every
k-iteration of every tile computed exactly once, slices aligned in K; exact integer checks on shapes whose tiles are
cut (every layout, fp16 and bf16, both accumulations) and on those where the schedule is the TMA kernel's, a padded
output, bitwise determinism and counters left at zero; on a GPU the same on the shapes stream-K is for.

Under the interpreter the grid has at most `streamk.INTERPRETER_SMS` programs (7), so the small shapes here leave
partial rounds of one to three 32 x 32 tiles, cut into two to seven slices of uneven length; some tests change it
to see other cuts."""
import pytest
import torch

import triton_kernels
from compare.reference import make_inputs
from hgemm_common.validation import DTYPES
from triton_kernels import configs, splitk, streamk
from triton_kernels.common import cdiv
from triton_kernels.tma_persistent import programs as tma_programs

from conftest import DEVICE, HAS_CUDA
from helpers import assert_exact, poisoned_call

DTYPE_ACCS = [("fp16", "fp32"), ("fp16", "fp16"), ("bf16", "fp32")]
PIN = {} if not HAS_CUDA else {"config": configs("triton_streamk")[1]}  # small shapes on a GPU: one tile, untimed


# ---------------------------------------------------------------------------------------------- the schedule
@pytest.mark.parametrize("tiles,iters,sms,want", [
    (12, 16, 4, (4, 0, 1)),  # T % G == 0: every tile data-parallel, the TMA kernel's grid
    (528, 16, 132, (132, 0, 1)),  # 4224x4096 in 128 x 256 tiles: four whole rounds
    (1, 1, 132, (1, 0, 1)),  # one k-iteration: one program, data-parallel
    (64, 128, 132, (128, 64, 2)),  # 200x8192x8192 in 128 x 256 tiles: T < G, G // R = 2 slices a tile
    (6, 384, 132, (48, 6, 8)),  # 384x384x24576: 6 tiles, MAX_SLICES each, one program a slice
    (138, 396, 132, (132, 6, 8)),  # 296x11600x25304: one round data-parallel, 6 tiles in 8 slices
    (36, 250, 132, (108, 36, 3)),  # 1100x1000x16000: G // R = 3
    (72, 188, 132, (72, 0, 1)),  # 3000x768x12000: R > G / 2, S = 1: the TMA kernel's schedule
    (200, 64, 132, (100, 0, 1)),  # R = 68 > G / 2 after a whole round: the TMA kernel's balanced grid
    (133, 64, 132, (132, 1, 8)),  # one tile past a whole round: MAX_SLICES
    (9, 13, 7, (7, 2, 3)),  # a round data-parallel, 2 tiles in 3 slices of 4, 4, 5 k-iterations
    (2, 7, 7, (2, 0, 1)),  # short K: 7 // MIN_SLICE_ITERS = 1 slice, nothing cut
    (2, 8, 7, (4, 2, 2)),  # K just long enough for 2 slices of MIN_SLICE_ITERS
    (3, 1, 132, (3, 0, 1)),  # fewer k-iterations than SMs: one program each, data-parallel
])
def test_schedule_cuts_the_partial_round_into_k_slices(tiles, iters, sms, want):
    s = streamk.schedule(tiles, iters, sms)
    assert tuple(s) == want
    if s.sk_tiles == 0:
        assert s.programs == tma_programs(tiles, sms) and s.slices == 1  # exactly triton_tma's schedule
    else:
        assert (tiles - s.sk_tiles) % s.programs == 0  # the data-parallel tiles are whole rounds
        assert 2 <= s.slices <= streamk.MAX_SLICES and s.sk_tiles * s.slices <= s.programs <= sms
        assert iters // s.slices >= streamk.MIN_SLICE_ITERS


def test_every_k_iteration_is_computed_once_and_slices_align_in_k():
    """Over the programs' work (`program_work`, the kernel's walk), every k-iteration of every tile is computed
    exactly once; a stream-K tile's slices are its first `slices` programs' in slot order, and slice j covers the
    same K range in every tile; slice lengths differ by at most one; every program takes the same number of
    data-parallel tiles; no program is idle where there are data-parallel tiles, and none is launched for nothing
    where there are none."""
    for tiles in (1, 2, 3, 5, 9, 12, 16, 64, 133, 300):
        for iters in (1, 2, 4, 7, 8, 13, 64):
            for sms in (1, 3, 5, 7, 11, 132):
                check_work(tiles, iters, sms)


def check_work(tiles: int, iters: int, sms: int) -> None:
    s = streamk.schedule(tiles, iters, sms)
    where = (tiles, iters, sms, s)
    done = [[0] * iters for _ in range(tiles)]
    slice_of = {}
    dp_counts = []
    for pid in range(s.programs):
        work = streamk.program_work(pid, s, tiles, iters)
        assert work, where  # every launched program has work
        dp_counts.append(sum(tile >= s.sk_tiles for tile, _, _ in work))
        for tile, first, end in work:
            for it in range(first, end):
                done[tile][it] += 1
            if tile < s.sk_tiles:
                assert pid < s.sk_tiles * s.slices and (first, end) != (0, iters), where
                slice_of.setdefault(pid % s.slices, set()).add((first, end))
    assert all(x == 1 for row in done for x in row), where
    assert all(len(ranges) == 1 for ranges in slice_of.values()), where  # aligned in K across tiles
    lengths = [end - first for ranges in slice_of.values() for first, end in ranges]
    assert not lengths or max(lengths) - min(lengths) <= 1, where
    if s.sk_tiles:
        assert max(dp_counts) == min(dp_counts), where  # whole rounds


# ---------------------------------------------------------------------------------------------- exact checks
# (M, N, K): leading dimensions multiples of 8 (TMA), most M and N off the 32 x 32 tile, K off BLOCK_K (32). On 7
# programs: 2 tiles of 14 k-iterations (every tile stream-K, 3 slices of 4, 5, 5); 9 tiles of 13 (2 in 3 slices of
# 4, 4, 5, then one round data-parallel); one tile of 33 (7 slices of 4 and 5); 16 tiles of 9 (two rounds, 2 tiles
# in 2 slices of 4 and 5); and the TMA kernel's schedule: 5 tiles (R > G / 2), 14 tiles (whole rounds), 2 tiles of
# 7 (K too short to cut), one tile of one k-iteration.
CUT = [(40, 24, 424), (88, 80, 408), (8, 8, 1032), (120, 104, 264)]
UNCUT = [(160, 24, 296), (224, 40, 72), (40, 24, 200), (8, 8, 8)]


def test_the_shapes_cut_what_they_say():
    sched = lambda m, n, k: streamk.schedule(cdiv(m, 32) * cdiv(n, 32), cdiv(k, 32), streamk.INTERPRETER_SMS)
    assert [tuple(sched(*s)) for s in CUT] == [(6, 2, 3), (7, 2, 3), (7, 1, 7), (7, 2, 2)]
    assert all(sched(*s).sk_tiles == 0 for s in UNCUT)


def exact_cases():
    """fp16 (fp32 accumulation) in every layout on the shapes whose tiles are cut, bf16 in NN and TT there, fp16
    accumulation in NN; the TMA kernel's schedules in fp16, NN and TT."""
    for (m, n, k), cut in [(s, True) for s in CUT] + [(s, False) for s in UNCUT]:
        for layout in ("NN", "NT", "TN", "TT"):
            for dtype, acc in DTYPE_ACCS:
                if (dtype, acc) == ("fp16", "fp32"):
                    wanted = cut or layout in ("NN", "TT")
                else:
                    wanted = cut and layout in (("NN", "TT") if dtype == "bf16" else ("NN",))
                if wanted:
                    yield pytest.param(m, n, k, layout, dtype, acc, id=f"{m}x{n}x{k}-{layout}-{dtype}-acc{acc}")


@pytest.mark.parametrize("m,n,k,layout,dtype,acc", list(exact_cases()))
def test_exact_all_layouts(m, n, k, layout, dtype, acc):
    a, b = make_inputs(m, n, k, layout, device=DEVICE, seed=m + n + k, dtype=dtype)
    c = poisoned_call(lambda out: triton_kernels.hgemm(a, b, out=out, acc=acc, kernel="triton_streamk", **PIN),
                      m, n, DEVICE, dtype)
    assert_exact(c, a, b, f"streamk {m}x{n}x{k} {layout} {dtype} acc {acc}")


@pytest.mark.skipif(HAS_CUDA, reason="the interpreter's grid")
@pytest.mark.parametrize("sms,m,n,k,want", [
    (2, 72, 24, 520, (2, 1, 2)),  # 3 tiles of 17: one tile in 2 slices, then one round data-parallel
    (3, 72, 88, 264, (3, 0, 1)),  # 9 tiles: three whole rounds
    (4, 72, 88, 520, (4, 1, 4)),  # 9 tiles of 17: the last tile in 4 slices of 4 and 5, then two rounds
    (11, 40, 24, 1032, (10, 2, 5)),  # 2 tiles of 33: 5 slices of 6 and 7 (G // R = 5)
    (11, 8, 8, 1032, (8, 1, 8)),  # one tile of 33: MAX_SLICES slices
])
def test_exact_on_other_grids(sms, m, n, k, want, monkeypatch):
    """Other program counts cut other tiles: slices before one and two whole rounds, 5 slices, MAX_SLICES."""
    monkeypatch.setattr(streamk, "INTERPRETER_SMS", sms)
    assert tuple(streamk.schedule(cdiv(m, 32) * cdiv(n, 32), cdiv(k, 32), sms)) == want
    a, b = make_inputs(m, n, k, "NT", device=DEVICE, seed=sms, dtype="fp16")
    c = poisoned_call(lambda out: triton_kernels.hgemm(a, b, out=out, kernel="triton_streamk"), m, n, DEVICE)
    assert_exact(c, a, b, f"streamk on {sms} programs, {m}x{n}x{k}")


@pytest.mark.skipif(HAS_CUDA, reason="the interpreter's grid")
@pytest.mark.parametrize("separate", [True, False])
def test_a_missing_slice_fails_the_check(separate, monkeypatch):
    """The exact check can fail: with one program too few, the last slice of the last stream-K tile is never
    computed. Summed by the second launch (SEPARATE_FIXUP), its workspace block keeps what it held (NaN here), so
    the tile's sum is NaN; summed in the launch, its tile is never summed and its elements stay NaN."""
    m, n, k = 40, 24, 424  # 2 tiles in 3 slices on 6 programs
    real = streamk.schedule(cdiv(m, 32) * cdiv(n, 32), cdiv(k, 32), streamk.INTERPRETER_SMS)
    monkeypatch.setattr(streamk, "schedule", lambda *args: real._replace(programs=real.programs - 1))
    monkeypatch.setattr(streamk, "SEPARATE_FIXUP", separate)
    triton_kernels.dispatch.clear()  # no plan kept from a call with the other fix-up
    a, b = make_inputs(m, n, k, "NN", device=DEVICE, seed=1)
    splitk.WORKSPACES.get(torch.device(DEVICE), 2 * 3 * 32 * 32).fill_(float("nan"))
    try:
        c = poisoned_call(lambda out: triton_kernels.hgemm(a, b, out=out, kernel="triton_streamk"), m, n, DEVICE)
        with pytest.raises(AssertionError):
            assert_exact(c, a, b, "one slice missing")
        assert torch.isnan(c).any() and not torch.isnan(c[:32]).any()  # tile 0 summed, tile 1 not
    finally:
        splitk.COUNTERS.clear()  # (summed in the launch) tile 1's counter was left at 2
        triton_kernels.dispatch.clear()


@pytest.mark.parametrize("separate", [True, False])
def test_both_fixups_give_the_same_bits(separate, monkeypatch):
    """The cut tiles summed by the second launch (`streamk_fixup_kernel`, SEPARATE_FIXUP) and by the last slice
    to arrive (`splitk.sum_parts`) add the same blocks in the same order: exact, and bit for bit the same C. The
    second launch is queued only where tiles are cut."""
    from triton_kernels import dispatch

    m, n, k = CUT[0]
    a, b = make_inputs(m, n, k, "NT", device=DEVICE, seed=5)
    outs = []
    for sep in (separate, not separate):
        monkeypatch.setattr(streamk, "SEPARATE_FIXUP", sep)
        dispatch.clear()
        c = poisoned_call(lambda out: triton_kernels.hgemm(a, b, out=out, kernel="triton_streamk", **PIN),
                          m, n, DEVICE)
        assert_exact(c, a, b, f"streamk {m}x{n}x{k}, fix-up {'separate' if sep else 'in the launch'}")
        outs.append(c)
    dispatch.clear()
    assert torch.equal(outs[0], outs[1])
    cfg = PIN.get("config", streamk.INTERPRETER_CONFIG)
    monkeypatch.setattr(streamk, "SEPARATE_FIXUP", True)
    c = torch.empty(m, n, dtype=a.dtype, device=DEVICE)
    specs = streamk.launches(a, b, c, False, cfg)
    s = streamk.schedule(cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n), cdiv(k, cfg.block_k),
                         streamk.num_sms(c.device))
    assert [sp.fn for sp in specs] == [streamk.hgemm_streamk_kernel] + [streamk.streamk_fixup_kernel] * (s.sk_tiles > 0)
    if s.sk_tiles:
        assert specs[1].grid == (s.sk_tiles * cfg.block_m // min(streamk.FIXUP_ROWS, cfg.block_m),)


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_exact_into_an_output_with_a_padded_leading_dimension(dtype):
    """Stream-K tiles are stored through pointers with C's strides, data-parallel tiles by TMA: both into an out=
    whose rows are 16 elements longer than N."""
    m, n, k = 88, 80, 408  # 2 tiles in 3 slices, then one round data-parallel
    a, b = make_inputs(m, n, k, "NN", device=DEVICE, seed=3, dtype=dtype)
    buf = torch.full((m, n + 16), float("nan"), dtype=DTYPES[dtype], device=DEVICE)
    out = buf[:, :n]
    assert triton_kernels.hgemm(a, b, out=out, kernel="triton_streamk", **PIN) is out
    assert_exact(out, a, b, "padded out")
    assert torch.isnan(buf[:, n:]).all()  # nothing written past N


@pytest.mark.parametrize("dtype", ["fp16", pytest.param("bf16", marks=pytest.mark.gpu)])
def test_deterministic_and_counters_left_at_zero(dtype):
    """Random inputs (slices rounded in fp32, so the order of the fix-up's sum shows in the bits): the same bits on
    every run, other addresses too, and every tile counter back at zero for the next call."""
    a, b = make_inputs(40, 24, 424, "NN", device=DEVICE, seed=11, kind="randn", dtype=dtype)
    c1 = triton_kernels.hgemm(a, b, kernel="triton_streamk", **PIN)
    c2 = triton_kernels.hgemm(a, b, kernel="triton_streamk", **PIN)
    c3 = triton_kernels.hgemm(a.clone(), b.clone(), kernel="triton_streamk", **PIN)
    assert torch.equal(c1, c2) and torch.equal(c1, c3)
    counts = splitk.COUNTERS.get(a.device, 1)
    assert int(counts.count_nonzero()) == 0


# ---------------------------------------------------------------------------------------------- GPU only
# The shapes stream-K is for (issue 48), each with stream-K tiles in the widest tile (128 x 256 x 64) on 132 SMs:
# too few tiles for the SMs (200x8192x8192: 64 tiles in 2 slices), a small output over a long K (384x384x24576: 6
# tiles in 8 slices), and an odd one with a whole round data-parallel before a partial one (296x11600x25304: 138
# tiles, 6 of them in 8 slices). Some of the other configurations leave no partial round: the TMA kernel's schedule.
GPU_SHAPES = [(200, 8192, 8192), (384, 384, 24576), (296, 11600, 25304)]


@pytest.mark.gpu(sm=90)
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("layout", ["NN", "NT"])
@pytest.mark.parametrize("m,n,k", GPU_SHAPES)
def test_gpu_exact_on_stream_k_shapes(m, n, k, layout, dtype):
    a, b = make_inputs(m, n, k, layout, device="cuda", seed=m + k, dtype=dtype)
    for cfg in configs("triton_streamk"):
        c = poisoned_call(lambda out: triton_kernels.hgemm(a, b, out=out, kernel="triton_streamk", config=cfg),
                          m, n, "cuda", dtype)
        assert_exact(c, a, b, f"streamk {cfg.name} {m}x{n}x{k} {layout} {dtype}")


@pytest.mark.gpu(sm=90)
@pytest.mark.parametrize("m,n,k", GPU_SHAPES)
def test_gpu_bitwise_deterministic(m, n, k):
    """Random inputs, the widest tile (cut into 2 to 8 slices here): bitwise-equal results over repeated calls, on
    a side stream too (its own workspace and counters)."""
    a, b = make_inputs(m, n, k, "NN", device="cuda", seed=21, kind="randn")
    cfg = configs("triton_streamk")[0]
    tiles = cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n)
    sched = streamk.schedule(tiles, cdiv(k, cfg.block_k), torch.cuda.get_device_properties(0).multi_processor_count)
    assert sched.sk_tiles > 0 and sched.slices >= 2
    first = triton_kernels.hgemm(a, b, kernel="triton_streamk", config=cfg)
    for _ in range(5):
        assert torch.equal(triton_kernels.hgemm(a, b, kernel="triton_streamk", config=cfg), first)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        side = triton_kernels.hgemm(a, b, kernel="triton_streamk", config=cfg)
    s.synchronize()
    assert torch.equal(side, first)


@pytest.mark.gpu(sm=90)
def test_gpu_every_config_exact_with_fp16_accumulation():
    """1000x1496x1336 on 132 SMs: 128 x 256 tiles, 48 in 2 slices; 64 x 128 x 128, 60 of 192 in 2 slices after a
    whole round; the 128 x 128 tiles whole rounds (TMA-describable: N a multiple of 8; random-sign integer sums
    stay far below 2048: fp16 accumulation exact)."""
    m, n, k = 1000, 1496, 1336
    a, b = make_inputs(m, n, k, "TN", device="cuda", seed=5)
    for cfg in configs("triton_streamk"):
        c = poisoned_call(lambda out: triton_kernels.hgemm(a, b, out=out, acc="fp16", kernel="triton_streamk",
                                                           config=cfg), m, n, "cuda")
        assert_exact(c, a, b, f"streamk {cfg.name} acc fp16")
