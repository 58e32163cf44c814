"""The Triton HGEMM on every layout, config and accumulation: exact integer checks (TESTING.md).

Runs under the interpreter on the CPU, and on CUDA tensors when a GPU is present.
"""
import pytest
import torch

import triton_kernels
from compare.reference import LAYOUTS, compare, error_bound, make_inputs, poisoned_out, reference
from hgemm_common.operands import tma_describable
from triton_kernels import Config, configs
from triton_kernels.variants import BY_KERNEL

from conftest import DEVICE, HAS_CUDA
from shapes import small_triples

# Under the interpreter `config=None` means INTERPRETER_CONFIG; on a GPU it means the autotuner.
ACCS = triton_kernels.ACCUMULATIONS


# On a GPU `config=None` autotunes (compiling and timing every config for each new shape): the small-shape tests
# pin one instead; the autotuned path has its own tests below.
GPU_PIN = {"blocked": configs("blocked")[5], "tma": configs("tma")[5]}


def run_exact(a, b, **kw):
    if HAS_CUDA and "config" not in kw:
        chosen = kw.get("kernel", "auto")
        if chosen == "auto":
            chosen = triton_kernels.choose_kernel(a, b, torch.empty(a.shape[0], b.shape[1], dtype=torch.float16,
                                                                    device=a.device))
        kw["config"] = GPU_PIN[chosen]
    out = poisoned_out(a.shape[0], b.shape[1], a.device)
    c = triton_kernels.hgemm(a, b, out=out, **kw)
    assert c is out
    v = compare(c, reference(a, b))
    assert v.ok, v.detail


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("m,n,k", small_triples())
def test_exact_all_layouts(m, n, k, layout):
    a, b = make_inputs(m, n, k, layout, device=DEVICE, seed=m * 1000 + n * 10 + k)
    run_exact(a, b)


@pytest.mark.parametrize("acc", ACCS)
@pytest.mark.parametrize("layout", ["NN", "TT"])
def test_exact_both_accumulations(acc, layout):
    a, b = make_inputs(33, 100, 129, layout, device=DEVICE, seed=7)
    run_exact(a, b, acc=acc)


@pytest.mark.parametrize("cfg", configs("blocked"), ids=lambda c: c.name)
@pytest.mark.parametrize("acc", ACCS)
def test_every_config_exact(cfg, acc):
    # One tile plus one on every side, and K with a partial last tile: edges on all three axes.
    m, n, k = cfg.block_m + 1, cfg.block_n + 1, cfg.block_k * cfg.num_stages + 8
    a, b = make_inputs(m, n, k, "NT", device=DEVICE, seed=1)
    run_exact(a, b, acc=acc, config=cfg)


def test_even_k_path():
    cfg = Config(32, 32, 32, num_warps=4, num_stages=2)
    a, b = make_inputs(40, 24, 96, "NN", device=DEVICE, seed=3)  # K multiple of BLOCK_K: no K mask
    run_exact(a, b, config=cfg)


def test_strided_views_need_no_copy():
    g = torch.Generator().manual_seed(5)
    big_a = torch.randint(-3, 4, (33, 2 * 100), generator=g).half().to(DEVICE)
    big_b = torch.randint(-3, 4, (100 + 7, 3 * 17), generator=g).half().to(DEVICE)
    a = big_a[:, ::2]  # column stride 2: neither row- nor column-major
    b = big_b[3:103, ::3]  # storage offset, padded leading dimension, column stride 3
    assert triton_kernels.layout_of(a, b) == "strided"
    run_exact(a, b)


def test_padded_leading_dimension_and_offset():
    g = torch.Generator().manual_seed(6)
    a = torch.randint(-3, 4, (20, 70), generator=g).half().to(DEVICE)[1:18, 3:66]  # 17 x 63, ld 70, offset
    b = torch.randint(-3, 4, (80, 40), generator=g).half().to(DEVICE)[5:68, 1:34]  # 63 x 33
    assert triton_kernels.layout_of(a, b) == "NN"
    run_exact(a, b)


def test_out_with_strides():
    a, b = make_inputs(17, 33, 40, "NN", device=DEVICE, seed=8)
    out_t = torch.full((33, 17), float("nan"), dtype=torch.float16, device=DEVICE)
    c = triton_kernels.hgemm(a, b, out=out_t.t())  # column-major output
    assert c.data_ptr() == out_t.data_ptr()
    assert compare(c, reference(a, b)).ok


def test_default_allocates_contiguous():
    a, b = make_inputs(7, 9, 16, "TN", device=DEVICE, seed=9)
    c = triton_kernels.hgemm(a, b)
    assert c.shape == (7, 9) and c.dtype == torch.float16 and c.is_contiguous()


def test_nan_propagates_to_its_row_only():
    a, b = make_inputs(17, 20, 33, "NN", device=DEVICE, seed=10)
    a = a.clone()
    a[5, 7] = float("nan")
    c = triton_kernels.hgemm(a, b).cpu()
    assert torch.isnan(c[5]).all()
    assert torch.isfinite(torch.cat([c[:5], c[6:]])).all()


def test_overflow_gives_inf_like_reference():
    a = torch.full((4, 64), 40.0, dtype=torch.float16, device=DEVICE)
    b = torch.full((64, 4), 40.0, dtype=torch.float16, device=DEVICE)  # 64 * 1600 = 102400 > 65504
    c = triton_kernels.hgemm(a, b)
    assert torch.isinf(c).all() and (c > 0).all()
    assert compare(c, reference(a, b)).ok


def test_deterministic():
    a, b = make_inputs(100, 129, 311, "NN", device=DEVICE, seed=11, kind="randn")
    c1 = triton_kernels.hgemm(a, b)
    c2 = triton_kernels.hgemm(a, b)
    assert torch.equal(c1, c2)


@pytest.mark.parametrize("acc", ACCS)
def test_random_within_bound_small(acc):
    a, b = make_inputs(64, 48, 200, "NT", device=DEVICE, seed=12, kind="randn")
    ref = reference(a, b)
    v = compare(triton_kernels.hgemm(a, b, acc=acc), ref, error_bound(a, b, ref, acc))
    assert v.ok, v.detail


# ---------------------------------------------------------------------------------------------- GPU only
@pytest.mark.gpu
@pytest.mark.parametrize("acc", ACCS)
@pytest.mark.parametrize("m,n,k", [(4096, 4096, 4096), (3000, 5000, 2000), (4097, 1023, 4099), (496, 8192, 233)])
def test_random_large_within_bound(m, n, k, acc):
    a, b = make_inputs(m, n, k, "NN", device="cuda", seed=13, kind="randn")
    ref = reference(a, b)
    out = poisoned_out(m, n, "cuda")
    # Autotune once (4096^3, fp32); pinned elsewhere: each autotuning compiles and times every config.
    cfg = None if (m, acc) == (4096, "fp32") else configs("blocked")[0]
    v = compare(triton_kernels.hgemm(a, b, acc=acc, out=out, config=cfg, kernel="blocked"), ref,
                error_bound(a, b, ref, acc))
    assert v.ok, v.detail
    if acc == "fp32":  # no worse than a few times cuBLAS's own error on the same inputs
        base = compare(torch.matmul(a, b), ref, error_bound(a, b, ref, acc))
        assert v.max_abs_err <= 4 * base.max_abs_err + 1e-3, (v.max_abs_err, base.max_abs_err)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", LAYOUTS)
def test_exact_large_odd_autotuned(layout):
    a, b = make_inputs(1000, 1500, 1337, layout, device="cuda", seed=14)
    run_exact(a, b, config=None if layout == "NN" else configs("blocked")[3])  # NN autotunes


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
    module = BY_KERNEL[kernel].extra["module"]
    seen = []
    real = module.launch
    monkeypatch.setattr(module, "launch", lambda *args: (seen.append(args[4]), real(*args))[1])
    a, b = make_inputs(40, 24, 72, "NN", device=DEVICE, seed=17)
    run_exact(a, b, kernel=kernel)
    assert seen == [module.INTERPRETER_CONFIG]


# ---------------------------------------------------------------------------------------------- TMA kernel
# Aligned shapes (every leading dimension a multiple of 8 halves), with edges on every axis.
TMA_SHAPES = [(8, 8, 8), (40, 24, 72), (17, 40, 136), (96, 8, 16), (1, 64, 8)]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("m,n,k", TMA_SHAPES)
def test_tma_exact_all_layouts(m, n, k, layout):
    a, b = make_inputs(m, n, k, layout, device=DEVICE, seed=m + n + k)
    if tma_describable(a, b):
        run_exact(a, b, kernel="tma")
    else:  # (1, K) column-major A has row stride 1: no TMA descriptor; refused, and `auto` takes the blocked path
        with pytest.raises(ValueError, match="TMA needs"):
            triton_kernels.hgemm(a, b, kernel="tma")
        run_exact(a, b, kernel="auto")


@pytest.mark.parametrize("cfg", configs("tma"), ids=lambda c: c.name)
@pytest.mark.parametrize("acc", ACCS)
def test_tma_every_config_exact(cfg, acc):
    # One tile plus 8 on M and N (TMA boxes past the edge), K with a partial last tile; persistent programs
    # walk several tiles each.
    m, n, k = 2 * cfg.block_m + 8, cfg.block_n + 8, cfg.block_k * 2 + 8
    a, b = make_inputs(m, n, k, "NT", device=DEVICE, seed=2)
    run_exact(a, b, acc=acc, config=cfg, kernel="tma")


def test_tma_rejects_unaligned_and_auto_falls_back():
    a, b = make_inputs(17, 33, 100, "NN", device=DEVICE, seed=3)  # N=33, K=100: rows not 16-byte multiples
    with pytest.raises(ValueError, match=r"kernel='tma'\): TMA needs unit inner strides, 16-byte aligned"):
        triton_kernels.hgemm(a, b, kernel="tma")
    assert triton_kernels.choose_kernel(a, b, torch.empty(17, 33, dtype=torch.float16, device=DEVICE)) == "blocked"
    run_exact(a, b, kernel="auto")


def test_kernel_argument_checked():
    a, b = make_inputs(8, 8, 8, "NN", device=DEVICE)
    with pytest.raises(ValueError, match=r"kernel must be one of \('auto', 'blocked', 'tma'\), got 'cublas'"):
        triton_kernels.hgemm(a, b, kernel="cublas")
    with pytest.raises(ValueError, match=r"configs: kernel must be one of \('blocked', 'tma'\), got 'wgmma'"):
        configs("wgmma")


@pytest.mark.gpu
def test_auto_picks_tma_on_hopper_for_aligned_inputs():
    a, b = make_inputs(256, 256, 256, "NT", device="cuda", seed=4)
    out = torch.empty(256, 256, dtype=torch.float16, device="cuda")
    expect = "tma" if torch.cuda.get_device_capability() >= (9, 0) else "blocked"
    assert triton_kernels.choose_kernel(a, b, out) == expect


@pytest.mark.gpu
@pytest.mark.parametrize("acc", ACCS)
@pytest.mark.parametrize("m,n,k", [(4096, 4096, 4096), (3000, 5000, 2000), (8, 8192, 1024)])
def test_tma_random_large_within_bound(m, n, k, acc):
    a, b = make_inputs(m, n, k, "NN", device="cuda", seed=16, kind="randn")
    ref = reference(a, b)
    out = poisoned_out(m, n, "cuda")
    cfg = None if (m, acc) == (4096, "fp32") else configs("tma")[0]
    v = compare(triton_kernels.hgemm(a, b, acc=acc, out=out, kernel="tma", config=cfg), ref,
                error_bound(a, b, ref, acc))
    assert v.ok, v.detail


def test_autotune_prunes_tiles_larger_than_the_problem():
    from triton_kernels.common import prune_for_problem
    tcs = [c.to_triton() for c in configs("blocked")]
    small = prune_for_problem(tcs, {"M": 17, "N": 33})
    assert small and all(c.kwargs["BLOCK_M"] <= 64 and c.kwargs["BLOCK_N"] <= 64 for c in small)
    skinny = prune_for_problem(tcs, {"M": 16, "N": 4096})
    assert {c.kwargs["BLOCK_M"] for c in skinny} == {64}
    assert len(prune_for_problem(tcs, {"M": 4096, "N": 4096})) == len(tcs)
    only_big = [c.to_triton() for c in configs("blocked")[:2]]  # 128x256, 256x128
    assert len(prune_for_problem(only_big, {"M": 1, "N": 1})) == 1


@pytest.mark.parametrize("kernel", ["auto", "blocked"])
def test_inputs_that_require_grad_record_autograd(kernel):
    """hgemm on inputs that require grad returns a result with a grad_fn (through the operator, whose backward
    runs the same kernel): dA = dC B^T and dB = A^T dC, exact on small integers."""
    a, b = make_inputs(17, 40, 33, "NT", device=DEVICE, seed=5)
    a.requires_grad_()
    b.requires_grad_()
    c = triton_kernels.hgemm(a, b, kernel=kernel)
    assert c.grad_fn is not None
    assert torch.equal(c.detach(), reference(a.detach(), b.detach()).half())
    g = torch.randint(-2, 3, c.shape, device=DEVICE).half()
    c.backward(g)
    assert torch.equal(a.grad, (g.double() @ b.detach().double().t()).half())
    assert torch.equal(b.grad, (a.detach().double().t() @ g.double()).half())
    with pytest.raises(RuntimeError, match="out=... arguments don't support automatic differentiation"):
        triton_kernels.hgemm(a, b, out=torch.empty_like(c.detach()))
