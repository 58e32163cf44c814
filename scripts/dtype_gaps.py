"""Each kernel's ratio to torch.matmul in one dtype against the other, over several `compare bench --dtype fp16,bf16`
runs: the difference (second - first) per run, its mean over the runs, and the range of the first dtype's own
ratio across runs (how far one kernel's ratio moves between runs on the same board: the measurement's noise).

    python scripts/dtype_gaps.py RUN1/bench.csv RUN2/bench.csv ... [--first fp16 --second bf16]
"""
from __future__ import annotations

import argparse
import csv
import statistics
from types import SimpleNamespace

from compare.bench import dtype_gaps


def rows_of(path: str, dtype: str) -> list[SimpleNamespace]:
    """The timed rows of one dtype in a bench.csv, with the fields dtype_gaps reads."""
    out = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r.get("dtype", "fp16") == dtype and r["status"] == "ok" and r["ratio_to_torch"]:
                out.append(SimpleNamespace(kernel=r["kernel"], m=int(r["m"]), n=int(r["n"]), k=int(r["k"]),
                                           layout=r["layout"], ratio_to_torch=float(r["ratio_to_torch"])))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csvs", nargs="+")
    ap.add_argument("--first", default="fp16")
    ap.add_argument("--second", default="bf16")
    args = ap.parse_args()
    per_run = [{(kern, shape): (x, y) for kern, shape, x, y in dtype_gaps(rows_of(p, args.first),
                                                                          rows_of(p, args.second))}
               for p in args.csvs]
    keys = list(dict.fromkeys(key for run in per_run for key in run))
    keys.sort(key=lambda ks: (int(ks[1].split("x")[0]), ks[1]))
    head = " ".join(f"{'run' + str(i + 1):>7}" for i in range(len(per_run)))
    print(f"{'kernel':<20} {'shape':>15} {head} {'mean':>7} {args.first + ' range':>11}")
    worst = 0.0
    for kern, shape in keys:
        cells = [run.get((kern, shape)) for run in per_run]
        diffs = [y - x for x, y in (c for c in cells if c)]
        firsts = [x for x, _ in (c for c in cells if c)]
        mean = statistics.mean(diffs)
        worst = max(worst, abs(mean))
        shown = " ".join(f"{c[1] - c[0]:+7.3f}" if c else f"{'-':>7}" for c in cells)
        print(f"{kern:<20} {shape:>15} {shown} {mean:+7.3f} {max(firsts) - min(firsts):11.3f}")
    print(f"largest |mean difference|: {worst:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
