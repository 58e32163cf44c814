"""Persistent Triton HGEMM with TMA (tensor-descriptor) loads and stores, for Hopper and newer.

What it adds over the blocked kernel (triton_kernels/blocked.py):
- operand tiles arrive by the Tensor Memory Accelerator (`cp.async.bulk.tensor`, UTMALDG in SASS) on mbarriers,
  not by per-thread cp.async: no address arithmetic or masks in the main loop; the hardware zero-fills past the
  edges of the matrix, and clips the C store at them;
- a persistent grid: one program per SM walks tiles in grouped order (`tl.range(..., flatten=True)` lets the
  pipeline run on from one tile's K loop into the next's), so there is no tail wave of launches;
- layouts by descriptor: a column-major operand is described as its row-major transpose and transposed in
  shared memory (`.T`), which wgmma reads directly.
TMA needs 16-byte aligned base addresses and leading dimensions (multiples of 8 halves) with unit inner stride;
`hgemm_common.operands.tma_describable` says whether the inputs qualify, and `hgemm(kernel="auto")` falls back to the blocked kernel
otherwise.
"""
from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from hgemm_common.operands import major as _major
from hgemm_common.validation import interpreter_active

from .common import Config, autotune_bench, grouped_pid, prune_for_problem


def configs() -> list[Config]:
    """Hopper tiles: 128-row warpgroup tiles, 64-wide K (128-byte TMA rows, the widest swizzle).

    The C tile is staged in shared memory for the TMA store, so the pipeline gets what that leaves:
    128x256x64 fits 3 stages (3 x 48 KB + 64 KB of C), 128x128x64 fits 4 or 5.
    """
    return [
        Config(128, 256, 64, group_m=8, num_warps=8, num_stages=3),
        Config(256, 128, 64, group_m=8, num_warps=8, num_stages=3),
        Config(128, 128, 64, group_m=8, num_warps=8, num_stages=4),
        Config(128, 128, 64, group_m=8, num_warps=4, num_stages=4),
        Config(128, 128, 128, group_m=8, num_warps=8, num_stages=3),
        Config(128, 64, 64, group_m=8, num_warps=4, num_stages=4),
        Config(64, 128, 64, group_m=8, num_warps=4, num_stages=4),
    ]


INTERPRETER_CONFIG = Config(32, 32, 32, group_m=4, num_warps=4, num_stages=2)
INTERPRETER_SMS = 3  # persistent programs under the interpreter: few, so each walks several tiles


@triton.jit
def hgemm_tma_kernel(
    # descriptors
    a_desc, b_desc, c_desc,
    # sizes
    M, N, K,
    # meta-parameters
    A_T: tl.constexpr,  # a_desc describes A^T (A is column-major)
    B_T: tl.constexpr,  # b_desc describes B^T (B is column-major)
    ACC_FP16: tl.constexpr,
    NUM_SMS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    # The epilogue recomputes its tile from its own counter: with flatten=True the K loop of the next tile is
    # already being issued when this one's result is stored.
    tile_id_c = tl.program_id(0) - NUM_SMS
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = grouped_pid(tile_id, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        if ACC_FP16:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)
        else:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        # MAIN LOOP
        for ki in range(k_tiles):
            off_k = ki * BLOCK_K
            if A_T:
                a = a_desc.load([off_k, off_m]).T  # (BLOCK_K, BLOCK_M) tile of A^T
            else:
                a = a_desc.load([off_m, off_k])  # (BLOCK_M, BLOCK_K)
            if B_T:
                b = b_desc.load([off_n, off_k]).T  # (BLOCK_N, BLOCK_K) tile of B^T
            else:
                b = b_desc.load([off_k, off_n])  # (BLOCK_K, BLOCK_N)
            if ACC_FP16:
                acc = tl.dot(a, b, acc, out_dtype=tl.float16)
            else:
                acc = tl.dot(a, b, acc)
        # EPILOGUE
        tile_id_c += NUM_SMS
        pid_cm, pid_cn = grouped_pid(tile_id_c, num_pid_m, num_pid_n, GROUP_M)
        c_desc.store([pid_cm * BLOCK_M, pid_cn * BLOCK_N], acc.to(tl.float16))


def _set_block_shapes(nargs):
    """Autotuning pre-hook: each config needs its own TMA box sizes in the descriptors."""
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [bk, bm] if nargs["A_T"] else [bm, bk]
    nargs["b_desc"].block_shape = [bn, bk] if nargs["B_T"] else [bk, bn]
    nargs["c_desc"].block_shape = [bm, bn]


hgemm_tma_autotuned = triton.autotune(
    configs=[c.to_triton(pre_hook=_set_block_shapes) for c in configs()],
    key=["M", "N", "K", "A_T", "B_T", "ACC_FP16"],
    prune_configs_by={"early_config_prune": prune_for_problem}, do_bench=autotune_bench,
)(hgemm_tma_kernel)


@functools.lru_cache(maxsize=None)
def _num_sms(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, acc_fp16: bool, config: Config | None) -> None:
    """C = A @ B through TMA; the caller has validated and checked `tma_describable(a, b, c)`."""
    m, k = a.shape
    n = b.shape[1]
    if _major(c) != "N":
        raise ValueError("hgemm(kernel='tma'): the output must be row-major for the TMA store")
    a_t, b_t = _major(a) == "T", _major(b) == "T"
    # Descriptors over the row-major view of each operand; box sizes are set per config.
    a_view = a.t() if a_t else a
    b_view = b.t() if b_t else b
    dummy = [16, 16]
    a_desc = TensorDescriptor(a_view, list(a_view.shape), list(a_view.stride()), dummy)
    b_desc = TensorDescriptor(b_view, list(b_view.shape), list(b_view.stride()), dummy)
    c_desc = TensorDescriptor(c, list(c.shape), list(c.stride()), dummy)
    num_sms = INTERPRETER_SMS if interpreter_active() else _num_sms(a.device.index or 0)
    args = (a_desc, b_desc, c_desc, m, n, k)
    meta = dict(A_T=a_t, B_T=b_t, ACC_FP16=acc_fp16, NUM_SMS=num_sms)
    if config is None:
        grid = lambda META: (min(num_sms, triton.cdiv(m, META["BLOCK_M"]) * triton.cdiv(n, META["BLOCK_N"])),)  # noqa: E731
        hgemm_tma_autotuned[grid](*args, **meta)
    else:
        config.check()
        kw = dict(BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k, GROUP_M=config.group_m)
        _set_block_shapes({"a_desc": a_desc, "b_desc": b_desc, "c_desc": c_desc, **meta, **kw})
        grid = (min(num_sms, triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n)),)
        hgemm_tma_kernel[grid](*args, **meta, **kw, num_warps=config.num_warps, num_stages=config.num_stages)


def inspect_source(cfg: Config) -> tuple:
    """What `triton.compile` needs to build the kernel as a 4096^3 NN problem on an H100 specializes it:
    (kernel, signature, constexprs, attrs), for `python -m compare inspect`."""
    bm, bn, bk = cfg.block_m, cfg.block_n, cfg.block_k
    sig = {"a_desc": f"tensordesc<fp16[{bm}, {bk}]>", "b_desc": f"tensordesc<fp16[{bk}, {bn}]>",
           "c_desc": f"tensordesc<fp16[{bm}, {bn}]>", "M": "i32", "N": "i32", "K": "i32"}
    consts = dict(A_T=False, B_T=False, ACC_FP16=False, NUM_SMS=132, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                  GROUP_M=cfg.group_m)
    attrs = {(i,): [["tt.divisibility", 16]] for i in (3, 4, 5)}
    return hgemm_tma_kernel, sig, consts, attrs


def best_config() -> Config | None:
    tc = getattr(hgemm_tma_autotuned, "best_config", None)
    return None if tc is None else Config.from_triton(tc)
