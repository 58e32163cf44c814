"""Device SASS of every CUDA source, dumped per function, and compared between two dumps.

A refactor that moves code (files, headers, comments) must not change what runs: dump before, dump after, compare.

    python scripts/sass_diff.py dump /tmp/sass_before     # every .cu under ptx_kernels/csrc and tests/cuda
    python scripts/sass_diff.py dump --triton 2 /tmp/sass_before   # and every Triton record's first 2 configs
    python scripts/sass_diff.py compare /tmp/sass_before /tmp/sass_after

`dump` compiles each source with the project's flags (ptx_kernels.toolchain: -std=c++17 -O3 -lineinfo) for sm_80 and
sm_90a, includes csrc/ and every folder under it, and writes one file per (arch, function): cuobjdump -sass with
the lines that legitimately move with file paths (line info, comments, headers) stripped, keeping each instruction
and its encoding. Functions are keyed by mangled name and arch, not by file, so a kernel may move between files.
`--triton N` also compiles every Triton record's first N configurations (`triton.compile` for sm_90 and, the
records offered there, sm_80; fp16 with fp32 and fp16 accumulation, bf16 with fp32; Triton's cache bypassed) and
writes their SASS the same way, one file per (arch, record, config, dtype, accumulation).
`compare` prints a verdict per function and exits 1 on any difference or any function missing on either side.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ptx_kernels import toolchain  # noqa: E402

CSRC = ROOT / "ptx_kernels" / "csrc"
# Sources outside the extension that include its headers, with the defines each build uses.
EXTRA = [("tests/cuda/wrappers.cu", []), ("tests/cuda/wrappers.cu", ["-DWITH_STMATRIX"]),
         ("tests/cuda/mbarrier_pipeline.cu", []), ("tests/cuda/wmma_fragment_buffers.cu", [])]
SKIP = {("sm_80", "-DWITH_STMATRIX")}  # the stmatrix guard rejects that build by design


def min_arch(src: Path) -> int:
    """The compute capability (x10) a csrc source needs: its record's min_arch or its lab entry's (80 otherwise);
    an sm_90a-only kernel is not built for sm_80, where its wrappers' arch guards reject it by design."""
    from ptx_kernels.variants import LAB_SOURCES, VARIANTS, source

    needs = {source(v).resolve(): v.min_arch for v in VARIANTS}
    needs.update({(CSRC / f).resolve(): a for f, a in LAB_SOURCES.items()})
    return needs.get(src.resolve(), 80)


def sources() -> list[tuple[Path, list[str]]]:
    out = [(p, []) for p in sorted(CSRC.rglob("*.cu"))]
    return out + [(ROOT / f, d) for f, d in EXTRA if (ROOT / f).exists()]


# The tile sweeps include cublas_v2.h for their host code; where the toolkit lacks it (a CPU machine with nvcc only)
# this compile-only stand-in declares what they call: device SASS does not depend on it.
CUBLAS_STUB = """#pragma once
#include <cuda_runtime.h>
#include <library_types.h>
typedef struct cublasContext* cublasHandle_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUBLAS_COMPUTE_16F = 64, CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;
typedef int cublasStatus_t;
cublasStatus_t cublasCreate(cublasHandle_t*);
cublasStatus_t cublasDestroy(cublasHandle_t);
cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                            cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
"""


def include_dirs(stub_dir: Path) -> list[Path]:
    dirs = [CSRC, ROOT / "scripts"]
    nvcc = Path(toolchain.find_nvcc()).resolve()
    if not any((d / "cublas_v2.h").exists() for d in (nvcc.parent.parent / "include",
                                                        nvcc.parent.parent / "targets")):
        stub_dir.mkdir(parents=True, exist_ok=True)
        (stub_dir / "cublas_v2.h").write_text(CUBLAS_STUB)
        dirs.append(stub_dir)
    return dirs


def split_functions(sass: str) -> dict[str, str]:
    """cuobjdump -sass text -> {mangled function: its instruction lines (opcode text and encodings only)}."""
    funcs: dict[str, list[str]] = {}
    current = None
    for line in sass.splitlines():
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            current = funcs.setdefault(m.group(1), [])
            continue
        if current is None:
            continue
        s = line.strip()
        if s.startswith("/*") and re.match(r"/\*[0-9a-f]{4,}\*/", s) or re.fullmatch(r"/\* 0x[0-9a-f]{16} \*/", s):
            current.append(re.sub(r"\s+", " ", s))
        elif s.startswith(".L_x_") or s.startswith("..........") or s.startswith("."):
            current.append(s)
    return {k: "\n".join(v) + "\n" for k, v in funcs.items()}


def dump(out: Path, jobs: int) -> int:
    out.mkdir(parents=True, exist_ok=True)
    work = [(src, d, arch) for src, d in sources() for arch in toolchain.ARCHS
            if not any((arch, x) in SKIP for x in d) and int(arch[3:5]) >= min_arch(src)]

    incs = include_dirs(out.parent / f".{out.name}_cublas_stub")

    def one(job):
        src, defines, arch = job
        c = toolchain.compile_cubin(src, arch, extra_flags=defines, include_dirs=incs)
        return job, split_functions(c.sass())

    seen: dict[tuple[str, str], str] = {}
    failed = 0
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for fut in [pool.submit(one, j) for j in work]:
            try:
                (src, defines, arch), funcs = fut.result()
            except subprocess.CalledProcessError as e:
                print(f"FAIL compile: {' '.join(e.cmd[-1:])}\n{e.stderr[-2000:]}")
                failed += 1
                continue
            tag = src.stem + "".join(defines)
            for name, text in funcs.items():
                key = (arch, name)
                if key in seen and seen[key] != text:  # same function from two sources must agree (header code)
                    name = f"{name}@{tag}"
                seen.setdefault((arch, name), text)
                (out / f"{arch}__{name}.sass").write_text(text)
            print(f"dumped {src.relative_to(ROOT)} {' '.join(defines)} {arch}: {len(funcs)} functions")
    return 1 if failed else 0


_ANON = re.compile(r"(\d+)_GLOBAL__N__")


def anonymous_namespaces_named(text: str) -> str:
    """nvcc names a file's anonymous namespace after a hash of the source's path (and, in some builds, its process
    id): `_GLOBAL__N__<hash>_<n>_wgmma_sp_cu_<hash>[_<pid>]`. Two checkouts in different folders get different names
    for the same function; this writes each such name as `NS[wgmma_sp]` (its length prefix read, so the length of
    the next mangled name is not taken for part of it)."""
    out, pos = [], 0
    for m in _ANON.finditer(text):
        if m.start() < pos:
            continue
        end = m.end(1) + int(m.group(1))
        found = re.match(r"_GLOBAL__N__[0-9a-f]{8}_\d+_(\w+?)_cu_[0-9a-f]{8}(_\d+)?$", text[m.end(1):end])
        if found:
            out += [text[pos:m.start()], f"NS[{found.group(1)}]"]
            pos = end
    return "".join(out) + text[pos:]


def compare(before: Path, after: Path) -> int:
    b = {anonymous_namespaces_named(p.name): anonymous_namespaces_named(p.read_text()) for p in before.glob("*.sass")}
    a = {anonymous_namespaces_named(p.name): anonymous_namespaces_named(p.read_text()) for p in after.glob("*.sass")}
    bad = 0
    for name in sorted(b.keys() | a.keys()):
        if name not in a:
            verdict = "MISSING after"
        elif name not in b:
            verdict = "NEW (not in before)"
        elif a[name] == b[name]:
            verdict = "identical"
        else:
            verdict = "DIFFERENT"
        bad += verdict != "identical"
        print(f"{verdict:20s} {name[:-5]}")
    print(f"{len(b.keys() & a.keys())} compared, {bad} not identical")
    return 1 if bad else 0


def dump_triton(out: Path, n_configs: int) -> int:
    """SASS of the Triton records' first n_configs configurations (see the module's header), without comment lines
    (they carry file paths). Run outside TRITON_INTERPRET (the interpreter replaces the kernels)."""
    import importlib
    import os

    os.environ["TRITON_ALWAYS_COMPILE"] = "1"
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from triton_kernels.triton_internals import COMPILE_OPTIONS
    from triton_kernels.variants import VARIANTS

    out.mkdir(parents=True, exist_ok=True)
    count = 0
    for v in VARIANTS:
        mod = importlib.import_module(f"triton_kernels.{Path(v.file).stem}")  # the record's kernel module
        for arch in (90, 80):
            if arch < v.min_arch:
                continue
            for cfg in mod.configs()[:n_configs]:
                for dtype, acc in (("fp16", "fp32"), ("fp16", "fp16"), ("bf16", "fp32")):
                    fn, sig, consts, attrs = mod.inspect_source(cfg, dtype)
                    consts = dict(consts, ACC_FP16=acc == "fp16")
                    for name in consts:
                        sig.setdefault(name, "constexpr")
                    source_type = ASTSource
                    if fn.is_gluon():
                        from triton.experimental.gluon._runtime import GluonASTSource as source_type
                    options = getattr(mod, "compile_options",
                                      lambda c: dict(num_warps=c.num_warps, num_stages=c.num_stages))(cfg)
                    k = triton.compile(source_type(fn=fn, signature=sig, constexprs=consts, attrs=attrs),
                                       target=GPUTarget("cuda", arch, 32), options={**COMPILE_OPTIONS, **options})
                    sass = "".join(line + "\n" for line in k.asm["sass"].splitlines()
                                   if not line.lstrip().startswith("//"))
                    (out / f"triton_sm_{arch}__{v.name}__{cfg.name}__{dtype}_{acc}.sass").write_text(sass)
                    count += 1
    print(f"dumped {count} Triton compiles")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("out", type=Path)
    d.add_argument("-j", "--jobs", type=int, default=2)
    d.add_argument("--triton", type=int, default=0, metavar="N", help="also the Triton records' first N configs")
    c = sub.add_parser("compare")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = ap.parse_args()
    if args.cmd == "compare":
        return compare(args.before, args.after)
    return dump(args.out, args.jobs) | (dump_triton(args.out, args.triton) if args.triton else 0)


if __name__ == "__main__":
    sys.exit(main())
