"""The Gluon level (triton_kernels/gluon_persistent.py), and its stream-K mode (kernel "gluon_streamk"): what its
sm_90a compile holds, and the stream-K work list its partitions walk (run on the interpreter against
triton_kernels/streamk.py's), on the CPU; exact results, NaN-poisoned outputs, determinism and every layout, dtype
and configuration, on an H100.

Triton's interpreter cannot run Gluon, and the interpreter (on in this process when there is no GPU) replaces
@triton.jit helpers the kernel calls, so both halves run in child processes without TRITON_INTERPRET, each child a
share of the configurations (helpers.run_children): the CPU half compiles every instantiation there
(`_COMPILE_PROBE`); the GPU half runs every case there under a timeout (`_GPU_CASES`, `_STREAMK_GPU_CASES`): a
wrong mbarrier phase or expect_tx byte count hangs the kernel instead of failing it (TESTING.md 12), and a hung
child is killed and reported, where a hung test process would stall the whole suite.
"""
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import triton
import triton.language as tl

from compare.levels import code_lines, cuda_includes, source_lines
from helpers import run_children
from triton_kernels import gluon_persistent

ROOT = Path(__file__).resolve().parent.parent


def _child(code: str, timeout: int) -> dict:
    """Run `code` in one child Python without TRITON_INTERPRET (helpers.run_children); its last stdout line is JSON."""
    return run_children(code, timeout=timeout, parts=1)[0]


# ------------------------------------------------------------------------------------------------------------ CPU
# Every config in each of (fp16 fp32-acc, fp16 fp16-acc, bf16), each of those in a layout (A, B row- or
# column-major) that turns with the config, so that every (dtype, layout) pair is compiled somewhere, for sm_90a;
# SASS facts of each. The stream-K kernel (gluon_streamk: SPLIT_MODE STREAM_K) in two configurations, two consumers
# with the two-round epilogue and one consumer, their layouts turned by two so that its six compiles hold every
# dtype and every layout. (Every config runs in every dtype and layout on the GPU: the exact tests.)
_COMPILE_PROBE = """
import json, re, tempfile
from pathlib import Path
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from ptx_kernels import toolchain
from triton_kernels import gluon_persistent as g, gluon_streamk as gs

rows, failed = [], []
LAYOUTS = ((False, False), (False, True), (True, False), (True, True))  # (A, B) column-major
STREAMK = [gs.configs()[0], next(c for c in gs.configs() if c.block_m == 64)]
cases = [(i, c, f, False) for i, c in enumerate(g.configs()) for f in ((False, True) if c.split_k > 1 else (None,))]
cases += [(2 * n, c, None, True) for n, c in enumerate(STREAMK)]
for i, cfg, fused, streamk in cases[PART::PARTS]:  # this child's share (helpers.run_children)
    for j, (dtype, acc) in enumerate((("fp16", "fp32"), ("fp16", "fp16"), ("bf16", "fp32"))):
        a_t, b_t = LAYOUTS[(i + j) % 4]
        fn, sig, consts, attrs = (gs.inspect_source(cfg, dtype, a_t, b_t) if streamk else
                                  g.inspect_source(cfg, dtype, a_t, b_t, fused))
        consts["ACC_FP16"] = acc == "fp16"
        for name in consts:
            sig.setdefault(name, "constexpr")
        try:
            k = triton.compile(GluonASTSource(fn, sig, consts, attrs), target=GPUTarget("cuda", 90, 32),
                               options=g.compile_options(cfg))
        except Exception as e:  # noqa: BLE001 - reported by name
            failed.append([cfg.name, dtype, acc, a_t, b_t, f"{type(e).__name__}: {str(e)[:300]}"])
            continue
        sass = k.asm["sass"]
        with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
            f.write(k.asm["cubin"])
        usage = next(iter(toolchain.cubin_resource_usage(Path(f.name)).values()))
        Path(f.name).unlink()
        mix = toolchain.instruction_mix(sass)
        swap = g.swapped(cfg) and not streamk
        rows.append(dict(config=i, dtype=dtype, acc=acc, a_t=a_t, b_t=b_t, block_m=g.kernel_tile(cfg).block_m,
                         split=cfg.split_k, fused=fused and not swap, streamk=streamk, swapped=swap,
                         short=cfg.block_m, epi_split=cfg.epilogue_split,
                         atoms=len(re.findall(r"atom\\.global\\.gpu\\.acq_rel", k.asm["ptx"])),
                         mix={op: mix.get(op, 0) for op in ("HGMMA", "UTMALDG", "UTMASTG", "SYNCS",
                                                            "USETMAXREG", "BAR", "LDL", "STL", "LDGSTS",
                                                            "STG")},
                         hgmma=sorted(set(re.findall(r"HGMMA\\.[\\w.]+", sass))),
                         setmaxnreg=toolchain.setmaxnreg_targets(sass), shared=k.metadata.shared,
                         warps=k.metadata.num_warps, stack=usage.stack_bytes, spills=usage.spill_stores,
                         smem_design=g.smem_bytes(cfg, partial=cfg.split_k > 1)))
print(json.dumps(dict(rows=rows, failed=failed)))
"""


def _api_missing() -> str | None:
    """Why this Triton cannot build the Gluon kernel (its API is written for GLUON_TRITON_VERSIONS), or None."""
    import triton

    from triton_kernels.gluon_persistent import GLUON_TRITON_VERSIONS

    if triton.__version__.startswith(GLUON_TRITON_VERSIONS):
        return None
    return f"the Gluon kernel is written for triton {GLUON_TRITON_VERSIONS}, this is {triton.__version__}"


needs_api = pytest.mark.skipif(_api_missing() is not None, reason=str(_api_missing()))


@pytest.fixture(scope="module")
def compiles() -> dict:
    """The probe's rows and failures, its configurations compiled by several children side by side."""
    parts = run_children(_COMPILE_PROBE, timeout=1800)
    return dict(rows=[r for p in parts for r in p["rows"]], failed=[f for p in parts for f in p["failed"]])


@needs_api
def test_every_config_compiles_in_every_dtype_and_each_layout(compiles):
    from triton_kernels import gluon_persistent as g

    assert compiles["failed"] == []
    rows = [r for r in compiles["rows"] if not r["streamk"]]
    splits = sum(c.split_k > 1 for c in g.configs())
    assert splits and len(rows) == (len(g.configs()) + splits) * 3  # split-K: fused and two-pass
    pairs = {(r["dtype"], r["acc"], r["a_t"], r["b_t"]) for r in rows}
    assert len(pairs) == 3 * 4, sorted(pairs)  # every accumulation and dtype in every layout
    streamk = [r for r in compiles["rows"] if r["streamk"]]  # gluon_streamk: every dtype, every layout
    assert len(streamk) == 6 and {r["block_m"] for r in streamk} == {64, 128} and {2, 1} == {
        r["epi_split"] for r in streamk}
    assert len({(r["dtype"], r["acc"]) for r in streamk}) == 3 and len({(r["a_t"], r["b_t"]) for r in streamk}) == 4


@needs_api
def test_sass_holds_the_design(compiles):
    """wgmma (HGMMA), TMA loads (UTMALDG), mbarriers (SYNCS), the register split (USETMAXREG: the producer down to
    40; two consumers up to 232 on 128-row tiles, in 12 warps (consumer, consumer, producer warpgroups); one
    consumer up to 256 on 64-row tiles, in 8); the epilogue by TMA stores (UTMASTG, no STG), or, split-K, fp32
    partials by plain stores (STG, no UTMASTG), counted in by acq_rel atomics where the sum is fused (none in the
    two-pass form's partial kernel; a swapped tile's split-K is two-pass only); stream-K, both: TMA stores for whole
    tiles and the sums of cut ones, plain stores for the slices' fp32 partials, one acq_rel atomic per consumer
    warpgroup (each counts its own slab); swapped short tiles as wgmma of N = their 16 or 32 rows; no cp.async, no
    local memory (LDL/STL, stack, spills)."""
    assert {r["block_m"] for r in compiles["rows"]} == {64, 128}
    assert {(r["swapped"], r["block_m"]) for r in compiles["rows"]} == {(s, bm) for s in (0, 1) for bm in (64, 128)}
    assert {r["split"] > 1 for r in compiles["rows"]} == {False, True}
    for r in compiles["rows"]:
        mix = r["mix"]
        assert all(mix[op] > 0 for op in ("HGMMA", "UTMALDG", "SYNCS", "USETMAXREG")), r
        assert mix["LDL"] == mix["STL"] == mix["LDGSTS"] == 0 and r["stack"] == 0 and r["spills"] == 0, r
        if r["streamk"]:
            assert mix["STG"] > 0 and mix["UTMASTG"] > 0 and r["atoms"] == r["block_m"] // 64, r
        elif r["split"] > 1:
            assert mix["STG"] > 0 and mix["UTMASTG"] == 0 and (r["atoms"] > 0) == r["fused"], r
        else:
            assert mix["UTMASTG"] > 0 and mix["STG"] == 0 and r["atoms"] == 0, r
        if r["swapped"]:
            assert all(f.startswith(f"HGMMA.64x{r['short']}x16.") for f in r["hgmma"]), r
        if r["block_m"] == 128:
            assert {40, 232} <= set(r["setmaxnreg"]) and r["warps"] == 12, r
        else:
            assert {40, 256} <= set(r["setmaxnreg"]) and r["warps"] == 8, r


@needs_api
def test_tensor_core_forms_follow_dtype_and_accumulation(compiles):
    """bf16: HGMMA ...F32.BF16; fp16 with fp32 accumulation: ...F32 (no BF16); fp16 accumulation: ...F16."""
    for r in compiles["rows"]:
        forms = r["hgmma"]
        assert forms, r
        if r["dtype"] == "bf16":
            assert all(f.endswith(".F32.BF16") for f in forms), r
        elif r["acc"] == "fp16":
            assert all(f.endswith(".F16") for f in forms), r
        else:
            assert all(f.endswith(".F32") for f in forms), r


@needs_api
def test_shared_memory_within_the_device_limit(compiles):
    """The ring and the staging buffers (`smem_bytes`; split-K's partial kernel has none) plus the mbarriers fit an
    H100 block's 227 KB; `check_config` refuses a ring that would not, and tiles the kernel is not written for."""
    from triton_kernels import Config
    from triton_kernels.gluon_persistent import SMEM_LIMIT, check_config

    for r in compiles["rows"]:
        assert r["smem_design"] <= r["shared"] <= SMEM_LIMIT, r
        assert r["shared"] - r["smem_design"] < 1024, r  # the rest: mbarriers and the partitions' captures
    with pytest.raises(ValueError, match="shared memory"):
        check_config(Config(128, 256, 64, num_stages=5))
    with pytest.raises(ValueError, match="64 or 128 rows"):
        check_config(Config(256, 128, 64, num_stages=2))


@pytest.mark.parametrize("fused", [False, True], ids=["two-pass", "fused"])
def test_tile_rule_worked_cases(fused, monkeypatch):
    """`choose_config` (kernel="gluon" where neither a plan table nor the cost model names a configuration),
    wgmma_persistent's rule: large outputs keep 128 x 256; 1024^3 takes 128 x 64 (128 tiles fill a round of 132 SMs;
    128 x 128's 64 leave half idle); skinny outputs take the tile that fills a round, 64 rows where M <= 64 (or
    where 128-row tiles leave SMs idle at M = 128); with the fused split-K sum, 64 columns split in two K slices
    over 32 columns whole (decode-sized M); otherwise K splits only where even the best tile leaves more than half
    of the SMs idle; K long enough for every slice, the units (tiles x slices) within one round; every choice is a
    valid configuration of the list's tiles."""
    from triton_kernels import gluon_persistent
    from triton_kernels.gluon_persistent import check_config, choose_config, configs, split_slices

    monkeypatch.setattr(gluon_persistent, "FUSED", fused)
    decode = "64x64x64_w4_s12_g8_k2" if fused else "64x32x64_w4_s16_g8"

    tiles = {(c.block_m, c.block_n, c.num_stages, c.epilogue_split) for c in configs()}
    cases = {(4096, 4096, 4096): "128x256x64_w4_s4_g8_e2", (8192, 28672, 4096): "128x256x64_w4_s4_g8_e2",
             (1024, 1024, 1024): "128x64x64_w4_s8_g8", (2048, 2048, 2048): "128x256x64_w4_s4_g8_e2",
             (16, 4096, 4096): decode, (1, 4096, 4096): decode,
             (64, 8192, 8192): "64x64x64_w4_s12_g8", (128, 8192, 8192): "128x64x64_w4_s8_g8",
             (128, 4096, 4096): "64x64x64_w4_s12_g8", (512, 4096, 14336): "128x128x64_w4_s6_g8",
             (256, 256, 65536): "128x64x64_w4_s8_g8_k16", (128, 128, 131072): "64x32x64_w4_s16_g8_k16",
             (4096, 16, 4096): "64x32x64_w4_s16_g8_k2", (16, 4096, 256): "64x32x64_w4_s16_g8"}
    for (m, n, k), name in cases.items():
        cfg = choose_config(m, n, k, 132)
        assert cfg.name == name, (m, n, k, cfg.name)
        assert check_config(cfg) and (cfg.block_m, cfg.block_n, cfg.num_stages, cfg.epilogue_split) in tiles
        if cfg.split_k > 1:
            per, split = split_slices(k, cfg.split_k)
            assert split == cfg.split_k and per >= 4
            assert -(-m // cfg.block_m) * -(-n // cfg.block_n) * split <= 132
    assert split_slices(200, 8) == (1, 4) and split_slices(4096, 1) == (64, 1)  # no empty slice


def test_the_configurations_the_model_weighs_include_the_rules_choice():
    """`problem_configs` (what the sweep times and the cost model weighs) holds the rule's choice beside the listed
    configurations (tma_persistent.prune's: swapped tiles where one row of them covers M): a split of 16 that
    configs() does not list is among them where the rule takes it, once; and each swapped tile's K split where its
    tiles leave SMs idle (`swap_split`)."""
    from triton_kernels import gluon_persistent, tma_persistent
    from triton_kernels.common import problem_configs
    from triton_kernels.gluon_persistent import choose_config, configs, swapped

    for m, n, k in ((8, 293, 24568), (128, 128, 131072), (4096, 4096, 4096), (16, 4096, 256), (24, 6000, 4096)):
        got = problem_configs(gluon_persistent, m, n, k, 132)
        listed = tma_persistent.prune(configs(), m, n, k, 132)
        assert got.count(choose_config(m, n, k, 132)) == 1 and got[:len(listed)] == listed
        assert len(set(got)) == len(got)
        assert all(c.block_m >= m for c in got if swapped(c)) and (m > 32) == (not any(map(swapped, got)))
    assert choose_config(8, 293, 24568, 132).split_k == 16 and choose_config(8, 293, 24568, 132) not in configs()
    # 8 x 293 x 24568: 16 x 64 tiles make 5 tiles: 16 slices (80 units in one round); 16 x 128, 3 tiles: 16 (the
    # 32-row tiles are pruned: 16 rows cover M)
    splits = {(c.block_m, c.block_n): c.split_k for c in problem_configs(gluon_persistent, 8, 293, 24568, 132)
              if swapped(c) and c.split_k > 1}
    assert splits == {(16, 64): 16, (16, 128): 16}
    # 24 x 6000 x 4096: 47 tiles of 16 x 128 (two slices: 94 units), 94 of 16 x 64 (no split leaves a round)
    assert gluon_persistent.swap_split(configs()[9], 24, 6000, 4096, 132) is None
    assert gluon_persistent.swap_split(next(c for c in configs() if (c.block_m, c.block_n) == (32, 128)), 24, 6000,
                                       4096, 132).split_k == 2


def test_swapped_tiles_are_the_tma_kernels_and_checked():
    """The Gluon kernel's swapped short tiles: tma_persistent's `swapped` (fewer than 64 rows, at least 64
    columns), computed as the kernel tile of C^T (`kernel_tile`: C's columns its 64 or 128 rows, one consumer per
    64), stored by (block_m, 64) boxes, within shared memory; the cost model keeps their parameters apart
    (".swap"), and a stored plan runs one only where a row of its tiles covers M. gluon_streamk does not take
    them."""
    from hgemm_common import cost_model as cm
    from triton_kernels import Config, gluon_streamk
    from triton_kernels.gluon_persistent import (SMEM_LIMIT, c_box, check_config, configs, consumers, kernel_tile,
                                                 smem_bytes, swapped)

    short = [c for c in configs() if swapped(c)]
    assert {(c.block_m, c.block_n) for c in short} == {(16, 64), (16, 128), (32, 64), (32, 128)}
    for c in short:
        t = kernel_tile(c)
        assert (t.block_m, t.block_n, t.num_stages) == (c.block_n, c.block_m, c.num_stages) and check_config(c)
        assert c_box(c) == (c.block_m, 64) and consumers(c) == c.block_n // 64
        assert smem_bytes(c) <= SMEM_LIMIT - 1024
        plan = cm.plan_for("gluon_persistent", c.block_m, c.block_n, c.block_k, c.num_stages, split=c.split_k)
        assert cm.param_key(plan) == "gluon_persistent.swap" and plan.isa == "wgmma"
    for bad in (Config(16, 256, 64, num_stages=4), Config(16, 128, 32, num_stages=4),
                Config(32, 128, 64, num_stages=4, epilogue_split=2)):
        with pytest.raises(ValueError, match="swapped short tile"):
            check_config(bad)
    with pytest.raises(ValueError, match="64 or 128 rows"):
        gluon_streamk.check_config(short[0])
    with pytest.raises(ValueError, match="64 or 128 rows"):
        check_config(Config(16, 32, 64, num_stages=4))  # short both ways: not swapped, and no tile of the kernel


@needs_api
def test_a_swapped_tile_compiles_as_its_launch_does_and_never_fused():
    """`inspect_source` of a swapped config builds what a launch on that layout builds: an NN call hands the kernel
    B^T and A^T, both column-major views (A_T, B_T) of a 16 x 128 kernel tile's transpose, stored transposed (C_T),
    a split two-pass even where FUSED asks otherwise; and the kernel refuses a swapped tile in the fused or stream-K
    modes at compile time (their sums store C unswapped)."""
    from triton_kernels import gluon_persistent as g

    swap_split = next(c for c in g.configs() if g.swapped(c) and c.split_k > 1)
    fn, sig, consts, attrs = g.inspect_source(swap_split, "fp16", False, False, fused=True)
    assert (consts["A_T"], consts["B_T"], consts["C_T"], consts["SPLIT_MODE"]) == (True, True, True, g.TWO_PASS)
    assert (consts["BLOCK_M"], consts["BLOCK_N"]) == (swap_split.block_n, swap_split.block_m)
    assert g.inspect_source(swap_split, "fp16", True, False)[2]["B_T"] is False  # column-major A: A^T row-major
    refused = _child(_SWAP_MODES_PROBE, timeout=600)
    assert len(refused) == 2 and all("a swapped tile stores whole or as two-pass partials" in e for e in refused)


_SWAP_MODES_PROBE = """
import json
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from triton_kernels import gluon_persistent as g

swap_split = next(c for c in g.configs() if g.swapped(c) and c.split_k > 1)
refused = []
for mode in (g.FUSED_SPLIT, g.STREAM_K):
    fn, sig, consts, attrs = g.inspect_source(swap_split, "fp16", mode=mode)
    for name in consts:
        sig.setdefault(name, "constexpr")
    try:
        triton.compile(GluonASTSource(fn, sig, consts, attrs), target=GPUTarget("cuda", 90, 32),
                       options=g.compile_options(swap_split))
    except Exception as e:  # noqa: BLE001 - the message is the result
        refused.append(f"{type(e).__name__}: {e}"[-2000:])
print(json.dumps(refused))
"""


@triton.jit
def _stream_k_walk(out_ptr, count_ptr, args_ptr, LANES, MAX_ITEMS: tl.constexpr, BLOCK: tl.constexpr):
    """Programs' stream-K work lists as the Gluon kernel's partitions walk them, one lane a program: lane i is
    program pid of a launch of `programs` programs over `tiles` tiles of `iters` k-blocks, SK_TILES of them cut
    into SLICES (args[i] = (pid, programs, tiles, SK_TILES, SLICES, iters)); `stream_k_items` items, item w
    `stream_k_item(w, ...)`: out[i, w] = (tile, j, parts, k_lo, k_hi), count[i] = the items."""
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mine = lane < LANES
    arg = args_ptr + lane * 6  # one load a field: a generator expression compiles only in the interpreter
    pid = tl.load(arg, mask=mine, other=1)
    programs = tl.load(arg + 1, mask=mine, other=1)
    tiles = tl.load(arg + 2, mask=mine, other=1)
    sk_tiles = tl.load(arg + 3, mask=mine, other=1)
    slices = tl.load(arg + 4, mask=mine, other=1)
    iters = tl.load(arg + 5, mask=mine, other=1)
    items = gluon_persistent.stream_k_items(pid, programs, tiles, sk_tiles, slices)
    tl.store(count_ptr + lane, items, mask=mine)
    for w in range(MAX_ITEMS):
        tile, j, parts, k_lo, k_hi = gluon_persistent.stream_k_item(w, pid, programs, sk_tiles, slices, iters)
        row = out_ptr + (lane * MAX_ITEMS + w) * 5
        keep = mine & (w < items)
        tl.store(row, tile, mask=keep)
        tl.store(row + 1, j, mask=keep)
        tl.store(row + 2, parts, mask=keep)
        tl.store(row + 3, k_lo, mask=keep)
        tl.store(row + 4, k_hi, mask=keep)


def kernel_walks(launches: list[tuple]) -> list[list[list[tuple[int, ...]]]]:
    """For each (tiles, iters, schedule), each program's items as the kernel walks them (`_stream_k_walk`, on the
    interpreter without a GPU), all in one launch."""
    import torch

    from conftest import DEVICE

    lanes = [(pid, s.programs, tiles, s.sk_tiles, s.slices, iters) for tiles, iters, s in launches
             for pid in range(s.programs)]
    max_items = max(1 + -(-tiles // s.programs) for tiles, _, s in launches)
    args = torch.tensor(lanes, dtype=torch.int32, device=DEVICE)
    out = torch.full((len(lanes), max_items, 5), -1, dtype=torch.int32, device=DEVICE)
    count = torch.full((len(lanes),), -1, dtype=torch.int32, device=DEVICE)
    block = 1024
    _stream_k_walk[(-(-len(lanes) // block),)](out, count, args, len(lanes), max_items, block)
    walks, i = [], 0
    for _, _, s in launches:
        walks.append([[tuple(x) for x in out[i + p, :n].tolist()] for p, n in
                      enumerate(count[i:i + s.programs].tolist())])
        i += s.programs
    return walks


def test_stream_k_walk_is_streamk_schedule():
    """gluon_streamk runs triton_streamk's schedule: its grid and cut (`streamk.schedule` on the configuration's
    tiles and k-blocks), and the work list the producer and the consumers walk (`stream_k_items`, `stream_k_item`,
    run here as the partitions call them) is program by program streamk.py's (`program_work`: its slice of a cut
    tile, then its data-parallel tiles), for every configuration's tile on many shapes and SM counts, cut (S = 2 to
    8, uneven slices, before and after whole rounds) or not. A slice item is slice pid % S of S, a whole tile its
    only part."""
    from triton_kernels import gluon_streamk, streamk
    from triton_kernels.common import cdiv

    cases = []
    for cfg, m, n, k, sms in itertools.product(gluon_streamk.configs(), (1, 136, 392, 1000), (264, 1000, 4096),
                                               (8, 520, 1096, 2120, 8192), (3, 7, 13, 132)):
        tiles, iters = cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n), cdiv(k, cfg.block_k)
        s = streamk.schedule(tiles, iters, sms)
        if tiles <= 16 * s.programs:  # (longer walks: more whole rounds, slow in the interpreter, nothing new)
            cases.append(((cfg.name, m, n, k, sms), (tiles, iters, s)))
    seen = set()
    for (where, (tiles, iters, s)), walk in zip(cases, kernel_walks([c for _, c in cases])):
        seen.add((s.slices, s.sk_tiles < tiles, iters % s.slices > 0))
        assert len(walk) == s.programs, where
        for pid, items in enumerate(walk):
            assert [(t, lo, hi) for t, _, _, lo, hi in items] == streamk.program_work(pid, s, tiles, iters), \
                (where, s, pid, items)
            for w, (_, j, parts, _, _) in enumerate(items):
                cut = w == 0 and pid < s.sk_tiles * s.slices
                assert (j, parts) == ((pid % s.slices, s.slices) if cut else (0, 1)), (where, s, pid, w)
    assert {n for n, _, _ in seen} == {1, *range(2, 9)}, sorted(seen)  # uncut, and every cut from 2 to 8
    assert {(True, True), (False, True)} <= {(whole, uneven) for n, whole, uneven in seen if n > 1}, sorted(seen)


def test_stream_k_record_is_sweep_only():
    """kernel="gluon_streamk": gluon_persistent's kernel (its stream-K mode) on gluon_persistent's tiles, each
    shape's deepest ring, never split (the schedule cuts K; a pinned split is refused); offered where
    gluon_persistent is, never timed or picked by kernel="auto" (`SWEEP_ONLY`, as triton_streamk), timed by the
    sweep where its widest tile's schedule cuts tiles (streamk.py's rule)."""
    from triton_kernels import Config, gluon_persistent as g, gluon_streamk as gs, streamk
    from triton_kernels.variants import GLUON, RECORDS

    rec = next(v for v in RECORDS if v.name == "gluon_streamk")
    assert rec.file == "gluon_streamk.py" and not rec.interpretable and rec.triton_versions == GLUON.triton_versions
    assert (rec.min_arch, rec.alignment, rec.misaligned, rec.dtypes) == (90, "tma", "copy", GLUON.dtypes)
    assert gs.SWEEP_ONLY and streamk.SWEEP_ONLY and gs.UNAVAILABLE == g.UNAVAILABLE
    assert [(c.block_m, c.block_n) for c in gs.configs()] == [(128, 256), (128, 128), (128, 64), (64, 256),
                                                              (64, 128), (64, 64), (64, 32)]
    assert all(c.split_k == 1 and c in g.configs() and gs.check_config(c) for c in gs.configs())
    with pytest.raises(ValueError, match=r"^hgemm\(kernel='gluon_streamk'\) config .*: split_k must be 1"):
        gs.check_config(next(c for c in g.configs() if c.split_k > 1))
    with pytest.raises(ValueError, match=r"^hgemm\(kernel='gluon_streamk'\) config .*: tiles are 64 or 128 rows"):
        gs.check_config(Config(256, 128, 64, num_stages=2))
    for m, n, k in ((200, 8192, 8192), (4096, 4096, 4096), (384, 384, 24576), (16, 4096, 256)):
        assert not gs.worth_timing(m, n, k, 132, True)
        assert gs.worth_scoring(m, n, k, 132, True) == streamk.worth_scoring(m, n, k, 132, True) == (
            streamk.schedule(-(-m // 128) * -(-n // 256), -(-k // 64), 132).sk_tiles > 0)
        assert not gs.worth_scoring(m, n, k, 132, False)


_LAUNCH_PROBE = """
import json, sys
sys.argv = ["launch_probe", "90"]
sys.path.insert(0, "tests")
import launch_probe as lp
from types import SimpleNamespace
from triton_kernels import gluon_persistent as g, gluon_streamk as gs, gluon_stream as gst

cfgs = g.configs()
split = next(c for c in cfgs if c.split_k > 1)
def split_form(fused):
    return SimpleNamespace(launches=lambda a, b, c, acc_fp16, cfg: g.launches(a, b, c, acc_fp16, cfg, fused=fused))

swap = next(c for c in cfgs if g.swapped(c) and c.split_k == 1)
swap_split = next(c for c in cfgs if g.swapped(c) and c.split_k > 1)
cases = [("gluon NN fp16 128x256", g, 200, 264, 520, "NN", "fp16", cfgs[0]),
         ("gluon NT fp16 swapped", g, 9, 520, 264, "NT", "fp16", swap),
         ("gluon TN bf16 swapped split-K", g, 16, 264, 4096, "TN", "bf16", swap_split),
         ("gluon TT bf16 64x32", g, 40, 72, 136, "TT", "bf16", next(c for c in cfgs if c.block_m == 64)),
         ("gluon NT fp16 split-K", split_form(True), 16, 256, 4096, "NT", "fp16", split),
         ("gluon NN bf16 split-K two-pass", split_form(False), 16, 256, 4096, "NN", "bf16", split),
         ("gluon_streamk NT fp16 128x256 cut", gs, 200, 264, 520, "NT", "fp16", gs.configs()[0]),
         ("gluon_streamk TN bf16 64x32 round+cut", gs, 264, 936, 1032, "TN", "bf16", gs.configs()[-1]),
         ("gluon_stream NN fp16 split-K", gst, 9, 520, 1000, "NN", "fp16", gst.choose_config(9, 520, 1000, 132)),
         ("gluon_stream TN bf16 odd", gst, 24, 61, 70, "TN", "bf16", gst.configs()[1])]
rows = []
for case in cases:
    rows += lp.run_case(*case)
print(json.dumps(rows))
"""


@needs_api
def test_direct_launch_hands_the_launcher_what_kernel_grid_does():
    """The dispatcher launches a Gluon plan's later calls directly (launch.py `Direct`), as it does the Triton
    kernels: tests/launch_probe.py's comparison (the installed Triton's own `kernel[grid]` path, only its C layer
    stood in for) on the Gluon kernel's kinds of launch (two consumers, one consumer, fused split-K with the
    stream's workspace and counts, two-pass split-K's partial kernel and the reduction after it, a swapped short
    tile whole and split (two-pass: its reduction writes C^T's partials into C), stream-K with the stream's
    workspace and slab counters, gluon_stream whole and split): element by element the same arguments, the same
    CUtensorMaps asked of the encoder on new addresses, none on repeated ones (the descriptor cache). Stream-K's
    grid is streamk.py's on
    an H100's 132 SMs: 4 tiles of 9 k-blocks in 2 slices each (8 programs); 150 tiles of 17, 18 of them in 4 slices
    before a whole round (132)."""
    rows = _child(_LAUNCH_PROBE, timeout=900)
    grids = {"gluon_streamk NT fp16 128x256 cut": 8, "gluon_streamk TN bf16 64x32 round+cut": 132}
    streams = {"gluon_stream NN fp16 split-K", "gluon_stream TN bf16 odd"}  # pointer loads: no descriptors
    assert {r["case"] for r in rows} == {"gluon NN fp16 128x256", "gluon TT bf16 64x32", "gluon NT fp16 split-K",
                                         "gluon NN bf16 split-K two-pass", "gluon NT fp16 swapped",
                                         "gluon TN bf16 swapped split-K", *grids, *streams}
    assert [r["case"] for r in rows if r["launch"] == 1] == (["gluon TN bf16 swapped split-K"] * 3
                                                             + ["gluon NN bf16 split-K two-pass"] * 3
                                                             + ["gluon_stream NN fp16 split-K"] * 3)  # reductions
    from triton_kernels import streamk

    assert tuple(streamk.schedule(4, 9, 132)) == (8, 4, 2) and tuple(streamk.schedule(150, 17, 132)) == (132, 18, 4)
    for r in rows:
        where = (r["case"], r["call"], r["launch"])
        assert r["direct"] == r["jit"] and r["jit"][3] == 0x5EED, where
        assert r["case"] not in grids or r["jit"][:3] == [grids[r["case"]], 1, 1], where
        assert r["direct_encoded"] == (r["jit_encoded"] if r["call"] < 2 else []), where
        assert r["lowered"] == r["descs"] == (3 if r["launch"] == 0 and r["case"] not in streams else 0), where


@needs_api
def test_compare_inspect_shows_it(tmp_path):
    """`python -m compare inspect gluon_persistent` compiles it (GluonASTSource) and reports its row."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    res = subprocess.run([sys.executable, "-m", "compare", "inspect", "--out", str(tmp_path), "gluon_persistent"],
                         cwd=ROOT, env=dict(env, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    row = json.loads((tmp_path / "inspect.json").read_text())["rows"][0]
    assert row["kernel"] == "gluon_persistent" and row["source"].startswith("triton_kernels/gluon_persistent.py")
    assert row["mix"]["HGMMA"] > 0 and row["mix"]["USETMAXREG"] > 0 and {40, 232} <= set(row["setmaxnreg"])


# scripts/sanitize_cases.py's warp_specialize probe, its variants in the Gluon kernel's partition layouts and
# hgemm_gluon_kernel (128 x 128, 4 stages), compiled for sm_90a: each one's entry protocol (`ws_entry`), the source
# lines of its parts, its warps and setmaxnreg registers, the probes' other shared-memory accesses and the probe's
# control's difference from it
_WS_ENTRY_PROBE = """
import ast, dataclasses, json, re, sys
from pathlib import Path
sys.path.insert(0, "scripts")
import sanitize_cases as sc
from triton_kernels.gluon_persistent import hgemm_gluon_kernel

def lines(fn):  # the kernel's file, its `def` line and its last statement's (where the lowering's code is placed)
    path = Path(fn.fn.__code__.co_filename)
    node = next(n for n in ast.walk(ast.parse(path.read_text()))
                if isinstance(n, ast.FunctionDef) and n.name == fn.fn.__name__)
    return str(path.resolve()), node.lineno, node.body[-1].lineno

rows = []
for name, compiled, warps in sc.ws_entry_compiles():
    sass = sc.sass_lines(compiled.asm["cubin"])
    e = sc.ws_entry(sass, warps)
    probe = compiled.metadata.name.startswith("ws_add")
    rows.append(dict(name=compiled.metadata.name, lines=lines(getattr(sc, compiled.metadata.name, hgemm_gluon_kernel)),
                     warps=compiled.metadata.num_warps, state=e.state, regs=[r for _, r in sc.setmaxnreg(sass)],
                     read=dataclasses.asdict(e.read), before=e.barrier_before_read.text,
                     writes=[dataclasses.asdict(w) for w in e.writes], after=[b.text for b in e.barriers_after_writes],
                     arrives=e.arrives, bar1=sum(bool(sc._FULL_BARRIER_1.match(sc.sass_op(s))) for s in sass),
                     smem=[s.text for s in sass if re.match(r"(LDS|STS|LDSM|STSM|ATOMS)\\b", sc.sass_op(s))],
                     bars=sorted({sc.sass_op(s) for s in sass if sc.sass_op(s).startswith("BAR.")}),
                     control=sc.ws_control_diff(compiled) if compiled.metadata.name == "ws_add_kernel" else None))
print(json.dumps(dict(rows=rows, layouts=[k for k, _ in sc.WS_LAYOUTS.values()], flat_regs=sc.WS_FLAT_REGS)))
"""


@needs_api
def test_warp_specialize_entry_is_ordered_by_barriers_of_every_thread():
    """Issue 48's racecheck reports on hgemm_gluon_kernel (a read at the kernel's entry, +0xf0, against writes at its
    `def` line and its last statement) are the warp_specialize lowering's own protocol, the same in the minimal probe
    sanitize.sh runs as "ws_probe": a worker warp reads its state byte (LDS.U8) after an all-thread barrier 1
    (BAR.SYNC 0x1, no thread count); the default warps store the states twice (the partition at the start, "exit" at
    the end), each store followed by the same barrier; no BAR.ARV. Those accesses carry the kernel's `def` line, and
    the exit store its last statement's: the lines the reports name. The probe touches shared memory nowhere else,
    and its control (barrier 0 for barrier 1) changes those barriers and nothing else. The probes in the Gluon
    kernel's layouts hold the same protocol: ws_add_gemm_kernel the 128-row kernel's warps and setmaxnreg sequence,
    ws_add_flat_kernel those warps with no worker's registers moved, ws_add_2w_kernel 12 warps of whole partitions,
    ws_add_1w_kernel the 64-row layout's 8 warps."""
    import re

    from triton_kernels.gluon_persistent import MAXNREG

    out = _child(_WS_ENTRY_PROBE, timeout=600)
    rows = {r["name"]: r for r in out["rows"]}
    assert set(rows) == {"ws_add_kernel", "hgemm_gluon_kernel", *out["layouts"]}
    # the file by its folder and name: a cubin from Triton's cache carries the path of the checkout that compiled
    # the same source first
    where = lambda file, line: (Path(file).parts[-2:], line)
    for name, r in rows.items():
        path, def_line, last_line = r["lines"]
        assert r["before"] == "BAR.SYNC.DEFER_BLOCKING 0x1", name
        assert len(r["writes"]) == 2 and r["after"] == ["BAR.SYNC.DEFER_BLOCKING 0x1"] * 2, (name, r["after"])
        assert r["arrives"] == 0, name
        assert where(r["read"]["file"], r["read"]["line"]) == where(path, def_line), (name, r["read"])
        assert [where(w["file"], w["line"]) for w in r["writes"]] == [where(path, def_line),
                                                                      where(path, last_line)], name
    for name, r in rows.items():  # a probe's shared memory: its worker warps' states, read and stored, alone
        if name.startswith("ws_add") and name != "ws_add_sync_kernel":
            offsets = [int(re.search(r"\+0x([0-9a-f]+)\]", t).group(1), 16) for t in r["smem"]]
            assert r["smem"].count(r["read"]["text"]) == 1 and all(
                t == r["read"]["text"] or (t.startswith("STS") and r["state"] <= o < r["state"] + r["warps"] - 4)
                for t, o in zip(r["smem"], offsets)), (name, r["smem"])
    gemm = rows["hgemm_gluon_kernel"]
    assert (rows["ws_add_gemm_kernel"]["warps"], rows["ws_add_gemm_kernel"]["regs"]) == (gemm["warps"], gemm["regs"])
    assert (rows["ws_add_2w_kernel"]["warps"], rows["ws_add_1w_kernel"]["warps"]) == (12, 8)
    assert {232, 40} <= set(rows["ws_add_2w_kernel"]["regs"]) and 40 in rows["ws_add_1w_kernel"]["regs"]
    flat = rows["ws_add_flat_kernel"]  # the default partition holds 256 throughout; the workers keep theirs
    assert flat["warps"] == 12 and set(flat["regs"]) == {out["flat_regs"], 256} and out["flat_regs"] == (
        MAXNREG * 384 - 256 * 128) // 256 // 8 * 8
    # ws_probe_sync: the partitions' own barriers, as the GEMM's (a bar.sync of 128 threads, the default
    # partition's on barrier 0), beside the protocol's barrier 1 of every thread
    sync = rows["ws_add_sync_kernel"]
    assert {"BAR.SYNC.DEFER_BLOCKING 0x0, 0x80", "BAR.SYNC.DEFER_BLOCKING 0x2, 0x80"} <= set(sync["bars"])
    assert "BAR.SYNC.DEFER_BLOCKING 0x0, 0x80" in gemm["bars"]
    probe = rows["ws_add_kernel"]
    assert sorted(probe["smem"]) == sorted([probe["read"]["text"]] + [w["text"] for w in probe["writes"]])
    n, diff = probe["control"]
    assert len(diff) == probe["bar1"] >= 4 and {tuple(d) for d in diff} == {
        ("BAR.SYNC.DEFER_BLOCKING 0x1", "BAR.SYNC.DEFER_BLOCKING 0x0")}, diff


_WS_RING_PROBE = """
import json, sys
sys.path.insert(0, "scripts")
import sanitize_cases as sc

rows = {}
for pattern, compiled in sc.ws_ring_compiles():
    sass = sc.sass_lines(compiled.asm["cubin"])
    e = sc.ws_entry(sass, 4)
    ops = [sc.sass_op(s) for s in sass]
    rows[pattern] = dict(warps=compiled.metadata.num_warps, shared=compiled.metadata.shared,
                         before=e.barrier_before_read.text, writes=len(e.writes),
                         after=[b.text for b in e.barriers_after_writes], arrives=e.arrives,
                         tma_loads=sum(o.startswith("UTMALDG") for o in ops),
                         tma_stores=sum(o.startswith("UTMASTG") for o in ops),
                         mbarrier_waits=sum(o.startswith("SYNCS.PHASECHK") for o in ops))
print(json.dumps(dict(rows=rows, rings=sc.WS_RINGS)))
"""


@needs_api
def test_ring_probes_add_the_gemms_pieces_to_the_same_protocol():
    """The racecheck probes that add the GEMM's own machinery one piece at a time (sanitize_cases.WS_RINGS) compile
    for sm_90a to the 64-row layout's 8 warps with warp_specialize's protocol unchanged (the state read after the
    all-thread barrier 1, two state stores each followed by it, no BAR.ARV), and each holds the piece its pattern
    names: mbarrier waits in all of them, TMA loads (UTMALDG) and stores (UTMASTG) where WS_RINGS says, and in
    "ws_probe_big" more than 200 KB of shared memory, as the GEMM's widest configurations take."""
    out = _child(_WS_RING_PROBE, timeout=600)
    rows, rings = out["rows"], out["rings"]
    assert set(rows) == set(rings) == {"ws_probe_mbar", "ws_probe_ld", "ws_probe_tma", "ws_probe_loop", "ws_probe_big"}
    for pattern, r in rows.items():
        tma_loads, tma_store, *_ = rings[pattern]
        assert r["warps"] == 8 and r["before"] == "BAR.SYNC.DEFER_BLOCKING 0x1", (pattern, r)
        assert r["writes"] == 2 and r["after"] == ["BAR.SYNC.DEFER_BLOCKING 0x1"] * 2 and r["arrives"] == 0, r
        assert r["mbarrier_waits"] > 0 and (r["tma_loads"] > 0) == tma_loads and (r["tma_stores"] > 0) == tma_store
    assert 200 * 1024 < rows["ws_probe_big"]["shared"] <= 227 * 1024 and rows["ws_probe_loop"]["shared"] < 64 * 1024


def test_record_offered_only_where_it_runs():
    """Under the interpreter (this process without a GPU) the record is left out with a one-line reason; compiled
    with triton 3.6 it is in VARIANTS as kernel="gluon_persistent" (or "gluon"), never timed by kernel="auto"; operands TMA cannot describe
    are copied first."""
    import triton

    from hgemm_common.validation import interpreter_active
    from triton_kernels import gluon_persistent as g
    from triton_kernels.variants import GLUON, NOT_OFFERED, VARIANTS

    assert GLUON.aliases == ("gluon",) and GLUON.min_arch == 90 and set(GLUON.dtypes) == {"fp16", "bf16"}
    assert GLUON.alignment == "tma" and GLUON.misaligned == "copy"  # staged by the dispatcher
    offered = GLUON in VARIANTS
    assert offered == (triton.__version__.startswith(g.GLUON_TRITON_VERSIONS) and not interpreter_active())
    assert offered or "\n" not in NOT_OFFERED[GLUON.name]
    assert not g.worth_timing(4096, 4096, 4096, 132, True)


def test_code_lines_skips_blanks_comments_and_docstrings():
    py = 'x = 1\n\n# note\ndef f():\n    """doc\n    more"""\n    return """not a docstring""" + s\n'
    assert code_lines(py, "python") == 3
    assert code_lines('def g():\n    """one line"""\n    pass\n', "python") == 2
    cu = "int a;  // trailing\n// whole line\n/* block\n   comment */\n\nint b; /* inline */ int c;\n"
    assert code_lines(cu, "cuda") == 2
    with pytest.raises(ValueError):
        code_lines("", "rust")


def test_measured_table_from_bench_csvs(tmp_path):
    """`python -m compare.levels --bench`: the three levels' rows of bench.csv files (fp32 accumulation), one line
    per shape, layout and dtype, a kernel that did not pass or was not timed shown as "-"."""
    from compare.levels import measured, measured_markdown

    head = "kernel,acc,m,n,k,layout,status,tflops,ratio_to_torch,dtype\n"
    rows = ["torch.matmul,fp32,16,4096,4096,NN,ok,30.0,1.0,fp16",
            "gluon_persistent,fp32,16,4096,4096,NN,ok,24.0,0.8,fp16",
            "wgmma_persistent,fp32,16,4096,4096,NN,ok,30.0,1.0,fp16",
            "gluon_persistent,fp16,16,4096,4096,NN,ok,9,9,fp16",  # fp16 accumulation: not a level's row
            "triton_tma,fp32,16,4096,4096,NN,error,,,fp16", "torch.matmul,fp32,8,8,8,NT,ok,0.1,1.0,bf16"]
    (tmp_path / "bench.csv").write_text(head + "\n".join(rows) + "\n")
    table = measured([tmp_path / "bench.csv"])
    assert [(r["m"], r["layout"], r["dtype"]) for r in table] == [(16, "NN", "fp16"), (8, "NT", "bf16")]
    assert table[0]["gluon_persistent"] == (24.0, 0.8) and table[0]["triton_tma"] is None
    lines = measured_markdown(table).splitlines()
    assert lines[2] == "| 16 x 4096 x 4096 | NN | fp16 | 30.0 | - | 24.0 (0.800) | 30.0 (1.000) | 0.800 |"
    assert lines[3] == "| 8 x 8 x 8 | NT | bf16 | 0.1 | - | - | - | - |"
    # --schedule stream_k: the stream-K kernel of each level, its Gluon column over its inline PTX column
    from compare.levels import SCHEDULES

    sk = SCHEDULES["stream_k"]
    shape = "200,8192,8192,NN"
    rows = [f"torch.matmul,fp32,{shape},ok,500.0,1.0,fp16", f"triton_streamk,fp32,{shape},ok,450,0.9,fp16",
            f"gluon_streamk,fp32,{shape},ok,400,0.8,fp16", f"wgmma_streamk,fp32,{shape},ok,500,1.0,fp16",
            f"wgmma_persistent,fp32,{shape},ok,380,0.76,fp16"]
    (tmp_path / "sk.csv").write_text(head + "\n".join(rows) + "\n")
    lines = measured_markdown(measured([tmp_path / "sk.csv"], sk), sk).splitlines()
    assert "Triton `triton_streamk`" in lines[0] and "wgmma_persistent" not in lines[0]
    assert lines[2] == ("| 200 x 8192 x 8192 | NN | fp16 | 500.0 | 450.0 (0.900) | 400.0 (0.800) | 500.0 (1.000) "
                        "| 0.800 |")


def test_source_lines_of_the_three_levels():
    from compare.registry import records

    by_name = {v.name: v for v in records()}
    from triton_kernels.variants import GLUON
    by_name.setdefault(GLUON.name, GLUON)
    for name in ("triton_tma", "gluon_persistent", "wgmma_persistent"):
        own, headers = source_lines(by_name[name])
        assert own > 50, name
        assert (headers > 0) == (name == "wgmma_persistent"), name
    wgmma = ROOT / "ptx_kernels" / "csrc" / "sm90" / "wgmma_persistent.cu"
    assert any(p.name == "wgmma_tile.cuh" for p in cuda_includes(wgmma))


# ------------------------------------------------------------------------------------------------------------ GPU
# Every case in one child under a timeout. Shapes: TMA-describable (leading dimensions multiples of 8), edges in M,
# N and K of every tile, K below, at and past one k-block and past the ring's depth; tiles beyond one round of the
# persistent grid (programs walking several tiles, the ring's phases wrapping across tiles); and shapes TMA cannot
# describe (odd leading dimensions, (1, K) column-major A), which the dispatcher stages. Every configuration (both
# consumer counts, split-K's two kernels) in every layout with fp16 and bf16 (fp32 accumulation); fp16 accumulation
# in NN and TT (each operand once in each order; the compiles per configuration, not the checks, bound this run).
#
# The GPU children's exact check (their code starts with it): integer inputs, NaN-poisoned out=, each failure kept in
# `bad` and printed as it happens (seen even if a later case hangs).
_EXACT = """
import json, sys, time, torch
import triton_kernels
from compare.reference import LAYOUTS, compare, make_inputs, poisoned_out, reference
bad, ran = [], 0

def exact(m, n, k, layout, dtype, acc, cfg, seed, kernel="gluon", what=""):
    global ran
    a, b = make_inputs(m, n, k, layout, device="cuda", seed=seed, dtype=dtype)
    out = poisoned_out(m, n, "cuda", dtype)
    try:
        c = triton_kernels.hgemm(a, b, out=out, acc=acc, config=cfg, kernel=kernel)
        torch.cuda.synchronize()
        v = compare(c, reference(a, b))
        ok = c is out and v.ok
        detail = "" if ok else v.detail
    except Exception as e:  # noqa: BLE001 - reported by case
        ok, detail = False, f"{type(e).__name__}: {str(e)[:300]}"
    ran += 1
    if not ok:
        bad.append(f"{m}x{n}x{k} {layout} {dtype} acc={acc} {getattr(cfg, 'name', cfg)} {what}: {detail}")
        print(bad[-1], file=sys.stderr, flush=True)
"""
_GPU_CASES = _EXACT + """
from triton_kernels import dispatch
from triton_kernels import gluon_persistent as g

ALL_LAYOUTS = [(8, 8, 8), (40, 24, 72), (136, 264, 88), (264, 520, 1032), (1000, 136, 8), (384, 1032, 264),
               (1, 64, 8), (17, 40, 136), (333, 264, 520), (129, 256, 64)]
STAGED = [(33, 61, 70), (130, 77, 203)]  # no dimension a multiple of 8
MANY_TILES = [(2048, 2048, 200), (4096, 2056, 72)]
RUNS = [("fp16", "fp32", LAYOUTS), ("bf16", "fp32", LAYOUTS), ("fp16", "fp16", ("NN", "TT"))]

# this child's share (helpers.run_children): configurations i with i % PARTS == PART, and the ruled shapes in child 0
MINE = [cfg for i, cfg in enumerate(g.configs()) if i % PARTS == PART]
start = time.time()
for cfg in MINE:
    print(f"{time.time() - start:.0f} s: {cfg.name}", file=sys.stderr, flush=True)
    for dtype, acc, layouts in RUNS:
        for s, (m, n, k) in enumerate(ALL_LAYOUTS + STAGED):
            for layout in layouts:
                exact(m, n, k, layout, dtype, acc, cfg, seed=s)
        for s, (m, n, k) in enumerate(MANY_TILES):
            exact(m, n, k, "NT" if s else "NN", dtype, acc, cfg, seed=20 + s)

# split-K's element counts are back at zero after every call (the next call on the stream starts from them)
from triton_kernels.splitk import COUNTERS
torch.cuda.synchronize()
if any(bool(buf.any()) for buf in COUNTERS._bufs.values()):
    bad.append("split-K left element counts that are not zero")

# split-K's other form (the loop above ran FUSED's): fused (the partials summed by each element's last unit) or
# two-pass (the partials, then splitk.py's reduction kernel)
dispatch.clear()
g.FUSED = not g.FUSED
for cfg in [c for c in MINE if c.split_k > 1]:
    for dtype, acc, layouts in RUNS:
        for s, (m, n, k) in enumerate([(17, 40, 1100), (136, 264, 520), (2048, 2048, 4096)]):
            for layout in layouts:
                exact(m, n, k, layout, dtype, acc, cfg, seed=50 + s)
torch.cuda.synchronize()
if any(bool(buf.any()) for buf in COUNTERS._bufs.values()):
    bad.append("fused split-K left element counts that are not zero")
g.FUSED = not g.FUSED
dispatch.clear()

# config=None: the plan's choice (the cost model's on a GPU whose file fits the kernel, else choose_config's;
# 128-row, 64-row or swapped, split-K), twice: the first call compiles
# through kernel[grid], the second launches directly (launch.py Direct), both exact
if PART == 0:  # one child checks the plan's choices
    RULED = [(1024, 1032, 520, "NT"), (16, 1024, 2048, "NN"), (256, 256, 8192, "TN"), (3001, 499, 203, "NN")]
    for dtype in ("fp16", "bf16"):
        for s, (m, n, k, layout) in enumerate(RULED):
            for call in range(2):
                exact(m, n, k, layout, dtype, "fp32", None, seed=30 + s)
            a, b = make_inputs(m, n, k, layout, device="cuda", seed=30 + s, dtype=dtype)
            key = dispatch.key_of(a, b, poisoned_out(m, n, "cuda", dtype), "fp32", "gluon", None, None)
            runner = dispatch.PLANS.get(key)
            if runner is None or not runner.direct:
                bad.append(f"{m}x{n}x{k} {layout} {dtype}: not on the direct launch path after two calls")
    ruled = {triton_kernels.plan(*make_inputs(m, n, k, layout, device="cuda"), kernel="gluon").config.name
             for m, n, k, layout in RULED}
    if not any(name.startswith(("64x", "32x", "16x")) for name in ruled) or not any("_k" in name for name in ruled):
        bad.append(f"the ruled shapes did not reach a short (64-row or swapped) and a split-K configuration: "
                   f"{sorted(ruled)}")

# determinism: random inputs, two runs bitwise equal, every config
for cfg in MINE:
    for dtype in ("fp16", "bf16"):
        a, b = make_inputs(2048, 2048, 4096, "NT", device="cuda", seed=40, kind="randn", dtype=dtype)
        c1 = triton_kernels.hgemm(a, b, config=cfg, kernel="gluon")
        c2 = triton_kernels.hgemm(a, b, config=cfg, kernel="gluon")
        if not torch.equal(c1, c2):
            bad.append(f"not deterministic {cfg.name} {dtype}")
        ran += 1
print(json.dumps(dict(bad=bad, ran=ran)))
"""


@needs_api
@pytest.mark.gpu(sm=90)
def test_gpu_exact_poisoned_deterministic_under_a_timeout():
    """Exact integer checks (C == (A.double() @ B.double()) rounded, bit for bit; NaN-poisoned out= so every element
    must be written) on odd shapes in every layout and dtype, both accumulations and every configuration (split-K
    fused and two-pass; its element counts left at zero); operands TMA cannot describe staged; the plan's choices
    (config=None: the cost model's, or the rule's on a GPU without one), on the direct launch path from the second
    call; determinism on random inputs. In children side by side, each compiling and checking a share of the
    configurations (the compiles bound this run), 15 minutes at most: a hang fails this test instead of stalling the
    suite."""
    import torch

    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the Gluon kernel is written for Hopper (sm_90a), not later GPUs")
    parts = run_children(_GPU_CASES, timeout=900)
    bad = [b for p in parts for b in p["bad"]]
    assert bad == [], "\n".join(bad[:40])
    assert sum(p["ran"] for p in parts) >= 1000


def test_launch_takes_the_compile_options_every_launch_passes():
    """launch.py's jit_launch hands every Spec.fn the project's compile options (FP fusion set explicitly); the
    Gluon kernel's launcher passes them on with its register budget (on the H100 a launcher that refused them made
    every Gluon call raise)."""
    from triton_kernels import gluon_persistent as G
    from triton_kernels.triton_internals import COMPILE_OPTIONS

    seen = {}

    class Kernel:
        def __getitem__(self, grid):
            return lambda *args, **kw: seen.update(grid=grid, args=args, **kw)

    assert G.GluonLaunch(Kernel())[(3,)](1, 2, num_warps=4, num_stages=3, **COMPILE_OPTIONS) is None
    assert seen == dict(grid=(3,), args=(1, 2), num_warps=4, num_stages=3, maxnreg=G.MAXNREG, **COMPILE_OPTIONS)


# Stream-K (gluon_streamk) on the GPU, every case in children under a timeout, as above. Each case lowers the SM
# count (gluon_streamk's `num_sms`, as tests/test_streamk.py lowers the interpreter's) to the one whose schedule cuts
# it as wanted, so that small shapes cut tiles: shapes in units of the configuration's tile with edges in M, N and K
# (rows x BM - 24, columns x BN - 8, k-blocks x 64 - 40), cut into S = 2 to 8 slices (uneven but one), before whole
# rounds or alone; nothing cut (whole rounds; K too short to cut); a shape TMA cannot describe (staged), cut. Every
# configuration in every layout with fp16 and bf16 (fp32 accumulation), fp16 accumulation in NN and TT; random
# inputs bitwise equal over repeated calls, on other addresses and on a side stream; every counter back at zero;
# and the check fails when one slice is left out (one program too few: its tile is never summed and stays NaN).
_STREAMK_GPU_CASES = _EXACT + """
from triton_kernels import dispatch, gluon_streamk as gs, streamk
from triton_kernels.common import cdiv
from triton_kernels.splitk import COUNTERS

# (tile rows, tile columns, k-blocks, slices, whole rounds before the cut)
CUT = [(2, 3, 9, 2, True), (3, 3, 17, 3, True), (1, 5, 18, 4, True), (2, 3, 33, 5, True), (1, 2, 26, 6, False),
       (2, 4, 34, 7, True), (3, 3, 35, 8, True), (2, 2, 8, 2, False)]
UNCUT = [(3, 3, 5, 3), (2, 2, 3, 132)]  # (tile rows, tile columns, k-blocks, SMs): whole rounds; K too short to cut
STAGED = (130, 77, 1203)  # no dimension a multiple of 8
RUNS = [("fp16", "fp32", LAYOUTS), ("bf16", "fp32", LAYOUTS), ("fp16", "fp16", ("NN", "TT"))]
cuts = set()

def on_sms(sms):  # the programs at most of the next plans (a plan keeps its grid: forget the old ones)
    gs.num_sms = lambda device: sms
    dispatch.clear()

def sms_for(cfg, m, n, k, slices=None, rounds=None):
    tiles, iters = cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n), cdiv(k, 64)
    for sms in range(1, 133):
        s = streamk.schedule(tiles, iters, sms)
        if (s.slices == slices if slices else s.slices > 1) and rounds in (None, tiles > s.sk_tiles):
            return sms, s
    raise AssertionError(f"no SM count cuts {m}x{n}x{k} in {cfg.name} into {slices} slices")

MINE = [cfg for i, cfg in enumerate(gs.configs()) if i % PARTS == PART]
start = time.time()
for cfg in MINE:
    print(f"{time.time() - start:.0f} s: {cfg.name}", file=sys.stderr, flush=True)
    cases = []
    for s_, (rows, cols, iters, slices, rounds) in enumerate(CUT):
        m, n, k = rows * cfg.block_m - 24, cols * cfg.block_n - 8, iters * 64 - 40
        cases.append((m, n, k, *sms_for(cfg, m, n, k, slices, rounds), s_))
    for s_, (rows, cols, iters, sms) in enumerate(UNCUT):
        m, n, k = rows * cfg.block_m - 24, cols * cfg.block_n - 8, iters * 64 - 40
        cases.append((m, n, k, sms, streamk.schedule(cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n), iters, sms),
                      10 + s_))
    cases.append((*STAGED, *sms_for(cfg, *STAGED), 20))
    for m, n, k, sms, sched, seed in cases:
        cuts.add((sched.slices, sched.sk_tiles > 0 and cdiv(k, 64) % sched.slices > 0))
        on_sms(sms)
        for dtype, acc, layouts in RUNS:
            for layout in layouts:
                exact(m, n, k, layout, dtype, acc, cfg, seed, "gluon_streamk", f"on {sms} SMs {tuple(sched)}")
    # determinism: random inputs, 8 slices a cut tile (the longest fix-up), whole rounds before it
    rows, cols, iters, slices, rounds = CUT[6]
    m, n, k = rows * cfg.block_m - 24, cols * cfg.block_n - 8, iters * 64 - 40
    on_sms(sms_for(cfg, m, n, k, slices, rounds)[0])
    for dtype in ("fp16", "bf16"):
        a, b = make_inputs(m, n, k, "NT", device="cuda", seed=40, kind="randn", dtype=dtype)
        first = triton_kernels.hgemm(a, b, config=cfg, kernel="gluon_streamk")
        again = [triton_kernels.hgemm(a, b, config=cfg, kernel="gluon_streamk") for _ in range(3)]
        again.append(triton_kernels.hgemm(a.clone(), b.clone(), config=cfg, kernel="gluon_streamk"))
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            again.append(triton_kernels.hgemm(a, b, config=cfg, kernel="gluon_streamk"))
        side.synchronize()
        torch.cuda.synchronize()
        if not all(torch.equal(first, c) for c in again):
            bad.append(f"not deterministic {cfg.name} {dtype}")
        ran += 1
torch.cuda.synchronize()
if any(bool(buf.any()) for buf in COUNTERS._bufs.values()):
    bad.append("stream-K left slab counters that are not zero")

# the check can fail: one program too few leaves the last slice of the last cut tile out (2 tiles in 6 slices,
# nothing else: 12 programs); that tile is never summed, its elements stay NaN, the other one is exact
if PART == 0:
    cfg = gs.configs()[0]
    m, n, k = cfg.block_m - 24, 2 * cfg.block_n - 8, 26 * 64 - 40
    sms, sched = sms_for(cfg, m, n, k, 6, False)
    on_sms(sms)
    real = gs.schedule
    gs.schedule = lambda *args: real(*args)._replace(programs=sched.programs - 1)
    a, b = make_inputs(m, n, k, "NN", device="cuda", seed=3)
    c = triton_kernels.hgemm(a, b, out=poisoned_out(m, n, "cuda"), config=cfg, kernel="gluon_streamk")
    torch.cuda.synchronize()
    gs.schedule = real
    if compare(c, reference(a, b)).ok or not c.isnan().any() or c[:, :cfg.block_n].isnan().any():
        bad.append(f"a missing slice was not seen: {tuple(sched)}, NaN {int(c.isnan().sum())}")
    COUNTERS.clear()  # the unsummed tile's counters were left at 5
    dispatch.clear()
print(json.dumps(dict(bad=bad, ran=ran, cuts=sorted(cuts))))
"""


@needs_api
@pytest.mark.gpu(sm=90)
def test_gpu_streamk_exact_poisoned_deterministic_under_a_timeout():
    """gluon_streamk on the GPU (`_STREAMK_GPU_CASES`): exact integer checks into NaN-poisoned outputs on shapes cut
    into 2 to 8 uneven slices (edge tiles, before whole rounds or alone) and on uncut and staged ones, every
    configuration in every layout, fp16 and bf16, both accumulations; bitwise-equal repeated results, counters back
    at zero, and a failing check where a slice is left out. In children side by side, 10 minutes at most: a hang
    fails this test instead of stalling the suite."""
    import torch

    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the Gluon kernel is written for Hopper (sm_90a), not later GPUs")
    parts = run_children(_STREAMK_GPU_CASES, timeout=600)
    bad = [b for p in parts for b in p["bad"]]
    assert bad == [], "\n".join(bad[:40])
    assert sum(p["ran"] for p in parts) >= 700
    cuts = {tuple(c) for p in parts for c in p["cuts"]}
    assert {n for n, _ in cuts} >= set(range(1, 9)) and (8, True) in cuts, sorted(cuts)


# ----------------------------------------------------------------------------------------------------------------
# gluon_stream: the Gluon level's bandwidth path (triton_kernels/gluon_stream.py)
# ----------------------------------------------------------------------------------------------------------------
_STREAM_COMPILE_PROBE = """
import json, re, tempfile
from pathlib import Path
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from ptx_kernels import toolchain
from triton_kernels import gluon_stream as gs

# the load widths (`vectors`) each configuration sees: every pair below once, across its dtypes and majors
PAIRS = [(1, 1), (8, 8), (2, 4), (8, 1), (4, 2), (1, 8), (8, 8), (2, 2)]
rows = []
for c, cfg in enumerate(gs.configs()):
    for dtype in ("fp16", "bf16"):
        for a_kmajor in (True, False):
            for b_kmajor in (False, True):
                vec_a, vec_b = PAIRS[(c + 4 * (dtype == "bf16") + 2 * a_kmajor + b_kmajor) % len(PAIRS)]
                fn, sig, consts, attrs = gs.inspect_source(cfg, dtype, a_kmajor, b_kmajor, vec_a, vec_b)
                for name in consts:
                    sig.setdefault(name, "constexpr")
                k = triton.compile(GluonASTSource(fn, sig, consts, attrs), target=GPUTarget("cuda", 90, 32),
                                   options=gs.compile_options(cfg))
                with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
                    f.write(k.asm["cubin"])
                usage = next(iter(toolchain.cubin_resource_usage(Path(f.name)).values()))
                Path(f.name).unlink()
                mix = toolchain.instruction_mix(k.asm["sass"])
                rows.append(dict(config=cfg.name, dtype=dtype, a_kmajor=a_kmajor, b_kmajor=b_kmajor, vec_a=vec_a,
                                 vec_b=vec_b, loads=sorted(set(re.findall(r"LDG\\.E[\\w.]*", k.asm["sass"]))),
                                 mix={op: mix.get(op, 0) for op in ("HMMA", "LDG", "STG", "UTMALDG", "HGMMA", "LDL",
                                                                    "STL")},
                                 hmma=sorted(set(re.findall(r"HMMA\\.[\\w.]+", k.asm["sass"]))),
                                 registers=usage.registers, spills=usage.spill_stores, stack=usage.stack_bytes))
print(json.dumps(rows))
"""


@needs_api
def test_stream_kernel_compiles_to_mma_sync_on_pointer_loads():
    """gluon_stream's every configuration, both dtypes, A and B each way round, at load widths (`vectors`) of 1, 2,
    4 and 8 elements: mma.sync (HMMA.16816, F32 with .BF16 for bf16), operands by plain loads (LDG: no TMA, no
    wgmma) exactly as wide as the widths asked (LDG.E.U16, LDG.E, LDG.E.64, LDG.E.128: the compiler proved the
    addresses aligned and the masks constant), C or the partials by plain stores, no local memory; at most 255
    registers a thread (4 warps: at least two programs an SM), at most 128 with both operands in 16-byte vectors
    (four programs an SM: `PROGRAMS_PER_SM`)."""
    from triton_kernels import gluon_stream as gs

    rows = _child(_STREAM_COMPILE_PROBE, timeout=900)
    assert len(rows) == len(gs.configs()) * 8
    width = {1: "LDG.E.U16", 2: "LDG.E", 4: "LDG.E.64", 8: "LDG.E.128"}
    assert {(r["vec_a"], r["vec_b"]) for r in rows} >= {(1, 1), (8, 8), (2, 4), (8, 1), (4, 2), (1, 8), (2, 2)}
    for r in rows:
        assert r["loads"] == sorted({width[r["vec_a"]], width[r["vec_b"]]}), r
        assert (r["vec_a"], r["vec_b"]) != (8, 8) or r["registers"] <= 65536 // (gs.PROGRAMS_PER_SM * 128), r
        mix = r["mix"]
        assert mix["HMMA"] > 0 and mix["LDG"] > 0 and mix["STG"] > 0, r
        assert mix["UTMALDG"] == mix["HGMMA"] == mix["LDL"] == mix["STL"] == 0 and r["spills"] == r["stack"] == 0, r
        assert r["hmma"] and all(f.startswith("HMMA.16816.F32") and f.endswith(".BF16") == (r["dtype"] == "bf16")
                                 for f in r["hmma"]), r
        assert r["registers"] <= 255, r


def test_stream_rule_and_ranges():
    """`gluon_stream.choose_config`: 16 rows up to M = 16, else 32; 128 columns where they give a program an SM,
    else 64; the smallest K split that gives PROGRAMS_PER_SM programs an SM, each slice at least MIN_SLICE_BLOCKS
    k-blocks deep; `check_config` refuses other tiles in one line."""
    from dataclasses import replace

    from triton_kernels import Config
    from triton_kernels import gluon_stream as gs

    cases = {(1, 4096, 4096): "16x64x64_w4_s1_g1_k16",  # 64 column blocks: 8 slices give 512 < 528, 16 give 1024
             (8, 28672, 4096): "16x128x32_w4_s1_g1_k4",  # 224 x 4 = 896 >= 528
             (24, 1000, 30000): "32x64x64_w4_s1_g1_k32",  # 16 blocks: 32 slices (512 programs)
             (16, 4096, 200): "16x64x64_w4_s1_g1",  # 4 k-blocks: no split
             (32, 8192, 1024): "32x64x64_w4_s1_g1_k4"}  # 128 blocks x 4 = 512 (16 k-blocks: slices of 4)
    for (m, n, k), name in cases.items():
        cfg = gs.choose_config(m, n, k, 132)
        assert cfg.name == name, (m, n, k, cfg.name)
        per, split = gs.slices(k, gs.check_config(cfg))
        assert split == cfg.split_k and per % cfg.block_k == 0 and (split == 1 or per >= gs.MIN_SLICE_BLOCKS * 32)
    # the split the rule names is the one that runs (33 k-blocks: 8 slices of 5 leave 7), and the model, the sweep
    # and tune="exact" weigh it beside the unsplit tiles (`prune`)
    assert gs.choose_config(1, 4096, 33 * 64, 132).split_k == 7 == gs.slices(33 * 64, replace(gs.configs()[2],
                                                                                              split_k=8))[1]
    assert gs.prune(gs.configs(), 1, 4096, 4096, 132) == [*gs.configs(), gs.choose_config(1, 4096, 4096, 132)]
    assert gs.slices(1 << 24, replace(gs.configs()[0], split_k=1 << 20))[1] <= gs.MAX_SLICES  # the grid's y limit
    for bad in (Config(64, 128, 32, num_warps=4), Config(16, 256, 32, num_warps=4), Config(16, 128, 128, num_warps=4),
                Config(16, 128, 32, num_warps=8)):
        with pytest.raises(ValueError, match="gluon_stream.*16 or 32 rows x 64 or 128 columns"):
            gs.check_config(bad)


def test_stream_load_widths():
    """`gluon_stream.vectors`: the widest load along an operand's unit stride its alignment allows (8, 4, 2 or 1
    elements): the base on 16 bytes, the extent along the unit stride and the leading stride divisible, the leading
    stride ignored where the other dimension holds one element and refused (1) where the launcher's quotient
    times the width would not fit 32 bits; 1 along a dimension that is not the unit stride."""
    import torch

    from triton_kernels import gluon_stream as gs

    base = torch.empty(1 << 16, dtype=torch.float16)
    assert base.data_ptr() % 16 == 0
    def window(rows, cols, lead, shift=0):
        return base[shift:shift + rows * lead].view(rows, lead)[:, :cols]
    assert gs.vectors(window(4, 64, 64), 1) == 8 and gs.vectors(window(4, 64, 64), 0) == 1
    assert [gs.vectors(window(4, 64, lead), 1) for lead in (72, 68, 66, 65)] == [8, 4, 2, 1]
    assert [gs.vectors(window(4, cols, 96), 1) for cols in (88, 84, 82, 81)] == [8, 4, 2, 1]
    assert [gs.vectors(window(4, 64, 64, shift), 1) for shift in (8, 4, 2, 1)] == [8, 1, 1, 1]  # Triton: 16 bytes
    assert gs.vectors(window(1, 64, 1001), 1) == 8  # one row: its stride plays no part
    assert gs.vectors(window(4, 64, 64).t(), 0) == 8 and gs.vectors(window(4, 64, 64).t(), 1) == 1  # column-major
    big = torch.empty_strided((2, 64), (1 << 31, 1), dtype=torch.float16, device="meta")  # (address 0)
    assert gs.vectors(big, 1) == 1 and gs.vectors(big[:1], 1) == 8


def test_stream_launch_arguments(monkeypatch):
    """The launcher hands the kernel each operand's load widths (VEC_A, VEC_B) and its leading stride divided by
    its width (the kernel multiplies it back: the compiler sees it divisible), the unit strides as 1, and the other
    strides, the extents and the output as they are; a split K gets the fp32 workspace and the reduction."""
    import torch

    from triton_kernels import gluon_stream as gs

    monkeypatch.setattr(gs, "refuse_here", lambda name: None)
    if gs.UNAVAILABLE is not None:
        pytest.skip(gs.UNAVAILABLE)
    names = ["a", "b", "c", "p", "M", "N", "K", "K_SLICE", "stride_am", "stride_ak", "stride_bk", "stride_bn",
             "stride_cm", "stride_cn", "ACC_FP16", "INDEX_64", "BLOCK_M", "BLOCK_N", "BLOCK_K", "A_KMAJOR",
             "B_KMAJOR", "VEC_A", "VEC_B", "PARTIAL"]
    buf = torch.empty(1 << 20, dtype=torch.float16)
    a = buf[:24 * 1040].view(24, 1040)[:, :1032]  # row-major, rows 2,080 bytes apart: 8 elements
    b = buf[:264 * 1034].view(264, 1034)[:, :1032].t()  # (1032, 264) column-major, columns 2,068 bytes apart: 2
    c = torch.empty(24, 264, dtype=torch.float16)
    cfg = gs.choose_config(24, 264, 1032, 132)
    specs = gs.launches(a, b, c, False, cfg)
    args = dict(zip(names, specs[0].args, strict=True))
    assert (args["VEC_A"], args["VEC_B"], args["A_KMAJOR"], args["B_KMAJOR"]) == (8, 2, True, True)
    assert (args["stride_am"], args["stride_ak"], args["stride_bk"], args["stride_bn"]) == (1040 // 8, 1, 1, 1034 // 2)
    assert (args["M"], args["N"], args["K"], args["stride_cm"], args["stride_cn"]) == (24, 264, 1032, 264, 1)
    assert args["PARTIAL"] == (cfg.split_k > 1) == (len(specs) == 2) and (args["p"] is c) == (cfg.split_k == 1)
    a_m = buf[:1032 * 32].view(1032, 32)[:, :24].t()  # (24, 1032) M-major, columns 64 bytes apart
    b_n = buf[8:8 + 1032 * 264].view(1032, 264)  # row-major, base 16 bytes in
    args = dict(zip(names, gs.launches(a_m, b_n, c, True, gs.configs()[1])[0].args, strict=True))
    assert (args["VEC_A"], args["VEC_B"], args["A_KMAJOR"], args["B_KMAJOR"], args["ACC_FP16"]) == (8, 8, False,
                                                                                                    False, True)
    assert (args["stride_am"], args["stride_ak"], args["stride_bk"], args["stride_bn"]) == (1, 32 // 8, 264 // 8, 1)


_STREAM_GPU_CASES = _EXACT + """
from dataclasses import replace
from triton_kernels import gluon_stream as gst

SHAPES = [(1, 64, 8), (7, 61, 70), (16, 520, 264), (17, 40, 1100), (32, 1000, 136), (33, 136, 520), (40, 24, 72),
          (3, 4099, 2049)]  # M past 32: more row blocks; odd N and K: A and B read in place off the 16-byte grid
RUNS = [("fp16", "fp32", LAYOUTS), ("bf16", "fp32", LAYOUTS), ("fp16", "fp16", ("NN", "TT"))]
cfgs = [c for c in gst.configs()] + [replace(c, split_k=s) for c, s in zip(gst.configs(), (2, 4, 16, 32))]
MINE = [cfg for i, cfg in enumerate(cfgs) if i % PARTS == PART]
start = time.time()
for cfg in MINE:
    print(f"{time.time() - start:.0f} s: {cfg.name}", file=sys.stderr, flush=True)
    for dtype, acc, layouts in RUNS:
        for s, (m, n, k) in enumerate(SHAPES):
            for layout in layouts:
                exact(m, n, k, layout, dtype, acc, cfg, seed=s, kernel="gluon_stream")
    for dtype in ("fp16", "bf16"):  # the same bits on every run (the slices summed in slice order)
        a, b = make_inputs(24, 3000, 4097, "NT", device="cuda", seed=40, kind="randn", dtype=dtype)
        c1 = triton_kernels.hgemm(a, b, config=cfg, kernel="gluon_stream")
        c2 = triton_kernels.hgemm(a, b, config=cfg, kernel="gluon_stream")
        if not torch.equal(c1, c2):
            bad.append(f"not deterministic {cfg.name} {dtype}")
        ran += 1
if PART == 0:  # config=None: the rule's choice, split and not
    for s, (m, n, k, layout) in enumerate([(8, 28672, 4096, "NT"), (5, 4001, 3001, "NN"), (30, 257, 30001, "TN")]):
        for dtype in ("fp16", "bf16"):
            exact(m, n, k, layout, dtype, "fp32", None, seed=60 + s, kernel="gluon_stream")
if PART == PARTS - 1:  # views: each operand's load width (`vectors`) as asserted, the product exact
    def view(rows, cols, lead, shift, major, seed):  # a (rows, cols) window of a padded buffer, `shift` elements in
        g = torch.Generator(device="cuda").manual_seed(seed)
        outer, inner = (rows, cols) if major == "N" else (cols, rows)
        buf = torch.randint(-3, 4, (outer * lead + shift + 64,), generator=g, device="cuda").half()
        t = buf[shift:shift + outer * lead].view(outer, lead)[:, :inner]
        return t if major == "N" else t.t()
    VIEWS = [  # (M, N, K, A: lead, shift, major, B: lead, shift, major), the widths `vectors` gives A and B
        ((9, 520, 264, 272, 0, "N", 528, 0, "N"), (8, 8)),  # padded rows on the grid
        ((9, 520, 264, 268, 0, "N", 524, 0, "N"), (4, 4)),  # rows 8 bytes apart
        ((9, 520, 264, 266, 0, "N", 522, 8, "N"), (2, 2)),  # rows 4 bytes apart, B's base on 16 bytes
        ((9, 520, 264, 272, 2, "N", 528, 4, "N"), (1, 1)),  # bases 4 and 8 bytes off the grid
        ((24, 264, 1032, 1040, 0, "N", 1032, 0, "T"), (8, 8)),  # a column-major B, K-major loads
        ((24, 264, 1032, 24, 0, "T", 1034, 0, "T"), (8, 2)),  # an M-major A (24 rows), B's columns 4 bytes apart
        ((1, 4096, 4096, 4101, 0, "N", 4096, 8, "N"), (8, 8)),  # one row of A: its leading stride plays no part
        ((20, 474, 5248, 5248, 0, "N", 474, 0, "N"), (8, 2)),  # N = 474: B's rows 4 bytes apart
    ]
    for s, ((m, n, k, la, sa, ma, lb, sb, mb), want) in enumerate(VIEWS):
        a, b = view(m, k, la, sa, ma, 70 + s), view(k, n, lb, sb, mb, 80 + s)
        got = (gst.vectors(a, 1 if ma == "N" else 0), gst.vectors(b, 1 if mb == "N" else 0))
        out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
        v = compare(triton_kernels.hgemm(a, b, out=out, kernel="gluon_stream"), reference(a, b))
        ran += 1
        if got != want or not v.ok:
            bad.append(f"view {m}x{n}x{k} {ma}{mb} widths {got} (asked {want}): {v.detail or 'exact'}")
print(json.dumps(dict(bad=bad, ran=ran)))
"""


@needs_api
@pytest.mark.gpu(sm=90)
def test_gpu_stream_exact_poisoned_deterministic_under_a_timeout():
    """gluon_stream on the GPU (`_STREAM_GPU_CASES`): exact integer checks into NaN-poisoned outputs, A and B read in
    place at any alignment (odd M, N, K), every configuration whole and split (2 to 32 slices) in every layout, fp16
    and bf16, both accumulations; the rule's choices; bitwise-equal repeated results. In children side by side,
    10 minutes at most."""
    import torch

    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("compiled and checked on Hopper (sm_90) here")
    parts = run_children(_STREAM_GPU_CASES, timeout=600)
    bad = [b for p in parts for b in p["bad"]]
    assert bad == [], "\n".join(bad[:40])
    assert sum(p["ran"] for p in parts) >= 650
