"""The harness's sparse problem kind (`python -m compare check/bench --kind sparse`) on the CPU: which entries it
times side by side, that the compressed form is made once per A, that its rows say their kind in the CSV, and the
CLI's errors. Its runs on a GPU: tests/test_sparse_gpu.py."""
import csv
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import ptx_kernels
from compare import bench, registry

ROOT = Path(__file__).resolve().parent.parent


def test_sparse_kind_entries_are_the_baseline_the_peers_torch_sparse_and_every_sparse_variant():
    ks = registry.sparse_kernels()
    names = [k.name for k in ks]
    assert names[0] == registry.BASELINE.name
    sparse = ptx_kernels.variants("sparse")
    peers = {v.dense_peer for v in sparse}
    assert peers and all(ptx_kernels.check_variant(p, "fp32").kind == "dense" for p in peers)
    assert peers <= set(names) and registry.SEMI_STRUCTURED.name in names
    assert [k for k in names if k.split("_fp16acc")[0] in {v.name for v in sparse}] == \
        [registry.entry_name(v, acc) for v in sparse for acc in v.accs]
    for k in ks:  # every entry runs the layouts the sparse kind takes, and is scored by its own record's ceiling
        assert all(k.supports(lay, None) for lay in bench.SPARSE_LAYOUTS), k.name
        if k.record.kind == "sparse" and k.package == "ptx":
            assert k.ceiling in ("mma.sp", "wgmma.sp")


def test_sparse_kind_selects_nothing_without_a_gpu_and_rejects_other_kinds():
    assert registry.select(None, kind="sparse", gpu=False) == []
    with pytest.raises(registry.UnknownKernel, match="problem kind must be 'dense' or 'sparse'"):
        registry.select(None, kind="bogus", gpu=False)
    with pytest.raises(registry.UnknownKernel, match="no kernel matches 'nope'"):
        registry.select(["nope"], kind="sparse", gpu=False)


def test_compressed_form_is_made_once_per_a_and_again_after_a_changes():
    made = []
    per_a = registry._PerA(lambda a: made.append(a.clone()) or len(made))
    a = torch.ones(4, 8)
    assert per_a(a) == 1 and per_a(a) == 1  # the timed calls reuse it
    a.add_(1)  # in place: a new version of the same storage
    assert per_a(a) == 2 and torch.equal(made[-1], a)
    assert per_a(torch.ones(4, 8)) == 3


def test_sparse_rows_say_their_kind_in_the_csv(tmp_path):
    rows = [bench.BenchRow("wgmma_sp", "sparse", "fp32", "c", 64, 64, 64, "NN", "ok", median_ms=1.0, kind="sparse"),
            bench.BenchRow("torch.matmul", "torch", "fp32", "c", 64, 64, 64, "NN", "ok", median_ms=1.0)]
    bench.write_bench(tmp_path, {}, rows)
    with open(tmp_path / "bench.csv") as f:
        got = [(r["kernel"], r["kind"]) for r in csv.DictReader(f)]
    assert got == [("wgmma_sp", "sparse"), ("torch.matmul", "dense")]


def test_sparse_suite_holds_the_issue_shapes():
    assert (4096, 4096, 4096) in bench.SUITES["sparse"] and (8192, 8192, 8192) in bench.SUITES["sparse"]


def test_cli_sparse_kind_without_a_gpu_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    r = subprocess.run([sys.executable, "-m", "compare", "check", "--kind", "sparse"], cwd=ROOT, capture_output=True,
                       text=True)
    assert r.returncode == 2 and "check --kind sparse runs the 2:4 sparse kernels, which need a CUDA GPU" in r.stderr
    r = subprocess.run([sys.executable, "-m", "compare", "bench", "--kind", "sparse"], cwd=ROOT, capture_output=True,
                       text=True)
    assert r.returncode == 2 and "bench needs a CUDA GPU" in r.stdout
