"""The project's errors (`hgemm_common.errors`): caught like torch.mm's (RuntimeError) and like the ValueError /
TypeError raised before; every raise in the packages uses them; a keyword and its alias given together is one
line naming both."""
import ast
from pathlib import Path

import pytest
import torch

import ptx_kernels
import triton_kernels
from hgemm_common.errors import HgemmError, HgemmTypeError, HgemmValueError

from conftest import DEVICE

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("hgemm_common", "triton_kernels", "ptx_kernels", "compare")
BARE = ("ValueError", "TypeError", "RuntimeError")


def bare_raises(path: Path) -> list[str]:
    """`raise ValueError(...)` (TypeError, RuntimeError) in a file: file:line of each."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name) and exc.id in BARE:
                out.append(f"{path.relative_to(ROOT)}:{node.lineno} raise {exc.id}")
    return out


def test_the_classes_are_caught_both_ways():
    assert issubclass(HgemmValueError, RuntimeError) and issubclass(HgemmValueError, ValueError)
    assert issubclass(HgemmTypeError, RuntimeError) and issubclass(HgemmTypeError, TypeError)
    assert issubclass(HgemmError, RuntimeError) and not issubclass(HgemmError, (ValueError, TypeError))
    assert triton_kernels.HgemmError is ptx_kernels.HgemmError is HgemmError
    assert issubclass(ptx_kernels.BuildError, RuntimeError)


def test_no_bare_raise_in_the_packages():
    """Every error the packages raise is an HgemmError (so `except RuntimeError` catches it as it catches
    torch.mm's); a bare ValueError, TypeError or RuntimeError fails here with its place."""
    found = [r for p in PACKAGES for f in sorted((ROOT / p).rglob("*.py")) for r in bare_raises(f)]
    assert not found, "raise the hgemm_common.errors classes instead: " + ", ".join(found)


def test_the_walk_finds_a_bare_raise(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def f(x):\n    if x:\n        raise ValueError('x')\n    raise HgemmValueError('y')\n")
    global ROOT
    root, ROOT = ROOT, tmp_path
    try:
        assert bare_raises(f) == ["m.py:3 raise ValueError"]
    finally:
        ROOT = root


def test_torch_mm_words_caught_as_runtime_error():
    """What `except RuntimeError` around torch.mm catches, it catches around hgemm: shapes, dtypes, kernels."""
    a = torch.zeros(3, 4, dtype=torch.float16, device=DEVICE)
    b = torch.zeros(5, 6, dtype=torch.float16, device=DEVICE)
    for call in (lambda: torch.mm(a.float(), b.float()), lambda: triton_kernels.hgemm(a, b)):
        with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(3x4 and 5x6\)"):
            call()
    with pytest.raises(RuntimeError, match="expected both inputs to be torch.float16 or both torch.bfloat16"):
        triton_kernels.hgemm(a, b.float())
    with pytest.raises(TypeError):
        triton_kernels.hgemm(a, b.float())
    with pytest.raises(ValueError, match="kernel must be one of"):
        triton_kernels.hgemm(a, a.t(), kernel="fastest")


@pytest.mark.parametrize("call", [
    lambda a: triton_kernels.hgemm(a, a.t(), kernel="blocked", variant="splitk"),
    lambda a: triton_kernels.plan(a, a.t(), kernel="blocked", variant="splitk"),
    lambda a: ptx_kernels.hgemm(a, a.t(), kernel="mma_tiled", variant="mma_naive"),
    lambda a: ptx_kernels.sparse_hgemm(a, a, a, kernel="auto", variant="mma_sp"),
    lambda a: ptx_kernels.SparseA(torch.zeros(8, 32, dtype=torch.float16)).matmul(a, kernel="x", variant="y"),
    lambda a: triton_kernels.Linear(4, 4, kernel="auto", variant="splitk"),
    lambda a: ptx_kernels.Linear(4, 4, kernel="mma_tiled", variant="mma_naive"),
], ids=["triton.hgemm", "triton.plan", "ptx.hgemm", "ptx.sparse_hgemm", "SparseA.matmul", "triton.Linear",
        "ptx.Linear"])
def test_kernel_and_its_alias_together_is_one_line(call):
    a = torch.zeros(8, 32, dtype=torch.float16, device=DEVICE)
    with pytest.raises(HgemmValueError, match=r"^[\w.]+: variant= is another name for kernel=; give one, got "
                                              r"kernel='[\w]+' and variant='[\w]+'$"):
        call(a)


_LATE_INTERPRETER = """
import os, torch, triton_kernels
os.environ["TRITON_INTERPRET"] = "1"  # after the import: the kernels were defined for the GPU
a = torch.randint(-3, 4, (40, 72)).half()
b = torch.randint(-3, 4, (72, 24)).half()
for call in (lambda: triton_kernels.hgemm(a, b), lambda: torch.ops.tensorcore_hgemm.triton_hgemm(a, b, "fp32")):
    try:
        call()
        print("ran")
    except Exception as e:
        print(type(e).__name__, isinstance(e, RuntimeError), str(e).replace(chr(10), " | "))
"""


def test_interpreter_switched_on_after_import_is_explained():
    """TRITON_INTERPRET=1 set after triton_kernels was imported: one line from the library saying so and what to do,
    from hgemm and the operator alike, not Triton's "0 active drivers" (a child process that imported without it)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    res = subprocess.run([sys.executable, "-c", _LATE_INTERPRETER], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    want = ("HgemmError True hgemm: TRITON_INTERPRET=1 was set after triton_kernels was imported, and Triton decides "
            "at import whether its kernels are interpreted; set it before the first import (in the shell, or at the "
            "top of the script)")
    assert res.stdout.splitlines() == [want, want], res.stdout


def test_interpreter_with_too_new_numpy_is_explained(monkeypatch):
    """Under the interpreter, a numpy the interpreter cannot run on (2.4 and later) gets one line from the library
    naming the version and the fix, before any kernel runs (not numpy's TypeError from deep inside Triton)."""
    import numpy as np

    from hgemm_common.validation import interpreter_numpy_problem
    from triton_kernels.launch import Spec, jit_launch

    monkeypatch.setattr(np, "__version__", "2.4.1")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    interpreter_numpy_problem.cache_clear()
    try:
        assert interpreter_numpy_problem() == ("Triton's interpreter (TRITON_INTERPRET=1) needs numpy<2.4, and numpy "
                                               "2.4.1 is installed: pip install 'numpy<2.4'")
        from triton_kernels import launch

        monkeypatch.setattr(launch, "interpreter_switched", lambda: None)
        with pytest.raises(HgemmError, match=r"^hgemm: Triton's interpreter .* needs numpy<2.4, and numpy 2.4.1 "):
            jit_launch(Spec(None, (1,), (), 4, 3))
        monkeypatch.setattr(np, "__version__", "2.3.5")
        interpreter_numpy_problem.cache_clear()
        assert interpreter_numpy_problem() is None
    finally:
        interpreter_numpy_problem.cache_clear()
