"""The physical frame, measured in the same run as the kernels: the instruction ceilings the records name (mma.sync
for the HMMA kernels, wgmma for the HGMMA ones where the GPU has it), fp32 and fp16 accumulation, and device copy
bandwidth."""
from __future__ import annotations

import statistics

import torch

# Loop lengths that keep each ceiling's launch near 2 ms on an H100 (long enough for events, short enough to
# leave the clock where the kernels find it).
ITERS = {"mma.sync": 4096, "wgmma": 4096, "mma.sp": 2048, "wgmma.sp": 2048}  # sparse: twice the work each


def frame_key(ceiling: str, acc: str) -> str:
    """The frame's key of one ceiling's TFLOPS: mma_sync_fp32acc_tflops, wgmma_fp16acc_tflops, ..."""
    return f"{ceiling.replace('.', '_')}_{acc}acc_tflops"


def ceiling_tflops(timer, ext, sink, name: str, acc: str, blocks_per_sm: int = 0, reps: int = 10) -> float:
    """TFLOPS of instruction-ceiling loop `name` (lab/*_ceiling.cu) on blocks_per_sm blocks per SM (0: its own)."""
    iters = ITERS.get(name, 4096)
    flops = ext.hgemm_ceiling(name, sink, iters, acc == "fp16", blocks_per_sm)
    ms = statistics.median(timer.time(lambda: ext.hgemm_ceiling(name, sink, iters, acc == "fp16", blocks_per_sm), reps))
    return flops / (ms * 1e-3) / 1e12


def instruction_ceilings(timer, reps: int = 10) -> dict[str, dict[str, float]]:
    """TFLOPS of each instruction-ceiling loop the extension holds (lab/*_ceiling.cu), per accumulation."""
    import ptx_kernels

    ext = ptx_kernels.load()
    sink = torch.empty(32 * 2**20 // 4, dtype=torch.float32, device="cuda")  # plenty for any ceiling's blocks
    out: dict[str, dict[str, float]] = {}
    for name in ext.hgemm_ceilings():
        for acc in ("fp32", "fp16"):
            out.setdefault(name, {})[acc] = ceiling_tflops(timer, ext, sink, name, acc, 0, reps)
    return out


def copy_bandwidth(timer, mbytes: int = 1024, reps: int = 10) -> float:
    """Device-to-device copy in GB/s, counting bytes read plus bytes written."""
    src = torch.empty(mbytes * 2**20, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = statistics.median(timer.time(lambda: dst.copy_(src), reps))
    return 2 * src.numel() / (ms * 1e-3) / 1e9


def measure(timer) -> dict:
    out = {"copy_gb_s": copy_bandwidth(timer)}
    try:
        for name, by_acc in instruction_ceilings(timer).items():
            out.update({frame_key(name, acc): v for acc, v in by_acc.items()})
    except Exception as e:  # noqa: BLE001 - the frame is context; a missing toolchain must not stop the bench
        out["ceiling_error"] = f"{type(e).__name__}: {e}"
    return out


def ceilings(frame: dict) -> dict[str, dict[str, float]]:
    """Measured TFLOPS by instruction ceiling (a record's `ceiling`) and accumulation; only what was measured."""
    out: dict[str, dict[str, float]] = {}
    for name in ("mma.sync", "wgmma", "mma.sp", "wgmma.sp"):
        got = {acc: frame[frame_key(name, acc)] for acc in ("fp32", "fp16") if frame_key(name, acc) in frame}
        if got:
            out[name] = got
    return out


def describe(frame: dict) -> str:
    """The ceilings of a frame in words, for the report."""
    parts = [f"{name} ceiling {v['fp32']:.0f} TFLOPS (fp32 acc) / {v['fp16']:.0f} (fp16 acc)"
             for name, v in ceilings(frame).items() if "fp32" in v and "fp16" in v]
    return ", ".join(parts) or "no instruction ceiling measured"
