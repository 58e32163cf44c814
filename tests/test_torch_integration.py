"""PyTorch integration: the registered operators (opcheck, fake tensors, torch.compile without graph breaks),
autograd, HGEMMLinear, streams and CUDA graphs, inputs past 2^31 elements. The CPU tests use the Triton
interpreter and meta tensors; the GPU ones run both families for real."""
import pytest
import torch

import ptx_kernels
import triton_kernels
from compare.reference import error_bound, make_inputs, reference
from ptx_kernels import ops as ptx_ops  # noqa: F401  registers torch.ops.tensorcore_hgemm.ptx_hgemm
from tests.conftest import DEVICE, HAS_CUDA
from triton_kernels import ops as triton_ops  # noqa: F401  registers torch.ops.tensorcore_hgemm.triton_hgemm
from compare import registry
from compare.nn import HGEMMLinear

OPS = torch.ops.tensorcore_hgemm
# The last step of each family of hand-written kernel, for the GPU tests of the operator (each takes a different
# path through the wrapper: no tile, WMMA with copies for column-major A, the cp.async + stmatrix pipeline).
PTX_VARIANTS = tuple({v.family: v.name for v in ptx_kernels.variants()}.values())


def exact(m, n, k, layout="NN", device=DEVICE, seed=0, dtype="fp16"):
    return make_inputs(m, n, k, layout, device=device, seed=seed, kind="int", dtype=dtype)


# ---- registration, schema, fake tensors (CPU) ----------------------------------------------------------------

def test_operators_registered_with_their_schemas():
    assert str(OPS.triton_hgemm.default._schema) == \
        "tensorcore_hgemm::triton_hgemm(Tensor a, Tensor b, str acc=\"fp32\", str kernel=\"auto\", str? tune=None) -> Tensor"
    assert str(OPS.ptx_hgemm.default._schema) == \
        "tensorcore_hgemm::ptx_hgemm(Tensor a, Tensor b, str kernel=\"mma_stmatrix\", str acc=\"fp32\") -> Tensor"


@pytest.mark.parametrize("op", ["triton_hgemm", "ptx_hgemm"])
def test_fake_shapes_and_errors_on_meta(op):
    a = torch.empty(5, 7, device="meta", dtype=torch.float16)
    b = torch.empty(7, 3, device="meta", dtype=torch.float16)
    out = getattr(OPS, op)(a, b)
    assert out.shape == (5, 3) and out.dtype == torch.float16 and out.device.type == "meta"
    with pytest.raises(ValueError, match=r"mat1 and mat2 shapes cannot be multiplied \(5x7 and 3x7\)"):
        getattr(OPS, op)(a, b.t())
    with pytest.raises(TypeError, match="torch.float16"):
        getattr(OPS, op)(a.float(), b)


def test_triton_fake_takes_bf16_and_refuses_its_fp16_accumulation():
    a = torch.empty(5, 7, device="meta", dtype=torch.bfloat16)
    b = torch.empty(7, 3, device="meta", dtype=torch.bfloat16)
    out = OPS.triton_hgemm(a, b, "fp32")
    assert out.shape == (5, 3) and out.dtype == torch.bfloat16 and out.device.type == "meta"
    with pytest.raises(ValueError, match=r"^triton_hgemm: bf16 inputs accumulate in fp32 only .*got acc='fp16'$"):
        OPS.triton_hgemm(a, b, "fp16")
    with pytest.raises(TypeError, match=r"torch.float16 or both torch.bfloat16, got mat1 torch.bfloat16 and "
                                        r"mat2 torch.float16"):
        OPS.triton_hgemm(a, b.half(), "fp32")


def test_ptx_fake_rejects_unknown_variant_and_acc():
    a = torch.empty(4, 4, device="meta", dtype=torch.float16)
    with pytest.raises(ValueError, match="unknown kernel 'nope'"):
        OPS.ptx_hgemm(a, a, "nope", "fp32")
    with pytest.raises(ValueError, match="acc in"):
        OPS.ptx_hgemm(a, a, "mma_stmatrix", "bf16")


def test_operators_take_kernel_and_variant_but_not_both():
    """The operators' selector is kernel= (ptx_hgemm's third argument; triton_hgemm's fourth, after acc); the older
    name variant= reaches the same operator through the `.variant` overload, and both together is one line."""
    from hgemm_common.errors import HgemmValueError

    a = torch.empty(8, 8, device="meta", dtype=torch.float16)
    assert OPS.ptx_hgemm(a, a, kernel="mma_tiled").shape == (8, 8)
    assert OPS.ptx_hgemm(a, a, variant="mma_tiled", acc="fp16").shape == (8, 8)
    with pytest.raises(ValueError, match="unknown kernel 'nope'"):
        OPS.ptx_hgemm(a, a, variant="nope")
    with pytest.raises(HgemmValueError, match=r"^ptx_hgemm: variant= is another name for kernel=; give one, got "
                                              r"kernel='mma_tiled' and variant='mma_naive'$"):
        OPS.ptx_hgemm(a, a, kernel="mma_tiled", variant="mma_naive")
    assert OPS.triton_hgemm(a, a, "fp32", "splitk").shape == (8, 8)
    with pytest.raises(ValueError, match=r"^triton_hgemm: kernel must be one of .*got 'nope'$"):
        OPS.triton_hgemm(a, a, kernel="nope")


def test_triton_kernel_reaches_autograd_and_config_is_refused_there():
    """hgemm(kernel=...) on inputs that require grad runs that kernel through the operator (not "auto"); a pinned
    config= cannot be recorded, so it is refused rather than dropped."""
    import triton_kernels
    from triton_kernels import dispatch

    a = exact(16, 24, 32, device=DEVICE)[0].requires_grad_()
    b = exact(16, 24, 32, device=DEVICE)[1]
    c = triton_kernels.hgemm(a, b, kernel="splitk")
    assert c.grad_fn is not None
    assert any(r.plan.kernel == "splitk" for r in dispatch.PLANS._d.values())
    with pytest.raises(RuntimeError, match="config= is not recorded by autograd"):
        triton_kernels.hgemm(a, b, config=triton_kernels.configs("blocked")[0])


def test_ptx_tile_choice_is_validated_before_any_device_work():
    """hgemm's tile= names one of two tiles, offered only where a variant has two for the accumulation."""
    import ptx_kernels
    a = torch.ones(4, 4, dtype=torch.float16)
    with pytest.raises(ValueError, match="tile must be one of"):
        ptx_kernels.hgemm(a, a, kernel="mma_stmatrix", acc="fp16", tile="huge")
    with pytest.raises(ValueError, match="has one tile for acc='fp32'"):
        ptx_kernels.hgemm(a, a, kernel="mma_stmatrix", acc="fp32", tile="large")
    with pytest.raises(ValueError, match="has one tile for acc='fp16'"):
        ptx_kernels.hgemm(a, a, kernel="mma_tiled", acc="fp16", tile="base")
    v = ptx_kernels.variants()[[x.name for x in ptx_kernels.variants()].index("mma_stmatrix")]
    assert v.block_for("fp32") == (128, 256, 64) and v.block_for("fp16") == (256, 256, 32)


def test_ptx_split_choice_is_validated_before_any_device_work():
    """hgemm's split= is offered by the variants whose record lists splits (K split over a cluster), and only those
    splits; the error names the variants that split."""
    import ptx_kernels
    a = torch.ones(4, 4, dtype=torch.float16)
    splitting = [v.name for v in ptx_kernels.variants() if v.extra.get("splits")]
    assert splitting == ["wgmma_persistent", "wgmma_splitk"]
    with pytest.raises(ValueError, match=r"split=2 needs a kernel that splits K \(\['wgmma_persistent'"):
        ptx_kernels.hgemm(a, a, kernel="mma_stmatrix", split=2)
    with pytest.raises(ValueError, match=r"kernel 'wgmma_splitk' takes \(1, 2, 4\)"):
        ptx_kernels.hgemm(a, a, kernel="wgmma_splitk", split=3)
    with pytest.raises(RuntimeError, match="split= are not recorded by autograd"):
        ptx_kernels.hgemm(a.clone().requires_grad_(), a, kernel="wgmma_splitk", split=2)


def test_ptx_operator_compiles_fullgraph_on_meta():
    """torch.compile keeps the opaque operator as one node: no graph break (fullgraph=True would raise)."""
    f = torch.compile(lambda x, y: OPS.ptx_hgemm(x, y, "mma_stmatrix", "fp32") * 2, fullgraph=True,
                      backend="aot_eager")
    a = torch.empty(9, 16, device="meta", dtype=torch.float16)
    assert f(a, torch.empty(16, 24, device="meta", dtype=torch.float16)).shape == (9, 24)


# (dtype, accumulation) pairs the Triton operator offers: bf16 accumulates in fp32 only.
DTYPE_ACCS = [("fp16", "fp32"), ("fp16", "fp16"), ("bf16", "fp32")]


@pytest.mark.skipif(HAS_CUDA, reason="the interpreter path; the GPU test below covers CUDA")
@pytest.mark.parametrize("dtype,acc", DTYPE_ACCS)
def test_triton_opcheck_interpreter(dtype, acc):
    a, b = exact(17, 9, 33, "NT", dtype=dtype)
    torch.library.opcheck(OPS.triton_hgemm.default, (a, b, acc))
    torch.library.opcheck(OPS.triton_hgemm.default, (a.requires_grad_(), b.requires_grad_(), acc))


@pytest.mark.skipif(HAS_CUDA, reason="the interpreter path; the GPU test below covers CUDA")
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_triton_compile_fullgraph_interpreter(dtype):
    a, b = exact(17, 9, 33, dtype=dtype)
    f = torch.compile(lambda x, y: OPS.triton_hgemm(x, y, "fp32") + 1, fullgraph=True, backend="aot_eager")
    assert torch.equal(f(a, b), (reference(a, b) + 1).to(a.dtype))


# ---- autograd and HGEMMLinear (CPU under the interpreter, and the GPU) ---------------------------------------

def _exact_grads(op, a, b, g):
    a, b = a.detach().requires_grad_(), b.detach().requires_grad_()
    c = op(a, b)
    c.backward(g)
    assert c.dtype == a.grad.dtype == b.grad.dtype == a.dtype  # bf16 in: bf16 out, bf16 grads
    assert torch.equal(c, reference(a.detach(), b.detach()).to(a.dtype))
    assert torch.equal(a.grad, reference(g, b.detach().t()).to(a.dtype))  # dA = dC B^T
    assert torch.equal(b.grad, reference(a.detach().t(), g).to(a.dtype))  # dB = A^T dC


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("layout", ["NN", "TT"])
def test_triton_autograd_exact(layout, dtype):
    a, b = exact(33, 17, 40, layout, seed=1, dtype=dtype)
    g = exact(33, 1, 17, seed=6, dtype=dtype)[0]  # a (33, 17) matrix of small integers: dC (K = 1: not windowed)
    if dtype == "bf16":  # |dA| and |dB| within 256 as well: dC in [-1, 1] (|dA| <= 3 x 17, |dB| <= 3 x 33)
        g = g.clamp(-1, 1)
    _exact_grads(lambda x, y: OPS.triton_hgemm(x, y, "fp32"), a, b, g)


def test_hgemm_linear_matches_linear():
    torch.manual_seed(0)
    lin = torch.nn.Linear(24, 40).to(DEVICE)
    m = HGEMMLinear.from_linear(lin)
    x = exact(30, 1, 24, seed=8)[0].reshape(3, 10, 24).requires_grad_()  # small integers
    y = m(x)
    ref = (x.detach().double().reshape(-1, 24) @ m.weight.detach().double().t()).half().double() \
        + m.bias.detach().double()
    assert y.shape == (3, 10, 40)
    # fp16 product rounded once, then the fp16 bias add rounded once more
    assert ((y.double().reshape(-1, 40) - ref).abs() <= 2.0**-10 * ref.abs() + 2.0**-24).all()
    g = torch.ones_like(y)
    y.backward(g)
    assert torch.equal(m.bias.grad, torch.full((40,), 30.0, dtype=torch.float16, device=DEVICE))
    assert torch.equal(m.weight.grad, reference(g.reshape(-1, 40).t(), x.detach().reshape(-1, 24)).half())
    with pytest.raises(ValueError, match=r"expected inputs \(\.\.\., 24\)"):
        m(torch.zeros(3, 5, dtype=torch.float16, device=DEVICE))


def test_hgemm_linear_rejects_unknown_package():
    with pytest.raises(ValueError, match="package must be one of"):
        HGEMMLinear(4, 4, package="cuda")


# ---- GPU: opcheck, torch.compile (inductor), autograd vs fp32 autograd, streams, graphs, big inputs ----------

@pytest.mark.gpu
@pytest.mark.parametrize("dtype,acc", DTYPE_ACCS)
def test_triton_opcheck_cuda(dtype, acc):
    a, b = exact(130, 70, 300, "TN", dtype=dtype)
    torch.library.opcheck(OPS.triton_hgemm.default, (a, b, acc))
    torch.library.opcheck(OPS.triton_hgemm.default, (a.requires_grad_(), b.requires_grad_(), acc))


@pytest.mark.gpu
@pytest.mark.parametrize("variant", PTX_VARIANTS)
def test_ptx_opcheck_cuda(variant):
    a, b = exact(130, 70, 300, "NT")
    torch.library.opcheck(OPS.ptx_hgemm.default, (a, b, variant, "fp32"))
    torch.library.opcheck(OPS.ptx_hgemm.default, (a.requires_grad_(), b.requires_grad_(), variant, "fp32"))


# (package, dtype) of the GPU operator tests: the Triton operator in both dtypes, the PTX one in fp16.
PACKAGE_DTYPES = [("triton", "fp16"), ("triton", "bf16"), ("ptx", "fp16")]


@pytest.mark.gpu
@pytest.mark.parametrize("package,dtype", PACKAGE_DTYPES)
def test_compile_fullgraph_inductor(package, dtype):
    torch._dynamo.reset()
    call = (lambda x, y: OPS.triton_hgemm(x, y, "fp32")) if package == "triton" else \
        (lambda x, y: OPS.ptx_hgemm(x, y, "mma_stmatrix", "fp32"))
    f = torch.compile(lambda x, y: torch.relu(call(x, y)) + 1, fullgraph=True)
    for m, n, k in [(257, 130, 520), (64, 512, 128)]:
        a, b = exact(m, n, k, seed=m, dtype=dtype)
        assert torch.equal(f(a, b), (torch.relu(reference(a, b).to(a.dtype)) + 1))


@pytest.mark.gpu
@pytest.mark.parametrize("package,dtype", PACKAGE_DTYPES)
def test_autograd_against_fp32_autograd(package, dtype):
    """Random data: gradients within the inputs' dtype's bound of torch's fp32 autograd; integer data: bit-exact."""
    op = (lambda x, y: OPS.triton_hgemm(x, y, "fp32")) if package == "triton" else \
        (lambda x, y: OPS.ptx_hgemm(x, y, "mma_stmatrix", "fp32"))
    a, b = make_inputs(200, 136, 264, device="cuda", seed=9, kind="randn", dtype=dtype)
    g = make_inputs(200, 136, 1, device="cuda", seed=10, kind="randn", dtype=dtype)[0][:, :1] * torch.ones(
        1, 136, dtype=a.dtype, device="cuda")
    a32, b32 = a.float().requires_grad_(), b.float().requires_grad_()
    (a32 @ b32).backward(g.float())
    ah, bh = a.clone().requires_grad_(), b.clone().requires_grad_()
    op(ah, bh).backward(g)
    ga_ref, gb_ref = a32.grad.double(), b32.grad.double()
    assert ah.grad.dtype == bh.grad.dtype == a.dtype
    assert ((ah.grad.double() - ga_ref).abs() <= error_bound(g, b.t(), ga_ref)).all()
    assert ((bh.grad.double() - gb_ref).abs() <= error_bound(a.t(), g, gb_ref)).all()
    ai, bi = exact(72, 40, 136, seed=11, device="cuda", dtype=dtype)
    gi = exact(72, 1, 40, seed=12, device="cuda", dtype=dtype)[0]
    _exact_grads(op, ai, bi, gi.clamp(-1, 1) if dtype == "bf16" else gi)  # bf16: |dB| <= 3 x 72 <= 256


@pytest.mark.gpu
@pytest.mark.parametrize("package", ["triton", "ptx"])
def test_hgemm_linear_trains(package):
    """A few SGD steps of HGEMMLinear track nn.Linear (fp32 master copy) on the same data."""
    torch.manual_seed(0)
    ref = torch.nn.Linear(64, 32).cuda()
    m = HGEMMLinear.from_linear(ref, package=package)
    x = torch.randn(128, 64, device="cuda")
    target = torch.randn(128, 32, device="cuda")
    for _ in range(3):
        loss_ref = torch.nn.functional.mse_loss(ref(x), target)
        loss = torch.nn.functional.mse_loss(m(x.half()).float(), target)
        assert abs(loss.item() - loss_ref.item()) <= 2e-2 * loss_ref.item()
        ref.zero_grad()
        m.zero_grad()
        loss_ref.backward()
        loss.backward()
        with torch.no_grad():
            for p_ref, p in ((ref.weight, m.weight), (ref.bias, m.bias)):
                assert torch.allclose(p.grad.float(), p_ref.grad, rtol=2e-2, atol=2e-3)
                p_ref -= 0.1 * p_ref.grad
                p -= 0.1 * p.grad


def _families():
    return [("triton_hgemm", lambda a, b, out=None: triton_kernels.hgemm(a, b, out=out)),
            ("triton_splitk", lambda a, b, out=None: triton_kernels.hgemm(a, b, out=out, kernel="splitk")),
            ("triton_op", lambda a, b, out=None: OPS.triton_hgemm(a, b)),
            *[(v, (lambda v: lambda a, b, out=None: ptx_kernels.hgemm(a, b, kernel=v, out=out))(v))
              for v in PTX_VARIANTS],
            ("ptx_op", lambda a, b, out=None: OPS.ptx_hgemm(a, b, "mma_stmatrix", "fp32"))]


@pytest.mark.gpu
@pytest.mark.parametrize("name,fn", _families(), ids=[n for n, _ in _families()])
def test_stream_after_producer(name, fn):
    """Inputs written by a kernel on a side stream, the GEMM on that stream right after: it must wait for them."""
    s = torch.cuda.Stream()
    a0, b0 = exact(300, 200, 136, "NN", device="cuda", seed=13)
    with torch.cuda.stream(s):
        torch.cuda._sleep(2_000_000)  # keep the stream busy so a launch on the wrong stream would race ahead
        a = a0 * 1  # produced on s
        b = b0 * 1
        c = fn(a, b)
    s.synchronize()
    assert torch.equal(c, reference(a0, b0).half())


@pytest.mark.gpu
@pytest.mark.parametrize("name,fn", _families(), ids=[n for n, _ in _families()])
def test_cuda_graph_capture_and_replay(name, fn):
    a, b = exact(264, 136, 520, "NN", device="cuda", seed=14)
    out = torch.empty(264, 136, dtype=torch.float16, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):  # warm-up off the graph: builds, autotuning
            fn(a, b, out=out)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        c = fn(a, b, out=out)
    a2, b2 = exact(264, 136, 520, "NN", device="cuda", seed=15)
    a.copy_(a2)
    b.copy_(b2)
    c.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(c, reference(a2, b2).half())


def _big_enough(gib: float) -> bool:
    return HAS_CUDA and torch.cuda.get_device_properties(0).total_memory >= gib * 2**30


@pytest.mark.gpu
@pytest.mark.skipif(not _big_enough(24), reason="needs a GPU with 24 GB")
@pytest.mark.parametrize("name", ["triton", *[v.name for v in ptx_kernels.variants()]])
def test_output_past_2_31_elements(name):
    """C has more than 2^31 elements (65600 x 32800 = 2.15e9): its last rows must be right (64-bit offsets)."""
    m, n, k = 65600, 32800, 32
    assert m * n > 2**31
    a, b = exact(m, n, k, "NN", device="cuda", seed=16)
    c = torch.full((m, n), float("nan"), dtype=torch.float16, device="cuda")
    next(k for k in registry.kernels() if k.name == name).run(a, b, c)
    tail = slice(m - 70, m)
    assert torch.equal(c[tail], reference(a[tail], b).half())
    assert torch.equal(c[:3], reference(a[:3], b).half())
    assert not c[m // 2].isnan().any()
    del c
    torch.cuda.empty_cache()
