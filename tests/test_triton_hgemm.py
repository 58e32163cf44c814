"""The Triton HGEMM on every layout, config and accumulation: exact integer checks (TESTING.md).

Runs under the interpreter on the CPU, and on CUDA tensors when a GPU is present.
"""
import pytest
import torch

import triton_kernels
from compare.reference import LAYOUTS, compare, error_bound, make_inputs, poisoned_out, reference
from hgemm_common.operands import tma_describable
from triton_kernels import Config, configs, dispatch, splitk
from triton_kernels.variants import BY_KERNEL

from conftest import DEVICE, HAS_CUDA
from shapes import small_triples

# Under the interpreter `config=None` means INTERPRETER_CONFIG; on a GPU it means timing the kernel's list.
ACCS = triton_kernels.ACCUMULATIONS


# On a GPU `config=None` times every config for each new kind of call (compiling each): the small-shape tests pin
# one instead (kernel="auto" with a pinned config takes the ladder's choice, untimed); the timed path has its own
# tests below and in tests/test_dispatch.py.
GPU_PIN = {"blocked": configs("blocked")[5], "tma": configs("tma")[5], "splitk": configs("splitk")[4]}


def run_exact(a, b, **kw):
    if HAS_CUDA and "config" not in kw:
        chosen = kw.get("kernel", "auto")
        if chosen == "auto":
            chosen = dispatch.kernel_for(dispatch.device_arch(a), a, b)
        kw["config"] = GPU_PIN[chosen]
    out = poisoned_out(a.shape[0], b.shape[1], a.device)
    c = triton_kernels.hgemm(a, b, out=out, **kw)
    assert c is out
    v = compare(c, reference(a, b))
    assert v.ok, v.detail


@pytest.mark.parametrize("kernel", ["auto", "splitk"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("m,n,k", small_triples())
def test_exact_all_layouts(m, n, k, layout, kernel):
    a, b = make_inputs(m, n, k, layout, device=DEVICE, seed=m * 1000 + n * 10 + k)
    run_exact(a, b, kernel=kernel)


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


@pytest.mark.parametrize("kernel", ["auto", "splitk"])
def test_strided_views_need_no_copy(kernel):
    g = torch.Generator().manual_seed(5)
    big_a = torch.randint(-3, 4, (33, 2 * 100), generator=g).half().to(DEVICE)
    big_b = torch.randint(-3, 4, (100 + 7, 3 * 17), generator=g).half().to(DEVICE)
    a = big_a[:, ::2]  # column stride 2: neither row- nor column-major
    b = big_b[3:103, ::3]  # storage offset, padded leading dimension, column stride 3
    assert triton_kernels.layout_of(a, b) == "strided"
    run_exact(a, b, kernel=kernel)


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


@pytest.mark.parametrize("kernel", ["auto", "splitk"])
def test_deterministic(kernel):
    """Bitwise-equal results on the same inputs: split-K sums its partials in a fixed order, no atomics."""
    a, b = make_inputs(100, 129, 311, "NN", device=DEVICE, seed=11, kind="randn")
    c1 = triton_kernels.hgemm(a, b, kernel=kernel)
    c2 = triton_kernels.hgemm(a, b, kernel=kernel)
    c3 = triton_kernels.hgemm(a.clone(), b.clone(), kernel=kernel)  # other addresses, the same plan
    assert torch.equal(c1, c2) and torch.equal(c1, c3)


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
    real = module.launches
    monkeypatch.setattr(module, "launches", lambda *args: (seen.append(args[4]), real(*args))[1])
    a, b = make_inputs(40, 24, 72, "NN", device=DEVICE, seed=17)
    run_exact(a, b, kernel=kernel)
    assert seen == [module.INTERPRETER_CONFIG]


# ---------------------------------------------------------------------------------------------- TMA kernel
# Aligned shapes (every leading dimension a multiple of 8 halves), with edges on every axis.
TMA_SHAPES = [(8, 8, 8), (40, 24, 72), (17, 40, 136), (96, 8, 16), (1, 64, 8)]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("m,n,k", TMA_SHAPES)
def test_tma_exact_all_layouts(m, n, k, layout):
    kernel = "tma"
    a, b = make_inputs(m, n, k, layout, device=DEVICE, seed=m + n + k)
    if tma_describable(a, b):
        run_exact(a, b, kernel=kernel)
    else:  # (1, K) column-major A has row stride 1: no TMA descriptor; refused, and `auto` takes the blocked path
        with pytest.raises(ValueError, match="TMA needs"):
            triton_kernels.hgemm(a, b, kernel=kernel)
        run_exact(a, b, kernel="auto")


@pytest.mark.parametrize("acc", ACCS)
def test_tma_every_config_exact(acc):
    kernel = "tma"
    # One tile plus 8 on M and N (TMA boxes past the edge), K with a partial last tile; persistent programs
    # walk several tiles each.
    for cfg in configs(kernel):
        m, n, k = 2 * cfg.block_m + 8, cfg.block_n + 8, cfg.block_k * 2 + 8
        a, b = make_inputs(m, n, k, "NT", device=DEVICE, seed=2)
        run_exact(a, b, acc=acc, config=cfg, kernel=kernel)


@pytest.mark.parametrize("acc", ACCS)
def test_splitk_every_config_exact(acc):
    """Every tile and split: one tile plus one on M and N, K cut into exactly split_k slices of two K tiles, the
    last one 8 short (masked)."""
    for cfg in configs("splitk"):
        m, n, k = cfg.block_m + 1, cfg.block_n + 1, 2 * cfg.split_k * cfg.block_k - 8
        assert splitk.slices(k, cfg)[1] == cfg.split_k
        a, b = make_inputs(m, n, k, "TN", device=DEVICE, seed=cfg.split_k)
        run_exact(a, b, acc=acc, config=cfg, kernel="splitk")


@pytest.mark.parametrize("k", [1, 8, 31, 33, 97])
def test_splitk_short_k_takes_fewer_slices(k):
    """K shorter than split_k tiles: the slices are whole K tiles, so fewer of them; none is empty."""
    cfg = Config(16, 32, 16, group_m=1, num_warps=4, num_stages=2, split_k=4)
    k_slice, split = splitk.slices(k, cfg)
    assert k_slice % cfg.block_k == 0 and (split - 1) * k_slice < k <= split * k_slice
    a, b = make_inputs(17, 33, k, "NN", device=DEVICE, seed=k)
    run_exact(a, b, config=cfg, kernel="splitk")


def test_splitk_output_with_strides():
    a, b = make_inputs(17, 33, 200, "NT", device=DEVICE, seed=8)
    out_t = torch.full((33, 17), float("nan"), dtype=torch.float16, device=DEVICE)
    c = triton_kernels.hgemm(a, b, out=out_t.t(), kernel="splitk")
    assert compare(c, reference(a, b)).ok


@pytest.mark.parametrize("layout", ["NN", "TT"])
def test_staged_operands_exact(layout):
    """A plan that stages the operands TMA cannot describe (odd leading dimensions, a strided view) copies them to
    aligned buffers and runs the TMA kernel on the copies; a C TMA cannot store to is written back from one."""
    kernel = "tma"
    a, b = make_inputs(37, 45, 99, layout, device=DEVICE, seed=9)
    b = torch.cat([b, b], dim=1)[:, ::2] if layout == "NN" else b  # NN: a strided B too
    out = poisoned_out(37, 45, DEVICE)
    stage = dispatch.staging(BY_KERNEL[kernel].alignment, a, b, out)
    assert stage[:2] == (True, True) and stage[2] == (kernel == "tma")
    run = dispatch.Runner(dispatch.Plan(kernel, configs(kernel)[3] if HAS_CUDA else
                                        BY_KERNEL[kernel].extra["module"].INTERPRETER_CONFIG, stage), False)
    run(a, b, out)
    v = compare(out, reference(a, b))
    assert v.ok, v.detail


# Compiles every config of every Triton record for sm_90 in both accumulations (a child process: the interpreter is
# on in this one). The GPU found an fp16-only compile error the interpreter cannot see (tma_persistent.py's
# tma_dot_step); this catches that class on the CPU.
_ALL_CONFIGS_PROBE = """
import json, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton_kernels.variants import VARIANTS

failed = []
for v in VARIANTS:
    mod = v.extra["module"]
    for cfg in mod.configs():
        for acc_fp16 in (False, True):
            fn, sig, consts, attrs = mod.inspect_source(cfg)
            consts = dict(consts, ACC_FP16=acc_fp16)
            for name in consts:
                sig.setdefault(name, "constexpr")
            try:
                triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs),
                               target=GPUTarget("cuda", 90, 32),
                               options=dict(num_warps=cfg.num_warps, num_stages=cfg.num_stages))
            except Exception as e:  # noqa: BLE001 - reported by name
                failed.append([v.name, cfg.name, acc_fp16, type(e).__name__])
print(json.dumps(failed))
"""


def test_every_config_compiles_for_sm90_in_both_accumulations():
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    root = Path(__file__).resolve().parent.parent
    res = subprocess.run([sys.executable, "-c", _ALL_CONFIGS_PROBE], cwd=root, env=env, capture_output=True,
                         text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(res.stdout.strip().splitlines()[-1]) == []


# Compiles each tma_ws config for sm_90 and reports what the warp-specialization pass did; run in a child process
# (the interpreter, on in this one, replaces @triton.jit functions by interpreted ones that cannot be compiled).
_WS_PROBE = """
import json, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton_kernels import tma_ws

def compile_(cfg, num_warps):
    fn, sig, consts, attrs = tma_ws.inspect_source(cfg)
    for name in consts:
        sig.setdefault(name, "constexpr")
    k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs),
                       target=GPUTarget("cuda", 90, 32), options=dict(num_warps=num_warps, num_stages=cfg.num_stages))
    return dict(ws="ttg.warp_specialize" in k.asm["ttgir"], warps=k.metadata.num_warps,
                setmaxnreg="USETMAXREG" in k.asm["sass"], hgmma="HGMMA" in k.asm["sass"])

rows = {c.name: compile_(c, c.num_warps) for c in tma_ws.configs()}
rows["w8"] = compile_(tma_ws.configs()[3], 8)
print(json.dumps(rows))
"""


def test_warp_specialization_applies():
    """Every config of the study kernel tma_ws.py compiles to a warp-specialized kernel for sm_90: a
    `ttg.warp_specialize` op in the TTGIR, 12 warps (a TMA producer warpgroup and two wgmma consumers), `setmaxnreg`
    (USETMAXREG) in the SASS; with num_warps=8 Triton 3.6 leaves the loop unspecialized (tma_ws.py's header; why
    it is not a variant is there too)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    root = Path(__file__).resolve().parent.parent
    res = subprocess.run([sys.executable, "-c", _WS_PROBE], cwd=root, env=env, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    rows = json.loads(res.stdout.strip().splitlines()[-1])
    w8 = rows.pop("w8")
    from triton_kernels import tma_ws

    assert len(rows) == len(tma_ws.configs())
    for name, r in rows.items():
        assert r == dict(ws=True, warps=12, setmaxnreg=True, hgmma=True), (name, r)
    assert not w8["ws"] and not w8["setmaxnreg"] and w8["warps"] == 8


def test_tma_rejects_unaligned_and_auto_falls_back():
    a, b = make_inputs(17, 33, 100, "NN", device=DEVICE, seed=3)  # N=33, K=100: rows not 16-byte multiples
    with pytest.raises(ValueError, match=r"kernel='tma'\): TMA needs unit inner strides, 16-byte aligned"):
        triton_kernels.hgemm(a, b, kernel="tma")
    assert triton_kernels.choose_kernel(a, b, torch.empty(17, 33, dtype=torch.float16, device=DEVICE)) == "blocked"
    run_exact(a, b, kernel="auto")


def test_kernel_argument_checked():
    a, b = make_inputs(8, 8, 8, "NN", device=DEVICE)
    with pytest.raises(ValueError, match=r"kernel must be one of \('auto', 'blocked', 'splitk', 'tma'\), "
                       r"got 'cublas'"):
        triton_kernels.hgemm(a, b, kernel="cublas")
    with pytest.raises(ValueError, match=r"configs: kernel must be one of \('blocked', 'splitk', 'tma'\), "
                       r"got 'wgmma'"):
        configs("wgmma")


@pytest.mark.gpu
def test_auto_times_the_candidates_and_keeps_the_fastest():
    """kernel="auto" on a new kind of call times each candidate kernel's configurations and keeps the fastest; on
    Hopper aligned operands make the TMA kernels candidates, and the chosen plan's time is the minimum."""
    a, b = make_inputs(256, 256, 256, "NT", device="cuda", seed=4)
    p = triton_kernels.plan(a, b)
    hopper = torch.cuda.get_device_capability() >= (9, 0)
    cands = dispatch.candidates(256, 256, 256, dispatch.device_arch(a), dispatch.sm_count(a), a, b, None)
    assert ("tma", (False, False, False)) in cands if hopper else all(k in ("blocked", "splitk") for k, _ in cands)
    facts = dispatch.key_of(a, b, None, "fp32", "auto", None)[:-2]
    times = [dispatch.TUNED.get((facts, k, st))[1] for k, st in cands]
    assert p.ms == min(times) and p.kernel in [k for k, _ in cands]
    run_exact(a, b, kernel=p.kernel, config=p.config)


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
