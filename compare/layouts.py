"""`python -m compare layouts`: fragment maps — which lane and register hold which element of an mma, ldmatrix,
stmatrix (and, probed, WMMA) fragment — from ptx_kernels.layouts, the model the tests check against the PTX ISA,
as PNG grids — one cell per matrix element, labelled with the lane and register that
hold it, coloured by lane — and a Markdown page that explains each."""
from __future__ import annotations

import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from hgemm_common.errors import HgemmError  # noqa: E402
from ptx_kernels import layouts as L  # noqa: E402


def _grid(ax, fragment_map: np.ndarray, shape: tuple[int, int], title: str, regs_per_elem: int = 2, label="a",
          lanes: list[int] | None = None):
    """Draw one matrix of a fragment map ((lane, element) -> (..., row, col)): each cell
    'T<lane>\\n<label><reg>.<half>' coloured by lane. lanes: the lane of each row of the map (default 0, 1, ...)."""
    lane_of = np.full(shape, -1)
    text = np.empty(shape, dtype=object)
    for i in range(fragment_map.shape[0]):
        lane = lanes[i] if lanes is not None else i
        for e in range(fragment_map.shape[1]):
            r, c = fragment_map[i, e][-2:]
            lane_of[r, c] = lane
            text[r, c] = f"T{lane}\n{label}{e // regs_per_elem}" + (f".{e % regs_per_elem}" if regs_per_elem > 1 else "")
    ax.imshow(lane_of, cmap="tab20", vmin=0, vmax=31, aspect="equal")
    for r in range(shape[0]):
        for c in range(shape[1]):
            # in_layout=False: inside the image, so tight_layout need not measure each of them
            ax.text(c, r, text[r, c], ha="center", va="center", fontsize=4.5, in_layout=False)
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
    from ptx_kernels import sparse

    for acc in ("fp32", "fp16"):
        for sel in (0, 1):
            ok = True
            for _ in range(5):
                a = sparse.prune_2to4(torch.from_numpy(rng.integers(-3, 4, (16, 32))).to(torch.float16))
                a = a.double().numpy()
                b = rng.integers(-3, 4, (16 * 2, 8)).astype(np.float64)
                ok &= bool(np.array_equal(probes.mma_sp(a, b, acc, sel), a @ b))
            rows.append((f"mma.sp.m16n8k32 A/B/metadata ({acc} accumulation, selector {sel})", ok,
                         "5 random 2:4 integer problems, D == pruned A @ B"))
    wmma = {probes.WMMA_KINDS[w]: probes.wmma(w) for w in range(4)}
    return rows, wmma


def draw_wmma(wmma: dict, out: Path) -> Path:
    fig, axes = plt.subplots(1, len(wmma), figsize=(7 * len(wmma), 7.4))
    for ax, (kind, frag) in zip(axes, wmma.items()):
        _grid(ax, frag, (16, 16), f"WMMA m16n16k16 {kind}: x[i] per lane ({frag.shape[1]} elements)",
              regs_per_elem=1, label="x")
    fig.suptitle("WMMA fragments as the compiler laid them out (recorded on the GPU)", fontsize=10)
    return _save(fig, out / "wmma_fragments.png")


def draw_sparse(out: Path) -> Path:
    """mma.sp.m16n8k32: the compressed A fragment (16 x 16), and which lane's metadata nibble holds each 4-wide
    chunk of the dense 16 x 32 A (selector 0; selector 1 moves every nibble to lane + 2)."""
    from ptx_kernels import sparse

    meta = sparse.mma_sp_meta(0)
    lanes = sorted(meta)
    chunk_map = np.array([meta[lane] for lane in lanes])  # (16 lanes, 8 nibbles, (row, chunk))
    fig, axes = plt.subplots(1, 2, figsize=(15, 6.5), gridspec_kw={"width_ratios": [16, 8]})
    _grid(axes[0], sparse.mma_sp_a(), (16, 16), "mma.sp.m16n8k32 compressed A (16 x 16 kept values): a0..a3",
          label="a")
    _grid(axes[1], chunk_map, (16, 8), "metadata e (selector 0): nibble n = bits 4n..4n+3 of the lane's e, "
          "per 4-wide chunk", regs_per_elem=1, label="n", lanes=lanes)
    axes[1].set_xlabel("chunk (dense columns 4c..4c+3)")
    return _save(fig, out / "mma_sp_m16n8k32.png")


def default_out() -> Path:
    """Where `compare layouts` writes without --out: a new temporary folder, never the checkout."""
    return Path(tempfile.mkdtemp(prefix="hgemm-layouts-"))


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
    paths.append(draw_sparse(out))
    (out / "layouts.md").write_text(MARKDOWN)
    if hardware:
        paths.append(add_hardware(out))
    return paths


def add_hardware(out: Path) -> Path:
    """The probes' section, appended to the layouts.md that `draw_all` wrote in `out`: every probe run on this GPU
    and compared with the model, and the WMMA map drawn from what it recorded. A mismatch writes the section, then
    raises. (The main job draws the model's maps in a child process from its start, and runs this part in its own
    process, which holds the GPU, at the end.)"""
    import torch

    out = Path(out)
    rows, wmma = hardware_check()
    png = draw_wmma(wmma, out)
    table = "\n".join(f"| {name} | {'yes' if ok else 'NO'} | {note} |" for name, ok, note in rows)
    md = (f"\n## On the hardware ({torch.cuda.get_device_name()})\n\nProbes from `ptx_kernels/csrc/lab/probes.cu`, "
          f"run by `python -m compare layouts --hardware`:\n\n| instruction | hardware == model | note |\n"
          f"|---|---|---|\n{table}\n\n![wmma](wmma_fragments.png)\n\nWMMA's fragment map is the "
          f"compiler's choice (the API calls it opaque); the map above is what this GPU and nvcc produced.\n")
    with open(out / "layouts.md", "a") as f:
        f.write(md)
    if not all(ok for _, ok, note in rows if not note.startswith("not run")):
        raise HgemmError("hardware differs from the model: see " + str(out / "layouts.md"))
    return png


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

## mma.sp.m16n8k32 (2:4 sparse A, fp16)
![mma.sp](mma_sp_m16n8k32.png)

A is 16 x 32 dense, 2:4 sparse along K: of every four consecutive elements of a row (a chunk) at most two are
non-zero, and only two are stored. The compressed A (16 x 16: chunk c's two kept values at columns 2c, 2c+1) sits
in the registers exactly as a dense m16n8k16 A does (left). B (32 x 8) is two m16n8k16 B fragments, k 0..15 in
b0, b1 and k 16..31 in b2, b3. Each chunk's kept positions are a 4-bit nibble of metadata, two 2-bit indices:

```
nibble = i0 | i1 << 2,  i0 < i1 the kept positions in the chunk    0b0100 (0,1)  0b1000 (0,2)  0b1001 (1,2)
                                                                   0b1100 (0,3)  0b1101 (1,3)  0b1110 (2,3)
lane 4g + 2 sel + h, register e:
  bit  31..28 27..24 23..20 19..16 | 15..12 11..8  7..4   3..0
       row g+8, chunks 4h+3 .. 4h  | row g, chunks 4h+3 .. 4h        (chunk c = dense columns 4c..4c+3)
```

The sparsity selector sel (an immediate) names the thread pair of each group of four that supplies e: 0 for T0, T1,
1 for T2, T3 (right: selector 0). wgmma.mma_async.sp.m64nNk32 takes the same map in each of its four warps (rows
16w..16w+15). `ptx_kernels.sparse.compress` writes the metadata in this order, 16 words per 16-row x 32-K block,
so that a lane's e is one 4-byte load (word 2g + h).
"""
