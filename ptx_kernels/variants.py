"""What each hand-written variant is and supports: the single source of truth for ptx_kernels and the harness."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CSRC = Path(__file__).resolve().parent / "csrc"


@dataclass(frozen=True)
class Variant:
    name: str
    family: str  # "simt" | "wmma" (later "mma", "wgmma", "sparse")
    file: str  # the .cu file under csrc/
    tile: str  # block tile and pipeline, for tables
    adds: str  # the one idea this step adds
    block: tuple[int, int, int] = (16, 16, 16)  # BM, BN, BK: the tile whose edges the tests probe
    stages: int = 1  # shared-memory pipeline depth
    min_arch: int = 80  # compute capability x 10
    accs: tuple[str, ...] = ("fp32", "fp16")
    # Layouts (A then B; N = row-major, T = column-major) the kernel reads in place. Column-major A and general
    # strided views are first copied to row-major by the wrapper (the copy is part of the call and of its timing).
    native_layouts: tuple[str, ...] = ("NN", "NT")
    aligned_rows: bool = False  # needs 16-byte aligned rows of A and B (cp.async); the wrapper copies otherwise
    slow: bool = False  # naive teaching kernel: the harness skips it on very large problems
    # Where fp16 accumulation uses another tile (its accumulators take half the registers, so warp tiles double):
    block_fp16: tuple[int, int, int] | None = None
    stages_fp16: int | None = None

    def block_for(self, acc: str) -> tuple[int, int, int]:
        """The block tile (BM, BN, BK) the kernel runs with accumulation acc."""
        return self.block_fp16 if acc == "fp16" and self.block_fp16 else self.block

    def stages_for(self, acc: str) -> int:
        return self.stages_fp16 if acc == "fp16" and self.stages_fp16 else self.stages

    @property
    def source(self) -> Path:
        return CSRC / self.file


VARIANTS: tuple[Variant, ...] = (
    Variant("simt_naive", "simt", "simt_naive.cu", "16x16 threads, 1 output each",
            "CUDA cores only: one thread per output element", block=(16, 16, 1),
            native_layouts=("NN", "NT", "TN", "TT"), slow=True),
    Variant("wmma_naive", "wmma", "wmma_naive.cu", "1 warp, 16x16",
            "tensor cores (WMMA m16n16k16), fragments straight from global memory", slow=True),
    Variant("wmma_smem", "wmma", "wmma_smem.cu", "64x32x16, 8 warps x 1 fragment",
            "A and B tiles staged in shared memory, shared by 8 warps", block=(64, 32, 16)),
    Variant("wmma_regtile", "wmma", "wmma_regtile.cu", "128x128x16, 8 warps x 4x2 fragments",
            "register tiling: each warp owns a 64x32 tile of 4x2 fragments", block=(128, 128, 16)),
    Variant("wmma_async_dbuf", "wmma", "wmma_async_dbuf.cu", "128x128x16, 2 stages, padded rows",
            "cp.async double buffering and padded shared rows", block=(128, 128, 16), stages=2,
            aligned_rows=True),
    Variant("wmma_multistage", "wmma", "wmma_multistage.cu",
            "128x256x64, 3 stages, 8 warps x 4x4 fragments; "
            "fp16 on large problems: 256x256x32, 4 stages, 8 warps x 4x8",
            "3-4 stage cp.async pipeline, 64x64 (fp16: 64x128) warp tiles, fragments loaded a k-step ahead",
            block=(128, 256, 64), stages=3, block_fp16=(256, 256, 32), stages_fp16=4, aligned_rows=True),
    Variant("mma_naive", "mma", "mma_naive.cu", "1 warp, 16x8",
            "mma.sync.m16n8k16 fed by ldmatrix: fragment registers the program addresses itself",
            block=(16, 8, 16), slow=True),
    Variant("mma_tiled", "mma", "mma_tiled.cu", "128x128x32, 8 warps x 64x32 (4x4 m16n8 tiles)",
            "block and warp tiling: every fragment feeds 4 MMAs", block=(128, 128, 32)),
    Variant("mma_multistage", "mma", "mma_multistage.cu",
            "128x256x64, 3 stages, 8 warps x 64x64; "
            "fp16 on large problems: 256x256x32, 4 stages, 8 warps x 64x128",
            "3-4 stage cp.async pipeline, large warp tiles, fragments double-buffered in registers (fp32)",
            block=(128, 256, 64), stages=3, block_fp16=(256, 256, 32), stages_fp16=4, aligned_rows=True),
    Variant("mma_swizzle", "mma", "mma_swizzle.cu", "mma_multistage's tiles, XOR-swizzled shared memory",
            "XOR-swizzled shared memory: conflict-free ldmatrix and cp.async", block=(128, 256, 64), stages=3,
            block_fp16=(256, 256, 32), stages_fp16=4, aligned_rows=True),
    Variant("mma_stmatrix", "mma", "mma_stmatrix.cu", "mma_multistage's tiles, swizzled, stmatrix epilogue",
            "stmatrix epilogue through shared memory, 16-byte coalesced stores (sm_90; plain stores before)",
            block=(128, 256, 64), stages=3, block_fp16=(256, 256, 32), stages_fp16=4, aligned_rows=True),
)

BY_NAME = {v.name: v for v in VARIANTS}
HEADERS = ("hgemm.cuh", "ptx.cuh", "tile_io.cuh", "mma_pipeline.cuh", "asm_examples.cuh")
BINDING = "binding.cpp"
