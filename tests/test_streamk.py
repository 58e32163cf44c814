"""The stream-K Triton kernel (triton_kernels/streamk.py): its host schedule (the data-parallel / stream-K split,
every k-iteration in exactly one program's share, the workspace slots), exact integer checks on shapes whose tiles
are cut between programs (every layout, fp16 and bf16, both accumulations), a strided output, bitwise determinism
and counters left at zero; on a GPU the same on the shapes stream-K is for.

Under the interpreter the grid has `streamk.INTERPRETER_SMS` programs (5), so the small shapes here cut their
tiles between two and three programs; some tests change it to see other cuts."""
import pytest
import torch

import triton_kernels
from compare.reference import make_inputs
from hgemm_common.validation import DTYPES
from triton_kernels import configs, splitk, streamk
from triton_kernels.common import cdiv

from conftest import DEVICE, HAS_CUDA
from helpers import assert_exact, poisoned_call

DTYPE_ACCS = [("fp16", "fp32"), ("fp16", "fp16"), ("bf16", "fp32")]
PIN = {} if not HAS_CUDA else {"config": configs("triton_streamk")[1]}  # small shapes on a GPU: one tile, untimed


# ---------------------------------------------------------------------------------------------- the schedule
@pytest.mark.parametrize("tiles,iters,sms,want_programs,want_sk", [
    (12, 4, 4, 4, 0),  # T % G == 0: every tile data-parallel
    (1, 1, 132, 1, 0),  # one k-iteration: one program, data-parallel
    (2, 3, 5, 5, 2),  # T < G: every tile stream-K
    (64, 128, 132, 132, 64),  # 200x8192x8192 in 128 x 256 tiles: every tile stream-K
    (9, 3, 5, 5, 9),  # G <= T < 2G
    (12, 3, 5, 5, 7),  # T >= 2G: T % G + G stream-K, one whole round data-parallel
    (512, 64, 132, 132, 248),  # 4096^3 in 128 x 256 tiles: 116 + 132 stream-K, two rounds data-parallel
    (3, 1, 132, 3, 0),  # fewer k-iterations than SMs: one program each, data-parallel
])
def test_schedule_splits_tiles_by_the_hybrid_rule(tiles, iters, sms, want_programs, want_sk):
    s = streamk.schedule(tiles, iters, sms)
    assert (s.programs, s.sk_tiles) == (want_programs, want_sk)
    assert (tiles - s.sk_tiles) % s.programs == 0  # the data-parallel tiles are whole rounds


def test_shares_cover_every_k_iteration_once():
    """Program shares are contiguous, in program order, and cover the stream-K k-iterations exactly once; `owner_of`
    inverts `share_start`; every stream-K tile is cut between consecutive programs, at most `slots` of them, and
    `slots` is reached (the workspace is sized exactly)."""
    for tiles in (1, 2, 5, 9, 12, 64, 133, 300):
        for iters in (1, 2, 3, 7, 64):
            for sms in (1, 3, 5, 7, 132):
                check_shares(tiles, iters, sms)


def check_shares(tiles: int, iters: int, sms: int) -> None:
    g, sk, slots = streamk.schedule(tiles, iters, sms)
    where = (tiles, iters, sms)
    total = sk * iters
    starts = [streamk.share_start(p, total, g) for p in range(g + 1)]
    assert starts[0] == 0 and starts[-1] == total and starts == sorted(starts), where
    lengths = [starts[p + 1] - starts[p] for p in range(g)]
    assert max(lengths) - min(lengths) <= 1, where
    for it in range(total):
        p = streamk.owner_of(it, total, g)
        assert starts[p] <= it < starts[p + 1], (where, it, p)
    parts = [streamk.owner_of(t * iters + iters - 1, total, g) - streamk.owner_of(t * iters, total, g) + 1
             for t in range(sk)]
    assert all(1 <= x <= slots for x in parts) and (not parts or max(parts) == slots), where
    assert slots == 1 or sk > 0, where


# ---------------------------------------------------------------------------------------------- exact checks
# (M, N, K): leading dimensions multiples of 8 (TMA), M and N off the 32 x 32 tile, K off BLOCK_K (32). On 5
# programs: 2 tiles of 3 k-iterations (every tile stream-K, cut 2 and 3 ways); 9 tiles of 7 (every tile stream-K);
# 12 tiles of 3 (7 stream-K, one round data-parallel); 15 tiles (whole rounds, data-parallel only); one tile.
SHAPES = [(40, 24, 72), (72, 88, 200), (104, 96, 72), (96, 136, 40), (8, 8, 8)]


def exact_cases():
    """fp16 (fp32 accumulation) in every layout on the shapes whose tiles are cut, bf16 in NN and TT there, fp16
    accumulation in NN; the data-parallel-only and one-tile shapes in fp16, NN and TT."""
    for m, n, k in SHAPES:
        cut = streamk.schedule(cdiv(m, 32) * cdiv(n, 32), cdiv(k, 32), streamk.INTERPRETER_SMS).sk_tiles > 0
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
@pytest.mark.parametrize("programs", [2, 3, 7, 11])
def test_exact_on_other_grids(programs, monkeypatch):
    """Other program counts cut the same tiles elsewhere (a tile between up to 4 programs, shares of 1 k-iteration
    at 11 programs on 9 tiles of 2 -- some programs with none past their one tile)."""
    monkeypatch.setattr(streamk, "INTERPRETER_SMS", programs)
    for m, n, k in ((72, 88, 40), (40, 24, 200)):
        a, b = make_inputs(m, n, k, "NT", device=DEVICE, seed=programs, dtype="fp16")
        c = poisoned_call(lambda out: triton_kernels.hgemm(a, b, out=out, kernel="triton_streamk"), m, n, DEVICE)
        assert_exact(c, a, b, f"streamk on {programs} programs, {m}x{n}x{k}")


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_exact_into_an_output_with_a_padded_leading_dimension(dtype):
    """Stream-K tiles are stored through pointers with C's strides, data-parallel tiles by TMA: both into an out=
    whose rows are 16 elements longer than N."""
    m, n, k = 104, 96, 72  # 7 stream-K tiles, one round data-parallel
    a, b = make_inputs(m, n, k, "NN", device=DEVICE, seed=3, dtype=dtype)
    buf = torch.full((m, n + 16), float("nan"), dtype=DTYPES[dtype], device=DEVICE)
    out = buf[:, :n]
    assert triton_kernels.hgemm(a, b, out=out, kernel="triton_streamk", **PIN) is out
    assert_exact(out, a, b, "padded out")
    assert torch.isnan(buf[:, n:]).all()  # nothing written past N


@pytest.mark.parametrize("dtype", ["fp16", pytest.param("bf16", marks=pytest.mark.gpu)])
def test_deterministic_and_counters_left_at_zero(dtype):
    """Random inputs (partial sums rounded in fp32, so the order of the fix-up's sum shows in the bits): the same
    bits on every run, other addresses too, and every tile counter back at zero for the next call."""
    a, b = make_inputs(72, 88, 200, "NN", device=DEVICE, seed=11, kind="randn", dtype=dtype)
    c1 = triton_kernels.hgemm(a, b, kernel="triton_streamk", **PIN)
    c2 = triton_kernels.hgemm(a, b, kernel="triton_streamk", **PIN)
    c3 = triton_kernels.hgemm(a.clone(), b.clone(), kernel="triton_streamk", **PIN)
    assert torch.equal(c1, c2) and torch.equal(c1, c3)
    counts = splitk.COUNTERS.get(a.device, 1)
    assert int(counts.count_nonzero()) == 0


# ---------------------------------------------------------------------------------------------- GPU only
# The shapes stream-K is for (issue 48): too few 128 x 256 tiles for the SMs (200x8192x8192: 64), a small output
# over a long K (384x384x24576: 6 tiles of 128 x 256), and an odd one whose tiles fill a partial last round.
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
    """Random inputs, the widest tile (the most cut tiles): bitwise-equal results over repeated calls, on a side
    stream too (its own workspace and counters)."""
    a, b = make_inputs(m, n, k, "NN", device="cuda", seed=21, kind="randn")
    cfg = configs("triton_streamk")[0]
    first = triton_kernels.hgemm(a, b, kernel="triton_streamk", config=cfg)
    for _ in range(5):
        assert torch.equal(triton_kernels.hgemm(a, b, kernel="triton_streamk", config=cfg), first)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        side = triton_kernels.hgemm(a, b, kernel="triton_streamk", config=cfg)
    s.synchronize()
    assert torch.equal(side, first)
    tiles = cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n)
    k_iters = cdiv(k, cfg.block_k)
    assert streamk.schedule(tiles, k_iters, torch.cuda.get_device_properties(0).multi_processor_count).sk_tiles > 0


@pytest.mark.gpu(sm=90)
def test_gpu_every_config_exact_with_fp16_accumulation():
    # TMA-describable (N a multiple of 8); random-sign integer sums stay far below 2048: fp16 accumulation exact
    m, n, k = 1000, 1496, 1336
    a, b = make_inputs(m, n, k, "TN", device="cuda", seed=5)
    for cfg in configs("triton_streamk"):
        c = poisoned_call(lambda out: triton_kernels.hgemm(a, b, out=out, acc="fp16", kernel="triton_streamk",
                                                           config=cfg), m, n, "cuda")
        assert_exact(c, a, b, f"streamk {cfg.name} acc fp16")
