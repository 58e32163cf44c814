"""Build the hand-written kernels into one extension, once per machine, with torch.utils.cpp_extension.load_inline;
the few records marked `on_demand` (kernels nothing dispatches to) into a library of their own on their first call
(`load_on_demand`).

Two steps, the first in parallel:
1. every kernel file (the records' offered on the running GPU, `min_arch`, plus the lab sources) compiles to its
   own object with plain nvcc (`compile_objects`: no Torch headers, as the sources promise; one process per file,
   as many at once as there are CPUs). A file with many kernel instances marks parts of itself (csrc/host/parts.h,
   `build_parts`) and compiles to one object per part, so that no single nvcc process holds the build up; the
   units start in `heaviest_first` order. A fresh build prints how long it took, and with verbose=True or
   TENSORCORE_HGEMM_BUILD_TIMES=1 each unit's nvcc seconds, longest first;
2. `load_inline` compiles the Torch glue (csrc/binding.cpp, read from its file) and links it with those objects into
   the Python module. Each kernel file registers its own launcher (csrc/host/registry.h), so the binding knows no
   variant by name.
The module name carries a hash of every file under csrc/, the flags and the torch version (`variants.csrc_hash`,
the same rule as the offline cubin cache), and so do the objects' names: any edit rebuilds, and an unchanged tree is
loaded from the build folder at once, in any later process. A build killed mid-way leaves torch's `lock` file
behind, which makes the next build wait forever: builds here are serialised with our own flock, under which a
leftover `lock` can only be stale, and is removed.
"""
from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from hgemm_common.errors import HgemmError, error_line

from .variants import CSRC, STAGE_COPY_SOURCE, VARIANTS, Variant, csrc_hash, lab_sources, source

_lock = threading.Lock()
_module = None
_on_demand_loaded = False  # load_on_demand has added the on-demand records to _module

BASE_CUDA_FLAGS = [
    "-O3", "-std=c++17", "-lineinfo",
    # torch defines these to keep its own half type unambiguous; the kernels use cuda_fp16's operators.
    "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__", "-U__CUDA_NO_HALF2_OPERATORS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
]


class BuildError(HgemmError):
    """The extension did not build (nvcc missing or failing): the message says which step and why."""


def arch_flags(capability: tuple[int, int]) -> list[str]:
    """-gencode for the running GPU: sm_90a on Hopper (wgmma/setmaxnreg need the 'a' target), sm_XY elsewhere."""
    major, minor = capability
    arch = f"{major}{minor}"
    if (major, minor) == (9, 0):
        arch = "90a"
    return [f"-gencode=arch=compute_{arch},code=sm_{arch}"]


BINDING = CSRC / "binding.cpp"  # the only Torch-aware C++: load_inline's source


ON_DEMAND_ENTRY = CSRC / "host" / "on_demand.cu"  # the on-demand library's entry point (hgemm_on_demand_export)


def kernel_sources(arch: int | None = None, variants=VARIANTS, on_demand: bool = False) -> list[Path]:
    """The CUDA translation units of the extension for a GPU of compute capability `arch` (x10; None: every
    variant): each record's kernel file offered there, the staging copy, then the lab sources. The records marked
    `on_demand` are left out: with on_demand=True, the on-demand library's units instead, those records' kernel
    files offered there and the library's entry point (none where no such record is offered)."""
    if on_demand:
        files = [source(v) for v in variants if v.offered_on(arch) and v.on_demand]
        return files + [ON_DEMAND_ENTRY] if files else []
    return ([source(v) for v in variants if v.offered_on(arch) and not v.on_demand] + [CSRC / STAGE_COPY_SOURCE]
            + [CSRC / f for f in lab_sources(arch)])


def module_name(flags: list[str]) -> str:
    return f"tensorcore_hgemm_ptx_{csrc_hash(' '.join(flags), torch.__version__)}"


def link_command(objects: list[Path], out: Path, nvcc: str) -> list[str]:
    """The command that links the on-demand library's objects into the shared library `out`: host code only (the
    objects hold their own device code), on the shared CUDA runtime, the one the extension and torch use, so that
    its kernels and streams are theirs."""
    return [nvcc, "-shared", "-cudart", "shared", "-o", str(out), *map(str, objects)]


def _check_toolchain() -> None:
    if not torch.cuda.is_available():
        raise BuildError("ptx_kernels needs a CUDA GPU: torch.cuda.is_available() is False "
                         f"(torch {torch.__version__}, built with CUDA {torch.version.cuda})")
    if torch.version.cuda is None:
        raise BuildError(f"ptx_kernels needs a CUDA build of torch; this one is {torch.__version__}")
    if nvcc_path() is None:
        raise BuildError("ptx_kernels needs nvcc (the CUDA toolkit) to build its kernels: none on PATH or CUDA_HOME")


def build_dir_root() -> Path:
    return Path(os.environ.get("TENSORCORE_HGEMM_BUILD_DIR", Path.home() / ".cache" / "tensorcore_hgemm"))


def nvcc_path() -> str | None:
    from torch.utils.cpp_extension import CUDA_HOME

    nvcc = shutil.which("nvcc") or (CUDA_HOME and os.path.join(CUDA_HOME, "bin", "nvcc"))
    return nvcc if nvcc and os.path.exists(nvcc) else None


def object_flags(cuda_flags: list[str]) -> list[str]:
    """nvcc flags of a kernel object: the build's, position-independent host code for the shared library, and the
    C++ ABI torch was built with (the registry's std::string keys cross from the kernel objects to the binding)."""
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))
    return [*cuda_flags, "-Xcompiler", "-fPIC", f"-D_GLIBCXX_USE_CXX11_ABI={abi}", f"-I{CSRC}"]


_PART = re.compile(r"HGEMM_IN_PART\((\d+)\)")


def build_parts(src: Path) -> tuple[int, ...]:
    """The parts a kernel file marks with `#if HGEMM_IN_PART(i)` (csrc/host/parts.h), each compiled on its own with
    -DHGEMM_PART=i; () for a file compiled whole."""
    return tuple(sorted({int(i) for i in _PART.findall(src.read_text())}))


def units(sources: list[Path]) -> list[tuple[Path, int | None]]:
    """(source, part) of each translation unit the sources compile to, in the sources' order (part None: whole)."""
    return [(src, part) for src in sources for part in (build_parts(src) or (None,))]


def unit_name(src: Path, part: int | None) -> str:
    name = src.relative_to(CSRC).as_posix() if src.is_relative_to(CSRC) else str(src)
    return name if part is None else f"{name} part {part}"


def heaviest_first(todo: list[tuple[Path, int | None]]) -> list[tuple[Path, int | None]]:
    """The units in the order the pool starts them, so that it does not end on a long one: the parts of split files
    first (they are split because their kernels take the longest), then the Hopper files (wgmma's wide accumulator
    tiles take ptxas the longest), the other kernel files, the lab sources; within each, files later in a ladder
    (the more elaborate kernels, more instances) first."""
    def rank(unit):
        src, part = unit
        folder = src.parent.name
        return (part is None, {"sm90": 0, "sm80": 1}.get(folder, 2))
    return sorted(reversed(todo), key=rank)


def compile_objects(sources: list[Path], cuda_flags: list[str], out_dir: Path, nvcc: str,
                    jobs: int | None = None, times: dict[str, float] | None = None) -> list[Path]:
    """Each source compiled to out_dir/<stem>-<hash>.o (hash: every csrc/ file and the flags), or a split file to
    one out_dir/<stem>.part<i>-<hash>.o per part (`build_parts`), in parallel, `heaviest_first`; objects already
    there are kept. Writes go to a temporary name first, so a killed build leaves no half object. `times`, when
    given, gets each compiled unit's nvcc seconds by `unit_name`. Returns the objects in the sources' order."""
    flags = object_flags(cuda_flags)
    key = csrc_hash(" ".join(flags), torch.__version__)
    out_dir.mkdir(parents=True, exist_ok=True)

    def one(unit: tuple[Path, int | None]) -> Path:
        src, part = unit
        obj = out_dir / (f"{src.stem}-{key}.o" if part is None else f"{src.stem}.part{part}-{key}.o")
        if obj.exists():
            return obj
        tmp = obj.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        defines = [] if part is None else [f"-DHGEMM_PART={part}"]
        t0 = time.perf_counter()
        res = subprocess.run([nvcc, *flags, *defines, "-c", "-o", str(tmp), str(src)], capture_output=True, text=True)
        if res.returncode != 0:
            raise BuildError(f"nvcc failed on {unit_name(src, part)}:\n{res.stderr[-4000:]}")
        if times is not None:
            times[unit_name(src, part)] = time.perf_counter() - t0
        os.replace(tmp, obj)
        return obj

    todo = units(sources)
    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        done = dict(zip(heaviest_first(todo), pool.map(one, heaviest_first(todo))))
    return [done[u] for u in todo]


def format_times(times: dict[str, float]) -> str:
    """Each unit's nvcc seconds, longest first (a fresh build's `times`)."""
    return "\n".join(f"{t:7.1f} s  {name}" for name, t in sorted(times.items(), key=lambda kv: -kv[1]))


def _glue_args(build_dir: Path, own_headers: bool = True) -> dict:
    """load_inline's arguments for the Torch glue, other than the name and the kernel objects.

    own_headers: binding.cpp includes the ATen, c10 and pybind headers it uses, and load_inline is told not to put
    <torch/extension.h> (all of Torch's C++ frontend) in front of it (`no_implicit_headers`, where the installed
    torch has it): those headers were most of the build's critical path. False: load_inline's default."""
    import inspect

    from torch.utils.cpp_extension import load_inline

    args = dict(cpp_sources=[BINDING.read_text()], extra_cflags=["-O2", "-std=c++17"],
                extra_include_paths=[str(CSRC)], build_directory=str(build_dir), with_cuda=True)
    if own_headers and "no_implicit_headers" in inspect.signature(load_inline).parameters:
        args["no_implicit_headers"] = True
    return args


def _start_glue(name: str, build_dir: Path) -> subprocess.Popen:
    """Compile the Torch glue while the kernel objects compile: a child process runs the same load_inline without
    the objects, which compiles binding.cpp to main.o (its link leaves the kernels' symbols undefined, and its
    import fails; only main.o is wanted). The parent's load_inline then finds main.o up to date (the same source,
    flags and extension name: ninja compares the commands) and only links."""
    code = ("import sys; from pathlib import Path; from ptx_kernels import build\n"
            "from torch.utils.cpp_extension import load_inline\n"
            "try:\n"
            f"    load_inline(name={name!r}, **build._glue_args(Path({str(build_dir)!r})))\n"
            "except Exception:\n"
            "    pass\n")
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def load(verbose: bool = False, on_demand: bool = False):
    """The compiled extension for the current GPU, built on first use (about half a minute on 16 cores), then
    loaded from the build folder. verbose (or TENSORCORE_HGEMM_BUILD_TIMES=1): print each translation unit's nvcc
    seconds, longest first, and load_inline's commands. on_demand: with the records marked `on_demand` too
    (`load_on_demand`)."""
    if on_demand and not _on_demand_loaded:
        load_on_demand(verbose)  # the extension first, then the library
    elif _module is None:  # every hgemm call asks: no lock once built
        _load_extension(verbose)
    return _module


def load_for(v: Variant):
    """The extension, holding variant `v` (its on-demand library loaded where its record is marked `on_demand`)."""
    return load(on_demand=v.on_demand)


def _load_extension(verbose: bool):
    global _module
    with _lock:
        if _module is not None:
            return _module
        _check_toolchain()
        from torch.utils.cpp_extension import load_inline

        cap = torch.cuda.get_device_capability()
        cuda_flags = BASE_CUDA_FLAGS + arch_flags(cap)
        name = module_name(cuda_flags)
        build_dir = build_dir_root() / name
        build_dir.mkdir(parents=True, exist_ok=True)
        sources = kernel_sources(cap[0] * 10 + cap[1])
        with open(build_dir.parent / f"{name}.flock", "w") as flock:
            fcntl.flock(flock, fcntl.LOCK_EX)
            stale = build_dir / "lock"
            if stale.exists():
                stale.unlink()
            fresh = not (build_dir / f"{name}.so").exists()
            if fresh:
                print(f"ptx_kernels: building the extension ({len(units(sources))} translation units of "
                      f"{len(sources)} kernel files, and the binding, about half a minute) in {build_dir}",
                      file=sys.stderr, flush=True)
            t0, times = time.perf_counter(), {}
            try:
                glue = None if (build_dir / "main.o").exists() else _start_glue(name, build_dir)
                objects = compile_objects(sources, cuda_flags, build_dir / "objects", nvcc_path(), times=times)
                t_objects = time.perf_counter() - t0
                if glue is not None:
                    glue.wait()
                    if stale.exists():  # the child ended without releasing torch's lock (killed): stale
                        stale.unlink()
                t_glue = time.perf_counter() - t0
                glue_args = _glue_args(build_dir)
                try:
                    _module = load_inline(name=name, extra_ldflags=[str(o) for o in objects], verbose=verbose,
                                          **glue_args)
                except Exception as e:  # noqa: BLE001 - said, then built as load_inline builds by default
                    if "no_implicit_headers" not in glue_args:
                        raise
                    print(f"ptx_kernels: binding.cpp did not build on its own headers ({error_line(e)}); building "
                          "it again behind <torch/extension.h>", file=sys.stderr, flush=True)
                    _module = load_inline(name=name, extra_ldflags=[str(o) for o in objects], verbose=verbose,
                                          **_glue_args(build_dir, own_headers=False))
            except Exception as e:  # noqa: BLE001 - re-raised with the build folder named
                if isinstance(e, BuildError):
                    raise
                raise BuildError(f"building {name} in {build_dir} failed: {e}") from e
            if fresh:
                longest = max(times, key=times.get, default=None)
                print(f"ptx_kernels: built in {time.perf_counter() - t0:.1f} s (kernel objects {t_objects:.1f} s"
                      + (f", the longest {longest} {times[longest]:.1f} s" if longest else "")
                      + f"; the binding ready at {t_glue:.1f} s)", file=sys.stderr, flush=True)
                _print_times(times, verbose)
        return _module


def _print_times(times: dict[str, float], verbose: bool) -> None:
    if times and (verbose or os.environ.get("TENSORCORE_HGEMM_BUILD_TIMES") == "1"):
        print(f"ptx_kernels: nvcc seconds per translation unit, {os.cpu_count()} cores:\n" + format_times(times),
              file=sys.stderr, flush=True)


def load_on_demand(verbose: bool = False) -> None:
    """Add the records marked `on_demand` (kernels nothing dispatches to, called by name) to the extension: their
    kernel files and the entry point csrc/host/on_demand.cu compiled as the extension's are (`compile_objects`, the
    same folder and names) and linked into a shared library beside it (`link_command`), on first use; then the
    binding opens it and copies its registry into the extension's (hgemm_load_on_demand). Keeping them out of
    the extension keeps every fresh build short. Builds are serialised across processes by a lock file of their own,
    so that loading the extension never waits on one."""
    global _on_demand_loaded
    module = _load_extension(verbose)
    with _lock:
        if _on_demand_loaded:
            return
        cap = torch.cuda.get_device_capability()
        sources = kernel_sources(cap[0] * 10 + cap[1], on_demand=True)
        if sources:
            cuda_flags = BASE_CUDA_FLAGS + arch_flags(cap)
            name = module_name(cuda_flags)
            build_dir = build_dir_root() / name
            lib = build_dir / f"{name}_on_demand.so"
            with open(build_dir.parent / f"{name}.on_demand.flock", "w") as flock:
                fcntl.flock(flock, fcntl.LOCK_EX)
                if not lib.exists():
                    print(f"ptx_kernels: building the on-demand kernels ({len(units(sources))} translation units: "
                          f"{', '.join(p.stem for p in sources[:-1])}) into {lib}", file=sys.stderr, flush=True)
                    t0, times = time.perf_counter(), {}
                    objects = compile_objects(sources, cuda_flags, build_dir / "objects", nvcc_path(), times=times)
                    tmp = lib.with_suffix(f".{os.getpid()}.tmp")
                    res = subprocess.run(link_command(objects, tmp, nvcc_path()), capture_output=True, text=True)
                    if res.returncode != 0:
                        raise BuildError(f"linking the on-demand library {lib} failed:\n{res.stderr[-4000:]}")
                    os.replace(tmp, lib)
                    print(f"ptx_kernels: on-demand kernels built in {time.perf_counter() - t0:.1f} s", file=sys.stderr,
                          flush=True)
                    _print_times(times, verbose)
            try:
                module.hgemm_load_on_demand(str(lib))
            except Exception as e:  # noqa: BLE001 - re-raised with the library named
                raise BuildError(f"loading the on-demand library {lib} failed: {error_line(e)}") from e
        _on_demand_loaded = True
