"""The drop-in nn.Linear where a user looks first: `triton_kernels.Linear` / `ptx_kernels.Linear` and their
`route_linears`, the same module as `compare.nn.HGEMMLinear` (the older name, with `package=`); kernel= with
variant= accepted; a kernel, accumulation or dtype the package does not take refused when the layer is built."""
import pickle

import pytest
import torch
from torch import nn

import ptx_kernels
import triton_kernels
from compare.nn import HGEMMLinear, route_linears
from hgemm_common.errors import HgemmError
from helpers import assert_exact, ints

from conftest import DEVICE


def test_importable_from_the_packages_and_compare_nn():
    assert issubclass(triton_kernels.Linear, HGEMMLinear) and issubclass(ptx_kernels.Linear, HGEMMLinear)
    from ptx_kernels import Linear as P
    from triton_kernels import Linear as T, route_linears as route
    assert (T, P, route) == (triton_kernels.Linear, ptx_kernels.Linear, triton_kernels.route_linears)
    assert {"Linear", "route_linears"} <= set(triton_kernels.__all__) & set(ptx_kernels.__all__)
    assert T(4, 4).kernel == "auto" and P(4, 4).kernel == "mma_stmatrix"
    assert P(4, 4, variant="wgmma_persistent").kernel == "wgmma_persistent"
    assert HGEMMLinear(4, 4, package="ptx", variant="mma_tiled").kernel == "mma_tiled"


def test_route_linears_and_forward_are_exact():
    """Every nn.Linear of a model becomes the package's Linear (same weights); the routed forward equals the float64
    product on integer weights and inputs."""
    model = nn.Sequential(nn.Linear(24, 16), nn.ReLU(), nn.Linear(16, 8, bias=False)).to(DEVICE).half()
    with torch.no_grad():
        for m in model:
            if isinstance(m, nn.Linear):
                m.weight.copy_(ints(*m.weight.shape, seed=m.in_features))
                if m.bias is not None:
                    m.bias.zero_()
    assert triton_kernels.route_linears(model, kernel="splitk") == 2
    assert all(isinstance(model[i], triton_kernels.Linear) and model[i].kernel == "splitk" for i in (0, 2))
    x = ints(5, 24, seed=1, device=DEVICE)
    with torch.no_grad():
        h = model[0](x)
        assert_exact(h, x, model[0].weight.t(), "first layer")
        assert model(x).shape == (5, 8)
    assert route_linears(nn.Sequential(nn.Linear(4, 4)).half(), package="ptx", kernel="mma_tiled") == 1


@pytest.mark.parametrize("route", [triton_kernels.route_linears, ptx_kernels.route_linears,
                                   lambda m, **kw: route_linears(m, package="triton", **kw)],
                         ids=["triton", "ptx", "compare.nn"])
def test_route_linears_keeps_the_dtype_or_converts_when_asked(route):
    """A float32 model is refused when routed, in one line naming the first such layer and its dtype, before any
    layer is replaced (converting silently left the inputs float32: the first forward failed on a dtype mismatch);
    `dtype=` converts every layer; fp16 and bf16 layers keep their dtype."""
    model = nn.Sequential(nn.Linear(8, 4).half(), nn.Sequential(nn.ReLU(), nn.Linear(4, 4)))
    with pytest.raises(TypeError, match=r"^route_linears: layer '1\.1' has torch\.float32 weights and the kernels "
                       r"take torch\.float16 or torch\.bfloat16; convert the model first \(model\.half\(\)\) or "
                       r"pass dtype=torch\.float16 to convert while routing$"):
        route(model)
    assert type(model[0]) is nn.Linear and type(model[1][1]) is nn.Linear  # nothing replaced
    assert route(model, dtype=torch.float16) == 2
    assert [m.weight.dtype for m in (model[0], model[1][1])] == [torch.float16] * 2
    assert all(isinstance(m, HGEMMLinear) for m in (model[0], model[1][1]))
    bf16 = nn.Sequential(nn.Linear(8, 4)).to(torch.bfloat16)
    assert route(bf16) == 1 and bf16[0].weight.dtype == torch.bfloat16
    with pytest.raises(TypeError, match=r"^HGEMMLinear.from_linear: the layer has torch.float64 weights"):
        HGEMMLinear.from_linear(nn.Linear(4, 4).double())


@pytest.mark.parametrize("make, words", [
    (lambda: triton_kernels.Linear(4, 4, kernel="fastest"), r"^triton_hgemm: kernel must be one of .*got 'fastest'$"),
    (lambda: ptx_kernels.Linear(4, 4, kernel="nope"), r"^hgemm: unknown kernel 'nope'; choose one of"),
    (lambda: ptx_kernels.Linear(4, 4, kernel="mma_naive", dtype=torch.bfloat16),
     r"^hgemm: kernel 'mma_naive' takes fp16 inputs, got torch.bfloat16$"),
    (lambda: triton_kernels.Linear(4, 4, dtype=torch.bfloat16, acc="fp16"), r"^Linear: bf16 inputs accumulate in fp32"),
    (lambda: HGEMMLinear(4, 4, package="cuda"), r"^HGEMMLinear: package must be one of \('triton', 'ptx'\), got 'cuda'$"),
    (lambda: triton_kernels.Linear(4, 4, dtype=torch.float32), r"^Linear: dtype must be torch.float16 or"),
], ids=["triton-kernel", "ptx-kernel", "ptx-dtype", "bf16-acc", "package", "fp32"])
def test_refused_when_built_in_one_line(make, words):
    with pytest.raises(HgemmError, match=words):
        make()


def test_pickles_like_a_module():
    layer = triton_kernels.Linear(6, 3)
    back = pickle.loads(pickle.dumps(layer))
    assert type(back) is triton_kernels.Linear and torch.equal(back.weight, layer.weight)
