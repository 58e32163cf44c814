"""The random-shape suite (`python -m compare bench --suite random`) without a GPU: the draw (its distribution,
alignment, size cap, determinism), the per-kernel statistics, the map, the history's suite columns and the CLI's
refusals; one small end-to-end run on the GPU."""
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from compare import bench, history, plot

ROOT = Path(__file__).resolve().parent.parent


def test_draw_stays_in_its_bounds_and_under_the_cap():
    shapes = bench.random_shapes(7, 400)
    assert len(shapes) == 400
    for i, (m, n, k, layout) in enumerate(shapes):
        lo = 8 if i % 2 == 0 else 1  # an aligned draw rounds M = 1..3 up to 8
        assert lo <= m <= 16384 and 256 <= n <= 32768 and 256 <= k <= 32768, (i, m, n, k)
        assert m * n * k <= bench.RANDOM_MAX_MACS and layout in bench.LAYOUTS
    assert {lay for *_, lay in shapes} == set(bench.LAYOUTS)  # all four layouts by default


def test_half_the_draws_are_multiples_of_8():
    shapes = bench.random_shapes(11, 200)
    assert all(d % 8 == 0 for m, n, k, _ in shapes[0::2] for d in (m, n, k))
    unaligned = [s for s in shapes[1::2] if any(d % 8 for d in s[:3])]
    assert len(unaligned) > 80  # left as drawn: a dimension is a multiple of 8 one time in eight
    assert bench.round8(1) == 8 and bench.round8(12) == 16 and bench.round8(11) == 8 and bench.round8(16384) == 16384


def test_draw_is_log_uniform():
    """Half of M falls under sqrt(16384) = 128 and half of N over sqrt(256 * 32768) = 2896 (the cap's redraws pull
    a few large ones back: the tolerance allows them)."""
    odd = bench.random_shapes(5, 4000)[1::2]
    assert 0.45 < sum(m <= 128 for m, *_ in odd) / len(odd) < 0.6
    assert 0.4 < sum(n > 2896 for _, n, _, _ in odd) / len(odd) < 0.55
    assert min(m for m, *_ in odd) == 1 and max(k for *_, k, _ in odd) > 16384


def test_cap_redraws_large_problems(monkeypatch):
    monkeypatch.setattr(bench, "RANDOM_MAX_MACS", 2**30)
    shapes = bench.random_shapes(3, 300)
    assert all(m * n * k <= 2**30 for m, n, k, _ in shapes)
    monkeypatch.undo()
    assert any(m * n * k > 2**30 for m, n, k, _ in bench.random_shapes(3, 300))  # the cap changed the draw


def test_draw_is_deterministic_per_seed():
    assert bench.random_shapes(42, 50) == bench.random_shapes(42, 50)
    assert bench.random_shapes(42, 50) != bench.random_shapes(43, 50)
    assert bench.random_shapes(42, 50)[:20] == bench.random_shapes(42, 20)  # a prefix of a longer draw
    nt = bench.random_shapes(42, 50, ["NT"])
    assert [s[:3] for s in nt] == [s[:3] for s in bench.random_shapes(42, 50)] and {s[3] for s in nt} == {"NT"}
    assert {s[3] for s in bench.random_shapes(42, 50, ["NN", "NT"])} == {"NN", "NT"}
    # Global state plays no part, and the draw is pinned: a history line's seed names the same shapes on any
    # machine and at any later commit (Python keeps random()'s sequence for an integer seed across versions).
    import random

    random.seed(0)
    assert bench.random_shapes(42, 4) == [(496, 288, 976, "NN"), (2, 1983, 296, "NN"), (136, 288, 672, "TN"),
                                          (198, 746, 4466, "TT")]


def test_nk_multiple_rounds_the_rounded_halfs_n_and_k():
    """A sweep's whole-box draw: the rounded half's N and K in multiples of 64 (M still of 8), each within half a
    step of the random suite's draw of the same seed, which it otherwise follows (the same M, the unrounded half
    unchanged); a multiple that is not a power of two from 8 to 256 is refused, named."""
    whole, base = bench.random_shapes(9, 200, nk_multiple=64), bench.random_shapes(9, 200)
    assert all(m % 8 == 0 and n % 64 == 0 and k % 64 == 0 for m, n, k, _ in whole[::2])
    assert all(abs(n - bn) <= 32 and abs(k - bk) <= 32 for (_, n, k, _), (_, bn, bk, _) in zip(whole[::2], base[::2]))
    assert [s[0] for s in whole] == [s[0] for s in base] and whole[1::2] == base[1::2]
    assert bench.random_shapes(9, 200, nk_multiple=8) == base and bench.round_to(100, 64) == 128
    assert bench.round_to(95, 64) == 64 and bench.round_to(20, 64) == 64
    for bad in (48, 4, 512, True):
        with pytest.raises(ValueError, match="N and K multiple must be one of 8, 16, 32, 64, 128, 256, got"):
            bench.random_shapes(9, 4, nk_multiple=bad)


def test_max_m_narrows_only_m():
    """A sweep's skinny draw: M within 1..max_m, spread over it (not piled at one end), half the shapes rounded to
    multiples of 8 as in the full draw; N and K keep the random suite's range."""
    shapes = bench.random_shapes(9, 400, max_m=48)
    ms = [m for m, *_ in shapes]
    assert 1 <= min(ms) and max(ms) <= 48 and len(set(ms)) > 15
    odd = ms[1::2]  # as drawn: log-uniform, 1..7 holds about half of 1..48
    assert 0.35 < sum(m <= 7 for m in odd) / len(odd) < 0.65
    assert all(m % 8 == n % 8 == k % 8 == 0 for m, n, k, _ in shapes[::2])
    assert max(n for _, n, _, _ in shapes) > 16384 and min(k for *_, k, _ in shapes) < 512
    with pytest.raises(ValueError, match="largest M must be an integer in 1..16384, got 0"):
        bench.random_shapes(9, 4, max_m=0)


def test_max_macs_keeps_the_draw_to_small_problems():
    """A sweep's tiny draw: every problem at most max_macs multiply-adds, M, N and K still over their ranges, half
    the shapes rounded to multiples of 8; the smallest bound taken still draws (a rounded shape is at least 2**19
    multiply-adds), and a bound outside 2**24..2**37 is refused."""
    shapes = bench.random_shapes(9, 300, max_macs=2**30)
    assert all(m * n * k <= 2**30 for m, n, k, _ in shapes)
    assert max(m for m, *_ in shapes) > 1024 and min(m for m, *_ in shapes) < 4
    assert max(n for _, n, _, _ in shapes) > 8192 and max(k for *_, k, _ in shapes) > 8192
    assert all(m % 8 == n % 8 == k % 8 == 0 for m, n, k, _ in shapes[::2])
    assert bench.random_shapes(9, 5, max_macs=2**37) == bench.random_shapes(9, 5)
    small = bench.random_shapes(9, 20, max_macs=bench.SMALLEST_MAX_MACS)
    assert all(m * n * k <= 2**24 for m, n, k, _ in small)
    for bad in (0, 2**19, 2**24 - 1, 2**38, True, 2.0**30):
        with pytest.raises(ValueError, match=r"largest problem must be an integer in 2\*\*24..2\*\*37"):
            bench.random_shapes(9, 4, max_macs=bad)


@pytest.mark.parametrize("seed,count,layouts,says", [(-1, 5, bench.LAYOUTS, "seed must be an integer >= 0"),
                                                     (1.5, 5, bench.LAYOUTS, "seed must be an integer >= 0"),
                                                     (1, 0, bench.LAYOUTS, "count must be an integer >= 1"),
                                                     (1, 5, ["NX"], "layouts must be among")])
def test_draw_refuses_bad_arguments(seed, count, layouts, says):
    with pytest.raises(ValueError, match=says):
        bench.random_shapes(seed, count, layouts)


def _row(kernel, shape, ratio, status="ok"):
    m, n, k, layout = shape
    return bench.BenchRow(kernel, "torch" if kernel.startswith("torch") else "triton", "fp32", "", m, n, k, layout,
                          status, median_ms=0.1 / ratio if ratio else None, tflops=500.0 * ratio if ratio else None,
                          ratio_to_torch=ratio, samples=40 if ratio else 0, spread_pct=3.0 if ratio else None,
                          wall_us=20.0 if ratio else None, wall_ratio_to_torch=1.0 if ratio else None)


def _random_rows(count=12, seed=3):
    """A recorded-like random run: per shape torch.matmul, its A/A control, `triton` at a ratio that falls with
    M, and `wgmma_persistent` skipped where a dimension is not a multiple of 8."""
    rows = []
    for shape in bench.random_shapes(seed, count):
        aligned = all(d % 8 == 0 for d in shape[:3])
        rows += [_row("torch.matmul", shape, 1.0), _row(bench.CONTROL, shape, 1.004),
                 _row("triton", shape, 0.4 + 1.2 * math.log(shape[0] + 1) / math.log(16385)),
                 _row("wgmma_persistent", shape, 1.1 if aligned else None, "ok" if aligned else "skipped")]
    return rows


def test_kernel_stats_geomean_p10_min_share():
    ratios = [0.5, 0.8, 0.9, 0.95, 1.0, 1.0, 1.05, 1.1, 1.2, 2.0]
    shapes = bench.random_shapes(1, len(ratios))
    rows = [_row("torch.matmul", s, 1.0) for s in shapes] + [_row("triton", s, x) for s, x in zip(shapes, ratios)]
    rows.append(_row("triton_tma", shapes[0], None, "skipped"))
    base, trit = bench.kernel_stats(rows)
    assert (base.kernel, base.geomean, base.min, base.share, base.spread_pct) == ("torch.matmul", 1.0, 1.0, 1.0, 3.0)
    assert trit.geomean == pytest.approx(math.exp(sum(map(math.log, ratios)) / 10))
    assert trit.p10 == 0.5 and trit.min == 0.5 and trit.share == pytest.approx(0.7)  # 0.95 itself counts
    assert (trit.shapes, trit.of) == (10, 10)
    stats = {x.kernel: x for x in bench.kernel_stats(_random_rows())}
    assert set(stats) == {"torch.matmul", "triton", "wgmma_persistent"}  # the control is no kernel
    assert stats["wgmma_persistent"].shapes == 6 and stats["wgmma_persistent"].of == 12
    line = next(x for x in bench.summary(_random_rows()).splitlines() if x.startswith("wgmma_persistent"))
    assert line.split()[1:5] == ["1.100", "1.100", "1.100", "100%"] and line.endswith("6/12")


def _random_data(count=12, seed=3):
    return {"environment": {"gpu": "NVIDIA H100 80GB HBM3", "date": "2026-12-01T00:00:00+00:00",
                            "git_commit": "abc1234", "suite": {"name": "random", "seed": seed, "count": count, "layouts": list(bench.LAYOUTS)}},
            "rows": [r.as_dict() for r in _random_rows(count, seed)]}


def test_random_map_renders(tmp_path):
    """The map: one panel per kernel and one for the control, a PNG from recorded rows with matplotlib's Agg; a
    random run gets the map alone."""
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(_random_data()))
    pngs = plot.plot_all(path, tmp_path)
    assert [p.name for p in pngs] == ["random_map.png"]
    assert pngs[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and pngs[0].stat().st_size > 30_000
    from PIL import Image

    with Image.open(pngs[0]) as im:
        assert im.width > 1500  # three panels side by side: triton, wgmma_persistent, the control
    assert not plot.is_random(dict(_random_data(), environment={"gpu": "x"}))


def test_history_records_the_seed_and_count(tmp_path):
    """A random run's lines carry its suite, seed and count; a named suite's its name alone; a file written before
    the suite columns keeps every line and gets the full header at the next append."""
    path = tmp_path / "h.csv"
    assert history.append(path, _random_data(count=12, seed=99)) == 12 * 4 - 6  # the skipped rows left out
    lines = history.read(path)
    assert {(r["suite"], r["seed"], r["count"]) for r in lines} == {("random", "99", "12")}
    assert bench.CONTROL in {r["kernel"] for r in lines}
    legacy = tmp_path / "legacy.csv"
    old = ",".join(history.LEGACY_COLUMNS) + "\nb3f2e8e,2026-11-23T07:50:13+00:00,H100,dense,torch.matmul," \
                                             "1024x1024x1024,NT,fp16,fp32,229.04,1,0.009376,\n"
    legacy.write_text(old)
    assert history.read(legacy)[0]["seed"] == "" and history.read(legacy)[0]["tflops"] == "229.04"
    assert history.append(legacy, _random_data(count=2, seed=5)) > 0
    text = legacy.read_text()
    assert text.splitlines()[0] == ",".join(history.COLUMNS) and text.splitlines()[1] == old.splitlines()[1]
    assert [r["seed"] for r in history.read(legacy)][:2] == ["", "5"]


@pytest.mark.parametrize("args,says", [
    (["--suite", "random", "--seed", "-3"], "seed must be an integer >= 0"),
    (["--suite", "random", "--count", "0"], "count must be an integer >= 1"),
    (["--seed", "3"], "--seed and --count go with --suite random"),
    (["--suite", "random", "--shapes", "64x64x64"], "give one"),
    (["--layout", "NN,NT"], "a comma list of layouts is for --suite random"),
    (["--suite", "random", "--layout", "NN,XY"], "--layout takes NN, NT, TN, TT"),
    (["--suite", "random", "--kind", "sparse", "--layout", "TN"], "--kind sparse takes layouts"),
])
def test_cli_refuses_in_one_line(args, says, capsys):
    from compare.__main__ import main

    code = main(["bench", *args])
    err = capsys.readouterr()
    assert code == 2 and says in err.err and len(err.err.strip().splitlines()) == 1


def test_cli_prints_the_verdict_first(monkeypatch, tmp_path, capsys):
    """bench's first printed line is the A/A verdict (on recorded rows: the GPU work replaced), bench.json's first
    line too, the random suite's seed and count go into the environment and the history."""
    from compare import __main__ as cli, envinfo, frame

    monkeypatch.setattr(cli, "_gpu", lambda: True)
    monkeypatch.setattr(bench, "Timer", lambda flush: None)
    monkeypatch.setattr(frame, "measure", lambda timer: {"copy_gb_s": 3000.0})
    monkeypatch.setattr(envinfo.Sampler, "__enter__", lambda self: self)
    ratios = iter([1.06, 1.05, 1.04, 1.05])

    def fake_shape(kernels, m, n, k, *, layout, dtype, **kw):
        assert [x.name for x in kernels][0] == "torch.matmul"  # added though --kernels did not name it
        shape = (m, n, k, layout)
        return [_row("torch.matmul", shape, 1.0), _row(bench.CONTROL, shape, next(ratios)), _row("triton", shape, 0.9)]
    monkeypatch.setattr(bench, "bench_shape", fake_shape)
    hist = tmp_path / "h.csv"
    code = cli.main(["bench", "--suite", "random", "--seed", "8", "--count", "4", "--kernels", "triton", "--out",
                     str(tmp_path), "--history", str(hist)])
    out = capsys.readouterr().out
    assert code == 0 and out.splitlines()[0].startswith("UNRELIABLE RUN: the A/A control")
    assert "random suite, seed 8, 4 shapes" in out
    data = json.loads((tmp_path / "bench.json").read_text())
    assert (tmp_path / "bench.json").read_text().splitlines()[0].startswith('{"verdict": "UNRELIABLE RUN')
    assert data["environment"]["suite"] == {"name": "random", "seed": 8, "count": 4, "layouts": list(bench.LAYOUTS)}
    assert [(r["m"], r["n"], r["k"]) for r in data["rows"][::3]] == [s[:3] for s in bench.random_shapes(8, 4)]
    assert {r["seed"] for r in history.read(hist)} == {"8"}


@pytest.mark.gpu
def test_random_suite_end_to_end(tmp_path):
    """`bench --suite random --count 4` on the GPU: every shape timed for torch.matmul and its control, the
    verdict first, the map drawn from its bench.json."""
    res = subprocess.run([sys.executable, "-m", "compare", "bench", "--suite", "random", "--seed", "1", "--count", "4",
                          "--kernels", "triton", "--budget-ms", "10", "--out", str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    first = res.stdout.splitlines()[0]
    assert first.startswith(("Reliable run:", "UNRELIABLE RUN:")), first
    data = json.loads((tmp_path / "bench.json").read_text())
    assert data["environment"]["suite"]["seed"] == 1 and data["verdict"] == first
    timed = [r for r in data["rows"] if r["status"] == "ok"]
    assert {r["kernel"] for r in timed} >= {"torch.matmul", bench.CONTROL}
    assert sum(r["kernel"] == bench.CONTROL for r in timed) == 4
    assert all(r["samples"] >= 3 and r["spread_pct"] is not None for r in timed)
    assert [p.name for p in plot.plot_all(tmp_path, tmp_path)] == ["random_map.png"]


def test_main_job_times_a_small_random_draw():
    """The main job's plan (GPU only) holds a random section: the recommended entries over MAIN_RANDOM_COUNT
    shapes of seed MAIN_RANDOM_SEED, warmed beside the check like the other Triton entries; every count and the
    ETA include the A/A control."""
    from compare import report

    plan = report.bench_plan(False, "main", nvcc=False)
    (entries, shapes), = plan.random
    assert shapes == bench.random_shapes(report.MAIN_RANDOM_SEED, report.MAIN_RANDOM_COUNT)
    assert [k.name for k in entries] == [k.name for k in plan.suite[0][0]]  # the recommended entries
    warm = report._warm_jobs(plan)
    assert ("triton", "dense", *shapes[1][:3], shapes[1][3], "fp16") in warm
    assert plan.count() == sum((len(e) + 1) * len(s) for e, s in (*plan.suite, *plan.ladder, *plan.bf16,
                                                                    *plan.sparse, *plan.random))
    assert plan.eta_s(report.MAIN_JOB_BUDGET_MS) < plan.count() * report.SECONDS_PER_TIMED  # random: a smaller budget


def test_report_and_study_show_the_verdict_and_the_map(tmp_path):
    """A bench section of the report opens on its verdict (bold when unreliable) and its summary ends with it;
    the study page's random section shows the map copied beside the page, and says what it needs without it."""
    from compare import report, study

    rows = _random_rows()
    assert report.verdict_line(rows) == bench.aa_verdict(rows).line and report.verdict_line(rows).startswith("Rel")
    bad = [bench.BenchRow(**dict(r.as_dict(), ratio_to_torch=1.08)) if r.kernel == bench.CONTROL else r for r in rows]
    assert report.verdict_line(bad).startswith("**UNRELIABLE RUN")
    md = report.summary_markdown(rows)
    assert md.splitlines()[-1] == bench.aa_verdict(rows).line and bench.CONTROL not in md.splitlines()[2]
    assert "| `torch.matmul` | 1.000 | 1.000 | 1.000 | 100% | 1.000 | 3.0% | 12/12 |" in md
    assert "spread (p10-p90)" in report.bench_markdown(rows)
    (tmp_path / "random").mkdir()
    bench.write_bench(tmp_path / "random", _random_data()["environment"], rows)
    (tmp_path / "random" / "random_map.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    page = tmp_path / "page"
    text = study.random_html(tmp_path / "bench.json", page)
    assert '<img src="random/random_map.png"' in text and (page / "random" / "random_map.png").exists()
    assert 'class="verdict ok"' in text and "seed 3" in text and "<code>wgmma_persistent</code>" in text
    assert 'class="needs-gpu"' in study.random_html(None, page)
