"""Pieces the Triton kernels share: the tile configuration type, the grouped tile order, the dot step and the
output rounding (fp16 and bf16), the pruning of tiles far larger than the problem."""
from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass

import triton
import triton.language as tl

# host-side ceil(a / b): triton.cdiv is a constexpr function, each host call unwrapping its arguments through
# Triton's machinery, and the planner makes thousands of such calls per new kind of call
from hgemm_common.cost_model import cdiv  # noqa: F401  (re-exported to the kernel modules)
from hgemm_common.errors import HgemmValueError
from hgemm_common.timing import L2Flush, device_ms
from hgemm_common.validation import interpreter_active

# Triton 3.6's interpreter and bf16 (triton/runtime/interpreter.py; tests/test_triton_hgemm.py::
# test_interpreter_bf16_findings keeps these facts checked): it holds bf16 values as their uint16 bit patterns and
# hands tl.dot's operands to np.matmul as they are (only fp8 is decoded first), so a bf16 dot multiplies bit
# patterns (1.0 counts as 16256); and its fp32 -> bf16 cast truncates instead of rounding to nearest even. Its bf16
# loads, stores and bf16 -> fp32 casts are exact. Under the interpreter, and only there, `dot_acc` therefore decodes
# bf16 operands to fp32 before the dot (exact: a product of two bf16 values fits fp32's significand) and
# `to_output` rounds to bf16 by hand; compiled kernels never contain these branches (their SASS keeps the bf16
# tensor-core instructions: test_bf16_compiles_to_bf16_tensor_cores).
INTERPRETED = tl.constexpr(interpreter_active())


_CONFIG_NAME = re.compile(r"(\d+)x(\d+)x(\d+)_w(\d+)_s(\d+)_g(\d+)(?:_k(\d+))?(?:_e(\d+))?")


@dataclass(frozen=True)
class Config:
    """One point of a kernel's tuning space."""

    block_m: int
    block_n: int
    block_k: int
    group_m: int = 8
    num_warps: int = 4
    num_stages: int = 3
    split_k: int = 1  # K slices computed by separate programs and summed in a fixed order (triton_kernels/splitk.py)
    # TMA kernel: the C tile stored in this many column slices through a slice-sized shared buffer, which leaves
    # the operand pipeline the rest (128x256x64: 4 stages beside a 32 KB slice instead of 3 beside 64 KB)
    epilogue_split: int = 1

    @property
    def name(self) -> str:
        return (f"{self.block_m}x{self.block_n}x{self.block_k}"
                f"_w{self.num_warps}_s{self.num_stages}_g{self.group_m}"
                + (f"_k{self.split_k}" if self.split_k > 1 else "")
                + (f"_e{self.epilogue_split}" if self.epilogue_split > 1 else ""))

    @classmethod
    def from_name(cls, name: str) -> "Config":
        """The configuration `name` spells ("128x256x64_w8_s4_g8_e2"; `_k` and `_e` only where they are not 1)."""
        m = _CONFIG_NAME.fullmatch(name.strip())
        if m is None:
            raise HgemmValueError(f"config name {name!r} is not of the form BMxBNxBK_wW_sS_gG[_kK][_eE]")
        bm, bn, bk, w, s, g, k, e = (int(x) if x else 1 for x in m.groups())
        return cls(bm, bn, bk, group_m=g, num_warps=w, num_stages=s, split_k=k, epilogue_split=e).check(1, wide_n=True)

    @property
    def n_parts(self) -> tuple[int, int]:
        """block_n as (main, tail): a power of two, and 0 or the smaller power of two a wide tile adds to it
        (192 = 128 + 64: `wide_n` in `check`; the TMA kernel computes such a tile as two accumulators)."""
        if self.block_n < 1:  # (refused by name in `check`)
            return self.block_n, 0
        main = 1 << (self.block_n.bit_length() - 1)
        return main, self.block_n - main

    @property
    def smem_bytes(self) -> int:
        """Shared memory of the operand pipeline: one A and one B tile per stage, 2-byte elements (fp16, bf16)."""
        return (self.block_m + self.block_n) * self.block_k * 2 * self.num_stages

    def check(self, min_block_m: int = 16, wide_n: bool = False) -> "Config":
        """The fields' ranges; min_block_m: the row block's floor (16 for tl.dot; the CUDA-core kernel's is 1);
        wide_n: block_n may also be a power of two plus a smaller one of at least 16 (`n_parts`; the TMA kernel's
        wide tiles)."""
        main, tail = self.n_parts
        for field in ("block_m", "block_n", "block_k"):
            v = getattr(self, field)
            floor = min_block_m if field == "block_m" else 16
            if field == "block_n" and wide_n and tail >= 16 and not tail & (tail - 1):
                continue
            if v < floor or v & (v - 1):
                raise HgemmValueError(f"hgemm config {self.name}: {field}={v} must be a power of two >= {floor}"
                                      + (" (tl.dot)" if floor == 16 else "")
                                      + (" or a power of two plus a smaller one >= 16" if wide_n and field == "block_n"
                                         else ""))
        if self.num_warps not in (1, 2, 4, 8, 16):
            raise HgemmValueError(f"hgemm config {self.name}: num_warps={self.num_warps} must be 1, 2, 4, 8 or 16")
        if self.group_m < 1 or self.num_stages < 1 or self.split_k < 1:
            raise HgemmValueError(f"hgemm config {self.name}: group_m, num_stages and split_k must be >= 1")
        if self.epilogue_split not in (1, 2) or main // self.epilogue_split < 16:
            raise HgemmValueError(f"hgemm config {self.name}: epilogue_split={self.epilogue_split} must be 1 or 2 and "
                                  "leave slices of at least 16 columns")
        return self

    @property
    def meta(self) -> dict:
        """The tile's constexpr arguments, as every kernel names them."""
        return {"BLOCK_M": self.block_m, "BLOCK_N": self.block_n, "BLOCK_K": self.block_k, "GROUP_M": self.group_m}


@triton.jit
def grouped_pid(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Tile coordinates in grouped order: GROUP_M tile-rows are walked down one tile-column before moving right,
    so programs running together share B tiles (and, across groups, A tiles) in L2."""
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((tile_id % num_pid_in_group) % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


def div8_args(strides: tuple[int, ...], m: int, n: int) -> tuple[list[int], int]:
    """Strides as the pointer kernels take them, and their DIV8 bitmask: multiples of 8 that Triton cannot see.
    Triton specializes an integer argument on divisibility by 16 only, so with N = 5000 (B's rows 10000 bytes
    apart, 16-byte aligned) the blocked kernel compiled to 2-byte loads (docs/design/triton.md has the timings
    before and after). Bits 0-5: a stride that is a multiple of 8 but not 16 is passed divided by 8 and multiplied back in the kernel (`unscale`), where the compiler then knows the
    multiple of 8. Bits 6, 7: M, N multiples of 8, so `operand_ptrs` may clamp edge rows/columns in whole groups of
    8 and say so (the `% M` wrap hides contiguity unless M is a multiple of 16)."""
    out, mask = [], 0
    for i, s in enumerate(strides):
        if s % 8 == 0 and s % 16 != 0:
            out.append(s // 8)
            mask |= 1 << i
        else:
            out.append(s)
    return out, mask | (m % 8 == 0) << 6 | (n % 8 == 0) << 7


@triton.jit
def unscale(stride, BIT: tl.constexpr, DIV8: tl.constexpr):
    """Stride number BIT of a `div8_args` list as the kernel uses it (times 8 where the host divided it)."""
    if (DIV8 >> BIT) & 1:
        stride = stride * 8
    return stride


@triton.jit
def unscale_strides(stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, DIV8: tl.constexpr):
    """The six strides of a pointer kernel (A, B, C; `div8_args` order) as the kernel uses them."""
    return (unscale(stride_am, 0, DIV8), unscale(stride_ak, 1, DIV8), unscale(stride_bk, 2, DIV8),
            unscale(stride_bn, 3, DIV8), unscale(stride_cm, 4, DIV8), unscale(stride_cn, 5, DIV8))


@triton.jit
def edge_offsets(start, size, BLOCK: tl.constexpr, MULT8: tl.constexpr):
    """Row (or column) indices start, ..., start + BLOCK - 1 of an operand tile, those past `size` replaced by
    valid ones (their results are never stored). MULT8 (size a multiple of 8): past-the-edge indices become 0, so
    every aligned group of 8 is either all inside or all 0-clamped, and the compiler is told it may load each group
    as one 16-byte vector; otherwise they wrap (% size)."""
    offs = start + tl.arange(0, BLOCK)
    if MULT8:
        offs = tl.max_contiguous(tl.multiple_of(tl.where(offs < size, offs, 0), 8), 8)
    else:
        offs = offs % size
    return offs


@triton.jit
def operand_ptrs(a_ptr, b_ptr, pid_m, pid_n, k0, M, N, stride_am, stride_ak, stride_bk, stride_bn,
                 INDEX_64: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 DIV8: tl.constexpr = 0):
    """Pointers to the first K tile (from column k0 of A, row k0 of B) of output tile (pid_m, pid_n): A's
    (BLOCK_M, BLOCK_K) and B's (BLOCK_K, BLOCK_N). Rows and columns past the edge are replaced by valid ones
    (`edge_offsets`), so the loads need no M/N mask; offsets in int64 when INDEX_64."""
    offs_am = edge_offsets(pid_m * BLOCK_M, M, BLOCK_M, (DIV8 >> 6) & 1)
    offs_bn = edge_offsets(pid_n * BLOCK_N, N, BLOCK_N, (DIV8 >> 7) & 1)
    offs_k = tl.arange(0, BLOCK_K)
    if INDEX_64:
        offs_am = offs_am.to(tl.int64)
        offs_bn = offs_bn.to(tl.int64)
        offs_k = offs_k.to(tl.int64)
    offs_k = offs_k + k0
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    return a_ptrs, b_ptrs


@triton.jit
def out_offsets(off_m, off_n, INDEX_64: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Row and column indices of the output tile starting at (off_m, off_n), int64 when INDEX_64; stores mask them
    against M and N."""
    offs_cm = off_m + tl.arange(0, BLOCK_M)
    offs_cn = off_n + tl.arange(0, BLOCK_N)
    if INDEX_64:
        offs_cm = offs_cm.to(tl.int64)
        offs_cn = offs_cn.to(tl.int64)
    return offs_cm, offs_cn


@triton.jit
def bf16_bits_to_fp32(x):
    """bf16 -> fp32 through the bits (a bf16 value is the top half of an fp32 one): exact for every value, and in
    the interpreter plain integer numpy, where its own bf16 cast decodes exponent and mantissa field by field."""
    return (x.to(tl.uint16, bitcast=True).to(tl.uint32) << 16).to(tl.float32, bitcast=True)


@triton.jit
def dot_acc(a, b, acc, ACC_FP16: tl.constexpr):
    """acc + a @ b for fp16 or bf16 tiles: fp16 accumulation when ACC_FP16 (fp16 operands only), else fp32."""
    # one return after the branches: triton 3.6 compiles the statements after a constexpr `if` that returns, so an
    # early `return` left the fp32 dot of an fp16 accumulator in the fp16 kernel (a CompilationError on the H100)
    if ACC_FP16:
        acc = tl.dot(a, b, acc, out_dtype=tl.float16)
    elif INTERPRETED and a.dtype == tl.bfloat16:  # the interpreter's bf16 dot is wrong: see INTERPRETED
        acc = tl.dot(bf16_bits_to_fp32(a), bf16_bits_to_fp32(b), acc, input_precision="ieee")
    else:
        acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def to_output(acc, DTYPE: tl.constexpr):
    """The accumulator rounded to nearest even in the output dtype DTYPE (the inputs' dtype)."""
    if INTERPRETED and DTYPE == tl.bfloat16:  # the interpreter's cast truncates: see INTERPRETED
        bits = acc.to(tl.float32).to(tl.uint32, bitcast=True)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # the low 16 bits rounded away, ties to even
        quiet_nan = (bits >> 16) | 0x40  # NaN: its top bits, quiet (a carry could have made it inf or flipped it)
        out = tl.where(acc != acc, quiet_nan, rounded).to(tl.uint16).to(DTYPE, bitcast=True)
    else:
        out = acc.to(DTYPE)
    return out


@triton.jit
def dot_k_loop(a_ptrs, b_ptrs, k_len, step_a, step_b, ACC_FP16: tl.constexpr, EVEN_K: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """The pointer-load main loop of the blocked and split-K kernels: acc = A[:, k0:k0+k_len] @ B[k0:k0+k_len, :]
    for a (BLOCK_M, BLOCK_N) tile, `a_ptrs` (BLOCK_M, BLOCK_K) and `b_ptrs` (BLOCK_K, BLOCK_N) pointing at its
    first K tile, advanced by step_a / step_b (BLOCK_K times the K strides). K is masked only when k_len is not a
    multiple of BLOCK_K (EVEN_K false)."""
    offs_k = tl.arange(0, BLOCK_K)
    if ACC_FP16:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in range(0, tl.cdiv(k_len, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            k_left = k_len - kt * BLOCK_K
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = dot_acc(a, b, acc, ACC_FP16)
        a_ptrs += step_a
        b_ptrs += step_b
    return acc


def prune_for_problem(configs: list[Config], m: int, n: int, k: int) -> list[Config]:
    """The configurations worth timing for an (m, n, k) problem: tiles far larger than the problem dropped (a
    256-row tile for M = 16 only computes padding; a tile dimension is kept up to the next power of two of the
    problem's, and down to the list's smallest), and K splits that leave a slice under two K tiles dropped. At
    least one configuration is kept. Cuts tuning of small and skinny problems to a few candidates."""
    cap_m = max(min(c.block_m for c in configs), triton.next_power_of_2(m))
    cap_n = max(min(c.block_n for c in configs), triton.next_power_of_2(n))
    kept = [c for c in configs if c.block_m <= cap_m and c.block_n <= cap_n
            and (c.split_k == 1 or cdiv(k, c.split_k) >= 2 * c.block_k)]
    if kept:
        return kept
    return [min(configs, key=lambda c: (c.block_m * c.block_n, c.split_k))]


def problem_configs(module, m: int, n: int, k: int, sms: int) -> list[Config]:
    """A kernel module's configurations worth timing on an (m, n, k) problem on a GPU of `sms` SMs: its own
    `prune(configs, m, n, k, sms)` where it has one (a rule that needs the SM count), else `prune_for_problem`."""
    prune = getattr(module, "prune", None)
    cfgs = module.configs()
    return prune(cfgs, m, n, k, sms) if prune is not None else prune_for_problem(cfgs, m, n, k)


_TIMING_MS = [5.0, 25.0]  # warm-up and repetitions of `time_ms`, milliseconds (`timing` changes them)


@contextmanager
def timing(warmup_ms: float, rep_ms: float):
    """`time_ms` with other warm-up and repetition budgets inside the block (the plan tuner's shorter ones)."""
    old = list(_TIMING_MS)
    _TIMING_MS[:] = [warmup_ms, rep_ms]
    try:
        yield
    finally:
        _TIMING_MS[:] = old


def time_ms(call) -> float:
    """How exact tuning (tune="exact", the plan tuner) times each candidate (kernel, configuration): do_bench's
    procedure (`hgemm_common.timing.device_ms`, median) with the harness's clean L2 flush, a 5 ms warm-up and 25 ms
    of repetitions (the tuner: shorter, `timing`). do_bench's own flush only writes its buffer, and the dirty lines
    it leaves cost a memory-bound call as much as its own reads (hgemm_common.timing.L2Flush), which drowned the
    differences between decode-sized plans. 25 ms is still a hundred calls of a 4096^3 GEMM, enough to rank them."""
    return device_ms(call, L2Flush(), warmup_ms=_TIMING_MS[0], rep_ms=_TIMING_MS[1])


ACCUMULATIONS = ("fp32", "fp16")
