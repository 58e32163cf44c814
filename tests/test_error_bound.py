"""The random-input check can fail (TESTING.md, issue 46): the mutation test.

`compare.reference.error_bound` + `compare` must fail an all-zeros output, a result of the first K/2 terms only and a
result missing one block of 32 consecutive K terms (at the start, middle and end of K), at every K from 64 to 16384,
for fp32 and fp16 accumulation and for fp16 and bf16 inputs (bf16 accumulates in fp32 only), while correct results
pass with room to spare: the fp32 result rounded once, emulated fp16 accumulation rounded every 16-term tensor-core
k-step or after every term (an FMA chain, the noisiest a kernel rounds), split-K and torch's own matmul. The
"kernels" are CPU emulations (tests/helpers.py `emulated`), so this runs without a GPU; the GPU test at the end runs
the registry's real kernels at the longest K, where the check's margins are smallest.
"""
import pytest
import torch

from compare.reference import compare, error_bound, make_inputs, reference
from conftest import ARCH
from helpers import emulated

# fp16 accumulation at K = 16384 is the close case (a missing block ~2x the norm-wise limit, an FMA chain ~0.35 of
# it): 32 x 32 outputs average the norm-wise sum over enough elements for both margins; 16 x 24 does elsewhere.
SHAPES = {"fp32": (16, 24), "fp16": (32, 32)}
KS = (64, 128, 311, 1000, 2048, 4099, 8192, 16384)
DTYPE_ACCS = [("fp16", "fp32"), ("fp16", "fp16"), ("bf16", "fp32")]
BLOCK = 32  # the missing block: a K tile a kernel's loop could skip (BLOCK_K is 32 or more everywhere)
MARGIN = 0.5  # a correct result uses at most half of each limit (per element and norm-wise) on these outputs
# On the GPU's larger outputs the norm-wise limit nears 1 and an FMA chain (simt_naive's fp16 __hfma) nears its
# expected 0.53 of it (error variance ~0.18 u^2 s^2 per rounding against the u^2 s^2 / 3 allowed).
GPU_NORM_MARGIN = 0.75


def _mutants(a, b, acc):
    """The wrong results: zeros, the first K/2 terms only, and the K terms but one block of BLOCK (start, middle,
    end), each accumulated as a correct kernel would."""
    k = a.shape[1]
    out = {"zeros": torch.zeros((a.shape[0], b.shape[1]), dtype=a.dtype)}
    half = a.clone()
    half[:, k // 2:] = 0
    out["half-K"] = emulated(half, b, acc)
    for where, lo in (("start", 0), ("middle", (k - BLOCK) // 2), ("end", k - BLOCK)):
        gap = a.clone()
        gap[:, lo:lo + BLOCK] = 0
        out[f"missing k {lo}..{lo + BLOCK - 1} ({where})"] = emulated(gap, b, acc)
    return out


def _correct(a, b, acc):
    """Right results of an `acc`-accumulating kernel: the ways real kernels round."""
    out = {"k16 steps": emulated(a, b, acc), "split-K 3": emulated(a, b, acc, splits=3)}
    if acc == "fp32":
        out["rounded once"] = reference(a, b).to(a.dtype)
        out["torch.matmul"] = a @ b
    else:
        out["FMA chain"] = emulated(a, b, acc, step=1)
    return out


@pytest.mark.parametrize("dtype,acc", DTYPE_ACCS)
@pytest.mark.parametrize("k", KS)
def test_mutants_fail_and_correct_results_pass(k, dtype, acc):
    a, b = make_inputs(*SHAPES[acc], k, "NN", seed=k, kind="randn", dtype=dtype)
    ref = reference(a, b)
    bound = error_bound(a, b, ref, acc)
    for name, c in _correct(a, b, acc).items():
        v = compare(c, ref, bound)
        assert v.ok and v.max_rel_to_bound < MARGIN and v.norm_ratio < MARGIN, f"{name} K={k}: {v.detail}"
    for name, c in _mutants(a, b, acc).items():
        v = compare(c, ref, bound)
        assert not v.ok, f"{name} passed the {dtype} {acc}-accumulation check at K={k}: {v.detail}"


def test_errors_each_within_the_element_bound_fail_together():
    """The per-element bound of fp16 accumulation allows the worst case of every rounding at once; an error of half
    of it on every element (random signs) passes each element and fails norm-wise, and the message says why."""
    a, b = make_inputs(*SHAPES["fp16"], 4099, "NN", seed=5, kind="randn")
    ref = reference(a, b)
    bound = error_bound(a, b, ref, "fp16")
    signs = torch.randint(0, 2, ref.shape, generator=torch.Generator().manual_seed(5)) * 2 - 1
    v = compare((ref + 0.5 * signs * bound.per_element).half(), ref, bound)
    assert not v.ok and v.max_rel_to_bound < 1 < v.norm_ratio and "norm-wise check failed" in v.detail, v.detail


def test_bound_takes_only_what_kernels_offer():
    a, b = make_inputs(4, 4, 8, "NN", seed=1, kind="randn", dtype="bf16")
    with pytest.raises(ValueError, match="fp16 accumulation takes fp16 inputs"):
        error_bound(a, b, reference(a, b), "fp16")
    with pytest.raises(ValueError, match="acc must be"):
        error_bound(a, b, reference(a, b), "fp8")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_every_kernel_passes_at_long_k_and_its_mutant_fails(dtype):
    """The registry's kernels (the plans' choices, both accumulations) on the GPU, M x N = 64 x 128, K = 16384 and
    4099: each passes the random check with room to spare, and the same kernel fed A with one BLOCK of K zeroed
    fails it (the real rounding of fp16 accumulators, which the CPU emulations only model)."""
    from compare.registry import select
    a, b = make_inputs(64, 128, 16384, "NN", device="cuda", seed=46, kind="randn", dtype=dtype)
    refs = {}
    for kern in select(None, include_all=True, gpu=True, arch=ARCH, dtype=dtype):
        if "[" in kern.name or kern.config == "exact" or not kern.supports("NN", ARCH, dtype):
            continue  # pinned configurations and tune="exact" run the plans' kernels again
        for k in (16384, 4099):
            x, y = a[:, :k].contiguous(), b[:k]  # K = 4099: rows off 16 bytes, which the TMA kernels refuse
            if not kern.accepts(x, y) or (kern.skip_reason and kern.skip_reason(x, y)):
                continue
            if (k, kern.acc) not in refs:
                ref = reference(x, y)
                refs[k, kern.acc] = ref, error_bound(x, y, ref, kern.acc)
            ref, bound = refs[k, kern.acc]
            v = compare(kern.run(x, y, None), ref, bound)
            assert v.ok and v.max_rel_to_bound < MARGIN and v.norm_ratio < GPU_NORM_MARGIN, \
                f"{kern.name} K={k}: {v.detail}"
            gap = x.clone()
            gap[:, k // 2:k // 2 + BLOCK] = 0
            assert not compare(kern.run(gap, y, None), ref, bound).ok, f"{kern.name} K={k}: a missing block passed"


def _reduced_split(a, b, splits):
    """A cuBLAS split-K with torch's reduced-precision reduction: each of `splits` K slices summed in fp32 (here
    exactly) and rounded to the output's dtype, the slices added in that dtype in order."""
    k = a.shape[1]
    edges = [k * i // splits for i in range(splits + 1)]
    total = None
    for lo, hi in zip(edges, edges[1:]):
        part = reference(a[:, lo:hi], b[lo:hi]).to(a.dtype)
        total = part if total is None else (total.float() + part.float()).to(a.dtype)
    return total


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("k", [311, 6043, 16384])
def test_torch_matmul_reduced_precision_reduction(k, dtype):
    """torch.matmul is checked as acc="reduced" while torch allows reduced-precision reductions (its default): a
    split of K into up to 64 slices added in the output's dtype passes, and zeros and half-K still fail (a missing
    block too in fp16; a bf16 reduction's noise hides it); the 16-way split is past the fp32 check somewhere on a
    wide output (as cuBLAS's own result was, on a GPU, at 122 x 2267 x 6043)."""
    from compare.reference import torch_matmul_acc

    assert torch_matmul_acc(torch.float16) == torch_matmul_acc(torch.bfloat16) == "reduced"  # torch's defaults
    a, b = make_inputs(24, 512, k, "NN", seed=k, kind="randn", dtype=dtype)
    ref = reference(a, b)
    bound = error_bound(a, b, ref, "reduced")
    for splits in (2, 7, 16, 64):
        v = compare(_reduced_split(a, b, splits), ref, bound)
        assert v.ok and v.max_rel_to_bound < MARGIN and v.norm_ratio < MARGIN, f"{splits} slices: {v.detail}"
    for name, c in _mutants(a, b, "fp32").items():
        if dtype == "bf16" and name.startswith("missing"):
            continue  # a bf16 reduction may round as often as every k-step: 32 terms fewer hide in that noise
        assert not compare(c, ref, bound).ok, f"{name} passed the reduced check at K={k}"
    if k == 6043:
        assert not compare(_reduced_split(a, b, 16), ref, error_bound(a, b, ref, "fp32")).ok
