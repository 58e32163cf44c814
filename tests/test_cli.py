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


def test_help_lists_every_verb(capsys):
    """`python -m compare --help` names every verb the parser has, in its first line and each with a one-line
    description, and every tool of the harness with a command line of its own (`python -m compare.NAME`)."""
    import re

    from compare.__main__ import main

    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    verbs = re.search(r"\{([a-z_,]+)\}\n", text).group(1).split(",")  # argparse's list of the subcommands
    assert {"check", "bench", "plot", "inspect", "layouts", "tune", "model", "kernels", "study"} <= set(verbs)
    assert f"python -m compare [{'|'.join(verbs)}]" in text
    listed = text.split("positional arguments:")[1].split("options:")[0]
    for verb in verbs:
        assert re.search(rf"^    {verb} +\S", listed, re.M) or re.search(rf"^    {verb}\n {{20,}}\S", listed, re.M), verb
    tools = sorted(p.stem for p in (ROOT / "compare").glob("*.py")
                   if p.name != "__main__.py" and 'if __name__ == "__main__"' in p.read_text())
    assert {"first_call", "levels"} <= set(tools)
    for tool in tools:
        assert re.search(rf"^  python -m compare\.{tool} +\S", text, re.M), tool


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


def test_layouts_child_failure_is_one_line(tmp_path):
    """The CPU main job draws the fragment maps in a child: its failure reaches the phase as one line naming the
    log, and a child that succeeds writes the maps."""
    from compare import report

    (tmp_path / "file").write_text("")  # a file where the folder should go: the child fails
    with pytest.raises(RuntimeError, match=r"layouts\.log\)$"):
        report._finish_layouts(report._start_layouts(tmp_path / "file" / "layouts"), tmp_path / "logs")
    assert (tmp_path / "logs" / "layouts.log").read_text().strip()


def test_plots_child_draws_and_fails_loudly(tmp_path):
    """The GPU main job draws its plots in a child beside the model phase: the child's figures are plot_all's, and
    a child that fails (no bf16 bench.json) raises its error from result(), where the plot phase catches it."""
    import shutil

    from compare import report

    sample = Path(__file__).parent / "data" / "bench_h100_sample.json"
    for sub in ("", "bf16"):
        (tmp_path / sub).mkdir(exist_ok=True)
        shutil.copy(sample, tmp_path / sub / "bench.json")
    main, bf16, rand = report._start_plots(tmp_path, random=False).result(timeout=300)
    assert {"tflops_vs_size.png", "ladder.png"} <= {p.name for p in main} and bf16 and rand == []
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in main + bf16)
    (tmp_path / "bf16" / "bench.json").unlink()
    with pytest.raises(OSError):
        report._start_plots(tmp_path, random=False).result(timeout=300)


@pytest.mark.skipif(HAS_CUDA, reason="the CPU main job")
def test_main_job_goes_on_past_a_failing_inspect(tmp_path, monkeypatch, capsys):
    """A phase after the check that raises (inspect, as a demangler's `(bool)0` made it raise KeyError on the GPU
    box) is named at the top of index.md and on the job's last line, the exit status is non-zero, and every other
    phase still runs: the study page is written without the inspect data and says what it lacks. The main job runs
    in this process with its slow parts cut short (no check cases, no model, no fragment-map drawing, no inspect
    child), the phases themselves and the study page as they are."""
    pytest.importorskip("pygments", reason="the study page needs the study extra (pygments)")
    from compare import __main__ as cli, disasm, layouts, model, report

    def no_check(kernels, **kw):
        return [], [], []

    def layouts_md(out, hardware=False):
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "layouts.md").write_text("# Fragment maps\n")
        return []

    def fails(proc, out):
        raise KeyError("(bool)0")

    monkeypatch.setattr(check, "run_check", no_check)
    monkeypatch.setattr(model, "run_model", lambda out, **kw: ([], "the model, cut short"))
    monkeypatch.setattr(layouts, "draw_all", layouts_md)
    monkeypatch.setattr(report, "_start_layouts", lambda out, **kw: None)  # drawn here then, by draw_all
    monkeypatch.setattr(disasm, "start", lambda out, *a, **kw: None)
    monkeypatch.setattr(disasm, "finish", fails)
    status = cli.main(["--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert status != 0, out
    last = out.strip().splitlines()[-1]
    assert last.startswith("failed phases: inspect ") and "study" not in last, last
    for ran in ("phase model:", "phase fragment maps:", "phase study page:"):
        assert ran in out, (ran, out)
    index = (tmp_path / "index.md").read_text()
    top = index.split("## Correctness")[0]
    assert "## Failed phases" in top and "- `inspect`: KeyError: '(bool)0'" in top, top
    assert "## A model end to end" in index and "[study/index.html](study/index.html)" in index
    page = (tmp_path / "study" / "index.html").read_text()
    assert '<div class="missing">' in page and "<code>inspect</code>: KeyError: &#x27;(bool)0&#x27;" in page
    assert '<section id="fragments">' in page  # the parts that did not need inspect are there


def test_inspect_keeps_the_rows_of_the_kernels_that_inspected(tmp_path, monkeypatch):
    """One kernel whose inspect raises leaves the others their rows: inspect.json holds them and names the failed
    one, and the command still fails naming it (the main job's study page then shows the kernels inspected)."""
    from compare import disasm

    def fake(t, out):
        if t.label == "mma_tiled":
            raise KeyError("(bool)0")
        for suffix in ("ptx", "sass"):
            (out / f"{t.stem}.{suffix}").write_text(f"// {t.label}\n")
        return disasm.InspectRow(t.label, "src", "sm_90a", 64, 0, None, 0, {}, f"{t.stem}.ptx", f"{t.stem}.sass")

    monkeypatch.setenv("TENSORCORE_HGEMM_BUILD_DIR", str(tmp_path / "cache"))  # the fake rows stay out of the cache
    monkeypatch.setattr(disasm, "inspect_cuda", fake)
    monkeypatch.setattr(disasm, "inspect_triton", fake)
    monkeypatch.setattr(disasm, "SHIPPED", tmp_path / "no-store")  # every row made (by fake), none read
    monkeypatch.setattr(disasm, "store_key", lambda t, nvcc=None: t.stem)  # a Triton key needs the compiler's view
    monkeypatch.setattr(disasm.toolchain, "find_nvcc", lambda: "nvcc")
    monkeypatch.setattr("hgemm_common.validation.interpreter_active", lambda: False)
    with pytest.raises(RuntimeError, match=r"^inspect failed for 1 of 3 kernels: mma_tiled: KeyError: '\(bool\)0'$"):
        disasm.run_inspect(["mma_naive", "mma_tiled", "triton"], tmp_path)
    rows, skipped = disasm.load(tmp_path)
    assert [r.kernel for r in rows] == ["mma_naive", "triton"] and skipped == {}
    assert __import__("json").loads((tmp_path / "inspect.json").read_text())["failed"] == {
        "mma_tiled": "KeyError: '(bool)0'"}
