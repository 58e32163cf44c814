"""The per-call plan cache of triton_kernels.dispatch: the cached path runs what the uncached one would choose,
skips validation only where the key implies it, stays bounded, and is safe across threads (and streams on a GPU);
the TMA descriptor cache keeps no tensor alive. Runs under the interpreter on the CPU, and on CUDA with a GPU."""
import gc
import threading

import pytest
import torch

import triton_kernels
from hgemm_common.operands import major
from compare.reference import compare, make_inputs, poisoned_out, reference
from triton_kernels import Config, call, configs, dispatch
from triton_kernels.launch import DescriptorCache, jit_launch
from triton_kernels.variants import BY_KERNEL, kernel_module

from conftest import DEVICE, HAS_CUDA

# Pinned where a GPU would otherwise time every configuration of every candidate for each new kind of call.
PIN = {} if not HAS_CUDA else {"config": configs("triton_blocked")[6], "kernel": "triton_blocked"}

CALLS = [  # (m, n, k, layout, hgemm keyword arguments)
    (40, 24, 72, "NN", {}),
    (40, 24, 72, "TT", {"acc": "fp16"}),
    (17, 33, 100, "NT", {"kernel": "triton_splitk", "config": configs("triton_splitk")[0]}),
    (33, 16, 7, "TN", {"kernel": "triton_blocked", "config": Config(32, 32, 32, num_stages=2)}),
    (64, 40, 48, "NN", {"kernel": "triton_tma"} if not HAS_CUDA else
     {"kernel": "triton_tma", "config": configs("triton_tma")[5]}),
]


@pytest.fixture(autouse=True)
def fresh_cache():
    dispatch.clear()
    yield
    dispatch.clear()


@pytest.fixture
def exact(monkeypatch, tmp_path):
    """tune="exact" on the CPU: a Hopper-sized device for the candidates, a temporary plan cache file, a fixed
    context (no GPU to ask)."""
    from triton_kernels import plan_table

    monkeypatch.setattr(dispatch, "device_arch", lambda t: 90)
    monkeypatch.setattr(dispatch, "sm_count", lambda t: 132)
    monkeypatch.setenv(plan_table.CACHE_ENV, str(tmp_path / "plans.json"))
    monkeypatch.setattr(plan_table, "context", lambda device: {"device": "test", "arch": 90, "sms": 132})
    return tmp_path / "plans.json"


@pytest.mark.parametrize("m,n,k,layout,kw", CALLS)
def test_cached_plan_is_the_uncached_choice(m, n, k, layout, kw):
    """The second call of a kind finds the first call's plan, and that plan is what choosing afresh gives."""
    if HAS_CUDA and "config" not in kw:
        kw = {**kw, **PIN}
    a, b = make_inputs(m, n, k, layout, device=DEVICE, seed=m + k)
    c1 = triton_kernels.hgemm(a, b, **kw)
    key = dispatch.key_of(a, b, None, kw.get("acc", "fp32"), kw.get("kernel", "auto"), kw.get("config"), None)
    cached = dispatch.PLANS.get(key)
    assert cached is not None and len(dispatch.PLANS) == 1
    fresh = dispatch.choose(a, b, c1, None, kw.get("acc", "fp32"), kw.get("kernel", "auto"), kw.get("config"),
                            key[:-3])
    assert (cached.plan.kernel, cached.plan.config, cached.plan.stage) == (fresh.kernel, fresh.config, fresh.stage)
    out = poisoned_out(m, n, DEVICE)
    assert triton_kernels.hgemm(a, b, out=out, **kw) is out
    assert torch.equal(out, c1) and compare(out, reference(a, b)).ok
    assert triton_kernels.plan(a, b, **kw) == cached.plan


@pytest.mark.parametrize("kernel", call.KERNELS)
def test_a_plan_serves_only_its_own_dtype(kernel):
    """fp16 and bf16 calls alike in everything else (shapes, strides, alignment, accumulation, pin) have keys that
    differ in the dtype only, so each gets its own plan (kernels compiled for `*fp16` or `*bf16`), never the
    other's: bf16 results are bf16 and exact, first call and cached call, with out= and without."""
    kw = {"kernel": kernel}
    if HAS_CUDA:
        kw["config"] = configs(kernel)[3] if kernel != "auto" else PIN["config"]
    shape = (40, 24, 24)  # K <= 28: the same integers in both dtypes (compare.reference.exact_window)
    a16, b16 = make_inputs(*shape, "NT", device=DEVICE, seed=2)
    a, b = make_inputs(*shape, "NT", device=DEVICE, seed=2, dtype="bf16")
    k16 = dispatch.key_of(a16, b16, None, "fp32", kernel, kw.get("config"), None)
    k = dispatch.key_of(a, b, None, "fp32", kernel, kw.get("config"), None)
    assert k != k16 and [x for x, y in zip(k, k16) if x != y] == [torch.bfloat16, torch.bfloat16]
    c16 = triton_kernels.hgemm(a16, b16, **kw)
    assert c16.dtype == torch.float16 and len(dispatch.PLANS) == 1
    for _ in range(2):  # the bf16 plan's first call, then its cached call
        c = triton_kernels.hgemm(a, b, **kw)
        assert c.dtype == torch.bfloat16 and compare(c, reference(a, b)).ok
        out = poisoned_out(*shape[:2], DEVICE, "bf16")
        assert triton_kernels.hgemm(a, b, out=out, **kw) is out and torch.equal(out, c)
    assert dispatch.PLANS.get(k) is not dispatch.PLANS.get(k16) and len(dispatch.PLANS) == 3  # out= is a key too
    assert torch.equal(triton_kernels.hgemm(a16, b16, **kw), c16)  # the fp16 plan still serves fp16
    assert torch.equal(c.double(), c16.double())


def test_hit_skips_validation_but_not_the_overlap_check(monkeypatch):
    a, b = make_inputs(40, 24, 72, "NN", device=DEVICE, seed=1)
    out = torch.empty(40 * 24 + 64, dtype=torch.float16, device=DEVICE)
    triton_kernels.hgemm(a, b, out=out[:960].view(40, 24), **PIN)
    real = call.validate
    monkeypatch.setattr(call, "validate", lambda *args, **kw: pytest.fail("validate() ran on a cache hit"))
    c = triton_kernels.hgemm(a, b, out=out[:960].view(40, 24), **PIN)
    assert compare(c, reference(a, b)).ok
    a2 = a.clone()
    c = triton_kernels.hgemm(a2, b, out=out[:960].view(40, 24), **PIN)  # other address, same key: no validate
    assert compare(c, reference(a2, b)).ok
    monkeypatch.setattr(call, "validate", real)
    big = torch.zeros(40 * 72 + 960, dtype=torch.float16, device=DEVICE)
    a_in = big[960:].view(40, 72)
    a_in.copy_(a)
    triton_kernels.hgemm(a_in, b, out=out[:960].view(40, 24), **PIN)  # new key (a_in's alignment may differ)
    with pytest.raises(ValueError, match="out overlaps an input"):  # same key as a_in's call, out inside A
        triton_kernels.hgemm(a_in, b, out=big[1000:1960].view(40, 24), **PIN)


def test_wrong_input_on_a_hit_still_errors_in_torch_mm_words():
    a, b = make_inputs(8, 8, 8, "NN", device=DEVICE)
    triton_kernels.hgemm(a, b, **PIN)
    with pytest.raises(ValueError, match=r"mat1 and mat2 shapes cannot be multiplied \(8x8 and 9x8\)"):
        triton_kernels.hgemm(a, torch.zeros(9, 8, dtype=torch.float16, device=DEVICE), **PIN)
    with pytest.raises(TypeError, match="mat2 must be a torch.Tensor"):
        triton_kernels.hgemm(a, [[1.0]], **PIN)
    with pytest.raises(TypeError, match="torch.float16"):
        triton_kernels.hgemm(a, b.float(), **PIN)


def test_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(dispatch.PLANS, "capacity", 3)
    for i, k in enumerate((8, 16, 24, 32, 40)):
        a, b = make_inputs(9, 10, k, "NN", device=DEVICE, seed=i)
        assert compare(triton_kernels.hgemm(a, b, **PIN), reference(a, b)).ok
        assert len(dispatch.PLANS) <= 3
    a, b = make_inputs(9, 10, 8, "NN", device=DEVICE, seed=0)  # evicted first: chosen again, still right
    assert compare(triton_kernels.hgemm(a, b, **PIN), reference(a, b)).ok


def _hammer(results: list, shapes, streams=None):
    def work(i):
        stream = streams[i % len(streams)] if streams else None
        ctx = torch.cuda.stream(stream) if stream is not None else _Null()
        for j in range(3):
            m, n, k = shapes[(i + j) % len(shapes)]
            a, b = make_inputs(m, n, k, "NT" if (i + j) % 2 else "NN", device=DEVICE, seed=100 * i + j)
            with ctx:
                c = triton_kernels.hgemm(a, b, **PIN)
            if stream is not None:
                stream.synchronize()
            results.append(compare(c, reference(a, b)).ok)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


class _Null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def test_threads_share_the_cache():
    """Four threads, overlapping kinds of call, every result checked exactly."""
    results = []
    _hammer(results, [(17, 24, 40), (33, 16, 72), (8, 40, 24)])
    assert len(results) == 12 and all(results)
    assert len(dispatch.PLANS) <= 6  # three shapes x two layouts


def test_candidates_follow_the_shape():
    """What kernel="auto" times on an H100 (132 SMs): split-K where 128x128 tiles leave SMs idle, the TMA kernels
    on describable operands, staging only where its copies are cheap next to the GEMM."""
    def mats(m, n, k, lda=None):
        a = torch.empty((m, lda or k), dtype=torch.float16, device="meta")[:, :k]
        return a, torch.empty((k, n), dtype=torch.float16, device="meta")

    def kernels(m, n, k, **kw):
        a, b = mats(m, n, k, **kw)
        return {kern: st for kern, st in dispatch.candidates(m, n, k, 90, 132, a, b, None)}

    decode = kernels(16, 4096, 4096)
    assert {"triton_splitk", "triton_splitk_tma", "triton_tma"} <= set(decode) and "triton_gemv" not in decode
    assert {"triton_gemv", "triton_splitk", "triton_splitk_tma"} <= set(kernels(1, 4096, 4096))  # M = 1: CUDA cores
    square = kernels(4096, 4096, 4096)
    assert not {"triton_splitk", "triton_splitk_tma"} & set(square)
    assert {"triton_tma", "triton_blocked"} <= set(square)
    assert not any(any(st) for st in square.values())
    odd = kernels(4095, 4097, 4093)  # no dimension a multiple of 8: the TMA kernels only by staging
    assert odd["triton_tma"] == (True, True, True) and odd["triton_blocked"] == (False, False, False)
    skinny_odd = kernels(16, 4097, 4093)  # staging B would cost more than the GEMM itself
    assert not {"triton_tma", "triton_splitk_tma"} & set(skinny_odd)  # split-K on TMA: never staged
    assert "triton_splitk" in skinny_odd
    assert "triton_splitk" not in kernels(16, 4096, 256)  # K too short for two slices of two 128-deep K tiles
    # rows 4000 (A) and 10000 (B) bytes apart: B's off the 32-byte sectors, so TMA on a copy of B too
    assert dispatch.candidates(3000, 5000, 2000, 90, 132, *mats(3000, 5000, 2000), None) == [
        ("triton_blocked", (False, False, False)), ("triton_tma", (False, False, False)),
        ("triton_tma", (False, True, False))]
    assert [k for k, _ in dispatch.candidates(4096, 4096, 4096, 90, 132, *mats(4096, 4096, 4096), None)].count(
        "triton_tma") == 1  # rows on the sectors: no copy to time
    assert {k for k, _ in dispatch.candidates(256, 256, 1024, 80, 108, *mats(256, 256, 1024), None)} == {
        "triton_blocked", "triton_splitk"}  # sm_80: no TMA records


def test_staging_copies_exact_aligned_and_wide():
    """The staging copies (`stage_copy`): each staged operand's buffer equal to it whatever its strides, rows
    PITCH-aligned, a column-major operand's buffer column-major, every buffer 256-byte aligned in one workspace; A
    and B copied by one launch, C copied back by another, bit for bit (NaN payloads, -0.0) and nothing written
    past C's columns. Row strides divisible by 8, 4 or 2 elements are passed divided (the kernel's loads as wide
    as that allows)."""
    from triton_kernels import stage_copy
    g = torch.Generator().manual_seed(1)
    base = torch.randn(70, 10000, generator=g).half().to(DEVICE)  # rows 20,000 bytes apart
    base[0, :8] = torch.tensor([0x7E01, 0xFE02, 0x8000, 0x7C00, 0xFC00, 0x0001, 0x7FFF, 0],
                               dtype=torch.int32).to(torch.int16).view(torch.float16).to(DEVICE)  # NaNs, -0.0, infs
    cases = [(base[:, :5000], "N"), (base[:, 2:5002], "N"), (base[1:, 1:36], "N"),
             (torch.randn(40, 33, generator=g).half().to(DEVICE).t(), "T"), (base[:, ::2][:50, :60], "N"),
             (base[:, :1], "N"), (base[:3, :130], "N")]
    for t, layout in cases:
        b = torch.randn(t.shape[1], 20, generator=g).half().to(DEVICE).t().contiguous().t()  # column-major B
        c = torch.full((t.shape[0], 20), float("nan"), device=DEVICE).half()[:, 2:19]  # rows off 16 bytes
        bufs = stage_copy.Buffers.of(t, b, c, (True, True, True))
        ws = torch.full((bufs.nbytes,), 255, dtype=torch.uint8, device=DEVICE)
        (a2, b2, c2), into, back = bufs.staged(t, b, c, ws)
        assert len(into) == 1 and len(back) == 1 and into[0].grid[0] > 1
        for spec in into:
            jit_launch(spec)
        for copy, src, lay in ((a2, t, layout), (b2, b, "T" if t.shape[1] > 1 else major(b))):
            assert torch.equal(copy.view(torch.int16), src.view(torch.int16)) and copy.data_ptr() != src.data_ptr()
            assert major(copy) == lay and (copy.stride(0) if lay == "N" else copy.stride(1)) % 64 == 0
            assert (copy.data_ptr() - ws.data_ptr()) % 256 == 0
        c2.copy_(torch.randn(c2.shape, generator=g).half().to(DEVICE))
        for spec in back:
            jit_launch(spec)
        assert torch.equal(c, c2)
        assert torch.isnan(c._base[:, :2]).all() and torch.isnan(c._base[:, 19:]).all()  # nothing past C's columns
    assert [stage_copy.stride_div(s, True) for s in (10000, 5000, 300, 302, 35, 64)] == [1, 8, 4, 2, 1, 1]
    assert stage_copy.stride_div(300, False) == 1


def test_auto_keeps_the_fastest_candidate(monkeypatch, exact):
    """The choice is the minimum of the candidates' timings, each candidate timed once per kind of call."""
    fake = {"triton_blocked": 3.0, "triton_splitk": 1.0, "triton_tma": 2.0, "triton_splitk_tma": 1.5}
    timed = []

    def tune(kernel, stage, facts, a, b, c, acc_fp16):
        timed.append(kernel)
        return configs(kernel)[0], fake[kernel]

    monkeypatch.setattr(dispatch, "_tune", tune)
    a, b = make_inputs(16, 256, 512, "NN", device=DEVICE)
    p = triton_kernels.plan(a, b, tune="exact")
    assert (p.kernel, p.config, p.ms) == ("triton_splitk", configs("triton_splitk")[0], 1.0), p
    assert sorted(timed) == ["triton_blocked", "triton_splitk", "triton_splitk_tma", "triton_tma"]
    assert triton_kernels.plan(a, b, tune="exact") is p and len(timed) == 4  # cached: not timed again


def test_close_candidates_are_timed_again(monkeypatch, exact):
    """Kernels whose first timings are within 10% of the fastest are timed again (interleaved rounds) and the
    medians choose: here split-K, 5% behind blocked in the first pass, wins the second; TMA, twice as slow, is not
    timed again."""
    assert dispatch.shortlist([1.0, 1.2, 1.05, 1.09, 1.01]) == [0, 4, 2]  # within 10%, fastest first, at most 3
    first = {"triton_blocked": 1.0, "triton_splitk": 1.05, "triton_tma": 2.0, "triton_splitk_tma": 1.2}
    again = {"triton_blocked": 1.2, "triton_splitk": 1.0}
    retimed = []

    def refine(runners, a, b, c):
        assert all(r.plan.config == configs(r.plan.kernel)[0] and r.plan.stage == (False, False, False)
                   for r in runners)  # the plans are the timed ones, field for field
        retimed.append(sorted(r.plan.kernel for r in runners))
        return [again[r.plan.kernel] for r in runners]

    monkeypatch.setattr(dispatch, "_tune", lambda kernel, *args: (configs(kernel)[0], first[kernel]))
    monkeypatch.setattr(dispatch, "refine", refine)
    a, b = make_inputs(16, 256, 512, "NN", device=DEVICE)
    p = triton_kernels.plan(a, b, tune="exact")
    assert (p.kernel, p.ms) == ("triton_splitk", 1.0) and retimed == [["triton_blocked", "triton_splitk"]]


@pytest.mark.parametrize("scale, winner", [(0.01, "triton_splitk"), (1.0, "triton_splitk_tma")])
def test_small_problems_rank_close_kernels_by_per_call_time(monkeypatch, exact, scale, winner):
    """Where the close kernels' device times are below WALL_BELOW_MS, each is also timed back to back and ranked by
    the larger of its device and per-call times: splitk_tma, 2% faster on the device but twice as slow per call
    (host-bound), loses at 10-20 us; at 1-2 ms the per-call time is not measured and the device time decides. The
    plan keeps the device time."""
    first = {"triton_blocked": 2.0, "triton_splitk": 1.02, "triton_tma": 2.0, "triton_splitk_tma": 1.0}
    walls = {"triton_splitk": 1.5, "triton_splitk_tma": 3.0}
    measured = []

    def per_call_ms(runners, a, b, c):
        measured.append(sorted(r.plan.kernel for r in runners))
        return [walls[r.plan.kernel] * scale for r in runners]

    monkeypatch.setattr(dispatch, "_tune", lambda kernel, *args: (configs(kernel)[0], first[kernel] * scale))
    monkeypatch.setattr(dispatch, "refine", lambda runners, a, b, c: [first[r.plan.kernel] * scale for r in runners])
    monkeypatch.setattr(dispatch, "per_call_ms", per_call_ms)
    a, b = make_inputs(16, 256, 512, "NN", device=DEVICE)
    p = triton_kernels.plan(a, b, tune="exact")
    assert (p.kernel, p.ms) == (winner, first[winner] * scale)
    close = [["triton_splitk", "triton_splitk_tma"]]
    assert measured == (close if scale * first["triton_splitk_tma"] < dispatch.WALL_BELOW_MS else [])


def test_small_square_problems_rank_by_device_time(monkeypatch, exact):
    """Per-call ranking is for skinny outputs only: on a small square problem (256 x 256, device times of 10-20 us)
    the device time decides even where the faster kernel costs more host time per call, and no per-call time is
    measured."""
    first = {"triton_blocked": 1.0, "triton_splitk": 2.0, "triton_tma": 0.95, "triton_splitk_tma": 2.0}
    monkeypatch.setattr(dispatch, "_tune", lambda kernel, *args: (configs(kernel)[0], first[kernel] * 0.01))
    monkeypatch.setattr(dispatch, "refine", lambda runners, a, b, c: [first[r.plan.kernel] * 0.01 for r in runners])
    monkeypatch.setattr(dispatch, "per_call_ms", lambda *args: pytest.fail("per-call time measured"))
    a, b = make_inputs(256, 256, 512, "NN", device=DEVICE)
    assert triton_kernels.plan(a, b, tune="exact").kernel == "triton_tma"


def test_per_call_time_is_not_measured_off_the_gpu():
    """The interpreter's host time says nothing about a GPU's: per_call_ms gives zeros there (and runs nothing)."""
    a, b = make_inputs(4, 4, 4, "NN", device="cpu")
    assert dispatch.per_call_ms([lambda *args: pytest.fail("ran")] * 2, a, b, None) == [0.0, 0.0]


def test_refine_round_runs_the_shortlisted_plans(monkeypatch, exact):
    """The real re-timing round, under the interpreter: every candidate ties, so the round builds each shortlisted
    plan anew and runs it (the timer here just calls it once); the plan it keeps then gives the exact product."""
    runs = []

    def time_ms(call):
        call()
        runs.append(1)
        return 1.0

    def tune(kernel, stage, facts, a, b, c, acc_fp16):
        return kernel_module(BY_KERNEL[kernel]).INTERPRETER_CONFIG, 1.0

    monkeypatch.setattr(dispatch, "time_ms", time_ms)
    monkeypatch.setattr(dispatch, "_tune", tune)
    a, b = make_inputs(40, 24, 520, "NN", device=DEVICE, seed=4)
    p = triton_kernels.plan(a, b, tune="exact")
    assert len(runs) == dispatch.REFINE_ROUNDS * min(dispatch.REFINE_MAX, 4)  # blocked, both split-Ks, TMA: tied
    assert p.config == kernel_module(BY_KERNEL[p.kernel]).INTERPRETER_CONFIG
    assert compare(triton_kernels.hgemm(a, b), reference(a, b)).ok


def test_descriptor_cache_is_bounded_and_keeps_no_tensor():
    cache = DescriptorCache(capacity=2)
    t = torch.ones(4, 8, dtype=torch.float16)
    encodes = []

    def enc(v):
        return lambda: (encodes.append(v), f"map{v}")[1]

    ptr = t.data_ptr()
    assert cache.get((ptr, (4, 8)), enc(1)) == "map1"
    assert cache.get((ptr, (4, 8)), enc(2)) == "map1" and encodes == [1]  # same geometry: the same map
    assert cache.get((ptr, (8, 4)), enc(3)) == "map3"  # same address, other shape: another key
    cache.get((ptr + 16, (4, 8)), enc(4))
    assert len(cache) == 2
    del t
    gc.collect()
    assert not any(isinstance(x, torch.Tensor) for v in cache._maps.items() for x in v)


def test_persistent_grid_fills_whole_rounds(monkeypatch):
    """The TMA kernel's grid (`tma_persistent.programs`): the fewest programs that need as many rounds as one per SM,
    as the Hopper launchers size theirs (hopper::persistent_blocks); the kernel's stride is its grid, so a grid that
    does not divide the tiles still covers each tile once (exact, odd tile counts, 2 and 3 programs)."""
    from triton_kernels import tma_persistent as tp

    assert [tp.programs(t, 132) for t in (512, 2048, 480, 7168, 100)] == [128, 128, 120, 131, 100]
    monkeypatch.setattr(tp, "BALANCED", False)
    assert tp.programs(512, 132) == 132
    monkeypatch.setattr(tp, "BALANCED", True)
    if not HAS_CUDA:  # the interpreter: 3 "SMs", 32 x 32 tiles
        for m, n, grid in ((64, 64, 2), (160, 32, 3), (224, 40, 3)):  # 4 tiles, 5 (3 + 2), 14 (3+3+3+3+2)
            a, b = make_inputs(m, n, 48, "NN", device=DEVICE, seed=m)
            c = poisoned_out(m, n, DEVICE)
            assert tp.launches(a, b, c, False, tp.INTERPRETER_CONFIG)[0].grid == (grid,)
            triton_kernels.hgemm(a, b, out=c, kernel="tma")
            assert compare(c, reference(a, b)).ok, (m, n)


def test_launch_hooks_send_direct_launches_back_to_the_jit_path():
    """Triton 3.6's launch hooks default to empty HookChains (never None): that is no hook, and direct launches are
    allowed; a hook added (a profiler's) makes every call, even of a plan already set up, take the JIT path."""
    from triton import knobs

    from triton_kernels import launch

    assert launch.hooks_idle()
    hook = lambda *args, **kwargs: None  # noqa: E731
    chain = knobs.runtime.launch_enter_hook
    if hasattr(chain, "add"):
        chain.add(hook)
        try:
            assert not launch.hooks_idle()
        finally:
            chain.remove(hook)
    else:
        knobs.runtime.launch_enter_hook = hook
        try:
            assert not launch.hooks_idle()
        finally:
            knobs.runtime.launch_enter_hook = chain
    assert launch.hooks_idle()


def test_operator_takes_the_plan_cache():
    """The operator runs hgemm's path: its call leaves a plan behind, and a second call reuses it."""
    from triton_kernels import ops  # noqa: F401
    a, b = make_inputs(17, 24, 40, "NT", device=DEVICE, seed=3)
    c = torch.ops.tensorcore_hgemm.triton_hgemm(a, b, "fp32")
    assert torch.equal(c, reference(a, b).half()) and len(dispatch.PLANS) == 1
    torch.ops.tensorcore_hgemm.triton_hgemm(a, b, "fp32")
    assert len(dispatch.PLANS) == 1


# ---------------------------------------------------------------------------------------------- GPU only
@pytest.mark.gpu
def test_threads_and_streams_share_the_cache():
    results = []
    _hammer(results, [(17, 24, 40), (130, 264, 520), (8, 40, 24)], streams=[torch.cuda.Stream() for _ in range(3)])
    assert len(results) == 12 and all(results)


def side_stream_and_graph(kernel: str, cfg: Config, ins: list, refs: list) -> tuple:
    """hgemm(kernel, config) on a side stream, then captured in a CUDA graph on that stream and replayed on each
    of `ins` (last the first), each replay followed by an eager call on the side stream; every result checked
    against `refs`. Returns (the first eager result, on ins[0]; A; B): A and B hold ins[0] again at the end."""
    a, b = (t.clone() for t in ins[0])
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        first = triton_kernels.hgemm(a, b, kernel=kernel, config=cfg)
        side.synchronize()
        assert compare(first, refs[0]).ok
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        out = triton_kernels.hgemm(a, b, kernel=kernel, config=cfg)
    for i in (*range(1, len(ins)), 0):
        a.copy_(ins[i][0])
        b.copy_(ins[i][1])
        graph.replay()
        torch.cuda.synchronize()
        assert compare(out, refs[i]).ok
        with torch.cuda.stream(side):
            eager = triton_kernels.hgemm(a, b, kernel=kernel, config=cfg)
        side.synchronize()
        assert compare(eager, refs[i]).ok
    return first, a, b


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["splitk", "splitk_tma", "streamk"])
def test_splitk_counters_on_streams_threads_and_graphs(kernel):
    """The fused split-K kernels' (pointer and TMA loads) and the stream-K kernel's (130 x 264 in 64 x 64 tiles: 15
    tiles, every one stream-K on a 132-SM GPU) tile counters and workspace (triton_kernels.splitk.COUNTERS,
    WORKSPACES: one buffer each per stream, the counters left at zero by every call): three threads on three streams
    calling at once with different data, every result exact; then a CUDA graph capturing the call (fresh buffers
    inside the capture) replayed on new data, between eager calls on the capture's stream; at the end every counter
    is zero again."""
    from triton_kernels import splitk

    if kernel in ("splitk_tma", "streamk") and torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("TMA kernels need sm_90")
    cfg = Config(64, 64, 64, group_m=8, num_warps=4, num_stages=4, split_k=1 if kernel == "streamk" else 4)
    ins = [make_inputs(130, 264, 1000, "NN", device="cuda", seed=s) for s in range(3)]
    refs = [reference(a, b) for a, b in ins]
    streams = [torch.cuda.Stream() for _ in ins]
    results = []

    def work(i):
        a, b = ins[i]
        with torch.cuda.stream(streams[i]):
            outs = [triton_kernels.hgemm(a, b, kernel=kernel, config=cfg) for _ in range(20)]
        streams[i].synchronize()
        results.extend(compare(c, refs[i]).ok for c in outs)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 60 and all(results)
    side_stream_and_graph(kernel, cfg, ins, refs)
    assert all(not buf.any() for buf in splitk.COUNTERS._bufs.values())
    assert len(splitk.WORKSPACES._bufs) >= 4  # one per stream used outside the capture


@pytest.mark.gpu
def test_splitk_wide_on_streams_and_graphs(monkeypatch):
    """The wide split-K kernel's two launches (the reduction a programmatic dependent launch, its workspace from the
    caching allocator) on a side stream and captured in a CUDA graph, replayed on new data between eager calls:
    exact every time; and the reduction launched as an ordinary second launch (PDL off) gives the same bits."""
    from triton_kernels import splitk_wide
    from triton_kernels.plan_table import Plan

    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("TMA kernels need sm_90")
    cfg = Config(64, 64, 128, group_m=8, num_warps=4, num_stages=6, split_k=16)
    ins = [make_inputs(130, 200, 6000, "NT", device="cuda", seed=s) for s in range(3)]
    first, a, b = side_stream_and_graph("splitk_wide", cfg, ins, [reference(a, b) for a, b in ins])
    monkeypatch.setattr(splitk_wide, "PDL", False)
    plain = poisoned_out(130, 200, "cuda", "fp16")
    dispatch.Runner(Plan("triton_splitk_wide", cfg), False)(a, b, plain)
    assert torch.equal(plain, first)


def test_every_launch_passes_every_kernel_parameter():
    """The direct launcher (`launch.Direct`) passes a Spec's arguments as they are, and the compiled kernel's launcher
    takes every parameter, defaults included: a launch that leaves a defaulted parameter out runs under kernel[grid]
    (the first call) and fails on the second ("function takes exactly 43 arguments (42 given)", which a GPU found
    when a parameter was added). So every configuration of every Triton kernel's launches names all of them. And
    Direct finds each TMA descriptor's operand among A, B and C by identity (`Desc.of`, or the view itself): a
    descriptor over a view the launcher made (the swapped tiles' B^T and A^T) must name the operand it views."""
    import inspect

    from triton_kernels.launch import Desc
    from triton_kernels.variants import VARIANTS

    a, b = make_inputs(40, 264, 520, "NT", device=DEVICE, seed=1)
    c = torch.empty(40, 264, dtype=a.dtype, device=a.device)
    for v in VARIANTS:
        if not v.interpretable:
            continue
        mod = kernel_module(v)
        for cfg in mod.configs():
            for spec in mod.launches(a, b, c, False, cfg):
                params = inspect.signature(getattr(spec.fn, "fn", spec.fn)).parameters
                assert len(spec.args) == len(params), (v.name, cfg.name, getattr(spec.fn, "__name__", spec.fn))
                for d in (x for x in spec.args if isinstance(x, Desc)):
                    target = d.tensor if d.of is None else d.of
                    assert any(target is t for t in (a, b, c)), (v.name, cfg.name, d.block)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
# every kernel but Gluon, which launches through its own GluonLaunch (never directly)
@pytest.mark.parametrize("kernel", [k for k in BY_KERNEL if k != "gluon"])
def test_direct_launch_after_the_first_call(kernel, dtype):
    """The first call compiles through kernel[grid]; later ones launch the kept kernels directly, with results
    identical to the first call's (pinned config: the same compiled kernel either way), for `*fp16` and `*bf16`
    signatures alike (TMA: descriptors encoded from the compiled kernel's element type)."""
    if "tma" in kernel and torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("TMA kernels need sm_90")
    cfg = triton_kernels.configs(kernel)[3]
    a, b = make_inputs(300, 264, 520, "NT", device="cuda", seed=5, dtype=dtype)
    c1 = triton_kernels.hgemm(a, b, kernel=kernel, config=cfg)
    r = dispatch.PLANS.get(dispatch.key_of(a, b, None, "fp32", kernel, cfg, None))
    assert r.direct, "the direct launcher was not set up (triton version, a launch hook?)"
    for _ in range(3):
        out = poisoned_out(300, 264, "cuda", dtype)
        triton_kernels.hgemm(a, b, out=out, kernel=kernel, config=cfg)
        assert torch.equal(out, c1)
        a2, b2 = a.clone(), b.clone()  # other addresses: new pointers, and new TMA descriptors
        assert torch.equal(triton_kernels.hgemm(a2, b2, kernel=kernel, config=cfg), c1)
    assert c1.dtype == a.dtype and torch.equal(c1, reference(a, b).to(a.dtype))


@pytest.mark.gpu(sm=90)
@pytest.mark.parametrize("layout", ["NN", "NT", "TN"])
def test_direct_launch_of_a_swapped_tile(layout):
    """A swapped tile (C^T = B^T A^T: the kernel's descriptors are over B and A the other way round) launches
    directly after its first call, on new addresses too, with the first call's bits."""
    from triton_kernels import tma_persistent as tp

    cfg = next(c for c in configs("triton_tma") if tp.swapped(c))
    a, b = make_inputs(24, 264, 520, layout, device="cuda", seed=6)
    c1 = triton_kernels.hgemm(a, b, kernel="triton_tma", config=cfg)
    r = dispatch.PLANS.get(dispatch.key_of(a, b, None, "fp32", "triton_tma", cfg, None))
    assert r.direct, "the direct launcher was not set up for the swapped tile"
    for _ in range(2):
        a2, b2 = a.clone(), b.clone()
        out = poisoned_out(24, 264, "cuda", "fp16")
        triton_kernels.hgemm(a2, b2, out=out, kernel="triton_tma", config=cfg)
        assert torch.equal(out, c1)
    assert torch.equal(c1, reference(a, b).half())


@pytest.mark.gpu(sm=90)
def test_descriptor_cache_keeps_no_tensor_alive():
    """TMA calls on many short-lived tensors: their memory is returned (the cache holds integers only), and a new
    tensor at a freed address with another shape gets its own descriptor (exact result)."""
    cfg = triton_kernels.configs("tma")[5]
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    for i in range(5):
        a, b = make_inputs(256, 128 + 8 * i, 64, "NN", device="cuda", seed=i)
        c = triton_kernels.hgemm(a, b, kernel="tma", config=cfg)
        assert torch.equal(c, reference(a, b).half())
        del a, b, c
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == base
