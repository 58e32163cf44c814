"""The variant record: what one kernel variant is and supports, for PTX and Triton alike.

Every list of variants in the project is a tuple of these records (`ptx_kernels.variants.VARIANTS`,
`triton_kernels.variants.VARIANTS`); the build, the binding check, the tests and the harness ask the records
questions (`v.promises`, `v.ceiling`, `v.supports(...)`) instead of testing names. This module imports nothing of
the project: both kernel packages and the harness may import it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

LAYOUTS = ("NN", "NT", "TN", "TT")  # A then B; N = row-major, T = column-major (a .t() view)
# Accumulations each input dtype offers: bf16 accumulates in fp32 only (mma.sync and wgmma have no bf16 or fp16
# accumulator for bf16 operands).
ACCS_FOR: dict[str, tuple[str, ...]] = {"fp16": ("fp32", "fp16"), "bf16": ("fp32",)}


@dataclass(frozen=True)
class Variant:
    name: str  # unique across packages: "wmma_multistage", "triton_tma", "wgmma_ws"
    package: str  # "ptx" | "triton"
    family: str  # "simt" | "wmma" | "mma" | "wgmma" | "triton" (later "sparse")
    file: str  # the kernel file, relative to the package's source folder (ptx: csrc/, triton: the package)
    tile: str  # block tile and pipeline, for tables
    adds: str  # the one idea this step adds (the ladder's caption)
    isa: str  # instruction that does the math: "fma" | "wmma" | "mma.sync" | "wgmma" | "tl.dot"
    min_arch: int = 80  # compute capability x 10; a variant above the device's is not offered there
    kind: str = "dense"  # problem kind: "dense" (later "sparse")
    dtypes: tuple[str, ...] = ("fp16",)
    accs: tuple[str, ...] = ("fp32", "fp16")
    # Layouts (A then B) the kernel reads in place; the others are copied by the wrapper first (counted in time).
    native_layouts: tuple[str, ...] = ("NN", "NT")
    # Operand alignment the kernel needs to read in place: "none", "rows16" (16-byte aligned rows: cp.async),
    # "tma" (rows16 + inner stride 1, TMA-describable), "tma_ab" (A and B TMA-describable, C anything); the wrapper
    # copies (ptx), or another kernel runs or the operands are staged (triton, triton_kernels/dispatch.py).
    alignment: str = "none"
    # What happens to operands that miss `alignment`: "copy" (the wrapper copies them first, counted in the call's
    # time) or "refuse" (the kernel raises; `hgemm(kernel="auto")` picks another one, the harness skips the case).
    misaligned: str = "copy"
    # SASS opcodes the design promises in every instantiation's main loop, per target ("sm_80", "sm_90a", "sm_90").
    promises: dict[str, tuple[str, ...]] = field(default_factory=dict, hash=False, compare=False)
    # SASS opcodes the design promises are absent from the main loop (e.g. BAR in an mbarrier pipeline).
    forbids: dict[str, tuple[str, ...]] = field(default_factory=dict, hash=False, compare=False)
    ceiling: str | None = None  # instruction ceiling that scores it: "mma.sync" | "wgmma" | None
    block: tuple[int, int, int] = (16, 16, 16)  # BM, BN, BK: the tile whose edges the tests probe
    stages: int = 1  # shared-memory pipeline depth
    block_fp16: tuple[int, int, int] | None = None  # a second tile for fp16 accumulation, where there is one
    stages_fp16: int | None = None
    slow: bool = False  # naive teaching kernel: the harness skips it on very large problems
    # the entry to use from its family (the last step of a ladder that is general and fast): the main job times the
    # recommended entries over its suite, and every step of every ladder at one shape
    recommended: bool = False
    # Static shared memory (bytes) each instantiation's design implies, for the compile test: f(acc, b_col_major).
    static_smem: Callable[[str, bool], int] | None = field(default=None, hash=False, compare=False, repr=False)

    # ---- Triton records (package "triton"); the kernel module is the package's `file` (triton_kernels/<file>),
    # which provides what triton_kernels.contract.KernelModule declares ----
    # `name` is what kernel= takes, in both packages; older names it still takes, without a warning (Triton's
    # short ones: "blocked", "tma")
    aliases: tuple[str, ...] = ()
    # kernel="auto" may run it without timing (the interpreter, a pinned config): it takes any problem its alignment
    # allows (triton_kernels.dispatch.kernel_for takes the last general record the operands fit)
    general: bool = False
    dispatch: bool = False  # not a kernel but the package's choice among its records (Triton's kernel="auto")
    interpretable: bool = True  # TRITON_INTERPRET=1 can run it (a Gluon kernel cannot: not offered there)
    triton_versions: tuple[str, ...] = ()  # Triton releases (version prefixes) its API is written for; () = any

    # ---- PTX records (package "ptx") ----
    splits: tuple[int, ...] = ()  # the K splits its launcher takes (hgemm(split=...)); () = it never splits K
    max_split: int = 0  # beyond `splits`, any count 1..max_split it splits K over the grid (0: none)
    # Per dtype, the tensor-core SASS forms its instances hold, each whole ("HMMA.16816.F32" is fp16 operands,
    # ".F32.BF16" bf16; sparse: "HMMA.SP.16832.F32"), and no other form (tests/test_ptx_compile.py); {} = unchecked.
    mma_forms: dict[str, tuple[str, ...]] = field(default_factory=dict, hash=False, compare=False)
    # B row- or column-major is read in place whatever the 16-byte alignment of its base and rows (`alignment` then
    # does not hold for B): the wrapper copies no B for that; a_rows_any: the same for A
    b_rows_any: bool = False
    a_rows_any: bool = False
    unrolled_stages: bool = False  # the fp32 tile's main loop is unrolled over the ring's stages (MMA counts)
    # Built on first use into a library of its own beside the extension (ptx_kernels/build.py, `load(on_demand=True)`),
    # not with the extension: a kernel nothing dispatches to, called by name only, whose instances would lengthen
    # every fresh build.
    on_demand: bool = False
    # Which of its instances `compare inspect` shows, beyond the call's dtype and accumulation and row-major B: the
    # kernel template's arguments by parameter name, as the compiler spells them ({"T": "Tile<256, 4, 1, 128, 64>",
    # "TMA_STORE": "true"}); the instances themselves are listed from the compiled kernel (toolchain.instances).
    # {} = the first such instance.
    inspect: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    dense_peer: str | None = None  # a sparse record's dense kernel of the same ladder, timed beside it
    # A kernel made for a few rows of A (mma_stream: each 16-row block reads all of B again): the bench times it up to
    # this M only; the check and the tests run it on every shape. None: every M.
    max_m: int | None = None

    def block_for(self, acc: str) -> tuple[int, int, int]:
        """The block tile (BM, BN, BK) the kernel runs with accumulation acc."""
        return self.block_fp16 if acc == "fp16" and self.block_fp16 else self.block

    def stages_for(self, acc: str) -> int:
        return self.stages_fp16 if acc == "fp16" and self.stages_fp16 else self.stages

    def offered_on(self, arch: int | None) -> bool:
        """Whether the variant runs on a device of compute capability `arch` (x10); None = any (CPU questions)."""
        return arch is None or arch >= self.min_arch

    def supports(self, *, dtype: str = "fp16", acc: str = "fp32", layout: str = "NN", arch: int | None = None,
                 kind: str = "dense") -> bool:
        """Whether a call with these facts runs on this variant (any layout runs: non-native ones are copied)."""
        return (dtype in self.dtypes and acc in self.accs and acc in ACCS_FOR.get(dtype, ()) and layout in LAYOUTS
                and kind == self.kind and self.offered_on(arch))

    def promised(self, target: str) -> tuple[str, ...]:
        return self.promises.get(target, ())

    def triton_releases(self) -> str:
        """The Triton releases its API is written for, as people write them ("3.6"; "" = any)."""
        return "/".join(x.rstrip(".") for x in self.triton_versions)

    def triton_refusal(self, installed: str) -> str | None:
        """Why Triton `installed` cannot run this record ("gluon_persistent needs triton 3.6 (installed: 3.9.0)"),
        None where it can (`triton_versions`)."""
        if not self.triton_versions or installed.startswith(self.triton_versions):
            return None
        return f"{self.name} needs triton {self.triton_releases()} (installed: {installed})"
