"""The Gluon level (triton_kernels/gluon_persistent.py): what its sm_90a compile holds, on the CPU; exact results,
NaN-poisoned outputs, determinism and every layout, dtype and configuration, on an H100.

Triton's interpreter cannot run Gluon, and the interpreter (on in this process when there is no GPU) replaces
@triton.jit helpers the kernel calls, so both halves run in a child process without TRITON_INTERPRET: the CPU half
compiles every instantiation there (`_COMPILE_PROBE`); the GPU half runs every case there under a timeout
(`_GPU_CASES`): a wrong mbarrier phase or expect_tx byte count hangs the kernel instead of failing it (TESTING.md
12), and a hung child is killed and reported, where a hung test process would stall the whole suite.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compare.levels import code_lines, cuda_includes, source_lines

ROOT = Path(__file__).resolve().parent.parent


def _child(code: str, timeout: int) -> dict:
    """Run `code` in a child Python without TRITON_INTERPRET; its last stdout line is JSON."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    try:
        res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"child timed out after {timeout} s (a hung kernel?); its output: {(e.stdout or '')[-2000:]}")
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------------------------------ CPU
# Every config x (fp16 fp32-acc, fp16 fp16-acc, bf16) x layout (A, B row- or column-major), compiled for sm_90a;
# SASS facts of each.
_COMPILE_PROBE = """
import json, re, tempfile
from pathlib import Path
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from ptx_kernels import toolchain
from triton_kernels import gluon_persistent as g

rows, failed = [], []
for i, cfg in enumerate(g.configs()):
    for dtype, acc in (("fp16", "fp32"), ("fp16", "fp16"), ("bf16", "fp32")):
        for a_t in (False, True):
            for b_t in (False, True):
                fn, sig, consts, attrs = g.inspect_source(cfg, dtype, a_t, b_t)
                consts["ACC_FP16"] = acc == "fp16"
                for name in consts:
                    sig.setdefault(name, "constexpr")
                try:
                    k = triton.compile(GluonASTSource(fn, sig, consts, attrs), target=GPUTarget("cuda", 90, 32),
                                       options=g.compile_options(cfg))
                except Exception as e:  # noqa: BLE001 - reported by name
                    failed.append([cfg.name, dtype, acc, a_t, b_t, f"{type(e).__name__}: {str(e)[:300]}"])
                    continue
                sass = k.asm["sass"]
                with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
                    f.write(k.asm["cubin"])
                usage = next(iter(toolchain.cubin_resource_usage(Path(f.name)).values()))
                Path(f.name).unlink()
                mix = toolchain.instruction_mix(sass)
                rows.append(dict(config=i, dtype=dtype, acc=acc, a_t=a_t, b_t=b_t,
                                 mix={op: mix.get(op, 0) for op in ("HGMMA", "UTMALDG", "UTMASTG", "SYNCS",
                                                                    "USETMAXREG", "BAR", "LDL", "STL", "LDGSTS")},
                                 hgmma=sorted(set(re.findall(r"HGMMA\\.[\\w.]+", sass))),
                                 setmaxnreg=toolchain.setmaxnreg_targets(sass), shared=k.metadata.shared,
                                 warps=k.metadata.num_warps, stack=usage.stack_bytes, spills=usage.spill_stores,
                                 smem_design=g.smem_bytes(cfg)))
print(json.dumps(dict(rows=rows, failed=failed)))
"""


def _api_missing() -> str | None:
    """Why this Triton cannot build the Gluon kernel (its API is written for GLUON_TRITON_VERSIONS), or None."""
    import triton

    from triton_kernels.gluon_persistent import GLUON_TRITON_VERSIONS

    if triton.__version__.startswith(GLUON_TRITON_VERSIONS):
        return None
    return f"the Gluon kernel is written for triton {GLUON_TRITON_VERSIONS}, this is {triton.__version__}"


needs_api = pytest.mark.skipif(_api_missing() is not None, reason=str(_api_missing()))


@pytest.fixture(scope="module")
def compiles() -> dict:
    return _child(_COMPILE_PROBE, timeout=1800)


@needs_api
def test_every_config_compiles_in_every_dtype_and_layout(compiles):
    from triton_kernels import gluon_persistent as g

    assert compiles["failed"] == []
    assert len(compiles["rows"]) == len(g.configs()) * 3 * 4


@needs_api
def test_sass_holds_the_design(compiles):
    """wgmma (HGMMA), TMA loads (UTMALDG) and stores (UTMASTG), mbarriers (SYNCS), the register split (USETMAXREG:
    the producer down to 40, the consumers up to 232), 12 warps (consumer, consumer, producer warpgroups); no
    cp.async, no local memory (LDL/STL, stack, spills)."""
    for r in compiles["rows"]:
        mix = r["mix"]
        assert all(mix[op] > 0 for op in ("HGMMA", "UTMALDG", "UTMASTG", "SYNCS", "USETMAXREG")), r
        assert mix["LDL"] == mix["STL"] == mix["LDGSTS"] == 0 and r["stack"] == 0 and r["spills"] == 0, r
        assert {40, 232} <= set(r["setmaxnreg"]) and r["warps"] == 12, r


@needs_api
def test_tensor_core_forms_follow_dtype_and_accumulation(compiles):
    """bf16: HGMMA ...F32.BF16; fp16 with fp32 accumulation: ...F32 (no BF16); fp16 accumulation: ...F16."""
    for r in compiles["rows"]:
        forms = r["hgmma"]
        assert forms, r
        if r["dtype"] == "bf16":
            assert all(f.endswith(".F32.BF16") for f in forms), r
        elif r["acc"] == "fp16":
            assert all(f.endswith(".F16") for f in forms), r
        else:
            assert all(f.endswith(".F32") for f in forms), r


@needs_api
def test_shared_memory_within_the_device_limit(compiles):
    """The ring and the staging buffers (`smem_bytes`) plus the mbarriers fit an H100 block's 227 KB."""
    from triton_kernels.gluon_persistent import SMEM_LIMIT

    for r in compiles["rows"]:
        assert r["smem_design"] <= r["shared"] <= SMEM_LIMIT, r
        assert r["shared"] - r["smem_design"] < 1024, r  # the rest: mbarriers and the partitions' captures


@needs_api
def test_compare_inspect_shows_it(tmp_path):
    """`python -m compare inspect gluon_persistent` compiles it (GluonASTSource) and reports its row."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    res = subprocess.run([sys.executable, "-m", "compare", "inspect", "--out", str(tmp_path), "gluon_persistent"],
                         cwd=ROOT, env=dict(env, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    row = json.loads((tmp_path / "inspect.json").read_text())["rows"][0]
    assert row["kernel"] == "gluon_persistent" and row["source"].startswith("triton_kernels/gluon_persistent.py")
    assert row["mix"]["HGMMA"] > 0 and row["mix"]["USETMAXREG"] > 0 and {40, 232} <= set(row["setmaxnreg"])


def test_record_offered_only_where_it_runs():
    """Under the interpreter (this process without a GPU) the record is left out with a one-line reason; compiled
    with triton 3.6 it is in VARIANTS as kernel="gluon", never timed by kernel="auto"."""
    import triton

    from hgemm_common.validation import interpreter_active
    from triton_kernels import gluon_persistent as g
    from triton_kernels.variants import GLUON, NOT_OFFERED, VARIANTS

    assert GLUON.extra["kernel"] == "gluon" and GLUON.min_arch == 90 and set(GLUON.dtypes) == {"fp16", "bf16"}
    offered = GLUON in VARIANTS
    assert offered == (triton.__version__.startswith(g.GLUON_TRITON_VERSIONS) and not interpreter_active())
    assert offered or "\n" not in NOT_OFFERED[GLUON.name]
    assert not g.worth_timing(4096, 4096, 4096, 132, True)


def test_code_lines_skips_blanks_comments_and_docstrings():
    py = 'x = 1\n\n# note\ndef f():\n    """doc\n    more"""\n    return """not a docstring""" + s\n'
    assert code_lines(py, "python") == 3
    assert code_lines('def g():\n    """one line"""\n    pass\n', "python") == 2
    cu = "int a;  // trailing\n// whole line\n/* block\n   comment */\n\nint b; /* inline */ int c;\n"
    assert code_lines(cu, "cuda") == 2
    with pytest.raises(ValueError):
        code_lines("", "rust")


def test_source_lines_of_the_three_levels():
    from compare.registry import records

    by_name = {v.name: v for v in records()}
    from triton_kernels.variants import GLUON
    by_name.setdefault(GLUON.name, GLUON)
    for name in ("triton_tma", "gluon_persistent", "wgmma_persistent"):
        own, headers = source_lines(by_name[name])
        assert own > 50, name
        assert (headers > 0) == (name == "wgmma_persistent"), name
    wgmma = ROOT / "ptx_kernels" / "csrc" / "sm90" / "wgmma_persistent.cu"
    assert any(p.name == "wgmma_tile.cuh" for p in cuda_includes(wgmma))


# ------------------------------------------------------------------------------------------------------------ GPU
# Every case in one child under a timeout. Shapes: TMA-describable (leading dimensions multiples of 8), edges in M,
# N and K of both tiles, K below, at and past one k-block and past the ring's depth; tiles beyond one round of the
# persistent grid (programs walking several tiles, the ring's phases wrapping across tiles).
_GPU_CASES = """
import json, torch
import triton_kernels
from compare.reference import LAYOUTS, compare, make_inputs, poisoned_out, reference
from hgemm_common.record import ACCS_FOR
from triton_kernels import dispatch
from triton_kernels import gluon_persistent as g

ALL_LAYOUTS = [(8, 8, 8), (40, 24, 72), (136, 264, 88), (264, 520, 1032), (1000, 136, 8), (384, 1032, 264)]
ROW_MAJOR_A = [(1, 64, 8), (17, 40, 136), (333, 264, 520), (129, 257 // 8 * 8, 64)]
MANY_TILES = [(2048, 2048, 200), (4096, 2056, 72)]
bad, ran = [], 0

def exact(m, n, k, layout, dtype, acc, cfg, seed):
    global ran
    a, b = make_inputs(m, n, k, layout, device="cuda", seed=seed, dtype=dtype)
    out = poisoned_out(m, n, "cuda", dtype)
    try:
        c = triton_kernels.hgemm(a, b, out=out, acc=acc, config=cfg, kernel="gluon")
        torch.cuda.synchronize()
        v = compare(c, reference(a, b))
        ok = c is out and v.ok
        detail = "" if ok else v.detail
    except Exception as e:  # noqa: BLE001 - reported by case
        ok, detail = False, f"{type(e).__name__}: {str(e)[:300]}"
    ran += 1
    if not ok:
        bad.append(f"{m}x{n}x{k} {layout} {dtype} acc={acc} {cfg.name}: {detail}")

for ci, cfg in enumerate(g.configs()):
    for dtype, accs in ACCS_FOR.items():
        for acc in accs:
            for s, (m, n, k) in enumerate(ALL_LAYOUTS):
                for layout in LAYOUTS:
                    exact(m, n, k, layout, dtype, acc, cfg, seed=s)
            for s, (m, n, k) in enumerate(ROW_MAJOR_A):
                for layout in ("NN", "NT"):
                    exact(m, n, k, layout, dtype, acc, cfg, seed=10 + s)
            for s, (m, n, k) in enumerate(MANY_TILES):
                exact(m, n, k, "NT" if s else "NN", dtype, acc, cfg, seed=20 + s)

# config=None: the explicit kernel's own timing over configs(), then the plan's cached call
for dtype in ACCS_FOR:
    a, b = make_inputs(1024, 1032, 520, "NT", device="cuda", seed=30, dtype=dtype)
    for _ in range(2):
        c = triton_kernels.hgemm(a, b, kernel="gluon")
        if not compare(c, reference(a, b)).ok:
            bad.append(f"timed kernel='gluon' {dtype}")
    ran += 2

# determinism: random inputs, two runs bitwise equal, every config
for cfg in g.configs():
    for dtype in ACCS_FOR:
        a, b = make_inputs(2048, 2048, 4096, "NT", device="cuda", seed=40, kind="randn", dtype=dtype)
        c1 = triton_kernels.hgemm(a, b, config=cfg, kernel="gluon")
        c2 = triton_kernels.hgemm(a, b, config=cfg, kernel="gluon")
        if not torch.equal(c1, c2):
            bad.append(f"not deterministic {cfg.name} {dtype}")
        ran += 1

# operands TMA cannot describe: refused with the dispatcher's message, never a wrong answer
a, b = make_inputs(64, 60, 64, "NN", device="cuda", seed=50)
try:
    triton_kernels.hgemm(a, b, kernel="gluon")
    bad.append("misaligned B was not refused")
except ValueError as e:
    if "TMA needs" not in str(e):
        bad.append(f"misaligned B: {e}")
print(json.dumps(dict(bad=bad, ran=ran)))
"""


@needs_api
@pytest.mark.gpu(sm=90)
def test_gpu_exact_poisoned_deterministic_under_a_timeout():
    """Exact integer checks (C == (A.double() @ B.double()) rounded, bit for bit; NaN-poisoned out= so every
    element must be written) on odd shapes in every layout, dtype, accumulation and configuration; the timed
    kernel="gluon" path; determinism on random inputs; misaligned operands refused. One child, 15 minutes at
    most: a hang fails this test instead of stalling the suite."""
    import torch

    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the Gluon kernel is written for Hopper (sm_90a), not later GPUs")
    res = _child(_GPU_CASES, timeout=900)
    assert res["bad"] == [], "\n".join(res["bad"][:40])
    assert res["ran"] >= 400


def test_launch_takes_the_compile_options_every_launch_passes():
    """launch.py's jit_launch hands every Spec.fn the project's compile options (FP fusion set explicitly); the
    Gluon kernel's launcher passes them on with its register budget (on the H100 a launcher that refused them made
    every Gluon call raise)."""
    from triton_kernels import gluon_persistent as G
    from triton_kernels.triton_internals import COMPILE_OPTIONS

    seen = {}

    class Kernel:
        def __getitem__(self, grid):
            return lambda *args, **kw: seen.update(grid=grid, args=args, **kw)

    assert G.GluonLaunch(Kernel())[(3,)](1, 2, num_warps=4, num_stages=3, **COMPILE_OPTIONS) is None
    assert seen == dict(grid=(3,), args=(1, 2), num_warps=4, num_stages=3, maxnreg=G.MAXNREG, **COMPILE_OPTIONS)
