"""`python -m compare study [KERNEL ...]`: the study as one offline page, `index.html` in a folder you can open or
zip (no CDN, no network when viewed: the CSS and JS sit beside it, the pictures are local files).

- the ladders: each step with what it adds, and what changed from the step before: the instruction mix (delta),
  registers, shared memory; with a bench.json (a GPU ran it) its TFLOPS, ratio to torch.matmul and gain per dtype.
- side by side, two kernels at a time (default pairs below, any two from the selectors): source, PTX and SASS with
  the main loop located and shown first, the instruction classes coloured the same in every column; under them the
  instruction-mix bars, registers (with the setmaxnreg split), shared memory, spills and occupancy.
- the fragment maps (`python -m compare layouts`'s pictures) and, where a GPU ran the probes, their verdict.
- ncu metrics where a GPU and ncu produced them (ncu.json beside the bench.json).
- the random suite's map (random/ beside the bench.json, as the main job writes it): each kernel's ratio to
  torch.matmul over shapes nobody chose.

Every instruction the page shows and colours is read by the parsers `compare inspect` counts with
(ptx_kernels/toolchain.py: sass_instructions, ptx_instructions, instruction_class, main_loop); the compiles are
`compare inspect`'s, reused from its folder when given one. Pygments highlights the CUDA and Python sources; it is
an optional extra (`pip install tensorcore-hgemm[study]`), imported only here.
"""
from __future__ import annotations

import functools
import html
import json
import math
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from hgemm_common.errors import HgemmError, error_line
from ptx_kernels import toolchain

from . import disasm

ROOT = Path(__file__).resolve().parent.parent
ASSETS = Path(__file__).resolve().parent / "study_assets"
DEFAULT_PAIRS = (("triton_blocked", "mma_stmatrix"), ("triton_tma", "wgmma_persistent"))
# The ladders in the order a reader climbs them: (title, families); steps are the records' order in the registry.
LADDERS = (("mma.sync ladder (sm_80 and up): CUDA cores, WMMA, mma.sync", ("simt", "wmma", "mma")),
           ("Hopper ladder (sm_90a): TMA, mbarriers, wgmma", ("wgmma",)),
           ("Triton ladder", ("triton",)))
CLASS_NAMES = {"tensor": "tensor core", "tma": "TMA", "mbarrier": "mbarrier", "shared": "shared load/store",
               "global": "global load/store", "local": "local (spills)", "control": "barriers / control"}
# What one H100 SM offers (CUDA occupancy calculator's sm_90 numbers): the occupancy estimate below.
SM90 = dict(regs=65536, reg_unit=256, smem=233472, threads=2048, blocks=32)
EXCERPT_LINES = 160  # the most source lines shown around the main loop before the whole file


class MissingExtra(RuntimeError):
    pass


def _pygments():
    try:
        import pygments  # noqa: F401
    except ImportError as e:
        raise MissingExtra("the study page highlights sources with Pygments: pip install "
                           "'tensorcore-hgemm[study]' (or pip install pygments)") from e
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import CudaLexer, PythonLexer

    return highlight, HtmlFormatter, CudaLexer, PythonLexer


# ---------------------------------------------------------------------------------------------------- the model --
@dataclass
class Listing:
    """One kernel's PTX or SASS: its text, the parsed instructions and the main loop (instruction indices)."""
    text: str
    instrs: list
    loop: list
    isa: str  # "sass" | "ptx"

    @property
    def loop_lines(self) -> tuple[int, int] | None:
        return (self.loop[0].line, self.loop[-1].line) if self.loop else None


@dataclass
class KernelStudy:
    row: disasm.InspectRow
    record: object
    sass: Listing
    ptx: Listing
    source: Path | None  # the file of the kernel function (from the PTX's first .loc)
    loop_source_lines: list[int]  # the source lines the PTX main loop's .locs point at, in that file
    helper: tuple[Path, list[int]] | None  # the project file (not a PTX wrapper) most of the loop's other lines are in
    ptx_source: dict[int, str]  # PTX text line -> "file:line" it comes from
    threads: int | None
    stats: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.row.kernel

    @property
    def stem(self) -> str:
        return re.sub(r"[^\w.-]", "_", self.name)


def _local(path: str) -> Path | None:
    """A source path from a PTX .file (perhaps another machine's checkout) as a file of this checkout."""
    for pkg in ("triton_kernels", "ptx_kernels"):  # this checkout's copy first: Triton's cache keeps the path
        if f"/{pkg}/" in path:                     # of whichever checkout compiled it first
            cand = ROOT / pkg / path.rsplit(f"/{pkg}/", 1)[1]
            if cand.exists():
                return cand
    return Path(path) if Path(path).exists() else None


def study_kernel(row: disasm.InspectRow, inspect_dir: Path, record) -> KernelStudy:
    sass_text = (inspect_dir / row.sass_file).read_text()
    sass_instrs = toolchain.sass_instructions(sass_text)
    sass = Listing(sass_text, sass_instrs, toolchain.main_loop(sass_instrs, toolchain.sass_labels(sass_text)), "sass")
    ptx_module = (inspect_dir / row.ptx_file).read_text()
    fn = row.function or None
    if fn is None:  # an inspect.json from before rows named their function: the SASS header names it
        m = re.search(r"Function\s*:\s*(\S+)", sass_text)
        fn = m and m.group(1)
    try:
        body = toolchain.ptx_function(ptx_module, fn)
    except KeyError:
        body = toolchain.ptx_function(ptx_module)
    ptx_instrs = toolchain.ptx_instructions(body)
    ptx = Listing(body, ptx_instrs, toolchain.main_loop(ptx_instrs, toolchain.ptx_labels(body), isa="ptx"), "ptx")
    files = toolchain.ptx_files(ptx_module)
    locs = toolchain.ptx_locations(body, files)
    kernel_file = locs[0][1][0][0] if locs else ""
    loop_lines, where, current = {}, {}, None
    span = ptx.loop_lines
    loc_at = dict(locs)
    for i in range(len(body.splitlines())):
        if i in loc_at:
            current = loc_at[i]
            if span and span[0] <= i <= span[1]:
                for f, n in current:
                    if n > 0:
                        loop_lines.setdefault(f, set()).add(n)
        elif current:
            f, n = current[0]
            where[i] = f"{Path(f).name}:{n}"
    m = re.search(r"\.(?:maxntid|reqntid)\s+(\d+)(?:,\s*(\d+))?(?:,\s*(\d+))?", body)
    threads = math.prod(int(x) for x in m.groups() if x) if m else None
    helpers = [(_local(f), sorted(ns)) for f, ns in loop_lines.items() if f != kernel_file]
    helpers = [(p, ns) for p, ns in helpers if p and ROOT in p.resolve().parents and p.parent.name != "ptx"]
    helper = max(helpers, key=lambda h: len(h[1]), default=None)
    return KernelStudy(row, record, sass, ptx, _local(kernel_file) if kernel_file else None,
                       sorted(loop_lines.get(kernel_file, ())), helper, where, threads)


def _record_smem_estimate(record) -> int | None:
    """A hand-written pipelined kernel takes its shared memory at launch (not in the cubin): at least the operand
    ring its record's tile and stages imply, stages x (BM + BN) x BK halves."""
    if record is None or record.package != "ptx" or record.stages < 2:
        return None
    bm, bn, bk = record.block
    return record.stages * (bm + bn) * bk * 2


def occupancy(regs: int, threads: int | None, smem: int | None) -> tuple[int | None, str]:
    """Blocks per SM on an H100 and what limits them: registers (allocated per warp in units of 256), threads,
    shared memory (with the 1 KB the driver reserves per block; `smem` includes it) and the 32-block cap."""
    if not threads:
        return None, "threads per block unknown"
    warps = -(-threads // 32)
    per_warp = -(-regs * 32 // SM90["reg_unit"]) * SM90["reg_unit"]
    limits = {"registers": SM90["regs"] // (per_warp * warps) if per_warp else SM90["blocks"],
              "threads": SM90["threads"] // threads, "block cap": SM90["blocks"]}
    if smem is not None:
        limits["shared memory"] = SM90["smem"] // max(smem, 1)
    by = min(limits, key=limits.get)
    return limits[by], by


def stats_of(k: KernelStudy) -> dict:
    r = k.row
    smem_known = r.smem_static + (r.smem_dynamic or 0)
    estimate = _record_smem_estimate(k.record) if r.smem_dynamic is None else None
    if estimate is not None and r.smem_static >= estimate:  # static buffers hold the ring (wmma_async_dbuf)
        estimate = None
    smem_total = smem_known + estimate if estimate else smem_known
    blocks, limit = occupancy(r.registers, k.threads, smem_total)
    return {"registers": r.registers, "setmaxnreg": r.setmaxnreg, "threads": k.threads,
            "smem_static": r.smem_static, "smem_dynamic": r.smem_dynamic, "smem_estimate": estimate,
            "local_bytes": r.local_bytes, "LDL": r.mix.get("LDL", 0), "STL": r.mix.get("STL", 0),
            "blocks_per_sm": blocks, "limit": limit,
            "warps_per_sm": blocks * -(-k.threads // 32) if blocks and k.threads else None}


# ---------------------------------------------------------------------------------------------------- rendering --
_SASS_TOKEN = re.compile(r"(?P<reg>\bU?R(?:\d+|Z)\b|\bU?P(?:\d|T)\b|\bSR_\w+)"
                         r"|(?P<imm>-?\b0x[0-9a-f]+\b|-?\b\d+(?:\.\d+)?\b)|(?P<const>\bc\[[^\]]*\]\[[^\]]*\])")
_PTX_TOKEN = re.compile(r"(?P<reg>%\w+(?:\.\w)?)|(?P<imm>-?\b0[xX][0-9a-fA-F]+\b|-?\b\d+(?:\.\d+)?\b)"
                        r"|(?P<lbl>\$L\w+)")


_SPECIAL = re.compile(r"[&<>\"']")  # what html.escape changes


def _span(m: re.Match) -> str:
    return f'<span class="{m.lastgroup}">{m.group()}</span>'


def _tokens(text: str, pattern: re.Pattern) -> str:
    """The small PTX/SASS operand formatter: registers, immediates, constants and labels get a class."""
    if not _SPECIAL.search(text):  # nothing to escape (nearly every line): one substitution
        return pattern.sub(_span, text)
    out, pos = [], 0
    for m in pattern.finditer(text):
        out.append(html.escape(text[pos:m.start()]))
        out.append(f'<span class="{m.lastgroup}">{html.escape(m.group())}</span>')
        pos = m.end()
    out.append(html.escape(text[pos:]))
    return "".join(out)


def _op_span(ins, isa: str) -> str:
    cls = toolchain.instruction_class(ins.op, isa)
    key = ins.base if isa == "sass" else ins.op
    return (f'<span class="op{" k-" + cls if cls else ""}" data-op="{html.escape(key)}">'
            f"{html.escape(ins.op)}</span>")


def _render(lst: Listing, lo: int = 0, hi: int | None = None, mark: tuple[int, int] | None = None,
            where: dict[int, str] | None = None) -> str:
    """Text lines lo..hi of a listing: each instruction with its mnemonic coloured by class and its operands
    formatted (SASS: its offset; PTX: the source line it comes from as a title), labels; PTX's directives dimmed,
    its .loc and comments left out, as are SASS's headers and encodings."""
    lines = lst.text.splitlines()
    hi = len(lines) - 1 if hi is None else hi
    by_line = {i.line: i for i in lst.instrs if lo <= i.line <= hi}
    out = []
    for n in range(lo, hi + 1):
        ins = by_line.get(n)
        cls = "line ml" if mark and mark[0] <= n <= mark[1] else "line"
        if ins is not None:
            pred = f'<span class="pred">{html.escape(ins.pred)}</span> ' if ins.pred else ""
            if lst.isa == "sass":
                off = f"{ins.offset:04x}" if ins.offset is not None else ""
                out.append(f'<span class="{cls}"><span class="ln">{off:>5}</span> {pred}{_op_span(ins, "sass")} '
                           f"{_tokens(ins.args, _SASS_TOKEN)}</span>")
            else:
                title = f' title="{html.escape(where[n])}"' if where and n in where else ""
                out.append(f'<span class="{cls}"{title}>    {pred}{_op_span(ins, "ptx")} '
                           f"{_tokens(ins.args, _PTX_TOKEN)};</span>")
            continue
        code = lines[n].split("//")[0].rstrip()
        if re.match(r"^\s*\$?[.\w$]+:\s*$", code):
            out.append(f'<span class="{cls} lbl">{html.escape(code.strip())}</span>')
        elif lst.isa == "ptx" and code.strip() and not code.strip().startswith(".loc"):
            out.append(f'<span class="{cls} dir">{html.escape(code)}</span>')
    return "\n".join(out)


def _highlight_lines(path: Path) -> list[str]:
    """The file highlighted by Pygments, one balanced HTML string per line."""
    return list(_highlighted(path.read_text(), path.suffix == ".py"))


@functools.lru_cache(maxsize=64)
def _highlighted(text: str, python: bool) -> tuple[str, ...]:
    """_highlight_lines of a text, once per text (a helper file such as triton_kernels/common.py shows under
    several kernels)."""
    highlight, HtmlFormatter, CudaLexer, PythonLexer = _pygments()
    out = highlight(text, PythonLexer() if python else CudaLexer(), HtmlFormatter(nowrap=True)).split("\n")
    return tuple(out[:len(text.splitlines())])


def _excerpt(lines: list[str], marked: set[int], around: int = 2) -> str:
    """The marked lines with `around` lines either side, the runs between them folded to a '⋯' line (at most
    EXCERPT_LINES shown), or the file's head if none is marked."""
    if not marked:
        return _render_source(lines, 1, min(len(lines), EXCERPT_LINES), marked)
    shown = sorted({n for m in marked for n in range(m - around, m + around + 1) if 1 <= n <= len(lines)})
    shown = shown[:EXCERPT_LINES]
    out, prev = [], None
    for n in shown:
        if prev is not None and n > prev + 1:
            out.append(f'<span class="line fold">{"⋯":>6} {n - prev - 1} lines</span>')
        out.append(_render_source(lines, n, n, marked))
        prev = n
    return "\n".join(out)


def _render_source(lines: list[str], lo: int, hi: int, marked: set[int]) -> str:
    return "\n".join(f'<span class="line{" ml" if n in marked else ""}"><span class="ln">{n:>4}</span> '
                     f"{lines[n - 1]}</span>" for n in range(lo, hi + 1))


def _rel(path: Path | None) -> str:
    if path is None:
        return "?"
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def _pane(kind: str, title: str, head: str, main: str, full: str, full_summary: str, name: str) -> str:
    return (f'<div class="pane" data-pane="{kind}" data-kernel="{html.escape(name)}">'
            f'<div class="pane-head"><b>{title}</b> {head}</div>'
            f'<pre class="listing main" data-listing="{kind}-main">{main}</pre>'
            f'<details><summary>{full_summary}</summary>'
            f'<pre class="listing full" data-listing="{kind}-full">{full}</pre></details></div>')


def _mix_summary(instrs, isa: str) -> str:
    counts = {}
    for i in instrs:
        c = toolchain.instruction_class(i.op, isa)
        if c:
            counts[c] = counts.get(c, 0) + 1
    return " ".join(f'<span class="chip k-{c}">{CLASS_NAMES[c]} {counts[c]}</span>' for c in toolchain.CLASSES
                    if c in counts)


def source_pane(k: KernelStudy) -> str:
    if k.source is None:
        return _pane("src", "source", "not found in this checkout", "", "", "whole file", k.name)
    lines = _highlight_lines(k.source)
    marked = set(k.loop_source_lines)
    main = _excerpt(lines, marked)
    if marked:
        head = (f"<code>{_rel(k.source)}</code> · main loop: lines {min(marked)}–{max(marked)} (what the PTX loop's "
                ".locs point at)")
    else:
        head = f"<code>{_rel(k.source)}</code> · no loop found in the PTX"
    if k.helper:  # the loop's body lives in a helper the kernel calls (Triton's dot_k_loop, the ladder's blocks/)
        path, ns = k.helper
        head += f"; and in <code>{_rel(path)}</code> lines {ns[0]}–{ns[-1]}"
        main += (f'\n<span class="line lbl">{html.escape(_rel(path))}</span>\n'
                 + _excerpt(_highlight_lines(path), set(ns)))
    return _pane("src", "source", head, main, _render_source(lines, 1, len(lines), marked),
                 f"whole file ({len(lines)} lines)", k.name)


def ptx_pane(k: KernelStudy) -> str:
    lst, span = k.ptx, k.ptx.loop_lines
    if span:
        head = f"main loop: {len(lst.loop)} instructions " + _mix_summary(lst.loop, "ptx")
        main = _render(lst, span[0] - 1, span[1], span, k.ptx_source)
    else:
        head, main = "no loop found", ""
    return _pane("ptx", "PTX", head, main, _render(lst, mark=span, where=k.ptx_source),
                 f"whole function ({len(lst.instrs)} instructions)", k.name)


def sass_pane(k: KernelStudy) -> str:
    lst, span = k.sass, k.sass.loop_lines
    if span:
        head = f"main loop: {len(lst.loop)} instructions " + _mix_summary(lst.loop, "sass")
        main = _render(lst, span[0] - 1, span[1], span)
    else:
        head, main = "no loop found", ""
    return _pane("sass", "SASS (sm_90)", head, main, _render(lst, mark=span),
                 f"whole function ({len(lst.instrs)} instructions)", k.name)


def _kb(n: int | None) -> str:
    return "-" if n is None else f"{n / 1024:.1f} KB"


def stats_card(k: KernelStudy) -> str:
    s = k.stats
    regs = str(s["registers"]) + (f" at launch; setmaxnreg moves warpgroups to {' / '.join(map(str, s['setmaxnreg']))} "
                                  "(producer / consumers)" if s["setmaxnreg"] else "")
    if s["smem_dynamic"] is not None:
        smem = f"{_kb(s['smem_static'])} static + {_kb(s['smem_dynamic'])} dynamic (Triton's pipeline)"
    elif s["smem_estimate"]:
        smem = (f"{_kb(s['smem_static'])} static + at least {_kb(s['smem_estimate'])} dynamic, set at launch "
                "(the operand ring the record's tile and stages imply)")
    else:
        smem = f"{_kb(s['smem_static'])} static"
    spills = ("none" if not (s["local_bytes"] or s["LDL"] or s["STL"]) else
              f"{s['local_bytes']} B local memory, {s['LDL']} LDL / {s['STL']} STL")
    occ = ("-" if s["blocks_per_sm"] is None else
           f"{'≤ ' if s['smem_estimate'] else ''}{s['blocks_per_sm']} block(s) per SM, {s['warps_per_sm']} warps "
           f"of 64, limited by {s['limit']}")
    rows = [("registers / thread", regs), ("threads / block", s["threads"] or "-"), ("shared memory", smem),
            ("spills", spills), ("occupancy (H100)", occ)]
    body = "".join(f"<tr><th>{a}</th><td>{b}</td></tr>" for a, b in rows)
    return (f'<div class="stats" data-kernel="{html.escape(k.name)}"><table class="stats-table">{body}</table>'
            f'<p class="note">{html.escape(k.row.source)}; {html.escape(k.record.adds if k.record else "")}</p></div>')


def mix_bars(k: KernelStudy, scale: dict[str, int]) -> str:
    """The inspect table's columns for one kernel as bars, each scaled to that column's largest count on the page
    (so two kernels' bars compare), coloured by instruction class."""
    rows = []
    for col in disasm.COLUMNS:
        n = k.row.mix.get(col, 0)
        cls = toolchain.instruction_class(col, "sass") or "other"
        width = 100 * n / scale[col] if scale.get(col) else 0
        rows.append(f'<div class="bar-row"><span class="bar-label">{col}</span><span class="bar-track">'
                    f'<span class="bar k-{cls}" style="width:{width:.1f}%"></span></span>'
                    f'<span class="bar-n" data-col="{col}" data-count="{n}">{n}</span></div>')
    return (f'<div class="bars" data-kernel="{html.escape(k.name)}"><div class="bars-head">static SASS instruction '
            f'mix (the inspect table\'s columns)</div>{"".join(rows)}</div>')


def kernel_parts(k: KernelStudy, scale: dict[str, int]) -> dict[str, str]:
    return {"name": k.name, "src": source_pane(k), "ptx": ptx_pane(k), "sass": sass_pane(k), "stats": stats_card(k),
            "bars": mix_bars(k, scale)}


PARTS = ("src", "ptx", "sass", "stats", "bars")


def pair_html(left: dict, right: dict, pid: str) -> str:
    cells = "".join(f'<div class="cell part-{p}" data-side="{side}">{part[p]}</div>'
                    for p in PARTS for side, part in (("left", left), ("right", right)))
    return (f'<div class="pair" id="{pid}"><div class="cell head" data-side="left"><h3>{html.escape(left["name"])}'
            f'</h3></div><div class="cell head" data-side="right"><h3>{html.escape(right["name"])}</h3></div>'
            f"{cells}</div>")


# --------------------------------------------------------------------------------------------------- the ladders --
def load_bench(path: Path | None) -> dict[str, list[dict]]:
    """dtype -> the ok rows of a bench.json (a file or the folder holding it) and of a bf16/bench.json beside it,
    as the main job writes them."""
    if path is None:
        return {}
    path = Path(path)
    files = [path / "bench.json" if path.is_dir() else path]
    files.append(files[0].parent / "bf16" / "bench.json")
    out: dict[str, list[dict]] = {}
    for f in files:
        if not f.exists():
            continue
        for r in json.loads(f.read_text())["rows"]:
            if r.get("status") == "ok" and r.get("tflops"):
                out.setdefault(r.get("dtype", "fp16"), []).append(r)
    return out


def _geomean(xs: list[float]) -> float | None:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def measured(rows: list[dict], name: str, prev: str | None) -> dict | None:
    """One step's numbers in one dtype: geometric means over its shapes of TFLOPS and of the ratio to
    torch.matmul, and its gain over the previous step (geomean of TFLOPS ratios on the shapes both ran)."""
    mine = {(r["m"], r["n"], r["k"]): r for r in rows if r["kernel"] == name}
    if not mine:
        return None
    out = {"tflops": _geomean([r["tflops"] for r in mine.values()]),
           "ratio": _geomean([r["ratio_to_torch"] for r in mine.values() if r.get("ratio_to_torch")]),
           "shapes": len(mine), "gain": None}
    if prev:
        theirs = {(r["m"], r["n"], r["k"]): r for r in rows if r["kernel"] == prev}
        common = [s for s in mine if s in theirs]
        out["gain"] = _geomean([mine[s]["tflops"] / theirs[s]["tflops"] for s in common])
    return out


def mix_delta(row, prev) -> str:
    if prev is None:
        return ""
    parts = [(c, row.mix.get(c, 0) - prev.mix.get(c, 0)) for c in disasm.COLUMNS]
    return " ".join(f'<span class="chip k-{toolchain.instruction_class(c, "sass") or "other"}">{c} {d:+d}</span>'
                    for c, d in parts if d)


def _delta(a, b, fmt=str) -> str:
    if b is None:
        return fmt(a)
    d = a - b
    return f"{fmt(a)} <small>({'+' if d > 0 else ''}{fmt(d)})</small>" if d else fmt(a)


def ladder_plot(steps: list[KernelStudy], bench: dict[str, list[dict]]) -> str:
    """An SVG per ladder: with a bench, each step's geomean ratio to torch.matmul per dtype; without one, what each
    step's main loop is made of (instruction classes, a share of its SASS instructions)."""
    w, bar_h, gap, left = 640, 16, 6, 150
    rows = []
    if bench:
        dtypes = sorted(bench)
        vals = {(k.name, d): (measured(bench[d], k.name, None) or {}).get("ratio") for k in steps for d in dtypes}
        top = max([v for v in vals.values() if v] + [1.0])
        y = 20
        for k in steps:
            for j, d in enumerate(dtypes):
                v = vals[(k.name, d)]
                bw = 0 if not v else (w - left - 60) * v / top
                rows.append(f'<text x="{left - 6}" y="{y + 12}" text-anchor="end">{html.escape(k.name)} {d}</text>'
                            f'<rect class="dt{j}" x="{left}" y="{y}" width="{bw:.1f}" height="{bar_h}"/>'
                            f'<text x="{left + bw + 4:.1f}" y="{y + 12}">{"-" if not v else f"{v:.2f}x"}</text>')
                y += bar_h + 2
            y += gap
        x1 = left + (w - left - 60) / top
        rows.append(f'<line x1="{x1:.1f}" x2="{x1:.1f}" y1="10" y2="{y}" class="one"/>'
                    f'<text x="{x1:.1f}" y="10" text-anchor="middle">torch.matmul</text>')
        title = "geomean ratio to torch.matmul over the bench's shapes"
    else:
        y = 20
        for k in steps:
            n = len(k.sass.loop) or 1
            x = left
            for c in (*toolchain.CLASSES, ""):
                cnt = sum(toolchain.instruction_class(i.op, "sass") == c for i in k.sass.loop)
                bw = (w - left - 10) * cnt / n
                if cnt:
                    rows.append(f'<rect class="k-{c or "other"}" x="{x:.1f}" y="{y}" width="{bw:.1f}" '
                                f'height="{bar_h}"><title>{CLASS_NAMES.get(c, "other")}: {cnt}</title></rect>')
                x += bw
            rows.append(f'<text x="{left - 6}" y="{y + 12}" text-anchor="end">{html.escape(k.name)}</text>')
            y += bar_h + gap
        title = "what each step's SASS main loop is made of (share of its instructions per class)"
    return (f'<figure class="plot"><svg viewBox="0 0 {w} {y + 10}" width="{w}" height="{y + 10}" role="img">'
            f'{"".join(rows)}</svg><figcaption>{title}</figcaption></figure>')


def ladders_html(studies: dict[str, KernelStudy], bench: dict[str, list[dict]], bench_path) -> str:
    out = ['<section id="ladders"><h2>The ladders</h2>']
    if bench:
        out.append(f'<p>Measured: <code>{html.escape(str(bench_path))}</code> ({", ".join(sorted(bench))}). TFLOPS '
                   "and × torch.matmul are geometric means over the shapes each step ran; gain is the geometric mean "
                   "of its TFLOPS over the previous step's on the shapes both ran.</p>")
    else:
        out.append('<p class="needs-gpu">Not measured here: TFLOPS, the ratio to torch.matmul and each step\'s gain '
                   "need a CUDA GPU. The main job (<code>python -m compare</code>) writes this page with them; or "
                   "<code>python -m compare bench --dtype fp16,bf16 --out results</code> then <code>python -m compare "
                   "study --bench results/bench.json</code>. The static columns below need no GPU.</p>")
    dtypes = sorted(bench)
    for title, families in LADDERS:
        steps = [k for k in studies.values() if k.record is not None and k.record.family in families]
        if not steps:
            continue
        head = ["step", "adds", "tile", "regs", "smem (static + dynamic)", "instruction mix vs the step before"]
        for d in dtypes:
            head += [f"{d} TFLOPS", f"{d} × torch", f"{d} gain"]
        body = []
        for i, k in enumerate(steps):
            prev = steps[i - 1] if i else None
            smem = k.row.smem_static + (k.row.smem_dynamic or 0)
            psmem = prev.row.smem_static + (prev.row.smem_dynamic or 0) if prev else None
            cells = [f"<code>{html.escape(k.name)}</code>", html.escape(k.record.adds), html.escape(k.record.tile),
                     _delta(k.row.registers, prev.row.registers if prev else None),
                     _delta(smem, psmem, _kb) if k.row.smem_dynamic is not None or not k.stats.get("smem_estimate")
                     else f"{_kb(smem)} + dynamic at launch", mix_delta(k.row, prev.row if prev else None)]
            for d in dtypes:
                m = measured(bench[d], k.name, prev.name if prev else None)
                cells += (["-"] * 3 if m is None else
                          [f"{m['tflops']:.1f}", f"{m['ratio']:.3f}" if m["ratio"] else "-",
                           f"{m['gain']:.2f}×" if m["gain"] else "-"])
            body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        out.append(f"<h3>{html.escape(title)}</h3>" + ladder_plot(steps, bench) +
                   f'<table class="ladder"><thead><tr>{"".join(f"<th>{h}</th>" for h in head)}</tr></thead>'
                   f"<tbody>{''.join(body)}</tbody></table>")
    out.append("</section>")
    return "\n".join(out)


# ------------------------------------------------------------------------------ fragment maps, ncu, inspect table --
def _maps_to_draw(out: Path, layouts_dir: Path | None) -> bool:
    """Whether the page's fragment maps must be drawn here (no `compare layouts` folder to copy, none drawn yet)."""
    dest = out / "layouts"
    given = layouts_dir and Path(layouts_dir).resolve() != dest.resolve() and Path(layouts_dir, "layouts.md").exists()
    return not given and not (dest / "layouts.md").exists()


def fragments_html(out: Path, layouts_dir: Path | None) -> str:
    from .layouts import draw_all

    dest = out / "layouts"
    if _maps_to_draw(out, layouts_dir):
        draw_all(dest)
    elif not (dest / "layouts.md").exists():
        shutil.copytree(layouts_dir, dest, dirs_exist_ok=True)
    md = (dest / "layouts.md").read_text()
    probes = re.findall(r"^\| ([^|]+?) \| (yes|NO) \| ([^|]*)\|", md, re.MULTILINE)
    if probes:
        gpu = re.search(r"## On the hardware \(([^)]*)\)", md)
        bad = [p for p in probes if p[1] == "NO"]
        where = html.escape(gpu.group(1) if gpu else "the GPU")
        verdict = (f'<p class="verdict {"bad" if bad else "ok"}">Probes on {where}: '
                   + (f"{len(bad)} of {len(probes)} differ from the model: {', '.join(p[0] for p in bad)}" if bad else
                      f"all {len(probes)} forms agree with the model") + "</p>")
    else:
        verdict = ('<p class="needs-gpu">The hardware probe verdict needs a CUDA GPU (<code>python -m compare layouts '
                   "--hardware</code>, or the main job on a GPU); the pictures are the model's, which the CPU tests "
                   "check against the PTX ISA.</p>")
    imgs = "".join(f'<figure><img src="layouts/{p.name}" alt="{p.stem}"><figcaption>{p.stem}</figcaption></figure>'
                   for p in sorted(dest.glob("*.png")))
    return f'<section id="fragments"><h2>Fragment maps</h2>{verdict}<div class="figs">{imgs}</div></section>'


NCU_METRICS = {"sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": "tensor pipe (mma.sync)",
               "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active": "tensor pipe (wgmma)",
               "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum": "shared bank conflicts",
               "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved occupancy %",
               "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM throughput %",
               "lts__t_sectors.avg.pct_of_peak_sustained_elapsed": "L2 throughput %"}


NCU_DURATION = "gpu__time_duration.sum"
NCU_SHAPE = (4096, 4096, 4096)  # the problem each kernel is profiled on: the inspect specialization's


def ncu_target(name: str, m: int, n: int, k: int) -> None:
    """What `ncu` runs for one kernel (`python -c`): a warm-up call (compile, plan), then one call inside the NVTX
    range "study" that collect_ncu profiles."""
    import torch

    from . import registry
    from .bench import make_inputs

    (kern,) = [x for x in registry.select([name]) if x.name == name]
    a, b = make_inputs(m, n, k, "NN", device="cuda", seed=0, kind="randn")
    kern.run(a, b, None)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("study")
    kern.run(a, b, None)
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()


def parse_ncu_csv(text: str) -> dict[str, float]:
    """`ncu --csv --page details` output of one profiled call: metric -> value of the NCU_METRICS (thousands
    separators dropped) for the longest kernel the call launched (a split-K call launches a reduction too)."""
    import csv
    import io

    lines = text[text.index('"ID"'):] if '"ID"' in text else ""
    launches: dict[str, dict[str, float]] = {}
    for row in csv.DictReader(io.StringIO(lines)):
        name, value = row.get("Metric Name"), (row.get("Metric Value") or "").replace(",", "")
        if (name in NCU_METRICS or name == NCU_DURATION) and re.fullmatch(r"-?\d+(\.\d+)?", value):
            launches.setdefault(row["ID"], {})[name] = float(value)
    longest = max(launches.values(), key=lambda m: m.get(NCU_DURATION, 0.0), default={})
    return {m: v for m, v in longest.items() if m in NCU_METRICS}


def collect_ncu(kernels: list[str], out: Path, shape=NCU_SHAPE, log=lambda line: None) -> Path:
    """Profile one call of each kernel with Nsight Compute (needs a CUDA GPU and `ncu` on PATH, and permission to
    read the GPU's counters) into out/ncu.json, which the page's profiler section shows."""
    import subprocess
    import sys

    ncu = shutil.which("ncu")
    if ncu is None:
        raise FileNotFoundError("ncu (Nsight Compute) is not on PATH")
    data = {}
    for name in kernels:
        code = f"from compare.study import ncu_target; ncu_target({name!r}, {', '.join(map(str, shape))})"
        cmd = [ncu, "--csv", "--page", "details", "--nvtx", "--nvtx-include", "study/", "--metrics",
               ",".join([*NCU_METRICS, NCU_DURATION]), sys.executable, "-c", code]
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=disasm._child_env())
        data[name] = parse_ncu_csv(res.stdout) if res.returncode == 0 else {
            "error": (res.stderr.strip().splitlines() or [f"exit status {res.returncode}"])[-1]}
        log(f"ncu {name}: {data[name]}")
    f = Path(out) / "ncu.json"
    f.write_text(json.dumps({"shape": list(shape), "kernels": data}, indent=1))
    return f


def ncu_html(bench_path: Path | None, out: Path) -> str:
    """ncu.json (collect_ncu) in the page's folder or beside the bench.json, when a GPU run wrote one."""
    places = [Path(out) / "ncu.json"]
    if bench_path:
        p = Path(bench_path)
        places.append((p if p.is_dir() else p.parent) / "ncu.json")
    f = next((p for p in places if p.exists()), None)
    if f is None:
        return ('<section id="ncu"><h2>Profiler metrics</h2><p class="needs-gpu">Need a CUDA GPU and Nsight Compute '
                "(<code>ncu</code> on PATH): <code>python -m compare study --ncu</code> profiles one "
                f"{'x'.join(map(str, NCU_SHAPE))} call of each kernel on the page for "
                + ", ".join(f"<code>{m}</code>" for m in NCU_METRICS) + ".</p></section>")
    raw = json.loads(f.read_text())
    data = raw.get("kernels", raw)
    head = "".join(f"<th>{v}</th>" for v in NCU_METRICS.values())
    body = "".join(f"<tr><td><code>{html.escape(k)}</code></td>"
                   + (f'<td colspan="{len(NCU_METRICS)}">{html.escape(v["error"])}</td>' if "error" in v else
                      "".join(f"<td>{v[m]:.4g}</td>" if m in v else "<td>-</td>" for m in NCU_METRICS))
                   + "</tr>" for k, v in data.items())
    shape = "x".join(map(str, raw.get("shape", ()))) or "one"
    return (f'<section id="ncu"><h2>Profiler metrics</h2><p>Nsight Compute on one {shape} call of each kernel (its '
            f"longest launch), from <code>{html.escape(f.name)}</code> (<code>python -m compare study --ncu</code>)."
            "</p>"
            f'<table class="ncu"><thead><tr><th>kernel</th>{head}</tr></thead><tbody>{body}</tbody></table></section>')


def levels_html(rows: list, skipped: dict, bench_rows: dict[str, list[dict]]) -> str:
    """One GEMM written at three levels, per schedule (compare.levels.SCHEDULES: the persistent kernels'
    data-parallel rounds, then stream-K), side by side: source lines and the SASS facts that tell the designs apart,
    from the page's inspect rows, and each kernel's geomean ratio to torch.matmul over the shapes the bench timed it
    on (fp16), where a GPU run gave one."""
    from . import levels as lv

    fp16 = bench_rows.get("fp16", [])
    tables = []
    for schedule, levels in lv.SCHEDULES.items():
        body = []
        for r in lv.facts(rows, skipped, levels):
            m = measured(fp16, r["kernel"], None)
            speed = f"{m['ratio']:.3f} ({m['shapes']} shapes)" if m and m["ratio"] else "-"
            head = (f"<td>{html.escape(r['level'])}</td><td><code>{html.escape(r['kernel'])}</code></td>"
                    f"<td>{html.escape(lv.source_cell(r))}</td>")
            if "hgmma" not in r:
                why = r.get("skipped") or "not inspected in this build"
                body.append(f'<tr>{head}<td colspan="7">{html.escape(why)}</td><td>{speed}</td></tr>')
                continue
            cells = (r["hgmma"], r["utmaldg"], r["utmastg"], r["syncs"], r["bar"], lv.regs_cell(r), lv.smem_cell(r))
            body.append(f"<tr>{head}" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells)
                        + f"<td>{speed}</td></tr>")
        title = {"data_parallel": "data-parallel", "stream_k": "stream-K"}.get(schedule, schedule)
        tables.append(f"<h3>{html.escape(title)}</h3><table><thead><tr><th>level</th>"
                      "<th>kernel</th><th>source lines (+ headers)</th><th>HGMMA</th><th>UTMALDG</th><th>UTMASTG</th>"
                      "<th>SYNCS</th><th>BAR</th><th>registers (launch; setmaxnreg)</th><th>shared memory</th>"
                      "<th>x torch.matmul</th></tr></thead><tbody>" + "".join(body) + "</tbody></table>")
    return ('<section id="levels"><h2>One GEMM at three levels</h2><p>The same Hopper GEMM written in Triton (the '
            "compiler decides layouts, pipeline and warp roles), in Gluon (we decide them, in Python) and in CUDA "
            "with inline PTX (we decide everything), once per tile-to-program schedule: data-parallel rounds of a "
            "persistent grid, and stream-K (the partial round's tiles cut into k-slices aligned in K, one rule "
            "at every level: <code>hgemm_common.schedules.stream_k_cut</code>). <code>python -m compare.levels "
            "[--schedule stream_k]</code> prints the same tables; docs/design/levels.md reads them.</p>"
            + "".join(tables) + "</section>")


def random_html(bench_path: Path | None, out: Path) -> str:
    """The random suite's map and its summary (bench.kernel_stats, the A/A verdict) from random/bench.json beside
    the bench.json, when a GPU run wrote one (the main job does); its PNGs copied into the page's folder."""
    from . import bench as bench_mod
    from .plot import is_random, load

    src = None if bench_path is None else (Path(bench_path) if Path(bench_path).is_dir() else
                                           Path(bench_path).parent) / "random"
    data = load(src) if src is not None and (src / "bench.json").exists() else None
    if data is None or not is_random(data):
        return ('<section id="random"><h2>Random shapes</h2><p class="needs-gpu">Needs a CUDA GPU: the main job '
                "(<code>python -m compare</code>) times a small draw of the random suite and this section shows its "
                "map; <code>python -m compare bench --suite random --seed S --count N</code> times a larger one."
                "</p></section>")
    rows = [bench_mod.BenchRow(**r) for r in data["rows"]]
    verdict = bench_mod.aa_verdict(rows)
    dest = Path(out) / "random"
    dest.mkdir(parents=True, exist_ok=True)
    imgs = ""
    for png in sorted(src.glob("random_map*.png")):
        shutil.copy(png, dest / png.name)
        imgs += f'<figure><img src="random/{png.name}" alt="{png.stem}"><figcaption>{png.stem}</figcaption></figure>'
    body = "".join(f"<tr><td><code>{html.escape(x.kernel)}</code></td><td>{x.geomean:.3f}</td><td>{x.p10:.3f}</td>"
                   f"<td>{x.min:.3f}</td><td>{x.share:.0%}</td><td>{x.shapes}/{x.of}</td></tr>"
                   for x in bench_mod.kernel_stats(rows))
    suite = data["environment"]["suite"]
    return (f'<section id="random"><h2>Random shapes</h2><p class="verdict {"ok" if verdict.reliable else "bad"}">'
            f"{html.escape(verdict.line)}</p><p>{suite.get('count')} shapes of the random suite, seed "
            f"{suite.get('seed')}: M log-uniform in 1..16384, N and K in 256..32768, every other shape rounded to "
            "multiples of 8. Each point of a map is a shape, placed by M and N x K and coloured by the kernel's ratio "
            "to torch.matmul.</p><table><thead><tr><th>kernel</th><th>geomean x torch.matmul</th><th>p10</th>"
            f"<th>min</th><th>&ge; {bench_mod.SHARE_AT}x</th><th>shapes</th></tr></thead><tbody>{body}</tbody>"
            f'</table><div class="figs">{imgs}</div></section>')


def inspect_table(rows: list[disasm.InspectRow], skipped: dict[str, str], dumps: str) -> str:
    head = ["kernel", "regs", "smem static", "smem dynamic", "local", *disasm.COLUMNS]
    body = []
    for r in rows:
        regs = str(r.registers) + (f" ({' / '.join(map(str, r.setmaxnreg))})" if r.setmaxnreg else "")
        cells = [f"<code>{html.escape(r.kernel)}</code>", regs, str(r.smem_static),
                 "-" if r.smem_dynamic is None else str(r.smem_dynamic), str(r.local_bytes),
                 *(str(r.mix.get(c, 0)) for c in disasm.COLUMNS)]
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    th = "".join(f'<th class="k-{toolchain.instruction_class(h, "sass") or "none"}">{h}</th>' for h in head)
    note = "".join(f"<p>Not inspected here, {html.escape(why)}: {html.escape(name)}.</p>"
                   for name, why in skipped.items())
    return (f'<section id="inspect"><h2>Instruction mix of every kernel</h2><p>The table <code>python -m compare '
            f'inspect</code> prints (static SASS counts; its PTX and SASS in <code>{html.escape(dumps)}/</code>).</p>'
            f'<table class="inspect"><thead><tr>{th}</tr></thead><tbody>{"".join(body)}</tbody></table>{note}'
            "</section>")


def legend() -> str:
    return '<p class="legend">' + " ".join(f'<span class="chip k-{c}">{n}</span>' for c, n in CLASS_NAMES.items()) + \
        ' <span class="chip k-other">other (arithmetic, moves)</span> · tinted lines: the main loop</p>'


# -------------------------------------------------------------------------------------------------------- build --
def _rows(kernels: list[str] | None, out: Path, inspect_dir: Path | None, log,
          progress=None) -> tuple[list, dict, Path]:
    """Inspect rows for `kernels`: from inspect_dir's inspect.json where it has them all, else a fresh inspect into
    out/inspect (disasm.run_inspect: rows cached per source and toolchain, compiles in ptx_kernels.toolchain's cubin
    and PTX cache and Triton's own)."""
    if inspect_dir and (Path(inspect_dir) / "inspect.json").exists():
        rows, skipped = disasm.load(Path(inspect_dir))
        have = {r.kernel for r in rows}
        if not kernels or all(k in have for k in kernels):
            rows = [r for r in rows if not kernels or r.kernel in kernels]
            return rows, skipped, Path(inspect_dir)
        log(f"{inspect_dir} lacks some of {kernels}: inspecting again")
    log(f"inspecting {len(disasm.targets(kernels or None))} kernels into {out / 'inspect'} (Triton for sm_90, nvcc "
        f"for sm_90a; each row kept in {disasm.cache_dir()} for the next run)")
    rows, skipped = disasm.run_inspect(kernels or None, out / "inspect", progress=progress)
    return rows, skipped, out / "inspect"


def _missing_html(missing: dict[str, str]) -> str:
    """The page's first lines when parts are missing: which, and the error that cost each."""
    if not missing:
        return ""
    items = "".join(f"<li><code>{html.escape(part)}</code>: {html.escape(line)}</li>" for part, line in missing.items())
    return (f'<div class="missing"><p>This page is incomplete: these parts failed, and the page was built without '
            f"them.</p><ul>{items}</ul></div>")


def _part(name: str, missing: dict[str, str], make, empty: str = ""):
    """make() for one part of the page; `empty` in its place when an earlier phase failed to make its data, or when
    it raises here (kept in `missing` under `name`)."""
    if name in missing:
        return empty
    try:
        return make()
    except Exception as e:  # noqa: BLE001 - the page goes without the part and names it at its top
        missing[name] = error_line(e)
        return empty


def build(out: Path, kernels: list[str] | None = None, bench: Path | None = None, inspect_dir: Path | None = None,
          layouts_dir: Path | None = None, pairs: list[tuple[str, str]] | None = None, log=lambda line: None,
          missing: dict[str, str] | None = None, progress=None) -> Path:
    """Write the study page into `out` (index.html, study.css, study.js, kernels/*.js, layouts/, inspect/ when
    inspected here); returns index.html's path. log(line): what it is doing; progress(done, total): the inspect's
    rows as they arrive.

    The page is built from what there is. `missing`: the parts an earlier phase failed to make, by the main job's
    phase names ("inspect", "fragment maps"), each with its error line; the page goes without them (no fresh inspect
    when inspect failed: the rows inspect_dir holds, if any) and names them at its top. The dict is updated in place
    with the parts this build could not make itself ("inspect", "kernel NAME", "fragment maps", "ladders", "profiler
    metrics", "three levels"), so that the caller can report them."""
    from concurrent.futures import ThreadPoolExecutor

    from triton_kernels.variants import BY_NAME as TRITON
    from ptx_kernels.variants import BY_NAME as PTX

    from .envinfo import git_commit

    _pygments()  # fail before any work if the extra is missing
    if kernels:
        disasm.targets(kernels)  # an unknown name is the caller's error (UnknownKernel), not a missing part
    missing = {} if missing is None else missing
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    # fragment maps to draw (matplotlib) go beside the inspect, whose compiles are nvcc and ptxas subprocesses; maps
    # that fail here are drawn again by their part below, which names the error
    with ThreadPoolExecutor(max_workers=1) as side:
        maps = None
        if "fragment maps" not in missing and _maps_to_draw(out, layouts_dir):
            from .layouts import draw_all

            log(f"drawing the fragment maps into {out / 'layouts'}")
            maps = side.submit(draw_all, out / "layouts")
        if "inspect" in missing:  # what inspect wrote before it failed (a partial inspect.json), else no kernel rows
            have = inspect_dir and (Path(inspect_dir) / "inspect.json").exists()
            rows, skipped = disasm.load(Path(inspect_dir)) if have else ([], {})
            idir = Path(inspect_dir) if have else out / "inspect"
        else:
            rows, skipped, idir = _part("inspect", missing, lambda: _rows(kernels, out, inspect_dir, log, progress),
                                        ([], {}, out / "inspect"))
        if maps is not None and maps.exception() is not None:
            shutil.rmtree(out / "layouts", ignore_errors=True)
    log(f"writing the page: {len(rows)} kernels")
    records = {**TRITON, **PTX}
    studies = {}
    for r in rows:
        def one(r=r):
            k = study_kernel(r, idir, records.get(r.kernel))
            k.stats = stats_of(k)
            return k
        k = _part(f"kernel {r.kernel}", missing, one, None)
        if k is not None:
            studies[k.name] = k
    scale = {c: max((k.row.mix.get(c, 0) for k in studies.values()), default=0) for c in disasm.COLUMNS}
    (out / "kernels").mkdir(exist_ok=True)
    parts = {}
    for k in list(studies.values()):
        part = _part(f"kernel {k.name}", missing, lambda k=k: kernel_parts(k, scale), None)
        if part is None:
            del studies[k.name]
            continue
        parts[k.name] = part
        (out / "kernels" / f"{k.stem}.js").write_text("STUDY.put(" + json.dumps(parts[k.name]) + ");\n")
    names = list(studies)
    pairs = [p for p in (pairs or DEFAULT_PAIRS) if p[0] in studies and p[1] in studies]
    if not pairs and len(names) >= 2:
        pairs = [(names[0], names[1])]
    bench_rows = _part("ladders", missing, lambda: load_bench(bench), {})
    pair_sections = "".join(
        f'<h3 class="pair-title">{html.escape(a)} ↔ {html.escape(b)}</h3>{pair_html(parts[a], parts[b], f"pair{i}")}'
        for i, (a, b) in enumerate(pairs))
    options = "".join(f'<option value="{html.escape(n)}">{html.escape(n)}</option>' for n in names)
    stems = {k.name: k.stem for k in studies.values()}
    custom = (f'<h3 class="pair-title">Any two kernels</h3><p class="pick">left <select id="pick-left">{options}'
              f'</select> right <select id="pick-right">{options}</select></p><div class="pair" id="custom"></div>')
    shutil.copy(ASSETS / "study.js", out / "study.js")
    _, HtmlFormatter, _, _ = _pygments()
    (out / "study.css").write_text((ASSETS / "study.css").read_text() + "\n/* Pygments */\n" +
                                   HtmlFormatter().get_style_defs(".src"))
    commit = git_commit()
    sections = {"ladders": lambda: ladders_html(studies, bench_rows, bench),
                "three levels": lambda: levels_html(rows, skipped, bench_rows),
                "fragment maps": lambda: fragments_html(out, layouts_dir),
                "random shapes": lambda: random_html(bench, out),
                "profiler metrics": lambda: ncu_html(bench, out)}
    ladders, three_levels, fragments, random_shapes, ncu = (_part(name, missing, make)
                                                           for name, make in sections.items())
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>tensorcore-hgemm: the study</title><link rel="stylesheet" href="study.css"></head>
<body>
<header><h1>Triton and PTX side by side: one GEMM, two routes, source to SASS</h1>
<p>Written by <code>python -m compare study</code> at commit <code>{html.escape(commit)}</code> from
<code>compare inspect</code>'s compiles (sm_90: Triton through <code>triton.compile</code>, the hand-written kernels
through nvcc for sm_90a). {len(studies)} kernels.</p>
{_missing_html(missing)}
<nav><a href="#ladders">ladders</a> · <a href="#levels">three levels</a> · <a href="#side">side by side</a> ·
<a href="#fragments">fragment maps</a> ·
<a href="#random">random shapes</a> · <a href="#ncu">profiler metrics</a> · <a href="#inspect">instruction mix</a>
</nav></header>
<main>
{ladders}
{three_levels}
<section id="side"><h2>Side by side</h2>
<p>Each kernel's source, PTX and SASS, the main loop first (the loop with the most tensor-core instructions; its
source lines are those the PTX loop's <code>.loc</code> directives name), the whole listing under it. The same
colours mark the same instruction classes in every column:</p>{legend()}
<div class="src">{pair_sections}{custom}</div></section>
{fragments}
{random_shapes}
{ncu}
{inspect_table(rows, skipped, os.path.relpath(idir, out))}
</main>
<script>const STUDY_KERNELS = {json.dumps(stems)};
const STUDY_PAIR = {json.dumps(list(pairs[-1]) if pairs else [])};</script>
<script src="study.js"></script>
</body></html>
"""
    index = out / "index.html"
    index.write_text(page)
    return index


# ------------------------------------------------------------------------------------------ headless chromium --
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  # the network off: every host name fails to resolve and any request goes to a closed port
                  "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9"]


def find_chromium() -> str | None:
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


def headless(index: Path, script: str = "", screenshot: Path | None = None, size=(1600, 1200),
             budget_ms: int = 15000) -> str:
    """Open `index` in headless Chromium, network off, with `script` (JavaScript) added at the end of the page
    (a copy beside it, so its relative paths resolve); the DOM after the page settled, or the screenshot written."""
    import subprocess
    import tempfile

    browser = find_chromium()
    if browser is None:
        raise FileNotFoundError("no chromium on PATH (Debian: apt-get install chromium)")
    index = Path(index)
    page = index.with_name(f".{index.stem}.headless.html")
    page.write_text(index.read_text().replace("</body>", f"<script>{script}</script></body>"))
    try:
        with tempfile.TemporaryDirectory() as profile:
            cmd = [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={size[0]},{size[1]}",
                   f"--virtual-time-budget={budget_ms}",
                   f"--screenshot={screenshot}" if screenshot else "--dump-dom", page.resolve().as_uri()]
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        if res.returncode != 0:
            raise HgemmError(f"chromium failed ({res.returncode}): {res.stderr.strip()[-500:]}")
        return res.stdout
    finally:
        page.unlink(missing_ok=True)


# Where an element sits on the page, for the screenshot's crop: written into the DOM for --dump-dom to carry out.
_RECT_JS = """addEventListener("load", () => { const e = document.querySelector(%s), r = e.getBoundingClientRect();
const p = document.createElement("pre"); p.id = "rect";
p.textContent = JSON.stringify([r.left + scrollX, r.top + scrollY, r.width, r.height]);
document.body.appendChild(p); });"""


def screenshot(index: Path, png: Path, selector: str = "#side", width: int = 1600, height: int = 1300) -> Path:
    """A picture of one part of the page (default: the side-by-side view from its top) as a reader's browser
    draws it: the page drawn tall enough to hold it, then cropped (a scrolled headless screenshot comes out
    blank)."""
    from PIL import Image

    dom = headless(index, _RECT_JS % json.dumps(selector))
    m = re.search(r'<pre id="rect">([^<]*)</pre>', dom)
    if not m:
        raise HgemmError(f"{selector} not found on the page")
    x, y, w, h = json.loads(html.unescape(m.group(1)))
    top = int(y)
    headless(index, screenshot=png, size=(width, top + height))
    with Image.open(png) as im:
        im.crop((0, top, width, top + height)).save(png)
    return Path(png)
