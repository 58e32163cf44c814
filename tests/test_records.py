"""The records and what a kernel file owes them: the Triton kernel-module contract (`triton_kernels.contract`), and
adding a kernel = one new file + one record, for each package, proven in a temporary copy of the packages with no
other edit (the build, the binding's registry, the harness and the support matrix take it by themselves)."""
import ast
import inspect
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hgemm_common.record import Variant
from hgemm_common.validation import interpreter_numpy_problem
from ptx_kernels import toolchain
from triton_kernels.common import Config
from triton_kernels.contract import OPTIONAL, KernelModule
from triton_kernels.variants import AUTO, RECORDS, kernel_module

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("hgemm_common", "triton_kernels", "ptx_kernels", "compare")


# ---- the Triton kernel-module contract ---------------------------------------------------------------------------
def _required_functions() -> list[str]:
    return [n for n, f in vars(KernelModule).items() if not n.startswith("_") and inspect.isfunction(f)]


def test_the_contract_declares_what_the_callers_use():
    assert _required_functions() == ["configs", "launches", "worth_timing", "inspect_source"]
    assert list(KernelModule.__annotations__) == ["INTERPRETER_CONFIG"]


@pytest.mark.parametrize("record", RECORDS, ids=lambda v: v.name)
def test_every_kernel_module_meets_the_contract(record):
    """Each Triton record's module (the Gluon one too, offered here or not) is a `KernelModule`: every required
    member, each function taking the contract's parameters in order by the same names (with the same defaults; more
    parameters only with defaults), and the optional members, where present, of the kind the callers assume."""
    mod = kernel_module(record)
    assert isinstance(mod, KernelModule), [n for n in [*_required_functions(), "INTERPRETER_CONFIG"]
                                           if not hasattr(mod, n)]
    for name in _required_functions():
        want = list(inspect.signature(getattr(KernelModule, name)).parameters.values())[1:]  # without self
        got = list(inspect.signature(getattr(mod, name)).parameters.values())
        assert [p.name for p in got[:len(want)]] == [p.name for p in want], (name, got)
        assert [p.default for p in got[:len(want)]] == [p.default for p in want], (name, got)
        assert all(p.default is not inspect.Parameter.empty for p in got[len(want):]), (name, got)
    configs = mod.configs()
    assert configs and all(isinstance(c, Config) for c in configs) and isinstance(mod.INTERPRETER_CONFIG, Config)
    for name in ("check_config", "compile_options"):
        if hasattr(mod, name):
            assert len(inspect.signature(getattr(mod, name)).parameters) == 1, name
    assert isinstance(getattr(mod, "MAX_M", 0), int)
    assert getattr(mod, "UNAVAILABLE", None) is None or isinstance(mod.UNAVAILABLE, str)
    assert getattr(mod, "SWEEP_ONLY", None) is None or (isinstance(mod.SWEEP_ONLY, str) and mod.SWEEP_ONLY)
    if hasattr(mod, "prune"):
        assert [p.name for p in inspect.signature(mod.prune).parameters.values()][1:] == ["m", "n", "k", "sms"]
    if hasattr(mod, "choose_config"):
        assert [p.name for p in inspect.signature(mod.choose_config).parameters.values()][:4] == ["m", "n", "k", "sms"]
    if hasattr(mod, "worth_scoring"):
        assert [p.name for p in inspect.signature(mod.worth_scoring).parameters.values()] == \
            [p.name for p in inspect.signature(mod.worth_timing).parameters.values()]
    assert set(OPTIONAL) == {"check_config", "compile_options", "MAX_M", "UNAVAILABLE", "prune", "choose_config",
                             "worth_scoring", "SWEEP_ONLY"}


def test_records_have_typed_fields_only():
    """No untyped bag of facts: every field of the record is declared with a type and documented in record.py."""
    from dataclasses import fields

    assert "extra" not in {f.name for f in fields(Variant)}
    names = [n for v in (AUTO, *RECORDS) for n in (v.name, *v.aliases)]  # what kernel= takes: each names one
    assert all(names) and len(set(names)) == len(names)
    assert all((ROOT / "triton_kernels" / v.file).is_file() for v in RECORDS)


def test_one_name_per_kernel_everywhere():
    """Every record of the support matrix (`python -m compare kernels`) goes by one name: the matrix's row is the
    record's name, its package's kernel= takes that name and gives it back (a Triton plan's kernel, the PTX record),
    and `python -m compare check/bench --kernels NAME` selects the kernel's own entry. A Triton record this process
    does not offer (the Gluon kernel under the interpreter) is refused by kernel= and the CLI saying why, by name."""
    import ptx_kernels
    from compare import matrix, registry
    from triton_kernels import KERNELS
    from triton_kernels.call import check_arguments
    from triton_kernels.variants import NOT_OFFERED

    recs = matrix.records()
    assert [r[0] for r in matrix.rows()] == [f"`{v.name}`" for v in recs]
    for v in recs:
        if v.name in NOT_OFFERED:
            with pytest.raises(ValueError, match=rf"^hgemm: kernel='{v.name}': .*\b{v.name}\b"):
                check_arguments("fp32", v.name)
            with pytest.raises(registry.UnknownKernel, match=rf"no kernel matches '{v.name}' here \(.*{v.name}"):
                registry.select([v.name], gpu=True, arch=90)
            continue
        if v.package == "triton":
            assert check_arguments("fp32", v.name) == ("auto" if v.dispatch else v.name)
            assert v.dispatch or v.name in KERNELS
        else:
            assert ptx_kernels.check_variant(v.name, "fp32", kind=v.kind) is v
        chosen = registry.select([v.name], gpu=True, arch=90, kind=v.kind)
        assert [(k.name, k.record) for k in chosen] == [(v.name, v)], v.name


# ---- one file + one record ---------------------------------------------------------------------------------------
def copy_packages(dest: Path) -> Path:
    """The packages (what `pip install` ships) in dest/repo, without caches."""
    root = dest / "repo"
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, root / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def add_record(variants_py: Path, tuple_name: str, record: str) -> None:
    """Append one record to the tuple literal assigned to `tuple_name` (its first assignment) in a variants file."""
    text = variants_py.read_text()
    node = next(n for n in ast.walk(ast.parse(text)) if isinstance(n, (ast.Assign, ast.AnnAssign))
                and tuple_name in [t.id for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                                   if isinstance(t, ast.Name)] and isinstance(n.value, ast.Tuple))
    lines = text.splitlines(keepends=True)
    end = sum(len(line) for line in lines[:node.value.end_lineno - 1]) + node.value.end_col_offset - 1
    assert text[end] == ")"
    variants_py.write_text(text[:end] + "    " + record.strip() + ",\n" + text[end:])


def changed_files(copy: Path) -> set[str]:
    """The files of the copy that differ from (or are not in) the checkout's packages."""
    out = set()
    for pkg in PACKAGES:
        for p in (copy / pkg).rglob("*"):
            if p.is_file() and "__pycache__" not in p.parts:
                rel = p.relative_to(copy)
                if not (ROOT / rel).is_file() or (ROOT / rel).read_bytes() != p.read_bytes():
                    out.add(rel.as_posix())
    return out


def run_in(copy: Path, args: list[str], env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """A child Python in the copy (its packages first on the path), TRITON_INTERPRET as `env` says."""
    base = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "PYTHONPATH")}
    res = subprocess.run([sys.executable, *args], cwd=copy, env={**base, "PYTHONPATH": str(copy), **(env or {})},
                         capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, (args, res.stdout[-2000:], res.stderr[-3000:])
    return res


# The smallest Triton kernel module the contract allows: a blocked tl.dot kernel with masked edges, any strides,
# fp16 and bf16 (the package's dot and rounding helpers), one configuration.
TRITON_KERNEL = '''"""A throwaway kernel (tests/test_records.py): the smallest module triton_kernels.contract allows."""
import triton
import triton.language as tl

from .common import Config, dot_acc, to_output
from .launch import Spec


def configs():
    return [Config(32, 32, 32, group_m=1, num_warps=4, num_stages=2)]


INTERPRETER_CONFIG = configs()[0]


def worth_timing(m, n, k, sms, tma_in_place):
    return False


@triton.jit
def throwaway_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                     ACC_FP16: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    if ACC_FP16:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + ks[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ks[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(ks[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = dot_acc(a, b, acc, ACC_FP16)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
             to_output(acc, c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def launches(a, b, c, acc_fp16, config):
    m, k = a.shape
    n = b.shape[1]
    grid = (triton.cdiv(m, config.block_m), triton.cdiv(n, config.block_n))
    args = (a, b, c, m, n, k, *a.stride(), *b.stride(), *c.stride(), acc_fp16, config.block_m, config.block_n,
            config.block_k)
    return [Spec(throwaway_kernel, grid, args, config.num_warps, config.num_stages)]


def inspect_source(cfg, dtype="fp16"):
    sig = {"a_ptr": f"*{dtype}", "b_ptr": f"*{dtype}", "c_ptr": f"*{dtype}", "M": "i32", "N": "i32", "K": "i32",
           "stride_am": "i32", "stride_ak": "i32", "stride_bk": "i32", "stride_bn": "i32", "stride_cm": "i32",
           "stride_cn": "i32"}
    consts = dict(ACC_FP16=False, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k)
    return throwaway_kernel, sig, consts, {}
'''

TRITON_RECORD = '''
    Variant("triton_throwaway", "triton", "triton", "throwaway.py", "one of throwaway.configs()",
            "a throwaway kernel (tests/test_records.py)", "tl.dot", native_layouts=LAYOUTS, dtypes=DTYPES,
            promises={"sm_90": ("HGMMA",)})
'''

TRITON_CHILD = '''
import json, torch
import triton_kernels
from compare import registry
from triton_kernels.contract import KernelModule
from triton_kernels.variants import BY_KERNEL, kernel_module

v = BY_KERNEL["triton_throwaway"]
exact = []
for dtype in (torch.float16, torch.bfloat16):
    for layout in ("NN", "NT", "TN", "TT"):
        a = torch.randint(-3, 4, (37, 70)).to(dtype)
        b = torch.randint(-3, 4, (70, 45)).to(dtype)
        a = a.t().contiguous().t() if layout[0] == "T" else a
        b = b.t().contiguous().t() if layout[1] == "T" else b
        for acc in ("fp32", "fp16") if dtype == torch.float16 else ("fp32",):
            c = triton_kernels.hgemm(a, b, kernel="triton_throwaway", acc=acc)
            exact.append(bool(torch.equal(c, (a.double() @ b.double()).to(dtype))))
print(json.dumps(dict(kernels=list(triton_kernels.KERNELS), name=v.name,
                      contract=isinstance(kernel_module(v), KernelModule), exact=exact,
                      entries=[k.name for k in registry.select(["triton_throwaway*"], include_all=True, gpu=False)])))
'''


def test_a_new_triton_kernel_is_one_file_and_one_record(tmp_path):
    """In a copy of the packages: one new kernel module and one record appended to RECORDS, nothing else. The kernel
    is then hgemm's kernel="triton_throwaway" (its record's name), meets the contract, computes exact products (fp16 and bf16, both
    accumulations, every layout) under the interpreter, is in the harness's registry with its configurations, in
    `python -m compare kernels`' support matrix, and passes `python -m compare check`."""
    copy = copy_packages(tmp_path)
    (copy / "triton_kernels" / "throwaway.py").write_text(TRITON_KERNEL)
    add_record(copy / "triton_kernels" / "variants.py", "RECORDS", TRITON_RECORD)
    assert changed_files(copy) == {"triton_kernels/throwaway.py", "triton_kernels/variants.py"}

    if interpreter_numpy_problem():
        pytest.skip(interpreter_numpy_problem())
    interp = {"TRITON_INTERPRET": "1"}
    got = json.loads(run_in(copy, ["-c", TRITON_CHILD], interp).stdout.strip().splitlines()[-1])
    assert "triton_throwaway" in got["kernels"] and got["contract"] and got["name"] == "triton_throwaway"
    assert got["exact"] == [True] * 12
    assert {"triton_throwaway", "triton_throwaway_fp16acc", "triton_throwaway[32x32x32_w4_s2_g1]"} <= \
        set(got["entries"])
    table = run_in(copy, ["-m", "compare", "kernels"], interp).stdout
    assert "| `triton_throwaway` | triton | tl.dot | sm_80 | fp16, bf16 | fp32, fp16 | all four |" in table
    for dtype, names in (("fp16", ["triton_throwaway", "triton_throwaway_fp16acc"]), ("bf16", ["triton_throwaway"])):
        out = run_in(copy, ["-m", "compare", "check", "--dtype", dtype, "--out", str(tmp_path / f"check_{dtype}"),
                            "--kernels", *names], interp).stdout
        assert " 0 failed" in out and f"({len(names)} kernel" in out, out[-1500:]


PTX_RECORD = '''
    Variant("simt_throwaway", "ptx", "simt", "sm80/simt_throwaway.cu", "16x16 threads, 1 output each",
            "a throwaway copy of simt_naive (tests/test_records.py)", isa="fma", block=(16, 16, 1),
            native_layouts=("NN", "NT", "TN", "TT"), slow=True, promises=_each("FFMA", "HFMA2"),
            forbids=_each("HMMA", "LDSM", "LDGSTS", "STSM", *_LOCAL), static_smem=lambda acc, b_col: 0)
'''

PTX_CHILD = '''
import json, sys
from pathlib import Path
import ptx_kernels
from compare import disasm, registry
from ptx_kernels import build, toolchain
from ptx_kernels.variants import BY_NAME, source

v = BY_NAME["simt_throwaway"]
out = dict(sources={str(a): [str(p) for p in build.kernel_sources(a)] for a in (80, 90)},
           file=str(source(v)), checked=ptx_kernels.check_variant("simt_throwaway", "fp16").name,
           entries=[k.name for k in registry.select(["simt_throwaway*"], gpu=True, arch=90)], targets={})
for arch in toolchain.ARCHS:  # sm_80 and sm_90a: each instance, and the record's promises in its SASS
    c = toolchain.compile_cubin(source(v), arch)
    mix = toolchain.instruction_mix(c.sass())
    out["targets"][arch] = dict(instances=sorted([i.dtype, i.acc, i.b_col_major] for i in c.instances()),
                                promised=[op for op in v.promised(arch) if mix[op] > 0],
                                forbidden=[op for op in v.forbids[arch] if mix[op] > 0])
Path(sys.argv[1]).mkdir()
row = disasm.inspect_cuda(disasm.targets(["simt_throwaway"])[0], Path(sys.argv[1]))
out["inspect"] = [row.kernel, row.source, row.mix["FFMA"] > 0]
print(json.dumps(out))
'''


@pytest.mark.skipif(toolchain.find_nvcc() is None, reason="nvcc not installed")
def test_a_new_ptx_kernel_is_one_file_and_one_record(tmp_path):
    """In a copy of the packages: one new kernel file (simt_naive's, renamed, which registers itself with
    HGEMM_VARIANT) and one record appended to VARIANTS, nothing else. The build's source list takes it for every
    GPU, nvcc compiles it for sm_80 and sm_90a into the instances its record offers with the promised SASS, the
    library's registry (what the binding looks launches up in) holds its name once its object is linked beside
    another kernel's, and the harness selects, inspects and tabulates it."""
    from test_ptx_compile import registry_of

    copy = copy_packages(tmp_path)
    csrc = copy / "ptx_kernels" / "csrc"
    text = (csrc / "sm80" / "simt_naive.cu").read_text().replace("simt_naive", "simt_throwaway")
    (csrc / "sm80" / "simt_throwaway.cu").write_text(text)
    add_record(copy / "ptx_kernels" / "variants.py", "VARIANTS", PTX_RECORD)
    assert changed_files(copy) == {"ptx_kernels/csrc/sm80/simt_throwaway.cu", "ptx_kernels/variants.py"}

    env = {"TENSORCORE_HGEMM_BUILD_DIR": str(tmp_path / "build"), "TRITON_INTERPRET": "1"}
    got = json.loads(run_in(copy, ["-c", PTX_CHILD, str(tmp_path / "inspect")], env).stdout.strip().splitlines()[-1])
    new = got["file"]
    assert new == str(csrc / "sm80" / "simt_throwaway.cu")
    assert all(new in srcs for srcs in got["sources"].values())
    assert got["checked"] == "simt_throwaway"
    assert got["entries"] == ["simt_throwaway", "simt_throwaway_fp16acc"]
    for arch, t in got["targets"].items():
        assert t["instances"] == [["fp16", "fp16", None], ["fp16", "fp32", None]], arch
        assert t["promised"] == ["FFMA", "HFMA2"] and t["forbidden"] == [], (arch, t)
    assert got["inspect"] == ["simt_throwaway", "ptx_kernels/csrc/sm80/simt_throwaway.cu", True]
    assert registry_of([Path(new), csrc / "sm80" / "mma_naive.cu"], tmp_path, csrc) == \
        {"simt_throwaway": ("AnyStrides", ("fp16",)), "mma_naive": ("RowMajorA", ("fp16",))}
    table = run_in(copy, ["-m", "compare", "kernels"], env).stdout
    assert "| `simt_throwaway` | ptx | fma | sm_80 | fp16 | fp32, fp16 | all four |" in table
