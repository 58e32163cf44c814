"""Build the hand-written kernels into one extension with torch.utils.cpp_extension.load_inline, once per process.

The module name carries a hash of every source, the flags and the target, so an edited kernel is rebuilt and an
unchanged one is reused from the build folder. A build killed mid-way leaves torch's `lock` file behind, which
makes the next build wait forever: builds here are serialised with our own flock, under which a leftover
`lock` can only be stale, and is removed.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import threading
from pathlib import Path

import torch

from .variants import BINDING, CSRC, HEADERS, VARIANTS

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


EXTRA_SOURCES = ("mma_ceiling.cu", "probes.cu")  # compiled in beside the variants; not GEMM variants


def kernel_sources() -> list[Path]:
    return [v.source for v in VARIANTS] + [CSRC / name for name in EXTRA_SOURCES]


def combined_cuda_source() -> str:
    """The one CUDA translation unit load_inline compiles: every kernel file, in order."""
    return "\n".join(p.read_text() for p in kernel_sources())


def source_hash(flags: list[str]) -> str:
    h = hashlib.sha256()
    for path in [*(CSRC / n for n in HEADERS), *kernel_sources(), CSRC / BINDING]:
        h.update(path.name.encode())
        h.update(path.read_bytes())
    h.update(" ".join(flags).encode())
    h.update(torch.__version__.encode())
    return h.hexdigest()[:12]


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
    with _lock:
        if _module is not None:
            return _module
        _check_toolchain()
        from torch.utils.cpp_extension import load_inline

        cap = torch.cuda.get_device_capability()
        cuda_flags = BASE_CUDA_FLAGS + arch_flags(cap)
        name = f"tensorcore_hgemm_ptx_{source_hash(cuda_flags)}"
        build_dir = build_dir_root() / name
        build_dir.mkdir(parents=True, exist_ok=True)
        cuda_src = combined_cuda_source()
        cpp_src = (CSRC / BINDING).read_text()
        with open(build_dir.parent / f"{name}.flock", "w") as flock:
            fcntl.flock(flock, fcntl.LOCK_EX)
            stale = build_dir / "lock"
            if stale.exists():
                stale.unlink()
            try:
                _module = load_inline(
                    name=name, cpp_sources=[cpp_src], cuda_sources=[cuda_src],
                    functions=["hgemm_launch", "hgemm_variants", "hgemm_mma_ceiling", "probe_ldmatrix",
                               "probe_stmatrix", "probe_mma", "probe_wmma", "probe_asm"], extra_cuda_cflags=cuda_flags,
                    extra_cflags=["-O2", "-std=c++17"], extra_include_paths=[str(CSRC)],
                    build_directory=str(build_dir), verbose=verbose, with_cuda=True)
            except Exception as e:  # noqa: BLE001 - re-raised with the build folder named
                raise BuildError(f"building {name} in {build_dir} failed: {e}") from e
        return _module
