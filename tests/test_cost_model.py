"""The cost model (hgemm_common/cost_model.py) on the CPU: its terms behave as the physics says, its fit recovers
parameters it generated, its parameter file round-trips."""
import json
import math
import random
from dataclasses import replace

import numpy as np
import pytest

from compare.bench import random_shapes
from hgemm_common import cost_model as cm
from hgemm_common.errors import HgemmValueError


def core(problem, plan, params=None):
    t = cm.predict(problem, plan, params).terms
    return t["compute"] + t["waves"]


@pytest.mark.parametrize("kernel,stages", [("triton_tma", 4), ("triton_blocked", 4)])
def test_waves_step_at_multiples_of_the_sm_count(kernel, stages):
    """With one tile per row of tiles, M = t x 128 makes t tiles: the compute side of the time (compute + waves) is
    one round's up to 132 tiles, two rounds' from 133 to 264, three from 265; the waves term is what the last
    round's idle SMs cost, zero on whole rounds."""
    plan = cm.plan_for(kernel, 128, 128, 64, stages, 8)
    q = {t: core(cm.Problem(128 * t, 128, 4096), plan) for t in range(1, 300)}
    one = q[1]
    for t, x in q.items():
        assert x == pytest.approx(one * math.ceil(t / 132)), t
    assert cm.predict(cm.Problem(128 * 132, 128, 4096), plan).terms["waves"] == pytest.approx(0, abs=1e-12)
    assert cm.predict(cm.Problem(128 * 133, 128, 4096), plan).terms["waves"] > 0.98 * q[132]


def test_a_split_fills_the_rounds_a_few_tiles_leave_empty():
    """16 x 4096 x 4096 in 16 x 64 tiles is 64 tiles on 132 SMs: split in 2 its compute side halves, and splits
    past the SM count add rounds again."""
    prob = cm.Problem(16, 4096, 4096)
    q = {s: core(prob, cm.plan_for("triton_splitk", 16, 64, 128, 4, 4, s)) for s in (1, 2, 4)}
    assert q[2] == pytest.approx(q[1] / 2) and q[4] == pytest.approx(q[2])


def test_bandwidth_decides_at_m_1():
    """A single row: B's bytes are the time, for the CUDA-core path and for a 16-row tensor-core split alike."""
    prob = cm.Problem(1, 8192, 8192)
    for plan in (cm.plan_for("triton_gemv", 1, 32, 256, 1, 4, 2), cm.plan_for("triton_splitk", 16, 64, 128, 4, 4, 4)):
        p = cm.predict(prob, plan)
        assert p.decided == "hbm", (plan, p)
        assert p.terms["hbm"] >= 2 * 8192 * 8192 / (cm.H100.hbm_gbps * 1e9)  # B alone, at HBM's bandwidth at best


@pytest.mark.parametrize("kernel,bn,stages,warps", [("triton_tma", 256, 3, 8), ("wgmma_persistent", 256, 4, 12),
                                                    ("triton_blocked", 256, 3, 8)])
@pytest.mark.parametrize("size", [4096, 8192])
def test_compute_decides_at_large_squares(kernel, bn, stages, warps, size):
    p = cm.predict(cm.Problem(size, size, size), cm.plan_for(kernel, 128, bn, 64, stages, warps))
    assert p.decided == "compute", p
    assert p.terms["compute"] == pytest.approx(2 * size**3 / (cm.H100.peak_tflops() * 1e12 * cm.KernelParams().eff))


def test_staging_reduce_and_latency_terms():
    """Staged operands add their copies (read + write) and their launches: on the Triton side one for A and B
    together and one for C back (`triton_kernels.stage_copy`), on the PTX side one an operand; fp32 partials go
    through HBM for a fused or two-pass split, not for a cluster's; a two-pass split launches twice; a cluster
    halves B's L2 reads."""
    prob = cm.Problem(3000, 5000, 2000, align="--t")
    plain = cm.plan_for("triton_tma", 128, 256, 64, 3, 8)
    staged = cm.plan_for("triton_tma", 128, 256, 64, 3, 8, staged="AB")
    f0, f1 = cm.features(prob, plain), cm.features(prob, staged)
    assert f1.bytes_staging == 2 * 2 * (3000 * 2000 + 2000 * 5000) and f0.bytes_staging == 0
    assert f1.launches == f0.launches + 1
    for kernel, staged_, more in [("triton_tma", "A", 1), ("triton_tma", "C", 1), ("triton_tma", "ABC", 2),
                                  ("gluon_persistent", "BC", 2), ("wgmma_persistent", "AB", 2),
                                  ("wgmma_persistent", "ABC", 3)]:
        f = cm.features(prob, cm.plan_for(kernel, 128, 256, 64, 3, 8, staged=staged_))
        assert f.launches == cm.features(prob, cm.plan_for(kernel, 128, 256, 64, 3, 8)).launches + more, (kernel,
                                                                                                          staged_)
    small = cm.Problem(512, 512, 16384)
    grid, clus = cm.plan_for("wgmma_splitk_grid", 128, 128, 64, 6, 12, 8), cm.plan_for("wgmma_splitk", 128, 128, 64,
                                                                                         6, 12, 4)
    assert cm.features(small, grid).bytes_reduce == 2 * 4 * 8 * 512 * 512 and cm.features(small, grid).launches == 2
    assert cm.features(small, clus).bytes_reduce == 0 and cm.features(small, clus).launches == 1
    wide, cluster = cm.plan_for("wgmma_persistent", 128, 256, 64, 4, 12), cm.plan_for("wgmma_cluster", 128, 256, 64,
                                                                                       4, 12)
    big = cm.Problem(4096, 4096, 4096)
    assert cm.features(big, cluster).bytes_l2 < cm.features(big, wide).bytes_l2


def test_stream_k_cuts_the_last_round_as_the_kernel_does():
    """Stream-K's busiest SM takes the whole rounds of tiles plus one k-slice of a tile of the partial round
    (`schedules.stream_k_cut`, the rule `triton_kernels.streamk.schedule` runs): at 133 tiles of 64 k-iterations, one
    round plus 64 / 8, where data-parallel tiles take two rounds; its fix-up moves the cut tile's S fp32 blocks."""
    from hgemm_common.schedules import MAX_SLICES, stream_k_cut
    prob = cm.Problem(128 * 133, 128, 4096)
    tma = cm.plan_for("triton_tma", 128, 128, 64, 4, 8)
    dp, sk = cm.features(prob, tma), cm.features(prob, replace(tma, schedule="stream_k"))
    assert stream_k_cut(133, 64, 132) == (132, 1, MAX_SLICES)
    assert dp.steps == 2 * 64 and sk.steps == 64 + 64 // MAX_SLICES and sk.rounds == 2
    assert sk.bytes_reduce == 2 * cm.PARTIAL_BYTES * 128 * 128 * MAX_SLICES
    # a partial round more than half full is not cut: the TMA kernel's walk, priced as such
    full = cm.Problem(128 * 200, 128, 4096)
    assert cm.features(full, replace(tma, schedule="stream_k")) == cm.features(full, tma)
    # fewer tiles than SMs: one program a slice, every tile cut
    few = cm.features(cm.Problem(128 * 6, 128, 4096), replace(tma, schedule="stream_k"))
    assert few.steps == 64 // MAX_SLICES and few.bytes_reduce == 2 * cm.PARTIAL_BYTES * 128 * 128 * 6 * MAX_SLICES


def test_a_pointer_kernels_loads_wait_together_on_the_ctas_an_sm_holds_at_once():
    """Per-element loads (B off TMA's alignment) wait on memory within a CTA, and CTAs resident together wait at
    once: a split that takes 63 tiles to two CTAs per SM keeps the busiest SM's loads but halves their term, where
    occupancy holds both; a plan held to one CTA per SM (its ring fills shared memory) gains nothing."""
    prob = cm.Problem(4, 3978, 5571, "NT", "---")
    two, four = (cm.plan_for("triton_splitk", 16, 64, 128, 4, 4, s) for s in (2, 4))
    assert cm.occupancy(four, cm.H100) >= 2 and cm.cdiv(3978, 64) * 4 <= 2 * cm.H100.sms
    f2, f4 = cm.features(prob, two), cm.features(prob, four)
    assert f4.steps == f2.steps and f4.loads == pytest.approx(f2.loads / 2)
    big = [cm.plan_for("triton_splitk", 16, 64, 512, 12, 4, s) for s in (2, 4)]  # 12 x 80 x 512 x 2 bytes per ring
    assert cm.occupancy(big[1], cm.H100) == 1
    assert cm.features(prob, big[1]).loads == pytest.approx(cm.features(prob, big[0]).loads)
    assert cm.features(prob, cm.plan_for("triton_tma", 128, 128, 64, 4, 8)).loads == 0


def test_plans_refuse_what_they_cannot_be():
    with pytest.raises(HgemmValueError, match="schedule"):
        cm.Plan("triton_tma", 128, 128, 64, schedule="waves")
    with pytest.raises(HgemmValueError, match="unknown kernel"):
        cm.plan_for("nope", 128, 128, 64)
    with pytest.raises(HgemmValueError, match="M, N, K >= 1"):
        cm.Problem(0, 4, 4)
    assert cm.plan_for("triton_splitk", 16, 64, 128, 4, 4, 1).schedule == "data_parallel"
    assert cm.plan_for("triton_splitk", 16, 64, 128, 4, 4, 2).isa == "mma"
    assert cm.plan_for("triton_gemv", 1, 32, 256).isa == "fma"


TRUE = {"triton_tma": cm.KernelParams(eff=0.62, mem_eff=0.7, l2_eff=1.4, launch_us=5.0, tile_us=2.0, kiter_us=0.02),
        "triton_splitk.mma": cm.KernelParams(eff=0.4, mem_eff=0.55, l2_eff=1.0, launch_us=4.0, tile_us=1.5,
                                             kiter_us=0.05),
        "triton_gemv": cm.KernelParams(eff=0.3, mem_eff=0.8, l2_eff=1.0, launch_us=2.5, tile_us=0.8, kiter_us=0.01)}


def synthetic(seed=3, count=250, noise=0.03, outliers=0.03, bias=None):
    """Records the model makes with TRUE's parameters on a random-suite draw, each time times lognormal noise, a
    few of them three times too slow (disturbed timings); `bias`: (bin key, factor) applied to one bin."""
    rng = random.Random(seed)
    params = cm.Params(kernels=TRUE)
    out = []
    for i, (m, n, k, layout) in enumerate(random_shapes(seed, count)):
        prob = cm.Problem(m, n, k, layout)
        plans = [cm.plan_for("triton_tma", 128, 256, 64, 3, 8), cm.plan_for("triton_tma", 128, 128, 64, 4, 8),
                 cm.plan_for("triton_tma", 64, 128, 128, 4, 4)]
        if m <= 64:
            plans += [cm.plan_for("triton_splitk", 16, 64, 128, 4, 4, s) for s in (2, 4, 8)]
        if m == 1:
            plans.append(cm.plan_for("triton_gemv", 1, 32, 256, 1, 4, 2))
        for plan in plans:
            s = cm.predict(prob, plan, params).seconds * math.exp(rng.gauss(0, noise))
            if rng.random() < outliers:
                s *= 3
            if bias and cm.correction_key(prob, plan) == bias[0]:
                s *= bias[1]
            out.append(cm.Record(prob, plan, s, f"{seed}/{i}"))
    return out


def test_fit_recovers_the_parameters_it_generated():
    recs = synthetic()
    params = cm.fit(recs)
    got = params.kernels["triton_tma"]
    assert got.eff == pytest.approx(TRUE["triton_tma"].eff, rel=0.05)
    assert got.mem_eff == pytest.approx(TRUE["triton_tma"].mem_eff, rel=0.08)
    assert got.launch_us == pytest.approx(TRUE["triton_tma"].launch_us, rel=0.25)
    q = params.about["quality"]
    assert q["all"]["median_abs_log_error"] < 0.04, q  # the noise's own median |log| is 0.02
    assert set(q["kernels"]) == {"triton_tma", "triton_splitk.mma", "triton_gemv"}
    picked = cm.choices(recs, replace(params, neighbours={}))  # with them each record would be its own nearest
    assert sum(chosen.seconds <= 1.1 * best.seconds for _, chosen, best in picked) >= 0.9 * len(picked)


def test_fit_learns_a_bin_correction_and_applies_it():
    key = "triton_tma/m4096/a"
    recs = synthetic(seed=4, count=300, outliers=0.0, bias=(key, 1.15))
    params = cm.fit(recs)
    assert params.corrections[key] == pytest.approx(math.log(1.15), abs=0.06)
    # a bin several times off its fit keeps only a bounded correction: the parameters, not a bin, carry a verdict
    far = cm.fit(synthetic(seed=4, count=300, outliers=0.0, bias=(key, 3.0)))
    assert far.corrections[key] == pytest.approx(cm.MAX_CORRECTION)
    prob = cm.Problem(4000, 4096, 4096)
    plan = cm.plan_for("triton_tma", 128, 256, 64, 3, 8)
    assert cm.correction_key(prob, plan) == key
    p = cm.predict(prob, plan, replace(params, neighbours={}))  # the bin alone (neighbours: the tests below)
    assert p.correction == pytest.approx(math.exp(params.corrections[key]))
    assert p.seconds == pytest.approx(cm.total(p.terms) * p.correction)


def test_neighbour_correction_is_the_distance_weighted_shrunk_mean_of_the_nearest_records_of_the_same_plan():
    plan = cm.plan_for("triton_tma", 64, 128, 128, 4, 4)
    prob = cm.Problem(1024, 2048, 512, "NT")  # log2: 10, 11, 9
    near = [(10, 11, 9, 0.5), (10.5, 11, 9, 0.4), (9.5, 11.2, 9, 0.6), (10, 10, 9.5, 0.3), (10, 11, 8, 0.7),
            (10, 11, 12.5, 0.9)]  # distances 0, 0.5, 0.7, 1.5, 1, 3.5
    params = cm.Params(neighbours={cm.neighbour_key(prob, plan): near + [(16, 16, 16, -2.0)]})  # too far (d > 5)
    w = [math.exp(-d / cm.NEIGHBOUR_SCALE) for d in (0, 0.5, 0.7, 1.5, 1, 3.5)]
    want = sum(wi * r[3] for wi, r in zip(w, near)) / (sum(w) + cm.NEIGHBOUR_PRIOR)
    assert cm.neighbour_correction(prob, plan, params) == pytest.approx(want)
    p = cm.predict(prob, plan, params)
    assert p.correction == pytest.approx(math.exp(want))
    assert p.seconds == pytest.approx(cm.total(p.terms) * p.correction)
    # at most NEIGHBOURS of them, the nearest: the farthest one is left out where the rows hold more
    crowd = cm.Params(neighbours={cm.neighbour_key(prob, plan): near + [(10, 11, 9, 0.5)] * (cm.NEIGHBOURS - 5)})
    assert cm.neighbour_correction(prob, plan, crowd) < want
    # only the same plan on the same layout, alignment and accumulation; nothing far from every record
    assert cm.neighbour_correction(replace(prob, layout="NN"), plan, params) == 0.0
    assert cm.neighbour_correction(replace(prob, align="-tt"), plan, params) == 0.0
    assert cm.neighbour_correction(prob, cm.plan_for("triton_tma", 64, 128, 128, 3, 4), params) == 0.0
    assert cm.neighbour_correction(cm.Problem(2, 2, 2, "NT"), plan, params) == 0.0
    # a lone record at the problem moves it by 1 / (1 + prior) of its residual, a farther one by less; a large
    # residual is clipped first
    at = cm.Problem(2 ** 15, 2 ** 16, 2 ** 16, "NT")
    lone = lambda row: cm.neighbour_correction(at, plan, cm.Params(neighbours={cm.neighbour_key(prob, plan): [row]}))
    assert lone((15, 16, 16, 0.4)) == pytest.approx(0.4 / (1 + cm.NEIGHBOUR_PRIOR))
    far = math.exp(-2 / cm.NEIGHBOUR_SCALE)
    assert lone((13, 16, 16, 0.4)) == pytest.approx(0.4 * far / (far + cm.NEIGHBOUR_PRIOR))
    assert lone((13, 16, 16, 0.4)) < lone((15, 16, 16, 0.4))
    assert lone((15, 16, 16, 3.0)) == pytest.approx(cm.MAX_NEIGHBOUR_CORRECTION / (1 + cm.NEIGHBOUR_PRIOR))


def test_measured_neighbours_learn_what_the_terms_miss_on_held_out_problems():
    """A region the terms cannot express (one tile much slower on NT problems with K under 2048, a copy's layout
    effect say): fitted on one draw, the neighbours carry it to another draw's problems in that region, and leave
    the rest alone."""
    plan = cm.plan_for("triton_tma", 64, 128, 128, 4, 4)

    def slow(rec):
        hit = rec.plan == plan and rec.problem.layout == "NT" and rec.problem.k < 2048
        return replace(rec, seconds=rec.seconds * 1.8) if hit else rec

    train = [slow(r) for r in synthetic(seed=4, count=400, outliers=0.0)]
    test = [slow(r) for r in synthetic(seed=5, count=200, outliers=0.0) if r.plan == plan]
    params = cm.fit(train)
    assert params.neighbours and cm.neighbour_key(test[0].problem, plan) in params.neighbours
    bare = replace(params, neighbours={})
    region = [r for r in test if r.problem.layout == "NT" and 256 <= r.problem.k < 1500]
    rest = [r for r in test if r.problem.layout == "NN"]
    assert len(region) >= 10 and len(rest) >= 10
    err = lambda recs, p: float(np.median(np.abs(cm.log_errors(recs, p))))
    assert err(region, params) < 0.5 * err(region, bare)
    assert err(rest, params) < err(rest, bare) + 0.02


def test_a_correction_bin_holds_the_residuals_of_one_parameter_set():
    # A pointer kernel fits separate parameters for A or B off TMA's alignment (".u"); a correction bin shared by
    # both would move one set's predictions by the other's residuals.
    plan = cm.plan_for("triton_blocked", 128, 128, 64, 4, 8)
    aligned, offset = cm.Problem(12000, 560, 272, align="ttt"), cm.Problem(12000, 280, 12552, align="oot")
    assert cm.param_key(plan, aligned) != cm.param_key(plan, offset)
    assert cm.correction_key(aligned, plan) != cm.correction_key(offset, plan)
    assert cm.correction_key(aligned, plan).startswith(cm.param_key(plan, aligned) + "/")
    # gluon_stream loads 16-byte vectors from rows TMA could describe, on-sector or not: only an operand TMA cannot
    # describe ("-") takes its other parameters
    stream = cm.plan_for("gluon_stream", 16, 128, 32, 1, 4, split=4)
    keys = {align: cm.param_key(stream, cm.Problem(8, 4096, 4096, align=align)) for align in ("ttt", "oot", "t-t",
                                                                                              "-o-")}
    assert keys == {"ttt": "gluon_stream.mma", "oot": "gluon_stream.mma", "t-t": "gluon_stream.mma.u",
                    "-o-": "gluon_stream.mma.u"}


def test_off_sector_reads_cost_the_fitted_factor_in_l2():
    """An operand read in place with rows off the 32-byte sectors ("o") counts its L2 bytes `sector` times; a staged
    copy of it does not (its rows are aligned); B's share grows as the tile gets shorter (64 rows: B read twice as
    often); a parameter file without the factor reads as 1 (no change)."""
    on, off_b = cm.Problem(1024, 7880, 4848, align="ttt"), cm.Problem(1024, 7880, 4848, align="tot")
    tall, short = cm.plan_for("triton_tma", 128, 256, 64, 3, 8), cm.plan_for("triton_tma", 64, 256, 64, 4, 4)
    f_on, f_off = cm.features(on, tall), cm.features(off_b, tall)
    assert f_on.bytes_l2_off == 0 and f_off.bytes_l2 == f_on.bytes_l2
    assert f_off.bytes_l2_off == 2 * 4848 * 8 * 7880 < f_off.bytes_l2  # B once per 128-row tile row (8 of them)
    assert cm.features(off_b, short).bytes_l2_off == 2 * f_off.bytes_l2_off
    assert cm.features(off_b, replace(tall, staged="B")).bytes_l2_off == 0
    assert cm.features(cm.Problem(1024, 7880, 4848, align="ott"), tall).bytes_l2_off == 2 * 4848 * 31 * 1024
    p1, p2 = cm.KernelParams(), cm.KernelParams(sector=2.0)
    l2 = {p: cm.terms(f_off, p)["l2"] for p in (p1, p2)}
    assert l2[p2] == pytest.approx(l2[p1] * (f_off.bytes_l2 + f_off.bytes_l2_off) / f_off.bytes_l2)
    assert cm.terms(f_on, p2)["l2"] == pytest.approx(cm.terms(f_on, p1)["l2"])
    old = cm.from_json({"kind": cm.KIND, "format": 1, "gpu": {}, "kernels": {"triton_tma": {"eff": 0.8}},
                        "corrections": {}, "about": {}})
    assert old.kernels["triton_tma"].sector == 1.0
    assert len(cm.LOG_BOUNDS) == len(cm.PARAM_NAMES) and cm.PARAM_NAMES[-1] == "sector"


def test_parameter_file_round_trips(tmp_path):
    params = cm.fit(synthetic(count=60))
    path = tmp_path / "model.json"
    cm.save(params, path)
    back = cm.load(path)
    data = json.loads(path.read_text())
    assert back.kernels == params.kernels and back.corrections == params.corrections and back.gpu == params.gpu
    assert back.neighbours.keys() == params.neighbours.keys() and params.neighbours
    key = next(iter(params.neighbours))
    assert all(isinstance(row, str) for row in back.neighbours[key])  # text until first looked up
    assert all(cm.neighbour_rows(back, key) == pytest.approx(rows) for key, rows in params.neighbours.items())
    assert all(isinstance(row, tuple) for row in back.neighbours[key])
    cm.save(back, tmp_path / "again.json")  # a loaded file saves as it was, parsed or not
    assert json.loads((tmp_path / "again.json").read_text())["neighbours"] == data["neighbours"]
    bad = dict(data, neighbours={key: ["1 2 3"]})
    (tmp_path / "bad_rows.json").write_text(json.dumps(bad))
    with pytest.raises(HgemmValueError, match="4 numbers"):
        cm.load(tmp_path / "bad_rows.json")
    late = cm.from_json(dict(data, neighbours={key: ["1 2 3 4", "1 2 x 4"]}))
    with pytest.raises(HgemmValueError, match="4 numbers"):
        cm.neighbour_rows(late, key)
    assert data["kind"] == cm.KIND and data["about"]["records"] == len(synthetic(count=60))
    (tmp_path / "bad.json").write_text(json.dumps({"kind": "something else", "format": 1}))
    with pytest.raises(HgemmValueError, match="not a tensorcore_hgemm cost model"):
        cm.load(tmp_path / "bad.json")
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(HgemmValueError, match="not JSON"):
        cm.load(tmp_path / "broken.json")


def test_records_round_trip_through_their_fields():
    prob, plan = cm.Problem(7, 300, 5000, "TN", "-tt", "bf16"), cm.plan_for("triton_splitk_tma", 16, 64, 128, 4, 4, 8)
    rec = cm.from_record({**json.loads(json.dumps(cm.record_fields(prob, plan))), "ms": 0.25, "case": "c"})
    assert rec == cm.Record(prob, plan, 0.25e-3, "c")


def test_rank_puts_the_split_first_where_tiles_leave_sms_idle():
    """16 x 4096 x 4096: 128-row tiles compute mostly padding and 32 tiles leave 100 SMs idle; the 16-row split-K
    plans rank first, the CUDA-core path (gemv) last, and the order is by predicted time."""
    prob = cm.Problem(16, 4096, 4096)
    plans = [cm.plan_for("triton_tma", 128, 128, 64, 4, 8), cm.plan_for("triton_gemv", 1, 32, 256, 1, 4, 2),
             cm.plan_for("triton_splitk", 16, 64, 128, 4, 4, 4), cm.plan_for("triton_splitk", 16, 64, 128, 4, 4, 2)]
    ranked = cm.rank(prob, plans)
    assert [p.kernel for _, p in ranked][:2] == ["triton_splitk", "triton_splitk"]
    assert ranked[-1][1].kernel == "triton_gemv"
    assert [x.seconds for x, _ in ranked] == sorted(x.seconds for x, _ in ranked)


def test_features_stack_into_arrays():
    probs = [cm.Problem(64 * i, 512, 1024) for i in range(1, 5)]
    plan = cm.plan_for("triton_tma", 128, 128, 64, 4, 8)
    f = cm.stack([cm.features(p, plan) for p in probs])
    t = cm.total(cm.terms(f, cm.KernelParams()))
    assert isinstance(t, np.ndarray) and np.allclose(t, [cm.predict(p, plan).seconds for p in probs])
