"""Blocked Triton HGEMM: C[M, N] = A[M, K] @ B[K, N] in fp16 (fp32 or fp16 accumulation) or bf16 (fp32).

The tutorial-03 kernel made safe for every shape and layout:
- grouped program ordering (GROUP_M programs down a column share B tiles in L2);
- rows/columns past M/N wrap (`% M`) so loads need no M/N mask; the store is masked;
- K is masked only when K is not a multiple of BLOCK_K (EVEN_K heuristic);
- strides are passed as they are: row-major, column-major and strided views need no copy;
- offsets are computed in int64 when some tensor spans more than 2**31 elements.
On sm_90 `tl.dot` lowers to wgmma (HGMMA in SASS); on sm_80 to mma.sync (HMMA).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from hgemm_common.validation import needs_int64_indexing

from .common import (Config, cdiv, div8_args, dot_k_loop, grouped_pid, operand_ptrs, out_offsets, to_output,
                     unscale_strides)
from .launch import Spec


# ----------------------------------------------------------------------------------------------------------------
# Tuning constants
# ----------------------------------------------------------------------------------------------------------------
def configs() -> list[Config]:
    """The tuning list, Hopper-minded (228 KB shared memory per SM, wgmma wants 64-row warpgroup tiles).

    Big tiles first: 128x256 and 256x128 with 8 warps keep two warpgroups busy on wgmma and need
    3 x 48 KB of pipeline; 128x128, 64x128 and 128x64 cover small and skinny problems where big tiles leave SMs
    idle, with 5 stages (faster than 4 at 1024^3 in the wide configuration sweeps on the H100: docs/design/triton.md).
    """
    return [
        Config(128, 256, 64, group_m=8, num_warps=8, num_stages=3),
        Config(256, 128, 64, group_m=8, num_warps=8, num_stages=3),
        Config(128, 256, 64, group_m=8, num_warps=8, num_stages=4),
        Config(128, 128, 64, group_m=8, num_warps=8, num_stages=4),
        Config(128, 128, 64, group_m=8, num_warps=4, num_stages=5),
        Config(64, 128, 64, group_m=8, num_warps=4, num_stages=5),
        Config(128, 64, 64, group_m=8, num_warps=4, num_stages=5),
        Config(64, 64, 64, group_m=8, num_warps=4, num_stages=4),
        Config(128, 64, 32, group_m=8, num_warps=4, num_stages=4),
    ]


INTERPRETER_CONFIG = Config(32, 32, 32, group_m=4, num_warps=4, num_stages=2)


def worth_timing(m: int, n: int, k: int, sms: int, tma_in_place: bool) -> bool:
    """Timed on every problem: even where TMA reads the operands in place the blocked kernel can win (it did at 1024^3
    and 128x8192x8192 in an H100 report; plans per shape: docs/design/triton.md)."""
    return True


# ----------------------------------------------------------------------------------------------------------------
# Kernel
# ----------------------------------------------------------------------------------------------------------------
@triton.jit
def hgemm_kernel(
    # pointers
    a_ptr, b_ptr, c_ptr,
    # sizes
    M, N, K,
    # strides (elements)
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    # meta-parameters
    ACC_FP16: tl.constexpr,
    INDEX_64: tl.constexpr,
    EVEN_K: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    DIV8: tl.constexpr = 0,  # multiples of 8 Triton cannot see: strides passed divided by 8, M, N (common.div8_args)
):
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn = unscale_strides(
        stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, DIV8)
    pid_m, pid_n = grouped_pid(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)

    a_ptrs, b_ptrs = operand_ptrs(a_ptr, b_ptr, pid_m, pid_n, 0, M, N, stride_am, stride_ak, stride_bk, stride_bn,
                                  INDEX_64, BLOCK_M, BLOCK_N, BLOCK_K, DIV8)

    # MAIN LOOP
    acc = dot_k_loop(a_ptrs, b_ptrs, K, BLOCK_K * stride_ak, BLOCK_K * stride_bk, ACC_FP16, EVEN_K,
                     BLOCK_M, BLOCK_N, BLOCK_K)

    # EPILOGUE
    c = to_output(acc, c_ptr.dtype.element_ty)
    offs_cm, offs_cn = out_offsets(pid_m * BLOCK_M, pid_n * BLOCK_N, INDEX_64, BLOCK_M, BLOCK_N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


# ----------------------------------------------------------------------------------------------------------------
# Host launcher
# ----------------------------------------------------------------------------------------------------------------
def launches(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, acc_fp16: bool, config: Config) -> list[Spec]:
    """C = A @ B on the blocked kernel: one launch; the caller has validated."""
    m, k = a.shape
    n = b.shape[1]
    grid = (cdiv(m, config.block_m) * cdiv(n, config.block_n),)
    strides, div8 = div8_args((*a.stride(), *b.stride(), *c.stride()), m, n)
    args = (a, b, c, m, n, k, *strides, acc_fp16, needs_int64_indexing(a, b, c), k % config.block_k == 0,
            *config.meta.values(), div8)
    return [Spec(hgemm_kernel, grid, args, config.num_warps, config.num_stages)]


def inspect_source(cfg: Config, dtype: str = "fp16") -> tuple:
    """What `triton.compile` needs to build the kernel as a 4096^3 NN problem specializes it (16-divisible sizes
    and strides, unit inner strides): (kernel, signature, constexprs, attrs) for inputs of `dtype` ("fp16",
    "bf16"), for `python -m compare inspect`."""
    sig = {"a_ptr": f"*{dtype}", "b_ptr": f"*{dtype}", "c_ptr": f"*{dtype}", "M": "i32", "N": "i32", "K": "i32",
           "stride_am": "i32", "stride_ak": "constexpr", "stride_bk": "i32", "stride_bn": "constexpr",
           "stride_cm": "i32", "stride_cn": "constexpr"}
    consts = dict(stride_ak=1, stride_bn=1, stride_cn=1, ACC_FP16=False, INDEX_64=False, EVEN_K=True,
                  BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m,
                  DIV8=0)
    attrs = {(i,): [["tt.divisibility", 16]] for i in (0, 1, 2, 3, 4, 5, 6, 8, 10)}
    return hgemm_kernel, sig, consts, attrs
