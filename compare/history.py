"""The measured history: one append-only CSV of every timed row, across runs and commits.

`python -m compare bench --history FILE` appends the run's rows to FILE; `python -m compare plot --history FILE`
draws each kernel's ratio to torch.matmul over time. The project's own history is docs/results/history.csv.

One line per timed (kernel, shape, layout, dtype, accumulation) of one run, with the run's commit, date and device
from the bench.json environment, and the suite it timed (a random suite's seed and count, which draw its shapes
again). Rows the bench did not time (skipped, failed check) are left out. Appending a run that is already in the
file adds nothing, so a run can be appended twice without harm.

The suite columns came last, after lines had been written without them: a file whose header lacks them
(LEGACY_COLUMNS) is read as it is, its lines' suite columns empty, and the first append writes the full header over
its first line; no recorded line is rewritten.
"""
from __future__ import annotations

import csv
import io
import json
import math
from datetime import datetime
from pathlib import Path

from hgemm_common.errors import HgemmValueError

LEGACY_COLUMNS = ("commit", "date", "device", "kind", "kernel", "shape", "layout", "dtype", "acc", "tflops", "x_torch",
                  "device_ms", "wall_us")
COLUMNS = LEGACY_COLUMNS + ("suite", "seed", "count")
# What makes a line unique: the same run (commit, date, device) timing the same case.
KEY = ("commit", "date", "device", "kind", "kernel", "shape", "layout", "dtype", "acc")


def _num(x, digits: int) -> str:
    """A recorded number, rounded for the CSV; empty where the run did not record it."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return ""
    return f"{x:.{digits}g}"


def rows_from_bench(data: dict) -> list[dict]:
    """The history lines of one bench.json (its parsed dict: 'environment' and 'rows').

    Runs from before the harness recorded a dtype, a problem kind or wall time took fp16 dense problems only and
    timed no wall clock: their lines say fp16, dense and leave wall_us empty; runs from before it recorded the suite
    leave the suite columns empty."""
    if "rows" not in data or "environment" not in data:
        raise HgemmValueError("not a bench.json (needs 'rows' and 'environment')")
    env = data["environment"]
    suite = env.get("suite") or {}
    out = []
    for r in data["rows"]:
        if r.get("status") != "ok" or not r.get("tflops"):
            continue
        out.append({
            "commit": env.get("git_commit", ""), "date": env.get("date", ""), "device": env.get("gpu") or "",
            "kind": r.get("kind", "dense"), "kernel": r["kernel"], "shape": f"{r['m']}x{r['n']}x{r['k']}",
            "layout": r["layout"], "dtype": r.get("dtype", "fp16"), "acc": r["acc"],
            "tflops": _num(r["tflops"], 5), "x_torch": _num(r.get("ratio_to_torch"), 4),
            "device_ms": _num(r.get("median_ms"), 5), "wall_us": _num(r.get("wall_us"), 4),
            "suite": suite.get("name", ""), "seed": str(suite.get("seed", "")), "count": str(suite.get("count", "")),
        })
    return out


def _header(path: Path) -> tuple[str, ...] | None:
    """The columns of the history CSV at path (None: absent or empty); a file with other columns is refused."""
    if not path.exists() or path.stat().st_size == 0:
        return None
    with open(path, newline="") as f:
        head = tuple(next(csv.reader(f), ()))
    if head not in (COLUMNS, LEGACY_COLUMNS):
        raise HgemmValueError(f"{path}: not a history CSV (its columns are {list(head)}, expected "
                              f"{', '.join(COLUMNS)})")
    return head


def read(path: Path) -> list[dict]:
    """Every line of a history CSV (an absent file: none), each with every column of COLUMNS (those a line from
    before the suite columns lacks: empty). A file with other columns is refused, not mixed in."""
    path = Path(path)
    if _header(path) is None:
        return []
    with open(path, newline="") as f:
        return [{c: r.get(c) or "" for c in COLUMNS} for r in csv.DictReader(f)]


def append(path: Path, data: dict) -> int:
    """Append one bench.json's lines to the history CSV at path (created with its header if absent; a legacy header
    replaced by the full one first); lines of a run already in the file are not written again. Returns how many
    lines were written."""
    path = Path(path)
    head = _header(path)
    seen = {tuple(r[c] for c in KEY) for r in read(path)}
    new = [r for r in rows_from_bench(data) if tuple(r[c] for c in KEY) not in seen]
    if not new:
        return 0
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    if head is None:
        w.writeheader()
    w.writerows(new)
    path.parent.mkdir(parents=True, exist_ok=True)
    if head == LEGACY_COLUMNS:  # the new header over the old one, every recorded line as it was, in one replace
        text = path.read_text()
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(",".join(COLUMNS) + "\n" + text[text.index("\n") + 1:])
        tmp.replace(path)
    with open(path, "a", newline="") as f:  # one write: a reader never sees half a run's header
        f.write(buf.getvalue())
    return len(new)


def append_files(path: Path, bench_files) -> int:
    """Append several bench.json files, oldest run first (by the date each recorded)."""
    datas = [json.loads(Path(p).read_text()) for p in bench_files]
    datas.sort(key=lambda d: d.get("environment", {}).get("date", ""))
    return sum(append(path, d) for d in datas)


def plot(path: Path, out: Path, *, layout: str = "NN", dtype: str = "fp16", kind: str = "dense",
         max_shapes: int = 6, max_kernels: int = 8) -> Path:
    """out/history.png: ratio to torch.matmul against run date, one panel per shape (the most often timed ones),
    one line per kernel (the most often timed ones), for one layout, dtype and problem kind."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in read(path) if r["layout"] == layout and r["dtype"] == dtype and r["kind"] == kind
            and r["x_torch"] and not r["kernel"].startswith("torch.")]
    if not rows:
        raise HgemmValueError(f"{path}: no timed {kind} {dtype} {layout} rows to draw")

    def most(col: str, n: int) -> list[str]:
        counts: dict[str, int] = {}
        for r in rows:
            counts[r[col]] = counts.get(r[col], 0) + 1
        return sorted(counts, key=lambda v: -counts[v])[:n]

    shapes, kernels = most("shape", max_shapes), most("kernel", max_kernels)
    cols = min(3, len(shapes))
    nrows = (len(shapes) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(5.5 * cols, 3.8 * nrows), squeeze=False)
    for ax in axes.flat[len(shapes):]:
        ax.axis("off")
    for ax, shape in zip(axes.flat, shapes):
        for kern in kernels:
            pts = sorted((datetime.fromisoformat(r["date"]), float(r["x_torch"])) for r in rows
                         if r["shape"] == shape and r["kernel"] == kern and r["date"])
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=kern)
        ax.axhline(1.0, color="black", linestyle=":", linewidth=1)
        ax.set_title(shape, fontsize=9)
        ax.set_ylabel("x torch.matmul (device time)")
        ax.tick_params(axis="x", labelrotation=60, labelsize=6)
    axes.flat[0].legend(fontsize=6)
    fig.suptitle(f"{Path(path).name}: {kind} {dtype} {layout}, ratio to torch.matmul in the same run", fontsize=10)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    png = out / "history.png"
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return png
