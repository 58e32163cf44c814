"""Test setup: the Triton interpreter without a GPU, the one GPU marker, and the shared fixtures.

Without a GPU the Triton kernels run in the interpreter: it must be chosen before triton_kernels is imported.

GPU tests carry one marker, `@pytest.mark.gpu` (registered in pyproject.toml; a module marks all its tests with
`pytestmark = pytest.mark.gpu`): skipped without a CUDA GPU, and `@pytest.mark.gpu(sm=90)` also on a GPU older than
sm_90. `pytest -m "not gpu"` leaves them out, `pytest -m gpu` runs only them. The helpers the tests share (operands,
exact checks, poisoned outputs) are tests/helpers.py.

HGEMM_TEST_SHARD=J/K runs the J-th of K disjoint shares of whatever the command line collects (`shard_units`), so K
pytest processes with the same arguments run every test once between them, side by side on one GPU (the GPU gate,
scripts/gpu_pass.sh gate).
"""
import os
import re

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


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """The whole suite on a machine without a GPU, with pytest-xdist installed (the test extra) and no -n given:
    one worker process per core, each taking whole test files (`--dist loadfile`: a file's module-scoped compile
    probes run once). The suite is mostly one-threaded Python (the interpreter) and one-threaded compiles, so
    every core works. Not on a GPU (one device shared by the tests: the GPU gate shards it itself), not for a
    chosen file or test, not in a shard or a worker; `-n 0` or `-p no:xdist` keeps one process."""
    if (HAS_CUDA or not config.pluginmanager.hasplugin("xdist") or os.environ.get(SHARD_ENV)
            or hasattr(config, "workerinput") or config.getoption("numprocesses", None) is not None
            or config.args_source != pytest.Config.ArgsSource.TESTPATHS):
        return
    config.option.numprocesses = "auto"
    if config.option.dist == "no":
        config.option.dist = "loadfile"
    # each worker one-threaded (the workers and the processes they start inherit this): torch's and numpy's thread
    # pools otherwise start a thread per core in every worker, and on the interpreter's many small operations the
    # spare threads mostly take CPU from the other workers
    os.environ.setdefault("OMP_NUM_THREADS", "1")


SHARD_ENV = "HGEMM_TEST_SHARD"


def shard_spec(spec: str) -> tuple[int, int]:
    """(J, K) of a HGEMM_TEST_SHARD value "J/K", 1 <= J <= K; a one-line usage error otherwise."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", spec)
    if not m or not 1 <= int(m[1]) <= int(m[2]):
        raise pytest.UsageError(f"{SHARD_ENV} must be J/K with 1 <= J <= K, got {spec!r}")
    return int(m[1]), int(m[2])


def shard_units(items) -> list[list]:
    """The collected tests in the units a shard runs whole, in collection order: a test alone, or every test of a
    module that uses one of the project's fixtures wider than a test (a module- or session-scoped compile probe
    then runs once, in one shard, not once per shard)."""
    units, shared = [], {}
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        wide = info is not None and any(defs and defs[-1].scope != "function" and defs[-1].baseid
                                        for defs in info.name2fixturedefs.values())  # baseid "": pytest's own
        if not wide:
            units.append([item])
            continue
        module = item.nodeid.split("::")[0]
        if module not in shared:
            shared[module] = []
            units.append(shared[module])
        shared[module].append(item)
    return units


def pytest_collection_modifyitems(config, items):
    for item in items:
        marker = item.get_closest_marker("gpu")
        reason = gpu_skip_reason(marker) if marker is not None else None
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))
    spec = os.environ.get(SHARD_ENV)
    if spec:  # units dealt round-robin: unit u to shard u % K + 1
        j, k = shard_spec(spec)
        units = shard_units(items)
        keep = [item for u, unit in enumerate(units) if u % k == j - 1 for item in unit]
        kept = set(map(id, keep))
        config.hook.pytest_deselected(items=[item for item in items if id(item) not in kept])
        items[:] = keep


@pytest.fixture
def device():
    return DEVICE


@pytest.fixture(autouse=True)
def _hand_back_cached_gpu_memory():
    """After a test that left gigabytes in this process's CUDA caching allocator, give them back to the GPU: the
    gate runs several pytest processes on one GPU, and what one keeps cached the others cannot allocate."""
    yield
    if HAS_CUDA and torch.cuda.is_initialized() and torch.cuda.memory_reserved() > 4 * 2**30:
        torch.cuda.empty_cache()
