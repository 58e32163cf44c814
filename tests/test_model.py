"""Issue 39's harness pieces: the suites that carry their layouts (training, small outputs over long K, the M sweep),
and `python -m compare model` (compare/model.py). Without a GPU the model runs its tiny size with the Triton kernels
under the interpreter: the routed logits, the decode step against the KV cache and a training step are checked
against torch's; CUDA graphs, torch.compile and the timing path are GPU tests."""
import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from compare import bench

# ---------------------------------------------------------------------------------------------------------------
# Suites
# ---------------------------------------------------------------------------------------------------------------


def _layout(t: torch.Tensor) -> str:
    """N: row-major (rows contiguous), T: column-major (a .t() view of a row-major matrix)."""
    if t.stride(1) == 1:
        return "N"
    assert t.stride(0) == 1, t.stride()
    return "T"


class _RecordMM(TorchDispatchMode):
    """Every aten.mm below autograd, as (M, N, K, layout)."""

    def __init__(self):
        super().__init__()
        self.gemms = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.mm.default:
            a, b = args
            self.gemms.append((a.shape[0], b.shape[1], a.shape[1], _layout(a) + _layout(b)))
        return func(*args, **(kwargs or {}))


def test_training_suite_is_what_autograd_runs_for_nn_linear():
    """nn.Linear's forward and backward, recorded below autograd, run exactly `linear_gemms`' three GEMMs in its
    layouts (the T x I x O here is small and lopsided, so that a swapped dimension shows)."""
    t, i, o = 48, 40, 24
    lin = nn.Linear(i, o, bias=False)
    x = torch.randn(t, i, requires_grad=True)
    with _RecordMM() as rec:
        lin(x).backward(torch.randn(t, o))  # a real dY (sum().backward() would give an expanded one)
    assert sorted(rec.gemms) == sorted(bench.linear_gemms(t, i, o))
    assert bench.SUITES["training"] == [g for lin_ in bench.TRAINING_LINEARS for g in bench.linear_gemms(*lin_)]


def test_issue_39_suites():
    training = bench.SUITES["training"]
    assert {lay for *_, lay in training} == {"NT", "NN", "TN"} and all(len(s) == 4 for s in training)
    tokens = {t for t, *_ in bench.TRAINING_LINEARS}
    assert min(tokens) == 512 and max(tokens) == 16384
    assert {h for _, i, o in bench.TRAINING_LINEARS for h in (i, o)} >= {4096, 8192}
    small = bench.SUITES["small_out_large_k"]
    assert len(small) >= 3 and all(m * n <= 512 * 1024 and 16384 <= k <= 131072 for m, n, k in small)
    assert {16384, 131072} <= {k for *_, k in small}
    assert {m for m, *_ in bench.SUITES["m_sweep"]} == {64, 128, 256}
    assert all(n >= 4096 and k >= 4096 for _, n, k in bench.SUITES["m_sweep"])


def test_layouts_travel_with_shapes():
    assert bench.parse_shapes("16x4096x4096,512X512x16384:tn") == [(16, 4096, 4096), (512, 512, 16384, "TN")]
    with pytest.raises(ValueError, match=r"layout must be one of NN, NT, TN, TT, got 'XY'"):
        bench.parse_shapes("8x8x8:XY")
    with pytest.raises(ValueError, match="not of the form MxNxK"):
        bench.parse_shapes("8x8:NN")
    mixed = [(8, 8, 8), (4, 4, 4, "TN")]
    assert bench.with_layouts(mixed) == [(8, 8, 8, "NN"), (4, 4, 4, "TN")]
    assert bench.with_layouts(mixed, "NT") == [(8, 8, 8, "NT"), (4, 4, 4, "NT")]  # --layout overrides
    assert bench.with_layouts(bench.SUITES["training"])[:3] == bench.linear_gemms(*bench.TRAINING_LINEARS[0])
