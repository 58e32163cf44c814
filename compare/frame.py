"""The physical frame, measured in the same run as the kernels: the mma.sync instruction ceiling (fp32 and fp16
accumulation; what HMMA kernels are compared against) and device copy bandwidth."""
from __future__ import annotations

import statistics

import torch


def mma_sync_ceiling(timer, reps: int = 10) -> dict[str, float]:
    """TFLOPS of a register-only mma.sync.m16n8k16 loop filling the GPU, per accumulation type."""
    import ptx_kernels

    ext = ptx_kernels.load()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    blocks = sms * 16  # 64 warps per SM: every scheduler has work
    sink = torch.empty(blocks * 128, dtype=torch.float32, device="cuda")
    out = {}
    for acc in ("fp32", "fp16"):
        flops = ext.hgemm_mma_ceiling(sink, blocks, 4096, acc == "fp16")
        ms = statistics.median(timer.time(lambda: ext.hgemm_mma_ceiling(sink, blocks, 4096, acc == "fp16"), reps))
        out[acc] = flops / (ms * 1e-3) / 1e12
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
        cei = mma_sync_ceiling(timer)
        out.update(mma_sync_fp32acc_tflops=cei["fp32"], mma_sync_fp16acc_tflops=cei["fp16"])
    except Exception as e:  # noqa: BLE001 - the frame is context; a missing toolchain must not stop the bench
        out["mma_sync_error"] = f"{type(e).__name__}: {e}"
    return out


def ceilings(frame: dict) -> dict[str, dict[str, float]]:
    """Measured TFLOPS by instruction ceiling (a record's `ceiling`) and accumulation; only what was measured."""
    mma = {k: frame[f"mma_sync_{k}acc_tflops"] for k in ("fp32", "fp16") if f"mma_sync_{k}acc_tflops" in frame}
    return {"mma.sync": mma} if mma else {}
