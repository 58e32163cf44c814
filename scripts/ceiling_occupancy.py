"""The mma.sync and mma.sp instruction ceilings at the occupancy a GEMM kernel runs with (GPU only).

    python scripts/ceiling_occupancy.py [--blocks 1,2,4,8,16]

The ceiling loops (lab/mma_ceiling.cu, lab/mma_sp_ceiling.cu) run 4 warps a block, 8 independent accumulator chains
a warp, fixed operand registers; the frame launches 16 blocks per SM (16 warps per scheduler). Here they run on
fewer blocks per SM: 2 blocks = 8 warps per SM = 2 warps per scheduler, the occupancy of the pipelined mma.sync
kernels and of mma_sp (one 256-thread block per SM). Each row: TFLOPS (sparse: counted as the dense work) per
accumulation, L2 flushed before every launch (compare.bench.Timer), median of 10.
"""
import argparse

import torch

import ptx_kernels
from compare.bench import Timer
from compare.frame import ceiling_tflops


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", default="1,2,4,8,16")
    args = ap.parse_args()
    ext = ptx_kernels.load()
    timer = Timer()
    sink = torch.empty(32 * 2**20 // 4, dtype=torch.float32, device="cuda")
    names = [n for n in ("mma.sync", "mma.sp") if n in ext.hgemm_ceilings()]
    print(f"{'blocks/SM':>9} {'warps/scheduler':>15} " + " ".join(f"{n + ' ' + acc:>16}" for n in names
                                                             for acc in ("fp32", "fp16")))
    for blocks in (int(x) for x in args.blocks.split(",")):
        row = [ceiling_tflops(timer, ext, sink, n, acc, blocks) for n in names for acc in ("fp32", "fp16")]
        print(f"{blocks:9d} {blocks:15d} " + " ".join(f"{v:16.1f}" for v in row))


if __name__ == "__main__":
    main()
