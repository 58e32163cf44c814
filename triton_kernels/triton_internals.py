"""Every Triton internal this project touches, per Triton release; nothing else in the project reads them.

Triton's public API ends at `kernel[grid](...)`. The direct launch (triton_kernels/launch.py) goes one step below
it: it hands the compiled kernel's launcher the arguments `kernel[grid]` would, without the binding. That needs
each release's launcher layout, read from its `triton/backends/nvidia/driver.py`:

- 3.6 builds a C launcher per kernel (`CudaLauncher.launch`, wrapped by `wrap_handle_tensordesc` where the kernel
  takes tensor descriptors): grid, stream, function, cooperative/PDL flags, global and profile scratch, then
  packed metadata, launch metadata, the enter and exit hooks and every kernel argument, flat. The CUtensorMap
  comes from `utils.fill_tma_descriptor`; an unlowered descriptor passes its padding flag between two copies of
  shape and strides.
- 3.7, 3.8 and 3.9 call one generic `utils.launch`: grid, stream, function, the flags, packed metadata, launch
  metadata, the hooks, both scratch buffers, `arg_annotations` and `kernel_signature` (built per kernel by
  `CudaLauncher`), then the kernel arguments as one sequence. The encoder is `utils.fill_tma_descriptor_tiled`;
  an unlowered descriptor also passes its tf32-rounding flag. 3.9 adds GSan (`CudaLauncher.gsan_enabled`), which
  appends arguments: such kernels take the JIT path.

tests/test_triton_versions.py lists these internals per release and proves, on the CPU against the installed
Triton's own Python launch path, that the direct launch hands its launcher the same arguments `kernel[grid]` does.
A release not in `LAYOUTS` takes the JIT path, and importing this module says so once (`slow_path_warning`).
"""
from __future__ import annotations

import warnings
from typing import NamedTuple

import triton
from triton import knobs


class Layout(NamedTuple):
    """How one Triton release's launcher takes its arguments (module docstring)."""
    generic: bool  # one `utils.launch` with the kernel arguments as one sequence (3.7+), else a C launcher per kernel
    encoder: str  # the `driver.active.utils` function that encodes a CUtensorMap
    unlowered_flags: int  # booleans between the two shape/stride copies of an unlowered descriptor


_PER_KERNEL = Layout(generic=False, encoder="fill_tma_descriptor", unlowered_flags=1)  # padding
_GENERIC = Layout(generic=True, encoder="fill_tma_descriptor_tiled", unlowered_flags=2)  # padding, tf32 rounding

# Releases whose launcher layout tests/test_triton_versions.py checks on the CPU (CI runs 3.6 and 3.9).
LAYOUTS = {"3.6.": _PER_KERNEL, "3.7.": _GENERIC, "3.8.": _GENERIC, "3.9.": _GENERIC}

# Every internal the project reads, per release: attributes of modules (dotted from `triton`), of a
# `CompiledKernel` and of its launcher (`CompiledKernel.run`, a `CudaLauncher`). The test resolves each one.
_COMMON = dict(
    module=("knobs.runtime.launch_enter_hook", "knobs.runtime.launch_exit_hook"),
    compiled=("run", "function", "packed_metadata", "metadata.tensordesc_meta"),
    launcher=("launch", "launch_cooperative_grid", "launch_pdl", "global_scratch_size", "profile_scratch_size"),
)
INTERNALS = {
    "3.6.": dict(_COMMON, module=(*_COMMON["module"], "runtime.driver.active.utils.fill_tma_descriptor")),
    **{v: dict(_COMMON, module=(*_COMMON["module"], "runtime.driver.active.utils.fill_tma_descriptor_tiled"),
               launcher=(*_COMMON["launcher"], "arg_annotations", "kernel_signature"))
       for v in ("3.7.", "3.8.")},
    "3.9.": dict(_COMMON, module=(*_COMMON["module"], "runtime.driver.active.utils.fill_tma_descriptor_tiled"),
                 launcher=(*_COMMON["launcher"], "arg_annotations", "kernel_signature", "gsan_enabled")),
}

# FP fusion (a * b + c to one FMA: gemv's CUDA-core loop, epilogues) set explicitly on every compile, so Triton
# 3.10's change of the default (to off; 3.9 warns about it) cannot change results. True is 3.6-3.9's default.
FP_FUSION = True
COMPILE_OPTIONS = {"enable_fp_fusion": FP_FUSION}

# triton 3.6-3.9 backends/nvidia/driver.py `TMA_DTYPE_DEVICE_TO_HOST`: the host's element-type enum differs from
# the device's here.
TMA_DTYPE_DEVICE_TO_HOST = {**{i: i for i in range(16)}, 8: 10, 9: 8, 10: 9}


def layout_for(version: str) -> Layout | None:
    return next((lay for v, lay in LAYOUTS.items() if version.startswith(v)), None)


LAYOUT = layout_for(triton.__version__)


def slow_path_warning(version: str) -> str | None:
    """The line importing the package prints when the direct launch does not apply to Triton `version`."""
    if layout_for(version) is not None:
        return None
    known = ", ".join(v + "x" for v in LAYOUTS)
    return (f"tensorcore-hgemm: triton {version} is not one of the releases its direct launch is written for "
            f"({known}): every Triton HGEMM call takes kernel[grid] (argument binding, specialization key, TMA "
            f"descriptor encoding), tens of microseconds more per call")


_WARNING = slow_path_warning(triton.__version__)
if _WARNING:
    warnings.warn(_WARNING, RuntimeWarning, stacklevel=2)


def nvdisasm_path() -> str:
    """The nvdisasm that ships with Triton's NVIDIA backend (what the SASS of a Triton cubin is read with)."""
    return knobs.nvidia.nvdisasm.path


def _hook_idle(hook) -> bool:
    """No launch hook: None, or the default since triton 3.6, an empty `knobs.HookChain` (never None there: the
    first GPU run of the direct launch found `is None` false and every plan on the JIT path)."""
    return hook is None or not getattr(hook, "calls", True)


def hooks_idle() -> bool:
    """No launch enter/exit hook is set (a profiler's): checked on every direct launch, so one set later still
    gets its calls through the JIT path."""
    runtime = knobs.runtime
    return _hook_idle(runtime.launch_enter_hook) and _hook_idle(runtime.launch_exit_hook)


def launcher_usable(launcher) -> bool:
    """Whether the direct launch can stand in for this `CudaLauncher`: no global or profile scratch to allocate per
    launch, no GSan arguments appended."""
    return not (launcher.global_scratch_size or launcher.profile_scratch_size
                or getattr(launcher, "gsan_enabled", False))


def encode_tma(ptr: int, meta: dict, shape: list, strides: list):
    """The CUtensorMap `make_tensordesc_arg` encodes for a lowered descriptor (no padding, no tf32 rounding, not
    fp4-padded, not im2col: what `TensorDescriptor(t, shape, strides, block)` of an fp16 or bf16 tensor is)."""
    assert strides[-1] == 1 and not meta["fp4_padded"] and not meta.get("is_im2col", False)
    encode = getattr(triton.runtime.driver.active.utils, LAYOUT.encoder)
    return encode(ptr, meta["swizzle"], meta["elem_size"], TMA_DTYPE_DEVICE_TO_HOST[meta["elem_type"]],
                  meta["block_size"], shape, strides, 0)


def unlowered_descriptor_tail(shape: list, strides: list) -> list:
    """What follows an unlowered descriptor's base pointer: shape, strides, the flags (all False), shape, strides."""
    return [*shape, *strides, *[False] * LAYOUT.unlowered_flags, *shape, *strides]


def _raw_launch(launcher):
    """The function `CudaLauncher.__call__` ends in: the C launch itself, unwrapped from `wrap_handle_tensordesc`'s
    closure (which encodes every descriptor on every call) where the kernel takes descriptors."""
    fn = launcher.launch
    if getattr(fn, "__closure__", None) is None:
        return fn
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__))
    return cells["launcher"].cell_contents


STREAM_AT = 3  # the stream's position in every layout's launch arguments (after grid x, y, z)


def launch_head(compiled, grid: tuple) -> tuple:
    """(raw, head): the C launch entry of one compiled kernel (`CudaLauncher.__call__`'s last call) and the
    arguments before the kernel's own, for `grid`, with no scratch, no launch metadata and no hooks (`hooks_idle`),
    the stream left None (`STREAM_AT`). A caller passes `*head, *kernel_args` to a per-kernel launcher (3.6) and
    `*head, kernel_args` to the generic one (`LAYOUT.generic`). `kernel_args`: every kernel parameter in order,
    constexprs included, descriptors expanded as `make_tensordesc_arg` does."""
    launcher = compiled.run  # loads the module and the function on the current device
    grid = [*grid, *[1] * (3 - len(grid))]
    flags = [compiled.function, launcher.launch_cooperative_grid, launcher.launch_pdl]
    if LAYOUT.generic:  # ... meta, launch metadata, enter/exit hooks, global/profile scratch, annotations, signature
        head = [*grid, None, *flags, compiled.packed_metadata, None, None, None, None, None,
                launcher.arg_annotations, launcher.kernel_signature]
    else:  # ... global/profile scratch, meta, launch metadata, enter/exit hooks
        head = [*grid, None, *flags, None, None, compiled.packed_metadata, None, None, None]
    return _raw_launch(launcher), head
