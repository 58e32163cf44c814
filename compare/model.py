"""`python -m compare model`: a decoder-only transformer end to end with every nn.Linear routed through one of
this project's kernels (`compare.nn.route_linears`), next to the same model on torch: does routing a model help?

The model is Hugging Face transformers' Llama built from a config (random weights, nothing downloaded) when
transformers is importable, else `Llama` below, a Llama-style decoder in plain torch (RMSNorm, rotary positions,
grouped-query attention through scaled_dot_product_attention, SwiGLU MLP, a static KV cache). The default size is
issue 39's: a Mistral-7B-shaped stack cut to 4 layers (hidden 4096, MLP 14336, 32 query heads over 8 KV heads,
vocab 32000), batch 8, a 512-token prompt.

Modes (`MODES`): prefill (the prompt, every position's logits, the KV cache written), decode (one token per
sequence against the cache), decode under a CUDA graph (the decode step captured once on static buffers and
replayed), both under torch.compile, and one training step (forward and loss.backward() through the operators'
autograd). Every candidate (torch, then each entry) runs the same weights, tokens and cache contents.

Checks first, per mode and dtype: the logits of torch's model and of each routed one against the same model in
fp32 (TF32 off), as max |logits - fp32| / max |fp32|. A routed model passes when its error is at most twice torch's
plus two units of the dtype (2^-11 fp16, 2^-8 bf16): both run the same dtype with fp32 accumulation, so the kernels
differ from cuBLAS in summation order only and their error is of torch's size; the units absorb a torch error that
happens to be tiny (the rule of tests/test_bf16_model.py). The training step is checked the same way on the loss
and on all gradients together (norm-wise). A mode that fails its check is not timed.

Timing: each mode's candidates interleaved over rounds (clock and power drift hit all alike), CUDA events around
each forward of back-to-back forwards (what a model pays, host gaps inside a forward included) after warm-up, the
median; beside it the host clock's wall time per forward (`hgemm_common.timing.wall_us`). No L2 flush: a forward
streams the model's weights (gigabytes) through L2 by itself.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import csv
import json
import math
import statistics
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from hgemm_common.errors import HgemmValueError
from hgemm_common.timing import wall_us

from .nn import route_linears
from .reference import _full_fp32, dtype_unit

TORCH_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


@dataclass(frozen=True)
class ModelSize:
    layers: int
    hidden: int
    intermediate: int  # the MLP's width
    vocab: int
    heads: int  # query heads
    kv_heads: int  # key/value heads (grouped-query attention when fewer than heads)
    batch: int
    prefill: int  # prompt tokens per sequence; decode runs one more token at this position

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def max_len(self) -> int:
        """Cache length: the prompt and the decoded token."""
        return self.prefill + 1

    def linear_shapes(self) -> list[tuple[int, int, int]]:
        """(M, N, K) of every nn.Linear's GEMM in prefill (M: batch x prompt tokens) and decode (M: batch): the
        attention projections (q and o, k and v), the MLP's (gate and up, down) and the LM head."""
        kv = self.kv_heads * self.head_dim
        nk = dict.fromkeys([(self.hidden, self.hidden), (kv, self.hidden), (self.intermediate, self.hidden),
                            (self.hidden, self.intermediate), (self.vocab, self.hidden)])
        return [(m, n, k) for m in (self.batch * self.prefill, self.batch) for n, k in nk]

    def label(self) -> str:
        return (f"{self.layers}L h{self.hidden} mlp{self.intermediate} v{self.vocab} {self.heads}/{self.kv_heads}h "
                f"b{self.batch} t{self.prefill}")

    def check(self) -> None:
        if min(asdict(self).values()) < 1:
            raise HgemmValueError(f"model sizes must be positive: {self.label()}")
        if self.hidden % self.heads or self.heads % self.kv_heads or self.head_dim % 2:
            raise HgemmValueError(f"hidden {self.hidden} must split into {self.heads} heads of an even width, and the "
                                  f"heads into {self.kv_heads} KV groups")


SIZES = {
    "issue": ModelSize(layers=4, hidden=4096, intermediate=14336, vocab=32000, heads=32, kv_heads=8, batch=8,
                       prefill=512),
    "small": ModelSize(layers=2, hidden=1024, intermediate=3584, vocab=8192, heads=8, kv_heads=2, batch=4,
                       prefill=128),
    # the CPU check under the Triton interpreter: odd widths and an odd token count (no tile multiple)
    "tiny": ModelSize(layers=2, hidden=64, intermediate=88, vocab=200, heads=4, kv_heads=2, batch=2, prefill=7),
}
MODES = ("prefill", "decode", "decode_graph", "train", "prefill_compile", "decode_compile")
# torch.compile builds a graph per candidate, mode and dtype (tens of seconds each at the issue's size): opt-in.
DEFAULT_MODES = MODES[:4]
QUICK_MODES = ("prefill", "decode", "decode_graph")
GPU_ONLY_MODES = ("decode_graph", "prefill_compile", "decode_compile")
ROUTED_ERR_FACTOR, ROUTED_ERR_UNITS = 2.0, 2.0  # routed error <= 2 x torch's + 2 dtype units (module docstring)


# ---------------------------------------------------------------------------------------------------------------
# The built-in model: Llama's structure and module names (q_proj ... lm_head), in plain torch.
# ---------------------------------------------------------------------------------------------------------------

class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(dim)), eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class KVCache:
    """Static keys and values, (batch, kv_heads, max_len, head_dim) per layer: fixed addresses, so a CUDA graph of
    the decode step replays against them."""

    def __init__(self, size: ModelSize, dtype: torch.dtype, device):
        shape = (size.batch, size.kv_heads, size.max_len, size.head_dim)
        self.k = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(size.layers)]
        self.v = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(size.layers)]


class Attention(nn.Module):
    def __init__(self, size: ModelSize):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = size.heads, size.kv_heads, size.head_dim
        self.q_proj = nn.Linear(size.hidden, size.heads * size.head_dim, bias=False)
        self.k_proj = nn.Linear(size.hidden, size.kv_heads * size.head_dim, bias=False)
        self.v_proj = nn.Linear(size.hidden, size.kv_heads * size.head_dim, bias=False)
        self.o_proj = nn.Linear(size.heads * size.head_dim, size.hidden, bias=False)

    def forward(self, x, cos, sin, positions, cache_kv=None, decode: bool = False):
        bsz, seq, _ = x.shape
        q = self.q_proj(x).view(bsz, seq, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(bsz, seq, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(bsz, seq, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        group = self.heads // self.kv_heads
        if cache_kv is not None:
            cache_kv[0].index_copy_(2, positions, k)
            cache_kv[1].index_copy_(2, positions, v)
        if decode:
            # One query per sequence: the `group` query heads of a KV head become `group` query rows against that
            # head's cached keys (no copy of the cache per query head); positions past the token are masked.
            keys, values = cache_kv
            mask = (torch.arange(keys.shape[2], device=x.device) <= positions)[None, :]  # (query rows, keys)
            out = F.scaled_dot_product_attention(q.reshape(bsz, self.kv_heads, group, self.head_dim), keys, values,
                                                 attn_mask=mask)
        else:  # the prompt from position 0: causal over its own keys
            if group > 1:
                k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(out.reshape(bsz, self.heads, seq, self.head_dim).transpose(1, 2).reshape(bsz, seq, -1))


class MLP(nn.Module):
    def __init__(self, size: ModelSize):
        super().__init__()
        self.gate_proj = nn.Linear(size.hidden, size.intermediate, bias=False)
        self.up_proj = nn.Linear(size.hidden, size.intermediate, bias=False)
        self.down_proj = nn.Linear(size.intermediate, size.hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, size: ModelSize):
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(size.hidden), RMSNorm(size.hidden)
        self.self_attn, self.mlp = Attention(size), MLP(size)

    def forward(self, x, cos, sin, positions, cache_kv=None, decode=False):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, positions, cache_kv, decode)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    """A Llama-style decoder: embedding, pre-norm blocks (rotary grouped-query attention, SwiGLU MLP), final
    RMSNorm, LM head. forward(tokens) runs the prompt from position 0 (causal, every position's logits);
    with a `KVCache` it also writes the cache, and with `pos` (a 1-element long tensor: the position, on the
    device, so that a captured graph replays it) it decodes one token per sequence against the cache."""

    def __init__(self, size: ModelSize, rope_theta: float = 10000.0):
        super().__init__()
        size.check()
        self.size = size
        self.embed_tokens = nn.Embedding(size.vocab, size.hidden)
        self.layers = nn.ModuleList(Block(size) for _ in range(size.layers))
        self.norm = RMSNorm(size.hidden)
        self.lm_head = nn.Linear(size.hidden, size.vocab, bias=False)
        inv_freq = 1.0 / rope_theta ** (torch.arange(0, size.head_dim, 2, dtype=torch.float32) / size.head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, tokens: torch.Tensor, cache: KVCache | None = None, pos: torch.Tensor | None = None):
        decode = pos is not None
        if decode and (cache is None or tokens.shape[1] != 1):
            raise HgemmValueError("Llama: decoding (pos given) takes one token per sequence and a KVCache")
        x = self.embed_tokens(tokens)
        positions = pos if decode else torch.arange(tokens.shape[1], device=tokens.device)
        freqs = positions.float()[:, None] * self.inv_freq.float()[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, positions, None if cache is None else (cache.k[i], cache.v[i]), decode)
        return self.lm_head(self.norm(x))


# ---------------------------------------------------------------------------------------------------------------
# One interface over both models: prefill, decode, plain logits (training).
# ---------------------------------------------------------------------------------------------------------------

def hf_available() -> bool:
    try:
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def build(size: ModelSize, impl: str, device, seed: int = 0) -> nn.Module:
    """The fp32 model with random weights: "hf" (transformers' LlamaForCausalLM from a LlamaConfig) or "builtin"."""
    size.check()
    torch.manual_seed(seed)
    with torch.device(device):
        if impl == "builtin":
            return Llama(size).eval()
        from transformers import LlamaConfig, LlamaForCausalLM

        config = LlamaConfig(vocab_size=size.vocab, hidden_size=size.hidden, intermediate_size=size.intermediate,
                             num_hidden_layers=size.layers, num_attention_heads=size.heads,
                             num_key_value_heads=size.kv_heads, max_position_embeddings=max(2048, size.max_len),
                             tie_word_embeddings=False, attn_implementation="sdpa")
        return LlamaForCausalLM(config).eval()


class Runner:
    """A model (fp32 reference, torch or routed) with its own static KV cache."""

    def __init__(self, model: nn.Module, size: ModelSize, device):
        self.model, self.size = model, size
        self.hf = not isinstance(model, Llama)
        dtype = next(model.parameters()).dtype
        if self.hf:
            from transformers import StaticCache

            self.cache = StaticCache(config=model.config, max_cache_len=size.max_len)
            self.start = torch.zeros(1, dtype=torch.long, device=device)
        else:
            self.cache = KVCache(size, dtype, device)

    def _seek(self, pos: torch.Tensor) -> None:
        """Point transformers' StaticCache at position `pos`: each layer counts the tokens written so far in a device
        tensor, writes the next ones there and takes the positions from it; setting it back, on the device, lets
        the prompt and the decode step repeat at the same positions, and a captured graph replay them."""
        for layer in self.cache.layers:
            layer.cumulative_length.copy_(pos.reshape(layer.cumulative_length.shape))

    def prefill(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits of every prompt position; the cache holds the prompt afterwards."""
        if self.hf:
            self._seek(self.start)
            return self.model(input_ids=tokens, past_key_values=self.cache, use_cache=True).logits
        return self.model(tokens, self.cache)

    def decode(self, token: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """Logits of one token per sequence (token: (batch, 1)) at position pos (a 1-element tensor)."""
        if self.hf:
            self._seek(pos)
            return self.model(input_ids=token, past_key_values=self.cache, use_cache=True).logits
        return self.model(token, self.cache, pos)

    def logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """Every position's logits, no cache (the training step's forward)."""
        if self.hf:
            return self.model(input_ids=tokens, use_cache=False).logits
        return self.model(tokens)


def loss_of(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy summed over the tokens: a mean over batch x tokens would scale each logit's gradient by
    1 / (batch x tokens), below fp16's smallest subnormal at the issue's size (what a GradScaler multiplies away);
    the sum leaves it at p - onehot."""
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum")


def train_step(runner: Runner, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    runner.model.zero_grad(set_to_none=True)
    loss = loss_of(runner.logits(tokens), targets)
    loss.backward()
    return loss.detach()


# ---------------------------------------------------------------------------------------------------------------
# Entries and checks.
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Entry:
    """What a candidate's nn.Linear layers run: "torch" (nn.Linear itself), "triton" (`triton_kernels.hgemm`'s
    automatic choice) or a hand-written kernel (`ptx_kernels.hgemm(..., kernel=name)`)."""
    name: str

    @property
    def package(self) -> str:
        return self.name if self.name in ("torch", "triton") else "ptx"

    def make(self, torch_model: nn.Module, dtype: torch.dtype) -> nn.Module:
        """The candidate: torch's model itself, or a copy with every nn.Linear routed."""
        if self.package == "torch":
            return torch_model
        model = copy.deepcopy(torch_model)
        kwargs = {"kernel": self.name} if self.package == "ptx" else {}
        if route_linears(model, package=self.package, dtype=dtype, **kwargs) == 0:
            raise HgemmValueError("the model has no nn.Linear to route")
        return model


def _arch() -> int | None:
    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    return major * 10 + minor


def default_entries(arch: int | None) -> list[str]:
    """One entry per kernel family that runs here: Triton's automatic choice, and on a GPU the best mma.sync
    variant and (sm_90) the Hopper wgmma one."""
    if arch is None:
        return ["triton"]
    import ptx_kernels

    names = {v.name for v in ptx_kernels.variants() if v.offered_on(arch)}
    return ["triton"] + [n for n in ("mma_stmatrix", "wgmma_persistent") if n in names]


def resolve_entries(names: list[str], dtype: str, arch: int | None) -> list[Entry]:
    """Entries for these names, in order; a name that is not "triton" nor a dense PTX variant taking `dtype` on
    this device raises ValueError."""
    out = []
    for name in dict.fromkeys(n for n in names if n != "torch"):  # torch runs in every comparison anyway
        if name != "triton":
            if arch is None:
                raise HgemmValueError(f"kernel {name!r} is a hand-written kernel, which needs a CUDA GPU; here only "
                                      "'triton' (under the interpreter) runs")
            import ptx_kernels

            rec = {v.name: v for v in ptx_kernels.variants()}.get(name)
            if rec is None:
                raise HgemmValueError(f"unknown kernel {name!r}: 'triton' or one of "
                                      f"{', '.join(v.name for v in ptx_kernels.variants())}")
            if not rec.supports(dtype=dtype, arch=arch):
                raise HgemmValueError(f"kernel {name!r} does not run {dtype} on sm_{arch} (takes "
                                      f"{'/'.join(rec.dtypes)}, sm_{rec.min_arch}+)")
        out.append(Entry(name))
    return out


def rel_err(x: torch.Tensor, ref: torch.Tensor) -> float:
    """max |x - ref| / max |ref| (x in any dtype, ref fp32)."""
    return float((x.float() - ref).abs().max() / ref.abs().max())


def grads_err(model: nn.Module, ref_grads: dict[str, torch.Tensor]) -> float:
    """||g - g_ref|| / ||g_ref|| over every parameter's gradient together (parameter names as in the reference:
    routing keeps them)."""
    num = den = 0.0
    for name, p in model.named_parameters():
        g_ref = ref_grads[name]
        g = torch.zeros_like(g_ref) if p.grad is None else p.grad.float()
        num += float((g - g_ref).pow(2).sum())
        den += float(g_ref.pow(2).sum())
    return math.sqrt(num / den) if den else float("inf")


def bound_for(err_torch: float, dtype: str) -> float:
    return ROUTED_ERR_FACTOR * err_torch + ROUTED_ERR_UNITS * dtype_unit(TORCH_DTYPES[dtype])


@dataclass
class ModelRow:
    model: str  # "hf-llama" or "builtin-llama"
    size: str
    dtype: str
    mode: str
    entry: str
    status: str  # "ok", "checked" (no timing here), "failed check", "error", "skipped"
    detail: str = ""
    err: float | None = None  # max |logits - fp32| / max |fp32| (train: loss and gradients, the larger)
    err_torch: float | None = None
    bound: float | None = None
    tokens: int = 0  # tokens per forward (train: per step)
    ms: float | None = None  # median device-clock ms per forward (CUDA events)
    wall_ms: float | None = None  # host-clock ms per forward, back to back
    samples: int = 0
    tokens_per_s: float | None = None
    ratio_to_torch: float | None = None  # torch's ms / this one's (> 1: faster)
    wall_ratio_to_torch: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------------------------------------------------
# Timing.
# ---------------------------------------------------------------------------------------------------------------

def event_ms(fn, calls: int) -> list[float]:
    """Device-clock ms of each of `calls` back-to-back calls (CUDA events around each; the host does not wait
    between calls)."""
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def time_interleaved(fns: dict[str, callable], rounds: int, budget_ms: float) -> dict[str, tuple[float, float, int]]:
    """{name: (median event ms, median wall ms, samples)}: warm-up, then `rounds` rounds in which every candidate
    runs its calls in turn; `budget_ms` is each candidate's timed time over all rounds."""
    plan = {}
    for name, fn in fns.items():
        for _ in range(3):
            fn()
        est = wall_us(fn, 3) * 1e-3
        plan[name] = max(2, min(200, int(budget_ms / rounds / max(est, 1e-3))))
    samples = {name: [] for name in fns}
    walls = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            samples[name] += event_ms(fn, plan[name])
        for name, fn in fns.items():
            walls[name].append(wall_us(fn, max(2, plan[name] // 2)) * 1e-3)
    return {n: (statistics.median(samples[n]), statistics.median(walls[n]), len(samples[n])) for n in fns}


# ---------------------------------------------------------------------------------------------------------------
# The run.
# ---------------------------------------------------------------------------------------------------------------

def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:200]


@dataclass
class _Candidate:
    entry: Entry
    runner: Runner
    calls: dict = field(default_factory=dict)  # mode -> callable to time
    errs: dict = field(default_factory=dict)  # mode -> error vs fp32
    failed: dict = field(default_factory=dict)  # mode -> one-line reason it could not run


def _references(size, ref_runner, tokens, token, pos, targets, modes) -> dict:
    """The fp32 model's prefill and decode logits, loss and gradients (TF32 off on the GPU)."""
    out = {}
    with _full_fp32():
        if any(m in modes for m in ("prefill", "prefill_compile", "decode", "decode_graph", "decode_compile")):
            with torch.no_grad():
                out["prefill"] = ref_runner.prefill(tokens).float()
                out["decode"] = ref_runner.decode(token, pos).float()
        if "train" in modes:
            out["loss"] = train_step(ref_runner, tokens, targets)
            out["grads"] = {n: p.grad.detach().clone() for n, p in ref_runner.model.named_parameters()}
            ref_runner.model.zero_grad(set_to_none=True)
    return out


def _compile_calls(cand: _Candidate, tokens, token, pos):
    """torch.compile'd prefill and decode of one candidate (each compiles on its first call)."""
    import torch._dynamo

    # Every candidate is another model instance and dtype: more recompilations of one forward than the default
    # limit, past which dynamo would fall back to eager silently.
    for knob in ("cache_size_limit", "recompile_limit"):
        if hasattr(torch._dynamo.config, knob):
            setattr(torch._dynamo.config, knob, max(getattr(torch._dynamo.config, knob), 256))
    prefill, decode = torch.compile(cand.runner.prefill), torch.compile(cand.runner.decode)
    return {"prefill_compile": lambda: prefill(tokens), "decode_compile": lambda: decode(token, pos)}


def _graph_call(runner: Runner, token, pos):
    """The decode step captured in a CUDA graph on static buffers (token, pos, the cache): (replay, logits)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture stream, as torch.cuda.graphs asks
        for _ in range(2):
            runner.decode(token, pos)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        logits = runner.decode(token, pos)
    graph.replay()
    return graph.replay, logits


def run_dtype(base: nn.Module, size: ModelSize, dtype: str, entries: list[Entry], modes: tuple[str, ...], *,
              gpu: bool, refs: dict, tokens, token, pos, targets, rounds: int = 5, budget_ms: float = 300.0,
              log=lambda line: None) -> list[ModelRow]:
    """Check, then (GPU) time, torch's model and every entry's routed copy in one dtype."""
    device = tokens.device
    model_name = "builtin-llama" if isinstance(base, Llama) else "hf-llama"
    torch_model = copy.deepcopy(base).to(TORCH_DTYPES[dtype])
    cands: list[_Candidate] = []
    for entry in [Entry("torch")] + entries:
        try:
            cands.append(_Candidate(entry, Runner(entry.make(torch_model, TORCH_DTYPES[dtype]), size, device)))
        except Exception as e:  # noqa: BLE001  a kernel that does not build or route is reported, not fatal
            c = _Candidate(entry, None)
            c.failed = {m: _one_line(e) for m in modes}
            cands.append(c)
    for c in cands:
        if c.runner is None:
            continue
        log(f"model {dtype}: checking {c.entry.name}")
        r = c.runner
        for mode in modes:
            try:
                with torch.no_grad():
                    if mode == "prefill":
                        c.errs[mode] = rel_err(r.prefill(tokens), refs["prefill"])
                        c.calls[mode] = lambda r=r: r.prefill(tokens)
                    elif mode == "decode":
                        r.prefill(tokens)
                        c.errs[mode] = rel_err(r.decode(token, pos), refs["decode"])
                        c.calls[mode] = lambda r=r: r.decode(token, pos)
                    elif mode in GPU_ONLY_MODES and not gpu:
                        c.failed[mode] = "needs a CUDA GPU"
                    elif mode == "decode_graph":
                        r.prefill(tokens)
                        replay, logits = _graph_call(r, token, pos)
                        torch.cuda.synchronize()
                        c.errs[mode] = rel_err(logits, refs["decode"])
                        c.calls[mode] = replay
                    elif mode in ("prefill_compile", "decode_compile"):
                        calls = _compile_calls(c, tokens, token, pos)
                        r.prefill(tokens)
                        out = calls[mode]()
                        c.errs[mode] = rel_err(out, refs["prefill" if mode == "prefill_compile" else "decode"])
                        c.calls[mode] = calls[mode]
                if mode == "train":
                    loss = train_step(r, tokens, targets)
                    c.errs[mode] = max(abs(float(loss) - float(refs["loss"])) / abs(float(refs["loss"])),
                                       grads_err(r.model, refs["grads"]))
                    r.model.zero_grad(set_to_none=True)
                    c.calls[mode] = lambda r=r: train_step(r, tokens, targets)
            except Exception as e:  # noqa: BLE001  one mode that fails (capture, compile) is marked, not fatal
                c.failed[mode] = _one_line(e)
                c.calls.pop(mode, None)
                c.errs.pop(mode, None)
    rows = []
    for mode in modes:
        n_tokens = size.batch * (1 if mode.startswith("decode") else size.prefill)
        err_torch = cands[0].errs.get(mode)
        bound = bound_for(err_torch, dtype) if err_torch is not None else None
        live = {}
        mode_rows = []
        for c in cands:
            row = ModelRow(model_name, size.label(), dtype, mode, c.entry.name, "ok", tokens=n_tokens,
                           err=c.errs.get(mode), err_torch=err_torch, bound=bound)
            mode_rows.append(row)
            if mode in c.failed:
                row.status = "skipped" if c.failed[mode] == "needs a CUDA GPU" else "error"
                row.detail = c.failed[mode]
            elif bound is None:
                row.status, row.detail = "skipped", "torch's own run of this mode failed: nothing to check against"
            elif c.entry.name != "torch" and not row.err <= bound:
                row.status = "failed check"
                row.detail = f"error {row.err:.3g} > bound {bound:.3g} (2 x torch's {err_torch:.3g} + 2 units)"
            elif not gpu:
                row.status, row.detail = "checked", "timing needs a CUDA GPU"
            else:
                live[c.entry.name] = (row, c.calls[mode])
        if gpu and "torch" in live:
            log(f"model {dtype}: timing {mode} ({', '.join(live)})")
            try:
                with torch.no_grad() if mode != "train" else contextlib.nullcontext():
                    timed = time_interleaved({n: fn for n, (_, fn) in live.items()}, rounds, budget_ms)
            except Exception as e:  # noqa: BLE001
                for row, _ in live.values():
                    row.status, row.detail = "error", _one_line(e)
                timed = {}
            base_ms, base_wall = timed.get("torch", (None, None, 0))[:2]
            for name, (ms, wall, n) in timed.items():
                row = live[name][0]
                row.ms, row.wall_ms, row.samples = ms, wall, n
                row.tokens_per_s = n_tokens / (ms * 1e-3)
                row.ratio_to_torch, row.wall_ratio_to_torch = base_ms / ms, base_wall / wall
        rows += mode_rows
        if mode == "train":
            for c in cands:
                if c.runner is not None:
                    c.runner.model.zero_grad(set_to_none=True)
    return rows


def run(size: ModelSize, *, impl: str = "auto", dtypes=("fp16", "bf16"), entries: list[str] | None = None,
        modes=DEFAULT_MODES, gpu: bool, rounds: int = 5, budget_ms: float = 300.0, seed: int = 0,
        device=None, log=lambda line: None) -> tuple[list[ModelRow], dict]:
    """Every (dtype, mode, entry) row and the run's facts ({"model", "size", "entries", ...}). impl "auto": HF
    transformers' Llama when it is importable, else the built-in one. Without a GPU: checks only (the Triton
    kernels under the interpreter). device: where the models live (default: cuda with a GPU, else the CPU)."""
    if impl == "auto":
        impl = "hf" if hf_available() else "builtin"
    if impl == "hf" and not hf_available():
        raise HgemmValueError("--impl hf needs the transformers package, which is not installed")
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise HgemmValueError(f"unknown mode {bad[0]!r}: modes are {', '.join(MODES)}")
    arch = _arch() if gpu else None
    names = entries or default_entries(arch)
    resolved = {d: resolve_entries(names, d, arch) for d in dtypes}
    device = device or ("cuda" if gpu else "cpu")
    base = build(size, impl, device, seed)
    gen = torch.Generator().manual_seed(seed + 1)
    tokens = torch.randint(0, size.vocab, (size.batch, size.prefill), generator=gen).to(device)
    token = torch.randint(0, size.vocab, (size.batch, 1), generator=gen).to(device)
    targets = tokens.roll(-1, dims=1)
    pos = torch.tensor([size.prefill], device=device)
    log(f"model: {impl} Llama {size.label()}, fp32 reference")
    refs = _references(size, Runner(base, size, device), tokens, token, pos, targets, modes)
    rows = []
    for d in dtypes:
        rows += run_dtype(base, size, d, resolved[d], tuple(modes), gpu=gpu, refs=refs, tokens=tokens, token=token,
                          pos=pos, targets=targets, rounds=rounds, budget_ms=budget_ms, log=log)
        if gpu:
            torch.cuda.empty_cache()
    facts = {"model": f"{impl}-llama", "size": asdict(size), "size_label": size.label(), "entries": names,
             "modes": list(modes), "dtypes": list(dtypes), "rounds": rounds, "budget_ms": budget_ms,
             "bound": f"routed error <= {ROUTED_ERR_FACTOR:g} x torch's + {ROUTED_ERR_UNITS:g} units of the dtype",
             "error_metric": "max |logits - fp32 model| / max |fp32 logits|; train: max(loss relative error, "
                             "gradients' norm-wise relative error)"}
    return rows, facts


# ---------------------------------------------------------------------------------------------------------------
# Output.
# ---------------------------------------------------------------------------------------------------------------

def _f(x, fmt: str, width: int) -> str:
    return format(x, fmt) if x is not None else f"{'-':>{width}}"


def format_table(rows: list[ModelRow]) -> str:
    lines = [f"{'mode':<16} {'dtype':<5} {'entry':<18} {'ms':>9} {'x torch':>8} {'tokens/s':>10} {'wall ms':>9} "
             f"{'wall x':>7} {'error':>9} {'bound':>9}  status", "-" * 120]
    for r in rows:
        st = r.status if not r.detail else f"{r.status}: {r.detail[:60]}"
        lines.append(f"{r.mode:<16} {r.dtype:<5} {r.entry:<18} {_f(r.ms, '9.3f', 9)} "
                     f"{_f(r.ratio_to_torch, '8.3f', 8)} {_f(r.tokens_per_s, '10.0f', 10)} {_f(r.wall_ms, '9.3f', 9)} "
                     f"{_f(r.wall_ratio_to_torch, '7.3f', 7)} {_f(r.err, '9.2e', 9)} "
                     f"{_f(r.bound if r.entry != 'torch' else None, '9.2e', 9)}  {st}")
    return "\n".join(lines)


def markdown(rows: list[ModelRow], facts: dict) -> str:
    """A summary for the main job's report: the model, the check's rule and one line per (mode, dtype, entry)."""
    head = ["mode", "dtype", "entry", "ms / forward", "x torch", "tokens/s", "wall x torch", "logits error (bound)",
            "status"]
    lines = [f"{facts['model']} ({facts['size_label']}), every nn.Linear routed; random weights. Check: "
             f"{facts['error_metric']}; {facts['bound']}. Timing: median of CUDA-event times per forward over "
             f"{facts['rounds']} interleaved rounds; x torch > 1 is faster.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        err = "-" if r.err is None else f"{r.err:.2e}" + (f" ({r.bound:.2e})" if r.bound and r.entry != "torch" else "")
        lines.append("| " + " | ".join([
            r.mode, r.dtype, f"`{r.entry}`", _f(r.ms, ".3f", 1), _f(r.ratio_to_torch, ".3f", 1),
            _f(r.tokens_per_s, ".0f", 1), _f(r.wall_ratio_to_torch, ".3f", 1), err,
            r.status + (f": {r.detail[:80]}" if r.detail else "")]) + " |")
    return "\n".join(lines)


def plot(rows: list[ModelRow], facts: dict, path: Path) -> Path | None:
    """Bars of each entry's ratio to torch per mode, each labelled with its value, a panel per dtype, a line at 1."""
    timed = [r for r in rows if r.ratio_to_torch and r.entry != "torch"]
    if not timed:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dtypes = list(dict.fromkeys(r.dtype for r in timed))
    modes = [m for m in MODES if any(r.mode == m for r in timed)]
    entries = list(dict.fromkeys(r.entry for r in timed))
    fig, axes = plt.subplots(1, len(dtypes), figsize=(1.6 + 1.5 * len(modes) * len(dtypes), 4.2), squeeze=False)
    width = 0.8 / len(entries)
    for ax, d in zip(axes[0], dtypes):
        for j, e in enumerate(entries):
            got = {r.mode: r.ratio_to_torch for r in timed if r.dtype == d and r.entry == e}
            xs = [i + (j - (len(entries) - 1) / 2) * width for i, m in enumerate(modes) if m in got]
            bars = ax.bar(xs, [got[m] for m in modes if m in got], width, label=e)
            # the value on each bar: the gaps that matter are percents, which bar heights alone hide
            ax.bar_label(bars, fmt="%.3f", label_type="center", rotation=90, fontsize=8, color="white")
        ax.axhline(1.0, color="black", linestyle=":", linewidth=1)
        ax.set_xticks(range(len(modes)), modes, rotation=20)
        ax.set_ylabel("x torch (ms per forward, > 1 faster)")
        ax.set_title(f"{facts['model']} {facts['size_label']}\n{d}", fontsize=9)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=len(entries))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write(out: Path, rows: list[ModelRow], facts: dict, env: dict) -> list[Path]:
    """model.json (environment, facts, rows), model.csv and model.png (when anything was timed) in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    dicts = [r.as_dict() for r in rows]
    (out / "model.json").write_text(json.dumps({"environment": env, "run": facts, "rows": dicts}, indent=1))
    with open(out / "model.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(ModelRow.__dataclass_fields__))
        w.writeheader()
        w.writerows(dicts)
    png = plot(rows, facts, out / "model.png")
    return [out / "model.json", out / "model.csv"] + ([png] if png else [])


def run_model(out: Path | None = None, *, gpu: bool, quick: bool = True, log=lambda line: None,
              **kwargs) -> tuple[list[ModelRow], str]:
    """The main job's model section: (rows, markdown). quick: the issue's size, fp16, prefill, eager decode and
    decode under a CUDA graph, one entry per kernel family, a short timing budget. Without a GPU: the tiny model's
    check under the interpreter. Files (model.json/csv/png) go to `out` when given."""
    from .envinfo import environment

    size = kwargs.pop("size", SIZES["issue"] if gpu else SIZES["tiny"])
    if quick:
        kwargs = {"dtypes": ("fp16",), "modes": QUICK_MODES, "rounds": 3, "budget_ms": 100.0, **kwargs}
    rows, facts = run(size, gpu=gpu, log=log, **kwargs)
    if out is not None:
        write(Path(out), rows, facts, environment())
    return rows, markdown(rows, facts)


# ---------------------------------------------------------------------------------------------------------------
# The subcommand (compare/__main__.py adds the parser and calls `cli`).
# ---------------------------------------------------------------------------------------------------------------

SIZE_FLAGS = ("layers", "hidden", "intermediate", "vocab", "heads", "kv_heads", "batch", "prefill")


class _Once(argparse.Action):
    """An option with an older spelling (--kernels, --entries): either one, once; both is a usage error."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, self.dest) is not None:
            parser.error(f"{'/'.join(self.option_strings)}: give one of the two names, once")
        setattr(namespace, self.dest, values)


def add_arguments(p) -> None:
    p.add_argument("--size", default="issue", choices=sorted(SIZES),
                   help="issue: 4 layers, hidden 4096, MLP 14336, vocab 32000, 32/8 heads, batch 8, 512-token prompt "
                        "(default); small: a quick run; tiny: the CPU check's (the CPU always runs tiny)")
    for name in SIZE_FLAGS:
        p.add_argument(f"--{name.replace('_', '-')}", type=int, help=f"override the size's {name}")
    p.add_argument("--impl", default="auto", choices=["auto", "hf", "builtin"],
                   help="hf: transformers' LlamaForCausalLM from a config; builtin: the plain-torch Llama; auto: hf "
                        "when transformers is installed")
    p.add_argument("--kernels", "--entries", dest="kernels", action=_Once,
                   help="comma list: triton (Triton's automatic choice) and hand-written kernels (default: one per "
                        "kernel family that runs here); --entries is an older name for it")
    p.add_argument("--dtype", default="fp16,bf16", help="fp16, bf16 or both (comma list)")
    p.add_argument("--modes", default=",".join(DEFAULT_MODES),
                   help=f"comma list of {', '.join(MODES)}, or 'all' (default: all but the torch.compile ones)")
    p.add_argument("--quick", action="store_true", help="the main job's short version: fp16, "
                   f"{', '.join(QUICK_MODES)}, a short budget")
    p.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    p.add_argument("--budget-ms", type=float, default=300.0, help="timed ms per candidate and mode")
    p.add_argument("--out", default="results/model", help="folder for model.json, model.csv and model.png")


def cli(args, *, gpu: bool, log=print) -> int:
    """`python -m compare model`: 0 when every check passed, 1 when one failed or a run raised, 2 on a usage
    error."""
    from .envinfo import environment

    def usage(msg: str) -> int:
        print(f"python -m compare model: error: {msg}", file=__import__("sys").stderr)
        return 2

    size = replace(SIZES[args.size], **{n: getattr(args, n) for n in SIZE_FLAGS if getattr(args, n) is not None})
    dtypes = tuple(dict.fromkeys(args.dtype.split(",")))
    if any(d not in TORCH_DTYPES for d in dtypes):
        return usage(f"--dtype takes fp16, bf16 or fp16,bf16, got {args.dtype!r}")
    modes = MODES if args.modes == "all" else tuple(dict.fromkeys(args.modes.split(",")))
    kwargs = dict(impl=args.impl, dtypes=dtypes, modes=modes, rounds=args.rounds, budget_ms=args.budget_ms,
                  entries=args.kernels.split(",") if args.kernels else None)
    if args.quick:
        kwargs.update(dtypes=("fp16",), modes=QUICK_MODES, rounds=3, budget_ms=100.0)
    try:
        size.check()
    except ValueError as e:
        return usage(str(e))
    if not gpu:
        if size != SIZES["tiny"]:
            log(f"no CUDA GPU: checking the tiny model ({SIZES['tiny'].label()}) instead of {size.label()}")
        size = SIZES["tiny"]
        log("no CUDA GPU: the Triton kernels run under the interpreter (TRITON_INTERPRET=1); checks only, timing, "
            "CUDA graphs, torch.compile and the hand-written kernels need a GPU.")
    try:
        rows, facts = run(size, gpu=gpu, log=log, **kwargs)
    except ValueError as e:
        return usage(str(e))
    print(format_table(rows))
    files = write(Path(args.out), rows, facts, environment())
    print(f"wrote {', '.join(str(f) for f in files)}")
    failed = [r for r in rows if r.status == "failed check"]
    if failed:
        print(f"FAILED: {len(failed)} checks ({', '.join(f'{r.mode} {r.dtype} {r.entry}' for r in failed)})")
    raised = errors(rows)
    if raised:
        print(f"FAILED: {len(raised)} runs raised ({'; '.join(raised)})")
    return 1 if failed or raised else 0


def errors(rows: list[ModelRow]) -> list[str]:
    """"mode dtype entry: the error" of each row whose run raised (a compile, a capture, the timing): a failure of
    the run, as a failed check is, never only a line in the table."""
    return [f"{r.mode} {r.dtype} {r.entry}: {r.detail}" for r in rows if r.status == "error"]
