"""`python -m compare inspect [kernels]`: what each kernel compiles to, side by side, without a GPU.

Triton kernels are compiled for sm_90 with `triton.compile` and a GPUTarget (the specialization a 4096^3 NN
problem gets: 16-divisible sizes and strides, unit inner strides, the first config of the kernel's list); the
hand-written ones with plain nvcc for sm_90a (the fp32-accumulation, B row-major instantiation). For each: the PTX
and SASS written to files, and one row of a table: registers, shared memory, local memory, and the instruction
mix that tells the paths apart (HGMMA = wgmma, HMMA = mma.sync/WMMA, LDSM/STSM = ldmatrix/stmatrix,
LDGSTS = cp.async, UTMALDG/UTMASTG = TMA, BAR = barriers, LDG/STG/LDS/STS = plain loads and stores).
"""
from __future__ import annotations

import json
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ptx_kernels import toolchain
from ptx_kernels.variants import VARIANTS, source

COLUMNS = ("HGMMA", "HMMA", "LDSM", "STSM", "LDGSTS", "UTMALDG", "UTMASTG", "BAR", "LDG", "STG", "LDS", "STS",
           "LDL", "STL")
TRITON_KERNELS = ("triton_blocked", "triton_tma")


@dataclass
class InspectRow:
    kernel: str
    source: str
    arch: str
    registers: int
    smem_static: int
    smem_dynamic: int | None  # Triton: the pipeline's shared memory, requested at launch
    local_bytes: int
    mix: dict = field(default_factory=dict)
    ptx_file: str = ""
    sass_file: str = ""


def _triton_compile(kernel: str):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    import triton_kernels

    cfg = triton_kernels.configs("blocked" if kernel == "triton_blocked" else "tma")[0]
    meta = dict(BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m)
    div16 = [["tt.divisibility", 16]]
    if kernel == "triton_blocked":
        from triton_kernels.blocked import hgemm_kernel as fn
        sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
               "stride_am": "i32", "stride_ak": "constexpr", "stride_bk": "i32", "stride_bn": "constexpr",
               "stride_cm": "i32", "stride_cn": "constexpr"}
        consts = dict(stride_ak=1, stride_bn=1, stride_cn=1, LAYOUT="NN", ACC_FP16=False, INDEX_64=False,
                      EVEN_K=True, **meta)
        attrs = {(i,): div16 for i in (0, 1, 2, 3, 4, 5, 6, 8, 10)}
    else:
        from triton_kernels.tma_persistent import hgemm_tma_kernel as fn
        bm, bn, bk = cfg.block_m, cfg.block_n, cfg.block_k
        sig = {"a_desc": f"tensordesc<fp16[{bm}, {bk}]>", "b_desc": f"tensordesc<fp16[{bk}, {bn}]>",
               "c_desc": f"tensordesc<fp16[{bm}, {bn}]>", "M": "i32", "N": "i32", "K": "i32"}
        consts = dict(A_T=False, B_T=False, ACC_FP16=False, NUM_SMS=132, **meta)
        attrs = {(i,): div16 for i in (3, 4, 5)}
    for name in consts:
        sig.setdefault(name, "constexpr")
    src = ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs)
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                              options=dict(num_warps=cfg.num_warps, num_stages=cfg.num_stages))
    return compiled, cfg


def inspect_triton(kernel: str, out: Path) -> InspectRow:
    compiled, cfg = _triton_compile(kernel)
    ptx, sass = compiled.asm["ptx"], compiled.asm["sass"]
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(compiled.asm["cubin"])
    usage = next(iter(toolchain.cubin_resource_usage(Path(f.name)).values()))
    Path(f.name).unlink()
    (out / f"{kernel}.ptx").write_text(ptx)
    (out / f"{kernel}.sass").write_text(sass)
    mix = toolchain.instruction_mix(sass)
    return InspectRow(kernel, f"triton_kernels ({cfg.name})", "sm_90", usage.registers, usage.smem_bytes,
                      compiled.metadata.shared, usage.stack_bytes, {c: mix.get(c, 0) for c in COLUMNS},
                      f"{kernel}.ptx", f"{kernel}.sass")


def _fp32_nn_instance(names: list[str]) -> str:
    """The fp32-accumulation, B row-major instantiation (mangled ...L3Acc0E...Lb0E...; simt has no B flag)."""
    return next((n for n in names if "L3Acc0E" in n and ("Lb0E" in n or "Lb" not in n)), names[0])


def inspect_cuda(variant, out: Path, arch: str = "sm_90a") -> InspectRow:
    c = toolchain.compile_cubin(source(variant), arch)
    usage = toolchain.cubin_resource_usage(c.cubin)
    fn = _fp32_nn_instance([n for n in usage if "kernel" in n])
    sass = toolchain.disassemble(c.cubin, fn)
    ptx = toolchain.compile_ptx(source(variant), arch)
    (out / f"{variant.name}.ptx").write_text(ptx)
    (out / f"{variant.name}.sass").write_text(sass)
    mix = toolchain.instruction_mix(sass)
    u = usage[fn]
    return InspectRow(variant.name, f"ptx_kernels/csrc/{variant.file}", arch, u.registers, u.smem_bytes, None,
                      u.stack_bytes, {col: mix.get(col, 0) for col in COLUMNS}, f"{variant.name}.ptx",
                      f"{variant.name}.sass")


def _run_outside_interpreter(kernels: list[str] | None, out: Path) -> list[InspectRow]:
    """Under TRITON_INTERPRET=1 `@triton.jit` gives interpreted functions, which triton.compile cannot take:
    compile in a child process without it."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_INTERPRET"] = "0"  # explicit, so nothing below turns it back on
    root = Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    res = subprocess.run([sys.executable, "-m", "compare", "inspect", "--out", str(out), *(kernels or [])],
                         env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"inspect failed: {res.stderr.strip()[-2000:]}")
    return [InspectRow(**r) for r in json.loads((out / "inspect.json").read_text())]


def run_inspect(kernels: list[str] | None, out: Path) -> list[InspectRow]:
    from triton_kernels.validation import interpreter_active

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if interpreter_active():
        return _run_outside_interpreter(kernels, out)
    import os
    from concurrent.futures import ThreadPoolExecutor

    names = kernels or [*TRITON_KERNELS, *(v.name for v in VARIANTS)]
    by_name = {v.name: v for v in VARIANTS}
    for name in names:
        if name not in TRITON_KERNELS and name not in by_name:
            raise ValueError(f"inspect: unknown kernel {name!r}; choose from {[*TRITON_KERNELS, *by_name]}")
    # nvcc and cuobjdump are subprocesses: the CUDA sources compile side by side (Triton's compiles stay serial)
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        cuda = {n: pool.submit(inspect_cuda, by_name[n], out) for n in names if n in by_name}
        triton_rows = {n: inspect_triton(n, out) for n in names if n in TRITON_KERNELS}
        rows = [triton_rows[n] if n in triton_rows else cuda[n].result() for n in names]
    (out / "inspect.json").write_text(json.dumps([asdict(r) for r in rows], indent=1))
    (out / "inspect.md").write_text(format_markdown(rows))
    return rows


def format_markdown(rows: list[InspectRow]) -> str:
    head = ["kernel", "arch", "regs", "smem static", "smem dynamic", "local", *COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        dyn = "-" if r.smem_dynamic is None else str(r.smem_dynamic)
        cells = [f"`{r.kernel}`", r.arch, str(r.registers), str(r.smem_static), dyn, str(r.local_bytes),
                 *(str(r.mix.get(c, 0)) for c in COLUMNS)]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Counts are static SASS instructions (unrolled loops count each copy). smem static includes "
                 "the 1 KB the sm_90 driver reserves per block; Triton's pipeline and the multistage WMMA kernel "
                 "take theirs as dynamic shared memory at launch (the multistage kernel's size is in the GPU "
                 "tests). PTX and SASS of each kernel sit beside this file.")
    return "\n".join(lines) + "\n"
