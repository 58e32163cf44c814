"""What each Triton kernel is and supports, as the shared record (`hgemm_common.record.Variant`): the single
source of truth for `triton_kernels.hgemm`, the tests and the harness.

Adding a Triton kernel = one module (a file of this package providing what `triton_kernels.contract.KernelModule`
declares: `configs()`, `launches(a, b, c, acc_fp16, config)`, `worth_timing(...)`, `INTERPRETER_CONFIG`,
`inspect_source(config)`) + one record in `RECORDS` naming it (`file`). The record's name is the kernel's one name:
what hgemm's kernel= takes, what plans and plan tables hold, what the reports, the support matrix and
`python -m compare --kernels` show; the short names kernel= took before ("blocked", "tma") are still taken
(`Variant.aliases`). Nothing else lists kernels: the dispatcher, the API, the plan tables and the harness read these
records, and `kernel_module(record)` is the module. `general`: a kernel kernel="auto" may take without timing (the
interpreter, a pinned config).
Every kernel takes fp16 and bf16 (`dtypes`; A, B and C of one dtype): the dtype comes from the pointers' and
descriptors' element types, so one source compiles to `HGMMA....F32.BF16` / `HMMA.16816.F32.BF16` for bf16 (the
CUDA-core gemv: FFMA on the converted values); bf16 accumulates in fp32 only (`hgemm_common.record.ACCS_FOR`).
"""
from __future__ import annotations

import importlib
from pathlib import Path

import triton

from hgemm_common.errors import HgemmValueError
from hgemm_common.record import LAYOUTS, Variant
from hgemm_common.validation import interpreter_active

from . import gluon_persistent
from .contract import KernelModule, optional

DTYPES = ("fp16", "bf16")  # what every kernel below takes

# Every Triton kernel, in ladder order: each record adds one idea to one before it. A record whose module cannot
# run here (`UNAVAILABLE`, or the interpreter for a record that is not `interpretable`) is listed in NOT_OFFERED
# instead of VARIANTS.
RECORDS: tuple[Variant, ...] = (
    Variant("triton_blocked", "triton", "triton", "blocked.py", "one of blocked.configs()",
            "tl.dot blocked kernel (tutorial 03), cp.async pipeline, any strides", "tl.dot",
            native_layouts=LAYOUTS, alignment="none", dtypes=DTYPES,
            # sm_90: tl.dot lowers to wgmma, operands arrive by cp.async (checked by `compare inspect`'s test)
            promises={"sm_90": ("HGMMA", "LDGSTS")}, forbids={"sm_90": ("UTMALDG",)}, ceiling="wgmma",
            aliases=("blocked",), general=True),
    Variant("triton_splitk", "triton", "triton", "splitk.py", "one of splitk.configs()",
            "+ split-K for skinny M: fp32 partials summed in slice order by each tile's last slice, 16-row tiles",
            "tl.dot", native_layouts=LAYOUTS, alignment="none", dtypes=DTYPES,
            # the 16x64x128 tile of a 16-row problem: mma.sync (wgmma needs 64 rows), operands by cp.async
            promises={"sm_90": ("HMMA", "LDGSTS")}, forbids={"sm_90": ("UTMALDG",)}, ceiling="wgmma",
            aliases=("splitk",)),
    Variant("triton_realign", "triton", "triton", "realign.py", "one of realign.configs()",
            "+ a K-major B with rows off the 16-byte grid: rows grouped by misalignment, each group read shifted "
            "in 16-byte vectors", "tl.dot", native_layouts=LAYOUTS, alignment="none", dtypes=DTYPES,
            # the 16x64x128 tile of a 16-row problem: mma.sync, B's shifted rows by 16-byte cp.async
            promises={"sm_90": ("HMMA", "LDGSTS")}, forbids={"sm_90": ("UTMALDG",)}, ceiling="wgmma",
            aliases=("realign",)),
    Variant("triton_realign_rows", "triton", "triton", "realign_rows.py", "one of realign_rows.configs()",
            "+ the residue groups along K for an N-major B: each group's product written shifted into a plane of "
            "its own, the planes summed in a fixed order", "tl.dot", native_layouts=LAYOUTS, alignment="none",
            dtypes=DTYPES,
            # 16-row tiles: mma.sync, B's shifted rows by 16-byte cp.async
            promises={"sm_90": ("HMMA", "LDGSTS")}, forbids={"sm_90": ("UTMALDG",)}, ceiling="wgmma",
            aliases=("realign_rows",)),
    Variant("triton_gemv", "triton", "triton", "gemv.py", "one of gemv.configs()",
            "+ M = 1 without tensor cores: B's tiles into registers, FFMA, split-K summed in a fixed order",
            "fma", native_layouts=LAYOUTS, alignment="none", dtypes=DTYPES,
            # no tensor-core instruction: 16-byte loads of B straight into registers, CUDA-core multiply-adds
            promises={"sm_90": ("FFMA", "LDG")}, forbids={"sm_90": ("HMMA", "HGMMA", "LDGSTS", "UTMALDG")},
            aliases=("gemv",)),
    Variant("triton_tma", "triton", "triton", "tma_persistent.py", "one of tma_persistent.configs()",
            "tl.dot persistent kernel, TMA loads/stores (tutorial 09), aligned operands", "tl.dot", min_arch=90,
            native_layouts=LAYOUTS, alignment="tma", misaligned="refuse", dtypes=DTYPES,
            promises={"sm_90": ("HGMMA", "UTMALDG")}, forbids={"sm_90": ("LDGSTS",)}, ceiling="wgmma",
            aliases=("tma",), general=True),
    Variant("triton_splitk_tma", "triton", "triton", "splitk_tma.py", "one of splitk_tma.configs()",
            "+ split-K on TMA loads for skinny M: splitk's slices and reduction, tiles by descriptor", "tl.dot",
            min_arch=90, native_layouts=LAYOUTS, alignment="tma_ab", misaligned="refuse", dtypes=DTYPES,
            # the 16x64x128 tile of a 16-row problem: mma.sync (wgmma needs 64 rows), operands by TMA
            promises={"sm_90": ("HMMA", "UTMALDG")}, forbids={"sm_90": ("LDGSTS",)}, ceiling="wgmma",
            aliases=("splitk_tma",)),
    Variant("triton_splitk_wide", "triton", "triton", "splitk_wide.py", "one of splitk_wide.configs()",
            "+ small outputs over very long K: wgmma tiles in 8-128 K slices, the partials summed by a second "
            "kernel over every SM (a programmatic dependent launch)", "tl.dot", min_arch=90, native_layouts=LAYOUTS,
            alignment="tma_ab", misaligned="refuse", dtypes=DTYPES,
            # 64- and 128-row tiles: wgmma, operands by TMA
            promises={"sm_90": ("HGMMA", "UTMALDG")}, forbids={"sm_90": ("LDGSTS",)}, ceiling="wgmma",
            aliases=("splitk_wide",)),
    Variant("triton_streamk", "triton", "triton", "streamk.py", "one of streamk.configs()",
            "+ stream-K on the TMA persistent kernel: whole rounds of tiles data-parallel, the partial round's "
            "tiles cut into equal k-slices aligned in K, summed in a fixed order by a second launch", "tl.dot",
            min_arch=90, native_layouts=LAYOUTS, alignment="tma", misaligned="refuse", dtypes=DTYPES,
            promises={"sm_90": ("HGMMA", "UTMALDG")}, forbids={"sm_90": ("LDGSTS",)}, ceiling="wgmma",
            aliases=("streamk",)),
    # The Gluon level (triton.experimental.gluon): the same persistent warp-specialized design as the hand-written
    # wgmma_persistent, written in Python. Offered only where it can run: its Gluon API's Triton versions
    # (`triton_versions`), compiled (the interpreter cannot run Gluon). kernel="auto" does not time it
    # (`worth_timing`); kernel="gluon_persistent" runs it, planned as any named kernel (`dispatch.table_plan`: the
    # cost model where the GPU's file fits it, else its own tile rule, `choose_config`), and copies
    # operands TMA cannot describe first (misaligned="copy": the dispatcher stages them, as kernel="auto" does for the
    # TMA kernels).
    Variant("gluon_persistent", "triton", "triton", "gluon_persistent.py",
            "one of gluon_persistent.configs() by its rule (128x256 down to 64x32, split-K on small outputs)",
            "Gluon: TMA ring + mbarriers, a TMA producer warp and one wgmma consumer warpgroup per 64 rows "
            "(warp_specialize, setmaxnreg), persistent grouped tiles, TMA-store epilogue", "wgmma", min_arch=90,
            native_layouts=LAYOUTS, alignment="tma", misaligned="copy", dtypes=DTYPES,
            promises={"sm_90": ("HGMMA", "UTMALDG", "SYNCS", "USETMAXREG")},
            forbids={"sm_90": ("LDGSTS", "LDL", "STL")}, ceiling="wgmma", block=(128, 256, 64), stages=4,
            aliases=("gluon",), interpretable=False, triton_versions=gluon_persistent.GLUON_TRITON_VERSIONS),
    # The Gluon kernel with triton_streamk's schedule and its fused fix-up (its SPLIT_MODE STREAM_K): like triton_streamk,
    # timed by the sweep (`worth_scoring`) and never picked by kernel="auto" (`SWEEP_ONLY`).
    Variant("gluon_streamk", "triton", "triton", "gluon_streamk.py",
            "one of gluon_streamk.configs() (gluon_persistent's tiles, unsplit)",
            "+ stream-K in the Gluon kernel's partitions: triton_streamk's schedule (whole rounds of tiles "
            "data-parallel, the partial round's tiles cut into k-slices aligned in K), summed in a fixed order by "
            "the last slice to arrive, per consumer warpgroup", "wgmma", min_arch=90, native_layouts=LAYOUTS, alignment="tma",
            misaligned="copy", dtypes=DTYPES, promises={"sm_90": ("HGMMA", "UTMALDG", "SYNCS", "USETMAXREG")},
            forbids={"sm_90": ("LDGSTS", "LDL", "STL")}, ceiling="wgmma", block=(128, 256, 64), stages=4,
            interpretable=False, triton_versions=gluon_persistent.GLUON_TRITON_VERSIONS),
    # The Gluon level's bandwidth path (ptx_kernels' mma_stream, in Gluon): a few rows of A against B, both read in
    # place at any alignment by pointer loads, C^T = B^T A^T on mma_v2, K split over the grid. kernel="gluon_stream"
    # runs it (its rule, `choose_config`, where no configuration is named); kernel="gluon_persistent" hands it
    # problems of M <= 32 where the cost model predicts it faster (`dispatch.hands_off`).
    Variant("gluon_stream", "triton", "triton", "gluon_stream.py",
            "one of gluon_stream.configs() by its rule (16 or 32 rows x 64 or 128 columns, K split over the grid)",
            "Gluon: C^T = B^T A^T on mma_v2, A and B loaded by pointer at any alignment (in vectors as wide as "
            "it allows), the next k-block in flight, K split over the grid and summed in a fixed order by a second launch", "mma.sync",
            min_arch=80, native_layouts=LAYOUTS, alignment="none", dtypes=DTYPES, promises={"sm_90": ("HMMA",)},
            forbids={"sm_90": ("UTMALDG", "LDL", "STL")}, ceiling="mma.sync", block=(16, 128, 32), stages=1,
            interpretable=False, triton_versions=gluon_persistent.GLUON_TRITON_VERSIONS),
)


_MODULES: dict = {}  # file -> its module, imported once


def kernel_module(v: Variant) -> KernelModule:
    """The kernel module of a Triton record: triton_kernels/<v.file> (`triton_kernels.contract`)."""
    if v.dispatch or v.package != "triton":
        raise HgemmValueError(f"{v.name!r} is not a Triton kernel record: it has no kernel module")
    mod = _MODULES.get(v.file)
    if mod is None:
        mod = _MODULES[v.file] = importlib.import_module(f"{__package__}.{Path(v.file).stem}")
    return mod


def _not_offered(v: Variant) -> str | None:
    """Why record v cannot run in this process (None: it can): the installed Triton is not a release its API is
    written for (`Variant.triton_versions`), its module says why not (`UNAVAILABLE`), or the interpreter is on and
    cannot run it. Asked again for a refused kernel= (`refusal`), so it reads the version at that moment."""
    why = v.triton_refusal(triton.__version__) or optional(kernel_module(v), "UNAVAILABLE")
    if why is None and not v.interpretable and interpreter_active():
        why = f"Triton's interpreter (TRITON_INTERPRET=1) cannot run {v.name}"
    return why


# Records left out here, and why (one line each): `python -m compare` and the tests read this.
NOT_OFFERED: dict[str, str] = {v.name: why for v in RECORDS if (why := _not_offered(v)) is not None}
VARIANTS: tuple[Variant, ...] = tuple(v for v in RECORDS if v.name not in NOT_OFFERED)
GLUON = next(v for v in RECORDS if v.file == "gluon_persistent.py")  # the Gluon level (tests/test_gluon.py)

# `hgemm(kernel="auto")`: not a kernel of its own but the choice among the records above, listed by the harness
# and the support matrix as `triton` (which kernel= takes too).
AUTO = Variant("triton", "triton", "triton", "api.py", "the plan of the call's shape class (plan table)",
               "tl.dot; the plan table's choice among the records above for the call's shape class", "tl.dot",
               native_layouts=LAYOUTS, ceiling="wgmma", dtypes=DTYPES, recommended=True, dispatch=True)

BY_NAME = {v.name: v for v in (AUTO, *VARIANTS)}
BY_KERNEL = {v.name: v for v in VARIANTS}  # a plan's kernel (a record's name) -> its record
# Every name hgemm's kernel= takes -> the name plans, tables and reports use: each offered record's name and older
# names (`Variant.aliases`), and "auto" for AUTO (by its name "triton" as well).
KERNEL_NAMES: dict[str, str] = {"auto": "auto", AUTO.name: "auto",
                                **{n: v.name for v in VARIANTS for n in (v.name, *v.aliases)}}


def refusal(kernel: str) -> str | None:
    """Why kernel= `kernel`, a name or older name of a record not offered here, cannot run ("gluon_persistent needs
    triton 3.6 (installed: 3.9.0)"); None for a name no record has."""
    for v in RECORDS:
        if kernel in (v.name, *v.aliases):
            return _not_offered(v) or NOT_OFFERED.get(v.name)
    return None
