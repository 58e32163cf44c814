"""scripts/ holds at most ten maintained tools, each documented at its top and each at least importable or answering
`--help` on a machine without a GPU. Experiments are not kept here: their conclusions are in docs/design/."""
import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
FILES = sorted(p for p in SCRIPTS.iterdir() if p.is_file())
# argparse tools: `--help` answers without touching a GPU
HELP = ("library_kernels.py", "sass_diff.py", "sustained.py", "wall_time.py")
# generators of the wgmma wrappers: `generated()` is the text between the header's GENERATED markers
GENERATORS = ("gen_wgmma.py", "gen_wgmma_sp.py")


def _env():
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))


def test_at_most_ten_scripts():
    assert len(FILES) <= 10, f"scripts/ holds {len(FILES)} files: {[p.name for p in FILES]}"


def test_every_script_is_covered_below():
    shell = {p.name for p in FILES if p.suffix == ".sh"}
    assert {p.name for p in FILES} == shell | set(HELP) | set(GENERATORS) | {"sanitize_cases.py"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_documented_at_the_top(path):
    text = path.read_text()
    if path.suffix == ".py":
        doc = ast.get_docstring(ast.parse(text))
        assert doc and len(doc) > 60, f"{path.name}: no module docstring saying what it is and how to run it"
    else:
        lines = text.splitlines()
        assert lines[0].startswith("#!") and lines[1].startswith("# ") and "bash scripts/" in text[:800], \
            f"{path.name}: no header comment with its usage line"


@pytest.mark.parametrize("name", [p.name for p in FILES if p.suffix == ".sh"])
def test_shell_scripts_parse(name):
    assert subprocess.run(["bash", "-n", str(SCRIPTS / name)], capture_output=True).returncode == 0


@pytest.mark.parametrize("name", HELP)
def test_answers_help(name):
    res = subprocess.run([sys.executable, str(SCRIPTS / name), "--help"], capture_output=True, text=True,
                         env=_env(), cwd=ROOT, timeout=300)
    assert res.returncode == 0 and "usage:" in res.stdout, res.stderr[-2000:]


@pytest.mark.parametrize("name", [*GENERATORS, "sanitize_cases.py"])
def test_imports(name, monkeypatch):
    monkeypatch.syspath_prepend(str(SCRIPTS))
    mod = importlib.import_module(name.removesuffix(".py"))
    if name in GENERATORS:
        assert mod.generated() in mod.HEADER.read_text()
    else:
        assert callable(mod.main)
