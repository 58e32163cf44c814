"""What each hand-written variant is and supports: the single list of PTX variants, read by the build, the
binding check, the tests and the harness.

Each record is a `hgemm_common.record.Variant` with package "ptx"; `file` is the kernel file relative to csrc/
(sm80/ holds the kernels for any arch >= 80, sm90/ the sm_90a-only ones). Adding a variant = one kernel file that
ends with `HGEMM_VARIANT(name, launcher, operands);` (csrc/host/registry.h: the file registers its own launcher,
and the build compiles every record's file) + one record here. Nothing else lists variants: the build, the
binding, the harness and the tests read these records, and the kernel instances a file compiles to are listed
from its compiled code (`ptx_kernels.toolchain.instances`), not written here.
"""
from __future__ import annotations

from pathlib import Path

from hgemm_common.record import Variant

CSRC = Path(__file__).resolve().parent / "csrc"
# Built beside the variants (not GEMM variants): the instruction ceilings and the fragment-layout probes, each with
# the compute capability (x10) it needs.
LAB_SOURCES = {"lab/mma_ceiling.cu": 80, "lab/probes.cu": 80, "lab/wgmma_ceiling.cu": 90,
               "lab/mma_sp_ceiling.cu": 80, "lab/sparse_probes.cu": 80,
               "lab/wgmma_sp_ceiling.cu": 90, "lab/wgmma_sp_probe.cu": 90}
# Built beside the variants on every GPU: the staging copy of operands whose rows TMA cannot read (ptx_kernels.call).
STAGE_COPY_SOURCE = "host/stage_copy.cu"

H = 2  # bytes per half


def _scratch(acc: str) -> int:
    """One 16x16 accumulator tile per warp: the WMMA epilogue's staging (fragment layouts are opaque)."""
    return 16 * 16 * (4 if acc == "fp32" else 2)


# SASS promises, the same on both targets unless a kernel says otherwise. Every variant forbids local memory.
_LOCAL = ("LDL", "STL")
_SM80_SM90 = ("sm_80", "sm_90a")


def _each(*ops: str) -> dict[str, tuple[str, ...]]:
    return {t: ops for t in _SM80_SM90}


# bf16 beside fp16: the kernels whose element type is a template parameter (fp16: fp32 and fp16 accumulation; bf16:
# fp32 only, the only instantiations made for it). `mma_forms`: per dtype, the tensor-core SASS forms its
# instantiations hold (each whole, followed by its operands: "HMMA.16816.F32" is fp16 operands, ".F32.BF16" bf16);
# tests/test_ptx_compile.py checks them against every target's SASS.
BF16 = ("fp16", "bf16")
_HMMA_FORMS = {"fp16": ("HMMA.16816.F32", "HMMA.16816.F16"), "bf16": ("HMMA.16816.F32.BF16",)}


def _hgmma_forms(*ns: int, fp32_only: tuple[int, ...] = ()) -> dict[str, tuple[str, ...]]:
    """The wgmma m64nNk16 forms of tile widths ns: fp32 and fp16 accumulation for fp16, fp32 for bf16; the widths
    fp32_only in fp32 accumulation alone (wgmma_persistent's cut tiles)."""
    return {"fp16": tuple(f"HGMMA.64x{n}x16.{acc}" for n in ns for acc in ("F32", "F16"))
            + tuple(f"HGMMA.64x{n}x16.F32" for n in fp32_only),
            "bf16": tuple(f"HGMMA.64x{n}x16.F32.BF16" for n in (*ns, *fp32_only))}


# The pipelined mma.sync tiles (sm80/mma_pipeline.cuh): 128x256x64 in 3 stages, fp16 on large problems 256x256x32
# in 4; all shared memory dynamic.
_PIPELINED = dict(block=(128, 256, 64), stages=3, block_fp16=(256, 256, 32), stages_fp16=4, alignment="rows16",
                  static_smem=lambda acc, b_col: 0)

VARIANTS: tuple[Variant, ...] = (
    Variant("simt_naive", "ptx", "simt", "sm80/simt_naive.cu", "16x16 threads, 1 output each",
            "CUDA cores only: one thread per output element", isa="fma", block=(16, 16, 1),
            native_layouts=("NN", "NT", "TN", "TT"), slow=True,
            promises=_each("FFMA", "HFMA2"),  # FFMA in the fp32 instantiation, HFMA2 in the fp16 one
            forbids=_each("HMMA", "LDSM", "LDGSTS", "STSM", *_LOCAL),
            static_smem=lambda acc, b_col: 0),
    Variant("wmma_naive", "ptx", "wmma", "sm80/wmma_naive.cu", "1 warp, 16x16",
            "tensor cores (WMMA m16n16k16), fragments straight from global memory", isa="wmma", ceiling="mma.sync",
            slow=True, promises=_each("HMMA"), forbids=_each("LDGSTS", "STSM", *_LOCAL),
            # one warp: A and B 16x16 staging + the scratch
            static_smem=lambda acc, b_col: 2 * 16 * 16 * H + _scratch(acc)),
    Variant("wmma_smem", "ptx", "wmma", "sm80/wmma_smem.cu", "64x32x16, 8 warps x 1 fragment",
            "A and B tiles staged in shared memory, shared by 8 warps", isa="wmma", ceiling="mma.sync",
            block=(64, 32, 16), promises=_each("HMMA"), forbids=_each("LDGSTS", "STSM", *_LOCAL),
            # 64x16 A + 16x32 B + 8 warps of scratch
            static_smem=lambda acc, b_col: (64 * 16 + 16 * 32) * H + 8 * _scratch(acc)),
    Variant("wmma_regtile", "ptx", "wmma", "sm80/wmma_regtile.cu", "128x128x16, 8 warps x 4x2 fragments",
            "register tiling: each warp owns a 64x32 tile of 4x2 fragments", isa="wmma", ceiling="mma.sync",
            block=(128, 128, 16), promises=_each("HMMA"), forbids=_each("LDGSTS", "STSM", *_LOCAL),
            # 128x16 A + 16x128 B + 8 warps of scratch
            static_smem=lambda acc, b_col: (128 * 16 + 16 * 128) * H + 8 * _scratch(acc)),
    Variant("wmma_async_dbuf", "ptx", "wmma", "sm80/wmma_async_dbuf.cu", "128x128x16, 2 stages, padded rows",
            "cp.async double buffering and padded shared rows", isa="wmma", ceiling="mma.sync",
            block=(128, 128, 16), stages=2, alignment="rows16",
            promises=_each("HMMA", "LDGSTS"), forbids=_each("STSM", *_LOCAL),
            # 2 stages of A (128 x 16) and B (16 x 128, or 128 x 16 column-major), rows padded by 8 halves
            static_smem=lambda acc, b_col: 2 * (128 * (16 + 8) + (128 * (16 + 8) if b_col else 16 * (128 + 8))) * H
            + 8 * _scratch(acc)),
    Variant("wmma_multistage", "ptx", "wmma", "sm80/wmma_multistage.cu",
            "128x256x64, 3 stages, 8 warps x 4x4 fragments; "
            "fp16 on large problems: 256x256x32, 4 stages, 8 warps x 4x8",
            "3-4 stage cp.async pipeline, 64x64 (fp16: 64x128) warp tiles, fragments loaded a k-step ahead",
            isa="wmma", ceiling="mma.sync", promises=_each("HMMA", "LDSM", "LDGSTS"), forbids=_each("STSM", *_LOCAL),
            # the fp32 tile's main loop is unrolled over the ring's stages (tests count its MMAs)
            unrolled_stages=True, recommended=True, **_PIPELINED),
    Variant("mma_naive", "ptx", "mma", "sm80/mma_naive.cu", "1 warp, 16x8",
            "mma.sync.m16n8k16 fed by ldmatrix: fragment registers the program addresses itself", isa="mma.sync",
            ceiling="mma.sync", block=(16, 8, 16), slow=True,
            promises=_each("HMMA", "LDSM"), forbids=_each("LDGSTS", "STSM", *_LOCAL),
            # 16x16 A + 16x8 B staging + a 16x8 C staging tile
            static_smem=lambda acc, b_col: (16 * 16 + 16 * 8) * H + 16 * 8 * (4 if acc == "fp32" else 2)),
    Variant("mma_tiled", "ptx", "mma", "sm80/mma_tiled.cu", "128x128x32, 8 warps x 64x32 (4x4 m16n8 tiles)",
            "block and warp tiling: every fragment feeds 4 MMAs", isa="mma.sync", ceiling="mma.sync",
            block=(128, 128, 32), promises=_each("HMMA", "LDSM"), forbids=_each("LDGSTS", "STSM", *_LOCAL),
            # unpadded 128x32 A and 32x128 (or 128x32) B
            static_smem=lambda acc, b_col: (128 * 32 + 32 * 128) * H),
    Variant("mma_multistage", "ptx", "mma", "sm80/mma_multistage.cu",
            "128x256x64, 3 stages, 8 warps x 64x64; "
            "fp16 on large problems: 256x256x32, 4 stages, 8 warps x 64x128",
            "3-4 stage cp.async pipeline, large warp tiles, fragments double-buffered in registers (fp32)",
            isa="mma.sync", ceiling="mma.sync", promises=_each("HMMA", "LDSM", "LDGSTS"),
            forbids=_each("STSM", *_LOCAL), dtypes=BF16, mma_forms=_HMMA_FORMS, **_PIPELINED),
    Variant("mma_swizzle", "ptx", "mma", "sm80/mma_swizzle.cu", "mma_multistage's tiles, XOR-swizzled shared memory",
            "XOR-swizzled shared memory: conflict-free ldmatrix and cp.async", isa="mma.sync", ceiling="mma.sync",
            promises=_each("HMMA", "LDSM", "LDGSTS"), forbids=_each("STSM", *_LOCAL), dtypes=BF16,
            mma_forms=_HMMA_FORMS, **_PIPELINED),
    Variant("mma_stmatrix", "ptx", "mma", "sm80/mma_stmatrix.cu", "mma_multistage's tiles, swizzled, stmatrix epilogue",
            "stmatrix epilogue through shared memory, 16-byte coalesced stores (sm_90; plain stores before)",
            isa="mma.sync", ceiling="mma.sync",
            promises={"sm_80": ("HMMA", "LDSM", "LDGSTS"), "sm_90a": ("HMMA", "LDSM", "LDGSTS", "STSM")},
            forbids={"sm_80": ("STSM", *_LOCAL), "sm_90a": _LOCAL}, dtypes=BF16, mma_forms=_HMMA_FORMS,
            recommended=True, **_PIPELINED),
)

# The Hopper ladder (sm90/, sm_90a only): TMA loads on mbarriers, wgmma from shared memory, 128-byte swizzle. All
# shared memory dynamic; operands TMA cannot describe (base not 16-byte aligned, leading dimension not a multiple of
# 8) are copied by the wrapper first. Every dense Hopper kernel takes fp16 and bf16 (wgmma_persistent hands problems
# to wgmma_splitk and wgmma_cluster, so all take what it takes). Instantiations: (dtype, accumulation) pairs (fp16
# x fp32, fp16 x fp16, bf16 x fp32: 3) x B layout (x A layout x epilogue x tile where the launcher chooses).
# wgmma_persistent and the two kernels it hands problems to read column-major A in place too (M-major stages through
# wgmma's transpose bit: all four layouts native, their files register Operands::AnyMajor); wgmma_tma and wgmma_ws
# take row-major A, and the wrapper copies a column-major one first.
_SM90 = ("sm_90a",)
_HOPPER = dict(isa="wgmma", ceiling="wgmma", min_arch=90, alignment="tma", static_smem=lambda acc, b_col: 0,
               dtypes=BF16,
               forbids={"sm_90a": ("HMMA", "LDGSTS", "LDSM", *_LOCAL)})
# The K splits a variant's launcher takes (GemmArgs::split; hgemm(split=...)): 1 never splits, 2 and 4 split K over
# a cluster of that many blocks (sm90/wgmma_splitk.cu), other counts up to `max_split` over the grid
# (sm90/wgmma_splitk_grid.cu); 0 ("auto") lets the launcher choose. `splits`: the counts the tests force.
_SPLITS = (1, 2, 4)
_GRID_SPLITS = (3, 8, 64)
_ALL_LAYOUTS = ("NN", "NT", "TN", "TT")
HOPPER: tuple[Variant, ...] = (
    Variant("wgmma_tma", "ptx", "wgmma", "sm90/wgmma_tma.cu", "128x128x64, 4 stages, 1 warpgroup",
            "TMA loads completing on per-stage mbarriers, wgmma m64n128k16 reading shared memory through descriptors",
            block=(128, 128, 64), stages=4, promises={"sm_90a": ("HGMMA", "UTMALDG", "SYNCS")},
            mma_forms=_hgmma_forms(128), **_HOPPER),
    Variant("wgmma_ws", "ptx", "wgmma", "sm90/wgmma_ws.cu",
            "128x256x64, 4 stages, producer warpgroup + 2 consumer warpgroups",
            "warp specialization: a TMA producer warpgroup (setmaxnreg.dec) feeds two wgmma consumers "
            "(setmaxnreg.inc) through full/empty mbarriers", block=(128, 256, 64), stages=4,
            promises={"sm_90a": ("HGMMA", "UTMALDG", "SYNCS", "USETMAXREG")},
            mma_forms=_hgmma_forms(256), **_HOPPER),
    Variant("wgmma_persistent", "ptx", "wgmma", "sm90/wgmma_persistent.cu",
            "persistent, 128x256x64 in 4 stages (128x192 in 5 or, B column-major, 256x152 in 4 where they fill the "
            "rounds better, 128x128 in 6, 128x64 in 8 on skinny outputs; tiles cut to the shape, 128x144-240 and "
            "256x128-176, where their rounds are fuller, and swapped, C^T = B^T A^T, where M is covered better)",
            "at most one block per SM (as few as keep every round full) walking the tiles in grouped order; "
            "TMA-store epilogue through swizzled shared memory, overlapped with the next tile",
            block=(128, 256, 64), stages=4,
            promises={"sm_90a": ("HGMMA", "UTMALDG", "UTMASTG", "SYNCS", "USETMAXREG")},
            # inspect shows the 128x256 tile with the TMA-store epilogue, A row-major
            inspect={"T": "Tile<256, 4, 1, 128, 64>", "TMA_STORE": "true", "A_COL": "false"},
            splits=_SPLITS + _GRID_SPLITS, max_split=256,
            mma_forms=_hgmma_forms(256, 192, 152, 128, 64, fp32_only=(240, 224, 208, 176, 160, 144)),
            recommended=True, native_layouts=_ALL_LAYOUTS, **_HOPPER),
    Variant("wgmma_splitk", "ptx", "wgmma", "sm90/wgmma_splitk.cu",
            "clusters of 1, 2 or 4 blocks share a 128x256/128x128/128x64 tile, each taking a part of K; one wave",
            "split-K over a thread block cluster: the partial tiles are added in rank order through distributed "
            "shared memory (no workspace, no atomics, deterministic); wgmma_persistent hands it skinny outputs",
            block=(128, 128, 64), stages=6,
            promises={"sm_90a": ("HGMMA", "UTMALDG", "SYNCS", "USETMAXREG")},
            # inspect shows the 128x128 tile, A row-major
            inspect={"T": "Tile<128, 6>", "A_COL": "false"}, splits=_SPLITS, mma_forms=_hgmma_forms(256, 128, 64),
            native_layouts=_ALL_LAYOUTS, **_HOPPER),
    Variant("wgmma_splitk_grid", "ptx", "wgmma", "sm90/wgmma_splitk_grid.cu",
            "any number of blocks share a 128x256/128x128/128x64 tile, each taking a slice of K; one wave, then a "
            "reduce kernel",
            "split-K over the whole grid: fp32 partial tiles in a global workspace (Torch's caching allocator), added "
            "in a fixed order by a second kernel launched as a programmatic dependent; wgmma_persistent hands it "
            "small outputs with a long K",
            block=(128, 128, 64), stages=6,
            promises={"sm_90a": ("HGMMA", "UTMALDG", "SYNCS", "USETMAXREG")},
            # inspect shows the 128x128 tile
            inspect={"T": "Tile<128, 6>"}, splits=(1, 2, 3, 8, 64), max_split=256,
            mma_forms=_hgmma_forms(256, 128, 64), **_HOPPER),
    # The bandwidth path (mma.sync on Hopper, in the Hopper ladder because wgmma_persistent hands it a few rows of A
    # against a B off the 16-byte grid, or of a column-major A against a large B): B streamed from memory into the
    # fragment registers with 16-byte loads, no shared memory on B's way in (loads "LDG"; alignment "rows16", the
    # loads' width: rows of B and of row-major A off 16-byte boundaries are rebuilt from aligned chunks in the
    # kernel, b_rows_any and a_rows_any; column-major A with aligned columns in 16-byte loads turned by
    # ldmatrix.trans, "LDSM", else element by element), K split over a persistent grid and the partials added by the
    # grid kernel's reduction.
    Variant("mma_stream", "ptx", "wgmma", "sm90/mma_stream.cu",
            "persistent, 16 rows (32 past 16) x 128 columns of C a unit, 8 warps x 4 KB of B in flight, K split over "
            "the grid",
            "the bandwidth path for a few rows of A: C^T = B^T A^T on mma.sync.m16n8k16 (N the MMA's M), B loaded "
            "straight into the fragment registers (16-byte ld.global.nc, k order permuted to the fragment), up to "
            "32 rows against each piece of B, partials added in a fixed order by a second kernel; wgmma_persistent "
            "hands it M <= 32 against a B off the 16-byte grid, and M <= 16 of a column-major A against a large B",
            isa="mma.sync", ceiling="mma.sync", min_arch=90, block=(16, 128, 128), stages=1, alignment="rows16",
            dtypes=BF16, native_layouts=_ALL_LAYOUTS, splits=(1, 2, 3, 7), max_split=256, mma_forms=_HMMA_FORMS,
            max_m=48, b_rows_any=True, a_rows_any=True, promises={"sm_90a": ("HMMA", "LDG", "PRMT", "LDSM")},
            forbids={"sm_90a": ("LDGSTS", "STSM", "HGMMA", "UTMALDG", *_LOCAL)},
            # inspect shows B with 16-byte aligned rows (the instance that rebuilds rows off them: B_SHIFT true), in
            # 16-row units (ROWS 32: past 16 rows)
            inspect={"B_SHIFT": "false", "ROWS": "16"},
            # the warps' partial sums: 4 (B row-major) or 2 (column-major) k shares x 16 rows x (128 + 4) fp32; then
            # each of the 8 warps' staging of column-major A: 2 n8 tiles x 1 (B row-major) or 2 k32 chunks x 32
            # slots of 16 bytes
            static_smem=lambda acc, b_col: (2 if b_col else 4) * 16 * (128 + 4) * 4 + 8 * 2 * (2 if b_col else 1) * 32
            * 16),
    Variant("wgmma_cluster", "ptx", "wgmma", "sm90/wgmma_cluster.cu",
            "persistent 2-CTA clusters, 128x256x64 tiles in 4 stages, B multicast",
            "thread block clusters: two blocks share each B tile through TMA multicast (a third less L2 traffic)",
            block=(128, 256, 64), stages=4,
            promises={"sm_90a": ("HGMMA", "UTMALDG", "UTMASTG", "SYNCS", "USETMAXREG")},
            # inspect shows the TMA-store epilogue, A row-major
            inspect={"TMA_STORE": "true", "A_COL": "false"}, mma_forms=_hgmma_forms(256), native_layouts=_ALL_LAYOUTS,
            **_HOPPER),
    Variant("wgmma_streamk", "ptx", "wgmma", "sm90/wgmma_streamk.cu",
            "persistent, 128x256x64 in 4 stages; the partial round's tiles cut into k-slices, one block each",
            "stream-K: whole rounds data-parallel, the tiles of the partial round cut into k-slices aligned in K "
            "(hopper::stream_k_cut, the Triton kernel's rule); fp32 partials in a workspace, added in slot order by "
            "a second launch",
            block=(128, 256, 64), stages=4, on_demand=True,
            promises={"sm_90a": ("HGMMA", "UTMALDG", "UTMASTG", "SYNCS", "USETMAXREG")},
            # inspect shows the TMA-store epilogue, A row-major
            inspect={"TMA_STORE": "true", "A_COL": "false"}, mma_forms=_hgmma_forms(256), native_layouts=_ALL_LAYOUTS,
            **_HOPPER),
)
# 2:4 structured sparsity (problem kind "sparse": A arrives compressed, ptx_kernels/sparse.py; called through
# ptx_kernels.sparse_hgemm). Each is scored against the sparse form of its instruction's ceiling, which counts the
# dense work (2 M N K) the instruction does. `dense_peer`: the dense kernel of the same ladder the harness times
# beside it on the pruned A (`python -m compare bench --kind sparse`). `mma_forms`: the sparse instruction forms.
SPARSE: tuple[Variant, ...] = (
    Variant("mma_sp", "ptx", "sparse", "sm80/mma_sp.cu",
            "128x256x64 (dense K), 4 stages, 8 warps x 64x64 (fp16 acc: 256x256x64, 8 warps x 64x128)",
            "2:4 sparse A: mma.sp.m16n8k32 on the compressed values and metadata words in the lanes' order, on the "
            "mma ladder's cp.async + swizzle + ldmatrix pipeline", isa="mma.sp", kind="sparse", ceiling="mma.sp",
            block=(128, 256, 64), stages=4, block_fp16=(256, 256, 64), stages_fp16=4, alignment="rows16",
            promises=_each("HMMA", "LDSM", "LDGSTS"),
            forbids=_each("STSM", *_LOCAL), static_smem=lambda acc, b_col: 0,
            mma_forms={"fp16": ("HMMA.SP.16832.F32", "HMMA.SP.16832.F16")}, dense_peer="mma_stmatrix"),
    Variant("wgmma_sp", "ptx", "sparse", "sm90/wgmma_sp.cu",
            "persistent, 128x256x64 (dense K) in 5 stages, producer + 2 consumer warpgroups, 2-block clusters "
            "on large problems",
            "2:4 sparse A on the Hopper ladder: wgmma.mma_async.sp m64n256k32 on TMA-loaded compressed values "
            "(64-byte swizzle) and metadata words, B as the dense kernels load it (multicast to both blocks of a "
            "cluster), TMA-store epilogue",
            isa="wgmma.sp", kind="sparse", ceiling="wgmma.sp", min_arch=90, block=(128, 256, 64), stages=5,
            alignment="tma", static_smem=lambda acc, b_col: 0,
            promises={"sm_90a": ("HGMMA", "UTMALDG", "UTMASTG", "SYNCS", "USETMAXREG")},
            forbids={"sm_90a": ("HMMA", "LDGSTS", "LDSM", *_LOCAL)},
            # inspect shows the TMA-store epilogue on single blocks
            mma_forms={"fp16": ("HGMMA.SP.64x256x32.F32", "HGMMA.SP.64x256x32.F16")},
            inspect={"TMA_STORE": "true", "CLUSTER": "1"}, dense_peer="wgmma_persistent"),
)
VARIANTS = VARIANTS + HOPPER + SPARSE

BY_NAME = {v.name: v for v in VARIANTS}


def source(v: Variant) -> Path:
    """The kernel file of a PTX record."""
    return CSRC / v.file


def registered_operands(v: Variant) -> str:
    """The operand strides its kernel file registers (host/registry.h's hgemm::Operands), from the record:
    "AnyStrides" (every layout in place and no alignment: it reads A and B through their strides), "AnyMajor" (A and
    B each row- or column-major in place, unit inner stride), "RowMajorA" (row-major A, B row- or column-major)."""
    if "TN" not in v.native_layouts:
        return "RowMajorA"
    return "AnyStrides" if v.alignment == "none" else "AnyMajor"


def any_strides(v: Variant) -> bool:
    """Whether the kernel reads A and B with any strides (its file registers Operands::AnyStrides); the others
    need row- or column-major operands (row-major A unless `a_col_in_place`), and the wrapper copies other layouts
    first."""
    return registered_operands(v) == "AnyStrides"


def a_col_in_place(v: Variant, split: int | None = None) -> bool:
    """Whether the kernel reads column-major A in place (layouts TN and TT) on a call with hgemm's `split`; else the
    wrapper copies it to row-major. A pinned split the kernel hands to wgmma_splitk_grid (any count but 1, 2 and 4
    where `Variant.max_split` allows the grid) reads row-major A only: left in place, a column-major A's tensor map
    would deliver boxes of another shape than the stages expect, and the kernel would wait on them forever."""
    return "TN" in v.native_layouts and not (v.isa == "wgmma" and v.max_split and split not in (None, 0, 1, 2, 4))


def lab_sources(arch: int | None = None) -> list[str]:
    """The lab files (relative to csrc/) a GPU of compute capability `arch` builds (None: all of them)."""
    return [f for f, need in LAB_SOURCES.items() if arch is None or arch >= need]


def csrc_files() -> list[Path]:
    """Every file under csrc/: what the extension build and the cubin cache key on (any edit rebuilds)."""
    return sorted(p for p in CSRC.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def csrc_hash(*extra: str) -> str:
    """Hash of every csrc/ file (path and bytes) and the strings given (flags, versions): one rule for the
    extension's module name and the offline cubin cache."""
    import hashlib

    h = hashlib.sha256()
    for path in csrc_files():
        h.update(path.relative_to(CSRC).as_posix().encode() + b"\0" + path.read_bytes())
    for s in extra:
        h.update(b"\0" + s.encode())
    return h.hexdigest()[:12]
