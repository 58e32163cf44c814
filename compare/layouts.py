"""`python -m compare layouts`: fragment maps — which lane and register hold which element of an mma, ldmatrix,
stmatrix (and, probed, WMMA) fragment — from ptx_kernels.layouts, the model the tests check against the PTX ISA,
as PNG grids — one cell per matrix element, labelled with the lane and register that
hold it, coloured by lane — and a Markdown page that explains each."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ptx_kernels import layouts as L  # noqa: E402


def _grid(ax, fragment_map: np.ndarray, shape: tuple[int, int], title: str, regs_per_elem: int = 2, label="a"):
    """Draw one matrix of a fragment map ((lane, element) -> (..., row, col)): each cell
    'T<lane>\\n<label><reg>.<half>' coloured by lane."""
    lane_of = np.full(shape, -1)
    text = np.empty(shape, dtype=object)
    for lane in range(fragment_map.shape[0]):
        for e in range(fragment_map.shape[1]):
            r, c = fragment_map[lane, e][-2:]
            lane_of[r, c] = lane
            text[r, c] = f"T{lane}\n{label}{e // regs_per_elem}" + (f".{e % regs_per_elem}" if regs_per_elem > 1 else "")
    ax.imshow(lane_of, cmap="tab20", vmin=0, vmax=31, aspect="equal")
    for r in range(shape[0]):
        for c in range(shape[1]):
            ax.text(c, r, text[r, c], ha="center", va="center", fontsize=4.5)
    ax.set_xticks(range(shape[1]))
    ax.set_yticks(range(shape[0]))
    ax.tick_params(labelsize=5)
    ax.set_xlabel("column")
    ax.set_ylabel("row")
    ax.set_title(title, fontsize=8)


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=140)
    plt.close(fig)
    return path


def hardware_check() -> tuple[list[tuple[str, bool, str]], dict]:
    """Run every probe on the GPU: (instruction, hardware == model, note) rows, and the WMMA fragments recorded."""
    import torch

    from ptx_kernels import probes

    rows = []
    for num in (1, 2, 4):
        for trans in (False, True):
            name = f"ldmatrix.x{num}{'.trans' if trans else ''}"
            rows.append((name, bool(np.array_equal(probes.ldmatrix(num, trans), L.ldmatrix(num, trans))), ""))
    sm90 = torch.cuda.get_device_capability() >= (9, 0)
    for num in (1, 2, 4):
        for trans in (False, True):
            name = f"stmatrix.x{num}{'.trans' if trans else ''}"
            if sm90:
                rows.append((name, bool(np.array_equal(probes.stmatrix(num, trans), L.stmatrix(num, trans))), ""))
            else:
                rows.append((name, False, "not run: stmatrix needs sm_90"))
    rng = np.random.default_rng(0)
    for acc in ("fp32", "fp16"):
        ok = True
        for _ in range(5):
            a = rng.integers(-3, 4, (16, 16)).astype(np.float64)
            b = rng.integers(-3, 4, (16, 8)).astype(np.float64)
            ok &= bool(np.array_equal(probes.mma(a, b, acc), a @ b))
        rows.append((f"mma.m16n8k16 A/B/C ({acc} accumulation)", ok, "5 random integer problems, D == A @ B"))
    wmma = {probes.WMMA_KINDS[w]: probes.wmma(w) for w in range(4)}
    return rows, wmma


def draw_wmma(wmma: dict, out: Path) -> Path:
    fig, axes = plt.subplots(1, len(wmma), figsize=(7 * len(wmma), 7.4))
    for ax, (kind, frag) in zip(axes, wmma.items()):
        _grid(ax, frag, (16, 16), f"WMMA m16n16k16 {kind}: x[i] per lane ({frag.shape[1]} elements)",
              regs_per_elem=1, label="x")
    fig.suptitle("WMMA fragments as the compiler laid them out (recorded on the GPU)", fontsize=10)
    return _save(fig, out / "wmma_fragments.png")


def draw_all(out: Path, hardware: bool = False) -> list[Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    fig, axes = plt.subplots(1, 3, figsize=(17, 6), gridspec_kw={"width_ratios": [16, 8, 8]})
    _grid(axes[0], L.mma_a(), (16, 16), "mma.m16n8k16 A (16x16, row): registers a0..a3, halves .0/.1", label="a")
    _grid(axes[1], L.mma_b(), (16, 8), "B (16x8 as k x n): b0, b1", label="b")
    _grid(axes[2], L.mma_c(), (16, 8), "C/D (16x8): fp32 c0..c3 (fp16: d0=c0,c1  d1=c2,c3)", regs_per_elem=1,
          label="c")
    paths.append(_save(fig, out / "mma_m16n8k16.png"))
    for trans in (False, True):
        fig, axes = plt.subplots(1, 4, figsize=(16, 4.6))
        m = L.ldmatrix(4, trans)
        for i, ax in enumerate(axes):
            sub = np.array([[m[lane, 2 * i + h] for h in range(2)] for lane in range(32)])
            _grid(ax, sub, (8, 8), f"matrix {i}: rows from lanes {8 * i}..{8 * i + 7}" + (" (.trans)" if trans else ""),
                  label=f"r{i}")
        fig.suptitle(f"ldmatrix .x4{'.trans' if trans else ''} (.x1 = matrix 0, .x2 = matrices 0-1); "
                     f"stmatrix{'.trans' if trans else ''} writes the same map", fontsize=9)
        paths.append(_save(fig, out / f"ldmatrix_x4{'_trans' if trans else ''}.png"))
    md = MARKDOWN
    if hardware:
        import torch

        rows, wmma = hardware_check()
        paths.append(draw_wmma(wmma, out))
        table = "\n".join(f"| {name} | {'yes' if ok else 'NO'} | {note} |" for name, ok, note in rows)
        md += (f"\n## On the hardware ({torch.cuda.get_device_name()})\n\nProbes from `ptx_kernels/csrc/lab/probes.cu`, "
               f"run by `python -m compare layouts --hardware`:\n\n| instruction | hardware == model | note |\n"
               f"|---|---|---|\n{table}\n\n![wmma](wmma_fragments.png)\n\nWMMA's fragment map is the "
               f"compiler's choice (the API calls it opaque); the map above is what this GPU and nvcc produced.\n")
        if not all(ok for _, ok, note in rows if not note.startswith("not run")):
            (out / "layouts.md").write_text(md)
            raise RuntimeError("hardware differs from the model: see " + str(out / "layouts.md"))
    (out / "layouts.md").write_text(md)
    return paths


MARKDOWN = """# Fragment maps (model)

Drawn by `python -m compare layouts` from `ptx_kernels/layouts.py`, the model that `tests/test_layouts.py`
checks against the PTX ISA's formulas (element-first, as the ISA writes them) and against the identities the
mma kernels rely on. With `--hardware` (and in the main job on a GPU) probe kernels record what the GPU does,
compared with the model in the last section.

In every grid a cell is one matrix element; `T5 a2.1` means lane 5 holds it in register a2, upper half
(two fp16 per 32-bit register, the lower address in the low half). Colour = lane.

## mma.m16n8k16 (fp16 inputs)
![mma](mma_m16n8k16.png)

With groupID g = lane >> 2 and threadID_in_group t = lane % 4: A's register a0 holds row g, columns 2t and 2t+1;
a1 the same columns of row g+8; a2 and a3 repeat that 8 columns to the right. B (k x n) gives lane (g, t) the
column n = g at k = 2t, 2t+1 (b0) and 2t+8, 2t+9 (b1). The accumulator holds row g (c0, c1) and row g+8 (c2, c3)
at columns 2t, 2t+1; with fp16 accumulation the same four values pack into two registers.

## ldmatrix / stmatrix
![ldmatrix](ldmatrix_x4.png)
![ldmatrix trans](ldmatrix_x4_trans.png)

Lanes 8i..8i+7 supply the addresses of the eight 16-byte rows of matrix i; lane l receives, in register i, row
l/4 at columns 2(l%4), 2(l%4)+1 — exactly the shape of a mma fragment register. So pointing lane l at row l%16,
column 8(l/16) of a 16x16 A tile makes ldmatrix.x4 deliver the A fragment; a row-major (k x n) B tile read with
.x2.trans delivers the B fragment; stmatrix.x2 stores an fp16 accumulator fragment as a row-major 16x8 tile.
"""
