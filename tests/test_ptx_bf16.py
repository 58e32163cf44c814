"""bf16 on the hand-written kernels: every record that lists "bf16" (`Variant.dtypes`: the pipelined mma.sync steps
and the dense Hopper ladder), fp32 accumulation, bf16 out.

What runs where: the CPU tests check the Python side's errors (a variant that does not list bf16, bf16 with fp16
accumulation, the 2:4 sparse kernels) through the operator's fake kernel on meta tensors; that each bf16
instantiation compiles to the bf16 tensor-core forms without spills is tests/test_ptx_compile.py's (records'
`Variant.mma_forms`). The GPU tests (`-m gpu`, skipped without CUDA) run the kernels.

Exact checks in bf16: bf16 holds every integer up to 256 exactly (8 significant bits) and fp32 accumulates integer
products exactly, so C equals the float64 reference rounded to bf16 bit for bit at any size; but past 256 that
rounding would hide an off-by-one sum (257 rounds to 256), so the inputs keep |C| <= 256 and the test asserts it:
`compare.reference.make_inputs` gives bf16 integers in [-3, 3] and, past 28 terms, keeps only `exact_window`'s terms
of one operand (every k still covered), the same inputs the Triton kernels' bf16 checks use.
"""
import pytest
import torch

import ptx_kernels
from ptx_kernels.variants import a_col_in_place
from compare.reference import LAYOUTS, compare, error_bound, make_inputs, poisoned_out, reference
from helpers import assert_exact, shared_inputs
from hgemm_common.operands import is_row_major

BF16 = [v for v in ptx_kernels.variants() if "bf16" in v.dtypes]
FP16_ONLY = [v for v in ptx_kernels.variants() if "bf16" not in v.dtypes]
IDS = [v.name for v in BF16]


def bf16_ints(m: int, n: int, k: int, layout: str, seed: int, device="cuda"):
    """Integer bf16 operands whose products sum to at most BF16_EXACT_LIMIT in magnitude (see the module docstring)."""
    return make_inputs(m, n, k, layout, device=device, seed=seed, dtype="bf16")


# ---- CPU: the errors name the problem ------------------------------------------------------------------------

def _meta(m, n, k, dtype=torch.bfloat16):
    return torch.empty(m, k, dtype=dtype, device="meta"), torch.empty(k, n, dtype=dtype, device="meta")


def test_records_that_take_bf16():
    """The Hopper ladder (wgmma_persistent hands problems to wgmma_splitk and wgmma_cluster, so all of it) and the
    pipelined mma.sync steps take bf16, accumulating in fp32; the 2:4 sparse kernels stay fp16."""
    assert {v.family for v in BF16} == {"mma", "wgmma"}
    assert all(v.name in {x.name for x in BF16} for v in ptx_kernels.variants() if v.family == "wgmma")
    assert all("fp32" in v.accs for v in BF16)
    assert all(v.dtypes == ("fp16",) for v in ptx_kernels.variants("sparse"))


@pytest.mark.parametrize("v", FP16_ONLY, ids=lambda v: v.name)
def test_bf16_on_a_variant_without_it_names_the_dtypes_it_takes(v):
    from ptx_kernels import ops  # noqa: F401  registers the operator and its fake kernel

    a, b = _meta(8, 8, 8)
    with pytest.raises(TypeError, match=rf"^hgemm: kernel '{v.name}' takes fp16 inputs, got torch.bfloat16$"):
        torch.ops.tensorcore_hgemm.ptx_hgemm(a, b, v.name, "fp32")


@pytest.mark.parametrize("v", BF16, ids=IDS)
def test_bf16_with_fp16_accumulation_is_refused(v):
    from ptx_kernels import ops  # noqa: F401

    a, b = _meta(8, 8, 8)
    with pytest.raises(ValueError, match=r"^hgemm: bf16 inputs accumulate in fp32 only .*'fp16'"):
        torch.ops.tensorcore_hgemm.ptx_hgemm(a, b, v.name, "fp16")
    out = torch.ops.tensorcore_hgemm.ptx_hgemm(a, b, v.name, "fp32")  # the fake kernel: shape and dtype
    assert out.shape == (8, 8) and out.dtype == torch.bfloat16
    with pytest.raises(TypeError, match="expected both inputs to be torch.float16 or both torch.bfloat16"):
        torch.ops.tensorcore_hgemm.ptx_hgemm(a, b.half(), v.name, "fp32")


def test_sparse_kernels_refuse_bf16():
    from ptx_kernels import sparse

    with pytest.raises(TypeError, match=r"compress: expected torch.float16, got torch.bfloat16"):
        sparse.compress(torch.zeros(16, 32, dtype=torch.bfloat16))


# ---- GPU -------------------------------------------------------------------------------------------------------

def offered(v) -> bool:
    major, minor = torch.cuda.get_device_capability()
    return v.offered_on(major * 10 + minor)


def run(v, a, b, **kw):
    out = poisoned_out(a.shape[0], b.shape[1], "cuda", dtype="bf16")
    c = ptx_kernels.hgemm(a, b, kernel=v.name, acc="fp32", out=out, **kw)
    torch.cuda.synchronize()
    assert c.dtype == torch.bfloat16 and c.data_ptr() == out.data_ptr()
    return c


@pytest.mark.gpu
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("v", BF16, ids=IDS)
def test_bf16_exact_edges(v, layout):
    """TESTING.md's odd shapes around the variant's tile (test_ptx_hgemm.edge_shapes), every layout (B row- and
    column-major read in place; A column-major read in place by the records that list TN, copied by the others),
    NaN-poisoned outputs."""
    from test_ptx_hgemm import edge_shapes

    if not offered(v):
        pytest.skip(f"{v.name} needs sm_{v.min_arch}")
    for i, (m, n, k) in enumerate(edge_shapes(v)):
        a, b = shared_inputs(m, n, k, layout, seed=i, dtype="bf16")
        assert_exact(run(v, a, b), a, b, f"{v.name} bf16 {layout} {m}x{n}x{k}")


SPLIT_CASES = [(v, s) for v in BF16 for s in v.splits]


@pytest.mark.gpu
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("v,split", SPLIT_CASES, ids=[f"{v.name}-split{s}" for v, s in SPLIT_CASES])
def test_bf16_split_k_exact_and_deterministic(v, split, layout):
    """The forced K splits in bf16: the partial tiles are added in fp32 and rounded to bf16 once."""
    if not offered(v):
        pytest.skip(f"{v.name} needs sm_{v.min_arch}")
    for i, (m, n, k) in enumerate([(16, 4096, 4096), (1, 1000, 777), (33, 500, 300), (17, 1000, 4099), (7, 9, 13)]):
        a, b = shared_inputs(m, n, k, layout, seed=i, dtype="bf16")
        assert_exact(run(v, a, b, split=split), a, b, f"{v.name} bf16 split={split} {layout} {m}x{n}x{k}")
        launch = ptx_kernels.last_launch()  # a split over the grid reads row-major A only: a column-major A is copied
        assert launch["a_col_major"] == (not is_row_major(a) and a_col_in_place(v, split)), launch
    a, b = shared_inputs(16, 4096, 4096, layout, seed=9, kind="randn", dtype="bf16")
    assert torch.equal(run(v, a, b, split=split), run(v, a, b, split=split))


@pytest.mark.gpu(sm=90)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_bf16_stream_k_exact_on_every_cut(layout):
    """wgmma_streamk in bf16 with the SM count lowered (test_ptx_hgemm.STREAMK_SHAPES: every slice count 2..8,
    unequal slices, edge tiles, cut tiles with and without whole rounds before them, and no cut): the fp32 partials
    are added in slot order and rounded to bf16 once, exact into a NaN-poisoned C."""
    from test_ptx_hgemm import STREAMK_SHAPES, check_streamk_case

    if not offered(ptx_kernels.BY_NAME["wgmma_streamk"]):
        pytest.skip("wgmma_streamk needs sm_90")
    cuts = {check_streamk_case(m, n, k, sms, layout, "bf16", "fp32", seed=i)
            for i, (m, n, k, sms) in enumerate(STREAMK_SHAPES)}
    assert {s for r, s in cuts if r} == set(range(2, 9))


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ("NN", "NT"))
@pytest.mark.parametrize("v", BF16, ids=IDS)
def test_bf16_random_within_bound(v, layout):
    """randn inputs: |C - ref| within the bf16 bound (compare/reference.py: 2 * 2**-8 |ref| + K 2**-24 |A||B|)."""
    if not offered(v):
        pytest.skip(f"{v.name} needs sm_{v.min_arch}")
    for m, n, k in ((1500, 1100, 2000), (16, 4096, 4096)):
        a, b = shared_inputs(m, n, k, layout, seed=3, kind="randn", dtype="bf16")
        ref = reference(a, b)
        verdict = compare(run(v, a, b), ref, error_bound(a, b, ref, "fp32"))
        assert verdict.ok, f"{v.name} {layout} {m}x{n}x{k}: {verdict.detail}"


@pytest.mark.gpu
@pytest.mark.parametrize("v", BF16, ids=IDS)
def test_bf16_misaligned_strided_and_temporaries(v):
    """Operands the kernels cannot read in place are copied in bf16 (never through fp16), and a column-major out
    goes through a bf16 temporary; NaN in A[i, k] makes row i NaN; two runs give the same bits."""
    if not offered(v):
        pytest.skip(f"{v.name} needs sm_{v.min_arch}")
    g = torch.Generator().manual_seed(4)
    base_a = torch.randint(-1, 2, (70, 2 * 101 + 1), generator=g).to(torch.bfloat16).cuda()  # |C| <= K = 101
    base_b = torch.randint(-1, 2, (102, 131), generator=g).to(torch.bfloat16).cuda()
    a = base_a[1:66, 1::2]  # 65 x 101, column stride 2, odd offset
    b = base_b[1:, 3:]  # 101 x 128, offset breaks 16-byte alignment
    out_t = torch.full((129, 65), float("nan"), dtype=torch.bfloat16, device="cuda")
    c = ptx_kernels.hgemm(a, b, kernel=v.name, out=out_t.t()[:, 1:])
    torch.cuda.synchronize()
    assert "A to row-major" in ptx_kernels.last_launch()["copies"]
    assert "C through a row-major temporary" in ptx_kernels.last_launch()["copies"]
    assert_exact(c, a, b, f"{v.name} bf16 strided")
    a, b = make_inputs(200, 150, 333, "NT", device="cuda", seed=5, kind="randn", dtype="bf16")
    a = a.clone()
    a[17, 3] = float("nan")
    c1, c2 = ptx_kernels.hgemm(a, b, kernel=v.name), ptx_kernels.hgemm(a, b, kernel=v.name)
    assert torch.equal(c1.nan_to_num(), c2.nan_to_num()) and torch.equal(c1.isnan(), c2.isnan())
    rows_nan = c1.isnan().any(dim=1)
    assert rows_nan[17] and c1[17].isnan().all() and int(rows_nan.sum()) == 1


@pytest.mark.gpu
@pytest.mark.parametrize("v", BF16, ids=IDS)
def test_bf16_autograd(v):
    """Inputs that require grad go through the operator in bf16: dA = dC B^T and dB = A^T dC on the same variant
    (transposed views: a column-major A is copied, or read in place by the records that list TN), exact on small
    integers (|sums| <= 256)."""
    if not offered(v):
        pytest.skip(f"{v.name} needs sm_{v.min_arch}")
    a, b = bf16_ints(64, 48, 24, "NN", seed=5)
    a.requires_grad_()
    b.requires_grad_()
    c = ptx_kernels.hgemm(a, b, kernel=v.name)
    assert c.grad_fn is not None and c.dtype == torch.bfloat16
    g = torch.randint(-2, 3, c.shape, device="cuda").to(torch.bfloat16)
    c.backward(g)
    assert a.grad.dtype == b.grad.dtype == torch.bfloat16
    assert torch.equal(a.grad, (g.double() @ b.detach().double().t()).to(torch.bfloat16))
    assert torch.equal(b.grad, (a.detach().double().t() @ g.double()).to(torch.bfloat16))


@pytest.mark.gpu
def test_bf16_errors_on_the_gpu():
    a, b = bf16_ints(8, 8, 8, "NN", seed=0)
    fp16_only = FP16_ONLY[0].name
    with pytest.raises(TypeError, match=rf"kernel '{fp16_only}' takes fp16 inputs, got torch.bfloat16"):
        ptx_kernels.hgemm(a, b, kernel=fp16_only)
    with pytest.raises(ValueError, match="bf16 inputs accumulate in fp32 only"):
        ptx_kernels.hgemm(a, b, kernel=BF16[0].name, acc="fp16")
    with pytest.raises(TypeError, match="got mat1 torch.bfloat16 and mat2 torch.float16"):
        ptx_kernels.hgemm(a, b.half(), kernel=BF16[0].name)
