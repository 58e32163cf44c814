"""Test setup: the Triton interpreter without a GPU, the one GPU marker, and the shared fixtures.

Without a GPU the Triton kernels run in the interpreter: it must be chosen before triton_kernels is imported.

GPU tests carry one marker, `@pytest.mark.gpu` (registered in pyproject.toml; a module marks all its tests with
`pytestmark = pytest.mark.gpu`): skipped without a CUDA GPU, and `@pytest.mark.gpu(sm=90)` also on a GPU older than
sm_90. `pytest -m "not gpu"` leaves them out, `pytest -m gpu` runs only them. The helpers the tests share (operands,
exact checks, poisoned outputs) are tests/helpers.py.
"""
import os

import pytest
import torch

HAS_CUDA = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") in ("", "0")
if not HAS_CUDA:
    os.environ["TRITON_INTERPRET"] = "1"

# Tensors live where the kernels can run: CUDA on a GPU machine, the CPU under the interpreter.
DEVICE = "cuda" if HAS_CUDA else "cpu"
# Compute capability x 10 of the GPU the tests run on (None without one).
ARCH = (lambda major, minor: major * 10 + minor)(*torch.cuda.get_device_capability()) if HAS_CUDA else None


def gpu_skip_reason(marker) -> str | None:
    """Why a test marked `gpu` (or `gpu(sm=N)`) cannot run here, or None when it can."""
    if not HAS_CUDA:
        return "needs a CUDA GPU"
    sm = marker.kwargs.get("sm")
    if sm is not None and ARCH < sm:
        return f"needs sm_{sm}; this GPU is sm_{ARCH}"
    return None


def pytest_collection_modifyitems(config, items):
    for item in items:
        marker = item.get_closest_marker("gpu")
        reason = gpu_skip_reason(marker) if marker is not None else None
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def device():
    return DEVICE
