"""Plans without timing on the call path (triton_kernels/plan_table.py): shape classes and their bucket edges, table
lookups (own class, nearest class, borrowed dtype), the heuristic, the shipped tables, and the exact-plan cache file
(atomic writes, corruption, foreign contexts, two writer processes). Runs on the CPU; the plans themselves run
under the interpreter, where fp16 dots are exact."""
import json
import multiprocessing as mp
import warnings

import pytest
import torch

import triton_kernels
from compare.reference import compare, make_inputs, poisoned_out, reference
from triton_kernels import Config, configs, dispatch, plan_table, planner
from triton_kernels.plan_table import ExactCache, Plan, ShapeClass, Table, bucket, heuristic
from triton_kernels.variants import kernel_module

from conftest import DEVICE
from helpers import table_entry, table_of


@pytest.fixture(autouse=True)
def fresh():
    dispatch.clear()
    plan_table.clear_tables()
    yield
    dispatch.clear()
    plan_table.clear_tables()


def test_bucket_edges():
    assert [bucket(x) for x in (0, 1, 2, 3, 4, 5, 16, 17, 4096, 4097)] == [1, 1, 2, 4, 4, 8, 16, 32, 4096, 8192]
    assert bucket(10**9) == plan_table.BUCKET_CAP


def test_shape_class_reads_layout_and_alignment():
    a, b = make_inputs(40, 24, 64, "NT")
    c = plan_table.shape_class(a, b, None, "fp16", "fp32")
    assert (c.layout, c.align, c.m, c.n, c.k) == ("NT", "ttt", 64, 32, 64)
    assert plan_table.align_class(*make_inputs(40, 24, 72, "NN"), None) == "oot"  # 144-byte rows of A
    a, b = make_inputs(16, 5000, 64, "NN")  # B's rows 10,000 bytes apart: on 16-byte, off 32-byte boundaries
    assert plan_table.align_class(a, b, None) == "tot"
    a, b = make_inputs(16, 33, 64, "NN")  # N = 33: neither B nor the (16, 33) output TMA-describable
    assert plan_table.align_class(a, b, None) == "t--"
    wide = torch.zeros(16, 128, dtype=torch.float16)
    assert plan_table.layout_class(wide[:, ::2], b) == "SN" and plan_table.align_class(wide[:, ::2], b, None)[0] == "-"
    key = c.key
    assert ShapeClass.from_key(key) == c


def test_lookup_own_class_then_nearest_then_nothing():
    t = table_of({"fp16/fp32/NN/ttt/4096x4096x4096": table_entry(),
                "fp16/fp32/NN/ttt/16x4096x4096": table_entry("triton_splitk_tma", "16x64x128_w4_s4_g1_k4")})
    own = ShapeClass("fp16", "fp32", "NN", "ttt", 4096, 4096, 4096)
    assert t.lookup(own) == (t.entries[own.key], 0)
    e, d = t.lookup(ShapeClass("fp16", "fp32", "NN", "ttt", 2048, 4096, 4096))
    assert (e.plan.kernel, d) == ("triton_tma", 1)
    e, d = t.lookup(ShapeClass("fp16", "fp32", "NN", "ttt", 32, 4096, 4096))
    assert (e.plan.kernel, d) == ("triton_splitk_tma", 1)
    assert t.lookup(ShapeClass("fp16", "fp32", "NN", "ttt", 4096, 256, 256)) == (None, -1)  # 8 octaves away
    assert t.lookup(ShapeClass("fp16", "fp32", "NT", "ttt", 4096, 4096, 4096)) == (None, -1)  # another layout
    assert t.lookup(ShapeClass("fp16", "fp32", "NN", "---", 4096, 4096, 4096)) == (None, -1)  # another alignment


def test_lookup_borrows_the_fp16_and_fp32_accumulation_kinds():
    t = table_of({"fp16/fp32/NN/ttt/4096x4096x4096": table_entry(),
                "fp16/fp16/NN/ttt/4096x4096x4096": table_entry("triton_blocked", "128x128x64_w8_s4_g8")})
    e, d = t.lookup(ShapeClass("bf16", "fp32", "NN", "ttt", 4096, 4096, 4096))
    assert (e.plan.kernel, d) == ("triton_tma", 0)
    e, _ = t.lookup(ShapeClass("fp16", "fp16", "NN", "ttt", 4096, 4096, 4096))
    assert e.plan.kernel == "triton_blocked"  # its own kind first


def test_a_bad_table_entry_is_refused_whole():
    with pytest.raises(ValueError, match="unknown kernel"):
        table_of({"fp16/fp32/NN/ttt/64x64x64": table_entry("nonesuch")})
    with pytest.raises(ValueError, match="not of the form"):
        table_of({"fp16/fp32/NN/ttt/64x64x64": table_entry(config="big")})
    with pytest.raises(ValueError, match="format"):
        Table({"format": 99, "kind": "tensorcore_hgemm plan table"})
    for shapes, message in (("4096x4096x4096", "must be a list"), (["4096x4096"], "not of the form"),
                            (["0x4096x4096"], "not of the form"), (["abc"], "not of the form"),
                            ([4096], "not of the form")):  # the planner parses them on every call it asks
        with pytest.raises(ValueError, match=message):
            table_of({"fp16/fp32/NN/ttt/64x64x64": dict(table_entry(), shapes=shapes)})
    assert table_of({"fp16/fp32/NN/ttt/64x64x64": dict(table_entry(), shapes=["64x64x64"])}).entries


def test_files_naming_kernels_by_their_older_names_still_load(tmp_path):
    """The shipped table names kernels by their records' names; tables and exact-plan caches written while kernel=
    took the short names ("tma", "blocked") read as those names: the shipped table renamed back gives the same
    plans."""
    from triton_kernels.variants import BY_KERNEL

    older = {v.name: v.aliases[0] for v in BY_KERNEL.values() if v.aliases}
    path = sorted(plan_table.TABLE_DIR.glob("*.json"))[0]
    data = json.loads(path.read_text())
    assert {n for e in data["entries"].values() for n in (e["plan"]["kernel"], *e["kernels"])} <= set(older)
    for e in data["entries"].values():
        e["plan"]["kernel"] = older[e["plan"]["kernel"]]
        e["kernels"] = {older[k]: c for k, c in e["kernels"].items()}
    assert {e["plan"]["kernel"] for e in data["entries"].values()} <= set(older.values())
    new, old = Table.load(path), Table(data)
    assert {k: (e.plan, e.kernels) for k, e in old.entries.items()} == {
        k: (e.plan, e.kernels) for k, e in new.entries.items()}
    cache = tmp_path / "c.json"
    ExactCache(cache).put(CTX, "k", PLAN)
    stored = json.loads(cache.read_text())
    (cid,) = stored["contexts"]
    stored["contexts"][cid]["plans"]["k"]["kernel"] = "blocked"
    cache.write_text(json.dumps(stored))
    assert ExactCache(cache).get(CTX, "k") == PLAN and PLAN.kernel == "triton_blocked"


@pytest.mark.parametrize("m,n,k,arch,align,kernel", [
    (1, 4096, 4096, 90, "ttt", "triton_gemv"),
    (16, 4096, 4096, 90, "ttt", "triton_splitk_tma"),
    (16, 4096, 4096, 90, "---", "triton_splitk"),
    (16, 4096, 4096, 80, "ttt", "triton_splitk"),
    (4096, 4096, 4096, 90, "ttt", "triton_tma"),
    (4096, 4096, 4096, 90, "tt-", "triton_blocked"),
    (4096, 4096, 4096, 80, "ttt", "triton_blocked"),
    (3001, 4999, 2003, 90, "---", "triton_blocked"),
    (256, 256, 65536, 90, "ttt", "triton_splitk_tma"),
])
def test_heuristic_rules(m, n, k, arch, align, kernel):
    p = heuristic(m, n, k, arch, 132, align)
    assert p.kernel == kernel and p.source == "heuristic"
    if p.config.split_k > 1:
        assert -(-k // p.config.split_k) >= 2 * p.config.block_k  # every slice at least two K tiles deep
    assert p.config in configs(kernel)


def test_table_plan_takes_the_table_else_the_heuristic(monkeypatch):
    """On a GPU with no cost model (tests/test_planner.py has the model's step between the two)."""
    monkeypatch.setenv(planner.MODEL_ENV, "off")
    monkeypatch.setattr(dispatch, "device_arch", lambda t: 90)
    monkeypatch.setattr(dispatch, "sm_count", lambda t: 132)
    a, b = make_inputs(40, 32, 64, "NN", device=DEVICE)
    monkeypatch.setattr(plan_table, "table_for", lambda arch, sms: None)
    assert triton_kernels.plan(a, b).source == "heuristic"
    dispatch.clear()
    t = table_of({"fp16/fp32/NN/ttt/64x32x64": table_entry("triton_blocked", "64x64x64_w4_s4_g8")})
    monkeypatch.setattr(plan_table, "table_for", lambda arch, sms: t)
    p = triton_kernels.plan(a, b)
    assert (p.kernel, p.config.name, p.source) == ("triton_blocked", "64x64x64_w4_s4_g8", "table")
    assert triton_kernels.plan(a, b, kernel="triton_blocked").config.name == "64x64x64_w4_s4_g8"  # the kernel's own
    b2 = make_inputs(40, 32, 64, "NT", device=DEVICE)[1]
    assert triton_kernels.plan(a, b2).source == "heuristic"  # no NT entry


def test_a_plan_that_cannot_run_the_operands_is_not_taken(monkeypatch):
    """A table entry naming a TMA plan without staging, met by operands TMA cannot read in place (a hand-edited
    table, or one from another version): the heuristic instead (no cost model), never a launch that raises."""
    monkeypatch.setenv(planner.MODEL_ENV, "off")
    monkeypatch.setattr(dispatch, "device_arch", lambda t: 90)
    monkeypatch.setattr(dispatch, "sm_count", lambda t: 132)
    a, b = make_inputs(40, 33, 72, "NN", device=DEVICE)
    t = table_of({"fp16/fp32/NN/t--/64x64x128": table_entry("triton_tma", "128x128x64_w8_s4_g8")})
    monkeypatch.setattr(plan_table, "table_for", lambda arch, sms: t)
    p = triton_kernels.plan(a, b)
    assert p.source == "heuristic" and p.kernel == "triton_blocked"


def test_shipped_tables_are_valid_and_say_how_they_were_made():
    files = sorted(plan_table.TABLE_DIR.glob("*.json"))
    assert files, "no plan table ships with the package"
    for path in files:
        t = Table.load(path)
        assert t.entries and t.arch >= 80 and t.sms > 0
        assert t.meta["command"].startswith("python -m compare tune") and t.meta["commit"] and t.meta["versions"]
        runs = json.loads(path.read_text())["runs"]  # every run whose entries the file holds
        assert runs and all(r["command"].startswith("python -m compare tune") and r["git_commit"] for r in runs)
        for e in t.entries.values():
            assert e.plan.kernel in triton_kernels.KERNELS and set(e.kernels) <= set(triton_kernels.KERNELS)


def _distinct_plans():
    seen = {}
    for path in sorted(plan_table.TABLE_DIR.glob("*.json")):
        for e in Table.load(path).entries.values():
            seen.setdefault((e.plan.kernel, e.plan.config), e)
    return list(seen.values())


@pytest.mark.parametrize("entry", _distinct_plans(), ids=lambda e: f"{e.plan.kernel}-{e.plan.config.name}")
def test_table_plans_are_exact_under_the_interpreter(entry):
    """Every distinct (kernel, configuration) a shipped table names, staging included, run whole (dispatch.Runner)
    on small integer operands of its class's layout: bit-exact. The interpreter ignores warps and stages; tiles,
    splits and the TMA and pointer paths are what it checks."""
    cls, plan = entry.cls, entry.plan
    m, n, k = (40, 24, 72) if plan.config.split_k == 1 else (16, 24, 1088)  # rows TMA can describe
    if plan.kernel == "triton_gemv":
        m = 1
    a, b = make_inputs(m, n, k, cls.layout.replace("S", "N"), device=DEVICE, seed=7, dtype=cls.dtype)
    out = poisoned_out(m, n, DEVICE, cls.dtype)
    dispatch.Runner(Plan(plan.kernel, plan.config, plan.stage), cls.acc == "fp16")(a, b, out)
    ref = reference(a, b)
    assert compare(out, ref).ok and torch.equal(out.double(), ref.to(out.dtype).double())


# ---- the exact-plan cache ------------------------------------------------------------------------------------
CTX = {"device": "test", "arch": 90, "sms": 132, "torch": "t", "triton": "x", "source": "s"}
PLAN = Plan("triton_blocked", Config(64, 64, 64, num_stages=4), ms=0.5, source="exact")


def test_cache_round_trip_and_contexts(tmp_path):
    path = tmp_path / "c.json"
    c = ExactCache(path)
    assert c.get(CTX, "k") is None
    c.put(CTX, "k", PLAN)
    assert ExactCache(path).get(CTX, "k") == PLAN  # a new process's view: read from the file
    other = {**CTX, "triton": "y"}
    assert ExactCache(path).get(other, "k") is None  # another Triton version: never used
    ExactCache(path).put(other, "k", Plan("triton_tma", configs("triton_tma")[0], source="exact"))
    data = json.loads(path.read_text())
    assert len(data["contexts"]) == 2  # the other context's plans stay in the file
    assert ExactCache(path).get(CTX, "k") == PLAN


def test_cache_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "c.json"
    ExactCache(path).put(CTX, "k", PLAN)
    before = path.read_bytes()

    def broken(*args, **kwargs):
        raise OSError("disk full")
    monkeypatch.setattr(plan_table.json, "dump", broken)
    with pytest.raises(OSError, match="disk full"):
        ExactCache(path).put(CTX, "k2", PLAN)
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["c.json", "c.json.lock"]


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"format": 1, "kind": "something else"}',
                                     '{"format": 7, "kind": "tensorcore_hgemm exact plans", "contexts": {}}', ""])
def test_a_corrupt_or_foreign_cache_is_ignored_with_one_warning(tmp_path, content):
    path = tmp_path / "c.json"
    path.write_text(content)
    plan_table._warned.clear()
    c = ExactCache(path)
    with pytest.warns(RuntimeWarning, match="ignoring plan cache"):
        assert c.get(CTX, "k") is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ExactCache(path).get(CTX, "k") is None  # the same file: no second warning
        ExactCache(path).put(CTX, "k", PLAN)
    assert (tmp_path / "c.json.corrupt").read_text() == content  # set aside, not lost
    assert ExactCache(path).get(CTX, "k") == PLAN


def test_cache_skips_plans_it_cannot_run(tmp_path):
    path = tmp_path / "c.json"
    ExactCache(path).put(CTX, "k", PLAN)
    data = json.loads(path.read_text())
    (cid,) = data["contexts"]
    data["contexts"][cid]["plans"]["bad"] = {"kernel": "nonesuch", "config": "64x64x64_w4_s4_g8"}
    data["contexts"][cid]["plans"]["worse"] = {"kernel": "blocked", "config": 3}
    path.write_text(json.dumps(data))
    c = ExactCache(path)
    assert c.get(CTX, "k") == PLAN and c.get(CTX, "bad") is None and c.get(CTX, "worse") is None


def _writer(path: str, tag: str, n: int) -> None:
    c = ExactCache(path)
    for i in range(n):
        c.put(CTX, f"{tag}{i}", PLAN)


def test_two_writer_processes_lose_nothing(tmp_path):
    path = tmp_path / "c.json"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(path), tag, 15)) for tag in "ab"]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    c = ExactCache(path)
    assert all(c.get(CTX, f"{t}{i}") == PLAN for t in "ab" for i in range(15))


def test_exact_plans_come_from_the_cache_and_are_exact(monkeypatch, tmp_path):
    """tune="exact" with the plan already in the user's cache (another process timed it): no timing, the cached
    plan runs, bit-exact under the interpreter; and the cache key tells layouts apart."""
    monkeypatch.setattr(dispatch, "device_arch", lambda t: 90)
    monkeypatch.setattr(dispatch, "sm_count", lambda t: 132)
    monkeypatch.setattr(plan_table, "context", lambda device: CTX)
    monkeypatch.setenv(plan_table.CACHE_ENV, str(tmp_path / "c.json"))
    monkeypatch.setattr(dispatch, "_tune", lambda *args: pytest.fail("timed"))
    for layout, plan in (("NN", Plan("triton_splitk", configs("triton_splitk")[0], source="exact")),
                         ("TT", Plan("triton_tma", configs("triton_tma")[4], (False, True, False), source="exact"))):
        a, b = make_inputs(40, 24, 1100, layout, device=DEVICE, seed=3)  # TT: B's 2,200-byte columns, staged
        plan_table.exact_cache().put(CTX, plan_table.exact_key(a, b, None, "fp32", "auto"), plan)
        assert triton_kernels.plan(a, b, tune="exact") == plan
        out = triton_kernels.hgemm(a, b, tune="exact")
        assert torch.equal(out.double(), reference(a, b).half().double())


def test_tune_argument_and_environment_are_checked(monkeypatch):
    a, b = make_inputs(8, 8, 8, "NN", device=DEVICE)
    with pytest.raises(ValueError, match="tune must be one of"):
        triton_kernels.hgemm(a, b, tune="fast")
    monkeypatch.setenv(plan_table.TUNE_ENV, "sometimes")
    with pytest.raises(ValueError, match="TENSORCORE_HGEMM_TUNE='sometimes'"):
        plan_table.default_tune()


# ---- GPU: a first call anywhere ------------------------------------------------------------------------------
FIRST_CALLS = [(16, 4096, 4096, "NN"), (300, 2048, 1024, "NT"), (1, 4096, 2048, "NT"), (333, 517, 211, "TT")]


def _exact_gpu(m, n, k, layout, seed):
    a, b = make_inputs(m, n, k, layout, device="cuda", seed=seed)
    return a, b, reference(a, b).half()


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k,layout", FIRST_CALLS)
def test_first_call_of_a_new_shape_inside_graph_capture(m, n, k, layout):
    """The first call of a kind (plan lookup, compile, launch) happens inside torch.cuda.graph capture: the graph
    replays the right product (split-K scratch, staging copies and TMA descriptors included)."""
    a, b, ref = _exact_gpu(m, n, k, layout, seed=m)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = triton_kernels.hgemm(a, b)
    out.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, ref), triton_kernels.plan(a, b)


@pytest.mark.gpu
def test_first_call_on_a_side_stream():
    a, b, ref = _exact_gpu(77, 4096, 4096, "NT", seed=5)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        out = triton_kernels.hgemm(a, b)
    s.synchronize()
    assert torch.equal(out, ref)


@pytest.mark.gpu
@pytest.mark.parametrize("dynamic", [True, False])
@pytest.mark.parametrize("package", ["triton", "ptx"])
def test_first_calls_under_torch_compile_dynamic(package, dynamic):
    """torch.compile (Inductor, fullgraph) around each operator, dynamic and static shapes, three batch sizes: each a
    new kind of call at run time (a fresh plan inside the compiled graph), all exact. The operator is called as
    the failing case called it (positionally, the defaults left out: Inductor's fallback then receives acc, kernel
    and tune by name) and with every argument by keyword."""
    import ptx_kernels.ops  # noqa: F401  (registers the operators)
    import triton_kernels.ops  # noqa: F401
    from tests.conftest import ARCH

    ops = torch.ops.tensorcore_hgemm
    if package == "triton":
        def op(x, w):
            return (ops.triton_hgemm(x, w, "fp32") * 2,
                    ops.triton_hgemm(a=x, b=w, hgemm_acc="fp32", hgemm_kernel="auto", hgemm_tune=None) * 2)
    else:
        def op(x, w):
            return (ops.ptx_hgemm(x, w) * 2,
                    ops.ptx_hgemm(a=x, b=w, hgemm_kernel="wgmma_persistent" if ARCH >= 90 else "mma_stmatrix",
                                  hgemm_acc="fp32") * 2)
    torch._dynamo.reset()
    f = torch.compile(op, fullgraph=True, dynamic=dynamic)
    for m in (24, 40, 300):
        a, b, ref = _exact_gpu(m, 1024, 512, "NT", seed=m)
        got = f(a, b)
        assert torch.equal(got[0], ref * 2) and torch.equal(got[1], ref * 2), m


@pytest.mark.gpu
def test_ptx_first_call_inside_graph_capture():
    """The hand-written kernels' first call of a shape (extension already loaded) inside capture."""
    import ptx_kernels

    ptx_kernels.load()
    a, b, ref = _exact_gpu(130, 4096, 4096, "NT", seed=9)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = ptx_kernels.hgemm(a, b, kernel="wgmma_persistent")
    out.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, ref)


def test_tuner_keeps_no_plan_that_fails_the_check(monkeypatch):
    """`python -m compare tune` checks each case's chosen plan on the case's operands (compare.tune._Checker): a
    plan whose kernel writes a wrong product is refused, and its kernel named among the failed."""
    from compare.tune import _Checker

    a, b = make_inputs(37, 45, 99, "NN", device=DEVICE, seed=4)
    check = _Checker(a, b, "fp32")
    good = Plan("triton_blocked", triton_kernels.configs("triton_blocked")[0] if DEVICE == "cuda" else
                kernel_module(dispatch.BY_KERNEL["triton_blocked"]).INTERPRETER_CONFIG)
    assert check(good) and not check.failed
    real = dispatch.Runner

    class Wrong(real):
        def __call__(self, a, b, c):
            super().__call__(a, b, c)
            c[3, 4] += 1  # one element off

    monkeypatch.setattr(dispatch, "Runner", Wrong)
    assert not check(good) and check.failed == {"triton_blocked"}
