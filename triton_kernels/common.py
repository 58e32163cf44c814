"""Pieces both Triton kernels share: the tile configuration type and the grouped tile order."""
from __future__ import annotations

from dataclasses import dataclass

import triton
import triton.language as tl


@dataclass(frozen=True)
class Config:
    """One point of a kernel's tuning space."""

    block_m: int
    block_n: int
    block_k: int
    group_m: int = 8
    num_warps: int = 4
    num_stages: int = 3

    @property
    def name(self) -> str:
        return (f"{self.block_m}x{self.block_n}x{self.block_k}"
                f"_w{self.num_warps}_s{self.num_stages}_g{self.group_m}")

    @property
    def smem_bytes(self) -> int:
        """Shared memory of the operand pipeline: one A and one B tile per stage, fp16."""
        return (self.block_m + self.block_n) * self.block_k * 2 * self.num_stages

    def check(self) -> "Config":
        for field in ("block_m", "block_n", "block_k"):
            v = getattr(self, field)
            if v < 16 or v & (v - 1):
                raise ValueError(f"hgemm config {self.name}: {field}={v} must be a power of two >= 16 (tl.dot)")
        if self.num_warps not in (1, 2, 4, 8, 16):
            raise ValueError(f"hgemm config {self.name}: num_warps={self.num_warps} must be 1, 2, 4, 8 or 16")
        if self.group_m < 1 or self.num_stages < 1:
            raise ValueError(f"hgemm config {self.name}: group_m and num_stages must be >= 1")
        return self

    def to_triton(self, pre_hook=None) -> triton.Config:
        return triton.Config(
            {"BLOCK_M": self.block_m, "BLOCK_N": self.block_n, "BLOCK_K": self.block_k, "GROUP_M": self.group_m},
            num_warps=self.num_warps, num_stages=self.num_stages, pre_hook=pre_hook)

    @classmethod
    def from_triton(cls, tc: triton.Config) -> "Config":
        kw = tc.kwargs
        return cls(kw["BLOCK_M"], kw["BLOCK_N"], kw["BLOCK_K"], kw["GROUP_M"], tc.num_warps, tc.num_stages)


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


def prune_for_problem(configs, named_args, **kwargs):
    """Autotuning pre-filter: drop tiles far larger than the problem (a 256-row tile for M = 16 only computes
    padding), keeping at least one config. Cuts autotuning of small and skinny problems to a few candidates."""
    m, n = named_args["M"], named_args["N"]
    cap_m = max(64, triton.next_power_of_2(m))
    cap_n = max(64, triton.next_power_of_2(n))
    kept = [c for c in configs if c.kwargs["BLOCK_M"] <= cap_m and c.kwargs["BLOCK_N"] <= cap_n]
    if kept:
        return kept
    return [min(configs, key=lambda c: c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"])]


def autotune_bench(kernel_call, quantiles):
    """How the autotuners time each candidate: Triton's do_bench (L2 cleared between calls) with a 5 ms warm-up and
    25 ms of repetitions instead of the default 25 / 100 ms. Every new (shape, layout, accumulation) key is tuned on
    first use, and the checks and benchmarks meet dozens of keys; 25 ms is still a hundred calls of a 4096^3
    GEMM, enough to rank the configurations."""
    import triton.testing
    return triton.testing.do_bench(kernel_call, warmup=5, rep=25, quantiles=quantiles)


ACCUMULATIONS = ("fp32", "fp16")
