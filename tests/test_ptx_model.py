"""wgmma_persistent's planner by model (blocks/plan_model.cuh) and its fit (compare/ptx_model.py), on the CPU: the
fit recovers a model it did not see, the shipped parameters predict the sweeps they were fitted on, and the
launcher's C++ plans as the Python mirror does (compiled with nvcc)."""
import dataclasses
import json
import math
import random
import re
import subprocess

import numpy as np
import pytest

from compare import ptx_model as pm
from hgemm_common.errors import HgemmError
from compare.ptx_plans import plan_key
from ptx_kernels import toolchain
from ptx_kernels.call import MODEL_TERMS, PLAN_SOURCES

needs_nvcc = pytest.mark.skipif(toolchain.find_nvcc() is None, reason="needs nvcc")


def random_calls(count: int, seed: int) -> list[pm.Call]:
    """Calls as the random suite draws them (M log-uniform from 1, N and K from 64), in every alignment class."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        m, n, k = (int(math.exp(rng.uniform(math.log(lo), math.log(16384)))) for lo in (1, 64, 64))
        if rng.random() < 0.5:
            n, k = -(-n // 8) * 8, -(-k // 8) * 8
        lay = rng.choice(["NN", "NT", "TN"])
        a = 2 * (m if lay[0] == "T" else k)
        b = 2 * (k if lay[1] == "T" else n)
        staged = tuple(x for x, row in zip("AB", (a, b)) if row % 16)
        out.append(pm.Call(m, n, k, lay[0] == "T", -(-a // 128) * 128 if "A" in staged else a, lay[1] == "T",
                           -(-b // 128) * 128 if "B" in staged else b, n % 8 == 0, staged))
    return out


def test_fit_recovers_a_model_it_did_not_see():
    """Times made by the shipped model's parameters, moved by 3% noise and a few outliers (x1.6), on calls the
    sweeps never drew: the fit, from its own starting point, predicts them within a few percent and picks the
    plans the true model picks."""
    pytest.importorskip("scipy", reason="the fit needs scipy (pip install -e '.[fit]'; the test extra has it)")
    true_model, x_true = pm.from_header()
    rng = np.random.default_rng(1)
    calls = random_calls(120, seed=11)
    feats = [pm.features(c, key, 3.35e6) for c in calls for key in pm.priced(true_model, pm.candidates(c))]
    model = pm.Model(true_model.rates)
    table = model.table(feats)
    y = np.log(model.predict(x_true, table)) + rng.normal(0, 0.03, len(feats))
    y[rng.random(len(feats)) < 0.03] += math.log(1.6)
    x = pm.fit(model, table, y)
    held = [pm.features(c, key, 3.35e6) for c in random_calls(60, seed=12)
            for key in pm.priced(true_model, pm.candidates(c))]
    t = model.table(held)
    err = np.abs(np.log(model.predict(x, t) / model.predict(x_true, t)))
    assert np.median(err) < 0.03 and np.percentile(err, 90) < 0.10, (np.median(err), np.percentile(err, 90))
    same = []
    for c in random_calls(60, seed=12):
        t = model.table([pm.features(c, key, 3.35e6) for key in pm.priced(true_model, pm.candidates(c))])
        fitted, true = model.predict(x, t), model.predict(x_true, t)
        same.append(true[np.argmin(fitted)] <= 1.02 * true.min())  # the fit's pick, within 2% of the best's time
    assert sum(same) >= 0.9 * len(same), sum(same)


def test_shipped_parameters_predict_the_sweeps_they_were_fitted_on():
    """The header names the sweep files it was fitted on, they are in the tree, and its parameters predict their
    timed plans to a median within 6% (the fit's own figure is in docs/design/hopper.md)."""
    text = pm.HEADER.read_text()
    files = [pm.CSRC.parents[1] / f for f in re.findall(r"//   (compare/sweeps/\S+)", text)]
    assert files and all(f.exists() for f in files)
    model, x = pm.from_header()
    cases = pm.read(files[:2])
    _, feats, y = pm.rows_of(cases)
    err = np.abs(np.log(model.predict(x, model.table(feats))) - y)
    assert len(y) > 5000 and np.median(err) < 0.06, np.median(err)


def test_candidates_are_the_launchers_forms():
    """Cut and swapped tiles only in their one form (row-major A, C stored with TMA), the grid's split only with
    row-major A, cluster splits within a wave with >= 4 k-blocks a part, 128 x 192 on 128-byte rows, the cluster
    kernel only against B's rows off the 32-byte sectors with more than one band of 128-row tiles."""
    for c in random_calls(300, seed=5):
        keys = pm.candidates(c)
        codes = {code for kernel, code, split in keys if kernel == "wgmma_persistent" and split == 1}
        if c.a_col or not c.c_tma:
            assert not codes & set(range(7, 27))
        if c.a_col:
            assert not any(k[0] == "wgmma_splitk_grid" for k in keys)
        assert (4 in codes) == (c.a_row_bytes % 128 == 0 and c.b_row_bytes % 128 == 0)
        assert (5 in codes) == c.b_col
        for kernel, code, split in keys:
            if kernel == "wgmma_persistent" and split > 1 and code in pm.SPLIT_TILES:  # over a cluster
                assert -(-c.k // 64) >= 4 * split
                assert -(-c.m // 128) * -(-c.n // pm.SPLIT_TILES[code]) * split <= (132 if split == 2 else 120)
            elif kernel == "wgmma_persistent" and split > 1:  # a cut or swapped tile over the grid, where it runs
                bm, bn = pm.PLAN_TILES[code]
                assert ("wgmma_persistent", code, 1) in keys and -(-c.k // 64) >= 8 * split
                assert -(-c.m // bm) * -(-c.n // bn) * split <= 132
        assert (("wgmma_cluster", 0, 0) in keys) == (c.b_row_bytes % 32 != 0 and c.m > 128)


PROGRAM = r"""
#include <cstdio>
#include "blocks/plan_model.cuh"
int main() {
  hopper::ModelCall c;
  int a_col, b_col, c_tma;
  long long a_bytes, b_bytes;
  while (std::scanf("%d %d %d %d %d %lld %lld %d", &c.M, &c.N, &c.K, &a_col, &b_col, &a_bytes, &b_bytes, &c_tma)
         == 8) {
    c.a_col = a_col, c.b_col = b_col, c.a_row_bytes = a_bytes, c.b_row_bytes = b_bytes, c.c_tma = c_tma;
    c.sms = 132, c.wave2 = 132, c.wave4 = 120, c.cluster_slots = 66, c.hbm_bytes_per_us = 3.35e6;
    double us = 0.0;
    const hopper::Plan p = hopper::model_plan(c, &us);
    const int swap = p.swap ? (p.cut >= hopper::kPairFirstCode ? 2 : 1) : 0;  // 2: paired in clusters
    std::printf("%d %d %d %d %d %d %d %.9g\n", p.bm, p.bn, p.split, int(p.grid), swap, int(p.cluster), p.term, us);
  }
  return 0;
}
"""


def mirror(tmp_path, calls: list, header=None) -> list[tuple]:
    """hopper::model_plan, compiled (with `header` in place of the shipped fit where given), against
    compare.ptx_model with the same fit on `calls` (on an H100's HBM): the same plan, the same predicted time (but the
    staging copies') and the same deciding term. Returns each call's (plan key, term)."""
    src, exe = tmp_path / "model.cu", tmp_path / "model"
    src.write_text(PROGRAM)
    include = []
    if header is not None:  # found before csrc/blocks/plan_model_fit.h: plan_model.cuh includes it from the -I path
        (tmp_path / "fit" / "blocks").mkdir(parents=True)
        (tmp_path / "fit" / "blocks" / "plan_model_fit.h").write_text(header)
        include = [f"-I{tmp_path / 'fit'}"]
    subprocess.run([toolchain.find_nvcc(), "-std=c++17", "-O2", toolchain.ARCHS["sm_90a"], *include, f"-I{pm.CSRC}",
                    "-o", str(exe), str(src)], check=True, capture_output=True)
    lines = "".join(f"{c.m} {c.n} {c.k} {int(c.a_col)} {int(c.b_col)} {c.a_row_bytes} {c.b_row_bytes} {int(c.c_tma)}\n"
                    for c in calls)
    out = subprocess.run([str(exe)], input=lines, capture_output=True, text=True, check=True).stdout.split("\n")
    fit = pm.HEADER if header is None else tmp_path / "fit" / "blocks" / "plan_model_fit.h"
    model, x = pm.from_header(fit)
    got = []
    for c, line in zip(calls, out):
        *plan, term, us = line.split()
        keys = pm.priced(model, pm.candidates(c))
        unstaged = dataclasses.replace(c, staged=())  # the staging copies cost every plan alike: C++ leaves them out
        table = model.table([pm.features(unstaged, k, 3.35e6) for k in keys])
        times = model.predict(x, table)
        best = int(np.argmin(times))
        assert plan_key(*map(int, plan)) == keys[best], (c, plan, keys[best])
        assert float(us) == pytest.approx(float(times.min()), rel=1e-6)
        assert MODEL_TERMS[int(term)] == model.decided(x, table)[best], (c, term)
        assert pm.decision(unstaged, 3.35e6, fit) == (keys[best], MODEL_TERMS[int(term)])
        got.append((keys[best], MODEL_TERMS[int(term)]))
    return got


@needs_nvcc
def test_launcher_plans_as_the_python_mirror(tmp_path):
    """hopper::model_plan, compiled, against compare.ptx_model on 400 random calls (`mirror`), every kind of plan
    among them, decided by several terms."""
    got = mirror(tmp_path, random_calls(400, seed=7))
    kinds = {k[0] if k[0] != "wgmma_persistent" else ("split" if k[2] > 1 else "tile") for k, _ in got}
    assert kinds == {"tile", "split", "wgmma_splitk_grid", "wgmma_cluster"}, kinds
    assert len({term for _, term in got}) >= 3  # the calls are decided by several terms, not one


@needs_nvcc
def test_whole_boxes_offer_neither_pairs_nor_cluster_splits(tmp_path):
    """On whole 64-wide boxes (N and K multiples of 64) the model's menu leaves out the paired tiles and the splits
    over a cluster, in compare.ptx_model.candidates and in hopper::model_plan alike (`mirror` on 120 such calls of a
    few 128-row bands, where the launcher's model plans them); 8 columns off the boxes both are on offer again."""
    rng = random.Random(11)
    calls = []
    for _ in range(120):
        m, n, k = rng.randrange(129, 512), 64 * rng.randrange(8, 290), 64 * rng.randrange(8, 290)
        b_col = rng.random() < 0.5
        calls.append(pm.Call(m, n, k, False, 2 * k, b_col, 2 * (k if b_col else n), True))
    for c in calls:
        for kernel, code, split in pm.candidates(c):
            assert code not in pm.PAIR_TILES and not (code in pm.SPLIT_TILES and split > 1), (c, code, split)
    got = mirror(tmp_path, calls)
    assert len({k for k, _ in got}) >= 10  # many plans: cut, swapped and grid-split tiles among them
    off = pm.Call(200, 4104, 4096, False, 2 * 4096, False, 2 * 4104, True)
    keys = pm.candidates(off)
    assert any(code in pm.PAIR_TILES for _, code, _ in keys) and ("wgmma_persistent", 1, 2) in keys


@needs_nvcc
def test_cut_tiles_split_over_the_grid_only_where_the_fit_prices_them(tmp_path):
    """The cut and swapped tiles split over the grid inside wgmma_persistent are offered only where the fit has a
    grid split's figure for the tile: a header without those figures drops them (`priced`); with the shipped fit,
    which has them, the compiled launcher and the Python mirror plan alike (`mirror`), and take them on long-K
    outputs whose cut tiles leave SMs idle (208 x 2864 x 17744 NT: 23 swapped 208 x 128 tiles), on rows on the
    32-byte sectors and off them (the cut tiles' offers do not ask for the sectors: the model prices them)."""
    long_k = pm.Call(208, 2864, 17744, False, 2 * 17744, True, 2 * 17744, True)
    off = pm.Call(176, 5048, 24072, False, 2 * 24072, True, 2 * 24072, True)  # A's and B's rows off the sectors
    split_keys = [k for k in pm.candidates(long_k) if k[1] >= pm.CUT_FIRST_CODE and k[2] > 1]
    assert ("wgmma_persistent", min(pm.SWAP_TILES) + 3, 5) in split_keys  # 208 x 128 swapped, 5 parts
    text = pm.HEADER.read_text()
    cut = {(bm, bn, int(code in pm.SWAP_TILES)) for code, (bm, bn) in pm.PLAN_TILES.items()
           if code >= pm.CUT_FIRST_CODE}
    rows = [(row, (int(bm), int(bn), int(sw)))
            for row, bm, bn, sw in re.findall(r"(\n    \{2, (\d+), (\d+), (\d), [-+.\deE]+\})", text)]
    priced_rows = [row for row, tile in rows if tile in cut]
    assert priced_rows, "the shipped fit prices no cut tile split over the grid"
    bare = text
    for row in priced_rows:
        bare = bare.replace(row, "")
    (tmp_path / "bare.h").write_text(bare)
    assert not set(pm.priced(pm.from_header(tmp_path / "bare.h")[0], split_keys))
    model, _ = pm.from_header()
    assert set(pm.priced(model, split_keys))
    calls = random_calls(200, seed=8) + [long_k, off, pm.Call(152, 1112, 27008, False, 2 * 27008, False, 2 * 1112, True)]
    got = mirror(tmp_path, calls)
    chosen = [k for k, _ in got if k[1] >= pm.CUT_FIRST_CODE and k[2] > 1]
    assert got[-3][0] in split_keys and chosen, (got[-3], chosen)
    assert got[-2][0][1] >= pm.CUT_FIRST_CODE and got[-2][0][2] > 1, got[-2]


def test_plan_sources_name_the_launchers_codes():
    """last_launch()["plan"] names LaunchInfo::plan by PlanSource's codes (csrc/hgemm.cuh) and the model's terms by
    hopper::ModelTerm's (blocks/plan_model.cuh): the Python names stand in the C++ enums' order."""
    hgemm_h = (pm.CSRC / "hgemm.cuh").read_text()
    assert re.search(r"kPlanUnreported = 0, kPlanPinned = 1, kPlanRule = 2, kPlanModel = 3 \}", hgemm_h)
    assert PLAN_SOURCES[:3] == (None, "pinned", "rule")
    enum = re.search(r"enum ModelTerm : int \{([^}]*)\}", (pm.CSRC / "blocks" / "plan_model.cuh").read_text())
    names = re.findall(r"kTerm(\w+)", enum.group(1))
    assert [n.lower() for n in names] == list(MODEL_TERMS), names


def test_a_sweep_of_an_unknown_gpu_is_refused_by_name(tmp_path):
    """The fit prices HBM by the sweep's GPU: one it has no figure for gets a one-line error naming it."""
    f = tmp_path / "s.jsonl"
    f.write_text(json.dumps({"type": "run", "environment": {"gpu": "NVIDIA X1"}}) + "\n" + json.dumps(
        {"type": "candidate", "case": "c", "side": "ptx", "status": "ok", "torch_ms": 1.0, "ms": 1.0,
         "problem": {"m": 8, "n": 8, "k": 8, "layout": "NN", "align": "ttt", "acc": "fp32"},
         "call": {"kernel": "wgmma_persistent", "tile": 1, "split": 1, "ran": "wgmma_persistent"}}) + "\n")
    with pytest.raises(HgemmError, match="NVIDIA X1"):
        pm.read([f])


def test_whole_boxes_line_splits_the_held_out_cases_by_m():
    """`--cv`'s line for the held-out whole 64-wide boxes: geomeans of the model's and the rule's time over the
    fastest over all of them, then per M band (up to one 128-row tile, up to four, more), bands with no case left
    out; a case on a band's edge counts in the lower band."""
    boxes = [(64, 1.0, 1.21), (128, 1.0, 1.0), (512, 1.21, 1.0), (4096, 1.1, 1.0)]
    line = pm.boxes_line(boxes)
    assert line.startswith("of them whole 64-wide boxes, where the launcher keeps the rule but for its grid "
                           "splits and part-filled bands (4): model 1.0741, rule 1.0488;"), line
    assert "0 < M <= 128 (2): model 1.0000, rule 1.1000" in line, line
    assert "128 < M <= 512 (1): model 1.2100, rule 1.0000" in line and "M > 512 (1): model 1.1000" in line, line
    assert "M > 512" not in pm.boxes_line(boxes[:2]) and "128 < M" not in pm.boxes_line(boxes[:2])


def test_show_lists_a_cases_timed_plans_with_the_shipped_fits_predictions():
    """--show: per case whose name holds the text, torch.matmul's time, then the timed plans the launcher's model may
    take, fastest measured first, each with the shipped fit's prediction and the log of their ratio (the sum of the
    model's terms, pm.Model.predict), and the fit's pick: the plan predicted fastest."""
    cases = pm.read([pm.CSRC.parents[1] / "compare" / "sweeps" / "h200-suites-fp16-ptx.jsonl.gz"])
    lines = pm.show(cases, "256x4096x4096/NN")
    assert lines[0].startswith("0/12/256x4096x4096/NN/fp16/fp32: torch.matmul "), lines
    rows = [line for line in lines[1:] if "measured" in line]
    measured = [float(line.split("measured")[1].split()[0]) for line in rows]
    assert len(rows) >= 5 and measured == sorted(measured), lines
    model, x = pm.from_header()
    case = cases["0/12/256x4096x4096/NN/fp16/fp32"]
    key = ("wgmma_persistent", 3, 1)
    us = model.predict(x, model.table([pm.features(case["call"], key, case["hbm"])]))[0]
    line = next(r for r in rows if r.lstrip().startswith(str(key)))
    assert f"predicted {us:8.1f}" in line and f"log {math.log(us / (case['ms'][key] * 1e3)):+.3f}" in line, line
    assert lines[-1] == f"  the fit picks {pm.pick(case['call'], case['hbm'])}", lines
    assert pm.show(cases, "no such shape") == []
