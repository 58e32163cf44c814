"""`python -m compare` as a user meets it on a machine without a GPU: the main job without nvcc, one-line errors
for wrong names, names that round-trip between the report and the verbs, logs without progress frames."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compare import check
from conftest import HAS_CUDA

ROOT = Path(__file__).resolve().parent.parent


def _compare(*args, env=None, cwd=ROOT, timeout=300):
    return subprocess.run([sys.executable, "-m", "compare", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


def _without_nvcc() -> dict:
    """The environment of a machine without the CUDA toolkit: no nvcc on PATH, CUDA_HOME pointing nowhere."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(d for d in env.get("PATH", "").split(os.pathsep)
                                  if d and not os.path.exists(os.path.join(d, "nvcc")))
    env["CUDA_HOME"] = env["CUDA_PATH"] = str(ROOT / "no-cuda-here")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _one_line_error(res, *words):
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    for w in words:
        assert w in lines[0], lines[0]


@pytest.mark.skipif(HAS_CUDA, reason="the CPU main job")
def test_main_job_without_gpu_or_nvcc(tmp_path):
    res = _compare("--out", str(tmp_path), env=_without_nvcc(), timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "all checks passed" in res.stdout and "Traceback" not in res.stdout + res.stderr
    assert "needs nvcc" in res.stdout and "need a CUDA GPU" in res.stdout
    assert "\r" not in res.stderr  # no progress frames when stderr is not a terminal
    assert "phase check:" in res.stdout
    index = (tmp_path / "index.md").read_text()
    assert "| `triton_blocked` | sm_90 |" in index and "| `triton_tma` | sm_90 |" in index
    assert "## Not run here" in index and "needs nvcc" in index and "| phase | seconds |" in index


def test_unknown_kernel_pattern_is_one_line():
    _one_line_error(_compare("check", "--kernels", "nosuch*"), "nosuch*", "triton_blocked", "wmma_multistage")


def test_inspect_unknown_name_is_one_line():
    _one_line_error(_compare("inspect", "foo"), "'foo'", "wmma_multistage_fp16acc", "triton")


def test_inspect_takes_table_names_and_writes_outside_the_checkout(tmp_path):
    """`triton` (the auto choice) and a pinned configuration, as the check table prints them; no --out: a
    temporary folder, never ./inspect in the checkout."""
    import triton_kernels

    pinned = f"triton_blocked_fp16acc[{triton_kernels.configs('blocked')[-1].name}]"
    before = (ROOT / "inspect").exists()
    res = _compare("inspect", "triton", pinned, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert "| `triton` | sm_90 |" in res.stdout and f"| `{pinned}` | sm_90 |" in res.stdout
    assert (ROOT / "inspect").exists() == before
    folder = Path(res.stdout.strip().splitlines()[-1].split(" in ")[-1])
    assert folder.is_dir() and not folder.resolve().is_relative_to(ROOT)
    assert (folder / "inspect.md").exists()


@pytest.mark.skipif(HAS_CUDA, reason="the CPU refusal")
def test_layouts_hardware_without_gpu_is_one_line(tmp_path):
    _one_line_error(_compare("layouts", "--hardware", "--out", str(tmp_path)), "--hardware", "GPU")


def test_plot_of_a_missing_file_is_one_line(tmp_path):
    _one_line_error(_compare("plot", str(tmp_path / "nothing.json")), "nothing.json")


def test_help_lists_every_verb():
    res = _compare("--help")
    assert res.returncode == 0
    for verb in ("check", "bench", "plot", "inspect", "layouts", "tune", "sweep"):
        assert verb in res.stdout.split("positional arguments")[0], verb


def test_pairwise_columns_are_distinct():
    names = ["triton_blocked_fp16acc", "triton_blocked_fp16acc[128x256x64_w8_s3_g8]", "wmma_multistage_fp16acc",
             "wmma_multistage"]
    text = check.format_pairwise(names, [[0.0] * 4 for _ in names])
    head = text.splitlines()[1].split()
    assert len(head) == len(set(head)) == len(names)
    for i, n in enumerate(names):
        assert f"[{i}] {n}" in text


def test_inspect_child_failure_is_its_last_line(tmp_path):
    """The main job's inspect runs in a child: a failure there reaches the report as one line, not a traceback."""
    from compare import disasm

    with pytest.raises(RuntimeError, match=r"^python -m compare: error: unknown kernel 'foo'.*inspect\.log\)$"):
        disasm.finish(disasm.start(tmp_path, ["foo"]), tmp_path)
    assert "unknown kernel" in (tmp_path / "inspect.log").read_text()
