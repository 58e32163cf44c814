"""Offline compilation and disassembly of the kernel sources: plain nvcc (no Torch, no GPU) and cuobjdump.

Used by the CPU tests (resource usage, SASS contents) and by `python -m compare inspect`.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from hgemm_common.errors import HgemmValueError

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


@functools.lru_cache(maxsize=1)
def nvcc_version() -> str:
    """`nvcc --version`'s release line ("" without nvcc): what caches of nvcc's output key on."""
    nvcc = find_nvcc()
    if nvcc is None:
        return ""
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    return next((line.strip() for line in out.splitlines() if "release" in line), out.strip())


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
    includes: tuple[Path, ...] = ()  # the include folders it was compiled with
    ptx_file: Path | None = None  # the PTX it was assembled from (`assemble`); None: compile_ptx's of the source
    _sass: str | None = field(default=None, init=False, repr=False, compare=False)

    def sass(self) -> str:
        """The whole cubin's SASS, disassembled once per Compiled (cuobjdump of a cubin with many instantiations is
        slow, and the compile tests read it again and again)."""
        if self._sass is None:
            self._sass = disassemble(self.cubin)
        return self._sass

    def ptx(self) -> str:
        """The PTX module of this compile: the one it was assembled from, or the source's (compile_ptx)."""
        return self.ptx_file.read_text() if self.ptx_file else compile_ptx(self.source, self.arch)

    def instances(self) -> list["Instance"]:
        """The kernel instances the source compiled to (`instances`)."""
        return instances(self)


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


def cache_root() -> Path:
    """The project's cache folder: $TENSORCORE_HGEMM_BUILD_DIR, else ~/.cache/tensorcore_hgemm."""
    return Path(os.environ.get("TENSORCORE_HGEMM_BUILD_DIR", Path.home() / ".cache" / "tensorcore_hgemm"))


def _cache_dir() -> Path:
    d = cache_root() / "cubins"
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
        import tempfile

        with tempfile.TemporaryDirectory() as keep:  # the PTX this compile makes on the way, kept for compile_ptx
            cmd = [nvcc, *flags, *(f"-I{d}" for d in includes), "-keep", f"-keep-dir={keep}", "-cubin", "-o",
                   str(cubin) + ".tmp", str(source)]
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0:
                raise subprocess.CalledProcessError(res.returncode, cmd, res.stdout, res.stderr)
            ptx = Path(keep) / f"{source.stem}.ptx"
            if not extra_flags and not include_dirs and ptx.exists():
                os.replace(ptx, _ptx_cache(source, arch))
        logf.write_text(res.stdout + res.stderr)
        os.replace(str(cubin) + ".tmp", cubin)
    log = logf.read_text()
    return Compiled(source, arch, cubin, log, parse_resource_usage(log), tuple(includes))


def assemble(source: Path, arch: str, ptx: Path, entries: list[str] | None = None) -> Compiled:
    """ptxas of a PTX module (compile_ptx's file), as nvcc runs it for a cubin, for the entry functions `entries` only
    (ptxas -e; None: all of them): a cubin of one kernel costs that kernel's assembly, not the module's. Cached by
    the PTX's content, the arch and the entries."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise ToolMissing("nvcc not found (PATH, CUDA_HOME)")
    cmd = [str(Path(nvcc).parent / "ptxas"), f"-arch={arch}", "-m64", "-v", "--generate-line-info",
           *(f"--entry={e}" for e in entries or ())]
    key = hashlib.sha256(Path(ptx).read_bytes() + " ".join(cmd[1:]).encode()).hexdigest()[:12]
    cubin = _cache_dir() / f"{Path(source).stem}-{arch}-{key}.cubin"
    logf = cubin.with_suffix(".log")
    if not (cubin.exists() and logf.exists()):
        res = subprocess.run([*cmd, str(ptx), "-o", f"{cubin}.tmp"], capture_output=True, text=True)
        if res.returncode != 0:
            raise subprocess.CalledProcessError(res.returncode, cmd, res.stdout, res.stderr)
        logf.write_text(res.stdout + res.stderr)
        os.replace(f"{cubin}.tmp", cubin)
    log = logf.read_text()
    return Compiled(Path(source), arch, cubin, log, parse_resource_usage(log), (CSRC,), Path(ptx))


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


# ---- the kernel instances of a compiled source, from the compiler's own listing ----------------------------------
# A kernel file's instances are the entry functions its cubin holds (whatever its launchers instantiate: tiles,
# epilogues, element types); each is named by its template arguments, read from the mangled name (demangled by
# c++filt) and matched with the parameter names of the `template <...> __global__` declaration in the source or
# the headers it includes. Nothing about them is written in the records.
ACC_VALUES = {0: "fp32", 1: "fp16"}  # hgemm.cuh: enum class Acc : int { F32 = 0, F16 = 1 }
DTYPE_OF_ELEMENT = {"__half": "fp16", "half": "fp16", "__nv_bfloat16": "bf16"}
ELEMENT_OF_DTYPE = {"fp16": "half", "bf16": "__nv_bfloat16"}
ACC_OF_NAME = {name: int(value) for value, name in ACC_VALUES.items()}


def only_flags(dtype: str, acc: str, b_col: bool | None = None, a_col: bool | None = None) -> list[str]:
    """nvcc flags that build only the instantiations of one element type and accumulation (and B or A layout, where
    given) of a kernel file (host/launch.h: builds; host/registry.h: HGEMM_ONLY_ELEMENT; host/parts.h: the units'
    explicit instantiations, HGEMM_ONLY_BF16 and HGEMM_ONLY_A_COL): what `compare inspect`
    compiles to show one of them. Instantiations of templates these do not reach (a kernel's own acc switch) stay."""
    flags = [f"-DHGEMM_ONLY_ELEMENT={ELEMENT_OF_DTYPE[dtype]}", f"-DHGEMM_ONLY_BF16={int(dtype == 'bf16')}",
             f"-DHGEMM_ONLY_ACC={ACC_OF_NAME[acc]}"]
    flags += [f"-DHGEMM_ONLY_B_COL={int(b_col)}"] if b_col is not None else []
    return flags + ([f"-DHGEMM_ONLY_A_COL={int(a_col)}"] if a_col is not None else [])

# A template argument's value as the demanglers spell it. The same mangled literal reads differently by tool: GNU
# c++filt and llvm-cxxfilt write a bool `true`/`false`, an int `128`, other integer types with a suffix (`128u`,
# `4ul`, `5ll`) or, for the short and char types, a cast (`(short)8`); the CUDA toolkit's cu++filt (CUDA 13.0)
# writes every literal as a cast: `(bool)1`, `(int)128`, `(unsigned int)128`, `(int)-5`. Enums are `(Acc)1` or
# `(hgemm::Acc)1` to all of them.
_CAST_LITERAL = re.compile(r"\(\s*((?:[A-Za-z_][\w:]*\s*)+)\)\s*(-?\d+)")  # (bool)0, (hgemm::Acc)1, (unsigned char)1
_INT_LITERAL = re.compile(r"(-?\d+)(?:[uU](?:ll|LL|l|L)?|(?:ll|LL|l|L)[uU]?)?")  # 128, -5, 128u, 4ul, 5ll, 6ull


def template_value(text: str) -> bool | int | str:
    """One template argument, parsed from any demangler's spelling: a bool (`true`, `(bool)1`), an integer or an
    enum's value (`128`, `128u`, `(int)128`, `(Acc)1`, `(hgemm::Acc)1`), or else a type, returned as one canonical
    spelling with namespaces dropped and the literals inside it written plainly (`ns::Tile<(int)256, 4u>` ->
    `Tile<256, 4>`), so that the same instance compares equal whichever tool named it."""
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    m = _CAST_LITERAL.fullmatch(text)
    if m:
        kind, value = m.group(1).split()[-1].rpartition("::")[2], int(m.group(2))
        if kind == "bool":
            if value not in (0, 1):
                raise HgemmValueError(f"template argument {text!r}: a bool literal must be 0 or 1")
            return bool(value)
        return value
    m = _INT_LITERAL.fullmatch(text)
    if m:
        return int(m.group(1))
    text = _QUALIFIER.sub("", text)
    lt = text.find("<")
    if lt < 0 or not text.endswith(">"):
        return " ".join(text.split())
    inner = [template_value(a) for a in _split_top(text[lt + 1:-1])]
    return f"{text[:lt].strip()}<{', '.join(_spelled(v) for v in inner)}>"


def _spelled(value: bool | int | str) -> str:
    """A parsed template argument written back in one spelling (GNU c++filt's: `true`, `128`, `Tile<256, 4>`)."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


@dataclass(frozen=True)
class Instance:
    """One compiled instance of a kernel template."""
    name: str  # mangled, as the cubin names the function (`disassemble(cubin, name)`)
    kernel: str  # the template's name: "kernel", "wgmma_persistent_kernel"
    # template arguments by parameter name, as the demangler spells them, namespaces dropped (read them through
    # `arg`, which parses every demangler's spelling):
    # {"E": "__half", "T": "Tile<256, 4, 1, 128, 64>", "ACC": "(Acc)0", "B_COL": "false", "TMA_STORE": "true"}
    # or, from cu++filt, {..., "B_COL": "(bool)0", "TMA_STORE": "(bool)1"}
    args: dict = field(hash=False, compare=False)
    signature: str = ""  # the demangled name, parameters included

    def arg(self, name: str) -> bool | int | str | None:
        """The template argument `name`, parsed (`template_value`); None if the template has no such parameter."""
        return template_value(self.args[name]) if name in self.args else None

    def flag(self, name: str) -> bool | None:
        """A bool template argument (some demanglers spell a bool as a plain 0/1); None if there is no such one."""
        value = self.arg(name)
        if value is None:
            return None
        if isinstance(value, str) or value not in (0, 1):
            raise HgemmValueError(f"{self.kernel}: template argument {name}={self.args[name]!r} is not a bool")
        return bool(value)

    @property
    def dtype(self) -> str:
        """"fp16" or "bf16": the element type E where the template has one, else the one its parameters name."""
        if "E" in self.args:
            return DTYPE_OF_ELEMENT[self.arg("E")]
        return "bf16" if "__nv_bfloat16" in self.signature else "fp16"

    @property
    def acc(self) -> str | None:
        """The ACC argument (None: a helper kernel with no accumulation parameter, such as a split-K reduction)."""
        value = self.arg("ACC")
        if value is None:
            return None
        if isinstance(value, str) or value not in ACC_VALUES:
            raise HgemmValueError(f"{self.kernel}: template argument ACC={self.args['ACC']!r} is no Acc value")
        return ACC_VALUES[int(value)]

    @property
    def b_col_major(self) -> bool | None:
        """The B_COL argument (None: a kernel with no B layout parameter reads any strides)."""
        return self.flag("B_COL")

    @property
    def template(self) -> str:
        """"wgmma_persistent_kernel<__half, Tile<256, 4, 1, 128, 64>, (Acc)0, false, true>"."""
        return f"{self.kernel}<{', '.join(self.args.values())}>" if self.args else self.kernel

    def matches(self, want: dict[str, str]) -> bool:
        """Whether the instance's template arguments are those `want` names (in any demangler's spelling: `true`
        matches `(bool)1`, `Tile<256, 4>` matches `Tile<(int)256, (int)4>`)."""
        return all(k in self.args and self.arg(k) == template_value(v) for k, v in want.items())


_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
# `template <...> __global__ void [__launch_bounds__(...)] name(`: the parameter list holds no braces or semicolons,
# so a match cannot run from an earlier struct template into a kernel's declaration
_KERNEL_TEMPLATE = re.compile(r"template\s*<([^;{}]*?)>\s*__global__\s+void\s+"
                              r"(?:__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)\s*)?(\w+)\s*\(")
# a namespace or class qualifier: GNU c++filt and llvm-cxxfilt write an anonymous namespace `(anonymous namespace)::`,
# cu++filt `<unnamed>::`
_QUALIFIER = re.compile(r"(?:\(anonymous namespace\)|<unnamed>|[A-Za-z_]\w*)::")


def _split_top(text: str) -> list[str]:
    """A comma-separated list split at its top level (commas inside <...> or (...) stay)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch in "<("
        depth -= ch in ">)"
        if ch == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    return out + ([text[start:].strip()] if text.strip() else [])


def project_files(source: Path, includes: tuple[Path, ...] = ()) -> list[Path]:
    """`source` and the project headers it includes, transitively (`#include "..."` resolved against the including
    file's folder, then `includes`), each once, in the order they are first reached: what a compile of it reads
    besides the toolkit's headers."""
    seen: list[Path] = []

    def read(path: Path) -> None:
        if path in seen:
            return
        seen.append(path)
        for inc in _INCLUDE.findall(path.read_text()):
            for d in (path.parent, *includes):
                if (d / inc).is_file():
                    read((d / inc).resolve())
                    break

    read(Path(source).resolve())
    return seen


def kernel_templates(source: Path, includes: tuple[Path, ...] = ()) -> dict[str, list[str]]:
    """{kernel template name: its parameter names} of every `template <...> __global__` declared in `source` or the
    project headers it includes (`project_files`)."""
    found: dict[str, list[str]] = {}
    for path in project_files(source, includes):
        for params, name in _KERNEL_TEMPLATE.findall(path.read_text()):
            found[name] = [p.split("=")[0].split()[-1] for p in _split_top(params)]
    return found


def find_demangler() -> str | None:
    """cu++filt (the CUDA toolkit's) or binutils' c++filt."""
    nvcc = find_nvcc()
    cands = [shutil.which("cu++filt"), nvcc and str(Path(nvcc).parent / "cu++filt"), shutil.which("c++filt")]
    return next((c for c in cands if c and os.path.exists(c)), None)


def demangle(names: list[str]) -> list[str]:
    tool = find_demangler()
    if tool is None:
        raise ToolMissing("neither cu++filt nor c++filt found (the CUDA toolkit, binutils)")
    out = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True, check=True).stdout
    return out.splitlines()[:len(names)]


def instances(c: Compiled) -> list[Instance]:
    """The instances of the source's kernel templates in a compiled cubin, in the cubin's order (cuobjdump's
    listing), each with its template arguments by name."""
    return instances_of(c.source, c.includes, list(cubin_resource_usage(c.cubin)))


def instances_of(source: Path, includes: tuple[Path, ...], names: list[str]) -> list[Instance]:
    """`instances` of the functions `names` (mangled) of a compile of `source`, in their order."""
    templates = kernel_templates(source, includes)
    found = (instance_of(mangled, plain, templates) for mangled, plain in zip(names, demangle(names)))
    return [i for i in found if i is not None]


def instance_of(mangled: str, demangled: str, templates: dict[str, list[str]]) -> Instance | None:
    """The Instance a demangled entry name (any demangler's spelling) names, its template arguments matched with the
    parameter names of `templates` (`kernel_templates`); None if it is no instance of those templates (a device
    function, a lab kernel)."""
    plain = _QUALIFIER.sub("", demangled)
    m = re.match(r"(?:void\s+)?(\w+)(<?)", plain)
    if m is None or m.group(1) not in templates:
        return None
    args = []
    if m.group(2):
        depth, i = 1, m.end()
        while depth:
            depth += (plain[i] == "<") - (plain[i] == ">")
            i += 1
        args = _split_top(plain[m.end():i - 1])
    return Instance(mangled, m.group(1), dict(zip(templates[m.group(1)], args)), plain)


def _ptx_cache(source: Path, arch: str, extra_flags: list[str] | None = None) -> Path:
    """Where compile_ptx keeps a source's PTX: keyed like the cubins (every csrc/ file, the source, the flags);
    compile_cubin's plain compiles leave it there on the way (nvcc -keep), so inspect runs the front end once."""
    key = csrc_hash(hashlib.sha256(Path(source).read_bytes()).hexdigest(),
                    " ".join([*NVCC_FLAGS, ARCHS[arch], *(extra_flags or ())]))
    return _cache_dir() / f"{Path(source).stem}-{arch}-{key}.ptx"


def compile_ptx(source: Path, arch: str, extra_flags: list[str] | None = None) -> str:
    """The PTX nvcc generates for one source (all its template instantiations, or those `extra_flags` leave:
    only_flags), cached (_ptx_cache: compile_ptx_file)."""
    return compile_ptx_file(source, arch, extra_flags).read_text()


def compile_ptx_file(source: Path, arch: str, extra_flags: list[str] | None = None) -> Path:
    """compile_ptx's cached file."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise ToolMissing("nvcc not found (PATH, CUDA_HOME)")
    source = Path(source)
    cached = _ptx_cache(source, arch, extra_flags)
    if not cached.exists():
        res = subprocess.run([nvcc, *NVCC_FLAGS, ARCHS[arch], f"-I{CSRC}", *(extra_flags or ()), "-ptx", "-o", "-",
                              str(source)], capture_output=True, text=True, check=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(res.stdout)
        os.replace(tmp, cached)
    return cached


def ptx_entries(ptx: str) -> list[str]:
    """The entry functions (kernels) of a PTX module, mangled, in its order."""
    return re.findall(r"^\s*(?:\.visible\s+)?\.entry\s+([\w$]+)", ptx, re.MULTILINE)


# SASS opcodes the harness counts, grouped by what they mean for a GEMM.
SASS_OPS = ("HGMMA", "HMMA", "LDSM", "STSM", "LDGSTS", "UTMALDG", "UBLKCP", "BAR", "LDG", "STG", "LDS", "STS",
            "LDL", "STL", "FFMA", "HFMA2")


@dataclass(frozen=True)
class Instruction:
    """One instruction of a SASS or PTX listing, as the parsers below read it."""
    line: int  # index of its text line in the listing
    op: str  # the whole mnemonic: "HMMA.16816.F32", "ld.shared.v4.u32"
    pred: str  # guard predicate, "" if none: "@!P0", "@%p3"
    args: str  # operands, up to the ';'
    text: str  # as matched (cuobjdump: from its /*offset*/ to the ';'), what loop_bodies returns
    offset: int | None = None  # cuobjdump's byte offset
    target: str | None = None  # a branch's target: a label, or a cuobjdump offset in hex

    @property
    def base(self) -> str:
        """The mnemonic before the first '.': what the instruction mix counts (HMMA.16816.F32 -> HMMA)."""
        return self.op.split(".")[0]


# cuobjdump's lines (`/*0040*/  @!P0 HMMA...`) and Triton's nvdisasm lines with control codes
# (`--:-:-:-:1\tHMMA...`); labels (`LBB6:`, `.L_x_3:`) on lines of their own
_SASS_LINE = re.compile(r"(?:/\*([0-9a-f]{4,})\*/|^[-\w]+:[-\w]+:[-\w]+:[-\w]+:\w+)\s+(@!?U?P\w+\s+)?"
                        r"([A-Z][A-Z0-9_]*(?:\.[\w]+)*)\s*([^;]*);?")
_SASS_LABEL = re.compile(r"^\s*([.\w]+):\s*$")
_SASS_BRANCH = re.compile(r"^(?:0x([0-9a-f]+)|`?\(?([.\w]+)\)?)")
_PTX_LINE = re.compile(r"^\s*(@!?%?\w+\s+)?([a-z][\w.:]*)\s*([^;]*);")
_PTX_LABEL = re.compile(r"^\s*(\$?[\w$]+):\s*(?://.*)?$")


def sass_instructions(sass: str) -> list[Instruction]:
    """Every instruction of a SASS listing, in order. The one SASS parser: the instruction mix, the loops and the
    study page's listings all read it."""
    out = []
    for i, line in enumerate(sass.splitlines()):
        m = _SASS_LINE.search(line)
        if not m:
            continue
        op, args = m.group(3), m.group(4).strip()
        target = None
        if op.split(".")[0] in ("BRA", "BRX", "JMP"):
            b = _SASS_BRANCH.search(args.split(",")[-1].strip())
            target = b and (b.group(1) or b.group(2))
        out.append(Instruction(i, op, (m.group(2) or "").strip(), args, line[m.start():m.end()].strip(),
                               int(m.group(1), 16) if m.group(1) else None, target))
    return out


def instruction_mix(sass: str) -> Counter:
    """Count SASS opcodes (the mnemonic before the first '.'), e.g. HMMA.16816.F32 counts as HMMA.

    Reads both cuobjdump's lines (`/*0040*/  @!P0 HMMA...`) and Triton's nvdisasm lines with control codes
    (`--:-:-:-:1\tHMMA...`).
    """
    return Counter(i.base for i in sass_instructions(sass))


def ptx_instructions(ptx: str) -> list[Instruction]:
    """Every instruction of a PTX listing (one function's body is enough), in order; directives (.reg, .loc),
    labels, braces and comments are not instructions."""
    out = []
    for i, line in enumerate(ptx.splitlines()):
        code = line.split("//")[0]
        m = _PTX_LINE.match(code)
        if not m:
            continue
        op, args = m.group(2), m.group(3).strip()
        target = args.split(",")[-1].strip() if op.split(".")[0] == "bra" else None
        out.append(Instruction(i, op, (m.group(1) or "").strip(), args, code.strip(), None, target))
    return out


def _anonymous(mangled: str) -> str:
    """A regex of a mangled name in which an anonymous namespace (`57_GLOBAL__N__8cea7706_19_x_cu_d5970f7b_7930`,
    its tail different in every nvcc run: the cubin's and the PTX's compiles differ) matches any other."""
    m = re.search(r"(\d+)_GLOBAL__N__", mangled)
    if not m:
        return re.escape(mangled) + r"\b"
    end = m.start(1) + len(m.group(1)) + int(m.group(1))
    return re.escape(mangled[:m.start()]) + r"\d+_GLOBAL__N__\w+?" + re.escape(mangled[end:]) + r"\b"


def ptx_function(ptx: str, name: str | None = None) -> str:
    """One entry function of a PTX module (the first one if no name is given), from its `.entry` line to its
    closing brace: nvcc's PTX of a source holds every template instantiation."""
    lines = ptx.splitlines()
    pattern = re.compile(rf"\.entry\s+{_anonymous(name) if name else ''}")
    start = next((i for i, line in enumerate(lines) if pattern.search(line)), None)
    if start is None:
        raise KeyError(f"no .entry {name} in the PTX")
    depth, end = 0, len(lines) - 1
    for i in range(start, len(lines)):  # braces balance: the body's, inline asm's scopes, vector operands'
        code = lines[i].split("//")[0]
        depth += code.count("{") - code.count("}")
        if depth == 0 and "}" in code:
            end = i
            break
    return "\n".join(lines[start:end + 1])


def ptx_files(ptx: str) -> dict[int, str]:
    """The module's `.file N "path"` table: N -> path (what `.loc N line col` points at)."""
    return {int(m.group(1)): m.group(2) for m in re.finditer(r'^\s*\.file\s+(\d+)\s+"([^"]+)"', ptx, re.MULTILINE)}


def ptx_locations(ptx: str, files: dict[int, str]) -> list[tuple[int, list[tuple[str, int]]]]:
    """Each `.loc` of a PTX listing: (its text line, [(path, line), ...]), its own place first, then the call
    sites it is inlined at: nvcc's `inlined_at F L C`, Triton's comment `// common.py:139:19 @[ blocked.py:80:71 ]`
    (file names, resolved through `files`, ptx_files)."""
    by_name = {Path(path).name: path for path in files.values()}
    out = []
    for i, line in enumerate(ptx.splitlines()):
        m = re.match(r"\s*\.loc\s+(\d+)\s+(\d+)", line)
        if not m:
            continue
        places = [(files.get(int(m.group(1)), ""), int(m.group(2)))]
        places += [(files.get(int(f), ""), int(n)) for f, n in re.findall(r"inlined_at\s+(\d+)\s+(\d+)", line)]
        if "@[" in line:
            chain = line.split("@[", 1)[1]
            places += [(by_name.get(f, f), int(n)) for f, n in re.findall(r"([\w.-]+):(\d+):\d+", chain)]
        out.append((i, places))
    return out


def _labels(text: str, pattern: re.Pattern) -> dict[str, list[int]]:
    """Label -> the indices of the text lines it stands on (inline asm blocks in PTX reuse their local labels)."""
    out: dict[str, list[int]] = {}
    for i, line in enumerate(text.splitlines()):
        if m := pattern.match(line):
            out.setdefault(m.group(1), []).append(i)
    return out


def sass_labels(sass: str) -> dict[str, list[int]]:
    return _labels(sass, _SASS_LABEL)


def ptx_labels(ptx: str) -> dict[str, list[int]]:
    return _labels(ptx, _PTX_LABEL)


def loops(instrs: list[Instruction], labels: dict[str, list[int]] | None = None) -> list[list[Instruction]]:
    """The loops of one function: for each backward branch, the instructions from its target to the branch, in
    order. Targets are cuobjdump offsets or labels (Triton's nvdisasm `LBB6`, PTX `$L__BB0_2`), whose lines are
    looked up in `labels` (sass_labels, ptx_labels); of a label's several lines, the last one before the branch."""
    import bisect

    labels = labels or {}
    at_offset = {x.offset: j for j, x in enumerate(instrs) if x.offset is not None}
    lines = [x.line for x in instrs]  # ascending: the instructions in text order
    out = []
    for k, ins in enumerate(instrs):
        if ins.target is None:
            continue
        if ins.offset is not None and re.fullmatch(r"[0-9a-f]+", ins.target):
            first = at_offset.get(int(ins.target, 16))
        elif any(line < ins.line for line in labels.get(ins.target, ())):
            at = max(line for line in labels[ins.target] if line < ins.line)
            first = bisect.bisect_right(lines, at)  # the first instruction after the label's line
            first = first if first < len(instrs) else None
        else:
            continue
        if first is not None and first <= k:
            out.append(instrs[first:k + 1])
    return out


def loop_bodies(sass: str) -> list[list[str]]:
    """The loops of one function's SASS (cuobjdump lines): for each backward branch, the instruction lines from its
    target to the branch, in order. A pipelined GEMM's main loop is the one holding the HMMAs."""
    return [[i.text for i in body] for body in loops(sass_instructions(sass), sass_labels(sass))]


# What each instruction does for a GEMM, in classes the study page colours the same in the PTX and SASS columns:
# SASS: the mnemonic before the first dot, by name; PTX: the first prefix of the dotted mnemonic that matches.
CLASSES = ("tensor", "tma", "mbarrier", "shared", "global", "local", "control")
_SASS_CLASS = (("tensor", ("HGMMA", "HMMA", "IMMA", "WARPGROUP")),
               ("tma", ("UTMALDG", "UTMASTG", "UTMAPF", "UTMACCTL", "UTMACMDFLUSH", "UTMAREDG", "UBLKCP", "UBLKRED",
                        "UBLKPF")),
               ("mbarrier", ("SYNCS",)),
               ("shared", ("LDSM", "STSM", "LDS", "STS", "ATOMS", "REDS")),
               ("global", ("LDGSTS", "LDGDEPBAR", "LDG", "STG", "RED", "ATOMG", "ATOM")),
               ("local", ("LDL", "STL")),
               ("control", ("BAR", "BRA", "BRX", "EXIT", "RET", "CALL", "BSSY", "BSYNC", "WARPSYNC", "DEPBAR",
                            "MEMBAR", "FENCE", "ERRBAR", "USETMAXREG", "ELECT", "NANOSLEEP", "YIELD")))
_PTX_CLASS = (("tensor", ("mma.", "wmma.", "wgmma.")),
              ("tma", ("cp.async.bulk", "cp.reduce.async.bulk", "prefetch.tensormap", "fence.proxy.tensormap")),
              ("mbarrier", ("mbarrier.",)),
              ("shared", ("ldmatrix.", "stmatrix.", "ld.shared", "st.shared", "atom.shared", "red.shared")),
              ("global", ("cp.async.", "ld.global", "st.global", "atom.global", "red.global", "atom.", "red.")),
              ("local", ("ld.local", "st.local")),
              ("control", ("bar.", "barrier.", "bra", "ret", "exit", "call", "fence.", "membar.",
                           "setmaxnreg.", "elect.", "nanosleep.")))


@functools.lru_cache(maxsize=4096)
def instruction_class(op: str, isa: str = "sass") -> str:
    """The class of a mnemonic (one of CLASSES), or "" for arithmetic, moves and the rest. isa: "sass" or "ptx"."""
    table = _SASS_CLASS if isa == "sass" else _PTX_CLASS
    name = op if isa == "ptx" else op.split(".")[0]
    for cls, prefixes in table:
        if isa == "sass" and name in prefixes or isa == "ptx" and any(
                op == p.rstrip(".") or op.startswith(p) for p in prefixes):
            return cls
    return ""


def main_loop(instrs: list[Instruction], labels: dict[str, list[int]] | None = None,
              isa: str = "sass") -> list[Instruction]:
    """The main loop of a GEMM, [] if it has no loop. Of its loops (leaving out the spans of out-of-line code
    that jumps back into the body: those pass an unconditional EXIT or ret), the one with the most tensor-core
    instructions (for a kernel without any, such as simt_naive or triton_gemv, the most multiply-adds), the
    shortest of equals; then, while a loop inside it holds at least half of that work, the inner one: a K loop
    unrolled twice inside the persistent tile loop that holds its peeled iterations too."""
    def work(body):
        tensor = sum(instruction_class(i.op, isa) == "tensor" for i in body)
        return tensor or sum(i.base in ("FFMA", "HFMA2") or i.op.startswith(("fma.", "mad.")) for i in body)

    found = [b for b in loops(instrs, labels)
             if not any(i.base in ("EXIT", "RET", "ret", "exit") and not i.pred for i in b) and work(b)]
    if not found:
        return []
    best = max(found, key=lambda b: (work(b), -len(b)))
    while True:
        inner = [b for b in found if len(b) < len(best) and best[0].line <= b[0].line and b[-1].line <= best[-1].line
                 and 2 * work(b) >= work(best)]
        if not inner:
            return best
        best = max(inner, key=lambda b: (work(b), -len(b)))


def setmaxnreg_targets(sass: str) -> list[int]:
    """The register counts a kernel's warpgroups move to with setmaxnreg (SASS USETMAXREG ... 0xNN), ascending:
    [40, 232] is a producer giving registers away and consumers taking them."""
    return sorted({int(m.group(1), 16) for m in re.finditer(r"USETMAXREG\.[A-Z_.]+\s+(?:UP\d+,\s*)?0x([0-9a-f]+)", sass)})


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
