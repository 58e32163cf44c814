"""bf16 inside a model: `HGEMMLinear` and `route_linears` take bf16, and a randomly initialised bf16 transformer
block with every nn.Linear routed through each kernel family (Triton, mma.sync, wgmma on Hopper) gives logits that
match torch's within bf16 tolerance (GPU). The CPU tests check the module plumbing and its errors; the bf16 dots
themselves need the GPU (the Triton interpreter's bf16 dot is not exact on the CPU: see test_triton_hgemm.py)."""
import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from compare.nn import HGEMMLinear, route_linears
from conftest import DEVICE


class Block(nn.Module):
    """Embedding, one pre-norm decoder block (causal attention + SwiGLU MLP), final norm and LM head: five
    nn.Linear layers of odd and even widths (d = 200, the MLP's 2 x 344 and 344 -> d, vocab 1000)."""

    def __init__(self, d: int = 200, heads: int = 4, ff: int = 344, vocab: int = 1000):
        super().__init__()
        self.heads = heads
        self.emb = nn.Embedding(vocab, d)
        self.norm1, self.norm2, self.norm_f = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d)
        self.up = nn.Linear(d, 2 * ff)
        self.down = nn.Linear(ff, d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.emb(tokens)
        bsz, seq, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(d, dim=-1)
        q, k, v = (t.reshape(bsz, seq, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(bsz, seq, d)
        x = x + self.proj(att)
        gate, up = self.up(self.norm2(x)).chunk(2, dim=-1)
        x = x + self.down(F.silu(gate) * up)
        return self.lm_head(self.norm_f(x))


def test_linear_and_routing_take_bf16():
    torch.manual_seed(0)
    model = Block().to(torch.bfloat16)
    assert route_linears(model, package="triton") == 5
    linears = [m for m in model.modules() if isinstance(m, HGEMMLinear)]
    assert len(linears) == 5 and not any(type(m) is nn.Linear for m in model.modules())
    assert all(m.weight.dtype == torch.bfloat16 for m in linears)
    assert "dtype=torch.bfloat16" in repr(model.qkv)
    fp16 = HGEMMLinear.from_linear(nn.Linear(8, 4), dtype=torch.float16)  # fp32 weights converted when asked
    assert fp16.weight.dtype == torch.float16


def test_bf16_linear_errors_name_the_problem():
    with pytest.raises(ValueError, match=r"^HGEMMLinear: bf16 inputs accumulate in fp32 only .*'fp16'"):
        HGEMMLinear(4, 4, dtype=torch.bfloat16, acc="fp16")
    with pytest.raises(TypeError, match=r"dtype must be torch.float16 or torch.bfloat16, got torch.float32"):
        HGEMMLinear(4, 4, dtype=torch.float32)
    m = HGEMMLinear(4, 3, dtype=torch.bfloat16, device=DEVICE)
    with pytest.raises(TypeError, match=r"inputs are torch.float16, the weights torch.bfloat16"):
        m(torch.zeros(2, 4, dtype=torch.float16, device=DEVICE))


def _families() -> list[tuple[str, dict]]:
    """One routing per kernel family that takes bf16 on this GPU: Triton's automatic choice, the best mma.sync
    variant, and on sm_90 the Hopper wgmma variant (records ask: `Variant.dtypes`)."""
    import ptx_kernels

    major, minor = torch.cuda.get_device_capability()
    arch = major * 10 + minor
    fams = [("triton", {"package": "triton"})]
    for family in ("mma", "wgmma"):
        offered = [v for v in ptx_kernels.variants() if v.family == family and v.offered_on(arch)]
        if not offered:
            continue
        bf16 = [v for v in offered if "bf16" in v.dtypes]
        assert bf16, f"no {family} variant takes bf16 (records: {[v.name for v in offered]})"
        best = "mma_stmatrix" if family == "mma" else "wgmma_persistent"
        name = best if any(v.name == best for v in bf16) else bf16[-1].name
        fams.append((name, {"package": "ptx", "kernel": name}))
    return fams


@pytest.mark.gpu
def test_bf16_transformer_block_logits_match_torch():
    """Logits of the routed block against the same block on torch in bf16, both measured against a float64 run:
    the routed error stays within 2x torch's own plus 2 bf16 units of the logits' scale, and the two bf16 runs
    agree within 4 units."""
    torch.manual_seed(0)
    ref_model = Block().cuda()
    tokens = torch.randint(0, 1000, (3, 45), device="cuda")  # M = 135 tokens: no tile multiple
    with torch.no_grad():
        exact = ref_model.double()(tokens)
        ref_model = ref_model.to(torch.bfloat16)
        torch_bf16 = ref_model(tokens).double()
    scale = float(exact.abs().max())
    unit = 2.0**-8 * scale
    err_torch = float((torch_bf16 - exact).abs().max())
    for label, how in _families():
        model = Block().cuda().to(torch.bfloat16)
        model.load_state_dict(ref_model.state_dict())
        assert route_linears(model, **how) == 5
        with torch.no_grad():
            ours = model(tokens)
        assert ours.dtype == torch.bfloat16 and torch.isfinite(ours).all(), label
        err = float((ours.double() - exact).abs().max())
        gap = float((ours.double() - torch_bf16).abs().max())
        print(f"{label}: max |err| {err:.4g} (torch bf16 {err_torch:.4g}), vs torch {gap:.4g}, unit {unit:.4g}")
        assert err <= 2 * err_torch + 2 * unit, (label, err, err_torch, unit)
        assert gap <= 4 * unit, (label, gap, unit)
        assert not math.isnan(err)
