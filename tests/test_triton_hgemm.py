"""The Triton HGEMM on every layout, config, dtype (fp16, bf16) and accumulation: exact integer checks
(TESTING.md).

Runs under the interpreter on the CPU, and on CUDA tensors when a GPU is present.

bf16 on the CPU: Triton 3.6's interpreter multiplies the bit patterns of bf16 dot operands and truncates fp32 ->
bf16 casts (test_interpreter_bf16_findings), so the kernels' bf16 instantiations run there with two
interpreter-only substitutions (triton_kernels/common.py `dot_acc`, `to_output`): the dot's operands are decoded to
fp32 first (exact: products of bf16 values fit fp32) and the result is rounded to nearest even by hand. Everything
else is the bf16 path itself: bf16 loads through pointers and TMA descriptors, masks, the K tail, split-K's fp32
partials and its reduction, the bf16 store. So the same exact checks as fp16 (odd shapes, every layout, every
configuration, integers with |C| <= 256: `compare.reference.make_inputs`) prove the bf16 path's indexing on the
CPU; the bf16 tensor-core instruction is proven by the sm_90 compile (HGMMA ...F32.BF16 / HMMA.16816.F32.BF16 in
SASS: test_bf16_compiles_to_bf16_tensor_cores), and both run for real in the GPU tests.
"""
import re

import pytest
import torch
import triton
import triton.language as tl

import triton_kernels
from compare.reference import LAYOUTS, compare, error_bound, make_inputs, negative_view, poisoned_out, reference
from hgemm_common.operands import tma_describable
from hgemm_common.record import ACCS_FOR
from hgemm_common.validation import DTYPES, dtype_name
from triton_kernels import Config, configs, dispatch, splitk, splitk_wide
from triton_kernels.common import to_output
from triton_kernels.variants import BY_KERNEL, KERNEL_NAMES, kernel_module

from conftest import DEVICE, HAS_CUDA
from helpers import assert_exact, poisoned_call, run_children
from helpers import ints as helpers_ints
from shapes import small_triples

# Under the interpreter `config=None` means INTERPRETER_CONFIG; on a GPU it means timing the kernel's list.
ACCS = triton_kernels.ACCUMULATIONS
# (dtype, accumulation) pairs each kernel offers: fp16 with fp32 or fp16, bf16 with fp32 only.
DTYPE_ACCS = [pytest.param(d, acc, id=f"{d}-{acc}") for d, accs in ACCS_FOR.items() for acc in accs]
# bf16 where the interpreter adds nothing to fp16's proof (determinism) or a GPU-sized problem: GPU only.
GPU_BF16 = ["fp16", pytest.param("bf16", marks=pytest.mark.gpu)]
# The gemv kernel on problems of many rows (one program per row: minutes in the interpreter): GPU only; its CPU
# proof is test_gemv_every_config_exact and test_gemv_exact_any_shape.
GPU_GEMV = pytest.param("gemv", marks=pytest.mark.gpu)


# On a GPU `config=None` times every config for each new kind of call (compiling each): the small-shape tests pin
# one instead (kernel="auto" with a pinned config takes the ladder's choice, untimed); the timed path has its own
# tests below and in tests/test_dispatch.py.
GPU_PIN = {"triton_blocked": configs("triton_blocked")[5], "triton_tma": configs("triton_tma")[5],
           "triton_splitk": configs("triton_splitk")[4], "triton_splitk_tma": configs("triton_splitk_tma")[9],
           "triton_gemv": configs("triton_gemv")[1], "triton_splitk_wide": configs("triton_splitk_wide")[0],
           "triton_streamk": configs("triton_streamk")[1]}


def pinned(a, b, **kw) -> dict:
    """hgemm's keyword arguments with a GPU_PIN config added on a GPU (none given)."""
    if HAS_CUDA and "config" not in kw:
        chosen = KERNEL_NAMES[kw.get("kernel", "auto")]  # (older names: their record's)
        if chosen == "auto":
            chosen = dispatch.kernel_for(dispatch.device_arch(a), a, b)
        kw["config"] = GPU_PIN[chosen]
    return kw


def every_config(kernel: str, dtype: str, acc: str) -> list[Config]:
    """The configurations an every-config test runs: on a GPU all of them; under the interpreter (which ignores
    num_warps and num_stages) all of them in fp16 with fp32 accumulation, and for the other pairs the fewest that
    still hold every tile shape, split and epilogue split of the list (the GPU gate runs every pair on all)."""
    cfgs = configs(kernel)
    if HAS_CUDA or (dtype, acc) == ("fp16", "fp32"):
        return cfgs
    seen, cover = set(), []
    for c in cfgs:
        facets = {("tile", c.block_m, c.block_n, c.block_k), ("split", c.split_k), ("epilogue", c.epilogue_split)}
        if facets - seen:
            cover.append(c)
            seen |= facets
    return cover


def run_exact(a, b, **kw):
    """hgemm into a NaN-poisoned out=, exact against the float64 reference."""
    kw = pinned(a, b, **kw)
    c = poisoned_call(lambda out: triton_kernels.hgemm(a, b, out=out, **kw), a.shape[0], b.shape[1], a.device,
                      dtype_name(a.dtype))
    assert_exact(c, a, b, f"{kw}")


def ints(shape, g, dtype="fp16"):
    """tests/helpers.ints on DEVICE from generator g; callers keep K <= 28 where dtype is bf16 (|C| <= 256)."""
    return helpers_ints(*shape, dtype=dtype, device=DEVICE, generator=g)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", ["auto", "splitk"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("m,n,k", small_triples())
def test_exact_all_layouts(m, n, k, layout, kernel, dtype):
    a, b = make_inputs(m, n, k, layout, device=DEVICE, seed=m * 1000 + n * 10 + k, dtype=dtype)
    run_exact(a, b, kernel=kernel)


@pytest.mark.parametrize("dtype,acc", DTYPE_ACCS)
@pytest.mark.parametrize("layout", ["NN", "TT"])
def test_exact_both_accumulations(dtype, acc, layout):
    a, b = make_inputs(33, 100, 129, layout, device=DEVICE, seed=7, dtype=dtype)
    run_exact(a, b, acc=acc)


@pytest.mark.parametrize("cfg", configs("blocked"), ids=lambda c: c.name)
@pytest.mark.parametrize("dtype,acc", DTYPE_ACCS)
def test_every_config_exact(cfg, dtype, acc):
    # One tile plus one on every side, and K with a partial last tile: edges on all three axes.
    m, n, k = cfg.block_m + 1, cfg.block_n + 1, cfg.block_k * cfg.num_stages + 8
    a, b = make_inputs(m, n, k, "NT", device=DEVICE, seed=1, dtype=dtype)
    run_exact(a, b, acc=acc, config=cfg)


@pytest.mark.parametrize("dtype", DTYPES)
def test_even_k_path(dtype):
    cfg = Config(32, 32, 32, num_warps=4, num_stages=2)
    a, b = make_inputs(40, 24, 96, "NN", device=DEVICE, seed=3, dtype=dtype)  # K multiple of BLOCK_K: no K mask
    run_exact(a, b, config=cfg)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", ["auto", "splitk"])
def test_strided_views_need_no_copy(kernel, dtype):
    g = torch.Generator().manual_seed(5)
    k = 100 if dtype == "fp16" else 28  # bf16: |C| <= 9 K <= 256
    big_a = ints((33, 2 * k), g, dtype)
    big_b = ints((k + 7, 3 * 17), g, dtype)
    a = big_a[:, ::2]  # column stride 2: neither row- nor column-major
    b = big_b[3:k + 3, ::3]  # storage offset, padded leading dimension, column stride 3
    assert triton_kernels.layout_of(a, b) == "strided"
    run_exact(a, b, kernel=kernel)


@pytest.mark.parametrize("dtype", DTYPES)
def test_padded_leading_dimension_and_offset(dtype):
    g = torch.Generator().manual_seed(6)
    k = 63 if dtype == "fp16" else 27  # bf16: |C| <= 9 K <= 256
    a = ints((20, 70), g, dtype)[1:18, 3:3 + k]  # 17 x K, ld 70, offset
    b = ints((80, 40), g, dtype)[5:5 + k, 1:34]  # K x 33
    assert triton_kernels.layout_of(a, b) == "NN"
    run_exact(a, b)


@pytest.mark.parametrize("dtype", DTYPES)
def test_out_with_strides(dtype):
    a, b = make_inputs(17, 33, 40, "NN", device=DEVICE, seed=8, dtype=dtype)
    out_t = poisoned_out(33, 17, DEVICE, dtype)
    c = triton_kernels.hgemm(a, b, out=out_t.t())  # column-major output
    assert c.data_ptr() == out_t.data_ptr()
    assert compare(c, reference(a, b)).ok


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["NN", "TT"])
@pytest.mark.parametrize("which", ["a", "b", "out", "all"])
def test_negative_views_keep_their_sign(which, layout, dtype):
    """Operands with the neg bit set store their values' negatives; read raw, the product would carry the wrong sign.
    A and B are resolved into copies, a negative view of C is written through copy_. Each call twice: the first
    chooses the plan, the second takes the cached one; and once through the operator."""
    a, b = make_inputs(17, 33, 40, layout, device=DEVICE, seed=11, dtype=dtype)
    ref = reference(a, b)
    kw = pinned(a, b)
    x = negative_view(a) if which in ("a", "all") else a
    y = negative_view(b) if which in ("b", "all") else b
    for _ in range(2):
        store = poisoned_out(17, 33, DEVICE, dtype)
        out = negative_view(store) if which in ("out", "all") else store
        c = triton_kernels.hgemm(x, y, out=out, **kw)
        assert c is out and compare(c, ref).ok, which
        assert compare(triton_kernels.hgemm(x, y, **kw), ref).ok, which
    if which != "out":
        from triton_kernels import ops  # registers the operator
        assert compare(ops.triton_hgemm(x, y), ref).ok, which


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", ["auto", "blocked", "splitk", GPU_GEMV])
def test_broadcast_operands_with_zero_strides(kernel, dtype):
    """Expanded (broadcast) operands, a leading dimension of 0 (one row of A repeated, one column or row of B
    repeated), with shapes TMA could take otherwise: exact like torch.matmul."""
    g = torch.Generator().manual_seed(14)
    k = 136 if dtype == "fp16" else 24  # bf16: |C| <= 9 K <= 256
    full_a, full_b = ints((72, k), g, dtype), ints((k, 200), g, dtype)
    cases = [(ints((1, k), g, dtype).expand(72, k), full_b), (full_a, ints((k, 1), g, dtype).expand(k, 200)),
             (full_a, ints((1, 200), g, dtype).expand(k, 200))]
    for a, b in cases:
        c = triton_kernels.hgemm(a, b, **pinned(a, b, kernel=kernel))
        assert compare(c, reference(a, b)).ok, (a.stride(), b.stride())


@pytest.mark.parametrize("dtype", DTYPES)
def test_default_allocates_contiguous(dtype):
    a, b = make_inputs(7, 9, 16, "TN", device=DEVICE, seed=9, dtype=dtype)
    for _ in range(2):  # the first call of this kind, then the cached plan's call
        c = triton_kernels.hgemm(a, b, **pinned(a, b))
        assert c.shape == (7, 9) and c.dtype == DTYPES[dtype] and c.is_contiguous()
        assert compare(c, reference(a, b)).ok


@pytest.mark.parametrize("dtype", DTYPES)
def test_nan_propagates_to_its_row_only(dtype):
    a, b = make_inputs(17, 20, 33, "NN", device=DEVICE, seed=10, dtype=dtype)
    a = a.clone()
    a[5, 7] = float("nan")
    c = triton_kernels.hgemm(a, b).cpu()
    assert torch.isnan(c[5]).all()
    assert torch.isfinite(torch.cat([c[:5], c[6:]])).all()


@pytest.mark.filterwarnings("ignore:overflow encountered")  # numpy's, in the interpreter's fp32 dot
@pytest.mark.parametrize("dtype,x", [("fp16", 40.0), ("bf16", 2.0**63)])
def test_overflow_gives_inf_like_reference(dtype, x):
    # fp16: 64 x 1600 = 102400 > 65504; bf16 (fp32's range): 64 x 2^126 = 2^132 > 3.4e38
    a = torch.full((4, 64), x, dtype=DTYPES[dtype], device=DEVICE)
    b = torch.full((64, 4), x, dtype=DTYPES[dtype], device=DEVICE)
    c = triton_kernels.hgemm(a, b)
    assert torch.isinf(c).all() and (c > 0).all()
    assert compare(c, reference(a, b)).ok


@pytest.mark.parametrize("dtype", GPU_BF16)
@pytest.mark.parametrize("kernel", ["auto", "splitk", "splitk_tma", "splitk_wide", GPU_GEMV])
def test_deterministic(kernel, dtype):
    """Bitwise-equal results on the same inputs: split-K sums its partials in a fixed order, no atomics."""
    tma = kernel in ("splitk_tma", "splitk_wide")
    k = 312 if tma else 311  # TMA: leading dimensions multiples of 8
    a, b = make_inputs(100, 129, k, "NN", device=DEVICE, seed=11, kind="randn", dtype=dtype)
    b = b if not tma else b.t().contiguous().t()  # B column-major (ld 312)
    c1 = triton_kernels.hgemm(a, b, kernel=kernel)
    c2 = triton_kernels.hgemm(a, b, kernel=kernel)
    c3 = triton_kernels.hgemm(a.clone(), b.clone(), kernel=kernel)  # other addresses, the same plan
    assert torch.equal(c1, c2) and torch.equal(c1, c3)


@pytest.mark.parametrize("dtype,acc", DTYPE_ACCS)
def test_random_within_bound_small(dtype, acc):
    a, b = make_inputs(64, 48, 200, "NT", device=DEVICE, seed=12, kind="randn", dtype=dtype)
    ref = reference(a, b)
    v = compare(triton_kernels.hgemm(a, b, acc=acc), ref, error_bound(a, b, ref, acc))
    assert v.ok, v.detail


# ---------------------------------------------------------------------------------------------- GPU only
@pytest.mark.gpu
@pytest.mark.parametrize("dtype,acc", DTYPE_ACCS)
@pytest.mark.parametrize("m,n,k", [(4096, 4096, 4096), (3000, 5000, 2000), (4097, 1023, 4099), (496, 8192, 233)])
def test_random_large_within_bound(m, n, k, dtype, acc):
    a, b = make_inputs(m, n, k, "NN", device="cuda", seed=13, kind="randn", dtype=dtype)
    ref = reference(a, b)
    out = poisoned_out(m, n, "cuda", dtype)
    # The table's plan once (4096^3, fp32); pinned elsewhere.
    cfg = None if (m, acc) == (4096, "fp32") else configs("blocked")[0]
    v = compare(triton_kernels.hgemm(a, b, acc=acc, out=out, config=cfg, kernel="blocked"), ref,
                error_bound(a, b, ref, acc))
    assert v.ok, v.detail
    if acc == "fp32":  # no worse than a few times cuBLAS's own error on the same inputs
        base = compare(torch.matmul(a, b), ref, error_bound(a, b, ref, acc))
        assert v.max_abs_err <= 4 * base.max_abs_err + 1e-3, (v.max_abs_err, base.max_abs_err)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_exact_large_odd_planned(layout, dtype):
    a, b = make_inputs(1000, 1500, 1337, layout, device="cuda", seed=14, dtype=dtype)
    run_exact(a, b, config=None if layout == "NN" else configs("blocked")[3])  # NN: the table's plan


@pytest.mark.gpu
def test_non_default_stream():
    a, b = make_inputs(512, 384, 1000, "NN", device="cuda", seed=15)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        a2 = a * 1  # producer on the same stream
        c = triton_kernels.hgemm(a2, b)
    s.synchronize()
    assert compare(c, reference(a, b)).ok


@pytest.mark.skipif(HAS_CUDA, reason="interpreter-only behaviour")
@pytest.mark.parametrize("kernel", list(BY_KERNEL))
def test_interpreter_launches_the_pinned_config(kernel, monkeypatch):
    """Autotuning needs a driver: under the interpreter config=None must launch each kernel's pinned config."""
    module = kernel_module(BY_KERNEL[kernel])
    seen = []
    real = module.launches
    monkeypatch.setattr(module, "launches", lambda *args: (seen.append(args[4]), real(*args))[1])
    a, b = make_inputs(40, 24, 72, "NN", device=DEVICE, seed=17)
    run_exact(a, b, kernel=kernel)
    assert seen == [module.INTERPRETER_CONFIG]


# ---------------------------------------------------------------------------------------------- TMA kernel
# Aligned shapes (every leading dimension a multiple of 8 halves), with edges on every axis.
TMA_SHAPES = [(8, 8, 8), (40, 24, 72), (17, 40, 136), (96, 8, 16), (1, 64, 8)]


@pytest.mark.parametrize("kernel", ["tma", "splitk_tma", "splitk_wide"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("m,n,k", TMA_SHAPES)
def test_tma_exact_all_layouts(m, n, k, layout, dtype, kernel):
    a, b = make_inputs(m, n, k, layout, device=DEVICE, seed=m + n + k, dtype=dtype)
    if tma_describable(a, b):
        run_exact(a, b, kernel=kernel)
    else:  # (1, K) column-major A has row stride 1: no TMA descriptor; refused, and `auto` takes the blocked path
        with pytest.raises(ValueError, match="TMA needs"):
            triton_kernels.hgemm(a, b, kernel=kernel)
        run_exact(a, b, kernel="auto")


@pytest.mark.parametrize("dtype,acc", DTYPE_ACCS)
def test_tma_every_config_exact(dtype, acc):
    kernel = "tma"
    # One tile plus 8 on M and N (TMA boxes past the edge), K with a partial last tile: fewer K tiles than stages,
    # then stages * BLOCK_K + 8 (the ring of stages wraps and the last tile is partial); persistent programs walk
    # several tiles each.
    for cfg in every_config(kernel, dtype, acc):
        for k in (cfg.block_k * 2 + 8, cfg.num_stages * cfg.block_k + 8):
            a, b = make_inputs(2 * cfg.block_m + 8, cfg.block_n + 8, k, "NT", device=DEVICE, seed=2, dtype=dtype)
            run_exact(a, b, acc=acc, config=cfg, kernel=kernel)


# Wide tiles under the interpreter: 32 + 16 columns, and 64 + 16 with the main part stored in halves (64 rows: a
# shorter tile would run swapped)
WIDE = [Config(64, 48, 32, group_m=4, num_warps=4, num_stages=2),
        Config(64, 80, 32, group_m=4, num_warps=4, num_stages=2, epilogue_split=2)]


@pytest.mark.parametrize("dtype,layouts", [("fp16", LAYOUTS), ("bf16", ["NT"])])
def test_tma_wide_tiles_exact(dtype, layouts):
    """The TMA kernel's wide tiles (a power of two plus a smaller one, two accumulators side by side): N ending
    inside the main part (the tail's loads and store wholly past the edge), inside the tail, on the tile's edge,
    and three tiles with the last one partial; two row tiles, and K with a partial last tile. On a GPU the shipped
    wide configurations too."""
    for cfg in WIDE + ([c for c in configs("triton_tma") if c.n_parts[1]] if HAS_CUDA else []):
        main, tail = cfg.n_parts
        for n in (main - 8, main + 8, main + tail, 2 * (main + tail) + main + 8):
            for layout in layouts:
                a, b = make_inputs(72, n, 72, layout, device=DEVICE, seed=n, dtype=dtype)
                run_exact(a, b, config=cfg, kernel="tma")


# Swapped tiles under the interpreter (fewer than 64 rows: C^T = B^T A^T, stored transposed)
SWAPPED = [Config(16, 64, 32, group_m=4, num_warps=4, num_stages=2),
           Config(32, 64, 32, group_m=4, num_warps=4, num_stages=3)]


@pytest.mark.parametrize("dtype,acc,layouts", [("fp16", "fp32", LAYOUTS), ("fp16", "fp16", ["NT"]),
                                               ("bf16", "fp32", ["TN"])])
def test_tma_swapped_tiles_exact(dtype, acc, layouts):
    """The TMA kernel's short tiles, run swapped (`tma_persistent.swapped`): M of 1, under one tile, one tile plus
    one (a second tile of C^T's columns, mostly past the edge) and several; N under one tile, one plus 8 and three
    and a bit; K with a partial last tile. Every layout of A and B: the swap turns each operand's descriptor into
    the other's. On a GPU the shipped swapped configurations too."""
    from triton_kernels import tma_persistent as tp

    cfgs = SWAPPED + ([c for c in configs("triton_tma") if tp.swapped(c)] if HAS_CUDA else [])
    assert all(tp.swapped(c) for c in cfgs)
    ran = 0
    for cfg in cfgs:
        for m, n in ((1, cfg.block_n - 8), (cfg.block_m - 3, cfg.block_n + 8), (cfg.block_m + 1, 3 * cfg.block_n + 8),
                     (3 * cfg.block_m + 8, 40)):
            for layout in layouts:
                m_ = m if layout[0] == "N" else -(-m // 8) * 8  # a column-major A: M a multiple of 8 (TMA)
                a, b = make_inputs(m_, n, 2 * cfg.block_k + 8, layout, device=DEVICE, seed=m_ * n, dtype=dtype)
                assert tma_describable(a, b)
                run_exact(a, b, acc=acc, config=cfg, kernel="tma")
                ran += 1
    assert ran == 4 * len(cfgs) * len(layouts)


def test_swapped_tiles_are_checked():
    """A tile short of wgmma's 64 rows with at least 64 columns runs swapped, its columns on wgmma's row side: one
    power of two, one epilogue slice, refused by name otherwise. A tile short both ways runs as it is (mma.sync),
    as a pinned 32 x 32 tile always did (kernel="auto" takes the TMA kernel for a pinned config on a Hopper GPU)."""
    from triton_kernels import tma_persistent as tp

    a, b = make_inputs(8, 64, 32, "NN", device=DEVICE, seed=3)
    for cfg in (Config(16, 96, 32), Config(32, 128, 32, epilogue_split=2)):
        with pytest.raises(ValueError, match=r"a tile of fewer than 64 rows and at least 64 columns runs swapped"):
            triton_kernels.hgemm(a, b, config=cfg, kernel="tma")
    short = Config(32, 32, 32, num_warps=4, num_stages=2)
    assert not tp.swapped(short) and tp.check_config(short) is short
    run_exact(a, b, config=short, kernel="tma")


def test_wide_tile_widths_are_checked():
    """A wide width is a power of two plus a smaller one of at least 16 (`Config.n_parts`), pinned for the TMA
    kernel only; other kernels and other widths are refused by name."""
    assert Config.from_name("128x192x64_w8_s4_g8").n_parts == (128, 64)
    assert Config(128, 256, 64).n_parts == (256, 0)
    a, b = make_inputs(40, 48, 32, "NN", device=DEVICE, seed=3)
    with pytest.raises(ValueError, match=r"block_n=48 must be a power of two >= 16 \(tl.dot\)$"):
        triton_kernels.hgemm(a, b, config=WIDE[0], kernel="blocked")
    for name in ("128x200x64_w8_s4_g8", "128x136x64_w8_s4_g8"):  # 128 + 72; 128 + 8 (under 16)
        with pytest.raises(ValueError, match=r"power of two >= 16 \(tl.dot\) or a power of two plus a smaller one"):
            Config.from_name(name)
    with pytest.raises(ValueError, match=r"block_n=0 must be a power of two >= 16"):
        Config.from_name("128x0x64_w8_s4_g8")
    with pytest.raises(ValueError, match=r"block_n=768: a TMA box holds at most 256 columns"):  # 512 + 256
        triton_kernels.hgemm(a, b, config=Config(128, 768, 64, num_warps=8), kernel="tma")


@pytest.mark.parametrize("dtype,acc", DTYPE_ACCS)
def test_splitk_every_config_exact(dtype, acc):
    """Every tile and split: one tile plus one on M and N, K cut into exactly split_k slices of two K tiles, the
    last one 8 short (masked)."""
    for cfg in every_config("splitk", dtype, acc):
        m, n, k = cfg.block_m + 1, cfg.block_n + 1, 2 * cfg.split_k * cfg.block_k - 8
        assert splitk.slices(k, cfg)[1] == cfg.split_k
        a, b = make_inputs(m, n, k, "TN", device=DEVICE, seed=cfg.split_k, dtype=dtype)
        run_exact(a, b, acc=acc, config=cfg, kernel="splitk")


@pytest.mark.parametrize("dtype,acc", DTYPE_ACCS)
def test_splitk_tma_every_config_exact(dtype, acc):
    """Every tile and split of the TMA split-K kernel: one tile plus 8 on M and N (TMA boxes past the edges), K cut
    into exactly split_k slices of two K tiles, the last one 8 short (TMA's zero fill), A column-major."""
    for cfg in every_config("splitk_tma", dtype, acc):
        m, n, k = cfg.block_m + 8, cfg.block_n + 8, 2 * cfg.split_k * cfg.block_k - 8
        assert splitk.slices(k, cfg)[1] == cfg.split_k
        a, b = make_inputs(m, n, k, "TN", device=DEVICE, seed=cfg.split_k, dtype=dtype)
        run_exact(a, b, acc=acc, config=cfg, kernel="splitk_tma")


@pytest.mark.parametrize("dtype,acc", DTYPE_ACCS)
def test_splitk_wide_every_config_exact(dtype, acc):
    """Every tile and split of the wide split-K kernel (on the CPU: every tile at its fewest slices, in fp16 with
    fp32 accumulation, the other pairs on the first tile; the interpreter runs a program a tenth of a second): one
    tile plus 8 on M and N (TMA boxes past the edges, masked partial stores), K cut into exactly split_k slices of
    two K tiles, the last one 8 short (TMA's zero fill), A column-major."""
    cfgs = configs("splitk_wide")
    if not HAS_CUDA:
        cfgs = [c for c in cfgs if c.split_k == min(splitk_wide.SPLITS)]
        cfgs = cfgs if (dtype, acc) == ("fp16", "fp32") else cfgs[:1]
    for cfg in cfgs:
        m, n, k = cfg.block_m + 8, cfg.block_n + 8, 2 * cfg.split_k * cfg.block_k - 8
        assert splitk.slices(k, cfg)[1] == cfg.split_k
        a, b = make_inputs(m, n, k, "TN", device=DEVICE, seed=cfg.split_k, dtype=dtype)
        run_exact(a, b, acc=acc, config=cfg, kernel="splitk_wide")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("split", [*splitk_wide.SPLITS, 5])
def test_splitk_wide_every_split_exact(split, dtype):
    """The reduction at every split the configurations use, and at 5 (not a power of two: the reduction masks the
    slice axis it loads, rounded up to 8): a one-tile problem (16 x 32 tiles, the interpreter's size) with M, N off
    the tile and K = two K tiles a slice, 8 short; then K = 8 and 40, too short for split_k slices (the slices are
    whole K tiles, so one and two of them). Every element of C is written (NaN-poisoned out)."""
    for k in (2 * split * 32 - 8, 8, 40):
        cfg = Config(16, 32, 32, group_m=2, num_warps=4, num_stages=2, split_k=split)
        a, b = make_inputs(13, 29, k, "NT", device=DEVICE, seed=split + k, dtype=dtype)
        run_exact(a, b, config=cfg, kernel="splitk_wide")
    assert splitk_wide.reduce_shape(split)[0] >= split
    assert splitk_wide.reduce_shape(5) == (8, splitk_wide.REDUCE_VALUES // 8)


def test_splitk_wide_prunes_to_grids_that_cover_the_sms():
    """kernel="auto" times the wide kernel's configurations whose grid (tiles x slices) is half a round to two rounds
    of the SMs: one 128 x 128 tile (128 x 128 x 131072) in 128 slices, four (256 x 256 x 65536) in 32 or 64."""
    from triton_kernels.common import problem_configs

    one = problem_configs(splitk_wide, 128, 128, 131072, 132)
    assert {c.split_k for c in one if (c.block_m, c.block_n) == (128, 128)} == {128}
    four = problem_configs(splitk_wide, 256, 256, 65536, 132)
    assert {c.split_k for c in four if (c.block_m, c.block_n) == (128, 128)} == {32, 64}
    assert all(66 <= triton.cdiv(256, c.block_m) * triton.cdiv(256, c.block_n) * c.split_k <= 264 for c in four)
    assert splitk_wide.worth_timing(256, 256, 65536, 132, True) and not splitk_wide.worth_timing(
        256, 256, 65536, 132, False)
    assert not splitk_wide.worth_timing(16, 4096, 4096, 132, True)  # K not long beside the output


@pytest.mark.parametrize("dtype,acc", DTYPE_ACCS)
def test_gemv_every_config_exact(dtype, acc):
    """Every tile and split of the CUDA-core kernel: one row, one tile plus one column, K cut into exactly split_k
    slices of two K tiles, the last one 8 short (masked); B column-major for half of them (loads along K)."""
    for i, cfg in enumerate(configs("gemv")):
        m, n, k = 1, cfg.block_n + 1, 2 * cfg.split_k * cfg.block_k - 8
        assert splitk.slices(k, cfg)[1] == cfg.split_k
        a, b = make_inputs(m, n, k, "NT" if i % 2 else "NN", device=DEVICE, seed=cfg.split_k, dtype=dtype)
        run_exact(a, b, acc=acc, config=cfg, kernel="gemv")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (1, 37, 100), (1, 130, 517), (3, 65, 250), (1, 8, 4096)])
def test_gemv_exact_any_shape(m, n, k, layout, dtype):
    """kernel="gemv" on odd shapes in every layout, several rows of A included (one program per row); 1x8x4096:
    K of 4096 in three slices of whole 16-deep K tiles, |C| up to 4096 * 9 (fp32 accumulation)."""
    a, b = make_inputs(m, n, k, layout, device=DEVICE, seed=m + n, dtype=dtype)
    run_exact(a, b, kernel="gemv")


def test_gemv_refuses_row_blocks():
    """A pinned configuration with more than one row per program is refused by name (the tl.dot kernels' 16-row
    floor does not apply to it; theirs still does)."""
    a, b = make_inputs(2, 32, 64, "NN", device=DEVICE, seed=1)
    with pytest.raises(ValueError, match=r"gemv kernel computes one row of A per program, so block_m must be 1"):
        triton_kernels.hgemm(a, b, config=Config(16, 32, 32, split_k=2), kernel="gemv")
    with pytest.raises(ValueError, match=r"block_m=1 must be a power of two >= 16 \(tl.dot\)"):
        triton_kernels.hgemm(a, b, config=Config(1, 32, 32), kernel="splitk")
    assert Config.from_name("1x64x128_w4_s1_g8_k8") == Config(1, 64, 128, 8, 4, 1, 8)


@pytest.mark.parametrize("k", [1, 8, 31, 33, 97])
def test_splitk_short_k_takes_fewer_slices(k):
    """K shorter than split_k tiles: the slices are whole K tiles, so fewer of them; none is empty."""
    cfg = Config(16, 32, 16, group_m=1, num_warps=4, num_stages=2, split_k=4)
    k_slice, split = splitk.slices(k, cfg)
    assert k_slice % cfg.block_k == 0 and (split - 1) * k_slice < k <= split * k_slice
    a, b = make_inputs(17, 33, k, "NN", device=DEVICE, seed=k)
    run_exact(a, b, config=cfg, kernel="splitk")


@pytest.mark.parametrize("dtype", DTYPES)
def test_splitk_fused_sums_like_the_two_pass_form(dtype):
    """The fused kernel's last-arriving slice sums the partials in slice order, like the reduction kernel: the same
    bits on non-integer data (where the order of the sum shows), and every tile counter is back at zero after."""
    g = torch.Generator().manual_seed(3)
    a = torch.randn(37, 300, generator=g).to(DTYPES[dtype]).to(DEVICE)
    b = torch.randn(300, 70, generator=g).to(DTYPES[dtype]).to(DEVICE)
    cfg = Config(16, 32, 32, group_m=2, num_warps=4, num_stages=2, split_k=4)
    outs = []
    for fused in (True, False):
        c = poisoned_out(37, 70, DEVICE, dtype)
        for spec in splitk.launches(a, b, c, False, cfg, fused=fused):
            triton_kernels.launch.jit_launch(spec)
        outs.append(c)
    assert torch.equal(outs[0], outs[1])
    assert compare(outs[0], reference(a, b), error_bound(a, b, reference(a, b))).ok
    assert not splitk.COUNTERS.get(a.device, 1).any()


@pytest.mark.parametrize("kernel", ["splitk", "splitk_tma", "splitk_wide"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_splitk_output_with_strides(dtype, kernel):
    a, b = make_inputs(17, 33, 200, "NT", device=DEVICE, seed=8, dtype=dtype)
    out_t = poisoned_out(33, 17, DEVICE, dtype)
    c = triton_kernels.hgemm(a, b, out=out_t.t(), kernel=kernel)
    assert compare(c, reference(a, b)).ok


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["NN", "TT"])
def test_staged_operands_exact(layout, dtype):
    """A plan that stages the operands TMA cannot describe (odd leading dimensions, a strided view) copies them to
    aligned buffers and runs the TMA kernel on the copies; a C TMA cannot store to is written back from one."""
    kernel = "triton_tma"
    a, b = make_inputs(37, 45, 99, layout, device=DEVICE, seed=9, dtype=dtype)
    b = torch.cat([b, b], dim=1)[:, ::2] if layout == "NN" else b  # NN: a strided B too
    out = poisoned_out(37, 45, DEVICE, dtype)
    stage = dispatch.staging(BY_KERNEL[kernel].alignment, a, b, out)
    assert stage[:2] == (True, True) and stage[2]
    run = dispatch.Runner(dispatch.Plan(kernel, configs(kernel)[3] if HAS_CUDA else
                                        kernel_module(BY_KERNEL[kernel]).INTERPRETER_CONFIG, stage), False)
    run(a, b, out)
    v = compare(out, reference(a, b))
    assert v.ok, v.detail


# Compiles every config of every Triton record for sm_90 in every dtype and accumulation it offers, in child
# processes side by side (the interpreter, on in this one, replaces @triton.jit functions by interpreted ones that
# cannot be compiled).
# The GPU found an fp16-only compile error the interpreter cannot see (tma_persistent.py's tma_dot_step); this
# catches that class on the CPU. For fp32 accumulation it also reads the SASS: the tensor-core instructions, local
# memory (LDL/STL), and in the PTX whether C is rounded to bf16 to nearest even (cvt.rn.bf16); and it compiles the
# split-K reduction, the kernel that writes split-K's C.
_ALL_CONFIGS_PROBE = """
import json, re, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from hgemm_common.record import ACCS_FOR
from triton_kernels import splitk, splitk_wide
from triton_kernels.triton_internals import COMPILE_OPTIONS
from triton_kernels.variants import VARIANTS, kernel_module

def compile_(fn, sig, consts, attrs, num_warps, num_stages):
    for name in consts:
        sig.setdefault(name, "constexpr")
    return triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs),
                          target=GPUTarget("cuda", 90, 32),
                          options=dict(num_warps=num_warps, num_stages=num_stages, **COMPILE_OPTIONS))

def facts(k):
    sass = k.asm["sass"]
    return dict(mma=sorted(set(re.findall(r"\\bH[G]?MMA\\.[\\w.]+", sass))),
                ffma=len(re.findall(r"\\bFFMA\\b", sass)),
                local=len(re.findall(r"\\b(?:LDL|STL)\\b", sass)), rn_bf16="cvt.rn.bf16" in k.asm["ptx"])

def ptxas_serializes(ptx):  # ptxas's warning C7515: it made the wgmmas wait for each other (Triton drops it)
    import os, subprocess, tempfile
    from triton import knobs
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.ptx")
        with open(path, "w") as f:
            f.write(ptx)
        run = subprocess.run([knobs.nvidia.ptxas.path, "-arch=sm_90a", "-v", path, "-o", os.path.join(d, "k.cubin")],
                             capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return "C7515" in run.stderr

units, serialized = {}, []

def mine(unit):  # whether a unit (a config in all its dtypes, or one reduction) is this child's (PART of PARTS): dealt
    # in turn, configs that compile alike one unit (split_k is a run-time argument of some split-K kernels), so that
    # one child compiles them and its Triton cache serves the others
    return units.setdefault(unit, len(units)) % PARTS == PART

failed, rows = [], []
for v in VARIANTS:
    if not v.interpretable:  # a Gluon kernel: its own source type and options, tests/test_gluon.py
        continue
    mod = kernel_module(v)
    for i, cfg in enumerate(mod.configs()):
        unit = [v.name, cfg.num_warps, cfg.num_stages, *(mod.inspect_source(cfg, d)[1:] for d in v.dtypes)]
        if not mine(repr(unit)):
            continue
        for dtype in v.dtypes:
            for acc in ACCS_FOR[dtype]:
                fn, sig, consts, attrs = mod.inspect_source(cfg, dtype)
                try:
                    k = compile_(fn, sig, dict(consts, ACC_FP16=acc == "fp16"), attrs, cfg.num_warps, cfg.num_stages)
                except Exception as e:  # noqa: BLE001 - reported by name
                    failed.append([v.name, cfg.name, dtype, acc, type(e).__name__])
                    continue
                if cfg.n_parts[1] and dtype == "fp16" and acc == "fp32":  # a wide tile: wgmmas left asynchronous?
                    serialized.append([v.name, cfg.name, ptxas_serializes(k.asm["ptx"])])
                # SASS (nvdisasm, the slow part): every bf16 instantiation, fp16's of the first config (what
                # `compare inspect` shows)
                if acc == "fp32" and (dtype == "bf16" or i == 0):
                    descs = [[m["elem_size"], m["elem_type"]] for m in k.metadata.tensordesc_meta or []]
                    rows.append(dict(record=v.name, config=cfg.name, first=i == 0, dtype=dtype, descs=descs,
                                     **facts(k)))
reduce = {}
for dtype in ("fp16", "bf16") if mine("reduce") else ():
    sig = {"p_ptr": "*fp32", "c_ptr": f"*{dtype}", "N": "i32", "SPLITS": "i32", "stride_ps": "i32",
           "stride_cm": "i32", "stride_cn": "i32"}
    k = compile_(splitk.splitk_reduce_kernel, sig, dict(INDEX_64=False, BLOCK=splitk.REDUCE_BLOCK), {}, 4, 1)
    reduce[dtype] = "cvt.rn.bf16" in k.asm["ptx"]
# the wide split-K kernel's reduction (its partial kernel stores fp32; this one rounds and writes C), 256 x 256 in
# 32 slices: M, N multiples of 16, a programmatic dependent launch
wide = {}
for dtype in ("fp16", "bf16") if mine("wide reduce") else ():
    sig = {"p_ptr": "*fp32", "c_ptr": f"*{dtype}", "M": "i32", "N": "i32", "SPLIT": "i32", "stride_cm": "i32"}
    slices_, block = splitk_wide.reduce_shape(32)
    attrs = {(i,): [["tt.divisibility", 16]] for i in (0, 1, 2, 3, 5)}
    k = compile_(splitk_wide.splitk_wide_reduce_kernel, sig, dict(stride_cn=1, INDEX_64=False, PDL=True,
                 SLICES=slices_, BLOCK=block), attrs, splitk_wide.REDUCE_WARPS, 1)
    wide[dtype] = dict(griddepcontrol="griddepcontrol.wait" in k.asm["ptx"],
                       loads=sorted(set(re.findall(r"\\bLDG[\\w.]*", k.asm["sass"]))), **facts(k))
# 3000x5000x2000 NN: M, N, stride_bk and stride_cm multiples of 8 but not 16, so no divisibility attribute on
# arguments 3, 4, 8, 10; the kernel as Triton alone specializes it (DIV8 = 0), or told what div8_args finds
from triton_kernels import blocked
from triton_kernels.common import div8_args
loads = {}
div8 = div8_args((2000, 1, 5000, 1, 5000, 1), 3000, 5000)[1]
for d in (0, div8) if mine("div8") else ():
    fn, sig, consts, _ = blocked.inspect_source(blocked.configs()[0])
    attrs = {(i,): [["tt.divisibility", 16]] for i in (0, 1, 2, 5, 6)}
    k = compile_(fn, sig, dict(consts, EVEN_K=False, DIV8=d), attrs, 8, 3)
    loads["div8" if d else "plain"] = sorted(set(re.findall(r"\\bLDG[\\w.]*", k.asm["sass"])))
print(json.dumps(dict(failed=failed, rows=rows, reduce_rn_bf16=reduce, x8_loads=loads, wide_reduce=wide,
                      serialized=serialized)))
"""


@pytest.fixture(scope="module")
def sm90_compiles() -> dict:
    """The child's report: compile failures, SASS facts of the instantiations it disassembled, the reduction (the
    configurations compiled by several children side by side, helpers.run_children)."""
    parts = run_children(_ALL_CONFIGS_PROBE, timeout=900)
    merged = dict(failed=[f for p in parts for f in p["failed"]], rows=[r for p in parts for r in p["rows"]],
                  serialized=[r for p in parts for r in p["serialized"]])
    for key in ("reduce_rn_bf16", "x8_loads", "wide_reduce"):  # each computed by one child
        merged[key] = {k: v for p in parts for k, v in p[key].items()}
    return merged


def test_every_config_compiles_for_sm90_in_every_dtype_and_accumulation(sm90_compiles):
    assert sm90_compiles["failed"] == []


def test_wide_tiles_keep_their_wgmmas_asynchronous(sm90_compiles):
    """The TMA kernel's wide tiles (two accumulators, `tma_persistent.wide_tile_k_range`): ptxas does not serialize
    their wgmmas (its warning C7515, which it gave while their tile loop was flattened; what that cost is in
    docs/design/triton.md, "Wide tiles")."""
    wide = [c.name for c in configs("triton_tma") if c.n_parts[1]]
    assert wide and sorted(r[1] for r in sm90_compiles["serialized"]) == sorted(wide)
    assert [r for r in sm90_compiles["serialized"] if r[2]] == []


def test_bf16_compiles_to_bf16_tensor_cores(sm90_compiles):
    """Every bf16 instantiation of every config, compiled for sm_90: its tensor-core instructions are the bf16
    forms with fp32 accumulation (HGMMA.64xNx16.F32.BF16 where tl.dot lowers to wgmma, HMMA.16816.F32.BF16 where it
    lowers to mma.sync: split-K's 16- and 32-row tiles), and the opcode its record promises appears in the first
    config's; fp16 instantiations have no .BF16 form. C is rounded to bf16 to nearest even (cvt.rn.bf16: the blocked
    and TMA epilogues, the fused split-K kernel's last slice, the two-pass reduction). No local memory in any of
    them (the two-pass partial kernel kept one register of its 16x128x128 tiles in local memory; the fused kernel
    does not)."""
    from triton_kernels.variants import BY_NAME

    rows = sm90_compiles["rows"]
    bf16 = [r for r in rows if r["dtype"] == "bf16"]
    assert len(bf16) == sum(len(kernel_module(v).configs()) for k, v in BY_KERNEL.items()
                            if "bf16" in v.dtypes and v.interpretable)
    fp16_local = {r["record"]: r["local"] for r in rows if r["dtype"] == "fp16"}
    cuda_cores = {v.name for v in BY_KERNEL.values() if v.isa == "fma"}  # gemv: FFMA on converted values, no MMA
    assert cuda_cores == {"triton_gemv"}
    for r in [r for r in rows if r["record"] in cuda_cores]:
        assert r["mma"] == [] and r["ffma"] > 0 and r["local"] == 0, r
        assert r["rn_bf16"] == (r["dtype"] == "bf16"), r
    rows = [r for r in rows if r["record"] not in cuda_cores]
    bf16 = [r for r in bf16 if r["record"] not in cuda_cores]
    for r in bf16:
        where = (r["record"], r["config"])
        assert r["mma"] and all(re.fullmatch(r"(HGMMA\.64x\d+x16|HMMA\.16816)\.F32\.BF16", f) for f in r["mma"]), \
            (where, r["mma"])
        if r["first"]:
            promised = {op for op in BY_NAME[r["record"]].promised("sm_90") if op in ("HGMMA", "HMMA")}
            assert promised and {f.split(".")[0] for f in r["mma"]} == promised, (where, r["mma"])
            assert r["local"] == fp16_local[r["record"]] == 0, where
        assert r["local"] == 0, where
        # split-K's fused kernel rounds C too (its last slice writes it); the wide kernel's partial kernel and
        # realign_rows' (its planes) store fp32, and their reductions round C (below: the wide one's, and split-K's
        # two-pass reduction, which realign_rows' planes go through)
        assert r["rn_bf16"] == (r["record"] not in ("triton_splitk_wide", "triton_realign_rows")), where
    for r in rows:
        if r["dtype"] == "fp16":
            assert r["mma"] and not any("BF16" in f for f in r["mma"]), (r["record"], r["mma"])
    assert sm90_compiles["reduce_rn_bf16"] == {"fp16": False, "bf16": True}
    wide = sm90_compiles["wide_reduce"]
    assert {d: w["rn_bf16"] for d, w in wide.items()} == {"fp16": False, "bf16": True}


def test_wide_reduction_waits_for_the_partials_and_loads_16_bytes(sm90_compiles):
    """The wide split-K reduction, compiled as a 256 x 256 problem specializes it: it waits for the partial kernel
    (griddepcontrol.wait: the launch may start before that kernel ends), loads the fp32 partials 16 bytes at a time,
    and keeps every value in registers (no local memory)."""
    for w in sm90_compiles["wide_reduce"].values():
        assert w["griddepcontrol"] and w["loads"] == ["LDG.E.128"] and w["local"] == 0, w


def test_leading_dimension_multiple_of_8_loads_16_bytes(sm90_compiles):
    """3000x5000x2000 NN (M, N and B's and C's leading dimensions multiples of 8 but not 16): compiled as Triton
    alone specializes it, the blocked kernel loads two bytes at a time (synchronous LDG.E.U16, not cp.async: it ran
    at a fraction of torch.matmul's speed); told what `common.div8_args` finds (strides divided by 8 and multiplied back, edge
    rows clamped in groups of 8), every operand load is a 16-byte cp.async (LDGSTS.E.BYPASS.128)."""
    loads = sm90_compiles["x8_loads"]
    assert "LDG.E.U16" in loads["plain"]
    assert [op for op in loads["div8"] if op != "LDGDEPBAR"] == ["LDGSTS.E.BYPASS.128"]


def test_tma_descriptors_carry_the_element_type(sm90_compiles):
    """The compiled TMA kernel's descriptor metadata, which the direct launcher encodes CUtensorMaps from
    (triton_kernels/launch.py `_DescArg`, cached by it too), names 2-byte elements of the inputs' type: CUDA's
    CU_TENSOR_MAP_DATA_TYPE_FLOAT16 (6) or _BFLOAT16 (9) once mapped to the host's enum
    (triton_internals.TMA_DTYPE_DEVICE_TO_HOST), for A, B and C (the TMA split-K kernel stores C through
    pointers: A and B; a wide tile has a second B and C, its tail's)."""
    from triton_kernels.triton_internals import TMA_DTYPE_DEVICE_TO_HOST as _TMA_DTYPE_DEVICE_TO_HOST

    host = {"fp16": 6, "bf16": 9}
    tma = [r for r in sm90_compiles["rows"] if r["descs"]]
    assert {r["dtype"] for r in tma} == {"fp16", "bf16"}
    assert {r["record"] for r in tma} == {"triton_tma", "triton_splitk_tma", "triton_splitk_wide", "triton_streamk"}
    for r in tma:
        descs = 2 if r["record"] in ("triton_splitk_tma", "triton_splitk_wide") else 3
        descs += 2 * bool(Config.from_name(r["config"]).n_parts[1])
        assert [(size, _TMA_DTYPE_DEVICE_TO_HOST[t]) for size, t in r["descs"]] == [(2, host[r["dtype"]])] * descs, r


# Compiles each tma_ws config for sm_90 and reports what the warp-specialization pass did; run in a child process
# (the interpreter, on in this one, replaces @triton.jit functions by interpreted ones that cannot be compiled).
_WS_PROBE = """
import json, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton_kernels import tma_ws
from triton_kernels.triton_internals import COMPILE_OPTIONS

def compile_(cfg, num_warps):
    fn, sig, consts, attrs = tma_ws.inspect_source(cfg)
    for name in consts:
        sig.setdefault(name, "constexpr")
    k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs),
                       target=GPUTarget("cuda", 90, 32),
                       options=dict(num_warps=num_warps, num_stages=cfg.num_stages, **COMPILE_OPTIONS))
    return dict(ws="ttg.warp_specialize" in k.asm["ttgir"], warps=k.metadata.num_warps,
                setmaxnreg="USETMAXREG" in k.asm["sass"], hgmma="HGMMA" in k.asm["sass"])

rows = {c.name: compile_(c, c.num_warps) for c in tma_ws.configs()}
rows["w8"] = compile_(tma_ws.configs()[3], 8)
print(json.dumps(rows))
"""


def test_warp_specialization_applies():
    """On the Triton releases the study was written for (tma_ws.WS_TRITON_VERSIONS): every config of the study
    kernel tma_ws.py compiles to a warp-specialized kernel for sm_90: a `ttg.warp_specialize` op in the TTGIR, 12
    warps (a TMA producer warpgroup and two wgmma consumers), `setmaxnreg` (USETMAXREG) in the SASS; with
    num_warps=8 Triton 3.6 leaves the loop unspecialized (tma_ws.py's header; why it is not a variant is there
    too). On other releases the warp-specialization pass still rejects it, as the header says."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from triton_kernels import tma_ws

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    root = Path(__file__).resolve().parent.parent
    res = subprocess.run([sys.executable, "-c", _WS_PROBE], cwd=root, env=env, capture_output=True, text=True,
                         timeout=600)
    if not triton.__version__.startswith(tma_ws.WS_TRITON_VERSIONS):
        assert res.returncode != 0, f"triton {triton.__version__} compiles tma_ws.py: add it to WS_TRITON_VERSIONS"
        assert "descriptor block and tensor must have the same number of elements" in res.stderr, res.stderr[-2000:]
        return
    assert res.returncode == 0, res.stderr[-2000:]
    rows = json.loads(res.stdout.strip().splitlines()[-1])
    w8 = rows.pop("w8")

    assert len(rows) == len(tma_ws.configs())
    for name, r in rows.items():
        assert r == dict(ws=True, warps=12, setmaxnreg=True, hgmma=True), (name, r)
    assert not w8["ws"] and not w8["setmaxnreg"] and w8["warps"] == 8


def test_tma_rejects_unaligned_and_auto_falls_back():
    a, b = make_inputs(17, 33, 100, "NN", device=DEVICE, seed=3)  # N=33, K=100: rows not 16-byte multiples
    with pytest.raises(ValueError, match=r"kernel='triton_tma'\): TMA needs unit inner strides, 16-byte aligned"):
        triton_kernels.hgemm(a, b, kernel="triton_tma")
    # auto takes a kernel that reads them in place through pointers (on a GPU the model may pick triton_realign
    # for this skinny problem; the interpreter's untimed choice is triton_blocked), never a TMA one
    chosen = triton_kernels.choose_kernel(a, b, torch.empty(17, 33, dtype=torch.float16, device=DEVICE))
    assert BY_KERNEL[chosen].alignment == "none", chosen
    run_exact(a, b, kernel="auto")


def test_kernel_argument_checked():
    a, b = make_inputs(8, 8, 8, "NN", device=DEVICE)
    with pytest.raises(ValueError, match=r"kernel must be one of \('auto', 'triton_blocked', 'triton_splitk', "
                       r"'triton_realign', 'triton_realign_rows', 'triton_gemv', 'triton_tma', 'triton_splitk_tma', "
                       r"'triton_splitk_wide', 'triton_streamk'(, 'gluon_persistent', 'gluon_streamk', "
                       r"'gluon_stream')?\) \(or an "
                       r"older name: blocked, splitk, realign, realign_rows, gemv, tma, splitk_tma, "
                       r"splitk_wide, streamk(, gluon)?\), got "
                       r"'cublas'$"):
        triton_kernels.hgemm(a, b, kernel="cublas")
    with pytest.raises(ValueError, match=r"configs: kernel must be one of \('auto', 'triton_blocked', .*\), got "
                       r"'wgmma'"):
        configs("wgmma")
    with pytest.raises(ValueError, match=r"configs: kernel must be one of \('triton_blocked', .*\) \(one kernel, "
                       r"not the choice among them\), got 'auto'"):
        configs("auto")


@pytest.mark.parametrize("kernel", triton_kernels.KERNELS)
def test_bf16_with_fp16_accumulation_is_refused(kernel):
    """bf16 accumulates in fp32 only: acc="fp16" raises one line saying so, for every kernel, empty problems too,
    before any plan is made; plan() says the same."""
    a, b = make_inputs(16, 16, 16, "NN", device=DEVICE, dtype="bf16")
    msg = r"^hgemm: bf16 inputs accumulate in fp32 only \(mma.sync and wgmma have no bf16 accumulator\), " \
          r"got acc='fp16'$"
    for x in (a, a[:0]):
        with pytest.raises(ValueError, match=msg):
            triton_kernels.hgemm(x, b, acc="fp16", kernel=kernel)
    with pytest.raises(ValueError, match=msg):
        triton_kernels.plan(a, b, acc="fp16", kernel=kernel)
    assert dispatch.PLANS.get(dispatch.key_of(a, b, None, "fp16", kernel, None, None)) is None


def test_records_decide_the_dtypes(monkeypatch):
    """A kernel whose record does not list bf16 refuses bf16 inputs in one line naming the dtypes it takes, and
    kernel="auto" leaves it out for bf16 (uncached and timed choices alike) while fp16 calls still get it. Here the
    blocked kernel's record, edited to fp16 only."""
    import dataclasses

    from triton_kernels import variants

    fp16_only = dataclasses.replace(BY_KERNEL["triton_blocked"], dtypes=("fp16",))
    monkeypatch.setitem(variants.BY_KERNEL, "triton_blocked", fp16_only)
    monkeypatch.setattr(dispatch, "VARIANTS", tuple(fp16_only if v.name == fp16_only.name else v
                                                    for v in variants.VARIANTS))
    dispatch.clear()
    a, b = make_inputs(16, 24, 40, "NN", device=DEVICE, dtype="bf16")  # TMA-describable: TMA can take it
    with pytest.raises(TypeError, match=r"^hgemm\(kernel='triton_blocked'\) takes fp16 inputs, got "
                       r"torch.bfloat16$"):
        triton_kernels.hgemm(a, b, kernel="blocked")
    assert "triton_blocked" not in {k for k, _ in dispatch.candidates(16, 24, 40, 90, 132, a, b, None)}
    a16, b16 = make_inputs(16, 24, 40, "NN", device=DEVICE)
    assert "triton_blocked" in {k for k, _ in dispatch.candidates(16, 24, 40, 90, 132, a16, b16, None)}
    if not HAS_CUDA:  # the interpreter's untimed choice: the first general record that takes the dtype
        assert dispatch.kernel_for(None, a, b) == "triton_tma"
        assert dispatch.kernel_for(None, a16, b16) == "triton_blocked"
        run_exact(a, b)
    dispatch.clear()


@triton.jit
def _bf16_probe_kernel(a_ptr, b_ptr, copy_ptr, raw_ptr, up_ptr, x_ptr, cast_ptr, rounded_ptr,
                       M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, X: tl.constexpr):
    offs_m, offs_n, offs_k, offs_x = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K), tl.arange(0, X)
    a = tl.load(a_ptr + offs_m[:, None] * K + offs_k[None, :])
    b = tl.load(b_ptr + offs_k[:, None] * N + offs_n[None, :])
    tl.store(copy_ptr + offs_m[:, None] * K + offs_k[None, :], a)
    tl.store(raw_ptr + offs_m[:, None] * N + offs_n[None, :], tl.dot(a, b))
    tl.store(up_ptr + offs_m[:, None] * N + offs_n[None, :],
             tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee"))
    x = tl.load(x_ptr + offs_x)
    tl.store(cast_ptr + offs_x, x.to(tl.bfloat16))
    tl.store(rounded_ptr + offs_x, to_output(x, tl.bfloat16))


@pytest.mark.skipif(HAS_CUDA, reason="facts about Triton's CPU interpreter")
def test_interpreter_bf16_findings():
    """What Triton 3.6's interpreter does with bf16, the reason for the interpreter-only branches of
    triton_kernels/common.py (a Triton that fixes the dot fails the first assertion: drop the branches then).
    - tl.dot of bf16 tiles multiplies their uint16 bit patterns (1.0 counts as 16256): wrong even on small integers;
    - loads and stores of bf16 are bit-exact, and the dot of the same tiles upcast to fp32 is exact;
    - the fp32 -> bf16 cast truncates (rounds toward zero), where torch and the GPU round to nearest even;
    - `to_output` rounds to nearest even like torch, on ties, infinities, NaN, subnormals and overflow alike."""
    g = torch.Generator().manual_seed(0)
    a = torch.randint(-3, 4, (16, 32), generator=g).bfloat16()
    b = torch.randint(-3, 4, (32, 16), generator=g).bfloat16()
    special = torch.tensor([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 3.3961e38, 3.4e38, -3.4e38, float("inf"),
                            float("-inf"), float("nan"), -0.0, 2.0**-130, 2.0**-133 * 3, 0.0, 1.0, -1.0, 255.0])
    x = torch.cat([torch.randn(240, generator=g), special])
    cast, rounded = torch.empty(256, dtype=torch.bfloat16), torch.empty(256, dtype=torch.bfloat16)
    copy, raw, up = torch.empty_like(a), torch.empty(16, 16), torch.empty(16, 16)
    _bf16_probe_kernel[(1,)](a, b, copy, raw, up, x, cast, rounded, 16, 16, 32, 256)

    def bits(t):
        return (t.view(torch.int16).long() & 0xFFFF).double()

    exact = a.double() @ b.double()
    assert torch.equal(raw.double(), (bits(a) @ bits(b)).float().double()) and not torch.equal(raw.double(), exact)
    assert torch.equal(copy.view(torch.int16), a.view(torch.int16)) and torch.equal(up.double(), exact)
    r = x[:240]
    truncated = (r.view(torch.int32) & -65536).view(torch.float32).bfloat16()
    assert torch.equal(cast[:240], truncated) and not torch.equal(cast[:240], r.bfloat16())
    nan = x.isnan()  # NaN bit patterns differ (torch's CPU cast gives 0xFFFF here, the GPU 0x7FFF): NaN is enough
    assert torch.equal(rounded.isnan(), nan)
    assert torch.equal(rounded[~nan].view(torch.int16), x[~nan].bfloat16().view(torch.int16))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_auto_times_the_candidates_and_keeps_the_fastest(dtype, monkeypatch, tmp_path):
    """kernel="auto" with tune="exact" on a new kind of call times each candidate kernel's configurations and keeps
    the fastest; on Hopper aligned operands make the TMA kernels candidates. The plan is the fastest candidate's best
    configuration, or, when several candidates come within the refine margin, one of those (timed again, so its ms
    is new)."""
    from triton_kernels import plan_table

    monkeypatch.setenv(plan_table.CACHE_ENV, str(tmp_path / "plans.json"))
    a, b = make_inputs(256, 256, 256, "NT", device="cuda", seed=4, dtype=dtype)
    p = triton_kernels.plan(a, b, tune="exact")
    hopper = torch.cuda.get_device_capability() >= (9, 0)
    cands = dispatch.candidates(256, 256, 256, dispatch.device_arch(a), dispatch.sm_count(a), a, b, None)
    assert (("triton_tma", (False, False, False)) in cands if hopper
            else all(k in ("triton_blocked", "triton_splitk") for k, _ in cands))
    facts = dispatch.key_of(a, b, None, "fp32")  # a runner key without (kernel, config, tune)
    tuned = [dispatch.TUNED.get((facts, k, st)) for k, st in cands]
    close = dispatch.shortlist([ms for _, ms in tuned])
    assert (p.kernel, p.stage) in [cands[i] for i in close]
    assert p.config == tuned[cands.index((p.kernel, p.stage))][0]
    if len(close) == 1:
        assert p.ms == min(ms for _, ms in tuned)
    run_exact(a, b, kernel=p.kernel, config=p.config)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,acc", DTYPE_ACCS)
@pytest.mark.parametrize("m,n,k", [(4096, 4096, 4096), (3000, 5000, 2000), (8, 8192, 1024)])
def test_tma_random_large_within_bound(m, n, k, dtype, acc):
    a, b = make_inputs(m, n, k, "NN", device="cuda", seed=16, kind="randn", dtype=dtype)
    ref = reference(a, b)
    out = poisoned_out(m, n, "cuda", dtype)
    cfg = None if (m, acc) == (4096, "fp32") else configs("tma")[0]
    v = compare(triton_kernels.hgemm(a, b, acc=acc, out=out, kernel="tma", config=cfg), ref,
                error_bound(a, b, ref, acc))
    assert v.ok, v.detail


def test_tuning_prunes_tiles_larger_than_the_problem():
    from triton_kernels.common import prune_for_problem
    cfgs = configs("blocked")
    small = prune_for_problem(cfgs, 17, 33, 100)
    assert small and all(c.block_m <= 64 and c.block_n <= 64 for c in small)
    skinny = prune_for_problem(cfgs, 16, 4096, 4096)
    assert {c.block_m for c in skinny} == {64}
    assert len(prune_for_problem(cfgs, 4096, 4096, 4096)) == len(cfgs)
    assert len(prune_for_problem(cfgs[:2], 1, 1, 1)) == 1  # 128x256, 256x128: the smallest is kept
    sk = prune_for_problem(configs("splitk"), 16, 4096, 4096)
    assert {c.block_m for c in sk} == {16} and {c.split_k for c in sk} == {2, 4, 8}
    short_k = prune_for_problem(configs("splitk"), 16, 4096, 512)  # 8 slices of 512 would be under 2 K tiles
    assert short_k and all(512 // c.split_k >= 2 * c.block_k for c in short_k)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", ["auto", "blocked"])
def test_inputs_that_require_grad_record_autograd(kernel, dtype):
    """hgemm on inputs that require grad returns a result with a grad_fn (through the operator, whose backward
    runs the same kernel): dA = dC B^T and dB = A^T dC, exact on small integers, in the inputs' dtype."""
    a, b = make_inputs(17, 40, 33, "NT", device=DEVICE, seed=5, dtype=dtype)
    a.requires_grad_()
    b.requires_grad_()
    c = triton_kernels.hgemm(a, b, kernel=kernel)
    assert c.grad_fn is not None and c.dtype == DTYPES[dtype]
    assert torch.equal(c.detach(), reference(a.detach(), b.detach()).to(c.dtype))
    g = torch.randint(-2, 3, c.shape, device=DEVICE).to(c.dtype)  # |dA| <= 2 x 3 x 40 <= 256: exact in bf16 too
    c.backward(g)
    assert a.grad.dtype == b.grad.dtype == DTYPES[dtype]
    assert torch.equal(a.grad, (g.double() @ b.detach().double().t()).to(c.dtype))
    assert torch.equal(b.grad, (a.detach().double().t() @ g.double()).to(c.dtype))
    with pytest.raises(RuntimeError, match="out=... arguments don't support automatic differentiation"):
        triton_kernels.hgemm(a, b, out=torch.empty_like(c.detach()))
