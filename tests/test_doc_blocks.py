"""The README's and docs/usage.md's Python blocks run as they stand: the text is read from the files, nothing is
edited for the test.

What a block needs is said by the word after `python` on its opening fence, which Markdown viewers do not show
(they read the first word only):

- ```` ```python ````: runs as written on any machine (here: the CPU, under TRITON_INTERPRET=1 as the tests run).
- ```` ```python gpu ````: needs a CUDA GPU (CUDA tensors, the hand-written kernels). On one, `pytest -m gpu` runs
  every statement. The CPU test runs its imports and checks every other statement instead of running it: each
  dotted name it reads from what the file has imported resolves (`torch.ops.tensorcore_hgemm.triton_hgemm`), each
  call of a function so named binds to its signature (keyword names, argument count; an operator's to its
  schema), each `kernel="..."` is a name the callee's package takes, and each plain name it reads was bound
  before it in the file.
- ```` ```python script ````: a script of its own: run in a fresh Python process with TRITON_INTERPRET unset (the
  block sets what it needs itself), here and on a GPU alike.

The blocks of one file share one namespace, in order, as a reader pasting them into one session would.
"""
from __future__ import annotations

import ast
import builtins
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hgemm_common.validation import interpreter_numpy_problem

ROOT = Path(__file__).resolve().parent.parent
PAGES = ("README.md", "docs/usage.md")
FENCE = re.compile(r"^```python(?:[ \t]+(\w+))?[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
MARKERS = ("", "gpu", "script")


class DocBlockError(AssertionError):
    """A block that fails as written: where (page:line) and why."""


def python_blocks(text: str) -> list[tuple[str, str, int]]:
    """(marker, code, line of the code's first line) of every ```python block of a page."""
    out = []
    for m in FENCE.finditer(text):
        marker = m.group(1) or ""
        if marker not in MARKERS:
            raise DocBlockError(f"line {text.count(chr(10), 0, m.start()) + 1}: unknown block marker {marker!r}")
        out.append((marker, m.group(2), text.count("\n", 0, m.start(2)) + 1))
    return out


def _root_and_chain(node: ast.expr) -> tuple[str, list[str]] | None:
    """`a.b.c` -> ("a", ["b", "c"]); None when the expression is not a dotted name."""
    chain = []
    while isinstance(node, ast.Attribute):
        chain.append(node.attr)
        node = node.value
    return (node.id, chain[::-1]) if isinstance(node, ast.Name) else None


def _package(obj) -> str:
    return (getattr(obj, "__module__", None) or getattr(obj, "__name__", "") or "").split(".")[0]


def kernel_names() -> dict[str, set[str]]:
    """Per package, every name its kernel= takes on some machine (records not offered here included)."""
    import ptx_kernels
    from triton_kernels import variants

    triton = set(variants.KERNEL_NAMES) | {n for v in variants.RECORDS for n in (v.name, *v.aliases)}
    ptx = {v.name for kind in ("dense", "sparse") for v in ptx_kernels.variants(kind)} | {"auto"}
    return {"triton_kernels": triton, "ptx_kernels": ptx}


def _bind(fn, call: ast.Call, where: str) -> None:
    """Whether the call's argument count and keyword names fit fn's signature (or an operator's schema)."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return
    keywords = [k.arg for k in call.keywords]
    schema = getattr(getattr(fn, "default", None), "_schema", None)  # torch.ops.<ns>.<op>
    if schema is not None:
        names = [a.name for a in schema.arguments]
        positional = [a for a in schema.arguments if not a.kwarg_only]
        bad = [k for k in keywords if k not in names]
        if len(call.args) > len(positional) or bad:
            raise DocBlockError(f"{where}: {len(call.args)} positional arguments and keywords {keywords} do not fit "
                                f"{schema}")
        return
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature
        return
    try:
        sig.bind(*[None] * len(call.args), **dict.fromkeys(keywords))
    except TypeError as e:
        raise DocBlockError(f"{where}: {ast.unparse(call.func)}{sig}: {e}") from None


def check_statement(stmt: ast.stmt, ns: dict, bound: set[str], where: str) -> None:
    """A statement that needs a GPU, checked without running it (see the module's header)."""
    local = set()  # names the statement binds for itself: comprehension targets, lambda arguments
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            local.add(node.id)
        elif isinstance(node, ast.arg):
            local.add(node.arg)
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id not in ns and node.id not in bound and node.id not in local and not hasattr(builtins, node.id):
                raise DocBlockError(f"{where}: {node.id!r} is used but nothing before it in the page defines it")
    for node in ast.walk(stmt):
        if isinstance(node, ast.Attribute):
            dotted = _root_and_chain(node)
            if dotted and dotted[0] in ns:
                obj = ns[dotted[0]]
                for i, attr in enumerate(dotted[1]):
                    if not hasattr(obj, attr):
                        raise DocBlockError(f"{where}: {'.'.join([dotted[0], *dotted[1][:i + 1]])} does not exist "
                                            f"(after the page's imports)")
                    obj = getattr(obj, attr)
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call):
            dotted = _root_and_chain(node.func)
            if not dotted or dotted[0] not in ns:
                continue
            fn = ns[dotted[0]]
            for attr in dotted[1]:
                fn = getattr(fn, attr)
            _bind(fn, node, where)
            names = kernel_names().get(_package(fn))
            for k in node.keywords:
                if k.arg == "kernel" and isinstance(k.value, ast.Constant) and names is not None \
                        and k.value.value not in names:
                    raise DocBlockError(f"{where}: {ast.unparse(node.func)}(kernel={k.value.value!r}): no kernel of "
                                        f"{_package(fn)} has that name")
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)


def run_script(code: str, where: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    if res.returncode != 0:
        raise DocBlockError(f"{where}: the script failed:\n{res.stderr[-3000:]}")


def run_page(text: str, page: str, gpu: bool) -> dict[str, int]:
    """Run (or, for GPU statements without a GPU, check) every Python block of a page in order; how many
    statements were run and checked, and how many scripts ran."""
    ns: dict = {"__name__": "__doc_block__"}
    bound: set[str] = set()
    counts = {"run": 0, "checked": 0, "scripts": 0}
    for marker, code, line in python_blocks(text):
        where = f"{page}:{line}"
        if marker == "script":
            if "TRITON_INTERPRET" in code and interpreter_numpy_problem():
                counts["unrunnable"] = counts.get("unrunnable", 0) + 1  # the page says what it needs; not here
                continue
            run_script(code, where)
            counts["scripts"] += 1
            continue
        tree = ast.parse(code, where)
        ast.increment_lineno(tree, line - 1)
        for stmt in tree.body:
            at = f"{page}:{stmt.lineno}"
            if marker == "gpu" and not gpu and not isinstance(stmt, (ast.Import, ast.ImportFrom)):
                check_statement(stmt, ns, bound, at)
                counts["checked"] += 1
                continue
            try:
                exec(compile(ast.Module([stmt], []), page, "exec"), ns)
            except Exception as e:  # noqa: BLE001 - any failure of a documented line is the finding
                raise DocBlockError(f"{at}: {ast.unparse(stmt)!r} raised {type(e).__name__}: {e}") from e
            counts["run"] += 1
    return counts


@pytest.mark.parametrize("page", PAGES)
def test_python_blocks_work_as_written(page):
    """The unmarked blocks and the scripts run, the GPU blocks' imports run and their other statements check (the
    test below runs those on a GPU)."""
    text = (ROOT / page).read_text()
    counts = run_page(text, page, gpu=False)
    assert counts["run"] + counts["checked"] == sum(len(ast.parse(c).body) for m, c, _ in python_blocks(text)
                                                    if m != "script")
    assert counts["run"] > 0


@pytest.mark.gpu(sm=90)
@pytest.mark.parametrize("page", PAGES)
def test_python_blocks_run_on_the_gpu(page):
    """Every statement of every block runs (the hand-written Hopper kernels included: sm_90)."""
    text = (ROOT / page).read_text()
    counts = run_page(text, page, gpu=True)
    assert counts["checked"] == 0 and counts["run"] > 0


@pytest.mark.parametrize("block, words", [
    ("```python gpu\nimport torch\nc = torch.ops.tensorcore_hgemm.no_such_op(1)\n```",
     "torch.ops.tensorcore_hgemm.no_such_op does not exist"),
    ("```python gpu\nimport triton_kernels\nc = triton_kernels.hgemm(1, 2, kernl='auto')\n```",
     "unexpected keyword argument 'kernl'"),
    ("```python gpu\nimport triton_kernels\nc = triton_kernels.hgemm(1, 2, kernel='wgmma_persistent')\n```",
     "no kernel of triton_kernels has that name"),
    ("```python gpu\nimport ptx_kernels\nc = ptx_kernels.hgemm(1, 2, kernel='triton_tma')\n```",
     "no kernel of ptx_kernels has that name"),
    ("```python gpu\nimport torch\nc = torch.ops.tensorcore_hgemm.triton_hgemm(a, b, 'fp32', 'auto', None, 5)\n```",
     "'a' is used but nothing before it"),
    ("```python gpu\nimport torch, triton_kernels\na = torch.ones(2, device='cuda')\n"
     "c = torch.ops.tensorcore_hgemm.triton_hgemm(a, a, 'fp32', 'auto', None, 5)\n```", "do not fit"),
    ("```python\nimport triton_kernels\ntriton_kernels.hgemm(1, 2)\n```", "raised HgemmTypeError"),
    ("```python script\nraise SystemExit(3)\n```", "the script failed"),
    ("```python cuda\npass\n```", "unknown block marker 'cuda'"),
])
def test_a_block_that_fails_as_written_fails_the_test(block, words):
    """The checks can fail: a missing attribute, a wrong keyword, a kernel name of the other package, a name never
    defined, an operator call with too many arguments, a CPU line that raises, a failing script, an unknown marker."""
    with pytest.raises(DocBlockError, match=re.escape(words)):
        run_page(block, "page.md", gpu=False)


def test_blocks_are_found_with_their_lines():
    text = "x\n```python\na = 1\n```\n```bash\nls\n```\n```python gpu\nb = 2\nc = 3\n```\n"
    assert python_blocks(text) == [("", "a = 1\n", 3), ("gpu", "b = 2\nc = 3\n", 9)]
    assert run_page(text, "page.md", gpu=False) == {"run": 1, "checked": 2, "scripts": 0}
