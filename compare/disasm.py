"""`python -m compare inspect [kernels]`: what each kernel compiles to, side by side, without a GPU.

Triton kernels are compiled for sm_90 with `triton.compile` and a GPUTarget (the specialization a 4096^3 NN
problem gets, from the kernel module's `inspect_source`; the first config of its list unless a `[config]` is
named); the hand-written ones with plain nvcc for sm_90a (the B row-major instantiation). Names are the harness's:
`wmma_multistage_fp16acc` inspects the fp16-accumulation instantiation, `triton` the kernel `hgemm(kernel="auto")`
runs on an H100 with aligned operands; `--dtype bf16` inspects the bf16 instantiations of the kernels that take bf16
(their rows and files carry a ` bf16` / `_bf16` suffix). For each: the PTX and SASS written to files, and one row
of a table:
registers, shared memory, local memory, and the instruction mix that tells the paths apart (HGMMA = wgmma,
HMMA = mma.sync/WMMA, LDSM/STSM = ldmatrix/stmatrix, LDGSTS = cp.async, UTMALDG/UTMASTG = TMA, BAR = barriers,
LDG/STG/LDS/STS = plain loads and stores). (Named disasm, not inspect: a module must not shadow the standard
library's `inspect`.)
"""
from __future__ import annotations

import json
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hgemm_common.errors import HgemmError, HgemmValueError, error_line
from hgemm_common.record import Variant
from ptx_kernels import toolchain

from . import registry
from .registry import UnknownKernel

COLUMNS = ("HGMMA", "HMMA", "FFMA", "LDSM", "STSM", "LDGSTS", "UTMALDG", "UTMASTG", "SYNCS", "USETMAXREG", "BAR",
           "LDG", "STG", "LDS", "STS", "LDL", "STL")
ARCH = 90  # what the table shows: an H100's compile


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
    setmaxnreg: list = field(default_factory=list)  # registers per thread the warpgroups move to (producer, consumers)
    function: str = ""  # the inspected function's (mangled) name: its .entry in the PTX file, which may hold several


@dataclass(frozen=True)
class Target:
    """One thing to inspect: a registry entry's record, accumulation, (Triton) configuration and input dtype."""
    name: str  # as the user gave it
    record: Variant
    acc: str
    config: str = ""
    dtype: str = "fp16"

    @property
    def label(self) -> str:
        """The row's name: the entry's, with the dtype after it when it is not fp16."""
        return self.name if self.dtype == "fp16" else f"{self.name} {self.dtype}"

    @property
    def stem(self) -> str:
        """The PTX and SASS files' name."""
        stem = self.name.replace("[", "_").replace("]", "")
        return stem if self.dtype == "fp16" else f"{stem}_{self.dtype}"


def targets(names: list[str] | None, dtype: str = "fp16") -> list[Target]:
    """The registry entries to inspect (None: every record, fp32 accumulation, except the baseline), in `dtype`
    (None: the entries that take it); names are checked first, and an unknown one, or one that does not take
    `dtype`, raises UnknownKernel naming the choices."""
    entries = {k.name: k for k in registry.kernels() if k.record.package != "torch"}
    if not names:
        return [Target(k.name, k.record, k.acc, dtype=dtype) for k in entries.values()
                if k.acc == "fp32" and "[" not in k.name and not k.record.dispatch and k.takes(dtype)]
    bad = [n for n in names if n not in entries]
    if bad:
        plain = [n for n in entries if "[" not in n]
        raise UnknownKernel(f"unknown kernel {bad[0]!r}; choose from: {', '.join(plain)} (and NAME[config] for "
                            "a Triton configuration)")
    wrong = [n for n in names if not entries[n].takes(dtype)]
    if wrong:
        takers = [n for n, k in entries.items() if "[" not in n and k.takes(dtype)]
        raise UnknownKernel(f"kernel {wrong[0]!r} does not take {dtype} inputs; those that do: {', '.join(takers)}")
    pinned = {n: k.config for n, k in entries.items() if "[" in n}  # Triton entries of one configuration
    return [Target(n, entries[n].record, entries[n].acc, pinned.get(n, ""), dtype) for n in names]


def _triton_source(t: Target):
    """What `triton.compile` gets for a Triton target, without compiling: (source, options, config, record)."""
    from triton.compiler import ASTSource

    import triton_kernels
    from triton_kernels.triton_internals import COMPILE_OPTIONS
    from triton_kernels.contract import optional
    from triton_kernels.variants import BY_KERNEL, kernel_module

    v = t.record
    if v.dispatch:
        v = BY_KERNEL[triton_kernels.api.kernel_for(ARCH)]
    mod = kernel_module(v)
    cfgs = mod.configs()
    cfg = next((c for c in cfgs if c.name == t.config), cfgs[0])
    fn, sig, consts, attrs = mod.inspect_source(cfg, t.dtype)
    consts = dict(consts, ACC_FP16=t.acc == "fp16")
    for name in consts:
        sig.setdefault(name, "constexpr")
    source_type = ASTSource
    if fn.is_gluon():  # a @gluon.jit kernel (triton_kernels/gluon_persistent.py) compiles from its own source type
        from triton.experimental.gluon._runtime import GluonASTSource as source_type
    src = source_type(fn=fn, signature=sig, constexprs=consts, attrs=attrs)
    # a module's own launch options where it has them (the Gluon kernel's register budget, maxnreg)
    return src, {**COMPILE_OPTIONS, **optional(mod, "compile_options")(cfg)}, cfg, v


def triton_compile(t: Target):
    """A Triton target compiled for sm_90 (ARCH) as `inspect` compiles it: (CompiledKernel, config, record)."""
    import triton
    from triton.backends.compiler import GPUTarget

    src, options, cfg, v = _triton_source(t)
    return triton.compile(src, target=GPUTarget("cuda", ARCH, 32), options=options), cfg, v


def inspect_triton(t: Target, out: Path) -> InspectRow:
    compiled, cfg, v = triton_compile(t)
    ptx, sass = compiled.asm["ptx"], compiled.asm["sass"]
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(compiled.asm["cubin"])
    usage = next(iter(toolchain.cubin_resource_usage(Path(f.name)).values()))
    Path(f.name).unlink()
    stem = t.stem
    (out / f"{stem}.ptx").write_text(ptx)
    (out / f"{stem}.sass").write_text(sass)
    mix = toolchain.instruction_mix(sass)
    return InspectRow(t.label, f"triton_kernels/{v.file} ({cfg.name})", f"sm_{ARCH}", usage.registers,
                      usage.smem_bytes, compiled.metadata.shared, usage.stack_bytes,
                      {c: mix.get(c, 0) for c in COLUMNS}, f"{stem}.ptx", f"{stem}.sass",
                      toolchain.setmaxnreg_targets(sass), function=compiled.metadata.name)


def _fits(instances: list[toolchain.Instance], dtype: str, acc: str, want: dict[str, str]) -> list:
    return [i for i in instances if i.dtype == dtype and i.acc == acc and not i.b_col_major and i.matches(want)]


def instance(instances: list[toolchain.Instance], dtype: str, acc: str, want: dict[str, str]) -> toolchain.Instance:
    """The instance inspect shows: of `dtype` and accumulation `acc`, B row-major (or a kernel with no B layout
    parameter), and the template arguments the record's `inspect` names (first in the cubin's order); a record whose
    `inspect` matches none raises ValueError."""
    fit = _fits(instances, dtype, acc, want)
    if not fit:
        raise HgemmValueError(f"no {dtype} instance with {acc} accumulation and row-major B matches {want} among "
                         f"{[i.template for i in instances]}")
    return fit[0]


def cuda_source(v: Variant) -> Path:
    """A hand-written variant's source: `file` is relative to ptx_kernels/csrc (ptx_kernels.variants.source)."""
    from ptx_kernels.variants import source

    return source(v)


def compile_for_inspect(v: Variant, dtype: str, acc: str, arch: str = "sm_90a") -> toolchain.Compiled:
    """A hand-written variant's file compiled for what `instance` chooses: nvcc builds only the instantiations of
    `dtype`, `acc`, row-major B and, where the record's `inspect` names it, its A layout (toolchain.only_flags: a few
    of the file's kernels, not its every combination: wgmma_persistent's 120), and ptxas assembles the one that fits,
    or all of them where several do (`instance` takes the first in the cubin's order). The compile that dominated the
    main job on a CPU; the instance is the whole file's, to the SASS (tests/test_ptx_compile.py)."""
    source = cuda_source(v)
    ptx = toolchain.compile_ptx_file(source, arch, _inspect_flags(v, dtype, acc))
    found = toolchain.instances_of(source, (toolchain.CSRC,), toolchain.ptx_entries(ptx.read_text()))
    fit = _fits(found, dtype, acc, v.inspect)
    return toolchain.assemble(source, arch, ptx, [fit[0].name] if len(fit) == 1 else None)


def inspect_cuda(t: Target, out: Path, arch: str = "sm_90a") -> InspectRow:
    c = compile_for_inspect(t.record, t.dtype, t.acc, arch)
    usage = toolchain.cubin_resource_usage(c.cubin)
    fn = instance(c.instances(), t.dtype, t.acc, t.record.inspect).name
    sass = toolchain.disassemble(c.cubin, fn)
    ptx = c.ptx()
    stem = t.stem
    (out / f"{stem}.ptx").write_text(ptx)
    (out / f"{stem}.sass").write_text(sass)
    mix = toolchain.instruction_mix(sass)
    u = usage[fn]
    return InspectRow(t.label, f"ptx_kernels/csrc/{t.record.file}", arch, u.registers, u.smem_bytes, None,
                      u.stack_bytes, {col: mix.get(col, 0) for col in COLUMNS}, f"{stem}.ptx", f"{stem}.sass",
                      toolchain.setmaxnreg_targets(sass), fn)


def _child_env() -> dict:
    """Under TRITON_INTERPRET=1 `@triton.jit` gives interpreted functions, which triton.compile cannot take:
    inspect compiles in a child process without it."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_INTERPRET"] = "0"  # explicit, so nothing below turns it back on
    root = Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    return env


def start(out: Path, kernels: list[str] | None = None, dtype: str = "fp16", nice: int = 0):
    """`python -m compare inspect` in a child process (outside the interpreter, beside other work), `nice` added to
    its priority (the main job's 19: it takes no core from the build or the check); collect its rows with
    `finish`."""
    import os
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "compare", "inspect", "--out", str(out), "--dtype", dtype,
                             *(kernels or [])],
                            env=_child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if nice:
        os.setpriority(os.PRIO_PROCESS, proc.pid, nice)
    return proc


def finish(proc, out: Path, progress=None, total: int = 0) -> tuple[list[InspectRow], dict[str, str]]:
    """The child's rows; if it failed, a RuntimeError with its last line (the whole stderr in out/inspect.log).
    progress(done, total), when given, follows the SASS files the child writes meanwhile (one per row)."""
    import subprocess

    while True:
        try:
            _, err = proc.communicate(timeout=1.0)
            break
        except subprocess.TimeoutExpired:  # communicate again: no output is lost
            done = len(list(Path(out).glob("*.sass")))
            if progress and done < total:
                progress(done, total)
    if proc.returncode != 0:
        child_failed(proc.returncode, err, Path(out) / "inspect.log")
    rows, skipped = load(out)
    if progress:
        progress(len(rows), len(rows))
    return rows, skipped


def child_failed(returncode: int, err: str, log: Path) -> None:
    """A `python -m compare` child's failure (inspect here, the main job's fragment maps): its stderr into `log`,
    then an HgemmError with its last line."""
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(err)
    last = err.strip().splitlines()[-1] if err.strip() else f"exit status {returncode}"
    raise HgemmError(f"{last} (full output in {log})")


def load(out: Path) -> tuple[list[InspectRow], dict[str, str]]:
    data = json.loads((Path(out) / "inspect.json").read_text())
    return [InspectRow(**r) for r in data["rows"]], data["skipped"]


# ---- the inspect store: a row and its PTX and SASS per target ---------------------------------------------------
# Kept in two places, both keyed by what the target's compile reads (`store_key`): the user's cache folder, which
# every compile writes to, and the store that ships in the package (compare/inspect_store, one xz-compressed file
# per target, written by `python -m compare inspect --refresh-store` on a machine with nvcc). A shipped entry is
# used only where its key is the one this machine computes: the same compiler version and the same sources, so it
# is what a compile here would give. The columns read off the SASS (the instruction mix, setmaxnreg) are counted
# again from the stored SASS at every load, so a change to how they are counted never reads stale; STORE_VERSION
# covers the rest of how a row is made (the compile's options, which instance is shown). Data only (JSON); an
# entry that does not read back as a row is ignored with a warning.
STORE_VERSION = 2
SHIPPED = Path(__file__).resolve().parent / "inspect_store"


def cache_dir() -> Path:
    """TENSORCORE_HGEMM_BUILD_DIR/inspect, else ~/.cache/tensorcore_hgemm/inspect (beside the cubin cache)."""
    return toolchain.cache_root() / "inspect"


def _inspect_flags(v: Variant, dtype: str, acc: str) -> list[str]:
    """nvcc's flags beyond NVCC_FLAGS for a hand-written target: only the instantiations `instance` can choose."""
    a_col = v.inspect.get("A_COL")
    return toolchain.only_flags(dtype, acc, b_col=False, a_col=None if a_col is None else a_col == "true")


def store_key(t: Target, nvcc: str | None = None) -> str:
    """The key of a target's row: the target, the arch and STORE_VERSION; for Triton its version and the compile's
    source and options (`ASTSource.hash`: the kernel's code and the Triton functions it calls, its signature and
    constants), for a hand-written kernel nvcc's version (`nvcc`, else this machine's), the flags, and the bytes of
    its file and of every project header it includes."""
    import hashlib

    h = hashlib.sha256(f"{STORE_VERSION}|{t.label}|{t.acc}|{t.config}|{t.dtype}|{t.record.name}|{t.record.file}|"
                       f"{sorted(t.record.inspect.items())}|sm_{ARCH}".encode())
    if t.record.package == "triton":
        import triton

        src, options, cfg, v = _triton_source(t)
        h.update(f"|{triton.__version__}|{v.name}|{cfg.name}|{src.fn.__name__}|{sorted(src.signature.items())}|"
                 f"{sorted((k, str(c)) for k, c in src.constants.items())}|{sorted(src.attrs.items())}|"
                 f"{sorted(options.items())}".encode())
        root = Path(triton_kernels_root()).parent
        for path in jit_files(src.fn):
            h.update(b"\0" + path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    else:
        flags = [*toolchain.NVCC_FLAGS, toolchain.ARCHS[f"sm_{ARCH}a"], *_inspect_flags(t.record, t.dtype, t.acc)]
        h.update(f"|{toolchain.nvcc_version() if nvcc is None else nvcc}|{' '.join(flags)}".encode())
        for path in toolchain.project_files(cuda_source(t.record), (toolchain.CSRC,)):
            h.update(b"\0" + path.relative_to(toolchain.CSRC).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:20]


def triton_kernels_root() -> Path:
    import triton_kernels

    return Path(triton_kernels.__file__).resolve().parent


def jit_files(fn) -> list[Path]:
    """The files of the modules that hold `fn` and the Triton functions it can reach: the module of each Triton
    function in a reached module's globals, transitively. What a Triton kernel's compile reads of ours, at file
    granularity. (Not `fn.cache_key`: Triton merges a callee's global constants into a caller's key only where the
    callee's own key was computed first, so that key depends on the order in which kernels were hashed.)"""
    import sys

    def jitted(v) -> bool:
        return callable(getattr(v, "fn", None)) and hasattr(type(v), "cache_key")

    files, seen, todo = set(), set(), [fn]
    while todo:
        name = getattr(todo.pop().fn, "__module__", None)
        if name in seen or name not in sys.modules:
            continue
        seen.add(name)
        mod = sys.modules[name]
        files.add(Path(mod.__file__).resolve())
        todo += [v for v in vars(mod).values() if jitted(v)]
    return sorted(files)


def shipped_entry(t: Target) -> Path:
    return SHIPPED / f"{t.stem}.json.xz"


def read_entry(path: Path) -> dict:
    """An entry's JSON (a shipped one xz-compressed)."""
    import lzma

    raw = lzma.decompress(path.read_bytes()) if path.suffix == ".xz" else path.read_bytes()
    return json.loads(raw)


def _row_from(data: dict, out: Path) -> InspectRow:
    """An entry's row, its PTX and SASS written to `out`, the SASS's columns counted again."""
    row = InspectRow(**data["row"])
    sass = data["sass"]
    mix = toolchain.instruction_mix(sass)
    row.mix, row.setmaxnreg = {c: mix.get(c, 0) for c in COLUMNS}, toolchain.setmaxnreg_targets(sass)
    (out / row.ptx_file).write_text(data["ptx"])
    (out / row.sass_file).write_text(sass)
    return row


def _entry(t: Target, key: str, row: InspectRow, out: Path) -> dict:
    import triton

    return {"key": key, "target": t.label, "triton": triton.__version__ if t.record.package == "triton" else None,
            "nvcc": toolchain.nvcc_version() if t.record.package == "ptx" else None, "row": asdict(row),
            "ptx": (out / row.ptx_file).read_text(), "sass": (out / row.sass_file).read_text()}


def _write_atomic(path: Path, data: bytes) -> None:
    import os

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.{id(data)}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def cached(t: Target, out: Path, make) -> InspectRow:
    """make(t, out)'s row, or a stored copy of it under the same key (the user's cache, then the shipped store), its
    PTX and SASS written to `out` as make writes them; a row made here goes to the user's cache."""
    import warnings

    key = store_key(t)
    mine = cache_dir() / f"{t.stem}-{key}.json"
    for path in (mine, shipped_entry(t)):
        if not path.exists():
            continue
        try:
            data = read_entry(path)
            if data.get("key", key) == key:  # the user's entries are named by their key
                return _row_from(data, out)
        except (ValueError, KeyError, TypeError, OSError, EOFError) as e:  # truncated, foreign, older fields
            warnings.warn(f"ignoring the inspect store entry {path} ({type(e).__name__}: {e}); inspecting {t.label} "
                          "again", RuntimeWarning, stacklevel=2)
    row = make(t, out)
    _write_atomic(mine, json.dumps(_entry(t, key, row, out)).encode())
    return row


def stale_store() -> dict[str, str]:
    """{target or file: why} for each default target (fp16) whose shipped entry is missing or was made from other
    sources, and each shipped file of no target; empty when the store is current. A hand-written target is keyed
    with the nvcc its entry was made with, so this needs no nvcc (a Triton target's key needs Triton's compiler,
    not its interpreter)."""
    found, names = {}, set()
    for t in targets(None):
        path = shipped_entry(t)
        names.add(path.name)
        if not path.exists():
            found[t.label] = "no entry"
            continue
        data = read_entry(path)
        if t.record.package == "triton":
            import triton

            if data["triton"] != triton.__version__:
                found[t.label] = f"made with Triton {data['triton']}, not the installed {triton.__version__}"
                continue
        if data["key"] != store_key(t, nvcc=data["nvcc"]):
            found[t.label] = "made from other sources"
    found.update({p.name: "no such target" for p in SHIPPED.glob("*.json.xz") if p.name not in names})
    return found


def refresh_store(progress=None) -> list[Path]:
    """Inspect every default target (fp16) and write the shipped store: one file per target, named by its stem, and
    no file of a target that is gone. Needs nvcc (every hand-written target is in it). Returns the files written."""
    import lzma
    import tempfile

    if toolchain.find_nvcc() is None:
        raise HgemmError("inspect --refresh-store compiles every hand-written kernel: it needs nvcc (the CUDA toolkit)")
    chosen = targets(None)
    with tempfile.TemporaryDirectory(prefix="hgemm-store-") as tmp:
        rows, _ = run_inspect(None, Path(tmp), progress=progress)
        by_label = {r.kernel: r for r in rows}
        written = []
        for t in chosen:
            entry = _entry(t, store_key(t), by_label[t.label], Path(tmp))
            path = shipped_entry(t)
            _write_atomic(path, lzma.compress(json.dumps(entry, indent=0).encode(), preset=9 | lzma.PRESET_EXTREME))
            written.append(path)
    for stale in set(SHIPPED.glob("*.json.xz")) - set(written):
        stale.unlink()
    return written


def run_inspect(kernels: list[str] | None, out: Path, dtype: str = "fp16",
                progress=None) -> tuple[list[InspectRow], dict[str, str]]:
    """Inspect `kernels` (None: every record that takes `dtype`) in `dtype` into `out`; returns the rows and, per
    kernel left out, why (the hand-written ones need nvcc). Each row is compiled once per source and toolchain
    (`cached`). progress(done, total), when given, is called as rows arrive. A kernel whose inspect raises is named
    in inspect.json's `failed` with its error, the others' rows are written all the same, and then an HgemmError
    names it."""
    from hgemm_common.validation import interpreter_active

    out = Path(out)
    chosen = targets(kernels, dtype)  # unknown names fail here, before any work
    out.mkdir(parents=True, exist_ok=True)
    nvcc = toolchain.find_nvcc() is not None
    skipped = {t.label: "needs nvcc (the CUDA toolkit)" for t in chosen if t.record.package == "ptx" and not nvcc}
    if interpreter_active():
        return finish(start(out, kernels, dtype), out, progress, len(chosen) - len(skipped))
    import os
    import threading
    from concurrent.futures import ThreadPoolExecutor

    done, lock = [0], threading.Lock()
    failed: dict[str, str] = {}

    def one(t: Target) -> InspectRow | None:  # a kernel that fails leaves the others their rows
        try:
            row = cached(t, out, inspect_triton if t.record.package == "triton" else inspect_cuda)
        except Exception as e:  # noqa: BLE001 - named in inspect.json and in the error raised below
            failed[t.label] = error_line(e)
            row = None
        with lock:
            done[0] += 1
            if progress:
                progress(done[0], len(chosen) - len(skipped))
        return row

    # nvcc and cuobjdump are subprocesses: the CUDA sources compile side by side (Triton's compiles stay serial), the
    # Hopper files first: they instantiate the most (tiles x epilogues x splits), and the last to finish sets the end
    cuda_targets = sorted((t for t in chosen if t.record.package == "ptx" and t.label not in skipped),
                          key=lambda t: -t.record.min_arch)
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        cuda = {t.label: pool.submit(one, t) for t in cuda_targets}
        triton_rows = {t.label: one(t) for t in chosen if t.record.package == "triton"}
        rows = [triton_rows[t.label] if t.label in triton_rows else cuda[t.label].result() for t in chosen
                if t.label not in skipped]
    rows = [r for r in rows if r is not None]
    (out / "inspect.json").write_text(json.dumps({"rows": [asdict(r) for r in rows], "skipped": skipped,
                                                  "failed": failed}, indent=1))
    (out / "inspect.md").write_text(format_markdown(rows, skipped))
    if failed:  # the rows of the others are written (the study page shows them); the command still fails
        raise HgemmError(f"inspect failed for {len(failed)} of {len(chosen)} kernels: "
                         + "; ".join(f"{name}: {line}" for name, line in failed.items()))
    return rows, skipped


def format_markdown(rows: list[InspectRow], skipped: dict[str, str] | None = None) -> str:
    head = ["kernel", "arch", "regs", "smem static", "smem dynamic", "local", *COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        dyn = "-" if r.smem_dynamic is None else str(r.smem_dynamic)
        regs = str(r.registers) + (f" (setmaxnreg {' / '.join(map(str, r.setmaxnreg))})" if r.setmaxnreg else "")
        cells = [f"`{r.kernel}`", r.arch, regs, str(r.smem_static), dyn, str(r.local_bytes),
                 *(str(r.mix.get(c, 0)) for c in COLUMNS)]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Counts are static SASS instructions (unrolled loops count each copy); SYNCS are mbarrier "
                 "operations, UTMALDG/UTMASTG TMA copies, HGMMA wgmma. regs is what ptxas allocates per thread; "
                 "where warpgroups trade registers (setmaxnreg) it is the cap at launch, and the counts they move "
                 "to follow (producer / consumers). "
                 "smem static includes "
                 "the 1 KB the sm_90 driver reserves per block; Triton's pipeline and the multistage WMMA kernel "
                 "take theirs as dynamic shared memory at launch (the multistage kernel's size is in the GPU "
                 "tests). PTX and SASS of each kernel sit beside this file.")
    if skipped:
        reasons = {}
        for name, why in skipped.items():
            reasons.setdefault(why, []).append(f"`{name}`")
        lines.append("")
        lines += [f"Not inspected here, {why}: {', '.join(names)}." for why, names in reasons.items()]
    return "\n".join(lines) + "\n"
