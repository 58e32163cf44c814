"""Without a GPU the Triton kernels run in the interpreter: it must be chosen before triton_kernels is imported."""
import os

import pytest
import torch

HAS_CUDA = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") in ("", "0")
if not HAS_CUDA:
    os.environ["TRITON_INTERPRET"] = "1"

# Tensors live where the kernels can run: CUDA on a GPU machine, the CPU under the interpreter.
DEVICE = "cuda" if HAS_CUDA else "cpu"


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (skipped without one)")


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def device():
    return DEVICE
