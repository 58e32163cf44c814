"""Build the hand-written kernels into one extension with torch.utils.cpp_extension.load, once per process.

binding.cpp and each kernel file are separate translation units, compiled in parallel by ninja (MAX_JOBS, default
the CPU count). The kernel files are the records' (`variants.VARIANTS`) offered on the running GPU
(`min_arch`), plus the lab sources; each kernel file registers its own launcher (csrc/host/registry.h), so the
binding knows no variant by name. The module name carries a hash of every file under csrc/, the flags and the
torch version (`variants.csrc_hash`, the same rule as the offline cubin cache), so any edit rebuilds and an
unchanged tree is reused from the build folder. A build killed mid-way leaves torch's `lock` file behind, which
makes the next build wait forever: builds here are serialised with our own flock, under which a leftover
`lock` can only be stale, and is removed.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import threading
from pathlib import Path

import torch

from .variants import CSRC, VARIANTS, csrc_hash, lab_sources, source

_lock = threading.Lock()
_module = None

BASE_CUDA_FLAGS = [
    "-O3", "-std=c++17", "-lineinfo",
    # torch defines these to keep its own half type unambiguous; the kernels use cuda_fp16's operators.
    "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__", "-U__CUDA_NO_HALF2_OPERATORS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
]


class BuildError(RuntimeError):
    pass


def arch_flags(capability: tuple[int, int]) -> list[str]:
    """-gencode for the running GPU: sm_90a on Hopper (wgmma/setmaxnreg need the 'a' target), sm_XY elsewhere."""
    major, minor = capability
    arch = f"{major}{minor}"
    if (major, minor) == (9, 0):
        arch = "90a"
    return [f"-gencode=arch=compute_{arch},code=sm_{arch}"]


BINDING = CSRC / "binding.cpp"  # the only Torch-aware C++


def kernel_sources(arch: int | None = None, variants=VARIANTS) -> list[Path]:
    """The CUDA translation units of the extension for a GPU of compute capability `arch` (x10; None: every
    variant): each record's kernel file offered there, then the lab sources."""
    return [source(v) for v in variants if v.offered_on(arch)] + [CSRC / f for f in lab_sources(arch)]


def module_name(flags: list[str]) -> str:
    return f"tensorcore_hgemm_ptx_{csrc_hash(' '.join(flags), torch.__version__)}"


def _check_toolchain() -> None:
    if not torch.cuda.is_available():
        raise BuildError("ptx_kernels needs a CUDA GPU: torch.cuda.is_available() is False "
                         f"(torch {torch.__version__}, built with CUDA {torch.version.cuda})")
    if torch.version.cuda is None:
        raise BuildError(f"ptx_kernels needs a CUDA build of torch; this one is {torch.__version__}")
    from torch.utils.cpp_extension import CUDA_HOME
    nvcc = shutil.which("nvcc") or (CUDA_HOME and os.path.join(CUDA_HOME, "bin", "nvcc"))
    if not nvcc or not os.path.exists(nvcc):
        raise BuildError("ptx_kernels needs nvcc (the CUDA toolkit) to build its kernels: none on PATH or CUDA_HOME")


def build_dir_root() -> Path:
    return Path(os.environ.get("TENSORCORE_HGEMM_BUILD_DIR", Path.home() / ".cache" / "tensorcore_hgemm"))


def load(verbose: bool = False):
    """The compiled extension for the current GPU, built on first use (about a minute), then cached."""
    global _module
    if _module is not None:  # every hgemm call asks: no lock once built
        return _module
    with _lock:
        if _module is not None:
            return _module
        _check_toolchain()
        from torch.utils.cpp_extension import load as load_extension

        cap = torch.cuda.get_device_capability()
        cuda_flags = BASE_CUDA_FLAGS + arch_flags(cap)
        name = module_name(cuda_flags)
        build_dir = build_dir_root() / name
        build_dir.mkdir(parents=True, exist_ok=True)
        sources = [BINDING, *kernel_sources(cap[0] * 10 + cap[1])]
        os.environ.setdefault("MAX_JOBS", str(os.cpu_count() or 1))  # ninja: the kernel files in parallel
        with open(build_dir.parent / f"{name}.flock", "w") as flock:
            fcntl.flock(flock, fcntl.LOCK_EX)
            stale = build_dir / "lock"
            if stale.exists():
                stale.unlink()
            try:
                _module = load_extension(
                    name=name, sources=[str(p) for p in sources], extra_cuda_cflags=cuda_flags,
                    extra_cflags=["-O2", "-std=c++17"], extra_include_paths=[str(CSRC)],
                    build_directory=str(build_dir), verbose=verbose, with_cuda=True)
            except Exception as e:  # noqa: BLE001 - re-raised with the build folder named
                raise BuildError(f"building {name} in {build_dir} failed: {e}") from e
        return _module
