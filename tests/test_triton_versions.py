"""The Triton releases the project supports, checked on the CPU against the installed Triton itself: the direct
launch's argument layout (triton_kernels/triton_internals.py), the internals it reads, the warning on a release it
does not know, the explicit FP-fusion option. CI runs this file on the pinned Triton and on the newest one."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import triton

from triton_kernels import triton_internals
from triton_kernels.triton_internals import LAYOUT, LAYOUTS, INTERNALS

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("triton_kernels", "hgemm_common", "compare", "ptx_kernels", "scripts")


def child(args: list, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """A child Python in the repository root without TRITON_INTERPRET (the interpreter, on in this process,
    replaces @triton.jit functions by interpreted ones that cannot be compiled)."""
    env = {**{k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}, "PYTHONPATH": str(ROOT),
           **(env or {})}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module", params=[90, 80], ids=["sm90", "sm80"])
def probe(request) -> dict:
    """tests/launch_probe.py's report for a GPU target: sm_90 lowers the TMA kernels' descriptors to
    CUtensorMaps, sm_80 does not (pointer, shape and strides twice). TRITON_DEFAULT_FP_FUSION=0: the compiled
    kernels must still have FP fusion on, from the explicit option."""
    res = child(["tests/launch_probe.py", str(request.param)], env={"TRITON_DEFAULT_FP_FUSION": "0"})
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_layouts_and_internals_name_the_same_releases():
    assert list(LAYOUTS) == list(INTERNALS)


def test_direct_launch_hands_triton_launcher_the_same_arguments(probe):
    """For blocked, split-K, gemv and the TMA kernels (fp16 and bf16, row- and column-major operands; the wide
    split-K kernel's two launches, the second a programmatic dependent launch): the
    installed Triton's `kernel[grid]` (binder, compiler, CompiledKernel, CudaLauncher, its descriptor encoding)
    and the direct launch hand Triton's C launch entry the same arguments, compared element by element after the
    conversions the C launcher applies itself (a tensor as its address; launch metadata and idle hooks, which it
    only passes to hooks that are set, as nothing). CUtensorMaps compare as the bytes of their encoder's
    arguments. Three calls per kernel: the first (compile, then the direct launch set up from it), one on new
    tensors (new addresses, new maps), the first tensors again (maps from the direct launch's cache, not
    re-encoded)."""
    if LAYOUT is None:
        pytest.skip(f"triton {triton.__version__}: no direct launch layout, every call takes kernel[grid]")
    rows = probe["rows"]
    assert probe["hooks_idle"] and probe["triton"] == triton.__version__
    assert {r["case"].split()[0] for r in rows} >= {"blocked", "splitk", "gemv", "tma"}
    for r in rows:
        where = (r["case"], r["call"], r["launch"])
        assert r["direct"] == r["jit"], where
        assert r["jit"][3] == 0x5EED, where  # the stream
        # launch flags (cooperative, PDL) after the function: the wide split-K's reduction is a programmatic
        # dependent launch, on both paths
        assert r["jit"][6] == (r["case"].startswith("splitk_wide") and r["launch"] == 1), where
        if r["call"] < 2:
            assert r["direct_encoded"] == r["jit_encoded"], where  # the encoder asked for the same maps
        else:
            assert r["direct_encoded"] == [], where  # served from the cache
        assert len(r["jit_encoded"]) == r["lowered"]
        assert r["lowered"] == (r["descs"] if probe["capability"] >= 90 else 0), where
        assert r["fp_fusion"] is True, where
    assert any(r["lowered"] for r in rows) or probe["capability"] < 90
    assert any(r["descs"] and not r["lowered"] for r in rows) or probe["capability"] >= 90
    assert probe["wrong_layouts_differ"] and all(probe["wrong_layouts_differ"].values())


def test_each_internal_resolves_on_its_release(probe):
    """Every Triton internal the project reads for the installed release (triton_internals.INTERNALS) exists on
    it, found on the installed Triton's own objects; the lists of the other layout (3.6 against 3.7+) name
    internals this release lacks, so the lists are not vacuous."""
    if LAYOUT is None:
        pytest.skip(f"triton {triton.__version__}: no direct launch, no internals read")
    mine = next(v for v in INTERNALS if triton.__version__.startswith(v))
    resolved = probe["internals"]
    assert resolved[mine] and all(resolved[mine].values()), {k: ok for k, ok in resolved[mine].items() if not ok}
    other = "3.9." if mine == "3.6." else "3.6."
    assert not all(resolved[other].values())


def test_no_other_module_touches_triton_internals():
    """The driver, launcher and knob internals are read in triton_kernels/triton_internals.py only."""
    needles = ("driver.active", "knobs", "fill_tma_descriptor", "CudaLauncher", "packed_metadata", "launch_enter_hook",
               "backends.nvidia", "wrap_handle_tensordesc", "kernel_signature")
    hits = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if path.name == "triton_internals.py":
                continue
            text = path.read_text()
            hits += [f"{path.relative_to(ROOT)}: {n}" for n in needles if n in text]
    assert hits == []


_WARN_CHILD = """
import warnings, triton
triton.__version__ = {version!r}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import triton_kernels
    import triton_kernels.launch as launch
    import triton_kernels.triton_internals
print(sum("tensorcore-hgemm: triton" in str(w.message) for w in caught), launch.triton_internals.LAYOUT is not None)
"""


@pytest.mark.parametrize("version, warnings, direct", [("3.10.0", 1, False), ("3.5.1", 1, False),
                                                       (triton.__version__, 0, True)])
def test_import_warns_once_where_the_direct_launch_does_not_apply(version, warnings, direct):
    if LAYOUT is None and version == triton.__version__:
        warnings, direct = 1, False
    res = child(["-c", _WARN_CHILD.format(version=version)], env={"TRITON_INTERPRET": "1"})
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split() == [str(warnings), str(direct)]
    if warnings:
        line = triton_internals.slow_path_warning(version)
        assert "kernel[grid]" in line and "per call" in line and "\n" not in line


@pytest.mark.parametrize("name", ["gluon_persistent", "gluon"])
def test_a_kernel_this_triton_cannot_run_is_refused_by_name(name, monkeypatch):
    """kernel= naming a record whose API is written for other Triton releases (`Variant.triton_versions`: the Gluon
    kernel's, 3.6) says which release it needs, by the record's name, rather than listing the kernels there are;
    configs() alike. Here on triton 3.9.0: the installed version patched, and the record left out of kernel='s names
    as an import under 3.9.0 leaves it out (`NOT_OFFERED`, which reads the same gate)."""
    import torch

    import triton_kernels
    from triton_kernels import call, variants

    gluon = variants.GLUON
    assert (gluon.triton_refusal(triton.__version__) is None) == triton.__version__.startswith("3.6.")
    assert variants.BY_KERNEL["triton_blocked"].triton_refusal("3.9.0") is None  # no versions: any Triton
    monkeypatch.setattr(triton, "__version__", "3.9.0")
    monkeypatch.setattr(call, "KERNEL_NAMES", {k: v for k, v in call.KERNEL_NAMES.items() if v != gluon.name})
    why = "gluon_persistent needs triton 3.6 (installed: 3.9.0)"
    assert variants._not_offered(gluon) == why == gluon.triton_refusal("3.9.0")
    a = torch.randint(-3, 4, (8, 16)).half()
    with pytest.raises(ValueError, match=rf"^hgemm: kernel='{name}': {re.escape(why)}$"):
        triton_kernels.hgemm(a, a.t(), kernel=name)
    with pytest.raises(ValueError, match=rf"^configs: kernel='{name}': {re.escape(why)}$"):
        triton_kernels.configs(name)
    with pytest.raises(ValueError, match=r"kernel must be one of \('auto', 'triton_blocked', "):
        triton_kernels.hgemm(a, a.t(), kernel="gluon_persistentt")  # a name no record has: the list


# Compiles the first config of every Triton record (fp16, fp32 accumulation) for sm_90 with Triton's default FP
# fusion and with the project's explicit option, and gemv (whose CUDA-core loop is a * b + c) with fusion off;
# TRITON_ALWAYS_COMPILE so that no SASS comes from a cache.
_FUSION_CHILD = """
import json, warnings, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton_kernels.contract import optional
from triton_kernels.triton_internals import COMPILE_OPTIONS
from triton_kernels.variants import VARIANTS, kernel_module

def sass(v, extra):
    mod = kernel_module(v)
    cfg = mod.configs()[0]
    fn, sig, consts, attrs = mod.inspect_source(cfg, "fp16")
    consts = dict(consts, ACC_FP16=False)
    for name in consts:
        sig.setdefault(name, "constexpr")
    source_type = ASTSource
    if fn.is_gluon():  # the Gluon record compiles from its own source type, with its own launch options
        from triton.experimental.gluon._runtime import GluonASTSource as source_type
    options = optional(mod, "compile_options")(cfg)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        k = triton.compile(source_type(fn=fn, signature=sig, constexprs=consts, attrs=attrs),
                           target=GPUTarget("cuda", 90, 32), options={**options, **extra})
    fusion_warned = any("FP_FUSION" in str(w.message) for w in caught)
    return k.asm["sass"], fusion_warned

out = {}
for v in VARIANTS:
    default, _ = sass(v, {})
    explicit, warned = sass(v, COMPILE_OPTIONS)
    out[v.name] = dict(same=default == explicit, explicit_warned=warned)
    if v.name == "triton_gemv":
        out[v.name]["off_differs"] = sass(v, dict(enable_fp_fusion=False))[0] != default
print(json.dumps(out))
"""


def test_explicit_fp_fusion_leaves_the_sass_unchanged():
    """FP fusion set explicitly (triton_internals.COMPILE_OPTIONS, on every compile the project makes) gives the
    SASS Triton's default gives, for every Triton record; Triton 3.9 no longer warns about the default once it is
    set. Fusion off changes gemv's SASS, so the comparison can see the option."""
    from triton import knobs

    if not knobs.language.default_fp_fusion:
        pytest.skip("this Triton's default is FP fusion off: the explicit option changes the SASS on purpose")
    res = child(["-c", _FUSION_CHILD], env={"TRITON_ALWAYS_COMPILE": "1"}, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = json.loads(res.stdout.strip().splitlines()[-1])
    assert rows and all(r["same"] and not r["explicit_warned"] for r in rows.values()), rows
    assert rows["triton_gemv"]["off_differs"]
