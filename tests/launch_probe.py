"""Run by tests/test_triton_versions.py in a child process (no TRITON_INTERPRET: @triton.jit kernels must compile):
the installed Triton's own `kernel[grid]` path on a CPU-only machine, next to the direct launch, for the project's
Triton kernels. Prints one JSON line.

Everything above Triton's C layer is the installed Triton's: the JIT binder and cache, the compiler (for the GPU
target given on the command line), `CompiledKernel`, `CudaLauncher`, `wrap_handle_tensordesc`,
`make_tensordesc_arg`. Only the C layer and the device are stand-ins, because they need a GPU: the compiled C
modules (`compile_module_from_src` / `_file`) are replaced by `FakeC`, whose `launch` records what it is handed
and whose TMA encoder returns the bytes of its own arguments (so two descriptors compare equal exactly when a
real encoder was asked for the same map), and the driver's device queries return an H100's answers.
"""
from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import torch
import triton
import triton.backends.nvidia.driver as nv

STREAM = 0x5EED  # the raw stream handle both paths must hand over
CAPABILITY = int(sys.argv[1]) if len(sys.argv) > 1 else 90


class KernelArg:
    """Stand-in of the C type `PyKernelArg` (3.7+ `annotate_arguments`)."""

    def __init__(self, nested_tuple, type):
        self.nested_tuple, self.type = nested_tuple, type


class FakeC:
    """Triton's compiled C modules on a machine without libcuda: `cuda_utils` (driver.c) and 3.6's per-kernel
    `__triton_launcher`."""

    PyKernelArg = KernelArg
    PyCUtensorMap = bytes
    ARG_CONSTEXPR, ARG_KERNEL, ARG_TUPLE = 0, 1, 2

    def __init__(self):
        self.calls: list[tuple] = []
        self.encoded: list[tuple] = []

    def __getattr__(self, name):  # the module's other functions: bound at import, never called by a launch
        def absent(*args):
            raise RuntimeError(f"{name}: not available without a GPU")
        return absent

    def launch(self, *args):
        self.calls.append(args)

    def _encode(self, *args):
        self.encoded.append(args)
        return ("CUtensorMap" + repr(args)).encode()

    fill_tma_descriptor = fill_tma_descriptor_tiled = _encode

    def build_signature_metadata(self, signature):
        return ",".join(signature).encode()

    def load_binary(self, name, kernel, shared, device):
        return 1, 0xF00D, 128, 0, 1024  # module, function, registers, spills, max threads

    def get_device_properties(self, device):
        return {"max_shared_mem": 232448, "multiprocessor_count": 132, "max_num_regs": 65536, "warpSize": 32,
                "sm_clock_rate": 1980000, "mem_clock_rate": 2619000, "mem_bus_width": 5120}


FAKE = FakeC()
for name in ("compile_module_from_src", "compile_module_from_file"):
    if hasattr(nv, name):
        setattr(nv, name, lambda *a, **k: FAKE)
nv.library_dirs = lambda: []
drv = nv.CudaDriver()
drv.get_current_device = lambda: 0
drv.set_current_device = lambda device: None
drv.get_current_stream = lambda device=None: STREAM
drv.get_device_capability = lambda device=None: divmod(CAPABILITY, 10)
triton.runtime.driver.set_active(drv)

from triton import knobs  # noqa: E402

from triton_kernels import blocked, gemv, splitk, splitk_tma, splitk_wide, tma_persistent, triton_internals  # noqa: E402
from triton_kernels.launch import DESCRIPTORS, Desc, Direct, Kept, jit_launch  # noqa: E402

tma_persistent._num_sms = lambda index: 132  # an H100's SMs: the persistent grid


def norm(x):
    """What the C launcher reads from an argument: a tensor as its address (its `data_ptr()`, as the launcher's
    pointer conversion does), an idle hook or launch metadata as nothing (the launcher only passes the metadata to
    the hooks, and calls a hook only when it is not None), sequences element by element."""
    if isinstance(x, torch.Tensor):
        return x.data_ptr()
    if isinstance(x, (list, tuple)):
        return [norm(v) for v in x]
    if isinstance(x, bytes):
        return ["bytes", x.decode()]
    if x is None or type(x).__name__ in ("HookChain", "LazyDict") and triton_internals.hooks_idle():
        return None
    if isinstance(x, KernelArg):
        return ["arg", x.type, norm(x.nested_tuple)]
    if isinstance(x, (bool, int, float, str)):
        return x
    return ["object", type(x).__name__, id(x)]  # the same object on both paths, or a mismatch


def operands_of(a, b, c, specs):
    """A, B, C, then the call's other tensors, as dispatch.py's `_keep` lists them."""
    ops = [a, b, c]
    for spec in specs:
        for t in spec.args:
            t = t.tensor if isinstance(t, Kept) else t
            if isinstance(t, torch.Tensor) and not any(t is o for o in ops):
                ops.append(t)
    return ops


def run_case(name, mod, m, n, k, layout, dtype, config):
    torch.manual_seed(0)
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]

    def inputs():
        a = torch.randn(m, k, dtype=dt) if layout[0] == "N" else torch.randn(k, m, dtype=dt).t()
        b = torch.randn(k, n, dtype=dt) if layout[1] == "N" else torch.randn(n, k, dtype=dt).t()
        return a, b, torch.empty(m, n, dtype=dt)

    DESCRIPTORS.clear()
    rows, directs = [], []
    for call in range(3):  # first call: compile + keep; then new tensors (new addresses), then the first again
        if call < 2:
            a, b, c = inputs()
            first = (a, b, c) if call == 0 else first
        else:
            a, b, c = first
        specs = mod.launches(a, b, c, False, config)
        ops = operands_of(a, b, c, specs)
        for i, spec in enumerate(specs):
            n_calls, n_enc = len(FAKE.calls), len(FAKE.encoded)
            compiled = jit_launch(spec)
            jit = FAKE.calls[-1]
            assert len(FAKE.calls) == n_calls + 1
            jit_encoded = FAKE.encoded[n_enc:]
            if call == 0:
                directs.append(Direct(compiled, spec, ops))
            n_enc = len(FAKE.encoded)
            directs[i]([t.data_ptr() for t in ops], STREAM)
            direct = FAKE.calls[-1]
            rows.append(dict(case=name, call=call, launch=i, jit=norm(jit), direct=norm(direct),
                             jit_encoded=norm(jit_encoded), direct_encoded=norm(FAKE.encoded[n_enc:]),
                             fp_fusion=compiled.metadata.enable_fp_fusion,
                             descs=sum(isinstance(x, Desc) for x in spec.args),
                             lowered=len(getattr(compiled.metadata, "tensordesc_meta", None) or [])))
    return rows


CASES = [
    ("blocked NT fp16", blocked, 300, 264, 520, "NT", "fp16", blocked.configs()[0]),
    ("splitk NN fp16", splitk, 16, 256, 4096, "NN", "fp16", splitk.configs()[0]),
    ("gemv NN fp16", gemv, 1, 256, 1024, "NN", "fp16", gemv.configs()[0]),
]
if CAPABILITY >= 90:
    CASES += [
        ("tma NN fp16", tma_persistent, 256, 256, 128, "NN", "fp16", tma_persistent.configs()[0]),
        ("tma TT bf16", tma_persistent, 256, 256, 128, "TT", "bf16", tma_persistent.configs()[0]),
        ("splitk_tma NN fp16", splitk_tma, 16, 256, 4096, "NN", "fp16", splitk_tma.configs()[0]),
        # two launches, the second a programmatic dependent launch (its launcher's PDL flag)
        ("splitk_wide NT fp16", splitk_wide, 256, 256, 8192, "NT", "fp16", splitk_wide.configs()[1]),
    ]
else:  # descriptors the compiler does not lower to CUtensorMaps (no TMA before sm_90)
    CASES += [("tma NT fp16", tma_persistent, 256, 256, 128, "NT", "fp16", tma_persistent.configs()[0])]



def resolve(obj, dotted: str) -> bool:
    try:
        for part in dotted.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        return False
    return True


def internals(compiled) -> dict:
    """Whether each internal of each release's list (triton_internals.INTERNALS) resolves on the installed Triton:
    module attributes from `triton`, the others on a real CompiledKernel and its CudaLauncher."""
    on = dict(module=triton, compiled=compiled, launcher=compiled.run)
    return {version: {f"{kind}:{name}": resolve(on[kind], name) for kind, names in lists.items() for name in names}
            for version, lists in triton_internals.INTERNALS.items()}


def wrong_layouts_differ(compiled, spec, ops, jit) -> dict:
    """The comparison can fail: the direct launch built with each other release's layout hands over other
    arguments than kernel[grid] did (`jit`, normalized), or cannot be built at all."""
    out = {}
    for version, lay in triton_internals.LAYOUTS.items():
        if lay == triton_internals.LAYOUT:
            continue
        saved, triton_internals.LAYOUT = triton_internals.LAYOUT, lay
        try:
            DESCRIPTORS.clear()
            Direct(compiled, spec, ops)([t.data_ptr() for t in ops], STREAM)
            out[version] = norm(FAKE.calls[-1]) != jit
        except Exception:  # noqa: BLE001 - an error is a difference too
            out[version] = True
        finally:
            triton_internals.LAYOUT = saved
    return out


if __name__ == "__main__":
    rows = []
    for case in CASES:
        rows += run_case(*case)
    name, mod, m, n, k, layout, dtype, config = CASES[-1]
    a, b = torch.randn(m, k, dtype=torch.float16), torch.randn(k, n, dtype=torch.float16)
    c = torch.empty(m, n, dtype=torch.float16)
    spec = mod.launches(a, b, c, False, config)[-1]
    compiled = jit_launch(spec)
    wrong = wrong_layouts_differ(compiled, spec, operands_of(a, b, c, [spec]), norm(FAKE.calls[-1]))
    print(json.dumps(dict(triton=triton.__version__, capability=CAPABILITY, hooks_idle=triton_internals.hooks_idle(),
                          default_fp_fusion=knobs.language.default_fp_fusion, rows=rows, internals=internals(compiled),
                          wrong_layouts_differ=wrong)))
