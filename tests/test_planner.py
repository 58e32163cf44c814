"""kernel="auto"'s model step (triton_kernels/planner.py): on a GPU with a fitted cost model, a call whose shape
class has no table entry of its own takes the candidate the model predicts fastest (a kernel named by the call: its
configuration the model predicts fastest); the shipped parameters are what refitting the committed sweep gives;
nothing on the path times, synchronizes or allocates. Runs on the CPU (the GPU's arch and SM count stubbed): a plan
is arithmetic on sizes."""
import json
import math
import random
from dataclasses import replace

import pytest
import torch

import triton_kernels
from compare.sweep import run_fit, stand_ins
from hgemm_common import cost_model as cm
from triton_kernels import dispatch, gluon_stream, plan_table, planner, streamk
from triton_kernels.planner import MODEL_DIR

from helpers import table_entry, table_of

TMA_KERNELS = ("triton_tma", "triton_splitk_tma", "triton_splitk_wide")


@pytest.fixture(autouse=True)
def hopper(monkeypatch):
    """An H100-like GPU (sm_90, 132 SMs) and no plan table: every call reaches the model."""
    monkeypatch.delenv(planner.MODEL_ENV, raising=False)
    monkeypatch.setattr(dispatch, "device_arch", lambda t: 90)
    monkeypatch.setattr(dispatch, "sm_count", lambda t: 132)
    monkeypatch.setattr(plan_table, "table_for", lambda arch, sms: None)
    dispatch.clear()
    planner.clear()
    yield
    dispatch.clear()
    planner.clear()


def operands(m: int, n: int, k: int, layout: str):
    """A (M x K, row-major) and B (K x N; "NT": column-major) without storage (meta tensors): planning reads
    shapes, strides and alignment only."""
    return stand_ins(m, n, k, layout, "fp16")


def shapes(seed: int, count: int):
    """Shapes of the random suite's kind, drawn here (seed of this test's own): M log-uniform in [1, 16384], N and
    K in [16, 32768], half of N and K off multiples of 8, both layouts."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        m, n, k = (max(1, int(2 ** rng.uniform(lo, 14 if j == 0 else 15))) for j, lo in enumerate((0, 4, 4)))
        if i % 2:
            n, k = -(-n // 8) * 8, -(-k // 8) * 8
        out.append((m, n, k, "NN" if i % 3 else "NT"))
    return out


@pytest.mark.parametrize("m,n,k,layout", shapes(20261128, 24))
def test_the_model_picks_the_fastest_predicted_candidate_that_can_run(m, n, k, layout):
    a, b = operands(m, n, k, layout)
    p = triton_kernels.plan(a, b)
    assert p.source.startswith("model: ") and p.source.split(": ")[1] in cm.TERMS
    assert dispatch.usable(p, 90, a, b, None)
    params = planner.params_for(90, 132)
    pairs = dispatch.model_candidates(m, n, k, 90, 132, a, b, None, planner.fitted_kernels(params))
    needed = {kern: dispatch.staging(dispatch.BY_KERNEL[kern].alignment, a, b, None) for kern, _ in pairs}
    # each kernel's needed staging, and a TMA kernel's copies of operands whose rows lie off the 32-byte sectors
    assert all(stage == needed[kern] or stage in dispatch.sectored_stages(needed[kern], a, b) for kern, stage in pairs)
    assert all(dispatch.BY_KERNEL[kern].alignment != "none" for kern, stage in pairs if stage != needed[kern])
    assert {kern for kern, _ in dispatch.candidates(m, n, k, 90, 132, a, b, None)} <= set(needed)
    scored = planner.ranked(planner.problem_of(a, b, None, "fp32"), pairs, 132, params)
    runnable = [(pred, q) for pred, q in scored if dispatch.usable(q, 90, a, b, None)]
    chosen = next(pred for pred, q in runnable if (q.kernel, q.config, q.stage) == (p.kernel, p.config, p.stage))
    assert all(chosen.seconds <= pred.seconds for pred, _ in runnable)
    # never a pointer (cp.async) kernel where a usable TMA plan is predicted faster
    tma = [pred.seconds for pred, q in runnable if q.kernel in TMA_KERNELS]
    if p.kernel in cm.POINTER_KERNELS and tma:
        assert chosen.seconds <= min(tma)


@pytest.mark.parametrize("m,n,k,layout", [(8, 27704, 5728, "NT"), (48, 20480, 4096, "NN")])
def test_skinny_outputs_on_a_wide_n_score_the_split_k_tiles_that_tune_exact_skips(m, n, k, layout):
    # 128 x 128 tiles fill the SMs here, so tune="exact" does not time split-K (`worth_timing`); the model scores
    # its 16- to 64-row tiles anyway (`worth_scoring`) and weighs them against the TMA tiles.
    a, b = operands(m, n, k, layout)
    timed = {kern for kern, _ in dispatch.candidates(m, n, k, 90, 132, a, b, None)}
    scored = {kern for kern, _ in dispatch.model_candidates(m, n, k, 90, 132, a, b, None)}
    assert not timed & {"triton_splitk", "triton_splitk_tma"}
    assert {"triton_splitk", "triton_splitk_tma", "triton_tma"} <= scored
    assert not {kern for kern, _ in dispatch.model_candidates(4096, n, k, 90, 132, *operands(4096, n, k, layout),
                                                               None)} & {"triton_splitk", "triton_splitk_tma"}


def test_a_kernel_the_model_has_not_fitted_is_swept_but_never_scored(monkeypatch):
    """The stream-K kernel is among the sweep's candidates where its widest tile's grid leaves a partial round
    (`streamk.worth_scoring`), so a sweep times it; the model scores a kernel only where a parameter file fits it,
    and never one whose module says SWEEP_ONLY (stream-K's, for now), so kernel="auto" cannot pick it."""
    m, n, k = 200, 8192, 8192  # 64 tiles of 128 x 256 on 132 SMs
    a, b = operands(m, n, k, "NN")
    shipped = planner.fitted_kernels(planner.params_for(90, 132))
    assert "triton_streamk" in shipped and streamk.SWEEP_ONLY
    swept = {kern for kern, _ in dispatch.candidates(m, n, k, 90, 132, a, b, None, every_staging=True)}
    assert "triton_streamk" in swept and "triton_streamk" not in {
        kern for kern, _ in dispatch.candidates(m, n, k, 90, 132, a, b, None)}  # tune="exact" does not time it
    scored = lambda fitted: {kern for kern, _ in dispatch.model_candidates(m, n, k, 90, 132, a, b, None, fitted)}
    assert "triton_streamk" not in scored(shipped)
    assert triton_kernels.plan(a, b).kernel != "triton_streamk"
    monkeypatch.setattr(streamk, "SWEEP_ONLY", None)  # once it may be picked: only where fitted
    assert "triton_streamk" in scored(shipped) and "triton_streamk" not in scored(shipped - {"triton_streamk"})
    # 4224 x 4096 in 128 x 256 tiles: 33 x 16 = 528 = 4 x 132, whole rounds (the TMA kernel's schedule): not swept
    assert "triton_streamk" not in {kern for kern, _ in dispatch.candidates(
        4224, 4096, 1024, 90, 132, *operands(4224, 4096, 1024, "NN"), None, every_staging=True)}


def test_wide_tiles_are_scored_only_once_a_fit_has_measured_them():
    """triton_tma's wide tiles (192 = 128 + 64 columns: two accumulators) take parameters of their own
    (`cost_model.param_key`'s ".wide"): a parameter file without them leaves them out of the model's choice, and
    one with them scores them (the shipped file has them: a sweep timed the wide tiles)."""
    shipped = planner.params_for(90, 132)
    assert "triton_tma.wide" in shipped.kernels
    params = cm.Params(shipped.gpu, {k: v for k, v in shipped.kernels.items() if k != "triton_tma.wide"})
    plan = cm.plan_for("triton_tma", 128, 192, 64, 4, 8)
    assert cm.param_key(plan) == "triton_tma.wide" and cm.unmeasured(plan, params)
    assert not cm.unmeasured(cm.plan_for("triton_tma", 128, 256, 64, 3, 8), params)
    # the hand-written kernels' wide tiles are one wgmma that wide: their kernel's own parameters
    assert cm.param_key(cm.plan_for("wgmma_persistent", 128, 192, 64, 5, 12)) == "wgmma_persistent"
    problem = cm.Problem(8192, 272, 8192, "NN", "ttt", "fp16", "fp32")
    pairs = [("triton_tma", (False, False, False))]
    wide = lambda p: {pl.config.name for _, pl in planner.ranked(problem, pairs, 132, p) if pl.config.n_parts[1]}
    assert wide(params) == set()
    fitted = cm.Params(params.gpu, {**params.kernels, "triton_tma.wide": params.kernels["triton_tma"]})
    assert wide(fitted) == {c.name for c in triton_kernels.configs("triton_tma") if c.n_parts[1]}


def test_swapped_short_tiles_are_scored_only_once_a_fit_has_measured_them():
    """triton_tma's tiles of fewer than 64 rows run swapped (C^T = B^T A^T) and take parameters of their own
    (".swap"): a parameter file without them leaves them out of the model's choice; one with them scores them,
    and only where one row of them covers M (`tma_persistent.prune`, `covers_m`)."""
    from triton_kernels import tma_persistent as tp

    shipped = planner.params_for(90, 132)
    params = cm.Params(shipped.gpu, {k: v for k, v in shipped.kernels.items() if k != "triton_tma.swap"})
    plan = cm.plan_for("triton_tma", 16, 128, 64, 10, 4)
    assert plan.isa == "wgmma" and cm.param_key(plan) == "triton_tma.swap" and cm.unmeasured(plan, params)
    assert cm.param_key(cm.plan_for("triton_blocked", 16, 128, 64, 4, 4)) == "triton_blocked.mma"  # not swapped
    swap_names = {c.name for c in triton_kernels.configs("triton_tma") if tp.swapped(c)}
    # the kernel's rule and the model's are one rule
    assert all(tp.swapped(c) == cm.swapped_tile(planner.model_plan_of("triton_tma", c, (False,) * 3, 1024))
               for c in [*triton_kernels.configs("triton_tma"), tp.INTERPRETER_CONFIG])
    assert swap_names and {tp.Config.from_name(n).block_m for n in swap_names} == {16, 32}
    pairs = [("triton_tma", (False, False, False))]

    def swaps(problem, p):
        return {pl.config.name for _, pl in planner.ranked(problem, pairs, 132, p) if tp.swapped(pl.config)}
    small = cm.Problem(8, 4096, 2048, "NN", "ttt", "fp16", "fp32")
    assert swaps(small, params) == set()
    fitted = cm.Params(params.gpu, {**params.kernels, "triton_tma.swap": params.kernels["triton_tma"]})
    assert swaps(small, fitted) == {n for n in swap_names if n.startswith("16x")}  # M = 8: 16-row tiles only
    # M = 24: only tiles one row of which covers M (a second row of 16-row tiles would read B again)
    assert swaps(cm.Problem(24, 4096, 2048, "NN", "ttt", "fp16", "fp32"), fitted) == \
        {n for n in swap_names if n.startswith("32x")}
    assert swaps(cm.Problem(64, 4096, 2048, "NN", "ttt", "fp16", "fp32"), fitted) == set()  # no swapped tile covers it
    # nor does a stored plan (a table's nearest class) run a swapped tile on a taller problem
    plan = dispatch.Plan("triton_tma", tp.Config.from_name(min(swap_names)))
    assert plan.config.block_m == 16
    assert dispatch.usable(plan, 90, *operands(16, 4096, 2048, "NN"), None)
    assert not dispatch.usable(plan, 90, *operands(17, 4096, 2048, "NN"), None)


def test_each_operand_off_the_sectors_is_also_scored_copied_alone():
    """With A and B both read off the 32-byte sectors, a TMA kernel is scored on a copy of A alone, of B alone and
    of both: one copy can be cheap where the other is dear (a tall A, a narrow B)."""
    a, b = operands(10848, 792, 2104, "NN")  # K = 2104 and N = 792: both 8 more than a multiple of 16
    stages = dispatch.sectored_stages((False, False, False), a, b)
    assert stages == [(True, False, False), (False, True, False), (True, True, False)]
    pairs = dispatch.model_candidates(10848, 792, 2104, 90, 132, a, b, None, frozenset({"triton_tma"}))
    assert [s for k, s in pairs if k == "triton_tma"] == [(False, False, False), *stages]
    # an explicit kernel= call on the Gluon kernel (misaligned="copy") copies what costs little: here B alone
    # (3 MB; both would move 49 MB), at 8 x 4104 x 4104 A alone (8 rows)
    assert dispatch.copy_stage("tma", a, b, None) == (False, True, False)
    assert dispatch.copy_stage("tma", *operands(8, 4104, 4104, "NN"), None) == (True, False, False)
    a, b = operands(4096, 4096, 4096, "NN")  # both on the sectors: nothing to add
    assert dispatch.sectored_stages((False, False, False), a, b) == []
    assert dispatch.copy_stage("tma", a, b, None) == (False, False, False)


def offer_gluon(monkeypatch, names=("gluon_persistent",)):
    """The Gluon kernels' records, offered even where this process does not offer them (under the interpreter, or a
    Triton without Gluon): planning them is arithmetic on sizes."""
    from triton_kernels import variants

    records = [next(v for v in variants.RECORDS if v.name == name) for name in names]
    for v in records:
        if v.name not in dispatch.BY_KERNEL:
            monkeypatch.setattr(dispatch, "VARIANTS", (*dispatch.VARIANTS, v))
            monkeypatch.setattr(dispatch, "BY_KERNEL", {**dispatch.BY_KERNEL, v.name: v})
            monkeypatch.setitem(variants.BY_KERNEL, v.name, v)
            monkeypatch.setattr(type(v), "offered_on", lambda self, arch: True)
    return records


def test_the_gluon_kernel_is_scored_only_where_the_model_has_fitted_it(monkeypatch):
    """gluon_persistent is never timed by tune="exact"; the model scores it once a parameter file fits it (a sweep
    with --gluon). Its plans carry its needed staging, like the TMA kernels'."""
    a, b = operands(3000, 5000, 2000, "NN")
    (gluon,) = offer_gluon(monkeypatch)
    without = dispatch.model_candidates(3000, 5000, 2000, 90, 132, a, b, None, frozenset({"triton_tma"}))
    assert "gluon_persistent" not in {k for k, _ in without}
    fitted = frozenset({"triton_tma", "gluon_persistent"})
    pairs = dispatch.model_candidates(3000, 5000, 2000, 90, 132, a, b, None, fitted)
    need = dispatch.staging(gluon.alignment, a, b, None)  # B's rows (10,000 bytes apart) off the sectors: a copy too
    assert [s for k, s in pairs if k == "gluon_persistent"] == [need, *dispatch.sectored_stages(need, a, b)]
    assert dispatch.sectored_stages(need, a, b) == [(False, True, False)]  # only B is off: one copy
    assert dispatch.sectored_stage(need, a, b) == (False, True, False)
    assert ("triton_tma", (False, False, False)) in pairs and ("triton_tma", (False, True, False)) in pairs
    params = planner.params_for(90, 132)
    faster = cm.Params(params.gpu, {**params.kernels, "gluon_persistent": cm.KernelParams(eff=1.9, launch_us=0.1,
                                                                                          tile_us=0.01)})
    ranked = planner.ranked(planner.problem_of(a, b, None, "fp32"), pairs, 132, faster)
    assert ranked[0][1].kernel == "gluon_persistent"  # a fit that makes it fastest makes it the plan


def test_the_gluon_kernel_hands_off_to_its_bandwidth_path_only_where_fitted_and_faster(monkeypatch):
    """kernel="gluon_persistent" weighs gluon_stream (`dispatch.HANDS_OFF`: reading the operands in place, no
    staging) beside its own staged configurations, once a parameter file fits gluon_stream, and takes it where the
    model predicts it faster; without those parameters it never hands off."""
    offer_gluon(monkeypatch, ("gluon_persistent", "gluon_stream"))
    a, b = operands(8, 4001, 3001, "NN")  # N and K odd: the Gluon kernel copies B and C first
    stage = dispatch.staging(dispatch.BY_KERNEL["gluon_persistent"].alignment, a, b, None)
    assert stage[1] and stage[2]
    params = planner.params_for(90, 132)
    others = {key: v for key, v in params.kernels.items() if not key.startswith("gluon_stream.")}
    bare = cm.Params(params.gpu, others)
    assert "gluon_stream" not in planner.fitted_kernels(bare)
    assert dispatch.table_plan(a, b, None, "fp32", "gluon_persistent", 90, 132, stage, params=bare).kernel == \
        "gluon_persistent"

    def stream(**fit):  # the parameter file with gluon_stream's parameters (aligned and not) set to `fit`
        return cm.Params(params.gpu, {**others, **{f"gluon_stream.mma{u}": cm.KernelParams(**fit) for u in ("", ".u")}})

    fast = stream(eff=1.0, mem_eff=1.0, launch_us=0.1, tile_us=0.01)
    p = dispatch.table_plan(a, b, None, "fp32", "gluon_persistent", 90, 132, stage, params=fast)
    assert p.kernel == "gluon_stream" and p.stage == (False, False, False) and p.source.startswith("model")
    a64, b64 = operands(gluon_stream.MAX_M + 1, 4001, 3001, "NN")  # past the rows its records measure: never
    stage64 = dispatch.staging(dispatch.BY_KERNEL["gluon_persistent"].alignment, a64, b64, None)
    assert dispatch.hands_off("gluon_persistent", gluon_stream.MAX_M + 1) == ()
    assert dispatch.table_plan(a64, b64, None, "fp32", "gluon_persistent", 90, 132, stage64, params=fast).kernel \
        == "gluon_persistent"
    slow = stream(eff=0.01, mem_eff=0.01, launch_us=500.0)
    assert dispatch.table_plan(a, b, None, "fp32", "gluon_persistent", 90, 132, stage, params=slow).kernel == \
        "gluon_persistent"


def test_an_explicit_kernel_takes_the_models_choice_among_its_own_configurations(monkeypatch):
    """kernel="triton_tma" and the like: the configuration of that kernel (with the operands it copies) the model
    predicts fastest, its source naming the deciding term; a class entry of the table that timed that kernel where
    it holds; a kernel the model has not fitted, or no model, the kernel's own rule."""
    offer_gluon(monkeypatch)
    a, b = operands(8, 27816, 1208, "NN")
    params = planner.params_for(90, 132)
    problem = planner.problem_of(a, b, None, "fp32")
    for kernel in ("triton_tma", "triton_splitk", "triton_blocked", "gluon_persistent"):
        stage = (True, False, False) if kernel == "gluon_persistent" else (False, False, False)  # A's 8 rows
        p = dispatch.table_plan(a, b, None, "fp32", kernel, 90, 132, stage)
        best = planner.ranked(problem, [(kernel, stage)], 132, params)[0]
        assert (p.kernel, p.config, p.stage) == (kernel, best[1].config, stage)
        assert p.source == f"model: {best[0].decided}"
    rule = plan_table.heuristic_config("gluon_persistent", 8, 27816, 1208, 132)
    assert rule != best[1].config  # (the rule's 64 x 32 tiles: a case the model changes)

    def table(a, b, config, shapes):  # one class, its entry timed at `shapes`
        key = plan_table.shape_class(a, b, None, "fp16", "fp32").key
        return table_of({key: table_entry("triton_tma", config, shapes=shapes)})

    monkeypatch.setattr(plan_table, "table_for", lambda arch, sms: table(a, b, "64x128x64_w4_s6_g8_e2", []))
    p = dispatch.table_plan(a, b, None, "fp32", "triton_tma", 90, 132)
    assert (p.config.name, p.source) == ("64x128x64_w4_s6_g8_e2", "table")
    a3, b3 = operands(2304, 2560, 4096, "NN")  # 128 x 256 timed at 4096^3 (four full rounds): 180 tiles here
    monkeypatch.setattr(plan_table, "table_for", lambda arch, sms: table(a3, b3, "128x256x64_w8_s3_g8",
                                                                         ["4096x4096x4096"]))
    p = dispatch.table_plan(a3, b3, None, "fp32", "triton_tma", 90, 132)  # fill two rounds a third idle: no hold
    assert p.source.startswith("model: ") and p.config == planner.ranked(
        planner.problem_of(a3, b3, None, "fp32"), [("triton_tma", (False, False, False))], 132, params)[0][1].config
    a2, b2 = operands(512, 4096, 4096, "NT")  # triton_realign on aligned operands: parameters the fit never saw
    p = dispatch.table_plan(a2, b2, None, "fp32", "triton_realign", 90, 132)
    assert p.source == "heuristic"
    monkeypatch.setattr(plan_table, "table_for", lambda arch, sms: None)
    monkeypatch.setattr(planner, "fitted_kernels", lambda params: frozenset({"triton_tma"}))
    p = dispatch.table_plan(a, b, None, "fp32", "gluon_persistent", 90, 132, (True, False, False))
    assert (p.config, p.source) == (rule, "heuristic")
    monkeypatch.setenv(planner.MODEL_ENV, "off")
    planner.clear()
    p = dispatch.table_plan(a, b, None, "fp32", "triton_splitk", 90, 132)
    assert (p.config, p.source) == (plan_table.heuristic_config("triton_splitk", 8, 27816, 1208, 132), "heuristic")


def test_auto_weighs_only_the_configurations_each_kernel_lists(monkeypatch):
    """kernel="auto" never takes a configuration its kernel's module does not list (`planner.ranked`'s
    listed_only): the Gluon kernel's rule adds K splits past 2 that no sweep had timed when the shipped parameters
    were fitted. The Gluon kernel named by the call weighs them (8x293x24568: 5 tiles of 64 x 64, its rule's split
    of 16 fills 80 SMs)."""
    from triton_kernels import gluon_persistent
    from triton_kernels.variants import BY_KERNEL, kernel_module

    offer_gluon(monkeypatch)
    a, b = operands(8, 293, 24568, "NT")
    params = planner.params_for(90, 132)
    problem, pair = planner.problem_of(a, b, None, "fp32"), [("gluon_persistent", (False, False, True))]
    assert planner.ranked(problem, pair, 132, params)[0][1].config.split_k == 16
    assert all(p.config in gluon_persistent.configs() for _, p in planner.ranked(problem, pair, 132, params, True))
    assert dispatch.table_plan(a, b, None, "fp32", "gluon_persistent", 90, 132, (False, False, True)
                               ).config.split_k == 16
    for m, n, k, layout in shapes(83, 40):
        a, b = operands(m, n, k, layout)
        p = dispatch.model_plan(a, b, None, "fp32", 90, 132)
        assert p.config in kernel_module(BY_KERNEL[p.kernel]).configs(), (m, n, k, layout, p)


def test_the_models_choice_for_an_explicit_kernel_beats_its_rule_on_the_committed_sweeps(monkeypatch):
    """On the committed sweeps that timed every configuration of the Gluon kernel and of the Triton kernels at M up
    to 512, per kernel: the configuration the shipped model predicts fastest among those timed runs faster, as a
    geomean over the cases, than the one the kernel's own rule (`heuristic_config`) names, and within 10% of the
    fastest timed. The model's step for an explicit kernel= stands on this."""
    from collections import defaultdict

    from compare.sweep_data import read

    offer_gluon(monkeypatch, ("gluon_persistent", "gluon_streamk"))
    params = planner.params_for(90, 132)
    fitted = planner.fitted_kernels(params)
    groups = defaultdict(list)
    for name in ("h200-seed-9191-fp16-gluon-m512.jsonl.gz", "h200-seed-9200-fp16-gluon-m256.jsonl.gz"):
        data = read(MODEL_DIR.parent.parent / "compare" / "sweeps" / name)
        assert data.candidates, f"the committed sweep file {name} is missing or empty"
        for r in data.candidates:
            call = r["call"]
            if r["status"] == "ok" and call.get("config") and not call.get("stage") and call["kernel"] in fitted:
                groups[(r["case"], call["kernel"])].append(r)
    logs = defaultdict(lambda: [0.0, 0.0, 0])
    for (_, kernel), rows in groups.items():
        pr = rows[0]["problem"]
        rule = plan_table.heuristic_config(kernel, pr["m"], pr["n"], pr["k"], 132).name
        picked = [r for r in rows if r["call"]["config"] == rule]
        if not picked:
            continue
        problem = cm.Problem(**pr)
        model = min(rows, key=lambda r: cm.predict(problem, cm.Plan(**r["plan"]), params).seconds)
        fastest = min(r["ms"] for r in rows)
        t = logs[kernel]
        t[0] += math.log(picked[0]["ms"] / fastest)
        t[1] += math.log(model["ms"] / fastest)
        t[2] += 1
    judged = {k: (math.exp(r / n), math.exp(m / n)) for k, (r, m, n) in logs.items() if n >= 10}
    assert {"gluon_persistent", "triton_tma", "triton_splitk", "triton_blocked"} <= set(judged), judged
    for kernel, (rule_over, model_over) in judged.items():
        assert model_over < rule_over and model_over < 1.10, (kernel, rule_over, model_over)


def test_a_table_entry_holds_where_its_plan_fills_the_sms_as_where_it_was_timed(monkeypatch):
    """The shipped table's plan for 4096^3's class (timed at 4096^3: 128 x 256 tiles, four nearly full rounds)
    stands at 4096^3 and at 2816^3 (242 tiles: within TABLE_FILL_TOLERANCE of its timed fill); at 2304x2560x4096
    (180 tiles: two rounds, a third idle) the model plans the call; with no model the entry stands everywhere."""
    monkeypatch.setattr(plan_table, "table_for", _shipped_table)
    table = plan_table.table_for(90, 132)
    for (m, n, k), holds in (((4096, 4096, 4096), True), ((2816, 2816, 2816), True), ((2304, 2560, 4096), False)):
        a, b = operands(m, n, k, "NN")
        entry, distance = table.lookup(plan_table.shape_class(a, b, None, "fp16", "fp32"))
        assert distance == 0 and entry.shapes == ("4096x4096x4096",)
        assert dispatch.table_holds(entry, m, n, k, 132) is holds
        dispatch.clear()
        p = triton_kernels.plan(a, b)
        assert p.source == "table" if holds else p.source.startswith("model: "), (m, n, k, p.source)
        problem = planner.problem_of(a, b, None, "fp32")
        fill = dispatch.round_fill(entry.plan, problem, 132)
        assert fill == pytest.approx({4096: 512 / 528, 2816: 242 / 264, 2304: 180 / 264}[m])  # tiles / (rounds x SMs)
        monkeypatch.setenv(planner.MODEL_ENV, "off")
        dispatch.clear()
        assert triton_kernels.plan(a, b).source == "table"
        monkeypatch.delenv(planner.MODEL_ENV)


def test_every_named_suite_shape_the_table_names_keeps_its_table_plan():
    """The rule above moves no shape of the named suites off the table (they are the shapes it was timed at)."""
    from compare.bench import SUITES

    table = _shipped_table(90, 132)
    hits = 0
    for shape in {s for suite in SUITES.values() for s in suite}:
        m, n, k = shape[:3]
        for layout in (shape[3:] or ("NN", "NT")):
            if "T" in layout[:1]:
                continue  # operands() builds row-major A only
            a, b = operands(m, n, k, layout)
            entry, distance = table.lookup(plan_table.shape_class(a, b, None, "fp16", "fp32"))
            if entry is not None and distance == 0:
                hits += 1
                assert dispatch.table_holds(entry, m, n, k, 132), (m, n, k, layout, entry.plan.name)
    assert hits >= 40


def _shipped_table(arch, sms):
    return plan_table.Table.load(plan_table.TABLE_DIR / "h100-80gb-hbm3-sm90-132.json")


def test_a_model_file_entry_plans_with_its_own_parameters(tmp_path):
    """`python -m compare bench --kernels ... triton@FILE`: kernel="auto" planned with FILE's parameters beside the
    shipped model's plans. A file whose fit makes the shipped choice's kernel slow plans another kernel, and runs it
    exactly (small-integer inputs, interpreted); a pattern of another form is refused by name."""
    from compare import registry
    from compare.reference import compare, make_inputs, poisoned_out, reference

    a, b = make_inputs(96, 72, 200, "NN", device="cpu", kind="int")
    shipped = triton_kernels.plan(a, b)
    params = planner.params_for(90, 132)
    slow = cm.Params(params.gpu, {name: replace(kp, eff=kp.eff / 50) if name.split(".")[0] == shipped.kernel
                                  else kp for name, kp in params.kernels.items()},
                     params.corrections, params.about, params.neighbours)
    path = tmp_path / "slow.json"
    cm.save(slow, path)
    (entry,) = registry.select([f"triton@{path}"], gpu=False)
    assert entry.name == "triton@slow" and entry.config == "model" and entry.acc == "fp32"
    out = poisoned_out(96, 72, "cpu")
    got = entry.run.plan_of(a, b, out)
    assert got.kernel != shipped.kernel and got.source.startswith("model: ")
    assert got == dispatch.table_plan(a, b, out, "fp32", "auto", 90, 132, params=slow)
    assert compare(entry.run(a, b, out), reference(a, b)).ok  # no bound: exact
    both = registry.select(["torch.matmul", "triton", f"triton@{path}"], gpu=False)
    assert [k.name for k in both][-1] == "triton@slow" and "triton" in [k.name for k in both]
    with pytest.raises(registry.UnknownKernel, match="triton@FILE"):
        registry.select([f"wgmma_persistent@{path}"], gpu=False)


def test_a_gpu_without_a_model_keeps_the_nearest_class_and_the_heuristic(monkeypatch):
    a, b = operands(300, 500, 700, "NN")
    assert triton_kernels.plan(a, b).source.startswith("model: ")
    monkeypatch.setenv(planner.MODEL_ENV, "off")
    dispatch.clear()
    assert triton_kernels.plan(a, b).source == "heuristic"
    monkeypatch.delenv(planner.MODEL_ENV)
    monkeypatch.setattr(dispatch, "device_arch", lambda t: 80)  # no file for sm_80
    dispatch.clear()
    assert triton_kernels.plan(a, b).source == "heuristic"


def test_an_unreadable_model_file_warns_once_and_plans_without_it(tmp_path, monkeypatch):
    bad = tmp_path / "m.json"
    bad.write_text('{"kind": "something else"}')
    monkeypatch.setenv(planner.MODEL_ENV, str(bad))
    a, b = operands(300, 500, 700, "NN")
    with pytest.warns(RuntimeWarning, match="ignoring cost model file"):
        assert triton_kernels.plan(a, b).source == "heuristic"


def test_a_model_file_of_another_sm_count_is_not_used(tmp_path, monkeypatch):
    params = cm.load(MODEL_DIR / "sm90-132.json")
    other = tmp_path / "m.json"
    cm.save(cm.Params(replace(params.gpu, sms=114), params.kernels, params.corrections, params.about), other)
    monkeypatch.setenv(planner.MODEL_ENV, str(other))
    a, b = operands(300, 500, 700, "NN")
    with pytest.warns(RuntimeWarning, match="fitted for 114 SMs, this GPU has 132"):
        assert triton_kernels.plan(a, b).source == "heuristic"


def test_planning_times_synchronizes_and_allocates_nothing(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("the planning path must not time, synchronize or allocate")
    calls = [operands(m, n, k, layout) for m, n, k, layout in shapes(7, 12)]
    for mod, name in ((dispatch, "time_ms"), (dispatch, "time_auto"), (torch.cuda, "synchronize"),
                      (torch, "empty"), (torch, "zeros"), (torch, "empty_strided")):
        monkeypatch.setattr(mod, name, forbidden)
    for a, b in calls:
        assert dispatch.model_plan(a, b, None, "fp32", 90, 132) is not None
        assert dispatch.table_plan(a, b, None, "fp32", "triton_blocked", 90, 132).source.startswith("model: ")
        assert dispatch.table_plan(a, b, None, "fp32", "triton_splitk", 90, 132).kernel == "triton_splitk"


def test_the_planners_plans_find_the_measured_neighbours_the_fit_stored():
    """The keys the planner builds (`planner.problem_of`, `model_plan_of`) are the ones the fit stored from the
    sweep's records (`cost_model.neighbour_key`): on shapes a committed sweep measured, most of the plans the planner
    ranks find rows of their own, and the planner's problem is the one the sweep recorded. A drift on either side (an
    alignment letter, a staging name, a split) would switch every correction off without a word."""
    from compare.sweep_data import read

    params = planner.params_for(90, 132)
    fitted = planner.fitted_kernels(params)
    data = read(MODEL_DIR.parent.parent / "compare" / "sweeps" / "h200-seed-9107-fp16.jsonl.gz")
    assert data.candidates, "the committed sweep file is missing or empty"
    problems = {}
    for r in data.candidates:
        if r.get("side") == "triton" and r.get("problem") and r["problem"]["acc"] == "fp32":
            problems.setdefault(r["case"], cm.Problem(**r["problem"]))
    found = ranked_plans = 0
    for problem in list(problems.values())[:12]:
        a, b = operands(problem.m, problem.n, problem.k, problem.layout)
        assert planner.problem_of(a, b, None, "fp32") == replace(problem, dtype="fp16")
        pairs = dispatch.model_candidates(problem.m, problem.n, problem.k, 90, 132, a, b, None, fitted)
        for _, plan in planner.ranked(problem, pairs, 132, params):
            ranked_plans += 1
            key = cm.neighbour_key(problem, planner.model_plan_of(plan.kernel, plan.config, plan.stage, problem.k))
            found += bool(cm.neighbour_rows(params, key))
    assert ranked_plans > 100 and found > 0.8 * ranked_plans, (found, ranked_plans)


def test_the_shipped_model_is_what_refitting_its_committed_sweep_gives(tmp_path):
    """Each shipped parameter file names the sweep it was fitted on (committed, gzipped) and the commands; a refit
    of that data reproduces its parameters and corrections."""
    files = sorted(MODEL_DIR.glob("*.json"))
    assert files, "no cost model ships with the package"
    for path in files:
        shipped = cm.load(path)
        about = shipped.about
        assert about["fit_command"].startswith("python -m compare sweep --fit ")
        assert about["commands"] and all(c.startswith("python -m compare sweep ") for c in about["commands"])
        assert about["devices"] and about["records"] > 1000
        sources = [plan_table.Path(__file__).parent.parent / s for s in about["sources"]]
        assert all(s.exists() for s in sources), sources
        refit = run_fit(sources, tmp_path / path.name, [], log=lambda *_: None)
        # rel 1e-2, abs 1e-3 (log units: 0.1%): the fit stops once a step moves no log-parameter by 1e-6, and the
        # path there follows the BLAS kernels' rounding in np.linalg.solve, which OpenBLAS picks by CPU: refit on an
        # AMD EPYC (its Zen kernels) rather than the AVX-512 kernels the shipped file was fitted with, a kernel whose
        # records pin one parameter loosely (triton_splitk's mma.u) lands 0.3% away, and corrections and neighbour
        # residuals move in their fourth decimal. A model left stale by new sweep data or fit code moves further.
        for name, kp in shipped.kernels.items():
            assert refit.kernels[name].as_array() == pytest.approx(kp.as_array(), rel=1e-2), name
        assert refit.corrections == pytest.approx(shipped.corrections, abs=1e-3)
        assert refit.neighbours.keys() == shipped.neighbours.keys()
        flat = lambda rows: [len(rows), *(x for row in rows for x in row)]  # noqa: E731 - approx takes flat lists
        for key in shipped.neighbours:
            assert flat(refit.neighbours[key]) == pytest.approx(flat(cm.neighbour_rows(shipped, key)), abs=1e-3), key
        assert json.loads(path.read_text())["kind"] == cm.KIND
