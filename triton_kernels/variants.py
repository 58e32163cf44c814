"""What each Triton kernel is and supports, as the shared record (`hgemm_common.record.Variant`): the single
source of truth for `triton_kernels.hgemm`, the tests and the harness.

A record's `extra` names its kernel module, which provides `configs()`, `launch(a, b, c, acc_fp16, config)`,
`best_config()`, `INTERPRETER_CONFIG` and `inspect_source(config)`; adding a Triton kernel = one module + one
record here.
"""
from __future__ import annotations

from hgemm_common.record import LAYOUTS, Variant

from . import blocked, tma_persistent

# Ladder order: `hgemm(kernel="auto")` takes the last record that runs on the device and the operands.
VARIANTS: tuple[Variant, ...] = (
    Variant("triton_blocked", "triton", "triton", "blocked.py", "autotuned over blocked.configs()",
            "tl.dot blocked kernel (tutorial 03), cp.async pipeline, any strides", "tl.dot",
            native_layouts=LAYOUTS, alignment="none",
            # sm_90: tl.dot lowers to wgmma, operands arrive by cp.async (checked by `compare inspect`'s test)
            promises={"sm_90": ("HGMMA", "LDGSTS")}, forbids={"sm_90": ("UTMALDG",)}, ceiling="wgmma",
            extra={"kernel": "blocked", "module": blocked}),
    Variant("triton_tma", "triton", "triton", "tma_persistent.py", "autotuned over tma_persistent.configs()",
            "tl.dot persistent kernel, TMA loads/stores (tutorial 09), aligned operands", "tl.dot", min_arch=90,
            native_layouts=LAYOUTS, alignment="tma", misaligned="refuse",
            promises={"sm_90": ("HGMMA", "UTMALDG")}, forbids={"sm_90": ("LDGSTS",)}, ceiling="wgmma",
            extra={"kernel": "tma", "module": tma_persistent}),
)

# `hgemm(kernel="auto")`: not a kernel of its own but the choice among the records above, listed by the harness
# as `triton`.
AUTO = Variant("triton", "triton", "triton", "api.py", "autotuned; the kernel chosen per call",
               "tl.dot; TMA persistent when operands allow, else blocked", "tl.dot", native_layouts=LAYOUTS,
               ceiling="wgmma", extra={"kernel": "auto", "dispatch": True})

BY_NAME = {v.name: v for v in (AUTO, *VARIANTS)}
BY_KERNEL = {v.extra["kernel"]: v for v in VARIANTS}  # hgemm's kernel= argument: "blocked", "tma"
