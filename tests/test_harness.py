"""The harness's logic without a GPU: registry, check catching a wrong kernel, result files, plots from a recorded
H100 run (tests/data/bench_h100_sample.json, written by `python -m compare bench` on the lent H100), inspect,
and the main job's report."""
import csv
import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import ptx_kernels
import triton_kernels
from compare import bench, check, plot, registry
from compare.reference import compare, make_inputs, reference
from ptx_kernels import toolchain

from conftest import HAS_CUDA

SAMPLE = Path(__file__).parent / "data" / "bench_h100_sample.json"
ROOT = Path(__file__).resolve().parent.parent


def test_registry_is_complete_and_unique():
    names = [k.name for k in registry.kernels()]
    assert len(names) == len(set(names))
    recs = registry.records()
    assert [v.name for v in recs if v.package == "ptx"] == [v.name for v in ptx_kernels.variants()]  # in order
    for v in recs:
        for acc in v.accs:
            assert registry.entry_name(v, acc) in names
    for v in triton_kernels.VARIANTS:
        for cfg in triton_kernels.configs(v.name):
            assert f"{v.name}[{cfg.name}]" in names and f"{v.name}_fp16acc[{cfg.name}]" in names
    assert names[0] == "torch.matmul"
    kinds = {k.family for k in registry.kernels()}
    assert {"torch", "triton", "simt", "wmma"} <= kinds


def test_records_say_what_scores_them():
    """Each record names the instruction ceiling that scores it: the one of the instruction that does its math."""
    ceiling_of = {"fma": None, "wmma": "mma.sync", "mma.sync": "mma.sync", "wgmma": "wgmma"}
    for v in registry.ptx_records():
        assert v.package == "ptx" and v.ceiling == ceiling_of[v.isa], v
    for v in triton_kernels.VARIANTS:  # tl.dot and Gluon's wgmma: the wgmma ceiling; the CUDA-core gemv: none;
        # gluon_stream's mma_v2: mma.sync's
        assert v.package == "triton" and v.ceiling == {"tl.dot": "wgmma", "wgmma": "wgmma", "fma": None,
                                                       "mma.sync": "mma.sync"}[v.isa], v


def test_bench_scores_against_the_record_ceiling():
    frame = {"mma_sync_fp32acc_tflops": 600.0, "mma_sync_fp16acc_tflops": 650.0, "copy_gb_s": 3000.0}
    from compare.frame import ceilings
    assert ceilings(frame) == {"mma.sync": {"fp32": 600.0, "fp16": 650.0}}
    wm = registry.select(["wmma_multistage_fp16acc"], gpu=True)[0]
    assert ceilings(frame)[wm.ceiling][wm.acc] == 650.0
    frame.update(wgmma_fp32acc_tflops=900.0, wgmma_fp16acc_tflops=920.0)
    assert ceilings(frame)["wgmma"] == {"fp32": 900.0, "fp16": 920.0}


def test_every_variant_file_is_registered_once():
    from ptx_kernels.build import ON_DEMAND_ENTRY
    # LAB_SOURCES: the ceiling loop and the layout probes; STAGE_COPY_SOURCE: the staging copy
    from ptx_kernels.variants import CSRC, LAB_SOURCES, STAGE_COPY_SOURCE, VARIANTS
    files = {p.relative_to(CSRC).as_posix() for p in CSRC.rglob("*.cu")}
    registered = [v.file for v in VARIANTS]  # dense and sparse
    assert len(registered) == len(set(registered))
    # and the on-demand library's entry point (ptx_kernels/build.py)
    built = set(registered) | set(LAB_SOURCES) | {STAGE_COPY_SOURCE, ON_DEMAND_ENTRY.relative_to(CSRC).as_posix()}
    assert files == built, files ^ built


def test_select_filters():
    assert [k.name for k in registry.select(["torch*"], gpu=False)] == ["torch.matmul"]
    cpu = registry.select(None, gpu=False)
    assert all(k.cpu_ok for k in cpu) and all(k.default for k in cpu)
    assert len(registry.select(["triton_tma", "triton_tma[*", "triton_tma_fp16acc*"], include_all=True, gpu=False)) \
        == 2 * (1 + len(triton_kernels.configs("tma")))


@pytest.mark.skipif(HAS_CUDA, reason="runs the CPU path of the check")
def test_check_catches_a_wrong_kernel():
    def off_by_one(a, b, out=None):
        c = torch.matmul(a, b)
        c[min(3, c.shape[0] - 1), 0] += 1
        return c

    good = registry.select(["triton_blocked"], gpu=False)
    bad = replace(good[0], name="wrong", run=off_by_one)
    rows, names, mat = check.run_check([*good, bad], gpu=False)
    wrong = [r for r in rows if r.kernel == "wrong"]
    assert wrong and not any(r.ok for r in wrong if r.inputs == "int")
    assert "first bad [" in wrong[0].detail
    assert all(r.ok for r in rows if r.kernel == "triton_blocked")
    assert names == ["triton_blocked", "wrong"] and mat[0][1] >= 1.0
    table = check.format_table(rows)
    assert "wrong" in table and "check failed" in table


@pytest.mark.parametrize("dtype", registry.DTYPES)
def test_cpu_check_set_covers_every_kernel_and_layout(dtype):
    """The interpreter's check set is sized for its cost, and shrinking it must not drop coverage silently: every
    Triton kernel offered here, in every accumulation the dtype has, and kernel="auto", runs the exact check in all
    four layouts (bf16, which adds the element type, not index arithmetic: with A and with B each row- and
    column-major) and the random check, and some case runs past its interpreter tile in N and K (fp16: in M, N and K
    in an exact case). Reads the set; runs no kernel."""
    from hgemm_common.record import ACCS_FOR
    from triton_kernels.dispatch import kernel_for
    from triton_kernels.variants import BY_KERNEL, VARIANTS, kernel_module

    # what the interpreter runs: on a GPU machine the Gluon kernel is offered too, but not to the interpreter
    entries = {k.name: k for k in registry.select(None, gpu=False, dtype=dtype)
               if k.package == "triton" and k.record.interpretable}
    kernels = {registry.entry_name(v, acc) for v in VARIANTS for acc in v.accs
               if acc in ACCS_FOR[dtype] and v.interpretable}
    assert kernels and set(entries) == kernels | {"triton"}
    assert {k.acc for k in entries.values()} == set(ACCS_FOR[dtype])
    cases = check.cases_for(False, dtype=dtype)
    for name, k in entries.items():
        runs = []
        for i, ((m, n, kk), lay, kind) in enumerate(cases):
            a, b = make_inputs(m, n, kk, lay, seed=i, kind=kind, dtype=dtype)
            if check.takes_case(k, a, b, lay, dtype):
                runs.append(((m, n, kk), lay, kind))
        exact = {lay for _, lay, kind in runs if kind == "int"}
        if dtype == "fp16":
            assert exact == set(check.LAYOUTS), name
        assert {lay[0] for lay in exact} == {lay[1] for lay in exact} == {"N", "T"}, (name, exact)
        assert any(kind == "randn" for *_, kind in runs), name
        record = BY_KERNEL[kernel_for(None)] if k.record.dispatch else k.record  # what auto runs interpreted
        tile = kernel_module(record).INTERPRETER_CONFIG
        past = [kind for (m, n, kk), _, kind in runs if n > tile.block_n and kk > tile.block_k
                and (dtype == "bf16" or m > tile.block_m and kind == "int")]
        assert past, name


def test_compare_reports_unwritten_and_bound():
    a, b = make_inputs(8, 8, 8, "NN", seed=1, kind="randn")
    ref = reference(a, b)
    c = ref.half()
    c[2, 5] = float("nan")
    v = compare(c, ref)
    assert not v.ok and v.first_bad == (2, 5) and v.unwritten == 1 and "unwritten" in v.detail
    from compare.reference import error_bound
    bound = error_bound(a, b, ref)
    assert compare(ref.half(), ref, bound).ok  # correctly rounded results sit inside the bound
    off = ref.half().clone()
    off[6, 1] += 0.25
    v2 = compare(off, ref, bound)
    assert not v2.ok and v2.first_bad == (6, 1) and v2.max_rel_to_bound > 1 and "bound" in v2.detail


@pytest.mark.parametrize("layout", ["NN", "TT"])
@pytest.mark.parametrize("m,n,k", [(1, 1, 4099), (7, 233, 4099), (496, 17, 311), (100, 129, 129), (17, 33, 28)])
def test_bf16_exact_inputs_keep_every_result_exact(m, n, k, layout):
    """bf16 integer inputs keep |C| <= 256, where bf16 holds every integer (TESTING.md 13), whatever K: past 28
    terms one operand (B; A when M > N) is the fp16 operand of the seed times `exact_window`, in the same layout."""
    from compare.reference import BF16_EXACT, exact_window

    a, b = make_inputs(m, n, k, layout, seed=3, dtype="bf16")
    a16, b16 = make_inputs(m, n, k, layout, seed=3)
    assert a.dtype == b.dtype == torch.bfloat16 and (a.stride(), b.stride()) == (a16.stride(), b16.stride())
    assert reference(a, b).abs().max() <= BF16_EXACT
    if k <= 28:
        assert torch.equal(a.double(), a16.double()) and torch.equal(b.double(), b16.double())
    elif m > n:
        assert torch.equal(a.double(), a16.double() * exact_window(k, m)) and torch.equal(b.double(), b16.double())
    else:
        assert torch.equal(b.double(), b16.double() * exact_window(k, n).t()) and torch.equal(a.double(), a16.double())


@pytest.mark.parametrize("k", [29, 64, 311, 4099])
def test_exact_window_spans_k_and_covers_it(k):
    from compare.reference import exact_window

    s = -(-k // 28)
    w = exact_window(k, s + 3).bool()
    assert int(w.sum(1).max()) <= 28 and w[0, -1]  # at most 28 terms; row 0 ends on the masked tail
    assert all(w[r, :s].any() and w[r, -s:].any() for r in range(s))  # each row: one k in every S, end to end
    assert (w[:s].sum(0) == 1).all()  # S rows: every k exactly once


def test_bench_files_schema(tmp_path):
    data = plot.load(SAMPLE)
    rows = [bench.BenchRow(**r) for r in data["rows"]]
    bench.write_bench(tmp_path, data["environment"], rows)
    back = json.loads((tmp_path / "bench.json").read_text())
    assert [{k: r[k] for k in data["rows"][0]} for r in back["rows"]] == data["rows"]
    assert {"wall_us", "wall_ratio_to_torch", "hbm_pct"} <= set(back["rows"][0])  # recorded before they existed
    for key in ("gpu", "sm_count", "driver", "torch", "triton", "cuda_runtime", "git_commit", "command", "date",
                "during_run"):
        assert key in back["environment"], key
    with open(tmp_path / "bench.csv") as f:
        csv_rows = list(csv.DictReader(f))
    assert len(csv_rows) == len(rows) and set(csv_rows[0]) == set(bench.BenchRow.__dataclass_fields__)


def test_summary_geomean_from_recorded_run():
    rows = [bench.BenchRow(**r) for r in plot.load(SAMPLE)["rows"]]
    text = bench.summary(rows)
    assert "torch.matmul" in text and "1.000" in text
    assert bench.geomean([0.5, 2.0]) == pytest.approx(1.0)


def test_plots_from_recorded_run(tmp_path):
    pngs = plot.plot_all(SAMPLE, tmp_path)
    names = {p.name for p in pngs}
    assert {"tflops_vs_size.png", "ladder.png"} <= names  # the sample has no LLM shapes: no ratio_llm.png
    for p in pngs:
        assert p.stat().st_size > 20_000 and p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_llm_heatmap(tmp_path):
    data = plot.load(SAMPLE)
    llm_rows = []
    for (m, n, k) in bench.SUITES["llm"]:
        for name, t in (("torch.matmul", 500.0), ("triton", 450.0)):
            llm_rows.append(dict(data["rows"][0], kernel=name, m=m, n=n, k=k, tflops=t, ratio_to_torch=t / 500.0))
    path = plot.plot_llm({"environment": data["environment"], "rows": llm_rows}, tmp_path)
    assert path and path.stat().st_size > 10_000


def test_wall_time_in_summary_tables_and_plot(tmp_path):
    """Wall time per call sits beside device time: both geomeans in the summary and the report's tables, and a
    heat map of the wall ratios over every shape of the run."""
    from compare.report import bench_markdown, summary_markdown

    data = plot.load(SAMPLE)
    rows = []
    for i, (m, n, k) in enumerate(bench.SUITES["mixed"]):
        for name, t, wall in (("torch.matmul", 500.0, 25.0), ("triton", 450.0, 30.0 + i)):
            rows.append(dict(data["rows"][0], kernel=name, m=m, n=n, k=k, tflops=t, ratio_to_torch=t / 500.0,
                             wall_us=wall, wall_ratio_to_torch=25.0 / wall, hbm_pct=50.0))
    brows = [bench.BenchRow(**r) for r in rows]
    (name, dev, wall, n), = [g for g in bench.geomeans(brows) if g[0] == "triton"]
    assert dev == pytest.approx(0.9) and wall == pytest.approx(bench.geomean([r.wall_ratio_to_torch for r in brows
                                                                              if r.kernel == "triton"]))
    assert n == len(bench.SUITES["mixed"]) and "wall x torch" in bench.summary(brows)
    assert "(wall per call)" in summary_markdown(brows) and "wall us/call" in bench_markdown(brows)
    assert "%HBM" in bench.format_table(brows)
    path = plot.plot_wall({"environment": data["environment"], "rows": rows}, tmp_path)
    assert path and path.name == "ratio_wall.png" and path.stat().st_size > 10_000


def test_mixed_suite_is_the_issue_17_suite():
    mixed = bench.SUITES["mixed"]
    assert set(bench.SUITES["square"] + bench.SUITES["llm"] + bench.SUITES["odd"]) <= set(mixed)
    assert {m for m, n, k in mixed if n >= 4096 and k >= 4096 and m <= 512} >= {1, 16, 64, 128, 512}
    assert any(m % 8 and n % 8 and k % 8 for m, n, k in mixed)  # a shape no TMA descriptor takes in place


def test_parse_shapes():
    assert bench.parse_shapes("16x4096x4096,3000X5000X2000") == [(16, 4096, 4096), (3000, 5000, 2000)]
    with pytest.raises(ValueError, match="not of the form MxNxK"):
        bench.parse_shapes("16x4096")


def test_timer_names_its_flushes():
    """The flush modes `bench --flush` offers, the clean one by default; a wrong name fails before any CUDA
    work."""
    from hgemm_common.timing import FLUSHES

    assert FLUSHES == ("clean", "write", "none")
    with pytest.raises(ValueError, match="flush must be one of"):
        bench.Timer(flush="dirty")


def test_inspect_triton_keeps_its_promises(tmp_path):
    """Each Triton record's promised SASS instructions are in its sm_90 compile, its forbidden ones absent (no nvcc
    needed: Triton ships ptxas and cuobjdump)."""
    from compare.disasm import run_inspect

    rows, skipped = run_inspect([v.name for v in triton_kernels.VARIANTS], tmp_path)
    assert not skipped
    for v, r in zip(triton_kernels.VARIANTS, rows):
        assert all(r.mix[op] > 0 for op in v.promised("sm_90")), (v.name, r.mix)
        assert all(r.mix[op] == 0 for op in v.forbids.get("sm_90", ())), (v.name, r.mix)
    assert rows[0].smem_dynamic == triton_kernels.configs("blocked")[0].smem_bytes
    for r in rows:
        assert (tmp_path / r.ptx_file).read_text().startswith("//") and (tmp_path / r.sass_file).stat().st_size
    assert "| `triton_tma` |" in (tmp_path / "inspect.md").read_text()


def test_inspect_cache_reuses_rows_and_ignores_a_bad_entry(tmp_path, monkeypatch):
    """An inspected row, its PTX and SASS are kept per target in the user's cache folder: the next inspect of the
    same sources and toolchain reads them back instead of compiling; a truncated entry is ignored with one warning
    and written anew; another nvcc has another key. A shipped entry is read where its key is this machine's and
    never where it is not; the SASS's columns are counted again from the stored SASS. (A hand-written target: a
    Triton target's key needs the compiler's view of its kernel, which the interpreter hides: test_inspect_store.)"""
    import lzma

    from compare import disasm

    monkeypatch.setenv("TENSORCORE_HGEMM_BUILD_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(disasm, "SHIPPED", tmp_path / "shipped")
    monkeypatch.setattr(toolchain, "nvcc_version", lambda: "release 13.0")  # this machine's, with nvcc or without
    (t,) = disasm.targets(["wmma_naive"])
    FFMA, HMMA = "        /*0040*/   FFMA R0, R1, R2, R3 ;\n", "        /*0050*/   HMMA.16816.F32 R0, R2, R4, R0 ;\n"
    made = []

    def make(t, out):  # what inspect_cuda writes and returns, without a compile
        made.append(t.label)
        (out / f"{t.stem}.ptx").write_text("// ptx")
        (out / f"{t.stem}.sass").write_text(FFMA)
        return disasm.InspectRow(t.label, "ptx_kernels/csrc/sm80/wmma_naive.cu", "sm_90a", 40, 0, 0, 0,
                                 {c: int(c == "FFMA") for c in disasm.COLUMNS}, f"{t.stem}.ptx", f"{t.stem}.sass")

    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    row = disasm.cached(t, first, make)
    assert row.mix["FFMA"] == 1
    assert disasm.cached(t, second, make) == row and made == [t.label]
    assert (second / row.sass_file).read_text() == FFMA
    (entry,) = disasm.cache_dir().glob("*.json")
    entry.write_text(entry.read_text()[:50])
    with pytest.warns(RuntimeWarning, match="ignoring the inspect store entry"):
        assert disasm.cached(t, second, make) == row
    data = json.loads(entry.read_text())
    assert made == [t.label] * 2 and data["row"]["kernel"] == t.label and data["key"] == disasm.store_key(t)

    # the shipped store: the same entry, its SASS now with two FFMA and an HMMA, read without a compile
    entry.unlink()
    data["sass"] = FFMA + FFMA + HMMA
    disasm.SHIPPED.mkdir()
    disasm.shipped_entry(t).write_bytes(lzma.compress(json.dumps(data).encode()))
    shipped = disasm.cached(t, second, make)
    assert made == [t.label] * 2 and (shipped.mix["FFMA"], shipped.mix["HMMA"]) == (2, 1)
    assert (second / row.sass_file).read_text() == data["sass"]
    monkeypatch.setattr(toolchain, "nvcc_version", lambda: "release 13.1")  # another nvcc: another key, a compile
    assert disasm.store_key(t) != data["key"] and disasm.store_key(t, nvcc="release 13.0") == data["key"]
    assert disasm.cached(t, second, make) == row and made == [t.label] * 3


def test_inspect_store_is_current():
    """The inspect rows that ship (compare/inspect_store, read by the main job and the study page wherever the key
    is this machine's) are those of today's sources: a kernel changed without `python -m compare inspect
    --refresh-store` fails here, named. A Triton target's key follows its configuration and dtype. In a child
    process: a Triton key needs Triton's compiler, which the interpreter replaces."""
    from compare import disasm

    code = ("import json; from compare import disasm as d\n"
            "other = [c.name for c in __import__('triton_kernels.tma_persistent').tma_persistent.configs()][1]\n"
            "t = d.targets(['triton_tma', f'triton_tma[{other}]'])\n"
            "keys = [d.store_key(x) for x in (*t, *d.targets(['triton_tma'], 'bf16'))]\n"
            "print(json.dumps({'stale': d.stale_store(), 'keys': keys}))")
    res = subprocess.run([sys.executable, "-c", code], env=disasm._child_env(), capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(res.stdout.splitlines()[-1])
    assert not got["stale"], (f"the shipped inspect store is stale: {got['stale']}; run `python -m compare inspect "
                              "--refresh-store` (needs nvcc) and commit compare/inspect_store")
    assert len(set(got["keys"])) == 3


@pytest.mark.skipif(toolchain.find_nvcc() is None, reason="nvcc not installed")
def test_inspect_takes_report_names(tmp_path):
    """The names of the check and bench tables round-trip: an fp16-accumulation entry inspects that
    instantiation, `triton` the kernel hgemm(kernel="auto") runs on an H100."""
    from compare.disasm import run_inspect

    rows = {r.kernel: r for r in run_inspect(["wmma_async_dbuf", "wmma_multistage_fp16acc", "triton"], tmp_path)[0]}
    wm, auto = rows["wmma_async_dbuf"], rows["triton"]
    assert wm.mix["HMMA"] > 0 and wm.mix["HGMMA"] == 0 and wm.mix["LDGSTS"] > 0
    assert rows["wmma_multistage_fp16acc"].mix["HMMA"] > 0
    assert auto.mix["UTMALDG"] > 0 and auto.source.startswith("triton_kernels/tma_persistent.py")


@pytest.mark.skipif(toolchain.find_nvcc() is None, reason="nvcc not installed")
def test_inspect_bf16_shows_the_bf16_instantiations(tmp_path):
    """`inspect --dtype bf16` compiles the bf16 instantiation of the kernel the fp16 row shows (same tile, same
    B layout): its tensor-core instructions are the .BF16 forms; a kernel without bf16 is refused by name."""
    from compare.disasm import run_inspect

    rows, _ = run_inspect(["wgmma_persistent", "triton_tma", "mma_stmatrix"], tmp_path, "bf16")
    assert [r.kernel for r in rows] == ["wgmma_persistent bf16", "triton_tma bf16", "mma_stmatrix bf16"]
    forms = {r.kernel: set(re.findall(r"H[G]?MMA\.[\w.]+", (tmp_path / r.sass_file).read_text())) for r in rows}
    assert forms["wgmma_persistent bf16"] == {"HGMMA.64x256x16.F32.BF16"}
    assert forms["triton_tma bf16"] and all(f.endswith(".F32.BF16") for f in forms["triton_tma bf16"])
    assert forms["mma_stmatrix bf16"] == {"HMMA.16816.F32.BF16"}
    with pytest.raises(registry.UnknownKernel, match="'wmma_naive' does not take bf16 inputs; those that do: triton"):
        run_inspect(["wmma_naive"], tmp_path, "bf16")


@pytest.mark.skipif(HAS_CUDA or toolchain.find_nvcc() is None, reason="the CPU main job")
def test_main_job_without_gpu(tmp_path):
    res = subprocess.run([sys.executable, "-m", "compare", "--out", str(tmp_path)], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "no CUDA GPU here" in res.stdout
    index = (tmp_path / "index.md").read_text()
    assert "Not measured: timing needs a CUDA GPU" in index
    assert "| `triton_blocked` | sm_90 |" in index and "| `wmma_multistage` | sm_90a |" in index
    assert "phase check:" in res.stdout and "| check |" in index
    assert json.loads((tmp_path / "check.json").read_text())["rows"]


def test_main_job_starts_the_build_first_and_waits_for_it_only_beside_the_check(tmp_path, monkeypatch):
    """On a GPU the main job starts the PTX extension's build before anything else takes the CPU (the inspect child
    after it, at the lowest priority), and the check runs beside it, joining it only at its end (`during`); a build
    that fails is reported with its phase time, and so is the on-demand kernels' build after it. CPU: the build, the
    inspect child and the check are stand-ins."""
    import threading

    from compare import disasm, report

    events, release = [], threading.Event()

    def load(on_demand=False):
        release.wait(10)  # the build lasts until the check has started
        raise ptx_kernels.BuildError("nvcc failed on sm90/x.cu part 1:\n(the error)")

    def building() -> bool:
        return any(t.name == "ptx build" for t in threading.enumerate())

    class Child:
        pid = os.getpid()

    def run_check_parallel(kernels, *, during, **kw):
        events.append(f"check started, building {building()}")
        release.set()
        during()
        events.append(f"check joined, building {building()}")
        raise KeyboardInterrupt  # the rest of the main job is not this test's

    monkeypatch.setattr(ptx_kernels, "load", load)
    monkeypatch.setattr(toolchain, "find_nvcc", lambda: "nvcc")
    monkeypatch.setattr(disasm, "start", lambda out, nice=0: events.append(f"inspect started, building {building()}")
                        or events.append(f"inspect nice {nice}") or Child())
    monkeypatch.setattr(check, "run_check_parallel", run_check_parallel)
    logged = []
    with pytest.raises(KeyboardInterrupt):
        report.run(tmp_path, gpu=True, workers=1, log=logged.append)
    assert events == ["inspect started, building True", "inspect nice 19", "check started, building True",
                      "check joined, building False"], events
    assert any(line.startswith("phase build (beside the check): ") for line in logged), logged
    result = report.Result()
    report._start_build(result, logged.append).join()
    assert result.failures == ["the PTX extension did not build: nvcc failed on sm90/x.cu part 1:"]
    assert result.phases["build (beside the check)"] >= 0
    assert "on-demand build (beside the check)" not in result.phases  # not tried without the extension

    def on_demand_fails(on_demand=False):
        if on_demand:
            raise ptx_kernels.BuildError("linking the on-demand library /x/lib.so failed:\n(the error)")

    monkeypatch.setattr(ptx_kernels, "load", on_demand_fails)
    result = report.Result()
    report._start_build(result, logged.append).join()
    assert result.failures == ["the PTX on-demand kernels did not build: linking the on-demand library /x/lib.so "
                               "failed:"], result.failures
    assert set(result.phases) == {"build (beside the check)", "on-demand build (beside the check)"}


def test_check_workers_yield_to_the_build_beside_them(monkeypatch):
    """The check's worker processes run at a lower priority while the extension builds beside them (their PTX
    cases wait for it), and at the normal one otherwise."""
    from compare import parallel

    seen = []
    monkeypatch.setattr(parallel, "spawn_pulling", lambda target, units, collect, workers, during=None, nice=0:
                        seen.append((during is not None, nice)))
    check.run_check_parallel({"fp16": []}, workers=2, during=lambda: None)
    check.run_check_parallel({"fp16": []}, workers=2)
    assert seen[0][0] and seen[0][1] > 0 and seen[1] == (False, 0), seen


def test_check_units_put_cases_that_compile_alike_together_the_largest_first():
    """The check's workers take units in turn: the cases whose Triton kernels compile alike (dtype, layout, which
    of M, N, K are 1 or multiples of 16) are one unit, run in one process, so that what they share compiles once;
    units of more cases and larger problems come first, each warm job alone at the end; every job in one unit."""
    cases = check.cases_for(True)
    jobs = [("case", i + 1000 * d, c, [], False, dt) for d, dt in enumerate(("fp16", "bf16"))
            for i, c in enumerate(cases)]
    warm = [("triton", "dense", 64, 64, 64, "NN", "fp16"), ("triton", "dense", 8, 64, 64, "NT", "bf16")]
    units = check.check_units(jobs, warm)
    assert sorted(j for u in units for j in u if j[0] == "case") == sorted(jobs)
    assert units[-2:] == [[("warm", *warm[0])], [("warm", *warm[1])]]
    case_units = units[:-2]
    assert all(len({check.compile_alike(j[2], j[5]) for j in u}) == 1 for u in case_units)
    assert len({check.compile_alike(u[0][2], u[0][5]) for u in case_units}) == len(case_units)
    sizes = [(len(u), max(j[2][0][0] * j[2][0][1] * j[2][0][2] for j in u)) for u in case_units]
    assert sizes == sorted(sizes, reverse=True)
    # 17x33x100 and 136x264x520 share no multiple of 16 (nor a 1): one unit per dtype and layout; 1024^3's int and
    # random cases too; 1x1x1 (ones) and 496x233x4099 (M a multiple of 16) compile apart
    alike = lambda a, b, lay, dt: check.compile_alike((a, lay, "int"), dt) == check.compile_alike((b, lay, "int"), dt)
    assert alike((17, 33, 100), (136, 264, 520), "NN", "fp16") and not alike((17, 33, 100), (1, 1, 1), "NN", "fp16")
    assert not alike((17, 33, 100), (496, 233, 4099), "NN", "fp16")
    key = check.compile_alike(((17, 33, 100), "NN", "int"), "fp16")
    assert key != check.compile_alike(((17, 33, 100), "NT", "int"), "fp16")
    assert key != check.compile_alike(((17, 33, 100), "NN", "int"), "bf16")
    assert len(units[0]) == 3 and {j[2][0] for j in units[0]} == {(17, 33, 100), (129, 7, 311), (136, 264, 520)}


@pytest.mark.skipif(HAS_CUDA, reason="the CPU refusal")
def test_bench_refuses_without_gpu():
    res = subprocess.run([sys.executable, "-m", "compare", "bench", "--shapes", "64x64x64"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "bench needs a CUDA GPU" in res.stdout


@pytest.mark.gpu
def test_bench_refuses_to_time_a_wrong_kernel():
    def off_by_one(a, b, out=None):
        c = torch.matmul(a, b)
        c[0, 0] += 1
        return c

    # a kernel's entry (checked as fp32 accumulation), not torch's: torch.matmul's own check allows what cuBLAS's
    # reduced-precision split-K may do (compare.reference.torch_matmul_acc), and one unit at one element is within it
    base, kernel = registry.select(["torch.matmul", "triton"])[:2]
    rows = bench.bench_shape([base, replace(kernel, name="wrong", run=off_by_one)], 512, 512, 512, budget_ms=20)
    assert [r.kernel for r in rows] == ["torch.matmul", bench.CONTROL, "wrong"]  # the A/A control after the baseline
    wrong = rows[2]
    assert wrong.status == "failed check" and wrong.tflops is None and rows[0].tflops > 0
    assert rows[0].wall_us > 0 and rows[0].wall_ratio_to_torch == 1.0 and wrong.wall_us is None
    assert rows[1].ratio_to_torch and rows[1].samples == rows[0].samples  # interleaved: as many calls as the baseline


def _imports(package: str) -> set[str]:
    import ast

    names = set()
    for path in (ROOT / package).glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def test_package_boundaries():
    """Flow runs one way: hgemm_common <- each kernel package <- compare; neither kernel package imports the other,
    and no module of the harness shadows one of the standard library."""
    assert not {"triton_kernels", "ptx_kernels", "compare"} & _imports("hgemm_common")
    assert "ptx_kernels" not in _imports("triton_kernels") and "compare" not in _imports("triton_kernels")
    assert "triton_kernels" not in _imports("ptx_kernels") and "compare" not in _imports("ptx_kernels")
    assert not {p.stem for p in (ROOT / "compare").glob("*.py")} & set(sys.stdlib_module_names)


def test_timer_sleep_covers_the_host_deficit():
    """The GPU sleep ahead of timed calls covers what the CPU falls behind at its worst point: 1 ms of margin and
    the first call's enqueue when the GPU's flush + kernel outlast one and a half times the host's enqueue cost,
    the sum of the deficits up to the last call when not, the generous default before the costs are known."""
    from compare.bench import Timer, sleep_ahead_us

    t = Timer.__new__(Timer)  # no GPU: only the sizing rule
    t.flush_us = 85.0
    assert t.sleep_us(100, None, None) == 100 * Timer.ENQUEUE_US_PER_CALL
    assert t.sleep_us(100, host_us=50.0, gpu_us=20.0) == pytest.approx(75.0 + 1000.0)
    assert t.sleep_us(100, host_us=200.0, gpu_us=20.0) == pytest.approx(100 * 300.0 - 99 * 105.0 + 1000.0)
    # a pass whose slow-to-launch call comes after fast ones: the deficit peaks at that call, not at the end
    assert sleep_ahead_us([10.0, 10.0, 400.0, 10.0], [100.0, 100.0, 1000.0, 100.0]) == \
        pytest.approx(1.5 * 420.0 - 200.0 + 1000.0)


class _FakeEvent:
    def __init__(self, log):
        self.log, self.at = log, None

    def record(self):
        self.log.append("event")
        self.at = len(self.log)

    def elapsed_time(self, end):
        return float(end.at - self.at)


class _FakeTimer(bench.Timer):
    """The bench's timer with its GPU primitives replaced by entries in a log."""

    def __init__(self, log):
        self.log, self.clock_hz = log, 2.0e9
        self.flush_us, self.flush_host_us = 100.0, 10.0
        self.flush = lambda: log.append("flush")

    def _events(self, n):
        return [_FakeEvent(self.log) for _ in range(n)]

    def _sleep(self, us):
        self.log.append(("sleep", us))

    def _sync(self):
        self.log.append("sync")


def _fake_live(log, names, est_ms=0.9, host_us=30.0):
    def call(name):
        log.append(("call", name))
    return [bench.Live(name, lambda name=name: call(name), est_ms, host_us) for name in names]


def test_timing_is_per_call_and_interleaved(monkeypatch):
    """time_live on a fake timer: each round one sleep, then passes that call every kernel once, each call behind
    an L2 flush and between two events, the first kernel rotating from pass to pass; one synchronization a round,
    then each kernel's back-to-back wall-time calls (no flush, no events), the first rotating from round to round."""
    log = []
    monkeypatch.setattr(bench, "wall_us", lambda fn, calls: (log.append("wall"), fn(), 5.0)[-1])
    names = ["torch.matmul", bench.CONTROL, "triton", "wgmma_persistent"]
    live = _fake_live(log, names)
    samples, walls = bench.time_live(_FakeTimer(log), live, rounds=3, budget_ms=30.0)
    counts = bench.call_counts(live, 30.0, 3, 0.1)
    assert counts == [30] * 4 and [len(s) for s in samples] == counts and walls == [[5.0] * 3] * 4
    assert all(x == 2.0 for s in samples for x in s)  # each event pair brackets one call alone (the fake clock)
    rounds, passes = [], []
    i = 0
    while i < len(log):
        assert log[i][0] == "sleep"  # every round starts behind a sleep
        i += 1
        calls = []
        while log[i] != "sync":
            assert log[i:i + 2] == ["flush", "event"] and log[i + 3] == "event", log[i:i + 4]
            calls.append(log[i + 2][1])
            i += 4
        i += 1
        walled = []
        while i < len(log) and log[i] == "wall":
            walled.append(log[i + 1][1])
            i += 2
        rounds.append(walled)
        passes += [calls[j:j + 4] for j in range(0, len(calls), 4)]
    assert len(passes) == 30 and all(sorted(p) == sorted(names) for p in passes)  # one call of each per pass
    assert [p[0] for p in passes] == [names[j % 4] for j in range(30)]  # the first rotates
    assert all(p == names[j % 4:] + names[:j % 4] for j, p in enumerate(passes))
    assert rounds == [names, names[1:] + names[:1], names[2:] + names[:2]]


def test_slow_kernels_spread_over_the_passes():
    """A kernel whose budget buys fewer calls runs in that many passes, spread evenly (each round gets its share);
    a tiny call is held to MAX_CALLS_PER_ROUND a round and a slow one to one a round."""
    assert bench.pass_schedule([6, 6, 2]) == [[0, 1], [1, 0], [2, 0, 1], [0, 1], [1, 0], [2, 0, 1]]
    sched = bench.pass_schedule([90, 30, 9])
    assert len(sched) == 90 and [sum(i in p for p in sched) for i in range(3)] == [90, 30, 9]
    assert all(sum(2 in p for p in sched[r * 30:(r + 1) * 30]) == 3 for r in range(3))
    live = [bench.Live("tiny", None, 0.001, 10.0), bench.Live("slow", None, 500.0, 10.0)]
    assert bench.call_counts(live, 100.0, 3, 0.15) == [3 * bench.MAX_CALLS_PER_ROUND, 3]
    assert bench.pass_schedule([]) == []
    # the A/A control is timed as often as the baseline, whatever its own estimate (alone, these two estimates buy
    # 136 and 137 calls)
    pair = [bench.Live("torch.matmul", None, 0.210, 10.0), bench.Live(bench.CONTROL, None, 0.208, 10.0)]
    assert bench.call_counts(pair, 30.0, 1, 0.01)[1] == bench.call_counts(pair, 30.0, 1, 0.01)[0] == 136


def test_time_passes_sizes_its_sleep_from_the_pass():
    """One sleep ahead of a batch of passes, sized by sleep_ahead_us from each call's host cost (the kernel's, the
    flush's and the events') against its GPU time (the estimate and the flush); one synchronization after it."""
    log = []
    t = _FakeTimer(log)
    live = _fake_live(log, ["a", "b"], est_ms=0.05, host_us=200.0)
    out = t.time_passes([x.fn for x in live], [[0, 1], [1, 0]], [200.0, 200.0], [50.0, 50.0])
    assert [len(x) for x in out] == [2, 2]
    assert log[0] == ("sleep", pytest.approx(bench.sleep_ahead_us([210.0] * 4, [150.0] * 4)))
    assert log.count("sync") == 1 and log.count(("call", "a")) == 2


def _rows(ratios, control=True, median_ms=1.0):
    """BenchRows of a run: per shape torch.matmul, its A/A control at the given ratio, and a kernel
    nine tenths as fast."""
    rows = []
    for i, x in enumerate(ratios):
        for name, ratio in (("torch.matmul", 1.0), *([(bench.CONTROL, x)] if control else []), ("triton", 0.9)):
            rows.append(bench.BenchRow(name, "torch", "fp32", "", 64 + i, 4096, 4096, "NN", "ok",
                                       median_ms=median_ms / ratio, tflops=100.0 * ratio, ratio_to_torch=ratio,
                                       samples=50, spread_pct=2.0, wall_us=10.0, wall_ratio_to_torch=1.0))
    return rows


def test_aa_verdict_marks_an_unreliable_run():
    """The run is reliable when the A/A control's geomean lies within 1 +- AA_BAND and every shape within its band
    (AA_SHAPE_BAND, wider on calls of a few event-clock ticks); else the verdict says UNRELIABLE and why; a run
    without the control is unreliable too."""
    ok = bench.aa_verdict(_rows([1.01, 0.99, 1.005]))
    assert ok.reliable and ok.shapes == 3 and ok.line.startswith("Reliable run:") and "1.00 +- 0.02" in ok.line
    drift = bench.aa_verdict(_rows([1.03, 1.03, 1.04]))
    assert not drift.reliable and drift.line.startswith("UNRELIABLE RUN:") and "outside 1.00 +- 0.02" in drift.line
    assert not drift.outside  # each shape within its band: the geomean alone fails it
    one = bench.aa_verdict(_rows([1.0] * 20 + [0.90]))
    assert not one.reliable and abs(one.geomean - 1.0) < bench.AA_BAND
    assert one.outside == [("84x4096x4096 NN fp16", 0.90, bench.AA_SHAPE_BAND)] and "84x4096x4096" in one.line
    tiny = bench.aa_verdict(_rows([1.0] * 20 + [0.93], median_ms=0.01))  # two 0.5 us ticks over 10 us: a 10% band
    assert bench.shape_band(0.01) == pytest.approx(0.1) and tiny.reliable
    none = bench.aa_verdict(_rows([1.0], control=False))
    assert not none.reliable and none.line.startswith("UNRELIABLE RUN: no A/A control")


def test_control_is_not_a_kernel_in_the_summaries():
    """The A/A control is a row of every bench, right after the baseline, and no kernel of the geomeans: the
    summary shows torch.matmul's spread beside the kernels' and ends with the verdict."""
    base = registry.select(["torch.matmul", "triton"], gpu=False)
    assert [k.name for k in bench.with_control(base)] == ["torch.matmul", bench.CONTROL, "triton"]
    assert bench.with_control(bench.with_control(base)) == bench.with_control(base)
    assert [k.name for k in bench.with_control(base[1:])] == ["triton"]
    rows = _rows([1.01, 0.99])
    assert [g[0] for g in bench.geomeans(rows)] == ["torch.matmul", "triton"]
    text = bench.summary(rows)
    assert bench.CONTROL not in text.splitlines()[1] and "spread" in text.splitlines()[0]
    assert text.splitlines()[1].split()[:2] == ["torch.matmul", "1.000"] and "2.0%" in text.splitlines()[1]
    assert text.splitlines()[-1] == bench.aa_verdict(rows).line
    assert not [g for g in bench.dtype_gaps(rows, rows) if g[0] == bench.CONTROL]


def test_bench_json_says_the_verdict_on_its_first_line(tmp_path):
    for ratios, first in (([1.0, 1.01], "Reliable run"), ([1.05, 1.04], "UNRELIABLE RUN")):
        rows = _rows(ratios)
        bench.write_bench(tmp_path, {"gpu": "test"}, rows)
        text = (tmp_path / "bench.json").read_text()
        assert text.splitlines()[0].startswith('{"verdict": "' + first)
        data = json.loads(text)
        assert data["verdict"] == bench.aa_verdict(rows).line and data["aa_control"]["shapes"] == 2
        assert [x["kernel"] for x in data["summary"]] == ["torch.matmul", "triton"]
        assert len(data["rows"]) == len(rows) and plot.load(tmp_path)["environment"] == {"gpu": "test"}


def test_select_by_dtype_keeps_the_kernels_that_take_it():
    """bf16 runs only entries whose record lists bf16 and whose accumulation bf16 offers (fp32): never an
    `_fp16acc` entry; the baseline takes both; patterns that match only fp16 kernels say which take bf16."""
    fp16 = registry.select(None, gpu=True)
    bf16 = registry.select(None, gpu=True, dtype="bf16")
    assert bf16[0].name == "torch.matmul" and fp16[0].name == "torch.matmul"
    assert {k.name for k in bf16} <= {k.name for k in fp16}
    for k in bf16:
        assert "bf16" in k.record.dtypes and k.acc == "fp32" and k.takes("bf16")
    assert all(not k.takes("bf16") for k in registry.kernels() if k.acc == "fp16")
    fp16_only = [k.name for k in registry.kernels() if "bf16" not in k.record.dtypes]
    if fp16_only:
        with pytest.raises(registry.UnknownKernel, match=rf"no kernel matching '{fp16_only[0]}' takes bf16 inputs"):
            registry.select([fp16_only[0]], gpu=True, dtype="bf16")
    with pytest.raises(registry.UnknownKernel, match=r"dtype must be one of \('fp16', 'bf16'\)"):
        registry.select(None, dtype="fp8")


def test_bf16_rows_get_their_own_plots_and_the_dtype_gap_table(tmp_path):
    """One bench.json holding fp16 and bf16 rows plots each dtype on its own (bf16 files carry `_bf16`, titles name
    the dtype); dtype_gaps pairs each kernel's ratio in fp16 with its ratio in bf16 on the shapes both timed."""
    data = plot.load(SAMPLE)
    rows = [dict(r, dtype="fp16") for r in data["rows"]]
    rows += [dict(r, dtype="bf16", tflops=r["tflops"] and r["tflops"] * 0.98) for r in data["rows"]]
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"environment": data["environment"], "rows": rows}))
    names = {p.name for p in plot.plot_all(path, tmp_path)}
    assert {"tflops_vs_size.png", "ladder.png", "tflops_vs_size_bf16.png", "ladder_bf16.png"} <= names
    a = [bench.BenchRow(**dict(r, dtype="fp16")) for r in data["rows"]]
    b = [bench.BenchRow(**dict(r, dtype="bf16", ratio_to_torch=r["ratio_to_torch"] and r["ratio_to_torch"] - 0.01))
         for r in data["rows"]]
    gaps = bench.dtype_gaps(a, b)
    assert gaps and all(kern != "torch.matmul" and y == pytest.approx(x - 0.01) for kern, _, x, y in gaps)
    assert "-0.010" in bench.format_gaps(gaps).splitlines()[1]


def test_bf16_check_and_bench_cli_refuse_what_they_cannot_run(capsys):
    from compare.__main__ import main

    for cmd in ("check", "bench"):
        assert main([cmd, "--kind", "sparse", "--dtype", "bf16"]) == 2
        assert "the 2:4 sparse kernels take fp16 only" in capsys.readouterr().err
    assert main(["bench", "--dtype", "fp16,fp8"]) == 2
    assert "--dtype takes fp16 or bf16 or a comma list of them, got 'fp16,fp8'" in capsys.readouterr().err


def test_wall_calls_stay_within_the_round_budget():
    """bench.wall_calls: a quarter of a round's timed calls, at least WALL_MIN_CALLS when they fit in the round's
    budget, one for a call longer than that (a slow ladder step at 16384^3), at most 200."""
    assert bench.wall_calls(166, 0.2, 33.3) == 41
    assert bench.wall_calls(16, 2.0, 33.3) == bench.WALL_MIN_CALLS
    assert bench.wall_calls(6, 5.0, 33.3) == 1
    assert bench.wall_calls(1, 220.0, 33.3) == 1
    assert bench.wall_calls(3333, 0.01, 33.3) == 200


def _library_kernels():
    sys.path.insert(0, str(ROOT / "scripts"))
    import library_kernels
    return library_kernels


def test_library_kernels_probe_tells_fp16_from_fp32_accumulation():
    """scripts/library_kernels.py's accumulation probe on the CPU: integer products 1..9 summed over 4096 terms in
    fp32 then rounded once stay within half an output ulp; the same sums kept in fp16 all along (an fp16
    accumulator) err by more than one ulp, so the probe's 0.5 line separates the two."""
    lk = _library_kernels()
    g = torch.Generator().manual_seed(0)
    prods = (torch.randint(1, 4, (64, 4096), generator=g) * torch.randint(1, 4, (64, 4096), generator=g)).double()
    ref = prods.sum(1)
    fp32 = ref.float().half()
    acc = torch.zeros(64, dtype=torch.float16)
    for chunk in prods.split(16, dim=1):  # one rounding per k16 step, as a tensor core's fp16 accumulator does
        acc = (acc.double() + chunk.sum(1)).half()
    worst32, _ = lk.ulp_errors(fp32, ref)
    worst16, mean16 = lk.ulp_errors(acc, ref)
    assert worst32 <= 0.5
    assert worst16 > 1.0 and mean16 > 0.5
    # the spacing is fp16's at the reference: 2049 rounds to 2048 (half of the spacing 2), 2052 is 1.5 spacings off
    assert lk.ulp_errors(torch.tensor([2048.0]).half(), torch.tensor([2049.0]).double()) == (0.5, 0.5)
    assert lk.ulp_errors(torch.tensor([2052.0]).half(), torch.tensor([2049.0]).double())[0] == 1.5


def test_library_kernels_summarize_groups_launches():
    """One row per distinct kernel and launch shape, with the median of its durations and the launch count."""
    lk = _library_kernels()
    ev = lambda name, grid, dur: {"name": name, "dur": dur, "args": {"grid": grid, "block": [384, 1, 1],  # noqa: E731
                                                                        "registers per thread": 168,
                                                                        "shared memory": 213268}}
    rows = lk.summarize([ev("nvjet_a", [2, 64, 1], 6.0), ev("nvjet_a", [2, 64, 1], 8.0), ev("nvjet_a", [2, 64, 1], 7.0),
                         ev("reduce", [128, 1, 1], 1.9)])
    assert rows == [("nvjet_a", "2x64x1", "384x1x1", 168, 213268, 7.0, 3),
                    ("reduce", "128x1x1", "384x1x1", 168, 213268, 1.9, 1)]


def test_bench_times_gemv_on_skinny_outputs_only():
    """The CUDA-core gemv kernel (one row of A per program) is timed by the bench for M <= its MAX_M only (at
    8192^3 each of 8192 rows would re-read B), and so are the other skinny kernels whose modules set MAX_M (the
    residue-group kernel) and the PTX records with a `max_m` (the bandwidth path, mma_stream); the check still runs
    them on every shape; no other entry is limited."""
    from triton_kernels import gemv
    from triton_kernels.contract import optional
    from triton_kernels.variants import BY_KERNEL, kernel_module

    entries = {k.name: k for k in registry.kernels()}
    limited = {n for n, k in entries.items() if k.bench_skip is not None}
    skinny = {v for v in BY_KERNEL if optional(kernel_module(BY_KERNEL[v]), "MAX_M") is not None}
    skinny |= {v.name for v in registry.ptx_records() if v.max_m is not None}
    base = lambda name: re.sub(r"(_fp16acc)?(\[.*\])?$", "", name)  # noqa: E731 - the kernel of an entry
    assert {"triton_gemv", "mma_stream"} <= skinny and all(base(n) in skinny for n in limited)
    assert {n for n in entries if base(n) in skinny} == limited
    k = entries["triton_gemv"]
    one, two = torch.empty((gemv.MAX_M, 8)), torch.empty((gemv.MAX_M + 1, 8))
    assert k.bench_skip(one, None) is None and "M <= 1" in k.bench_skip(two, None)
    assert k.skip_reason is None  # the check runs it
    stream = entries["mma_stream_fp16acc"]
    assert stream.bench_skip(torch.empty((48, 8)), None) is None
    assert "M <= 48" in stream.bench_skip(torch.empty((49, 8)), None) and stream.skip_reason is None


@pytest.mark.gpu
def test_parallel_check_equals_the_serial_one():
    """The main job's check spread over worker processes (a case whole in one process, Triton's pass then the
    hand-written kernels') reports what the serial check reports, case for case, pairwise matrix included."""
    kernels = registry.select(["torch.matmul", "triton", "triton_blocked", "mma_stmatrix"])
    serial = check.run_check(kernels, gpu=True)
    parallel = check.run_check_parallel({"fp16": kernels}, workers=3)["fp16"]
    key = lambda r: (r.kernel, r.shape, r.layout, r.inputs, r.ok, r.max_abs_err)  # noqa: E731
    assert [key(r) for r in parallel[0]] == [key(r) for r in serial[0]]
    assert parallel[1] == serial[1] and parallel[2] == serial[2]


def test_report_command_line_has_no_stray_space(monkeypatch):
    """The report's first line quotes the command it was run as: no space after `python -m compare` alone."""
    from compare.envinfo import environment

    monkeypatch.setattr(sys, "argv", ["compare"])
    assert environment()["command"] == "python -m compare"
    monkeypatch.setattr(sys, "argv", ["compare", "check", "--kernels", "triton*", "a b"])
    assert environment()["command"] == "python -m compare check --kernels 'triton*' 'a b'"


def test_report_says_why_tma_rows_have_fewer_checks():
    """A record that refuses operands TMA cannot describe is checked on fewer cases: the report names it and why;
    nothing is said when every kernel ran every case."""
    from compare.report import fewer_checks_note

    kernels = {k.name: k for k in registry.select(None)}
    tma, blocked = kernels["triton_tma"], kernels["triton_blocked"]
    row = lambda name: check.CheckRow(name, "8x8x8", "NN", "int", True, 0.0, None, "")  # noqa: E731
    rows = [row("triton_blocked"), row("triton_blocked"), row("triton_tma")]
    note = fewer_checks_note(rows, [blocked, tma])
    assert note.startswith("`triton_tma` show fewer checks: TMA describes only") and "misaligned" in note
    assert fewer_checks_note(rows[:2], [blocked, tma]) == ""
    gemv = kernels["triton_gemv"]  # under the interpreter: the small cases only, and the note says so
    rows = [row("triton_blocked"), row("triton_blocked"), row("triton_gemv")]
    assert fewer_checks_note(rows, [blocked, gemv], interpreter=True).startswith(
        "`triton_gemv` show fewer checks: under the interpreter a kernel of one-row tiles runs the cases up to "
        f"M = {check.CPU_ONE_ROW_MAX_M}")
