"""The measured history (compare/history.py) on recorded data: bench.json -> CSV lines, append-only and idempotent,
`plot --history`, and the project's own docs/results/history.csv."""
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compare import history

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "tests" / "data" / "bench_h100_sample.json"


def _sample() -> dict:
    return json.loads(SAMPLE.read_text())


def test_rows_from_recorded_bench():
    data = _sample()
    rows = history.rows_from_bench(data)
    timed = [r for r in data["rows"] if r["status"] == "ok" and r["tflops"]]
    assert len(rows) == len(timed) > 0
    first, rec = rows[0], timed[0]
    assert set(first) == set(history.COLUMNS)
    assert first["device"] == data["environment"]["gpu"] and first["date"] == data["environment"]["date"]
    assert first["shape"] == f"{rec['m']}x{rec['n']}x{rec['k']}" and first["kernel"] == rec["kernel"]
    assert float(first["tflops"]) == pytest.approx(rec["tflops"], rel=1e-4)
    assert float(first["x_torch"]) == pytest.approx(rec["ratio_to_torch"], rel=1e-3)
    # a run from before the harness recorded dtype, kind and wall time: fp16, dense, wall_us empty
    assert first["dtype"] == "fp16" and first["kind"] == "dense" and first["wall_us"] == ""


def test_rows_skip_untimed_and_refuse_other_json():
    data = _sample()
    data["rows"][0] = dict(data["rows"][0], status="failed check", tflops=None)
    assert len(history.rows_from_bench(data)) == len(history.rows_from_bench(_sample())) - 1
    with pytest.raises(ValueError, match="bench.json"):
        history.rows_from_bench({"rows": []})


def test_append_is_append_only_and_idempotent(tmp_path):
    path = tmp_path / "h.csv"
    n = history.append(path, _sample())
    assert n > 0 and len(history.read(path)) == n
    before = path.read_text()
    assert history.append(path, _sample()) == 0 and path.read_text() == before  # the same run again: nothing
    later = _sample()
    later["environment"] = dict(later["environment"], date="2026-12-01T00:00:00+00:00", git_commit="abc1234")
    assert history.append(path, later) == n
    assert path.read_text().startswith(before)  # old lines untouched, new ones after them
    with open(path, newline="") as f:
        assert tuple(next(csv.reader(f))) == history.COLUMNS


def test_read_refuses_a_foreign_csv(tmp_path):
    path = tmp_path / "bench.csv"
    path.write_text("kernel,m,n\nx,1,2\n")
    with pytest.raises(ValueError, match="not a history CSV"):
        history.read(path)
    with pytest.raises(ValueError):
        history.append(path, _sample())


def test_plot_history_cli(tmp_path):
    csv_path = tmp_path / "h.csv"
    history.append(csv_path, _sample())
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    res = subprocess.run([sys.executable, "-m", "compare", "plot", "--history", str(csv_path), "--out",
                          str(tmp_path / "fig")], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "fig" / "history.png").stat().st_size > 10_000


def test_bench_has_history_flag():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    res = subprocess.run([sys.executable, "-m", "compare", "bench", "--help"], capture_output=True, text=True,
                         env=env, timeout=300)
    assert res.returncode == 0 and "--history" in res.stdout


def test_project_history_csv():
    """docs/results/history.csv: the columns, and every line a timed row of a named commit and device."""
    rows = history.read(ROOT / "docs" / "results" / "history.csv")
    assert len(rows) > 1000
    for r in rows:
        assert r["commit"] and r["date"] and r["device"] and float(r["tflops"]) > 0
        m, n, k = (int(x) for x in r["shape"].split("x"))
        assert m > 0 and n > 0 and k > 0
    dates = [r["date"] for r in rows]
    assert dates == sorted(dates)  # appended oldest run first
