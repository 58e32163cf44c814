"""The study page (`python -m compare study`, compare/study.py): the main loop found in recorded SASS of each family,
the page's counts equal to `compare inspect`'s, the ladders' measured columns, and the page as headless Chromium
draws it with the network off."""
from __future__ import annotations

import html
import json
import math
import re
from collections import Counter
from pathlib import Path

import pytest

from compare import disasm, study
from ptx_kernels import toolchain

DATA = Path(__file__).parent / "data"
PAGE_KERNELS = ["triton_blocked", "mma_stmatrix", "triton_tma", "wgmma_persistent"]  # the two default pairs

# Recorded SASS (tests/data/sass/, excerpts of `compare inspect`'s dumps): where each family's main loop starts and
# the backward branch that closes it (cuobjdump offsets; Triton's nvdisasm output has labels instead), and what
# the loop must hold.
MAIN_LOOPS = {
    "simt_naive": ("0350", "0ca0", {"FFMA": 16, "LDG": 32}),
    "wmma_async_dbuf": ("0ce0", "18b0", {"HMMA": 32, "LDGSTS": 4}),
    "mma_stmatrix": ("23e0", "39c0", {"HMMA": 128, "LDSM": 32, "LDGSTS": 12}),
    "wgmma_persistent": ("05a0", "0f30", {"HGMMA": 8, "SYNCS": 4}),
    "triton_tma": ("LBB8", "LBB8", {"HGMMA": 4, "UTMALDG": 2}),
    "triton_blocked": ("LBB1", "LBB1", {"HGMMA": 4, "LDGSTS": 12}),
}


@pytest.mark.parametrize("kernel", sorted(MAIN_LOOPS))
def test_main_loop_found_in_recorded_sass(kernel):
    sass = (DATA / "sass" / f"{kernel}.sass").read_text()
    instrs = toolchain.sass_instructions(sass)
    labels = toolchain.sass_labels(sass)
    loop = toolchain.main_loop(instrs, labels)
    first, branch, holds = MAIN_LOOPS[kernel]
    assert loop, f"{kernel}: no main loop among {len(toolchain.loops(instrs, labels))} loops"
    if instrs[0].offset is None:  # nvdisasm: the loop starts right after its label, and branches back to it
        assert max(n for n in labels[first] if n < loop[0].line) == loop[0].line - 1
        assert loop[-1].target == branch
    else:
        assert (f"{loop[0].offset:04x}", f"{loop[-1].offset:04x}") == (first, branch)
        assert int(loop[-1].target, 16) == loop[0].offset
    mix = Counter(i.base for i in loop)
    assert {op: mix[op] for op in holds} == holds, kernel
    assert loop[-1].base == "BRA"


def test_main_loop_skips_out_of_line_code_and_takes_the_inner_loop():
    """A wait's slow path placed after EXIT branches back into the body: not a loop. A K loop inside the tile loop
    holding at least half its MMAs is the main loop."""
    sass = "\n".join(f"        /*{off:04x}*/  {text} ;" for off, text in [
        (0x00, "S2R R0, SR_TID.X"), (0x10, "HGMMA.64x256x16.F32 R24, gdesc[UR4], R24"),  # tile loop head
        (0x20, "HGMMA.64x256x16.F32 R24, gdesc[UR8], R24"),  # K loop
        (0x30, "HGMMA.64x256x16.F32 R24, gdesc[UR12], R24"),
        (0x40, "@!P0 BRA 0x90"), (0x50, "@P1 BRA 0x20"), (0x60, "@P2 BRA 0x10"), (0x70, "EXIT"),
        (0x80, "NOP"), (0x90, "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R2"), (0xa0, "BRA 0x20")])
    loop = toolchain.main_loop(toolchain.sass_instructions(sass))
    assert (loop[0].offset, loop[-1].offset) == (0x20, 0x50)


def test_instruction_classes_agree_between_ptx_and_sass():
    pairs = [("HGMMA", "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16"), ("HMMA", "mma.sync.aligned.m16n8k16"),
             ("UTMALDG", "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"),
             ("SYNCS", "mbarrier.try_wait.parity.shared::cta.b64"),
             ("LDSM", "ldmatrix.sync.aligned.m8n8.x4.shared.b16"),
             ("STSM", "stmatrix.sync.aligned.m8n8.x4.shared.b16"), ("LDS", "ld.shared.v4.u32"),
             ("LDGSTS", "cp.async.cg.shared.global"), ("STG", "st.global.v4.b32"), ("BAR", "bar.sync"),
             ("LDL", "ld.local.u32"), ("IMAD", "mad.lo.s32")]
    for sass_op, ptx_op in pairs:
        assert toolchain.instruction_class(sass_op, "sass") == toolchain.instruction_class(ptx_op, "ptx"), sass_op
    assert toolchain.instruction_class("IMAD") == ""


def test_ladder_numbers_from_a_bench_json():
    bench = study.load_bench(DATA / "bench_h100_sample.json")
    rows = [r for r in json.loads((DATA / "bench_h100_sample.json").read_text())["rows"] if r["status"] == "ok"]
    smem = {(r["m"], r["n"], r["k"]): r for r in rows if r["kernel"] == "wmma_smem"}
    naive = {(r["m"], r["n"], r["k"]): r for r in rows if r["kernel"] == "wmma_naive"}
    got = study.measured(bench["fp16"], "wmma_smem", "wmma_naive")
    assert got["shapes"] == len(smem) > 1
    gains = [smem[s]["tflops"] / naive[s]["tflops"] for s in smem if s in naive]
    assert got["gain"] == pytest.approx(math.prod(gains) ** (1 / len(gains)))
    assert got["ratio"] == pytest.approx(math.prod(r["ratio_to_torch"] for r in smem.values()) ** (1 / len(smem)))
    assert study.measured(bench["fp16"], "no_such_kernel", None) is None


def test_missing_pygments_is_one_clear_line(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pygments", None)
    with pytest.raises(study.MissingExtra, match=r"pip install 'tensorcore-hgemm\[study\]'"):
        study.build(Path("unused"), ["triton_tma"])


@pytest.mark.parametrize("args, says", [(["nope"], "unknown kernel 'nope'"),
                                        (["--bench", "no/such.json"], "--bench no/such.json: no such file")])
def test_study_command_refuses_in_one_line(args, says, tmp_path):
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "compare", "study", "--out", str(tmp_path), *args],
                         cwd=Path(__file__).parent.parent, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and says in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_ncu_csv_keeps_the_longest_launch():
    """A constructed sample in the layout of `ncu --csv --page details` (one row per launch and metric): a split-K
    call's GEMM and its shorter reduction; values with thousands separators."""
    tensor, conflicts = list(study.NCU_METRICS)[1], list(study.NCU_METRICS)[2]
    head = '"ID","Process ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value"'
    rows = [(0, "gemm", study.NCU_DURATION, "1,250,000"), (0, "gemm", tensor, "71.5"), (0, "gemm", conflicts, "1,024"),
            (1, "reduce", study.NCU_DURATION, "40,000"), (1, "reduce", tensor, "0")]
    text = "==PROF== Connected to process\n" + "\n".join(
        [head] + [f'"{i}","7","{k}","Command line profiler metrics","{m}","","{v}"' for i, k, m, v in rows])
    assert study.parse_ncu_csv(text) == {tensor: 71.5, conflicts: 1024.0}
    assert study.parse_ncu_csv("==ERROR== no kernels were profiled") == {}


def test_occupancy_limits():
    assert study.occupancy(255, 256, 1024) == (1, "registers")  # 255 x 256 threads: half the register file each
    assert study.occupancy(16, 256, 1024) == (8, "threads")
    assert study.occupancy(32, 128, 120 * 1024) == (1, "shared memory")


# ------------------------------------------------------------------------------------------- the page itself --
needs_compilers = pytest.mark.skipif(toolchain.find_nvcc() is None, reason="the page compiles the kernels: needs nvcc")


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """The page of the two default pairs, without a GPU's measurements, and inspect's own rows for them."""
    pytest.importorskip("pygments", reason="the study page needs the study extra (pygments)")
    root = tmp_path_factory.mktemp("study")
    rows, _ = disasm.run_inspect(PAGE_KERNELS, root / "inspect")
    index = study.build(root / "page", PAGE_KERNELS, log=LOG.append, progress=lambda i, n: LOG.append((i, n)))
    return index, {r.kernel: r for r in rows}


LOG = []  # what the page fixture's build said as it worked


@needs_compilers
def test_page_build_says_what_it_does(page):
    """The build logs each step and reports the inspect's rows as they arrive, up to all of them."""
    lines = [x for x in LOG if isinstance(x, str)]
    assert any(line.startswith(f"inspecting {len(PAGE_KERNELS)} kernels into ") for line in lines), lines
    assert any(line.startswith("drawing the fragment maps") for line in lines), lines
    assert lines[-1] == f"writing the page: {len(PAGE_KERNELS)} kernels"
    counts = [x for x in LOG if isinstance(x, tuple)]
    assert counts and counts[-1] == (len(PAGE_KERNELS), len(PAGE_KERNELS)) and counts == sorted(counts)


def _parts(index: Path, kernel: str) -> dict:
    text = (index.parent / "kernels" / f"{kernel}.js").read_text()
    return json.loads(text[len("STUDY.put("):-len(");\n")])


@needs_compilers
def test_page_counts_equal_inspect(page):
    index, rows = page
    for name, row in rows.items():
        parts = _parts(index, name)
        full = re.search(r'data-listing="sass-full">(.*?)</pre>', parts["sass"], re.S).group(1)
        coloured = Counter(re.findall(r'data-op="([A-Z][A-Z0-9_]*)"', full))
        assert {c: coloured.get(c, 0) for c in disasm.COLUMNS} == row.mix, name
        bars = dict(re.findall(r'data-col="(\w+)" data-count="(\d+)"', parts["bars"]))
        assert {c: int(n) for c, n in bars.items()} == row.mix, name
        assert f"{row.registers}" in parts["stats"]
        assert parts["name"] in index.read_text()  # both default pairs are on the page itself


@needs_compilers
def test_page_shows_one_gemm_at_three_levels(page):
    """The "three levels" section: per schedule (data-parallel, stream-K) the Triton, Gluon and inline-PTX kernels
    with their source lines and the page's own inspect counts; a kernel the build did not inspect says so, and
    without a GPU run no ratio is shown."""
    from compare import levels

    index, rows = page
    sec = re.search(r'<section id="levels">(.*?)</section>', index.read_text(), re.S).group(1)
    assert "<h3>data-parallel</h3>" in sec and "<h3>stream-K</h3>" in sec
    cells = {m.group(1): re.findall(r"<td>(.*?)</td>", m.group(0))
             for m in re.finditer(r"<tr><td>[^<]*</td><td><code>(\w+)</code></td>.*?</tr>", sec)}
    assert set(cells) == {name for lv in levels.SCHEDULES.values() for _, name in lv}
    w = rows["wgmma_persistent"]
    assert cells["wgmma_persistent"][3:6] == [str(w.mix["HGMMA"]), str(w.mix["UTMALDG"]), str(w.mix["UTMASTG"])]
    assert cells["wgmma_persistent"][-1] == "-"  # no GPU run, no ratio
    assert 'colspan="7">not inspected in this build</td>' in sec  # wgmma_streamk is not among PAGE_KERNELS


@needs_compilers
def test_cpu_page_says_what_needs_a_gpu(page):
    text = page[0].read_text()
    sections = {m.group(1): m.group(2) for m in re.finditer(r'<section id="(\w+)">(.*?)</section>', text, re.S)}
    for name in ("ladders", "fragments", "ncu"):
        assert 'class="needs-gpu"' in sections[name], name
    assert "TFLOPS</th>" not in sections["ladders"]  # no empty measured columns pretending to be data


@needs_compilers
def test_page_is_offline(page):
    folder = page[0].parent
    for f in folder.rglob("*"):
        if f.suffix in (".html", ".js", ".css"):
            refs = re.findall(r"""(?:src|href)\s*=\s*["']?([^"'\s>]+)""", f.read_text())
            assert not [r for r in refs if re.match(r"(?:[a-z]+:)?//", r)], f
            assert "@import" not in f.read_text() and "url(http" not in f.read_text(), f


# What a person would see, measured in the browser: each pane, table, plot and picture laid out with a size, not
# hidden, with text in it (images: decoded). The custom pair is filled by the page's script.
CHECK_JS = """
(function () {
  function vis(el) {
    const r = el.getBoundingClientRect(), s = getComputedStyle(el);
    return r.width > 20 && r.height > 10 && s.visibility !== "hidden" && s.display !== "none" && +s.opacity > 0;
  }
  const q = (sel) => Array.from(document.querySelectorAll(sel));
  function run() {
    const out = {
      panes: q(".pair .pane").map((p) => ({pair: p.closest(".pair").id, pane: p.dataset.pane,
        kernel: p.dataset.kernel, side: p.closest(".cell").dataset.side, visible: vis(p.querySelector(".listing.main")),
        text: p.querySelector(".listing.main").textContent.trim().length})),
      tables: q("table").map((t) => ({cls: t.className, visible: vis(t), rows: t.rows.length})),
      plots: q(".plot svg, .bars").map((p) => ({cls: p.getAttribute("class") || "svg", visible: vis(p),
        marks: p.querySelectorAll("rect, .bar").length})),
      images: q("img").map((i) => ({src: i.getAttribute("src"), loaded: i.complete && i.naturalWidth > 0,
        visible: vis(i)})),
      coloured: q(".pair .listing.main .op.k-tensor").filter(vis).length,
    };
    const pre = document.createElement("pre");
    pre.id = "study-check";
    pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
  }
  function until(ready, then, n = 0) {
    if (ready() || n > 200) then(); else setTimeout(() => until(ready, then, n + 1), 50);
  }
  // like a reader: wait for the script's pair, then pick the first default pair the other way round
  function pick() {
    const [left, right] = [document.getElementById("pick-left"), document.getElementById("pick-right")];
    left.value = %(right)s;
    right.value = %(left)s;
    right.dispatchEvent(new Event("change"));
    until(() => document.getElementById("custom").dataset.pair === left.value + "|" + right.value, run);
  }
  addEventListener("load", () => until(() => document.querySelector("#custom .pane"), pick));
})();
"""


@needs_compilers
@pytest.mark.skipif(study.find_chromium() is None, reason="no chromium here (.ci/run installs Debian's chromium)")
def test_page_in_headless_chromium(page, tmp_path):
    index = page[0]
    left, right = study.DEFAULT_PAIRS[0]
    dom = study.headless(index, CHECK_JS % {"left": json.dumps(left), "right": json.dumps(right)})
    m = re.search(r'<pre id="study-check">(.*?)</pre>', dom, re.S)
    assert m, "the check script did not run: " + dom[-300:]
    seen = json.loads(html.unescape(m.group(1)))
    expected = {(f"pair{i}", pane, k) for i, pair in enumerate(study.DEFAULT_PAIRS) for k in pair
                for pane in ("src", "ptx", "sass")}
    expected |= {("custom", pane, k) for k in (left, right) for pane in ("src", "ptx", "sass")}  # picked
    panes = {(p["pair"], p["pane"], p["kernel"]): p for p in seen["panes"]}
    assert set(panes) == expected
    for key, p in panes.items():
        assert p["visible"] and p["text"] > 100, key
    assert {p["kernel"] for p in panes.values() if p["pair"] == "custom" and p["side"] == "left"} == {right}
    tables = Counter(t["cls"] for t in seen["tables"] if t["visible"] and t["rows"] > 1)
    assert tables["ladder"] == 3 and tables["stats-table"] == 6 and tables["inspect"] == 1, tables
    assert all(p["visible"] and p["marks"] > 0 for p in seen["plots"]) and len(seen["plots"]) == 3 + 6
    assert seen["images"] and all(i["loaded"] and i["visible"] for i in seen["images"]), seen["images"]
    assert seen["coloured"] > 20  # tensor-core mnemonics coloured in the visible main loops
    png = study.screenshot(index, tmp_path / "study.png")
    from PIL import Image

    with Image.open(png) as im:
        assert im.size == (1600, 1300)
        colours = im.convert("RGB").getcolors(maxcolors=1 << 16)
        assert colours is None or len(colours) > 50  # drawn, not a blank page
