"""`python -m compare plot RESULTS`: PNG figures from a bench.json (TFLOPS vs size per family, ratio to
torch.matmul on the LLM shapes, wall time per call relative to torch.matmul's, the optimisation ladder at one
size; for a random suite, the map of each kernel's ratio over the shapes drawn)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from hgemm_common.errors import HgemmValueError  # noqa: E402

from .bench import CONTROL, SUITES, BenchRow, kernel_stats  # noqa: E402
from .registry import BASELINE  # noqa: E402

# Bar colour of each package in the ladder figure.
PACKAGE_COLOURS = {"ptx": "#ff7f0e", "triton": "#1f77b4", "torch": "#7f7f7f"}


def ladder() -> list:
    """The records in ladder order: the hand-written steps, the Triton kernels, the baseline last (record order
    within each package; each step adds one idea, see each kernel file's header). Triton's auto choice is left out:
    it times a kernel already on the ladder."""
    from .registry import records

    recs = [v for v in records() if not v.dispatch]
    return sorted(recs, key=lambda v: list(PACKAGE_COLOURS).index(v.package))


def load(path: Path) -> dict:
    path = Path(path)
    if path.is_dir():
        path = path / "bench.json"
    data = json.loads(path.read_text())
    if "rows" not in data or "environment" not in data:
        raise HgemmValueError(f"{path}: not a bench.json (needs 'rows' and 'environment')")
    return data


def _title(env: dict, what: str) -> str:
    dtype = env.get("plot_dtype", "fp16")
    return (f"{what} ({dtype} in/out)\n{env.get('gpu') or 'no GPU'} · {env.get('date', '')[:10]} · commit "
            f"{env.get('git_commit', '?')}")


def _png(data: dict, out: Path, stem: str) -> Path:
    """out/stem.png for fp16 rows, out/stem_bf16.png for bf16 rows (one set of figures per dtype)."""
    dtype = data["environment"].get("plot_dtype", "fp16")
    return out / (f"{stem}.png" if dtype == "fp16" else f"{stem}_{dtype}.png")


def _ok(rows):
    return [r for r in rows if r["status"] == "ok" and r.get("tflops")]


def plot_sizes(data: dict, out: Path) -> Path | None:
    """TFLOPS vs square size, one panel per kernel family, torch.matmul dashed in each."""
    rows = [r for r in _ok(data["rows"]) if r["m"] == r["n"] == r["k"]]
    sizes = sorted({r["m"] for r in rows})
    if len(sizes) < 2:
        return None
    order = [v.name for v in ladder()]
    families = [f for f in dict.fromkeys(v.family for v in ladder() if v.package != "torch")
                if any(r["family"] == f for r in rows)]
    base = {r["m"]: r["tflops"] for r in rows if r["kernel"] == BASELINE.name}
    fig, axes = plt.subplots(1, len(families), figsize=(5.5 * len(families), 4.6), squeeze=False)
    for ax, fam in zip(axes[0], families):
        names = sorted({r["kernel"] for r in rows if r["family"] == fam},
                       key=lambda n: (order.index(n.replace("_fp16acc", "")) if n.replace("_fp16acc", "") in order
                                      else 99, n))
        for name in names:
            pts = sorted((r["m"], r["tflops"]) for r in rows if r["kernel"] == name)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", linestyle="--" if "fp16acc" in name
                    else "-", label=name)
        if base:
            xs = sorted(base)
            ax.plot(xs, [base[x] for x in xs], color="black", linestyle=":", linewidth=2, label="torch.matmul")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(sizes, [str(s) for s in sizes])
        ax.set_xlabel("M = N = K")
        ax.set_ylabel(f"TFLOPS ({data['environment'].get('plot_dtype', 'fp16')} in/out)")
        ax.set_title(f"family: {fam}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(_title(data["environment"], "Square GEMMs: TFLOPS vs size (median, L2 flushed)"))
    fig.tight_layout()
    path = _png(data, out, "tflops_vs_size")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _ratio_heatmap(rows: list, shapes: list, field: str, label: str, title: str, path: Path) -> Path | None:
    """An annotated heat map of one ratio to torch.matmul, kernels (rows) by shapes (columns)."""
    rows = [r for r in rows if (r["m"], r["n"], r["k"]) in shapes and r.get(field)]
    if not rows:
        return None
    shapes = [s for s in shapes if any((r["m"], r["n"], r["k"]) == s for r in rows)]
    kernels = list(dict.fromkeys(r["kernel"] for r in rows if r["kernel"] not in (BASELINE.name, CONTROL)))
    grid = [[math.nan] * len(shapes) for _ in kernels]
    for r in rows:
        if r["kernel"] in kernels:
            grid[kernels.index(r["kernel"])][shapes.index((r["m"], r["n"], r["k"]))] = r[field]
    fig, ax = plt.subplots(figsize=(2.0 + 1.6 * len(shapes), 1.2 + 0.36 * len(kernels)))
    im = ax.imshow(grid, cmap="RdYlGn", vmin=0.0, vmax=1.2, aspect="auto")
    for i, row in enumerate(grid):
        for j, v in enumerate(row):
            ax.text(j, i, "-" if math.isnan(v) else f"{v:.2f}", ha="center", va="center", fontsize=8)
    ax.set_xticks(range(len(shapes)), [f"{m}x{n}x{k}" for m, n, k in shapes], rotation=20, fontsize=8)
    ax.set_yticks(range(len(kernels)), kernels, fontsize=8)
    ax.set_xlabel("M x N x K")
    fig.colorbar(im, ax=ax, label=label)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_llm(data: dict, out: Path) -> Path | None:
    """Ratio to torch.matmul on the LLM shapes, as an annotated heat map (kernels x shapes)."""
    return _ratio_heatmap(_ok(data["rows"]), [tuple(s) for s in SUITES["llm"]], "ratio_to_torch",
                          "x torch.matmul (same run)",
                          _title(data["environment"], "LLM shapes: speed relative to torch.matmul"),
                          _png(data, out, "ratio_llm"))


def plot_wall(data: dict, out: Path) -> Path | None:
    """Wall time per call relative to torch.matmul's, every shape of the run (kernels x shapes): where per-call
    host costs (validation, dispatch, descriptors, launch) show, beside the device-time ratios of the tables."""
    rows = _ok(data["rows"])
    shapes = list(dict.fromkeys((r["m"], r["n"], r["k"]) for r in rows))
    return _ratio_heatmap(rows, shapes, "wall_ratio_to_torch", "torch.matmul's wall time / this kernel's",
                          _title(data["environment"], "Wall time per call, back to back: relative to torch.matmul"),
                          _png(data, out, "ratio_wall"))


def plot_ladder(data: dict, out: Path, size: int = 4096) -> Path | None:
    """Each step of the ladder at size^3 (fp32 accumulation), with its gain over the previous step."""
    rows = {r["kernel"]: r for r in _ok(data["rows"]) if r["m"] == r["n"] == r["k"] == size}
    recs = {v.name: v for v in ladder()}
    steps = [n for n in recs if n in rows]
    if len(steps) < 2:
        return None
    vals = [rows[n]["tflops"] for n in steps]
    fig, ax = plt.subplots(figsize=(1.0 + 0.9 * len(steps), 4.8))
    colours = [PACKAGE_COLOURS[recs[n].package] for n in steps]
    ax.bar(range(len(steps)), vals, color=colours)
    for i, (n, v) in enumerate(zip(steps, vals)):
        prev = vals[i - 1] if i and recs[steps[i - 1]].family == recs[n].family else None
        gain = f"\nx{v / prev:.2f}" if prev else ""
        ax.text(i, v, f"{v:.0f}{gain}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(steps)), steps, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel(f"TFLOPS at {size}^3 (fp32 accumulation)")
    ax.set_yscale("log")
    ax.set_ylim(min(vals) / 2, max(vals) * 2.5)
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_title(_title(data["environment"], f"The ladder at {size}^3: each step and its gain over the previous"),
                 fontsize=9)
    fig.tight_layout()
    path = _png(data, out, "ladder")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# The random map's colours: the ratio to torch.matmul on a log scale centred at 1.0, clipped to RANDOM_RANGE (a
# kernel far below the range's floor shows in the floor's colour, as losing badly; the colour bar's arrows say so).
RANDOM_RANGE = (0.5, 2.0)
RANDOM_TICKS = (0.5, 0.67, 0.8, 1.0, 1.25, 1.5, 2.0)
MARKERS = {True: "o", False: "^"}  # M, N and K all multiples of 8, or not


def is_random(data: dict) -> bool:
    """Whether a bench.json holds a random suite (`bench --suite random`, the main job's random section)."""
    return (data["environment"].get("suite") or {}).get("name") == "random"


def plot_random(data: dict, out: Path) -> Path | None:
    """The random suite's map: one panel per kernel (the A/A control last, as the noise floor), each shape a point
    at (M, N*K) on log axes coloured by the kernel's ratio to torch.matmul (red slower, blue faster, white at 1.0),
    a circle where M, N and K are all multiples of 8 and a triangle where not; grey crosses mark shapes the kernel
    did not run. Titles carry geomean, p10, min and the share at or above the
    bench's bar (bench.kernel_stats)."""
    from matplotlib.colors import LogNorm
    from matplotlib.lines import Line2D

    rows = [r for r in data["rows"] if r["kernel"] != BASELINE.name]
    ok = _ok(rows)
    names = [n for n in dict.fromkeys(r["kernel"] for r in rows) if n != CONTROL]
    names += [CONTROL] if any(r["kernel"] == CONTROL for r in ok) else []
    names = [n for n in names if any(r["kernel"] == n and r.get("ratio_to_torch") for r in ok)]
    if not names:
        return None
    stats = {x.kernel: x for x in kernel_stats([BenchRow(**r) for r in data["rows"]])}
    cols = min(3, len(names))
    nrows = (len(names) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(5.2 * cols, 4.4 * nrows), squeeze=False, layout="constrained")
    norm = LogNorm(*RANDOM_RANGE, clip=True)
    legend = [Line2D([], [], marker=m, linestyle="", color="0.5", markeredgecolor="black", markeredgewidth=0.3,
                     label="M, N, K multiples of 8" if aligned else "not all multiples of 8")
              for aligned, m in MARKERS.items()]
    legend.append(Line2D([], [], marker="x", linestyle="", color="0.6", label="not run"))
    for ax in axes.flat[len(names):]:
        ax.axis("off")
    for ax, name in zip(axes.flat, names):
        mine = [r for r in ok if r["kernel"] == name and r.get("ratio_to_torch")]
        missed = [r for r in rows if r["kernel"] == name and r not in mine]
        for aligned, marker in MARKERS.items():
            pts = [r for r in mine if all(r[d] % 8 == 0 for d in "mnk") == aligned]
            if pts:
                ax.scatter([r["m"] for r in pts], [r["n"] * r["k"] for r in pts], c=[r["ratio_to_torch"] for r in pts],
                           cmap="RdBu", norm=norm, marker=marker, s=28, edgecolors="black", linewidths=0.3)
        if missed:
            ax.scatter([r["m"] for r in missed], [r["n"] * r["k"] for r in missed], marker="x", color="0.6", s=14)
        ax.legend(handles=legend, fontsize=6, loc="lower right")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("M")
        ax.set_ylabel("N x K")
        ax.grid(True, alpha=0.3)
        if name == CONTROL:
            ctrl = [r["ratio_to_torch"] for r in mine]
            g = math.exp(sum(math.log(x) for x in ctrl) / len(ctrl))
            ax.set_title(f"A/A control ({CONTROL}): the noise floor\ngeomean {g:.3f} · {min(ctrl):.3f} to "
                         f"{max(ctrl):.3f}", fontsize=8)
        else:
            x = stats[name]
            ax.set_title(f"{name}\ngeomean {x.geomean:.3f} · p10 {x.p10:.3f} · min {x.min:.3f} · "
                         f">= 0.95x {x.share:.0%} · {x.shapes}/{x.of} shapes", fontsize=8)
    bar = fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap="RdBu"), ax=axes.ravel().tolist(), extend="both",
                       label="x torch.matmul (device time, same run)")
    bar.set_ticks(RANDOM_TICKS, labels=[f"{t:g}" for t in RANDOM_TICKS])
    bar.minorticks_off()
    suite = data["environment"].get("suite") or {}
    fig.suptitle(_title(data["environment"], f"Random shapes (seed {suite.get('seed', '?')}, "
                                             f"{suite.get('count', '?')} shapes): ratio to torch.matmul"), fontsize=9)
    path = _png(data, out, "random_map")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_all(results: Path, out: Path) -> list[Path]:
    """Every figure, one set per dtype found in the rows (bf16 figures carry a `_bf16` suffix); a random suite's
    bench.json gets its map alone (its shapes are no sizes, LLM shapes or ladder, and a heat map of a hundred
    shapes reads as noise)."""
    data = load(results)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    pngs = []
    for dtype in dict.fromkeys(r.get("dtype", "fp16") for r in data["rows"]):
        part = {"environment": {**data["environment"], "plot_dtype": dtype},
                "rows": [r for r in data["rows"] if r.get("dtype", "fp16") == dtype]}
        figures = (plot_random,) if is_random(data) else (plot_sizes, plot_llm, plot_wall, plot_ladder)
        pngs += [p for p in (f(part, out) for f in figures) if p]
    return pngs
