"""PyTorch integration: the registered operators (opcheck, fake tensors, torch.compile without graph breaks),
autograd, HGEMMLinear, streams and CUDA graphs, inputs past 2^31 elements. The CPU tests use the Triton
interpreter and meta tensors; the GPU ones run both families for real."""
import pytest
import torch

import ptx_kernels
import triton_kernels
from compare.reference import compare, error_bound, make_inputs, reference
from ptx_kernels import ops as ptx_ops  # noqa: F401  registers torch.ops.tensorcore_hgemm.ptx_hgemm
from tests.conftest import DEVICE, HAS_CUDA
from triton_kernels import ops as triton_ops  # noqa: F401  registers torch.ops.tensorcore_hgemm.triton_hgemm
from compare import registry
from compare.nn import HGEMMLinear
from hgemm_common.record import ACCS_FOR
from hgemm_common.validation import DTYPE_NAMES

OPS = torch.ops.tensorcore_hgemm
# The last step of each family of hand-written kernel, for the GPU tests of the operator (each takes a different
# path through the wrapper: no tile, WMMA with copies for column-major A, the cp.async + stmatrix pipeline).
PTX_VARIANTS = tuple({v.family: v.name for v in ptx_kernels.variants()}.values())


def exact(m, n, k, layout="NN", device=DEVICE, seed=0, dtype="fp16"):
    return make_inputs(m, n, k, layout, device=device, seed=seed, kind="int", dtype=dtype)


# ---- registration, schema, fake tensors (CPU) ----------------------------------------------------------------

def test_operators_registered_with_their_schemas():
    assert str(OPS.triton_hgemm.default._schema) == \
        "tensorcore_hgemm::triton_hgemm(Tensor a, Tensor b, str hgemm_acc=\"fp32\", str hgemm_kernel=\"auto\", " \
        "str? hgemm_tune=None) -> Tensor"
    assert str(OPS.ptx_hgemm.default._schema) == \
        "tensorcore_hgemm::ptx_hgemm(Tensor a, Tensor b, str hgemm_kernel=\"mma_stmatrix\", " \
        "str hgemm_acc=\"fp32\") -> Tensor"


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
    """The operators' selector is hgemm_kernel= (ptx_hgemm's third argument; triton_hgemm's fourth, after acc); the
    older name variant= reaches the same operator through the `.variant` overload, and both together is one line."""
    from hgemm_common.errors import HgemmValueError

    a = torch.empty(8, 8, device="meta", dtype=torch.float16)
    assert OPS.ptx_hgemm(a, a, hgemm_kernel="mma_tiled").shape == (8, 8)
    assert OPS.ptx_hgemm(a, a, variant="mma_tiled", hgemm_acc="fp16").shape == (8, 8)
    with pytest.raises(ValueError, match="unknown kernel 'nope'"):
        OPS.ptx_hgemm(a, a, variant="nope")
    with pytest.raises(HgemmValueError, match=r"^ptx_hgemm: variant= is another name for hgemm_kernel=; give one, "
                                              r"got hgemm_kernel='mma_tiled' and variant='mma_naive'$"):
        OPS.ptx_hgemm(a, a, hgemm_kernel="mma_tiled", variant="mma_naive")
    assert OPS.triton_hgemm(a, a, "fp32", "splitk").shape == (8, 8)
    with pytest.raises(ValueError, match=r"^triton_hgemm: kernel must be one of .*got 'nope'$"):
        OPS.triton_hgemm(a, a, hgemm_kernel="nope")


def test_triton_kernel_reaches_autograd_and_config_is_refused_there():
    """hgemm(kernel=...) on inputs that require grad runs that kernel through the operator (not "auto"); a pinned
    config= cannot be recorded, so it is refused rather than dropped."""
    import triton_kernels
    from triton_kernels import dispatch

    a = exact(16, 24, 32, device=DEVICE)[0].requires_grad_()
    b = exact(16, 24, 32, device=DEVICE)[1]
    c = triton_kernels.hgemm(a, b, kernel="splitk")
    assert c.grad_fn is not None
    assert any(r.plan.kernel == "triton_splitk" for r in dispatch.PLANS._d.values())
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
    """hgemm's split= is offered by the variants whose record lists splits (K split over a cluster or over the grid),
    and only those splits (any count up to `Variant.max_split` over the grid); the error names the variants that
    split."""
    import ptx_kernels
    a = torch.ones(4, 4, dtype=torch.float16)
    splitting = [v.name for v in ptx_kernels.variants() if v.splits]
    assert splitting == ["wgmma_persistent", "wgmma_splitk", "wgmma_splitk_grid", "mma_stream"]
    with pytest.raises(ValueError, match=r"split=2 needs a kernel that splits K \(\['wgmma_persistent'"):
        ptx_kernels.hgemm(a, a, variant="mma_stmatrix", split=2)
    with pytest.raises(ValueError, match=r"kernel 'wgmma_splitk' takes \(1, 2, 4\)"):
        ptx_kernels.hgemm(a, a, variant="wgmma_splitk", split=3)
    for variant in ("wgmma_persistent", "wgmma_splitk_grid", "mma_stream"):
        for bad in (0, 257, 2.0, True):
            with pytest.raises(ValueError, match=rf"kernel '{variant}' takes \(.*'1-256'\)"):
                ptx_kernels.hgemm(a, a, variant=variant, split=bad)
    with pytest.raises(RuntimeError, match="split= are not recorded by autograd"):
        ptx_kernels.hgemm(a.clone().requires_grad_(), a, kernel="wgmma_splitk", split=2)


def test_ptx_sms_choice_is_validated_before_any_device_work():
    """hgemm's sms= (the SM count a stream-K schedule sees) is taken by the kernels whose schedule reads it alone,
    as a positive int; the errors name them, and autograd does not record it."""
    import ptx_kernels
    a = torch.ones(4, 4, dtype=torch.float16)
    assert ptx_kernels.call.SM_SCHEDULED == ("wgmma_streamk",)
    with pytest.raises(ValueError, match=r"^hgemm: sms= needs a kernel whose schedule takes it \(\['wgmma_streamk'\]\); "
                                         r"kernel 'wgmma_persistent' does not$"):
        ptx_kernels.hgemm(a, a, variant="wgmma_persistent", sms=4)
    for bad in (0, -1, 2.0, True, "4", 1 << 17):
        with pytest.raises(ValueError, match=rf"^hgemm: sms must be an int from 1 to 65536, got {bad!r}$"):
            ptx_kernels.hgemm(a, a, variant="wgmma_streamk", sms=bad)
    with pytest.raises(RuntimeError, match="sms= and split= are not recorded by autograd"):
        ptx_kernels.hgemm(a.clone().requires_grad_(), a, kernel="wgmma_streamk", sms=4)


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


# ---- Inductor: the operators lowered as fallbacks, every argument by keyword (CPU) -----------------------------

def _project_operators() -> dict[str, torch.FunctionSchema]:
    """Every overload of every operator the project registers under torch.ops.tensorcore_hgemm: each module of the
    three packages imported (so an operator defined anywhere in them is registered), then the dispatcher's list."""
    import importlib
    import pkgutil

    from hgemm_common.oplib import NAMESPACE

    for pkg in ("hgemm_common", "triton_kernels", "ptx_kernels"):
        for info in pkgutil.walk_packages(importlib.import_module(pkg).__path__, pkg + "."):
            importlib.import_module(info.name)
    out = {}
    for full in torch._C._dispatch_get_all_op_names():
        if full.startswith(f"{NAMESPACE}::"):
            name, _, overload = full.partition("::")[2].partition(".")
            out[full] = getattr(getattr(OPS, name), overload or "default")._schema
    return out


def _inductor_parameter_names() -> set[str]:
    """The names Inductor's fallback path takes as parameters of its own while it passes an operator's arguments on
    by name: `lowering.fallback_handler` calls `FallbackKernel.create(kernel, *args, **kwargs)`, which calls
    `process_kernel(kernel, *args, **kwargs)` with the call's arguments normalized to keywords, defaults included;
    the constructor takes the same call's parts. Read from the installed torch; `self` and `cls` besides."""
    import inspect

    from torch._inductor import ir

    names = {"self", "cls"}
    for fn in (ir.FallbackKernel.create, ir.FallbackKernel.process_kernel, ir.FallbackKernel.__init__):
        names |= {p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    return names


def test_operator_argument_names_cannot_collide_with_inductors():
    """No argument of any overload of any project operator is named like a parameter of Inductor's fallback path: an
    argument `kernel` made `FallbackKernel.create() got multiple values for argument 'kernel'` the first time a
    compiled graph was lowered. The rule that keeps them apart: every non-tensor argument starts with `hgemm_`
    (`variant`, the `.variant` overloads' older name, aside; it is checked like the rest)."""
    ops = _project_operators()
    assert {"tensorcore_hgemm::triton_hgemm", "tensorcore_hgemm::ptx_hgemm", "tensorcore_hgemm::ptx_hgemm.variant",
            "tensorcore_hgemm::ptx_sparse_hgemm", "tensorcore_hgemm::ptx_sparse_hgemm.variant"} <= set(ops), list(ops)
    taken = _inductor_parameter_names()
    assert "kernel" in taken, taken  # the name that collided: the list is read from the path that raised
    clashes = {op: sorted({a.name for a in schema.arguments} & taken) for op, schema in ops.items()}
    assert not any(clashes.values()), clashes
    unprefixed = {op: [a.name for a in schema.arguments if not isinstance(a.type, torch.TensorType)
                       and not a.name.startswith("hgemm_") and a.name != "variant"] for op, schema in ops.items()}
    assert not any(unprefixed.values()), unprefixed


def _inductor_code(f, *args):
    """f(*args) compiled by Inductor (not aot_eager) with the FX graph cache off, so that every call lowers the graph
    afresh; (its result, the Python wrapper code Inductor generated)."""
    from torch._inductor import config
    from torch._inductor.utils import run_and_get_code

    with config.patch(fx_graph_cache=False):
        out, code = run_and_get_code(f, *args)
    return out, "\n".join(code)


# How a graph hands an operator its arguments depends on how it was called: Inductor's fallback receives the
# trailing arguments that equal their defaults by name (the positional call `triton_hgemm(x, y, "fp32")` reached
# `FallbackKernel.create` with acc=, kernel=, tune= as keywords), the others in order. So each operator is called
# three ways: every argument by keyword at its default (all of them reach Inductor by name), every argument by
# keyword at another value, and positionally with the defaults left out.
def _other_acc(x):
    """The last accumulation x's dtype takes (`ACCS_FOR`): fp16 for fp16, fp32 for bf16 (it has no other)."""
    return ACCS_FOR[DTYPE_NAMES[x.dtype]][-1]


def triton_calls(x, y):
    return (OPS.triton_hgemm(a=x, b=y, hgemm_acc="fp32", hgemm_kernel="auto", hgemm_tune=None),
            OPS.triton_hgemm(a=x, b=y, hgemm_acc=_other_acc(x), hgemm_kernel="blocked", hgemm_tune="table").t(),
            OPS.triton_hgemm(x, y, "fp32"))


def ptx_calls(x, y):
    return (OPS.ptx_hgemm(a=x, b=y, hgemm_kernel="mma_stmatrix", hgemm_acc="fp32"),
            OPS.ptx_hgemm(a=x, b=y, hgemm_kernel="mma_tiled", hgemm_acc=_other_acc(x)).t(),
            OPS.ptx_hgemm(x, y),
            OPS.ptx_hgemm(a=x, b=y, variant="mma_naive", hgemm_acc="fp32"))


def _expected_calls(a, b, n: int) -> list[torch.Tensor]:
    """What triton_calls / ptx_calls return on exact inputs: the product, its transpose second."""
    c = reference(a, b).to(a.dtype)
    return [c.t() if i == 1 else c for i in range(n)]


@pytest.mark.skipif(HAS_CUDA, reason="the interpreter path; test_compile_fullgraph_inductor covers CUDA")
@pytest.mark.parametrize("dynamic", [False, True])
def test_triton_operator_lowered_by_inductor(dynamic):
    """Real Inductor (not aot_eager) over the Triton operator, the Triton interpreter running it on CPU tensors:
    fullgraph, static and dynamic shapes, two sizes, the three ways of calling it (`triton_calls`); the wrapper
    calls the operator as a fallback kernel and every result is exact. A transposed view rides along (lowered
    without a kernel of its own: a pointwise op would cost a C++ compile, a minute on a cold CI cache, and prove
    nothing more about the operator)."""
    torch._dynamo.reset()
    f = torch.compile(triton_calls, backend="inductor", fullgraph=True, dynamic=dynamic)
    for m in (17, 40):
        a, b = exact(m, 9, 33, seed=m)
        out, code = _inductor_code(f, a, b)
        want = _expected_calls(a, b, 3)
        assert all(torch.equal(x, y) for x, y in zip(out, want)), m
        assert code.count("torch.ops.tensorcore_hgemm.triton_hgemm.default(") == 3, code


@pytest.mark.skipif(HAS_CUDA, reason="the CPU stand-in; test_compile_fullgraph_inductor runs the PTX kernels")
@pytest.mark.parametrize("dynamic", [False, True])
def test_ptx_operator_lowered_by_inductor(dynamic, monkeypatch):
    """Real Inductor over the PTX operator and its `.variant` overload, fullgraph, static and dynamic shapes, the
    ways of calling it of `ptx_calls`. The hand-written kernels run on a GPU only, so the operator's implementation
    calls a CPU stand-in for `ptx_kernels.call.hgemm` here: this proves that the graph lowers (each fallback kernel
    is created from the arguments as the graph names them), that the generated wrapper calls the operator, and that
    each call's kernel and accumulation reach the implementation; the kernels' own results under Inductor are the
    GPU test's (test_compile_fullgraph_inductor)."""
    from ptx_kernels import call

    seen = []

    def stand_in(a, b, kernel, acc):
        seen.append((kernel, acc))
        return reference(a, b).to(a.dtype)

    monkeypatch.setattr(call, "hgemm", stand_in)
    torch._dynamo.reset()
    f = torch.compile(ptx_calls, backend="inductor", fullgraph=True, dynamic=dynamic)
    for m in (17, 40):
        seen.clear()
        a, b = exact(m, 9, 33, seed=m)
        out, code = _inductor_code(f, a, b)
        want = _expected_calls(a, b, 4)
        assert all(torch.equal(x, y) for x, y in zip(out, want)), m
        assert code.count("torch.ops.tensorcore_hgemm.ptx_hgemm.default(") == 4, code
        assert seen == [("mma_stmatrix", "fp32"), ("mma_tiled", "fp16"), ("mma_stmatrix", "fp32"),
                        ("mma_naive", "fp32")], seen


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
    m = HGEMMLinear.from_linear(lin, dtype=torch.float16)
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


# ---- HGEMMLinear's kept plans: the eager call that records nothing launches its plan directly --------------------

# (package, variant) of the layers under test: the Triton family everywhere, the Hopper kernel and an mma.sync one
# (a binding with copies avoided, another without) on a GPU
LINEAR_PACKAGES = [("triton", None)] + ([("ptx", "wgmma_persistent"), ("ptx", "mma_stmatrix")] if HAS_CUDA else [])


def _linear(package, variant, bias=True, in_features=40, out_features=24, dtype=torch.float16, seed=20):
    """An HGEMMLinear with small-integer weights and bias (every product exact), counting its operator calls."""
    kw = {"variant": variant} if variant else {}
    if variant and variant not in {v.name for v in ptx_kernels.variants() if v.offered_on(_arch())}:
        pytest.skip(f"{variant} does not run on this GPU")
    m = HGEMMLinear(in_features, out_features, bias=bias, package=package, device=DEVICE, dtype=dtype, **kw)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        m.weight.copy_(torch.randint(-3, 4, m.weight.shape, generator=g).to(dtype))
        if bias:
            m.bias.copy_(torch.randint(-3, 4, m.bias.shape, generator=g).to(dtype))
    m.operator_calls = 0
    forward = m._forward

    def counted(x):
        m.operator_calls += 1
        return forward(x)

    m._forward = counted
    return m


def _arch():
    major, minor = torch.cuda.get_device_capability()
    return major * 10 + minor


def _ints(*shape, seed=21, dtype=torch.float16):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-3, 4, shape, generator=g).to(dtype).to(DEVICE)


def _expected(m, x):
    y = x.double() @ m.weight.detach().double().t()
    return (y + m.bias.detach().double() if m.bias is not None else y).to(x.dtype)


@pytest.mark.parametrize("package,variant", LINEAR_PACKAGES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_hgemm_linear_launches_its_kept_plan(package, variant, dtype):
    """Under no_grad the first call of a kind of input goes through the operator, the next ones launch the kept
    plan: bit-exact results, a fresh output each time, the input's leading shape; a new kind of input (here M = 1
    and a 1-D input) gets its own plan; the bias is added in place."""
    if variant == "mma_stmatrix" and dtype == torch.bfloat16:
        pytest.skip("mma_stmatrix takes fp16 only")
    m = _linear(package, variant, dtype=dtype)
    with torch.no_grad():
        for i, shape in enumerate([(3, 5, 40), (3, 5, 40), (3, 5, 40), (1, 40), (40,), (40,)]):
            x = _ints(*shape, seed=30 + i, dtype=dtype)
            y = m(x)
            assert y.shape == (*shape[:-1], 24) and y.dtype == dtype and not y.requires_grad
            assert torch.equal(y, _expected(m, x)), shape
        assert m.operator_calls == 3  # (3, 5, 40), (1, 40), (40,): one first call each
        y1, y2 = m(x), m(x)
        assert y1.data_ptr() != y2.data_ptr()  # an output of its own each time, not a shared buffer
        assert torch.equal(y1, _expected(m, x)) and torch.equal(y2, y1)


@pytest.mark.parametrize("package,variant", LINEAR_PACKAGES)
def test_hgemm_linear_plans_follow_the_weight(package, variant):
    """In-place updates of the weight are read by the kept plan (same memory); a weight replaced by .data (other
    memory, other strides), a new Parameter, or moved by .to() is never launched through an old plan."""
    m = _linear(package, variant)
    x = _ints(4, 40)
    with torch.no_grad():
        m(x), m(x)
        m.weight.add_(1)
        assert torch.equal(m(x), _expected(m, x))
        calls = m.operator_calls
        m.weight.data = _ints(40, 24, seed=40).t()  # column-major now: other address and strides
        assert torch.equal(m(x), _expected(m, x)) and m.operator_calls == calls + 1
        assert torch.equal(m(x), _expected(m, x)) and m.operator_calls == calls + 1
        m.weight = torch.nn.Parameter(_ints(24, 40, seed=41))
        assert torch.equal(m(x), _expected(m, x)) and m.operator_calls == calls + 2
        assert len(m._plans) == 1  # the plan of the replaced weight was dropped with it
        m.to(torch.bfloat16) if package == "triton" else m.float().half()
        xb = x.to(m.weight.dtype)
        assert not m._plans
        assert torch.equal(m(xb), _expected(m, xb)) and m.operator_calls == calls + 3


@pytest.mark.parametrize("package,variant", LINEAR_PACKAGES)
def test_hgemm_linear_inputs_without_a_plan(package, variant):
    """Inputs the kept plans cannot serve take the operator every time and stay right: a strided input whose rows
    are no view of a matrix, a negative view (neg bit); an input off 16-byte alignment is right either way; errors
    of a new kind of input are raised as before, one line each, after plans exist."""
    m = _linear(package, variant)
    with torch.no_grad():
        x = _ints(6, 4, 40).transpose(0, 1)  # (4, 6, 40) whose 24 rows are no (24, 40) view: reshape copies
        for _ in range(2):
            assert torch.equal(m(x), _expected(m, x.contiguous()))
        neg = torch._neg_view(_ints(5, 40))
        for _ in range(2):
            assert torch.equal(m(neg), _expected(m, neg.resolve_neg()))
        assert m.operator_calls == 4 and not m._plans
        # right either way, planned or not: PTX copies these (no plan), Triton reads them in place
        odd = _ints(5 * 40 + 1)[1:].view(5, 40)  # rows off 16 bytes
        strided = _ints(4, 6, 80)[:, :, ::2]  # element stride 2, rows a (24, 40) view
        for t in (odd, odd, strided, strided):
            assert torch.equal(m(t), _expected(m, t.contiguous()))
        calls = m.operator_calls
        with pytest.raises(ValueError, match=r"^HGEMMLinear: expected inputs \(\.\.\., 40\), got \(4, 39\)$"):
            m(_ints(4, 39))
        with pytest.raises(TypeError, match=r"^HGEMMLinear: inputs are torch.float32, the weights torch.float16"):
            m(_ints(4, 40, dtype=torch.float32))
        with pytest.raises(ValueError, match=r"^HGEMMLinear: expected inputs \(\.\.\., 40\), got \(\)$"):
            m(_ints(1)[0])
        with pytest.raises(TypeError, match=r"^HGEMMLinear: inputs must be a torch.Tensor, got list$"):
            m([1.0] * 40)
        assert m.operator_calls == calls + 4


@pytest.mark.parametrize("package,variant", LINEAR_PACKAGES)
def test_hgemm_linear_records_autograd_after_plans_exist(package, variant):
    """With plans kept, a call that needs grad still goes through the operator and records it (dX, dW, db exact);
    a frozen weight with a bias that needs grad: the plan runs and the in-place bias add records db."""
    m = _linear(package, variant)
    x = _ints(6, 40)
    with torch.no_grad():
        m(x), m(x)
    calls = m.operator_calls
    xg = x.clone().requires_grad_()
    y = m(xg)
    assert m.operator_calls == calls + 1 and y.grad_fn is not None
    g = _ints(6, 24, seed=50)
    y.backward(g)
    assert torch.equal(xg.grad, reference(g, m.weight.detach()).half())
    assert torch.equal(m.weight.grad, reference(g.t(), x).half())
    assert torch.equal(m.bias.grad, g.double().sum(0).half())
    m.weight.requires_grad_(False)
    m.bias.grad = None
    y = m(x)  # the GEMM records nothing now: the plan kept under no_grad serves it
    assert m.operator_calls == calls + 1 and y.requires_grad
    y.backward(g)
    assert torch.equal(m.bias.grad, g.double().sum(0).half()) and torch.equal(y, _expected(m, x))


@pytest.mark.gpu
@pytest.mark.parametrize("package,variant", LINEAR_PACKAGES)
def test_hgemm_linear_plans_in_graphs_and_on_side_streams(package, variant):
    """The kept plan launches on the current stream: captured in a CUDA graph it replays on new inputs, and on a
    busy side stream it waits for the input's producer."""
    m = _linear(package, variant, in_features=520, out_features=136)
    x = _ints(8, 520)
    with torch.no_grad():
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            m(x), m(x)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = m(x)
        x.copy_(_ints(8, 520, seed=60))
        y.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(y, _expected(m, x))
        x0 = _ints(8, 520, seed=61)
        with torch.cuda.stream(s):
            torch.cuda._sleep(2_000_000)
            x1 = x0 * 1  # produced on s
            y1 = m(x1)
        s.synchronize()
        assert torch.equal(y1, _expected(m, x0))
    assert m.operator_calls == 1


def test_hgemm_linear_copies_and_modes_start_without_plans():
    """A deep copy or a pickle of a layer carries no plans (compiled kernels, views of the weight); under a dispatch
    mode the operator is called, so the mode sees it."""
    import copy
    import io

    from torch.utils._python_dispatch import TorchDispatchMode

    m = _linear("triton", None)
    x = _ints(3, 40)
    with torch.no_grad():
        m(x), m(x)
    assert len(m._plans) == 1
    m2 = copy.deepcopy(m)
    assert not m2._plans and torch.equal(m2(x), _expected(m, x))
    buf = io.BytesIO()
    torch.save(HGEMMLinear.from_linear(torch.nn.Linear(40, 24), dtype=torch.float16), buf)
    buf.seek(0)
    assert not torch.load(buf, weights_only=False)._plans

    class Seen(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    with torch.no_grad(), Seen() as seen:
        assert torch.equal(m(x), _expected(m, x))
    assert any("tensorcore_hgemm.triton_hgemm" in op for op in seen.ops), seen.ops


@pytest.mark.skipif(HAS_CUDA, reason="the interpreter path; the model's compile modes cover CUDA")
def test_hgemm_linear_compiles_fullgraph_after_eager_plans():
    """torch.compile traces the operator, not the kept plans (which dynamo could not trace): fullgraph holds after
    eager calls made plans."""
    m = _linear("triton", None)
    x = _ints(3, 40)
    with torch.no_grad():
        m(x), m(x)
        torch._dynamo.reset()
        f = torch.compile(m, fullgraph=True, backend="aot_eager")
        assert torch.equal(f(x), _expected(m, x))


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
@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("package,dtype", PACKAGE_DTYPES)
def test_compile_fullgraph_inductor(package, dtype, dynamic):
    """Inductor over each operator on the GPU, fullgraph, static and dynamic shapes, the three ways of calling it
    (`triton_calls`, `ptx_calls`: every argument by keyword at its default, which reaches Inductor's fallback by
    name, at other values, and positionally), with Inductor's own pointwise kernel after it; all exact."""
    torch._dynamo.reset()
    calls = triton_calls if package == "triton" else ptx_calls
    f = torch.compile(lambda x, y: [torch.relu(c) + 1 for c in calls(x, y)], fullgraph=True, dynamic=dynamic)
    for m, n, k in [(257, 130, 520), (64, 512, 128)]:
        a, b = exact(m, n, k, seed=m, dtype=dtype)
        want = _expected_calls(a, b, 4 if package == "ptx" else 3)
        got = f(a, b)
        assert len(got) == len(want) and all(torch.equal(x, torch.relu(y) + 1) for x, y in zip(got, want)), (m, n, k)


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
    for got, want, x, y in ((ah.grad, ga_ref, g, b.t()), (bh.grad, gb_ref, a.t(), g)):
        verdict = compare(got, want, error_bound(x, y, want))
        assert verdict.ok, verdict.detail
    ai, bi = exact(72, 40, 136, seed=11, device="cuda", dtype=dtype)
    gi = exact(72, 1, 40, seed=12, device="cuda", dtype=dtype)[0]
    _exact_grads(op, ai, bi, gi.clamp(-1, 1) if dtype == "bf16" else gi)  # bf16: |dB| <= 3 x 72 <= 256


@pytest.mark.gpu
@pytest.mark.parametrize("package", ["triton", "ptx"])
def test_hgemm_linear_trains(package):
    """A few SGD steps of HGEMMLinear track nn.Linear (fp32 master copy) on the same data."""
    torch.manual_seed(0)
    ref = torch.nn.Linear(64, 32).cuda()
    m = HGEMMLinear.from_linear(ref, package=package, dtype=torch.float16)
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
