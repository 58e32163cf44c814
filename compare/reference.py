"""The one reference, input maker and error bound shared by the tests and the harness (see TESTING.md)."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import torch

from hgemm_common.errors import HgemmValueError
from hgemm_common.validation import DTYPES as TORCH_DTYPES

LAYOUTS = ("NN", "NT", "TN", "TT")
FP16_UNIT = 2.0**-11  # unit roundoff of fp16 (half an ulp at 1.0)
BF16_UNIT = 2.0**-8  # unit roundoff of bf16 (8 significand bits)
FP32_UNIT = 2.0**-24
INT_MAX = 3  # kind="int" draws integers in [-INT_MAX, INT_MAX]
BF16_EXACT = 256  # bf16 holds every integer up to 2**8 exactly (8 significand bits); fp16 up to 2**11


def dtype_unit(dtype: torch.dtype) -> float:
    """Unit roundoff of a kernel's input/output dtype (torch.float16 or torch.bfloat16)."""
    return BF16_UNIT if dtype == torch.bfloat16 else FP16_UNIT


@contextmanager
def _full_fp32():
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A @ B in high precision, as float64 on a's device.

    CPU: float64. CUDA: fp32 cuBLAS with TF32 off (float64 GEMM on the GPU is ~60x slower); for the small-integer
    inputs of the exact checks every fp32 partial sum is exact while |sum| < 2**24, so it is exact there too.
    """
    if a.device.type == "cuda":
        with _full_fp32():
            return (a.float() @ b.float()).double()
    return a.double() @ b.double()


def make_operand(rows: int, cols: int, major: str, *, device, generator: torch.Generator | None = None,
                 kind: str = "int", dtype: str = "fp16") -> torch.Tensor:
    """A (rows, cols) fp16 or bf16 matrix stored row-major (major="N") or column-major ("T", a `.t()` view).

    kind="int": integers in [-INT_MAX, INT_MAX] (exact in both dtypes: bf16 holds integers exactly up to 256, and
    with fp32 accumulation every partial sum is exact while |sum| < 2**24); kind="randn": standard normal.
    """
    shape = (rows, cols) if major == "N" else (cols, rows)
    if kind == "int":
        t = torch.randint(-INT_MAX, INT_MAX + 1, shape, generator=generator, dtype=torch.int16)
    elif kind == "randn":
        t = torch.randn(shape, generator=generator, dtype=torch.float32)
    else:
        raise HgemmValueError(f"unknown input kind {kind!r}")
    t = t.to(device=device, dtype=TORCH_DTYPES[dtype])
    return t if major == "N" else t.t()


def exact_window(k: int, count: int) -> torch.Tensor:
    """A (count, k) 0/1 mask for bf16 exact checks: row r keeps the k' with (k - 1 - k' + r) % S == 0, S = ceil(k / T),
    T = BF16_EXACT // INT_MAX**2 = 28 terms. Applied to B's columns (or A's rows), every element of C sums at most
    28 products of integers in [-3, 3]: |C| <= 252, so every result is an integer bf16 holds exactly and an
    indexing error cannot hide in the output's rounding. Each row keeps one k in every S, from the first S to the
    last S (row 0 ends on K's last element: the masked tail), and S consecutive rows together cover every k."""
    s = -(-k // (BF16_EXACT // INT_MAX**2))
    return ((k - 1 - torch.arange(k)[None, :] + torch.arange(count)[:, None]) % s == 0).to(torch.int16)


def make_inputs(m: int, n: int, k: int, layout: str = "NN", *, device="cpu", seed: int = 0, kind: str = "int",
                dtype: str = "fp16"):
    """A (m, k) and B (k, n) in the given layout: first letter A, second B; N = row-major, T = column-major.
    dtype: "fp16" or "bf16" (the same values for a seed: integers are exact in both), except that bf16 integer
    inputs with K > 28 keep only the terms `exact_window` leaves (of B's columns, or of A's rows when M > N), so
    that |C| <= 256 (TESTING.md 13)."""
    if layout not in LAYOUTS:
        raise HgemmValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    g = torch.Generator().manual_seed(seed)
    a = make_operand(m, k, layout[0], device=device, generator=g, kind=kind, dtype=dtype)
    b = make_operand(k, n, layout[1], device=device, generator=g, kind=kind, dtype=dtype)
    if kind == "int" and dtype == "bf16" and k * INT_MAX**2 > BF16_EXACT:
        if m > n:
            a.mul_(exact_window(k, m).to(device=device, dtype=a.dtype))  # in place: a keeps its layout
        else:
            b.mul_(exact_window(k, n).t().to(device=device, dtype=b.dtype))
    return a, b


def poisoned_out(m: int, n: int, device, dtype: str = "fp16") -> torch.Tensor:
    """An output buffer full of NaN, so that an unwritten element cannot pass a check."""
    return torch.full((m, n), float("nan"), dtype=TORCH_DTYPES[dtype], device=device)


def negative_view(t: torch.Tensor) -> torch.Tensor:
    """A view with the neg bit set whose values equal t's: its memory holds -t (torch._neg_view of -t), as the
    float16 .imag of a conjugated complex-half tensor does. The kernels read raw memory, so such operands test that
    the wrappers resolve the negation."""
    v = torch._neg_view(-t)
    assert v.is_neg() and torch.equal(v.resolve_neg().nan_to_num(), t.nan_to_num())
    return v


MMA_K = 16  # the k-step of one tensor-core instruction (mma.sync m16n8k16, wgmma m64nNk16): its partial sums
PER_ELEMENT_SIGMAS = 8.0  # Hoeffding: P(|sum of n rounding errors| > 8 u sqrt(sum s^2)) <= 2 exp(-32) per element
NORM_SIGMAS = 6.0  # the norm-wise limit: the chi-square quantile 6 standard normal deviations out (~1e-9)


def k_steps(a: torch.Tensor, b: torch.Tensor, step: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """A and B in `dtype` cut into K-steps of `step` terms, zeros past K: (steps, M, step) and (steps, step, N), so
    that torch.bmm of the two gives each step's products summed."""
    m, k = a.shape
    pad = -k % step
    ad, bd = a.to(dtype), b.to(dtype)
    if pad:
        ad, bd = torch.nn.functional.pad(ad, (0, pad)), torch.nn.functional.pad(bd, (0, 0, 0, pad))
    steps = (k + pad) // step
    return ad.reshape(m, steps, step).transpose(0, 1), bd.reshape(steps, step, b.shape[1])


def partial_sums(a: torch.Tensor, b: torch.Tensor, step: int = MMA_K) -> tuple[torch.Tensor, ...]:
    """(S1, S2, top) per element of C = A @ B, over its partial sums s_j = A[:, :j step] @ B[:j step, :] for
    j = 1 .. ceil(K / step) (the last is C): S1 = step * sum |s_j|, S2 = step * sum s_j^2, top = max |s_j|.

    These are the sizes a kernel's accumulator runs through, whatever the data (zero-mean or not). Each s_j counts
    `step` times: a kernel rounding after every term (an FMA chain: simt_naive's __hfma) rounds `step` partial sums
    about as large as s_j between two ends of MMA k-steps; a tensor-core kernel rounds once per k-step, the Triton
    interpreter once per K tile, and a split-K kernel's slices start again from zero, so they all stay below.
    float64 on the CPU, fp32 with TF32 off on CUDA (as `reference`); batches of k-steps whose temporaries stay
    near 16M elements (one k-step at a time for outputs that large)."""
    m, n = a.shape[0], b.shape[1]
    dt = torch.float32 if a.device.type == "cuda" else torch.float64
    ad, bd = k_steps(a, b, step, dt)
    steps = ad.shape[0]
    s = torch.zeros((m, n), dtype=dt, device=a.device)
    s1, s2, top = torch.zeros_like(s), torch.zeros_like(s), torch.zeros_like(s)
    per = max(1, (1 << 24) // max(1, m * n))
    with _full_fp32():
        for j in range(0, steps, per):
            sums = torch.bmm(ad[j:j + per], bd[j:j + per]).cumsum(0) + s  # (steps of this batch, m, n)
            s = sums[-1]
            s1 += sums.abs().sum(0)
            s2 += (sums * sums).sum(0)
            top = torch.maximum(top, sums.abs().amax(0))
    return step * s1.double(), step * s2.double(), top.double()


_LAST_SUMS: list = []  # [(a, b, their versions, partial_sums(a, b))]: the bench asks for both accumulations


def _partial_sums_of(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """partial_sums(a, b), kept for the last operands (the same tensor objects, unmodified since)."""
    if _LAST_SUMS:
        a0, b0, versions, sums = _LAST_SUMS[0]
        if a0 is a and b0 is b and versions == (a._version, b._version):
            return sums
    sums = partial_sums(a, b)
    _LAST_SUMS[:] = [(a, b, (a._version, b._version), sums)]
    return sums


@dataclass(frozen=True)
class Bound:
    """What a result of random inputs may differ from the reference by: per element and norm-wise (`error_bound`).

    compare() fails a result when any element is past `per_element`, or when
    sum (C - ref)^2 > limit * sum variance over the finite elements."""

    per_element: torch.Tensor  # |C - ref| <= per_element, (M, N) float64
    variance: torch.Tensor  # the most variance the error of each element can have under the rounding model
    limit: float  # the chi-square-over-nu quantile for nu = (sum variance)^2 / sum variance^2 independent terms


def error_bound(a: torch.Tensor, b: torch.Tensor, ref: torch.Tensor, acc: str = "fp32") -> Bound:
    """The random-input check of a kernel computing `ref` = A @ B with accumulation `acc` ("fp32" or "fp16"),
    output in A's dtype (unit u = 2**-11 for fp16, 2**-8 for bf16); it must be able to fail (TESTING.md).

    A kernel's error is a sum of roundings, each of some value x it holds (a partial sum, the result) to a relative
    error of at most the unit of the format it rounds to. With (S1, S2, top) the sizes of C's partial sums
    (`partial_sums`: counted as if rounded after every term, the most any kernel rounds):

      out   = 2 u (|ref| + top): the rounding to the output dtype, and a few more of partial sums in that dtype:
              torch lets cuBLAS add split-K partials in fp16 or bf16 (allow_fp16_reduced_precision_reduction and its
              bf16 twin, on by default), so torch.matmul, the baseline, can round values up to `top` in the output's
              unit;
      fp32  = 2**-23 (S1 + 16 (|A| @ |B|)): fp32 accumulation, every partial sum rounded (tensor cores truncate:
              round toward zero, errors of one sign, so no cancellation is assumed), plus one truncated bit per
              product in a k-step's alignment (tensor cores add the 16 products of a step aligned to the largest,
              without guard bits). At K = 16384 (unit inputs) this is about a thousandth of |C|, where the old
              K 2**-24 (|A| @ |B|) was 8%: more than dropping 32 of the 16384 terms changes an element;
      fp16  = 8 (2**-11 sqrt(S2) + 2**-25 sqrt(K)): fp16 accumulation rounds to nearest (Fasi et al. 2021 found
              so for the tensor cores' fp16 mode; the FMA chains of SIMT code do too), so the errors of the partial
              sums are independent with mean zero and Hoeffding's inequality bounds their sum by this with
              probability 1 - 2 exp(-32) per element (the probabilistic analysis of Higham and Mary 2019 with the
              realized partial sums: an error growing like sqrt(K) u |s|, not the worst case K u (|A| @ |B|)).
              The 2**-25 term: fp16's subnormal spacing is the floor of each rounding error.

    per_element = out + fp32 (+ fp16 with fp16 accumulation) + 2**-24 (fp16's subnormal spacing at the output).

    acc="reduced" is torch.matmul's contract while torch allows reduced-precision reductions (`torch_matmul_acc`):
    cuBLAS may split K and add the slices' partial sums in the output's dtype, each slice rounded there, as many
    slices as it likes. Rounding to nearest at most once per k-step in the output's unit u, that is the fp16 term
    with u for 2**-11: 8 u sqrt(S2) per element, u^2 S2 / 3 of variance. An emulated 16-way split with fp16 slices
    and an fp16 reduction is past `out` + `fp32` alone (tests/test_error_bound.py), as cuBLAS's own results were
    on a GPU.

    The per-element bound alone cannot see an error spread thin over every element: with fp16 accumulation at
    K = 16384, a result missing 32 of its K terms is off by sqrt(32) (unit inputs) where the bound allows ~45.
    Hence the norm-wise test: each rounding error, uniform within +-u|x|, has variance at most u^2 x^2 / 3, so
    variance = (u^2 (ref^2 + top^2) + 2**-22 S2 [fp16 acc] + (2**-25)^2 K [fp16 acc]) / 3 + fp32^2 + (2**-24)^2 is
    the most each element's error can vary by, and sum (C - ref)^2 over sum variance is at most a chi-square over
    its nu degrees of freedom (nu = (sum variance)^2 / sum variance^2, Satterthwaite), whose 1e-9 quantile
    (Wilson-Hilferty, 6 sigma) is `limit`. A correct kernel sits well inside: rounding after every term, an fp16
    FMA chain's error variance is ~0.18 u^2 s^2 (0.53 of the allowance), and tensor cores round 16x less often.
    The missing block's sum of squares is ~4x the sum of variances (~2x the limit on a 32 x 32 output), half the
    K terms' or zeros' hundreds of times: tests/test_error_bound.py checks every such mutant fails at K from 64 to
    16384 and correct emulations pass.
    """
    if acc not in ("fp32", "fp16", "reduced"):
        raise HgemmValueError(f"acc must be 'fp32', 'fp16' or 'reduced', got {acc!r}")
    if acc == "fp16" and a.dtype != torch.float16:
        raise HgemmValueError(f"fp16 accumulation takes fp16 inputs, got {a.dtype}")
    k = a.shape[1]
    unit = dtype_unit(a.dtype)
    s1, s2, top = _partial_sums_of(a, b)
    ref = ref.double()
    fp32 = 2 * FP32_UNIT * (s1 + MMA_K * reference(a.abs(), b.abs()))
    per_element = 2 * unit * (ref.abs() + top) + fp32 + 2.0**-24
    variance = unit**2 * (ref * ref + top * top) / 3 + fp32 * fp32 + 2.0**-48
    if acc == "fp16":
        per_element = per_element + PER_ELEMENT_SIGMAS * (FP16_UNIT * s2.sqrt() + 2.0**-25 * k**0.5)
        variance = variance + (FP16_UNIT**2 * s2 + 2.0**-50 * k) / 3
    elif acc == "reduced":  # partial sums rounded to the output's dtype, at most once per k-step, to nearest
        per_element = per_element + PER_ELEMENT_SIGMAS * unit * s2.sqrt()
        variance = variance + unit**2 * s2 / 3
    return Bound(per_element, variance, norm_limit(variance))


def torch_matmul_acc(dtype: torch.dtype) -> str:
    """The accumulation torch.matmul's result is checked as: "reduced" while torch lets cuBLAS add split-K partial
    sums in fp16 or bf16 (torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction and its bf16 twin, both
    on by default), else "fp32". The kernels here add their split-K partials in fp32, and are checked as "fp32"."""
    flags = torch.backends.cuda.matmul
    allowed = (flags.allow_bf16_reduced_precision_reduction if dtype == torch.bfloat16
               else flags.allow_fp16_reduced_precision_reduction)
    return "reduced" if allowed else "fp32"


def norm_limit(variance: torch.Tensor) -> float:
    """The NORM_SIGMAS upper quantile of chi-square(nu) / nu, nu = (sum variance)^2 / sum variance^2 (the degrees of
    freedom of a sum of independent errors of these variances, Satterthwaite), by Wilson and Hilferty's cube-root
    normal approximation: 46.9 for one element, 1.5 for 384 alike ones, 1.002 for 15 million."""
    v = variance.double().flatten()
    v = v[torch.isfinite(v)]
    total = float(v.sum())
    if total <= 0.0:
        return 1.0
    nu = total**2 / float((v * v).sum())
    return (1 - 2 / (9 * nu) + NORM_SIGMAS * (2 / (9 * nu)) ** 0.5) ** 3


@dataclass
class Verdict:
    """Outcome of comparing one result against the reference."""

    ok: bool
    max_abs_err: float
    max_rel_to_bound: float  # max |C - ref| / bound; <= 1 passes
    unwritten: int  # NaN outputs where the reference is finite
    first_bad: tuple[int, int] | None
    detail: str
    rms_err: float = 0.0  # root mean square of C - ref over the finite elements (to set beside torch.matmul's)
    norm_ratio: float = 0.0  # sum (C - ref)^2 / (limit * sum variance) of a random check (`Bound`); <= 1 passes

    def __str__(self) -> str:
        return self.detail


def compare(c: torch.Tensor, ref: torch.Tensor, bound: Bound | None = None) -> Verdict:
    """Compare an fp16 or bf16 result with a float64 reference.

    bound=None: exact check, C must equal ref rounded to C's dtype bit for bit (NaN and inf must match too).
    Otherwise (`error_bound`): |C - ref| <= bound.per_element element-wise, with NaN/inf positions equal to the
    reference's, and the norm-wise test over the finite elements (Bound).
    """
    c64 = c.double()
    ref = ref.double()
    ref16 = ref.to(c.dtype).double()  # the reference rounded as the kernel's output is
    nan_ok = torch.isnan(c64) == torch.isnan(ref16)
    unwritten = int((torch.isnan(c64) & ~torch.isnan(ref16)).sum())
    finite = torch.isfinite(c64) & torch.isfinite(ref16)
    diff = torch.where(finite, (c64 - ref).abs(), torch.zeros_like(c64))
    inf_ok = torch.where(torch.isinf(ref16) | torch.isinf(c64), c64 == ref16, torch.ones_like(nan_ok))
    squares = float((diff * diff).sum())
    rms = (squares / max(1, int(finite.sum()))) ** 0.5
    norm_ratio = 0.0
    if bound is None:
        good = ((c64 == ref16) | (torch.isnan(c64) & torch.isnan(ref16)))
        ratio = float("inf") if not bool(good.all()) else 0.0
        what = "exact"
    else:
        good = nan_ok & inf_ok & (diff <= bound.per_element)
        ratio = float((diff / bound.per_element).max()) if diff.numel() else 0.0
        allowed = bound.limit * float(torch.where(finite, bound.variance, torch.zeros_like(c64)).sum())
        norm_ratio = squares / allowed if allowed > 0 else (0.0 if squares == 0 else float("inf"))
        what = "bound"
    max_err = float(diff.max()) if diff.numel() else 0.0
    if bool(good.all()) and norm_ratio <= 1.0:
        detail = f"{what} ok, max |err| {max_err:.3g}"
        if bound is not None:
            detail += f", norm-wise {norm_ratio:.2g} of its limit"
        return Verdict(True, max_err, ratio, 0, None, detail, rms, norm_ratio)
    if bool(good.all()):
        return Verdict(False, max_err, ratio, 0, None,
                       f"norm-wise check failed: sum (C - ref)^2 is {norm_ratio:.3g} x its limit (rms error "
                       f"{rms:.3g}) though every element is within its bound (max |err|/bound {ratio:.3g}): an "
                       "error spread over every element, such as missing K terms", rms, norm_ratio)
    bad = (~good).nonzero()
    i, j = (int(x) for x in bad[0])
    msg = (f"{what} check failed at {bad.shape[0]} of {c.numel()} elements; first bad [{i}, {j}]: "
           f"got {float(c64[i, j])!r}, want {float(ref[i, j])!r}")
    if bound is not None:
        msg += (f" (bound {float(bound.per_element[i, j]):.3g}); max |err|/bound {ratio:.3g}; "
                f"norm-wise {norm_ratio:.3g} of its limit")
    if unwritten:
        msg += f"; {unwritten} elements unwritten (still NaN)"
    return Verdict(False, max_err, ratio, unwritten, (i, j), msg, rms, norm_ratio)
