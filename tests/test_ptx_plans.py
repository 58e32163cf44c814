"""compare.ptx_plans: the pinned tiles' speeds and the rule's plans judged on PTX sweep records (no GPU)."""
import json

import pytest

from compare import ptx_model, ptx_plans, sweep
from ptx_kernels import toolchain
from ptx_kernels.variants import CSRC

needs_nvcc = pytest.mark.skipif(toolchain.find_nvcc() is None, reason="needs nvcc")


def record(case, m, n, k, layout, kernel, tile, split, ms, ran=None):
    return {"type": "candidate", "case": case, "side": "ptx", "status": "ok", "torch_ms": 1.0, "ms": ms,
            "problem": {"m": m, "n": n, "k": k, "layout": layout, "acc": "fp32"},
            "call": {"kernel": kernel, "tile": tile, "split": split, "ran": ran or kernel}}


def test_tile_speeds_are_per_output_at_equal_fill(tmp_path):
    """On 8288 x 848 (not skinny, 25 GFLOP at K = 1816): 128 x 256 makes 65 x 4 = 260 tiles (2 rounds of 132) over
    1024 columns, 128 x 144 65 x 6 = 390 (3 rounds) over 864. Times in the ratio of those fills make the
    speed 1; a 128 x 144 twice as slow makes it 0.5; a skinny case and the fp16-accumulation records count nowhere."""
    f = tmp_path / "s.jsonl"
    wide_fill, cut_fill = ptx_plans.fill(8288, 848, 128, 256), ptx_plans.fill(8288, 848, 128, 144)
    recs = [record("a", 8288, 848, 1816, "NT", "wgmma_persistent", 1, 1, 1.0),
            record("a", 8288, 848, 1816, "NT", "wgmma_persistent", 7, 1, wide_fill / cut_fill),
            record("b", 8288, 848, 1816, "NT", "wgmma_persistent", 1, 1, 1.0),
            record("b", 8288, 848, 1816, "NT", "wgmma_persistent", 7, 1, 2 * wide_fill / cut_fill),
            record("c", 64, 848, 1816, "NT", "wgmma_persistent", 1, 1, 1.0),
            record("c", 64, 848, 1816, "NT", "wgmma_persistent", 7, 1, 9.0)]
    fp16 = record("d", 8288, 848, 1816, "NT", "wgmma_persistent", 7, 1, 9.0)
    fp16["problem"]["acc"] = "fp16"
    f.write_text("".join(json.dumps(r) + "\n" for r in recs + [fp16]))
    assert wide_fill == pytest.approx(260 / 264 * 848 / 1024) and cut_fill == pytest.approx(390 / 396 * 848 / 864)
    speeds = ptx_plans.tile_speeds(ptx_plans.read_cases([f]))
    assert speeds == {7: (2, pytest.approx(0.5 ** 0.5))}


def test_pair_stats_weigh_each_pair_against_its_tile_unpaired(tmp_path):
    """pair_stats: only cases that time a pair count; a pair's speed is the same tile unpaired over it at the same
    split (a pair split in 3 against the tile unpaired in 3, not whole); the fastest plan x torch.matmul with the pairs
    and without them; the own plan (tile 0) is no pinned plan."""
    f = tmp_path / "s.jsonl"
    pair, single = sweep.PAIR_FIRST_CODE + 1, sweep.SWAP_FIRST_CODE + 1
    recs = [record("a", 312, 7032, 6248, "NN", "wgmma_persistent", 0, 0, 0.1),
            record("a", 312, 7032, 6248, "NN", "wgmma_persistent", 1, 1, 1.5),
            record("a", 312, 7032, 6248, "NN", "wgmma_persistent", single, 1, 2.0),
            record("a", 312, 7032, 6248, "NN", "wgmma_persistent", pair, 1, 1.0),
            record("a", 312, 7032, 6248, "NN", "wgmma_persistent", single, 3, 2.5),
            record("a", 312, 7032, 6248, "NN", "wgmma_persistent", pair, 3, 1.25),
            record("b", 312, 7032, 6248, "NT", "wgmma_persistent", 1, 1, 1.0),
            record("b", 312, 7032, 6248, "NT", "wgmma_persistent", single, 1, 1.0),
            record("b", 312, 7032, 6248, "NT", "wgmma_persistent", pair, 1, 2.0),
            record("c", 312, 7032, 6248, "TN", "wgmma_persistent", 1, 1, 1.0)]
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    got = ptx_plans.pair_stats(ptx_plans.read_cases([f]))
    assert (got["cases"], got["fastest"], got["timings"]) == (2, 1, 3)
    assert got["speed"] == pytest.approx(2 ** (1 / 3))  # a: 2.0 / 1.0 and 2.5 / 1.25, b: 1.0 / 2.0
    assert (got["p10"], got["p90"]) == (pytest.approx(0.8), pytest.approx(2.0))  # numpy's linear percentiles
    assert got["x_torch_without"] == pytest.approx((1 / 1.5) ** 0.5)  # a: 1.5 without the pair; b: 1.0
    assert got["x_torch_with"] == pytest.approx(1.0)
    one = {k: v for k, v in ptx_plans.read_cases([f]).items() if k == "c"}
    assert ptx_plans.pair_stats(one) is None


def test_rules_compare_on_the_pinned_times_of_the_plans_they_make():
    """compare_rules: a case planned alike counts once as alike, a case whose own plan went to mma_stream too;
    a case planned differently compares the two plans' pinned times (grid split by width, cluster split by tile
    and split, unsplit by tile code)."""
    def case(own_ran, ms):
        return {"problem": {"m": 1, "n": 1, "k": 1, "layout": "NN"}, "torch_ms": 1.0, "ms": ms,
                "own": {"ran": own_ran}}
    cases = {"same": case("wgmma_persistent", {}),
             "stream": case("mma_stream", {}),
             "grid": case("wgmma_persistent", {("wgmma_persistent", 3, 1): 2.0, ("wgmma_splitk_grid", 2, 0): 1.0}),
             "cut": case("wgmma_persistent", {("wgmma_persistent", 1, 1): 1.0, ("wgmma_persistent", 7, 1): 1.25})}
    old = [(128, 256, 1, 0), (128, 256, 1, 0), (128, 64, 1, 0), (128, 256, 1, 0)]
    new = [(128, 256, 1, 0), (128, 144, 1, 0), (128, 128, 2, 1), (128, 144, 1, 0)]
    rows, alike, over = ptx_plans.compare_rules(cases, old, new)
    assert alike == 2 and [(r[0], r[1]) for r in rows] == [(2.0, "grid"), (0.8, "cut")]
    assert over == [(2.0, 1.0), (1.0, 1.25)]  # each plan's time over the case's fastest pinned plan
    assert ptx_plans.plan_key(128, 128, 2, 0) == ("wgmma_persistent", 2, 2)


@needs_nvcc
def test_the_rule_program_plans_as_the_launcher(tmp_path):
    """The rule compiled on the CPU (compare.ptx_plans.RULE_PROGRAM, the model left out) against this tree's
    headers: 128 x 144 on
    8288 x 848 x 1824 with B column-major, no cut tile of partial boxes with B row-major (a swapped one: B' = A^T
    is column-major); the grid split on 192 x 3232 x 16760; 128 x 176 swapped on 4504 x 608 x 3776 (its plan key
    the swapped code, C's tile 176 x 128), and not where A's rows are off the 32-byte sectors (K = 3768);
    4096 x 4096 x 4104 NT (B's rows 8,208 bytes apart) on 128 x 256 tiles handed to wgmma_cluster, and not
    32 x 28648 x 360 NT (one band of tile rows)."""
    plans = ptx_plans.rule_plans([(8288, 848, 1824, "NT"), (8288, 848, 1824, "NN"), (192, 3232, 16760, "NN"),
                                  (4504, 608, 3776, "NN"), (4504, 608, 3768, "NT"), (4096, 4096, 4104, "NT"),
                                  (32, 28648, 360, "NT")],
                                 CSRC, tmp_path, model=False)
    partial_boxes = {t for t in sweep.CUT_TILES.values() if t[1] % 64}
    assert plans[0] == (128, 144, 1, 0, 0, 0) and (plans[1][:2] not in partial_boxes or plans[1][4])
    assert plans[2][3] == 1 and plans[2][2] > 1
    assert plans[3] == (128, 176, 1, 0, 1, 0) and not plans[4][4]
    code = ptx_plans.plan_key(*plans[3])[1]
    assert ptx_plans.TILES[code] == (176, 128) and code in ptx_plans.SWAP_TILES
    assert plans[5] == (128, 256, 1, 0, 0, 1) and ptx_plans.plan_key(*plans[5]) == ("wgmma_cluster", 0, 0)
    assert plans[6][5] == 0


@needs_nvcc
def test_the_rule_program_plans_by_the_model_where_the_launcher_does(tmp_path):
    """With the model (blocks/plan_model.cuh), the program prints its plans for row-major A where N or K is not a
    multiple of 64 and on whole boxes the rule splits over the grid (hopper::model_plans), and the rule's for
    column-major A and the other whole boxes, as launch_wgmma_persistent takes them: on 200 x 8200 x 8192 (33 x 2
    tiles of 128 x 256) the model splits K, as its Python mirror does on the H200's HBM; 4096 x 4096 x 4104 TN,
    3000 x 5000 x 2000 TT and 256 x 4096 x 4096 NN keep the rule's plans; 512 x 512 x 16384 NN, which the rule
    splits over the grid, and 160 x 3584 x 8192 NN, whose M part-fills its second 128-row band, take the mirror's
    plans."""
    shapes = [(200, 8200, 8192, "NT"), (4096, 4096, 4104, "TN"), (3000, 5000, 2000, "TT"), (256, 4096, 4096, "NN"),
              (512, 512, 16384, "NN"), (160, 3584, 8192, "NN")]
    with_model = ptx_plans.rule_plans(shapes, CSRC, tmp_path)
    rule = ptx_plans.rule_plans(shapes, CSRC, tmp_path, model=False)
    assert with_model[1:4] == rule[1:4] and rule[3][3] == 0
    call = ptx_model.Call(200, 8200, 8192, False, 2 * 8192, True, 2 * 8192, True)
    assert ptx_plans.plan_key(*with_model[0]) == ptx_model.pick(call, 4.8e6)
    assert with_model[0][2] > 1 or with_model[0][3] == 1
    assert rule[4][3] == 1  # the rule's grid split
    call = ptx_model.Call(512, 512, 16384, False, 2 * 16384, False, 2 * 512, True)
    assert ptx_plans.plan_key(*with_model[4]) == ptx_model.pick(call, 4.8e6) != ptx_plans.plan_key(*rule[4])
    assert ptx_model.part_filled_bands(160) and not ptx_model.part_filled_bands(256)
    assert not ptx_model.part_filled_bands(120) and not ptx_model.part_filled_bands(520)
    call = ptx_model.Call(160, 3584, 8192, False, 2 * 8192, False, 2 * 3584, True)
    assert rule[5][3] == 0  # the rule keeps K whole: the model plans for the band, not for a grid split
    assert ptx_plans.plan_key(*with_model[5]) == ptx_model.pick(call, 4.8e6) != ptx_plans.plan_key(*rule[5])
