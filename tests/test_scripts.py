"""scripts/ holds at most ten maintained tools, each documented at its top and each at least importable or answering
`--help` on a machine without a GPU. Experiments are not kept here: their conclusions are in docs/design/."""
import ast
import importlib
import os
import re
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


def gate_shards() -> list[tuple[str, str, list[str]]]:
    """gpu_pass.sh's GATE_SHARDS: (name, split, test files) per pytest process of the GPU gate's part 2."""
    text = (SCRIPTS / "gpu_pass.sh").read_text()
    block = re.search(r"^GATE_SHARDS=\((.*?)^\)", text, re.S | re.M)
    assert block, "gpu_pass.sh has no GATE_SHARDS=( ... ) table"
    rows = [line.split() for line in re.findall(r'^\s*"([^"]*)"', block[1], re.M)]
    return [(row[0], row[1], row[2:]) for row in rows]


def test_the_gate_runs_every_gpu_test_file_whole_once():
    """Every test file with a GPU test (a gpu mark, or conftest's DEVICE / HAS_CUDA, or torch.cuda.is_available())
    is in the gate's shard table; a file is either whole in one shard or split J/K into all K shares, one each; the
    files exist and the shard names are unique."""
    shards = gate_shards()
    names = [name for name, _, _ in shards]
    assert len(names) == len(set(names)), names
    splits: dict[str, list[str]] = {}
    for name, split, files in shards:
        assert files and (split == "-" or re.fullmatch(r"\d+/\d+", split)), (name, split, files)
        for f in files:
            assert (ROOT / f).is_file(), f"{name}: {f} does not exist"
            splits.setdefault(f, []).append(split)
    for f, got in splits.items():
        k = len(got)
        assert got == ["-"] or sorted(got) == sorted(f"{j}/{k}" for j in range(1, k + 1)), \
            f"{f} runs as {got}: whole once, or J/K for every J of one K"
    gpu = re.compile(r"pytest\.mark\.gpu|from conftest import .*\b(DEVICE|HAS_CUDA)\b|torch\.cuda\.is_available\(\)")
    need = {f"tests/{p.name}" for p in (ROOT / "tests").glob("test_*.py")
            if p.name != Path(__file__).name and gpu.search(p.read_text())}  # this file names the marks, runs none
    assert need - set(splits) == set(), f"GPU test files the gate leaves out: {sorted(need - set(splits))}"


def test_shards_run_every_test_once_and_a_shared_fixture_in_one(monkeypatch):
    """HGEMM_TEST_SHARD=J/K (tests/conftest.py): the K shares of one collection are disjoint and cover it, in
    collection order; the tests of a module that share a module- or session-scoped project fixture stay in one share
    (pytest's own wide fixtures, baseid "", do not tie tests together); a bad J/K is a one-line usage error."""
    from types import SimpleNamespace as NS

    import conftest

    def item(nodeid, *fixtures):
        defs = {name: [NS(scope=scope, baseid=base)] for name, scope, base in fixtures}
        return NS(nodeid=nodeid, _fixtureinfo=NS(name2fixturedefs=defs), get_closest_marker=lambda name: None)

    tmp = ("tmp_path_factory", "session", "")
    probe = ("compiles", "module", "tests/test_a.py")
    items = [item("tests/test_a.py::t0", tmp), item("tests/test_a.py::t1", probe), item("tests/test_a.py::t2"),
             item("tests/test_a.py::t3", probe, tmp), item("tests/test_b.py::t4"), item("tests/test_b.py::t5", tmp)]
    shares = []
    for j in (1, 2, 3):
        monkeypatch.setenv(conftest.SHARD_ENV, f"{j}/3")
        got, dropped = list(items), []
        conftest.pytest_collection_modifyitems(NS(hook=NS(pytest_deselected=lambda items: dropped.extend(items))),
                                               got)
        assert sorted(map(id, got + dropped)) == sorted(map(id, items))
        shares.append([i.nodeid.split("::")[1] for i in got])
    assert shares == [["t0", "t4"], ["t1", "t3", "t5"], ["t2"]]
    for bad in ("0/3", "4/3", "2", "a/b"):
        with pytest.raises(pytest.UsageError, match="HGEMM_TEST_SHARD must be J/K"):
            conftest.shard_spec(bad)
