"""Offline compilation and disassembly of the kernel sources: plain nvcc (no Torch, no GPU) and cuobjdump.

Used by the CPU tests (resource usage, SASS contents) and by `python -m compare inspect`.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .variants import CSRC, csrc_hash

ARCHS = {"sm_80": "-gencode=arch=compute_80,code=sm_80", "sm_90a": "-gencode=arch=compute_90a,code=sm_90a"}
NVCC_FLAGS = ["-std=c++17", "-O3", "-lineinfo"]


class ToolMissing(RuntimeError):
    pass


def find_nvcc() -> str | None:
    cand = shutil.which("nvcc")
    if cand:
        return cand
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    cand = os.path.join(home, "bin", "nvcc")
    return cand if os.path.exists(cand) else None


def find_cuobjdump() -> str | None:
    """cuobjdump from PATH, or the copy the triton wheel ships."""
    cand = shutil.which("cuobjdump")
    if cand:
        return cand
    try:
        import triton
        cand = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
        return str(cand) if cand.exists() else None
    except ImportError:
        return None


@dataclass
class FunctionUsage:
    name: str  # mangled
    registers: int = 0
    smem_bytes: int = 0  # static shared memory
    stack_bytes: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    barriers: int = 0


@dataclass
class Compiled:
    source: Path
    arch: str
    cubin: Path
    log: str
    functions: list[FunctionUsage] = field(default_factory=list)

    def sass(self) -> str:
        return disassemble(self.cubin)


def parse_resource_usage(log: str) -> list[FunctionUsage]:
    """ptxas --resource-usage lines, one FunctionUsage per entry function."""
    funcs: dict[str, FunctionUsage] = {}
    current = None
    for line in log.splitlines():
        m = re.search(r"(?:Compiling entry function|Function properties for) '?([\w$]+)'?", line)
        if m:
            current = funcs.setdefault(m.group(1), FunctionUsage(m.group(1)))
            continue
        if current is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            current.stack_bytes, current.spill_stores, current.spill_loads = map(int, m.groups())
        m = re.search(r"Used (\d+) registers", line)
        if m:
            current.registers = int(m.group(1))
            b = re.search(r"used (\d+) barriers", line)
            s = re.search(r"(\d+) bytes smem", line)
            current.barriers = int(b.group(1)) if b else 0
            current.smem_bytes = int(s.group(1)) if s else 0
    return list(funcs.values())


def _cache_dir() -> Path:
    root = Path(os.environ.get("TENSORCORE_HGEMM_BUILD_DIR", Path.home() / ".cache" / "tensorcore_hgemm"))
    d = root / "cubins"
    d.mkdir(parents=True, exist_ok=True)
    return d


def compile_cubin(source: Path, arch: str, extra_flags: list[str] | None = None,
                  include_dirs: list[Path] | None = None) -> Compiled:
    """nvcc -cubin for one arch ('sm_80' or 'sm_90a'), cached by content; raises CalledProcessError on failure."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise ToolMissing("nvcc not found (PATH, CUDA_HOME)")
    source = Path(source)
    includes = [CSRC, *(include_dirs or [])]
    flags = NVCC_FLAGS + [ARCHS[arch], "--resource-usage", *(extra_flags or [])]
    # every csrc/ file (the extension build's rule), the source itself (it may live outside csrc/), the headers
    # of any extra include folder, and the flags
    h = hashlib.sha256(source.read_bytes())
    for d in include_dirs or []:
        for dep in sorted(Path(d).glob("*.cu*")):
            h.update(dep.name.encode() + dep.read_bytes())
    key = f"{source.stem}-{arch}-{csrc_hash(h.hexdigest(), ' '.join(flags))}"
    cubin, logf = _cache_dir() / f"{key}.cubin", _cache_dir() / f"{key}.log"
    if not (cubin.exists() and logf.exists()):
        cmd = [nvcc, *flags, *(f"-I{d}" for d in includes), "-cubin", "-o", str(cubin) + ".tmp", str(source)]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            raise subprocess.CalledProcessError(res.returncode, cmd, res.stdout, res.stderr)
        logf.write_text(res.stdout + res.stderr)
        os.replace(str(cubin) + ".tmp", cubin)
    log = logf.read_text()
    return Compiled(source, arch, cubin, log, parse_resource_usage(log))


def _cuobjdump(*args: str) -> str:
    tool = find_cuobjdump()
    if tool is None:
        raise ToolMissing("cuobjdump not found (PATH, or the triton wheel's backends/nvidia/bin)")
    return subprocess.run([tool, *args], capture_output=True, text=True, check=True).stdout


def disassemble(cubin: Path, function: str | None = None) -> str:
    """SASS of a cubin (of one function, by mangled name, if given)."""
    return _cuobjdump("-sass", *(["-fun", function] if function else []), str(cubin))


def cubin_resource_usage(cubin: Path) -> dict[str, FunctionUsage]:
    """Registers, static shared memory and stack of each function, read back from the cubin (cuobjdump -res-usage):
    the same numbers for nvcc's and Triton's cubins."""
    out = {}
    for m in re.finditer(r"Function ([\w$]+):\s*REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)",
                         _cuobjdump("-res-usage", str(cubin))):
        name, reg, stack, shared, local = m.group(1), *map(int, m.groups()[1:])
        out[name] = FunctionUsage(name, registers=reg, smem_bytes=shared, stack_bytes=stack + local)
    return out


def compile_ptx(source: Path, arch: str) -> str:
    """The PTX nvcc generates for one source (all its template instantiations)."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise ToolMissing("nvcc not found (PATH, CUDA_HOME)")
    res = subprocess.run([nvcc, *NVCC_FLAGS, ARCHS[arch], f"-I{CSRC}", "-ptx", "-o", "-", str(source)],
                         capture_output=True, text=True, check=True)
    return res.stdout


# SASS opcodes the harness counts, grouped by what they mean for a GEMM.
SASS_OPS = ("HGMMA", "HMMA", "LDSM", "STSM", "LDGSTS", "UTMALDG", "UBLKCP", "BAR", "LDG", "STG", "LDS", "STS",
            "LDL", "STL", "FFMA", "HFMA2")


def instruction_mix(sass: str) -> Counter:
    """Count SASS opcodes (the mnemonic before the first '.'), e.g. HMMA.16816.F32 counts as HMMA.

    Reads both cuobjdump's lines (`/*0040*/  @!P0 HMMA...`) and Triton's nvdisasm lines with control codes
    (`--:-:-:-:1\tHMMA...`).
    """
    counts: Counter = Counter()
    pattern = r"(?:/\*[0-9a-f]{4,}\*/|^[-\w]+:[-\w]+:[-\w]+:[-\w]+:\w+)\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)"
    for m in re.finditer(pattern, sass, flags=re.MULTILINE):
        counts[m.group(1)] += 1
    return counts


def setmaxnreg_targets(sass: str) -> list[int]:
    """The register counts a kernel's warpgroups move to with setmaxnreg (SASS USETMAXREG ... 0xNN), ascending:
    [40, 232] is a producer giving registers away and consumers taking them."""
    return sorted({int(m.group(1), 16) for m in re.finditer(r"USETMAXREG\.[A-Z_.]+\s+(?:UP\d+,\s*)?0x([0-9a-f]+)", sass)})


def loop_bodies(sass: str) -> list[list[str]]:
    """The loops of one function's SASS (cuobjdump lines): for each backward branch, the instruction lines from its
    target to the branch, in order. A pipelined GEMM's main loop is the one holding the HMMAs."""
    lines = [(int(m.group(1), 16), m.group(0)) for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+[^;]*;", sass)]
    loops = []
    for off, line in lines:
        m = re.search(r"\bBRA\s+(?:`\(\.L_x_\d+\)|0x([0-9a-f]+))", line)
        if m and m.group(1) and int(m.group(1), 16) <= off:
            target = int(m.group(1), 16)
            loops.append([text for o, text in lines if target <= o <= off])
    return loops



def operand_lead(body: list[str]) -> int | None:
    """How far ahead a loop loads its MMA operands: over every LDSM of a loop body (loop_bodies), the number of
    instructions from it to the first HMMA that reads a register it wrote, counted around the loop (the last
    instructions feed the first), minimised. A small number means an MMA issued right behind the shared-memory
    load it waits for (an LDSM takes some 30 cycles). None when no HMMA reads an LDSM's registers."""
    ops = []
    for line in body:
        m = re.search(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);", line)
        regs = [int(r) for r in re.findall(r"\bR(\d+)", m.group(2))] if m else []
        ops.append((m.group(1) if m else "", regs))
    n, lead = len(ops), None
    for i, (op, regs) in enumerate(ops):
        if not op.startswith("LDSM") or not regs:
            continue
        count = 4 if op.endswith(".4") else 2 if op.endswith(".2") else 1  # LDSM.16.M88.4: four registers
        written = set(range(regs[0], regs[0] + count))
        for d in range(1, n + 1):
            op2, regs2 = ops[(i + d) % n]
            if op2.startswith("HMMA") and len(regs2) >= 3:
                read = set(range(regs2[1], regs2[1] + 4)) | set(range(regs2[2], regs2[2] + 2))  # A: 4, B: 2 regs
                if written & read:
                    lead = d if lead is None else min(lead, d)
                    break
            elif regs2 and regs2[0] in written:  # overwritten before any MMA read it
                break
    return lead
