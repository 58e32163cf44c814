"""The residue-group kernels (triton_kernels/realign.py, realign_rows.py): a B whose rows lie off the 16-byte grid,
read in 16-byte vectors by grouping its rows by misalignment and shifting each group's K index (K-major B) or its
output columns, into planes summed in a fixed order (N-major B).

On the CPU (the interpreter): exact integer checks for every residue count (B^T's row stride 8k + 1 ... 8k + 7,
G = 8, 4, 2 and 1), K shorter than a tile and K spread over slices, N smaller than the residue count, both
accumulations and bf16; the elements a shifted load brings from the neighbouring rows are poisoned with Inf and
NaN and must not reach C; a B that is not K-major (read unshifted) and strided A and C; bitwise determinism. The
compiled sm_90 kernel loads B's rows with 16-byte cp.async (the point of the kernel, seen in its PTX). On a GPU:
the same checks on skinny shapes, and bitwise determinism over repeated calls."""
import pytest
import torch

import triton_kernels
from compare.reference import make_inputs, reference
from hgemm_common.validation import DTYPES, needs_int64_indexing
from triton_kernels import realign, realign_rows
from triton_kernels.common import Config

from conftest import DEVICE, HAS_CUDA
from helpers import assert_exact, ints, poisoned_call, run_children

# On a GPU the small CPU shapes run the first (16-row) configuration, with and without a split
CFG = realign.INTERPRETER_CONFIG if not HAS_CUDA else realign.configs()[1]


def nt_operands(m, n, k, ld, dtype="fp16", seed=0, pad=float("inf")):
    """A (m, k) row-major and B = B^T.t() with B^T (n, k) inside an (n, ld) buffer whose ld - k padding columns
    hold `pad` (a shifted load reads them as the previous or next row's elements); integers in [-3, 3]."""
    g = torch.Generator().manual_seed(seed)
    a = ints(m, k, dtype=dtype, generator=g).to(DEVICE)
    buf = torch.full((n, ld), pad, dtype=DTYPES[dtype])
    buf[:, :k] = ints(n, k, dtype=dtype, generator=g)
    bt = buf.to(DEVICE)[:, :k]
    return a, bt.t()


def run(a, b, config=CFG, acc="fp32"):
    return poisoned_call(lambda out: triton_kernels.hgemm(a, b, out=out, acc=acc, kernel="triton_realign",
                                                          config=config), a.shape[0], b.shape[1], a.device,
                         "bf16" if a.dtype == torch.bfloat16 else "fp16")


def with_split(cfg: Config, split: int) -> Config:
    return Config(cfg.block_m, cfg.block_n, cfg.block_k, cfg.group_m, cfg.num_warps, cfg.num_stages, split)


# ---------------------------------------------------------------------------------------------- the residues
@pytest.mark.parametrize("ld,want", [(4095, (8, True)), (4094, (4, True)), (4092, (2, True)), (4096, (1, True)),
                                     (4104, (1, True))])
def test_residue_count_follows_the_row_stride(ld, want):
    """G = 8 / gcd(ld, 8): rows n and n + G start at the same offset from the 16-byte grid."""
    b = torch.empty(16, ld)[:, :4000].t()
    assert realign.residues(b) == want
    g = want[0]
    assert {(n * ld) % 8 for n in range(64)} == {(r * ld) % 8 for r in range(g)}
    assert all((n * ld) % 8 == ((n + g) * ld) % 8 for n in range(64))


def test_a_row_major_b_is_read_unshifted():
    assert realign.residues(torch.empty(100, 37)) == (1, False)


def test_huge_row_stride_takes_64_bit_offsets():
    """A B^T whose rows are 3 x 10^8 elements apart (meta tensors: nothing is allocated): a residue group's row
    step (G x ld, eight rows) passes 2^31 elements, so the kernel is told to compute offsets in int64 (its last
    argument before the tile's) although B's two rows span less."""
    a = torch.empty(2, 16, dtype=torch.float16, device="meta")
    b = torch.empty_strided((16, 2), (1, 300_000_001), dtype=torch.float16, device="meta")
    c = torch.empty(2, 2, dtype=torch.float16, device="meta")
    assert not needs_int64_indexing(b)
    spec, = realign.launches(a, b, c, False, realign.INTERPRETER_CONFIG)
    assert spec.args[-5] is True  # INDEX_64, before BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M
    assert realign.residues(b) == (8, True)


def _huge(elements: int) -> torch.Tensor:
    """A buffer of that many fp16 elements on DEVICE (on the CPU reserved, its pages mapped on first write); the
    test is skipped where the machine will not give it (a GPU with too little memory)."""
    try:
        return torch.empty(elements, dtype=torch.float16, device=DEVICE)
    except RuntimeError as e:  # pragma: no cover - a machine that refuses the reservation
        pytest.skip(f"cannot reserve {elements * 2 / 2**30:.0f} GiB: {e}")


@pytest.mark.parametrize("case", ["A", "B rows", "C columns"])
def test_offsets_past_2_31_elements(case):
    """Exact where an offset passes 2^31 elements, on tensors that touch only a few elements of a large buffer
    (4.5-10 GiB): A with a K stride of 2^31 / 48 (B not K-major: the unshifted path), B row-major with such a row
    stride, and C with a column stride whose step over a residue group (8 columns) passes 2^31 (B K-major, eight
    residues). Each wrapped in int32 before the kernel took these offsets in int64 throughout."""
    m, n, k = 2, 9, 64
    stride = 2**31 // 48 + 8
    g = torch.Generator().manual_seed(1)
    if case == "A":
        a = torch.as_strided(_huge(2**31 + k * stride), (m, k), (1, stride), 2**31)
        b = torch.empty(k, n + 3, dtype=torch.float16, device=DEVICE)[:, :n]
        c = torch.full((m, n), float("nan"), dtype=torch.float16, device=DEVICE)
    elif case == "B rows":
        a = torch.empty(m, k, dtype=torch.float16, device=DEVICE)
        b = torch.as_strided(_huge(2**31 + k * stride), (k, n), (stride, 1), 2**31)
        c = torch.full((m, n), float("nan"), dtype=torch.float16, device=DEVICE)
    else:
        m, k, col = 1, 20, 2**31 // 8 + 1
        a = torch.empty(m, k, dtype=torch.float16, device=DEVICE)
        b = torch.empty(n, k + 1, dtype=torch.float16, device=DEVICE)[:, :k].t()
        c = torch.as_strided(_huge(n * col + 1), (m, n), (1, col), 0)
        c.fill_(float("nan"))
    a.copy_(ints(*a.shape, generator=g))
    b.copy_(ints(*b.shape, generator=g))
    out = triton_kernels.hgemm(a, b, out=c, kernel="triton_realign", config=CFG)
    assert out is c
    assert_exact(c, a, b, case)


# ---------------------------------------------------------------------------------------------- exact checks
@pytest.mark.parametrize("m,n,k,extra", [
    (3, 37, 101, 0),  # ld = 101: eight residues, K in four 32-deep tiles (the first and last masked)
    (5, 50, 77, 2),  # ld = 79
    (16, 17, 64, 2),  # ld = 66: four residues; N = 17 leaves residue 1 one column more than the others
    (20, 9, 130, 1),  # ld = 131, two row blocks
    (1, 8, 33, 3),  # ld = 36: two residues
    (7, 100, 200, 0),  # ld = 200: one residue, no shift
    (2, 3, 5, 0),  # K under one tile, N under the residue count: most programs store nothing
    (9, 70, 7, 6),  # ld = 13: K = 7 and a shift of up to 7 in one masked tile
])
@pytest.mark.parametrize("split", [1, 3])
def test_exact_with_poisoned_neighbours(m, n, k, extra, split):
    """Exact integer products for every residue count and slice count, with Inf in B^T's padding: a shifted tile's
    first columns are the previous row's padding and its last the next row's, and both must be masked to zero
    (0 x Inf would be NaN)."""
    a, b = nt_operands(m, n, k, k + extra)
    assert_exact(run(a, b, with_split(CFG, split)), a, b, f"{m}x{n}x{k} ld {k + extra} split {split}")


@pytest.mark.parametrize("pad", [float("nan"), float("-inf"), 65504.0])
def test_no_neighbour_reaches_c(pad):
    a, b = nt_operands(6, 41, 45, 47, pad=pad)
    assert_exact(run(a, b), a, b, f"pad {pad}")


@pytest.mark.parametrize("dtype,acc", [("fp16", "fp16"), ("bf16", "fp32")])
def test_exact_other_dtype_and_accumulation(dtype, acc):
    a, b = nt_operands(11, 29, 90, 93, dtype=dtype, seed=3)
    assert_exact(run(a, b, acc=acc), a, b, f"{dtype} acc {acc}")


@pytest.mark.parametrize("layout", ["NN", "TN", "TT", "NT"])
def test_exact_in_every_layout(layout):
    """A B that is not K-major (NN, TN) is read unshifted (one residue); A in either layout."""
    a, b = make_inputs(13, 45, 99, layout, device=DEVICE, seed=5)
    assert_exact(run(a, b), a, b, layout)


def test_strided_a_and_c():
    """A a column slice of a wider matrix, C a column slice of a wider buffer: pointers, any strides."""
    g = torch.Generator().manual_seed(7)
    a = ints(9, 140, generator=g).to(DEVICE)[:, 3:104]
    bt = ints(33, 105, generator=g).to(DEVICE)[:, 1:102]
    b = bt.t()
    big = torch.full((9, 50), float("nan"), dtype=torch.float16, device=DEVICE)
    out = big[:, 5:38]
    c = triton_kernels.hgemm(a, b, out=out, kernel="triton_realign", config=CFG)
    assert c is out
    assert_exact(c, a, b, "strided")
    assert torch.isnan(big[:, :5]).all() and torch.isnan(big[:, 38:]).all()


def test_bitwise_deterministic():
    """Random inputs over three slices (summed in a fixed order by each tile's last program): the same bits on every
    run."""
    g = torch.Generator().manual_seed(9)
    a = torch.randn(7, 150, generator=g).half().to(DEVICE)
    b = torch.randn(40, 151, generator=g).half().to(DEVICE)[:, :150].t()
    cfg = with_split(CFG, 3)
    first = triton_kernels.hgemm(a, b, kernel="triton_realign", config=cfg)
    assert torch.equal(first, triton_kernels.hgemm(a, b, kernel="triton_realign", config=cfg))
    assert (first.float() - reference(a, b).float()).abs().max() < 0.05


# ---------------------------------------------------------------------------------------------- N-major B (planes)
ROWS_CFG = realign_rows.INTERPRETER_CONFIG if not HAS_CUDA else realign_rows.configs()[1]


def nn_operands(m, n, k, ld, dtype="fp16", seed=0, pad=float("inf")):
    """A (m, k) and B (k, n) row-major inside a (k, ld) buffer whose ld - n padding columns hold `pad`."""
    g = torch.Generator().manual_seed(seed)
    a = ints(m, k, dtype=dtype, generator=g).to(DEVICE)
    buf = torch.full((k, ld), pad, dtype=DTYPES[dtype])
    buf[:, :n] = ints(k, n, dtype=dtype, generator=g)
    return a, buf.to(DEVICE)[:, :n]


def run_rows(a, b, config=ROWS_CFG, acc="fp32"):
    return poisoned_call(lambda out: triton_kernels.hgemm(a, b, out=out, acc=acc, kernel="triton_realign_rows",
                                                          config=config), a.shape[0], b.shape[1], a.device,
                         "bf16" if a.dtype == torch.bfloat16 else "fp16")


@pytest.mark.parametrize("m,n,k,extra", [
    (3, 37, 101, 0),  # ld = 37: eight residues along K, every plane's shifted column blocks
    (5, 50, 77, 3),  # ld = 53
    (16, 17, 64, 1),  # ld = 18: four residues
    (20, 9, 130, 0),  # N under one column block, two row blocks
    (1, 8, 33, 4),  # ld = 12: two residues
    (2, 3, 5, 0),  # K under the residue count: most residues have one row or none
    (9, 70, 7, 7),  # ld = 77, K = 7
    (4, 45, 300, 0),  # ld = 45: most rows read unmasked, the last rows masked (near B's end)
])
@pytest.mark.parametrize("split", [1, 3])
def test_rows_exact_with_poisoned_neighbours(m, n, k, extra, split):
    """Exact integer products for every residue count and slice count, Inf in B's padding: a shifted tile's columns
    before 0 and past N belong to other rows and reach only columns of the planes that are never stored."""
    a, b = nn_operands(m, n, k, n + extra)
    assert_exact(run_rows(a, b, with_split(ROWS_CFG, split)), a, b, f"{m}x{n}x{k} ld {n + extra} split {split}")


@pytest.mark.parametrize("dtype,acc", [("fp16", "fp16"), ("bf16", "fp32")])
def test_rows_exact_other_dtype_and_accumulation(dtype, acc):
    a, b = nn_operands(11, 29, 90, 31, dtype=dtype, seed=3)
    assert_exact(run_rows(a, b, acc=acc), a, b, f"{dtype} acc {acc}")


@pytest.mark.parametrize("layout", ["NN", "TN", "TT", "NT"])
def test_rows_exact_in_every_layout(layout):
    """A K-major B (NT, TT) goes to realign.py's kernel; an N-major one to the planes."""
    a, b = make_inputs(13, 45, 99, layout, device=DEVICE, seed=5)
    assert_exact(run_rows(a, b), a, b, layout)


def test_rows_bitwise_deterministic_and_safe_rows():
    g = torch.Generator().manual_seed(9)
    a = torch.randn(7, 150, generator=g).half().to(DEVICE)
    b = torch.randn(150, 61, generator=g).half().to(DEVICE)[:, :57]
    cfg = with_split(ROWS_CFG, 2)
    first = triton_kernels.hgemm(a, b, kernel="triton_realign_rows", config=cfg)
    assert torch.equal(first, triton_kernels.hgemm(a, b, kernel="triton_realign_rows", config=cfg))
    assert (first.float() - reference(a, b).float()).abs().max() < 0.05
    # a row reads BLOCK_N + 7 elements past its N-th unmasked only while that many elements of B follow it
    for k, ld, bn in ((150, 61, 32), (300, 45, 64), (10, 3, 128)):
        safe = realign_rows.safe_rows(k, ld, bn)
        assert safe == 0 or (k - 1 - (safe - 1)) * ld >= bn + 7


# ---------------------------------------------------------------------------------------------- compiled for sm_90
@pytest.mark.parametrize("module", ["realign", "realign_rows"])
def test_sm90_loads_b_in_16_byte_vectors(module):
    """The compiled kernels (16-row tiles, eight residues: B's rows 4095 elements apart) bring B by 16-byte cp.async
    and A per element: without the residue groups every B load of such rows is 2 bytes wide and synchronous."""
    pytest.importorskip("triton")
    code = f"""
import json, re, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton_kernels import {module} as mod
cfg = mod.configs()[0]
fn, sig, consts, attrs = mod.inspect_source(cfg)
ptx = triton.compile(ASTSource(fn, sig, consts, attrs), target=GPUTarget("cuda", 90, 32),
                     options=dict(num_warps=cfg.num_warps, num_stages=cfg.num_stages)).asm["ptx"]
sizes = re.findall(r"cp[.]async[.]c[ag][.]shared[.]global\\s*\\[[^\\]]+\\],\\s*\\[[^\\]]+\\],\\s*(0x[0-9a-f]+|[0-9]+)", ptx)
print(json.dumps({{"sizes": [int(s, 0) for s in sizes], "per_stage": cfg.block_k * cfg.block_n // 8 // 128,
                  "stages": cfg.num_stages}}))
"""
    got = run_children(code, timeout=300, parts=1)[0]
    assert got["sizes"] and set(got["sizes"]) == {16}, got["sizes"][:8]
    # one B tile a stage, 8 elements a copy, 128 threads; the pipeline's stages ahead and the one in the loop
    assert len(got["sizes"]) == got["per_stage"] * got["stages"]


# ---------------------------------------------------------------------------------------------- GPU only
GPU_SHAPES = [(1, 8191, 4097), (8, 12289, 2051), (16, 4099, 9999), (64, 3001, 5003), (200, 2047, 3071)]


@pytest.mark.gpu(sm=90)
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("m,n,k", GPU_SHAPES)
def test_gpu_exact_on_misaligned_rows(m, n, k, dtype):
    """Exact integer checks on skinny NT problems with K not a multiple of 8 (eight or four residues), every
    configuration's first split and its deepest."""
    a, b = make_inputs(m, n, k, "NT", device="cuda", seed=m + k, dtype=dtype)
    for cfg in realign.configs():
        if cfg.block_m <= max(16, 2 * m) and cfg.split_k in (1, 8):
            assert_exact(run(a, b, cfg), a, b, f"{m}x{n}x{k} {dtype} {cfg.name}")


@pytest.mark.gpu(sm=90)
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("m,n,k", [(1, 4097, 8191), (8, 2051, 12289), (16, 9999, 4099), (40, 5003, 3001)])
def test_gpu_rows_exact_on_misaligned_rows(m, n, k, dtype):
    """The planes kernel on skinny NN problems with N not a multiple of 8, each configuration unsplit and at its
    deepest split."""
    a, b = make_inputs(m, n, k, "NN", device="cuda", seed=m + n, dtype=dtype)
    for cfg in realign_rows.configs():
        if cfg.block_m <= max(16, 2 * m) and cfg.split_k in (1, max(realign_rows.SPLITS)):
            assert_exact(run_rows(a, b, cfg), a, b, f"{m}x{n}x{k} {dtype} {cfg.name}")


@pytest.mark.gpu(sm=90)
def test_gpu_bitwise_deterministic():
    for kernel, layout, mod in (("triton_realign", "NT", realign), ("triton_realign_rows", "NN", realign_rows)):
        a, b = make_inputs(16, 4099, 9999, layout, device="cuda", seed=4, kind="randn")
        cfg = next(c for c in mod.configs() if c.split_k == max(mod.SPLITS))
        first = triton_kernels.hgemm(a, b, kernel=kernel, config=cfg)
        for _ in range(5):
            assert torch.equal(triton_kernels.hgemm(a, b, kernel=kernel, config=cfg), first), kernel
