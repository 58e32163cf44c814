"""`python -m compare sweep` on the CPU: its draw is the random suite's, its data file round-trips and resumes,
its cases' records say what was timed, `--fit` fits and reports; tune keeps every time it measures. The GPU run
at the end times a small draw for real."""
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from compare import bench, sweep, sweep_data, tune
from compare.reference import make_inputs
from conftest import DEVICE
from hgemm_common import cost_model as cm
from triton_kernels import dispatch
from triton_kernels.splitk import slices

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def hopper(monkeypatch):
    """The candidates of an H100 on the CPU (as tests/test_dispatch.py asks for them)."""
    monkeypatch.setattr(dispatch, "device_arch", lambda t: 90)
    monkeypatch.setattr(dispatch, "sm_count", lambda t: 132)
    dispatch.clear()
    yield
    dispatch.clear()


def test_the_draw_is_the_random_suites():
    """Each seed's shapes are bench.random_shapes' in order, chunks by --start/--count are slices of one draw,
    every dtype and the accumulations it offers (bf16: fp32 only)."""
    cases = sweep.draw([5, 9], 0, 12, ["NN", "NT"], ["fp16", "bf16"], ["fp32", "fp16"])
    for seed in (5, 9):
        mine = [c for c in cases if c.seed == seed]
        assert [(c.m, c.n, c.k, c.layout) for c in mine if c.dtype == "fp16" and c.acc == "fp32"] == \
            bench.random_shapes(seed, 12, ["NN", "NT"])
        assert {(c.dtype, c.acc) for c in mine} == {("fp16", "fp32"), ("fp16", "fp16"), ("bf16", "fp32")}
    chunk = sweep.draw([5], 4, 5, ["NN", "NT"], ["fp16"], ["fp32"])
    assert [c.index for c in chunk] == list(range(4, 9))
    assert [c.key for c in chunk] == [c.key for c in cases if c.seed == 5 and 4 <= c.index < 9 and c.dtype == "fp16"
                                      and c.acc == "fp32"]
    assert len({c.key for c in cases}) == len(cases)
    skinny = sweep.draw([5], 0, 12, ["NN"], ["fp16"], ["fp32"], max_m=48)  # --max-m: the narrowed draw's shapes
    assert [(c.m, c.n, c.k) for c in skinny] == [s[:3] for s in bench.random_shapes(5, 12, ["NN"], 48)]
    assert max(c.m for c in skinny) <= 48
    tiny = sweep.draw([5], 0, 12, ["NN"], ["fp16"], ["fp32"], max_macs=2**30)  # --max-macs: the tiny draw's shapes
    assert [(c.m, c.n, c.k) for c in tiny] == [s[:3] for s in bench.random_shapes(5, 12, ["NN"], None, 2**30)]
    assert max(c.m * c.n * c.k for c in tiny) <= 2**30
    whole = sweep.draw([5], 0, 12, ["NN"], ["fp16"], ["fp32"], nk_multiple=64)  # --nk-multiple: whole 64-wide boxes
    assert [(c.m, c.n, c.k) for c in whole] == [s[:3] for s in bench.random_shapes(5, 12, ["NN"], nk_multiple=64)]
    assert all(c.n % 64 == 0 and c.k % 64 == 0 for c in whole[::2])
    with pytest.raises(ValueError, match="--start"):
        sweep.draw([5], -1, 3, ["NN"], ["fp16"], ["fp32"])


def test_scored_by_keeps_the_shapes_whose_candidates_hold_that_kernel():
    """--scored-by: a case stays exactly where `dispatch.candidates` (every staging) on real operands of its layout
    and dtype would time that kernel, for an H100's SM count; an unknown kernel is refused naming the choices."""
    cases = sweep.draw([9140], 0, 60, ["NN", "NT"], ["fp16", "bf16"], ["fp32"])
    kept = sweep.scored_by(cases, "triton_streamk", 90, 132)
    assert 0 < len(kept) < len(cases)
    checked = 0
    for c in cases:
        if (c.m + c.n) * c.k > 2e7:  # operands past 40 MB: left out, to keep the test light
            continue
        a, b = make_inputs(c.m, c.n, c.k, c.layout, seed=0, kind="int", dtype=c.dtype)
        checked += 1
        real = any(kern == "triton_streamk" for kern, _ in dispatch.candidates(c.m, c.n, c.k, 90, 132, a, b, None,
                                                                               every_staging=True))
        assert real == (c in kept), c
    assert checked >= 20
    assert sweep.scored_by(cases, "triton_splitk_tma", 90, 4) != kept  # the SM count decides the tile rounds
    with pytest.raises(ValueError, match="no Triton kernel 'nope'.*triton_streamk"):
        sweep.scored_by(cases, "nope", 90, 132)


def test_data_file_round_trips_and_survives_a_torn_line(tmp_path):
    path = tmp_path / "d.jsonl"
    sweep.append(path, [{"type": "run", "run": "r"}, {"type": "start", "run": "r", "case": "a"}])
    sweep.append(path, [{"type": "candidate", "case": "a", "ms": 1.0}, {"type": "case", "case": "a"}])
    data = sweep.read(path)
    assert [r["run"] for r in data.runs] == ["r"] and set(data.cases) == {"a"} and data.starts["a"] == 1
    assert len(data.candidates) == 1 and data.bad_lines == 0
    with open(path, "a") as f:  # a run killed in the middle of a write
        f.write('{"type": "candidate", "case": "b", "m')
    assert sweep.read(path).bad_lines == 1
    sweep.append(path, [{"type": "case", "case": "b"}])  # the torn line is cut off first
    data = sweep.read(path)
    assert data.bad_lines == 0 and set(data.cases) == {"a", "b"} and path.read_text().endswith("}\n")
    assert sweep.read(tmp_path / "none.jsonl").cases == {}


def test_ptx_plans_pin_the_tiles_and_splits_it_has():
    plans = sweep.ptx_plans(16, 4096, 4096, "NN")
    assert plans[0] == ("wgmma_persistent", 0, 0) and plans[-1] == ("wgmma_cluster", 0, 0)
    assert [t for k, t, s in plans if k == "wgmma_persistent" and s == 1] == [1, 2, 3, 4]  # no 256 x 152: B row-major
    assert {s for k, t, s in plans if k == "wgmma_persistent"} == {0, 1, 2, 4}
    assert [t for k, t, s in plans if k == "wgmma_splitk_grid"] == [1, 2, 3]
    assert [t for k, t, s in sweep.ptx_plans(16, 4096, 4096, "NT") if k == "wgmma_persistent" and s == 1] == \
        [1, 2, 3, 4, 5, 6]
    cut, swap, pair = sweep.CUT_FIRST_CODE, list(sweep.SWAP_TILES), list(sweep.PAIR_TILES)
    # row-major B: the cut tiles of whole 64-column boxes; the swapped ones in both B layouts (B' = A^T column-major),
    # then the 128-row swapped ones paired
    tiles = {("NT", 1576): list(range(cut, cut + 10)) + swap + pair, ("NN", 1584): [cut + 6] + swap + pair}
    for (layout, n), codes in tiles.items():
        plans = sweep.ptx_plans(1288, n, 2512, layout)
        assert [t for k, t, s in plans if t >= cut and s == 1] == codes, layout
        # split over the grid where their tiles leave SMs idle: the 256-row tiles (6 bands) of 39 k-blocks
        split = [(t, s) for k, t, s in plans if t >= cut and s != 1]
        tile = {**sweep.PLAN_TILES, **sweep.PAIR_TILES}
        assert split == [(t, sweep.cut_grid_split(1288, n, 2512, tile[t])) for t in codes
                         if sweep.cut_grid_split(1288, n, 2512, tile[t]) > 1], layout
        assert split and all(s == 2 for t, s in split), (layout, split)
    assert sweep.cut_grid_split(160, 24016, 3048, (160, 128)) == 1  # 188 tiles: no SM idle
    assert sweep.cut_grid_split(208, 2864, 17744, (208, 128)) == 5  # 23 tiles over 278 k-blocks
    assert sweep.cut_grid_split(208, 2864, 17744, (208, 128), sms=114) == 4
    assert sweep.CUT_TILES[cut + 6] == (256, 128)
    for m, n, k, layout, acc in ((1288, 1576, 2512, "NT", "fp16"), (1288, 1576, 2504, "NT", "fp32"),
                                 (1288, 1576, 2512, "TN", "fp32"), (1288, 1572, 2512, "NT", "fp32"),
                                 (1288, 1576, 2512, "NN", "fp32"), (128, 1576, 2512, "NT", "fp32")):
        # fp16 accumulation, B rows off the 32-byte sectors (K = 2504 column-major, N = 1576 row-major), column-major
        # A, C rows off 16 bytes, a skinny output: no cut tile
        assert sweep.cut_codes(m, n, k, layout, acc) == [], (m, n, k, layout, acc)
    assert swap == [c for c in range(swap[0], swap[0] + 10) if c != swap[0] + 6]  # 256 x 128 is not swapped
    assert pair == list(range(swap[0] + 10, swap[0] + 16))  # the six 128-row swapped tiles, paired
    for m, n, k, layout, acc in ((1288, 1576, 2512, "NT", "fp16"), (1288, 1576, 2504, "NT", "fp32"),
                                 (1288, 1576, 2512, "TN", "fp32"), (1288, 1572, 2512, "NN", "fp32"),
                                 (128, 1576, 2512, "NT", "fp32"), (1288, 128, 2512, "NN", "fp32")):
        # fp16 accumulation, A rows off the 32-byte sectors (K = 2504), column-major A, C rows off 16 bytes, skinny
        # outputs: no swapped tile
        assert sweep.swap_codes(m, n, k, layout, acc) == [], (m, n, k, layout, acc)
    assert sweep.swap_codes(1288, 1576, 2512, "NN") == swap
    # rows off the 32-byte sectors (K = 2504): timed too, unsplit and split, though the launcher offers them not yet
    assert sweep.cut_codes(1288, 1576, 2504, "NT", sectors=False) == list(range(cut, cut + 10))
    assert sweep.swap_codes(1288, 1576, 2504, "NT", sectors=False) == swap
    off = sweep.ptx_plans(1288, 1576, 2504, "NT")
    assert [t for k, t, s in off if t >= cut and s == 1] == list(range(cut, cut + 10)) + swap + pair
    assert sweep.cut_codes(1288, 1572, 2504, "NT", sectors=False) == []  # C rows off 16 bytes still rule them out
    short = sweep.ptx_plans(16, 4096, 448, "NN")  # 7 k-blocks: no part of a split keeps 4, no grid slices
    assert {s for k, t, s in short} == {0, 1} and not any(k == "wgmma_splitk_grid" for k, *_ in short)
    assert sweep.ptx_plan("wgmma_splitk", 128, 64, 2, 0) == cm.Plan("wgmma_splitk", 128, 64, 64, 8, 12, 2, "split_k",
                                                                     "wgmma", "", "cluster")


def test_case_candidates_are_autos_plus_todays_call(hopper):
    """A case's Triton candidates: every (kernel, staging, configuration) the planner's model scores (tune="exact"'s
    and every staging of the TMA kernels), each with its cost model plan (effective K split), and kernel="auto" as
    called today with the plan's source."""
    case = sweep.Case(1, 0, 16, 4096, 4096, "NN", "fp16", "fp32")
    a, b = make_inputs(16, 4096, 4096, "NN", device=DEVICE)  # CPU tensors only under the interpreter
    cands = sweep.case_candidates(case, a, b, ptx=False, gluon=False)
    # without --gluon, no Gluon kernel (gluon_streamk is among tune's plans where Gluon runs: a GPU)
    plans = [p for p in tune.candidate_plans(a, b, every_staging=True) if not p[0].startswith("gluon")]
    assert len(cands) == len(plans) + 1 and len({c.name for c in cands}) == len(cands)
    assert [c.side for c in cands] == ["triton"] * len(plans) + ["auto"]
    # (the stream-K kernel too: 16 tiles of 128 x 256 leave most SMs idle, `streamk.worth_scoring`)
    assert {c.call["kernel"] for c in cands[:-1]} == {"triton_blocked", "triton_splitk", "triton_splitk_tma",
                                                      "triton_tma", "triton_streamk"}
    for c, (kern, stage, cfg) in zip(cands, plans):
        assert c.plan.kernel == kern and (c.plan.bm, c.plan.bn, c.plan.bk) == (cfg.block_m, cfg.block_n, cfg.block_k)
        assert c.plan.split == (1 if cfg.split_k == 1 else slices(4096, cfg)[1])
    assert cands[-1].call["source"].split(":")[0] in ("table", "model", "nearest", "heuristic")
    assert cands[-1].plan is not None
    # --gluon-only: the Gluon kernel's configurations alone (`problem_configs`: its swapped 16-row tiles at M = 16)
    from triton_kernels import gluon_persistent
    from triton_kernels.common import problem_configs
    from triton_kernels.variants import GLUON, VARIANTS

    if GLUON in VARIANTS:  # (where this Triton offers it)
        only = sweep.case_candidates(case, a, b, ptx=False, gluon=False, gluon_only=True)
        assert [c.call["config"] for c in only if c.call["kernel"] == "gluon_persistent"] == [
            cfg.name for cfg in problem_configs(gluon_persistent, 16, 4096, 4096, dispatch.sm_count(a))]
        # and what it hands problems to (gluon_stream, at M <= 32, reading in place) where offered
        assert {c.call["kernel"] for c in only} == {"gluon_persistent", *(
            ["gluon_stream"] if "gluon_stream" in dispatch.BY_KERNEL else [])} and {c.side for c in only} == {"triton"}
        assert all(c.call["stage"] == "" for c in only if c.call["kernel"] == "gluon_stream")
        assert any(c.call["config"].startswith("16x") for c in only)


def test_a_ptx_call_launches_what_hgemm_launches(monkeypatch):
    """PtxCall (launch replaced): wgmma_persistent's own plan on a few rows of A against a B whose rows are off the
    16-byte grid launches mma_stream, as `ptx_kernels.hgemm` does, reading B in place; a pinned tile keeps
    wgmma_persistent, whose TMA descriptors need B copied."""
    from ptx_kernels import build

    launched = []

    class Ext:
        def hgemm_launch(self, kernel, a, b, c, a_col, b_col, acc16, tile, split):
            launched.append((kernel, b.stride(), tile, split))
            return (1, 1, 128, 0, 0, 16, 128, 1), kernel

        def stage_copy(self, srcs, bufs):  # the staging launch, as torch copies
            for src, buf in zip(srcs, bufs):
                buf.copy_(src)

    monkeypatch.setattr(build, "load_for", lambda v: Ext())
    a = torch.zeros(3, 4096, dtype=torch.float16)
    b = torch.zeros(4096, 2049, dtype=torch.float16)  # N odd: B's rows off the 16-byte grid
    own, pinned = sweep.PtxCall("wgmma_persistent", "fp32", 0, 0), sweep.PtxCall("wgmma_persistent", "fp32", 3, 1)
    own(a, b)
    pinned(a, b)
    assert launched[0] == ("mma_stream", (2049, 1), 0, 0) and own.report["copies"] == []
    assert launched[1][0] == "wgmma_persistent" and launched[1][1][0] % 8 == 0
    assert pinned.report["copies"] == ["B to 16-byte aligned rows"]


def test_the_ptx_own_plan_is_judged_against_the_sides_fastest(tmp_path):
    """The fit's report line on the hand-written side's rule: its own plan (no tile or split pinned) against the
    fastest timed PTX plan of each case, and both x torch.matmul; files without PTX records say so."""
    def rec(case, tile, split, ms):
        return {"type": "candidate", "case": case, "side": "ptx", "ms": ms, "torch_ms": 1.0,
                "call": {"kernel": "wgmma_persistent", "tile": tile, "split": split}}
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in (
        rec("a", 0, 0, 2.0), rec("a", 1, 1, 1.0), rec("a", 2, 2, 1.6),   # own plan twice the fastest's time
        rec("b", 0, 0, 0.5), rec("b", 3, 1, 0.51))) + "\n")          # own plan the fastest
    line = sweep.ptx_today_report([data])
    assert line.startswith("ptx own plan today: 2 cases; within 5% of the side's fastest plan in 50%, 1.414x")
    assert line.endswith("own plan 1.000, fastest 1.414")
    empty = tmp_path / "e.jsonl"
    empty.write_text(json.dumps(rec("c", 0, 0, 1.0) | {"side": "triton"}) + "\n")
    assert sweep.ptx_today_report([empty]) == "ptx own plan today: not timed in these files"


def _fake_bench(status):
    """bench_shape's stand-in: torch.matmul at 1 ms, its control at 1.01 ms, each candidate at status(name) (a
    time, or a failure); a PTX candidate's runner reports what it ran."""
    def fake(kernels, m, n, k, **kw):
        rows = [bench.BenchRow("torch.matmul", "torch", "fp32", "", m, n, k, kw["layout"], "ok", median_ms=1.0,
                               wall_us=9.0),
                bench.BenchRow(bench.CONTROL, "torch", "fp32", "", m, n, k, kw["layout"], "ok", median_ms=1.01,
                               ratio_to_torch=0.99)]
        for kern in kernels[1:]:
            if isinstance(kern.run, sweep.PtxCall):
                kern.run.report = {"ran": "wgmma_splitk", "tile_m": 128, "tile_n": 64, "split": 2, "grid": [64, 2],
                                   "copies": []}
            got = status(kern.name)
            row = bench.BenchRow(kern.name, "x", "fp32", kern.config, m, n, k, kw["layout"], "ok")
            if isinstance(got, str):
                row.status, row.detail = got, "wrong"
            else:
                row.median_ms, row.spread_pct, row.samples, row.wall_us = got, 2.0, 30, 11.0
            if kern.config == "plan":
                row.config = "table: tma 64x64x128_w4_s6_g8"
            rows.append(row)
        return rows
    return fake


def test_a_case_records_every_candidate_then_itself(monkeypatch, hopper):
    """measure_case (bench_shape replaced): one record per candidate with the problem, the call, the plan and the
    times (none for a failed check), the PTX plan from what the launch reported, and the case record last."""
    from compare import parallel

    monkeypatch.setattr(parallel, "gpu_operands",
                        lambda m, n, k, layout, dtype, seed: make_inputs(m, n, k, layout, device=DEVICE))
    monkeypatch.setattr(bench, "bench_shape",
                        _fake_bench(lambda name: "failed check" if "triton_blocked" in name else 0.5))
    case = sweep.Case(1, 3, 16, 4096, 4096, "NT", "fp16", "fp32")
    recs = sweep.measure_case(case, timer=None, budget_ms=5.0, rounds=3, ptx=True, gluon=False, copy_gb_s=None,
                              run_id="r1")
    *cands, last = recs
    assert last["type"] == "case" and last["case"] == case.key and last["torch_ms"] == 1.0
    assert last["control_ratio"] == 0.99 and last["auto"]["triton"] == "table: tma 64x64x128_w4_s6_g8"
    assert last["auto"]["ptx"]["ran"] == "wgmma_splitk" and last["candidates"] == len(cands)
    assert all(r["type"] == "candidate" and r["case"] == case.key and r["problem"]["m"] == 16 for r in cands)
    assert all(r["problem"]["align"] == "ttt" and r["problem"]["layout"] == "NT" for r in cands)
    failed = [r for r in cands if r["call"]["kernel"] == "triton_blocked"]
    assert failed and all(r["status"] == "failed check" and r["ms"] is None and r["x_torch"] is None for r in failed)
    timed = [r for r in cands if r["ms"] is not None]
    assert last["timed"] == len(timed) and all(r["x_torch"] == 2.0 for r in timed)
    ptx = [r for r in cands if r["side"] == "ptx"]
    assert len(ptx) == len(sweep.ptx_plans(16, 4096, 4096, "NT"))
    assert all(r["plan"]["kernel"] == "wgmma_splitk" and r["plan"]["split"] == 2 for r in ptx)
    assert all(cm.from_record(r).seconds == 0.5e-3 for r in timed)


def test_a_case_that_does_not_fit_is_recorded_and_the_run_goes_on(monkeypatch):
    from compare import parallel

    def oom(*args):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 GiB\nmore")
    monkeypatch.setattr(parallel, "gpu_operands", oom)
    recs = sweep.measure_case(sweep.Case(1, 0, 16384, 32768, 256, "NN", "fp16", "fp32"), timer=None, budget_ms=1.0,
                              rounds=1, ptx=False, gluon=False, copy_gb_s=None, run_id="r")
    assert len(recs) == 1 and recs[0]["type"] == "case" and recs[0]["status"].startswith("out of memory: CUDA out")


def _fake_run(monkeypatch, measure):
    """run_sweep with the GPU parts replaced: no compiling, timer, frame or sampler; `measure` for measure_case."""
    from compare import envinfo, frame

    monkeypatch.setattr(tune, "warm", lambda todo, workers, log, every_staging=False: None)
    monkeypatch.setattr(bench, "Timer", lambda: None)
    monkeypatch.setattr(frame, "copy_bandwidth", lambda timer: 3000.0)
    monkeypatch.setattr(envinfo, "environment", lambda: {"git_commit": "test"})
    monkeypatch.setattr(envinfo.Sampler, "__enter__", lambda self: self)
    monkeypatch.setattr(sweep, "measure_case", measure)


def _measure(seen, fail_at=None):
    def measure(case, *, run_id, **kw):
        if case.key == fail_at:
            raise KeyboardInterrupt  # the process killed mid-case
        seen.append(case.key)
        return [{"type": "candidate", "run": run_id, "case": case.key, "ms": 1.0},
                {"type": "case", "run": run_id, "case": case.key}]
    return measure


def _run(cases, out, budget_s=None):
    return sweep.run_sweep(cases, out, budget_ms=1.0, rounds=1, ptx=False, gluon=False, workers=1, block=2,
                           budget_s=budget_s, args={}, log=lambda *a: None)


def test_a_sweep_resumes_where_it_stopped(monkeypatch, tmp_path):
    """A killed run keeps the cases it finished; the same command goes on with the rest; a case the process died
    on twice is recorded as crashed and skipped; a finished draw measures nothing."""
    out, seen = tmp_path / "s.jsonl", []
    cases = sweep.draw([2], 0, 5, ["NN"], ["fp16"], ["fp32"])
    _fake_run(monkeypatch, _measure(seen, fail_at=cases[3].key))
    with pytest.raises(KeyboardInterrupt):
        _run(cases, out)
    assert seen == [c.key for c in cases[:3]] and set(sweep.read(out).cases) == set(seen)
    with pytest.raises(KeyboardInterrupt):  # the same command again: on from case 3, which kills it again
        _run(cases, out)
    assert seen == [c.key for c in cases[:3]] and sweep.read(out).starts[cases[3].key] == 2
    monkeypatch.setattr(sweep, "measure_case", _measure(seen))
    assert _run(cases, out) == 1  # case 3 skipped as crashed, case 4 measured
    data = sweep.read(out)
    assert seen[-1] == cases[4].key and set(data.cases) == {c.key for c in cases}
    assert data.cases[cases[3].key]["status"].startswith("crashed")
    assert _run(cases, out) == 0 and [r["type"] for r in map(json.loads, out.read_text().splitlines())].count(
        "end") == 1  # a run with nothing to do writes nothing


def test_a_time_budget_stops_before_a_case_it_cannot_cover(monkeypatch, tmp_path):
    out, seen = tmp_path / "s.jsonl", []
    cases = sweep.draw([2], 0, 6, ["NN"], ["fp16"], ["fp32"])
    _fake_run(monkeypatch, _measure(seen))
    calls = iter([True, True, True, False])
    monkeypatch.setattr(sweep.Budget, "covers_case", lambda self: next(calls))
    assert _run(cases, out, budget_s=100.0) == 3
    end = [r for r in map(json.loads, out.read_text().splitlines()) if r["type"] == "end"]
    assert end[-1]["stopped"] == "budget" and end[-1]["cases"] == 3
    monkeypatch.undo()
    budget = sweep.Budget(10.0)
    assert not budget.covers_case()  # a first case is taken to need 30 s
    budget.case_s.append(2.0)
    assert budget.covers_case() and sweep.Budget(None).covers_block()


def _synthetic_file(path, seeds=(11, 12), count=80):
    """A data file of candidate records the cost model makes with known parameters (and a little noise)."""
    true = cm.Params(kernels={"triton_tma": cm.KernelParams(eff=0.6, mem_eff=0.7, launch_us=4.0),
                              "triton_splitk.mma": cm.KernelParams(eff=0.4, mem_eff=0.6, launch_us=3.0)})
    recs = []
    for seed in seeds:
        for case in sweep.draw([seed], 0, count, ["NN"], ["fp16"], ["fp32"]):
            prob = cm.Problem(case.m, case.n, case.k)
            plans = [cm.plan_for("triton_tma", 128, 256, 64, 3, 8), cm.plan_for("triton_tma", 128, 128, 64, 4, 8)]
            plans += [cm.plan_for("triton_splitk", 16, 64, 128, 4, 4, s) for s in (2, 4)] if case.m <= 64 else []
            for i, plan in enumerate(plans):
                ms = cm.predict(prob, plan, true).seconds * 1e3 * math.exp(0.02 * math.sin(7 * case.index + i))
                recs.append({"type": "candidate", "case": case.key, "seed": seed, "side": "triton",
                             **cm.record_fields(prob, plan), "status": "ok", "ms": ms, "torch_ms": 0.9 * ms})
            recs.append({"type": "candidate", "case": case.key, "seed": seed, "side": "auto", "ms": 1.0,
                         "x_torch": 0.8, "plan": None})
    sweep.append(path, recs)


def test_the_fit_leaves_out_staged_triton_plans_timed_with_the_old_copies(tmp_path):
    """A staged Triton candidate timed before its staging copies became `triton_kernels.stage_copy`'s launches
    (a run id earlier than STAGING_COPIES_SINCE) timed copies the library no longer makes: the fit leaves it out.
    A later run's, an unstaged plan's and a PTX plan's records stay."""
    prob = cm.Problem(3000, 5000, 2000, align="--t")
    staged, plain = cm.plan_for("triton_tma", 128, 256, 64, 3, 8, staged="C"), cm.plan_for("triton_tma", 128, 256, 64,
                                                                                             3, 8)
    ptx = cm.plan_for("wgmma_persistent", 128, 256, 64, 4, 12, staged="C")
    before, after = "20261101T000000-1", sweep.STAGING_COPIES_SINCE + "-1"
    rows = [(staged, "triton", before, False), (staged, "triton", after, True), (plain, "triton", before, True),
            (ptx, "ptx", before, True)]
    recs = [{"type": "candidate", "case": f"1/{i}", "seed": 1, "side": side, "run": run, **cm.record_fields(prob, plan),
             "status": "ok", "ms": 1.0, "torch_ms": 1.0} for i, (plan, side, run, _) in enumerate(rows)]
    assert [sweep.stale_staging(r) for r in recs] == [not kept for *_, kept in rows]
    path = tmp_path / "s.jsonl"
    sweep.append(path, recs)
    kept, fitted, _ = sweep.fit_records([path])
    assert [r["case"] for r in kept] == [r["case"] for r, (*_, k) in zip(recs, rows) if k] and len(fitted) == 3


def test_fit_reports_quality_and_writes_parameters(tmp_path, capsys):
    from compare.__main__ import main

    data, params = tmp_path / "s.jsonl", tmp_path / "model.json"
    _synthetic_file(data)
    assert main(["sweep", "--fit", str(data), "--holdout", "12", "--params", str(params)]) == 0
    out = capsys.readouterr().out
    assert "fit (the records it was fitted on)" in out and "held out" in out and "triton_splitk.mma" in out
    assert "choice (held out) triton:" in out and "kernel='auto' today: 160 cases" in out
    p = cm.load(params)
    assert p.kernels["triton_tma"].eff == pytest.approx(0.6, rel=0.05)
    assert p.about["holdout"]["seeds"] == "12" and p.about["holdout"]["quality"]["all"]["median_abs_log_error"] < 0.05


def test_a_holdout_can_start_inside_a_seeds_draw(tmp_path, capsys):
    """--holdout 12:50 fits seed 11 and seed 12's first 50 cases and judges the other 30 (its later cases)."""
    from compare.__main__ import main

    data, params = tmp_path / "s.jsonl", tmp_path / "model.json"
    _synthetic_file(data)
    assert main(["sweep", "--fit", str(data), "--holdout", "11,12:50", "--params", str(params)]) == 0
    assert "judging on" in capsys.readouterr().out
    p = cm.load(params)
    assert p.about["holdout"]["seeds"] == "11,12:50" and p.about["fit_command"].endswith(
        f"--holdout 11,12:50 --params {params}")
    raw, _, _ = sweep.fit_records([data])
    held = [r for r in raw if sweep.held_out(r, sweep.holdout_spec("11,12:50"))]
    assert {r["seed"] for r in held} == {11, 12}
    assert sorted({int(r["case"].split("/")[1]) for r in held if r["seed"] == 12}) == list(range(50, 80))
    for bad in ("12:x", "-1", "12:-3", ""):
        with pytest.raises(ValueError, match="--holdout takes a comma list of SEED or SEED:I"):
            sweep.holdout_spec(bad)


def test_cross_validation_holds_out_each_seed_in_turn(tmp_path, capsys, monkeypatch):
    """--cv: one fold per seed, fitted on the other seeds' records only, each held-out case chosen once; on data
    the model generated its choices are near the fastest; a line per fold and one for all."""
    from compare.__main__ import main

    data = tmp_path / "s.jsonl"
    _synthetic_file(data, seeds=(11, 12, 13), count=30)
    raw, recs, _ = sweep.fit_records([data])
    fitted_seeds = []
    real_fit = cm.fit
    monkeypatch.setattr(cm, "fit", lambda rs, *a, **k: (fitted_seeds.append({r.case.split("/")[0] for r in rs}),
                                                        real_fit(rs, *a, **k))[1])
    got = sweep.cross_validate(raw, recs, cm.H100, log=lambda line: None)
    assert fitted_seeds == [{"12", "13"}, {"11", "13"}, {"11", "12"}]
    assert set(got) == {11, 12, 13, "all"} and [got[s]["cases"] for s in (11, 12, 13)] == [30, 30, 30]
    assert got["all"]["cases"] == 90 and got["all"]["within_5pct"] >= 0.9 and got["all"]["regret"] < 1.03
    assert 0 < got["all"]["min"] <= got["all"]["p10"] <= 1 and got["all"]["x_torch"] <= got["all"]["x_torch_best"]
    monkeypatch.undo()
    assert main(["sweep", "--fit", str(data), "--cv", "--params", str(tmp_path / "m.json")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines if line.split() and line.split()[0] in ("11", "12", "13", "all")] == \
        ["11", "12", "13", "all"]
    with pytest.raises(ValueError, match="at least two|1 seed"):
        sweep.cross_validate([r for r in raw if r["seed"] == 11], [recs[i] for i, r in enumerate(raw)
                                                                  if r["seed"] == 11], cm.H100)


def test_a_choice_report_leaves_out_what_auto_cannot_pick():
    """A SWEEP_ONLY kernel (stream-K, for now) is timed by the sweep but never scored by kernel="auto", so the
    report's choices and its fastest candidate are among the others: here stream-K runs every case twice as fast
    as the TMA kernel, and the report's fastest candidate is still the TMA kernel, at torch.matmul's time."""
    from triton_kernels import streamk

    assert streamk.SWEEP_ONLY
    raw, recs = [], []
    for i, (m, n, k) in enumerate([(2000, 1000, 8192), (300, 4000, 12000), (5000, 600, 9000)]):
        prob = cm.Problem(m, n, k)
        for plan, ms in ((cm.plan_for("triton_tma", 128, 128, 64, 4, 8), 1.0),
                         (cm.plan_for("triton_streamk", 128, 128, 64, 4, 8), 0.5)):
            raw.append({"case": f"c{i}", "side": "triton", "torch_ms": 1.0})
            recs.append(cm.Record(prob, plan, ms * 1e-3, f"c{i}"))
    line = sweep.choice_line(sweep.case_choices(raw, recs, cm.Params(), "triton"), "triton")
    assert line.startswith("triton: 3 cases;") and "fastest candidate 1.000" in line, line
    # a --gluon-only case (the Gluon kernel's configurations alone) is data for the fit, not a choice auto faces
    for i, ms in enumerate((0.25, 0.5)):
        raw.append({"case": "gluon-only", "side": "triton", "torch_ms": 1.0})
        recs.append(cm.Record(cm.Problem(16, 4096, 4096), cm.plan_for("gluon_persistent", 16, 128, 64, 12), ms * 1e-3,
                              "gluon-only"))
    assert sweep.choice_line(sweep.case_choices(raw, recs, cm.Params(), "triton"), "triton") == line


def test_class_lines_separate_the_planners_tail_from_the_kernels():
    """Held-out choices grouped by the random suite's classes (M band, N and K multiples of 8 or not), in the
    suite's order, classes with no case left out: each line's choice and fastest x torch.matmul and their shares at
    the suite's bar. A case without torch.matmul's time counts in no class."""
    tma = cm.plan_for("triton_tma", 128, 128, 64, 4, 8)

    def choice(m, n, k, chosen_ms, best_ms, torch_ms=1.0):
        prob = cm.Problem(m, n, k)
        return sweep.Choice(f"{m}", cm.Record(prob, tma, chosen_ms * 1e-3), cm.Record(prob, tma, best_ms * 1e-3),
                            torch_ms)

    picked = [choice(8, 4096, 4096, 1.0, 1.0), choice(200, 4096, 4096, 2.0, 1.25),
              choice(200, 4096, 4096, 1.0, 1.0), choice(300, 4097, 4096, 0.5, 0.5),
              choice(9, 4096, 4096, 1.0, 1.0, torch_ms=None)]
    assert sweep.shape_class(cm.Problem(16, 64, 64)) == "M <= 16, aligned"
    assert sweep.shape_class(cm.Problem(17, 64, 63)) == "16 < M <= 256, not aligned"
    assert sweep.class_lines(picked) == [
        "  M <= 16, aligned: 1 cases; x torch.matmul: choice 1.000 (100% >= 0.95x), fastest 1.000 (100%)",
        "  16 < M <= 256, aligned: 2 cases; x torch.matmul: choice 0.707 (50% >= 0.95x), fastest 0.894 (50%)",
        "  M > 256, not aligned: 1 cases; x torch.matmul: choice 2.000 (100% >= 0.95x), fastest 2.000 (100%)"]


def test_held_out_choices_are_among_the_plans_the_planner_ranks():
    """With the model's fitted kernels (as cross-validation scores), a case's choice is one of the plans
    kernel="auto" ranks for it today (`planner_plans`): a realign tile recorded at an M past realign.MAX_M (timed
    before that limit), predicted fastest and measured fast, is not the choice; the TMA plan the planner offers is,
    and the report's fastest stays the realign record (a plan the planner cannot pick counts as a loss)."""
    from triton_kernels import planner, realign

    params = planner.params_for(90, 132)
    fitted = planner.fitted_kernels(params)
    prob = cm.Problem(realign.MAX_M + 24, 4096, 4096, "NN", "ttt")
    offered = sweep.planner_plans(prob, 132, fitted)
    tma = cm.plan_for("triton_tma", 128, 128, 64, 4, 4)
    far = cm.plan_for("triton_realign", 64, 128, 64, 4, 8)
    assert tma in offered and far not in offered
    assert sweep.planner_plans(cm.Problem(64, 4096, 4096, "NN", "tot"), 132, fitted) is None  # not contiguous's
    recs = [cm.Record(prob, tma, 2e-3, "c0"), cm.Record(prob, far, 1e-3, "c0")]
    raw = [{"case": "c0", "side": "triton", "torch_ms": 1.0}] * 2
    [choice] = sweep.case_choices(raw, recs, params, "triton", fitted_only=True)
    assert choice.chosen.plan == tma and choice.best.plan == far and choice.regret == 2.0
    [unfiltered] = sweep.case_choices(raw, recs, params, "triton")  # without fitted_only: every record scored
    assert unfiltered.chosen.plan in (tma, far)


def test_fit_refuses_in_one_line(tmp_path, capsys):
    from compare.__main__ import main

    assert main(["sweep", "--fit", str(tmp_path / "none.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err
    empty = tmp_path / "e.jsonl"
    sweep.append(empty, [{"type": "run", "run": "r"}])
    assert main(["sweep", "--fit", str(empty), "--params", str(tmp_path / "p.json")]) == 2
    err = capsys.readouterr().err
    assert "no timed candidate records" in err and len(err.strip().splitlines()) == 1


def test_max_macs_on_the_command_line(capsys, monkeypatch):
    """--max-macs takes an integer or 2**E into the draw, --nk-multiple its multiple; anything else, a bound off the
    range, or either with named shapes, is a one-line usage error before any GPU is asked for."""
    from compare import __main__ as cli

    seen = []
    monkeypatch.setattr(cli, "_gpu", lambda: False)
    monkeypatch.setattr(sweep, "draw", lambda *a: seen.append(a[7:]) or [])  # (max_macs, nk_multiple)
    assert cli.main(["sweep", "--seeds", "5", "--max-macs", "2**30"]) == 2  # (drawn, then: no GPU here)
    assert seen == [(2**30, 8)] and "sweep times kernels on a CUDA GPU" in capsys.readouterr().err
    assert cli.main(["sweep", "--seeds", "5", "--nk-multiple", "64"]) == 2 and seen[-1] == (None, 64)
    capsys.readouterr()
    for named in (["--suite", "main"], ["--shapes", "64x64x64"]):  # the draw's bounds shape no named shapes
        for flag in (["--nk-multiple", "64"], ["--max-m", "48"], ["--max-macs", "2**30"]):
            assert cli.main(["sweep", *named, *flag]) == 2
            err = capsys.readouterr().err
            assert "shape the random draw (--seeds), not named shapes" in err and len(err.strip().splitlines()) == 1
    monkeypatch.undo()
    for bad in ("lots", "3**20", "2**20000", "1" * 40):
        with pytest.raises(SystemExit) as e:
            cli.main(["sweep", "--seeds", "5", "--max-macs", bad])
        assert e.value.code == 2 and "an integer or 2**E, got" in capsys.readouterr().err
    assert cli.main(["sweep", "--seeds", "5", "--max-macs", "100"]) == 2
    assert "largest problem must be an integer" in capsys.readouterr().err
    for ptx in ("--ptx", "--ptx-only"):  # the Gluon kernel alone, or the hand-written side: not both
        assert cli.main(["sweep", "--seeds", "5", "--gluon-only", ptx]) == 2
        err = capsys.readouterr().err
        assert "--gluon-only times the Gluon kernel's configurations alone" in err
        assert len(err.strip().splitlines()) == 1


def test_tune_keeps_every_timing(monkeypatch, hopper):
    """`_tune` hands each configuration's time to a kept_timings block (and to nothing outside one), and tune's
    records of them are the sweep's candidate records."""
    ms = iter(range(1, 1000))
    monkeypatch.setattr(dispatch, "time_ms", lambda call: float(next(ms)))
    a, b = make_inputs(64, 256, 512, "NN")
    c = torch.empty(64, 256, dtype=torch.float16)
    with dispatch.kept_timings() as got:
        with dispatch.kept_timings() as inner:
            pass  # an empty block inside leaves the outer one collecting
        cfg, best = dispatch._tune("triton_tma", (False, False, False), ("f",), a, b, c, False)
    assert not inner and got and [x[3] for x in got] == [float(i) for i in range(1, len(got) + 1)]
    assert all(x[0] == "triton_tma" for x in got) and cfg == got[0][2]
    dispatch._tune("triton_blocked", (False, False, False), ("g",), a, b, c, False)
    assert len(got) == len([x for x in got if x[0] == "triton_tma"])  # the block had ended
    recs = sweep_data.tune_records(got, a, b, "fp16", "fp32", "NN", "tune/x")
    assert len(recs) == len(got) and all(cm.from_record(r).plan.kernel == "triton_tma" for r in recs)
    assert recs[0]["call"] == {"kernel": "triton_tma", "config": got[0][2].name, "stage": ""}


@pytest.mark.gpu(sm=90)
def test_sweep_end_to_end(tmp_path):
    """Two shapes, the PTX side too: every case recorded with its candidates, checked and timed, the auto calls
    beside them; a second run measures nothing; the fit reads the file."""
    out = tmp_path / "s.jsonl"
    cmd = [sys.executable, "-m", "compare", "sweep", "--seeds", "7", "--count", "2", "--ptx", "--budget-ms", "2",
           "--workers", "4", "--out", str(out)]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    data = sweep.read(out)
    assert len(data.cases) == 2 and all(c["status"] == "ok" and c["torch_ms"] > 0 for c in data.cases.values())
    sides = {r["side"] for r in data.candidates}
    assert sides == {"triton", "auto", "ptx"}
    ok = [r for r in data.candidates if r["status"] == "ok"]
    assert ok and all(r["ms"] > 0 and r["samples"] >= 3 and r["plan"] is not None for r in ok if r["side"] != "auto")
    assert all(r["call"].get("ran") for r in data.candidates if r["side"] == "ptx" and r["status"] == "ok")
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and "0 to measure" in res.stdout
    res = subprocess.run([sys.executable, "-m", "compare", "sweep", "--fit", str(out), "--params",
                          str(tmp_path / "m.json")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and (tmp_path / "m.json").exists(), res.stdout + res.stderr


@pytest.mark.gpu(sm=90)
def test_tune_writes_every_timing_beside_a_small_table(tmp_path):
    """`compare tune --grid quick`: the table loads as before and names its timings file; the file holds a
    candidate record for every configuration timed (the kept plans checked, failures without a time), which
    `sweep --fit` reads."""
    from triton_kernels import plan_table

    table, timings = tmp_path / "t.json", tmp_path / "t.jsonl"
    res = subprocess.run([sys.executable, "-m", "compare", "tune", "--grid", "quick", "--accs", "fp32", "--workers",
                          "2", "--out", str(table), "--timings", str(timings)], cwd=ROOT, capture_output=True,
                         text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    t = plan_table.Table.load(table)
    run = json.loads(table.read_text())["runs"][-1]
    recs = sweep.read(timings).candidates
    assert t.entries and run["timings"]["file"] == timings.name and run["timings"]["records"] == len(recs) > 0
    assert {r["status"] for r in recs} <= {"ok", "unchecked", "failed check"}
    assert sum(r["status"] == "ok" for r in recs) >= len({r["case"] for r in recs})  # each case's kept plan
    assert all((r["ms"] is None) == (r["status"] == "failed check") for r in recs)
    res = subprocess.run([sys.executable, "-m", "compare", "sweep", "--fit", str(timings), "--params",
                          str(tmp_path / "m.json")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr


def test_pair_sets_two_kernels_side_by_side_tile_for_tile(tmp_path, capsys):
    """`sweep --pair FIRST SECOND --data FILES`: only the cases both kernels were timed on with one configuration
    and staging (a configuration only one of them ran, another staging, a failed timing: left out), FIRST's time
    over SECOND's, and the summary; one-line refusals otherwise."""
    from compare.__main__ import main

    def cand(case, kernel, config, ms, stage="", status="ok"):
        return {"type": "candidate", "case": case, "side": "triton", "problem": {"m": 8, "n": 8, "k": 8},
                "call": {"kernel": kernel, "config": config, "stage": stage}, "status": status, "ms": ms}
    data = tmp_path / "d.jsonl"
    sweep.append(data, [cand("1/0/a", "triton_streamk", "128x256x64_w8_s3_g8", 1.0),
                        cand("1/0/a", "triton_tma", "128x256x64_w8_s3_g8", 2.0),
                        cand("1/0/a", "triton_tma", "128x128x64_w8_s4_g8", 1.5),  # streamk did not run it
                        cand("1/1/b", "triton_streamk", "128x128x64_w8_s4_g8", 3.0),
                        cand("1/1/b", "triton_tma", "128x128x64_w8_s4_g8", 2.0),
                        cand("1/1/b", "triton_streamk", "128x256x64_w8_s3_g8", 3.0, stage="AB"),  # no twin
                        cand("1/2/c", "triton_streamk", "128x256x64_w8_s3_g8", 1.0),
                        cand("1/2/c", "triton_tma", "128x256x64_w8_s3_g8", None, status="error")])
    rows = sweep.paired([data], "triton_streamk", "triton_tma")
    assert [(r["case"], r["config"], r["ratio"]) for r in rows] == [("1/0/a", "128x256x64_w8_s3_g8", 0.5),
                                                                     ("1/1/b", "128x128x64_w8_s4_g8", 1.5)]
    assert main(["sweep", "--pair", "triton_streamk", "triton_tma", "--data", str(data)]) == 0
    out = capsys.readouterr().out
    assert f"2 pairs: geomean {math.sqrt(0.75):.3f}; triton_streamk faster in 1 (50%)" in out
    assert main(["sweep", "--pair", "triton_streamk", "gluon_persistent", "--data", str(data)]) == 2
    assert main(["sweep", "--pair", "triton_streamk", "triton_tma"]) == 2
    assert main(["sweep", "--pair", "triton_streamk", "triton_tma", "--data", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "timed both" in err[0] and "needs --data" in err[1] and "no such file" in err[2]


def test_named_shapes_make_cases_of_seed_zero_in_their_layouts():
    """sweep --suite / --shapes: each named shape a case of seed 0 at its position in the list, in every dtype and
    the accumulations it offers; the CLI takes one way of choosing shapes."""
    cases = sweep.named([(256, 4096, 14336, "NN"), (256, 4096, 14336, "NT")], ["fp16", "bf16"], ["fp32", "fp16"])
    assert [c.key for c in cases] == ["0/0/256x4096x14336/NN/fp16/fp32", "0/0/256x4096x14336/NN/fp16/fp16",
                                      "0/0/256x4096x14336/NN/bf16/fp32", "0/1/256x4096x14336/NT/fp16/fp32",
                                      "0/1/256x4096x14336/NT/fp16/fp16", "0/1/256x4096x14336/NT/bf16/fp32"]
    from compare.__main__ import main

    for argv in (["sweep"], ["sweep", "--seeds", "5", "--suite", "m_sweep"],
                 ["sweep", "--suite", "m_sweep", "--shapes", "8x8x8"]):
        assert main(argv) == 2, argv
