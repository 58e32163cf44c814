"""Persistent Triton HGEMM with TMA loads and a warp-specialized K loop (Hopper), storing C through pointers.

Written for and checked on triton 3.6 only (`WS_TRITON_VERSIONS`). Triton 3.7 to 3.9's warp-specialization pass
rejects this kernel for sm_90 ("descriptor block and tensor must have the same number of elements"); on those
releases the study's test checks that the rejection still happens, so a release that compiles it shows up.

What it adds over triton_kernels/tma_persistent.py: `tl.range(..., warp_specialize=True)` on the K loop. Triton
3.6's Hopper pass (`nvgpu-warp-specialization`) then splits the loop into a producer warpgroup that only issues
TMA loads and two consumer warpgroups that only issue wgmma, synchronized by mbarriers, with `setmaxnreg`
moving registers from the producer to the consumers: the design of the hand-written `wgmma_ws`. `num_warps=4`
names one consumer warpgroup's warps; the compiled kernel runs 12 warps (3 warpgroups).

What 3.6 takes, found by compiling for sm_90 (`tests/test_triton_hgemm.py::test_warp_specialization_applies`
checks the first three on every config):
- the K loop of a tile, not the persistent tile loop: `warp_specialize=True` on the outer loop (with or without
  `flatten=True`) leaves the attribute in the TTGIR and compiles the same kernel as without it;
- num_warps=4: with 8 the pass leaves the loop alone;
- a pointer-store epilogue: a TMA store of C (`c_desc.store`, as tma_persistent.py does) after the specialized
  loop fails the pass's verifier ("tensor descriptor block and tensor types must match"); 64x256 tiles fail it
  too. The pointer store takes C with any strides, so only A and B need to be TMA-describable here.

Not a variant (no record; `hgemm` never runs it): on the H100 (triton 3.6.0, driver 580) the compiled kernel did
not finish. In the GPU suite a 300x264x520 NT call with configs()[3] hung the run for eight minutes;
a probe launching configs()[3] and configs()[0], NN and NT, through `kernel[grid]` (`launches` below, no direct
launcher) timed out after 45 s in every case, while the TMA kernel's tests (tma_persistent.py) passed in the same GPU
runs. Triton 3.6's own `tl.range` docstring agrees: "warp specialization is only supported on Blackwell GPUs and
only works on simple matmul loops" (the Hopper pass runs, as the test above shows, but is not a supported path).
So the study stops at what the compiler emits (the test above); the hand-written
warp-specialized kernels (ptx_kernels/csrc/sm90/wgmma_ws.cu and after) are this project's measured version.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from hgemm_common.validation import needs_int64_indexing

from .common import Config, cdiv, grouped_pid, out_offsets, to_output
from .launch import Spec
from .tma_persistent import num_sms, operand_descs, tma_dot_step

# Triton releases whose Hopper warp-specialization pass compiles this kernel (header).
WS_TRITON_VERSIONS = ("3.6.",)


def configs() -> list[Config]:
    """128-row tiles (two consumer warpgroups of 64 rows), 64-wide K (128-byte TMA rows). Shared memory per stage
    is (BM + BN) x 64 x 2 bytes: 128x256 fits 4 stages (224 KB of the 227 KB an H100 block may have), 128x128 5."""
    return [
        Config(128, 256, 64, group_m=8, num_warps=4, num_stages=3),
        Config(128, 256, 64, group_m=8, num_warps=4, num_stages=4),
        Config(256, 128, 64, group_m=8, num_warps=4, num_stages=3),
        Config(128, 128, 64, group_m=8, num_warps=4, num_stages=4),
        Config(128, 128, 64, group_m=8, num_warps=4, num_stages=5),
    ]


@triton.jit
def hgemm_tma_ws_kernel(
    # descriptors and pointers
    a_desc, b_desc, c_ptr,
    # sizes
    M, N, K,
    # strides of C (elements)
    stride_cm, stride_cn,
    # meta-parameters
    A_T: tl.constexpr,  # a_desc describes A^T (A is column-major)
    B_T: tl.constexpr,  # b_desc describes B^T (B is column-major)
    ACC_FP16: tl.constexpr,
    INDEX_64: tl.constexpr,
    NUM_SMS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile_id in range(tl.program_id(0), num_pid_m * num_pid_n, NUM_SMS):
        pid_m, pid_n = grouped_pid(tile_id, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        if ACC_FP16:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)
        else:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        # MAIN LOOP: producer warpgroup (TMA) and consumer warpgroups (wgmma)
        for ki in tl.range(0, k_tiles, warp_specialize=True):
            acc = tma_dot_step(a_desc, b_desc, off_m, off_n, ki * BLOCK_K, acc, A_T, B_T, ACC_FP16)
        # EPILOGUE: masked pointer store (see the header: a TMA store here breaks the warp-specialization pass)
        offs_cm, offs_cn = out_offsets(off_m, off_n, INDEX_64, BLOCK_M, BLOCK_N)
        c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
        tl.store(c_ptrs, to_output(acc, c_ptr.dtype.element_ty), mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


def launches(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, acc_fp16: bool, config: Config) -> list[Spec]:
    """C = A @ B as one persistent launch (`launch.jit_launch(spec)` runs it): the call that reproduces the hang in
    the header. A and B TMA-describable (`meets_alignment("tma_ab", ...)`); C may have any strides."""
    m, k = a.shape
    n = b.shape[1]
    a_desc, b_desc, a_t, b_t = operand_descs(a, b, config)
    sms = num_sms(a.device)
    grid = (min(sms, cdiv(m, config.block_m) * cdiv(n, config.block_n)),)
    args = (a_desc, b_desc, c, m, n, k, c.stride(0), c.stride(1), a_t, b_t, acc_fp16, needs_int64_indexing(c), sms,
            *config.meta.values())
    return [Spec(hgemm_tma_ws_kernel, grid, args, config.num_warps, config.num_stages)]


def inspect_source(cfg: Config, dtype: str = "fp16") -> tuple:
    """What `triton.compile` needs to build the kernel as a 4096^3 NN problem on an H100 specializes it:
    (kernel, signature, constexprs, attrs) for inputs of `dtype` ("fp16", "bf16"), for `python -m compare inspect`
    and the warp-specialization test."""
    bm, bn, bk = cfg.block_m, cfg.block_n, cfg.block_k
    sig = {"a_desc": f"tensordesc<{dtype}[{bm}, {bk}]>", "b_desc": f"tensordesc<{dtype}[{bk}, {bn}]>",
           "c_ptr": f"*{dtype}", "M": "i32", "N": "i32", "K": "i32", "stride_cm": "i32", "stride_cn": "constexpr"}
    consts = dict(stride_cn=1, A_T=False, B_T=False, ACC_FP16=False, INDEX_64=False, NUM_SMS=132, BLOCK_M=bm,
                  BLOCK_N=bn, BLOCK_K=bk, GROUP_M=cfg.group_m)
    attrs = {(i,): [["tt.divisibility", 16]] for i in (2, 3, 4, 5, 6)}
    return hgemm_tma_ws_kernel, sig, consts, attrs
