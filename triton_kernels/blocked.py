"""Blocked Triton HGEMM: C[M, N] = A[M, K] @ B[K, N] in fp16, fp32 or fp16 accumulation.

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

from hgemm_common.operands import layout_of
from hgemm_common.validation import needs_int64_indexing

from .common import Config, autotune_bench, grouped_pid, prune_for_problem


# ----------------------------------------------------------------------------------------------------------------
# Tuning constants
# ----------------------------------------------------------------------------------------------------------------
def configs() -> list[Config]:
    """The autotuning list, Hopper-minded (228 KB shared memory per SM, wgmma wants 64-row warpgroup tiles).

    Big tiles first: 128x256 and 256x128 with 8 warps keep two warpgroups busy on wgmma and need
    3 x 48 KB of pipeline; 128x128 and 64x128 cover small and skinny problems where big tiles leave SMs idle.
    """
    return [
        Config(128, 256, 64, group_m=8, num_warps=8, num_stages=3),
        Config(256, 128, 64, group_m=8, num_warps=8, num_stages=3),
        Config(128, 256, 64, group_m=8, num_warps=8, num_stages=4),
        Config(128, 128, 64, group_m=8, num_warps=8, num_stages=4),
        Config(128, 128, 64, group_m=8, num_warps=4, num_stages=4),
        Config(64, 128, 64, group_m=8, num_warps=4, num_stages=4),
        Config(64, 64, 64, group_m=8, num_warps=4, num_stages=4),
        Config(128, 64, 32, group_m=8, num_warps=4, num_stages=4),
    ]


INTERPRETER_CONFIG = Config(32, 32, 32, group_m=4, num_warps=4, num_stages=2)


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
    LAYOUT: tl.constexpr,  # "NN", "NT", "TN", "TT" or "strided": only an autotuning key
    ACC_FP16: tl.constexpr,
    INDEX_64: tl.constexpr,
    EVEN_K: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    pid_m, pid_n = grouped_pid(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)

    # Rows and columns past the edge wrap onto valid ones; their results are never stored.
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    if INDEX_64:
        offs_am = offs_am.to(tl.int64)
        offs_bn = offs_bn.to(tl.int64)
        offs_k = offs_k.to(tl.int64)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak  # (BLOCK_M, BLOCK_K)
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn  # (BLOCK_K, BLOCK_N)

    if ACC_FP16:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)

    # MAIN LOOP
    for kt in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            k_left = K - kt * BLOCK_K
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        if ACC_FP16:
            acc = tl.dot(a, b, acc, out_dtype=tl.float16)
        else:
            acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    # EPILOGUE
    c = acc.to(tl.float16)
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    if INDEX_64:
        offs_cm = offs_cm.to(tl.int64)
        offs_cn = offs_cn.to(tl.int64)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


# bool(): under torch.compile with dynamic shapes K is a SymInt; a plain bool guards on K % BLOCK_K instead of handing
# Triton a symbolic boolean.
_even_k = triton.heuristics({"EVEN_K": lambda args: bool(args["K"] % args["BLOCK_K"] == 0)})
hgemm_kernel_pinned = _even_k(hgemm_kernel)
hgemm_kernel_autotuned = triton.autotune(
    configs=[c.to_triton() for c in configs()], key=["M", "N", "K", "LAYOUT", "ACC_FP16"],
    prune_configs_by={"early_config_prune": prune_for_problem}, do_bench=autotune_bench,
)(_even_k(hgemm_kernel))


# ----------------------------------------------------------------------------------------------------------------
# Host launcher
# ----------------------------------------------------------------------------------------------------------------
def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, acc_fp16: bool, config: Config | None,
           wrap=None) -> None:
    """C = A @ B on the blocked kernel; the caller has validated. config=None autotunes. wrap: applied to the
    kernel before launching (torch.library.wrap_triton inside a triton_op)."""
    wrap = wrap or (lambda kernel: kernel)
    m, k = a.shape
    n = b.shape[1]
    args = (a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    meta = dict(LAYOUT=layout_of(a, b), ACC_FP16=acc_fp16, INDEX_64=needs_int64_indexing(a, b, c))
    if config is None:
        grid = lambda META: (triton.cdiv(m, META["BLOCK_M"]) * triton.cdiv(n, META["BLOCK_N"]),)  # noqa: E731
        wrap(hgemm_kernel_autotuned)[grid](*args, **meta)
    else:
        config.check()
        grid = (triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n),)
        wrap(hgemm_kernel_pinned)[grid](
            *args, **meta, BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k,
            GROUP_M=config.group_m, num_warps=config.num_warps, num_stages=config.num_stages)


def inspect_source(cfg: Config) -> tuple:
    """What `triton.compile` needs to build the kernel as a 4096^3 NN problem specializes it (16-divisible sizes
    and strides, unit inner strides): (kernel, signature, constexprs, attrs), for `python -m compare inspect`."""
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
           "stride_am": "i32", "stride_ak": "constexpr", "stride_bk": "i32", "stride_bn": "constexpr",
           "stride_cm": "i32", "stride_cn": "constexpr"}
    consts = dict(stride_ak=1, stride_bn=1, stride_cn=1, LAYOUT="NN", ACC_FP16=False, INDEX_64=False, EVEN_K=True,
                  BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m)
    attrs = {(i,): [["tt.divisibility", 16]] for i in (0, 1, 2, 3, 4, 5, 6, 8, 10)}
    return hgemm_kernel, sig, consts, attrs


def best_config() -> Config | None:
    """The configuration the autotuner chose in its most recent call (None before any autotuned call)."""
    tc = getattr(hgemm_kernel_autotuned, "best_config", None)
    return None if tc is None else Config.from_triton(tc)
