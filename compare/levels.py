"""`python -m compare.levels`: the three levels of one Hopper GEMM side by side, from their sources and their
sm_90 compiles (no GPU): Triton (triton_kernels/tma_persistent.py: the compiler decides layouts, pipeline and warp
roles), Gluon (triton_kernels/gluon_persistent.py: we decide them, in Python) and inline PTX
(ptx_kernels/csrc/sm90/wgmma_persistent.cu: we decide everything). For each: lines of kernel source, the SASS
counts that tell the designs apart (`compare inspect`'s rows: HGMMA, UTMALDG, SYNCS, BAR), registers per
partition (setmaxnreg) and shared memory. Measured speed comes from `python -m compare bench` on the GPU: given its
bench.csv files (`--bench`), the table of TFLOPS and ratios per shape follows. The hand-written kernel needs nvcc.
`--schedule stream_k`: the same for the three stream-K kernels (triton_streamk, gluon_streamk, wgmma_streamk), one
schedule written at each level.
"""
from __future__ import annotations

import argparse
import csv
import re
import tempfile
from pathlib import Path

from hgemm_common.errors import HgemmValueError

ROOT = Path(__file__).resolve().parent.parent
CSRC = ROOT / "ptx_kernels" / "csrc"
LEVELS = (("Triton", "triton_tma"), ("Gluon", "gluon_persistent"), ("inline PTX", "wgmma_persistent"))
# The same three levels with one tile-to-program schedule each (`--schedule`): the persistent kernels' data-parallel
# rounds, and stream-K (hgemm_common/schedules.py's `stream_k_cut`, the rule each of these three runs).
SCHEDULES = {"data_parallel": LEVELS,
             "stream_k": (("Triton", "triton_streamk"), ("Gluon", "gluon_streamk"), ("inline PTX", "wgmma_streamk"))}


def code_lines(text: str, language: str) -> int:
    """Lines of code in a source text: not blank, not comments, and (Python) not docstrings. `language`: "python"
    or "cuda". Python docstrings are the string statements that open a module, class or function body (a string
    expression standing alone on its lines); CUDA comments are `//` lines and `/* ... */` blocks."""
    count = 0
    if language == "python":
        in_doc = None  # the closing quotes of the docstring being skipped
        for line in text.splitlines():
            s = line.strip()
            if in_doc:
                if in_doc in s:
                    in_doc = None
                continue
            if not s or s.startswith("#"):
                continue
            m = re.match(r'^[rRbBuU]?("""|\'\'\')', s)
            if m:
                q = m.group(1)
                if s.count(q) == 1:  # opens here, closes on a later line
                    in_doc = q
                continue
            count += 1
        return count
    if language == "cuda":
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        return sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith("//"))
    raise HgemmValueError(f"language must be 'python' or 'cuda', got {language!r}")


def cuda_includes(path: Path, seen: set[Path] | None = None) -> list[Path]:
    """The project headers (under ptx_kernels/csrc) a CUDA source includes, transitively, in first-seen order."""
    seen = set() if seen is None else seen
    out = []
    for name in re.findall(r'^\s*#include\s+"([^"]+)"', path.read_text(), flags=re.M):
        p = (CSRC / name).resolve()
        if p.exists() and p not in seen:
            seen.add(p)
            out += [p, *cuda_includes(p, seen)]
    return out


def triton_kernel_file(record) -> Path:
    """The file holding a Triton record's kernel: its own module, or the one whose kernel it launches
    (`gluon_streamk` runs `gluon_persistent`'s kernel in its stream-K mode). The record's file where the kernel
    cannot be reached here (Gluon under the interpreter)."""
    from triton_kernels.variants import kernel_module

    try:
        mod = kernel_module(record)
        fn = mod.inspect_source(mod.configs()[0])[0]
        return Path(getattr(fn, "fn", fn).__code__.co_filename)
    except Exception:  # noqa: BLE001 - an unavailable kernel: count the record's own module
        return ROOT / "triton_kernels" / record.file


def source_lines(record) -> tuple[int, int]:
    """(lines of the kernel's own file, lines of the project headers it includes) for a Triton or PTX record.
    Python kernels import their shared @jit helpers (common.py's grouped_pid, ...) and launch plumbing from the
    package: those are not counted, as the CUDA kernel's binding layer is not."""
    if record.package == "triton":
        return code_lines(triton_kernel_file(record).read_text(), "python"), 0
    path = CSRC / record.file
    headers = [p for p in cuda_includes(path) if "host" not in p.parts]  # the launch plumbing left out
    return code_lines(path.read_text(), "cuda"), sum(code_lines(p.read_text(), "cuda") for p in headers)


def rows(out: Path, levels: tuple = LEVELS) -> list[dict]:
    """One row per level (`levels`: one of SCHEDULES): source lines and the compile's facts (via `compare
    inspect`)."""
    from .disasm import run_inspect

    return facts(*run_inspect([name for _, name in levels], out), levels)


def facts(inspected: list, skipped: dict, levels: tuple = LEVELS) -> list[dict]:
    """`rows`' table from `compare inspect`'s rows and skips (the study page passes those it already holds). A
    level whose record is not offered here (the Gluon kernel under the interpreter) keeps its name and line count,
    with the reason in `skipped`."""
    from triton_kernels.variants import NOT_OFFERED, RECORDS

    from .registry import records

    by_name = {v.name: v for v in (*RECORDS, *records())}  # a Triton record not offered here is still counted
    by_row = {r.kernel: r for r in inspected}
    table = []
    for level, name in levels:
        own, headers = source_lines(by_name[name])
        r = by_row.get(name)
        table.append(dict(level=level, kernel=name, lines=own, header_lines=headers,
                          skipped=skipped.get(name) or (NOT_OFFERED.get(name) if r is None else None),
                          **({} if r is None else dict(
                              hgmma=r.mix["HGMMA"], utmaldg=r.mix["UTMALDG"], utmastg=r.mix["UTMASTG"],
                              syncs=r.mix["SYNCS"], bar=r.mix["BAR"], regs=r.registers, setmaxnreg=r.setmaxnreg,
                              smem=r.smem_static if r.smem_dynamic is None else r.smem_static + r.smem_dynamic,
                              smem_at_launch=r.smem_dynamic is None, local=r.local_bytes))))
    return table


def source_cell(r: dict) -> str:
    """A level's source lines, "(+ N)" for the project headers a CUDA source includes."""
    return f"{r['lines']}" + (f" (+ {r['header_lines']})" if r["header_lines"] else "")


def regs_cell(r: dict) -> str:
    """A compiled level's registers at launch, then the setmaxnreg targets its warpgroups move to."""
    return f"{r['regs']}" + (f"; {' / '.join(map(str, r['setmaxnreg']))}" if r["setmaxnreg"] else "")


def smem_cell(r: dict) -> str:
    """A compiled level's shared memory in bytes (the static part where the rest is sized at launch)."""
    return f"{r['smem']}" + (" static (the rest sized at launch)" if r["smem_at_launch"] else "")


def markdown(table: list[dict]) -> str:
    head = ("| level | kernel | source lines (+ headers) | HGMMA | UTMALDG | UTMASTG | SYNCS | BAR | registers "
            "(launch; setmaxnreg) | shared memory | local |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
    body = []
    for r in table:
        src = source_cell(r)
        if r.get("skipped") or "hgmma" not in r:
            body.append(f"| {r['level']} | `{r['kernel']}` | {src} | {r.get('skipped') or 'not compiled'} |"
                        " | | | | | | |")
            continue
        body.append(f"| {r['level']} | `{r['kernel']}` | {src} | {r['hgmma']} | {r['utmaldg']} | {r['utmastg']} | "
                    f"{r['syncs']} | {r['bar']} | {regs_cell(r)} | {smem_cell(r)} | {r['local']} |")
    return head + "\n".join(body) + "\n"


def measured(paths: list[Path], levels: tuple = LEVELS) -> list[dict]:
    """The three levels' timed rows of `python -m compare bench` CSVs (fp32 accumulation), one dict per (shape,
    layout, dtype) in the files' order: torch.matmul's TFLOPS and each level's TFLOPS and ratio to it (None where
    that kernel was not timed or did not pass)."""
    names = {name for _, name in levels}
    table: dict[tuple, dict] = {}
    for path in paths:
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if r["acc"] != "fp32" or (r["kernel"] != "torch.matmul" and r["kernel"] not in names):
                    continue
                key = (int(r["m"]), int(r["n"]), int(r["k"]), r["layout"], r.get("dtype") or "fp16")
                row = table.setdefault(key, dict(zip(("m", "n", "k", "layout", "dtype"), key)))
                ok = r["status"] == "ok" and r["tflops"]
                row[r["kernel"]] = (float(r["tflops"]), float(r["ratio_to_torch"])) if ok else None
    return list(table.values())


def measured_markdown(table: list[dict], levels: tuple = LEVELS) -> str:
    """One line per shape: torch.matmul's TFLOPS, each level's TFLOPS and ratio to torch.matmul, Gluon over PTX."""
    head = ("| shape (M x N x K) | layout | dtype | torch.matmul TFLOPS | "
            + " | ".join(f"{level} `{name}` TFLOPS (x torch)" for level, name in levels)
            + " | Gluon / inline PTX |\n|" + "---|" * (5 + len(levels)) + "\n")
    body = []
    for r in table:
        torch_ = r.get("torch.matmul")
        cells = [f"{torch_[0]:.1f}" if torch_ else "-"]
        cells += [f"{t:.1f} ({x:.3f})" if t is not None else "-"
                  for t, x in (r.get(name) or (None, None) for _, name in levels)]
        g, w = r.get(levels[1][1]), r.get(levels[2][1])
        cells.append(f"{g[1] / w[1]:.3f}" if g and w else "-")
        body.append(f"| {r['m']} x {r['n']} x {r['k']} | {r['layout']} | {r['dtype']} | " + " | ".join(cells) + " |")
    return head + "\n".join(body) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m compare.levels", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="folder for the PTX/SASS files (default: a temporary one)")
    ap.add_argument("--bench", nargs="*", default=[], metavar="CSV",
                    help="bench.csv files of `python -m compare bench` runs with the three levels' kernels: "
                         "their measured table follows the compiled one")
    ap.add_argument("--measured-only", action="store_true", help="only the measured table (no compile, no GPU)")
    ap.add_argument("--schedule", choices=sorted(SCHEDULES), default="data_parallel",
                    help="the three levels' kernels of one schedule: the persistent kernels (default) or stream-K")
    args = ap.parse_args(argv)
    levels = SCHEDULES[args.schedule]
    if not args.measured_only:
        with tempfile.TemporaryDirectory() as tmp:
            print(markdown(rows(Path(args.out or tmp), levels)), end="")
    if args.bench:
        table = measured([Path(p) for p in args.bench], levels)
        print(("\n" if not args.measured_only else "") + measured_markdown(table, levels), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
