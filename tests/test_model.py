"""Issue 39's harness pieces: the suites that carry their layouts (training, small outputs over long K, the M sweep),
and `python -m compare model` (compare/model.py). Without a GPU the model runs its tiny size with the Triton kernels
under the interpreter: the routed logits, the decode step against the KV cache and a training step are checked
against torch's; CUDA graphs, torch.compile and the timing path are GPU tests."""
import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from compare import bench

# ---------------------------------------------------------------------------------------------------------------
# Suites
# ---------------------------------------------------------------------------------------------------------------


def _layout(t: torch.Tensor) -> str:
    """N: row-major (rows contiguous), T: column-major (a .t() view of a row-major matrix)."""
    if t.stride(1) == 1:
        return "N"
    assert t.stride(0) == 1, t.stride()
    return "T"


class _RecordMM(TorchDispatchMode):
    """Every aten.mm below autograd, as (M, N, K, layout)."""

    def __init__(self):
        super().__init__()
        self.gemms = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.mm.default:
            a, b = args
            self.gemms.append((a.shape[0], b.shape[1], a.shape[1], _layout(a) + _layout(b)))
        return func(*args, **(kwargs or {}))


def test_training_suite_is_what_autograd_runs_for_nn_linear():
    """nn.Linear's forward and backward, recorded below autograd, run exactly `linear_gemms`' three GEMMs in its
    layouts (the T x I x O here is small and lopsided, so that a swapped dimension shows)."""
    t, i, o = 48, 40, 24
    lin = nn.Linear(i, o, bias=False)
    x = torch.randn(t, i, requires_grad=True)
    with _RecordMM() as rec:
        lin(x).backward(torch.randn(t, o))  # a real dY (sum().backward() would give an expanded one)
    assert sorted(rec.gemms) == sorted(bench.linear_gemms(t, i, o))
    assert bench.SUITES["training"] == [g for lin_ in bench.TRAINING_LINEARS for g in bench.linear_gemms(*lin_)]


def test_issue_39_suites():
    training = bench.SUITES["training"]
    assert {lay for *_, lay in training} == {"NT", "NN", "TN"} and all(len(s) == 4 for s in training)
    tokens = {t for t, *_ in bench.TRAINING_LINEARS}
    assert min(tokens) == 512 and max(tokens) == 16384
    assert {h for _, i, o in bench.TRAINING_LINEARS for h in (i, o)} >= {4096, 8192}
    small = bench.SUITES["small_out_large_k"]
    assert len(small) >= 3 and all(m * n <= 512 * 1024 and 16384 <= k <= 131072 for m, n, k in small)
    assert {16384, 131072} <= {k for *_, k in small}
    assert {m for m, *_ in bench.SUITES["m_sweep"]} == {64, 128, 256}
    assert all(n >= 4096 and k >= 4096 for _, n, k in bench.SUITES["m_sweep"])


def test_layouts_travel_with_shapes():
    assert bench.parse_shapes("16x4096x4096,512X512x16384:tn") == [(16, 4096, 4096), (512, 512, 16384, "TN")]
    with pytest.raises(ValueError, match=r"layout must be one of NN, NT, TN, TT, got 'XY'"):
        bench.parse_shapes("8x8x8:XY")
    with pytest.raises(ValueError, match="not of the form MxNxK"):
        bench.parse_shapes("8x8:NN")
    mixed = [(8, 8, 8), (4, 4, 4, "TN")]
    assert bench.with_layouts(mixed) == [(8, 8, 8, "NN"), (4, 4, 4, "TN")]
    assert bench.with_layouts(mixed, "NT") == [(8, 8, 8, "NT"), (4, 4, 4, "NT")]  # --layout overrides
    assert bench.with_layouts(bench.SUITES["training"])[:3] == bench.linear_gemms(*bench.TRAINING_LINEARS[0])


# ---------------------------------------------------------------------------------------------------------------
# python -m compare model
# ---------------------------------------------------------------------------------------------------------------

from compare import model as M  # noqa: E402
from compare.__main__ import main  # noqa: E402
from conftest import HAS_CUDA  # noqa: E402

TINY = M.SIZES["tiny"]
IMPLS = ["builtin", pytest.param("hf", marks=pytest.mark.skipif(not M.hf_available(),
                                                                reason="transformers is not installed"))]


@pytest.mark.parametrize("impl", IMPLS)
def test_decode_step_equals_the_full_forward(impl):
    """fp32, no kernels: the prompt then one decode step against the cache give the logits of one forward over the
    prompt and the token; the step repeats at the same position (what timing and a graph replay do)."""
    size = TINY
    model = M.build(size, impl, "cpu")
    run = M.Runner(model, size, "cpu")
    tokens = torch.randint(0, size.vocab, (size.batch, size.prefill))
    token = torch.randint(0, size.vocab, (size.batch, 1))
    pos = torch.tensor([size.prefill])
    with torch.no_grad():
        prompt = run.prefill(tokens)
        step = run.decode(token, pos)
        again = run.decode(token, pos)
        full = run.logits(torch.cat([tokens, token], dim=1))
    torch.testing.assert_close(prompt, full[:, :-1], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(step, full[:, -1:], rtol=1e-5, atol=1e-5)
    assert torch.equal(step, again)


@pytest.mark.parametrize("impl", IMPLS)
def test_linear_shapes_are_the_gemms_the_model_runs(impl):
    """ModelSize.linear_shapes (the GEMMs the main job compiles ahead, beside its check) is exactly the set of
    (M, N, K) that the model's nn.Linear layers compute in prefill and decode."""
    size = TINY
    model = M.build(size, impl, "cpu")
    run = M.Runner(model, size, "cpu")
    seen = set()
    hooks = [mod.register_forward_hook(lambda mod, args, out: seen.add((args[0].numel() // mod.in_features,
                                                                        mod.out_features, mod.in_features)))
             for mod in model.modules() if isinstance(mod, torch.nn.Linear)]
    with torch.no_grad():
        run.prefill(torch.randint(0, size.vocab, (size.batch, size.prefill)))
        run.decode(torch.randint(0, size.vocab, (size.batch, 1)), torch.tensor([size.prefill]))
    for h in hooks:
        h.remove()
    assert seen == set(size.linear_shapes()) and len(size.linear_shapes()) == len(seen)


@pytest.mark.skipif(HAS_CUDA, reason="the CPU path (the interpreter; a GPU runs the GPU tests below)")
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_routed_model_matches_torch_under_the_interpreter(impl, dtype):
    """Every nn.Linear of the tiny model on Triton's automatic choice (interpreter): prefill, decode with the KV
    cache and (fp16) a training step are each within the bound of the fp32 model, beside torch's own run."""
    modes = ("prefill", "decode", "train") if dtype == "fp16" else ("prefill", "decode")
    rows, facts = M.run(TINY, impl=impl, dtypes=(dtype,), modes=modes, gpu=False)
    assert facts["model"] == f"{impl}-llama" and facts["entries"] == ["triton"]
    assert [(r.mode, r.entry) for r in rows] == [(m, e) for m in modes for e in ("torch", "triton")]
    for r in rows:
        assert r.status == "checked" and r.detail == "timing needs a CUDA GPU", r
        assert 0 < r.err < 0.05 and r.ms is None, r
        if r.entry == "triton":
            assert r.bound == pytest.approx(2 * r.err_torch + 2 * (2**-11 if dtype == "fp16" else 2**-8))
            assert r.err <= r.bound


@pytest.mark.skipif(HAS_CUDA, reason="the CPU path (the interpreter; a GPU runs the GPU tests below)")
def test_a_wrong_kernel_fails_the_check_and_is_not_timed(monkeypatch, tmp_path, capsys):
    """A routed layer that loses its last output column (a missed tile) fails the logits check: the row says so,
    nothing is timed, the command exits 1."""
    from compare.nn import HGEMMLinear

    forward = HGEMMLinear.forward

    def missed_tile(self, x):
        y = forward(self, x).clone()
        y[..., -1] = 0
        return y

    monkeypatch.setattr(HGEMMLinear, "forward", missed_tile)
    code = main(["model", "--impl", "builtin", "--dtype", "fp16", "--modes", "prefill", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1 and "FAILED: 1 checks (prefill fp16 triton)" in out
    (row,) = [r for r in M.json.loads((tmp_path / "model.json").read_text())["rows"] if r["entry"] == "triton"]
    assert row["status"] == "failed check" and row["err"] > row["bound"] and row["ms"] is None
    assert "> bound" in row["detail"]


@pytest.mark.skipif(HAS_CUDA, reason="the CPU path (the interpreter; a GPU runs the GPU tests below)")
def test_a_mode_that_raises_fails_the_command(monkeypatch, tmp_path, capsys):
    """A routed run that raises (as a compile mode did when Inductor could not lower the operator) is an error row
    with its reason, and the command exits 1 naming it: an error is a failure, never only a line in the table."""
    from compare.nn import HGEMMLinear

    def raises(self, x):
        raise RuntimeError("LoweringException: the operator did not lower\nsecond line")

    monkeypatch.setattr(HGEMMLinear, "forward", raises)
    code = main(["model", "--impl", "builtin", "--dtype", "fp16", "--modes", "prefill", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "FAILED: 1 runs raised (prefill fp16 triton: RuntimeError: LoweringException: the operator did not " \
           "lower)" in out, out
    (row,) = [r for r in M.json.loads((tmp_path / "model.json").read_text())["rows"] if r["entry"] == "triton"]
    assert row["status"] == "error" and row["ms"] is None


@pytest.mark.skipif(HAS_CUDA, reason="the CPU path")
def test_cli_without_a_gpu_checks_the_tiny_model(tmp_path, capsys):
    code = main(["model", "--dtype", "fp16", "--modes", "prefill,decode_graph", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    assert "no CUDA GPU: checking the tiny model" in out and "timing, CUDA graphs, torch.compile" in out
    data = M.json.loads((tmp_path / "model.json").read_text())
    status = {(r["mode"], r["entry"]): r["status"] for r in data["rows"]}
    assert status == {("prefill", "torch"): "checked", ("prefill", "triton"): "checked",
                      ("decode_graph", "torch"): "skipped", ("decode_graph", "triton"): "skipped"}
    assert data["run"]["size"] == M.asdict(TINY) and "git_commit" in data["environment"]
    assert (tmp_path / "model.csv").read_text().startswith("model,size,dtype,mode,entry,status")
    assert not (tmp_path / "model.png").exists()  # nothing timed, nothing to plot


@pytest.mark.parametrize("argv, message", [
    (["--dtype", "fp32"], "--dtype takes fp16, bf16 or fp16,bf16, got 'fp32'"),
    (["--modes", "prefill,warp"], "unknown mode 'warp': modes are prefill, decode, decode_graph, train"),
    (["--hidden", "63"], "hidden 63 must split into 32 heads"),
] + ([] if HAS_CUDA else [(["--kernels", "wgmma_persistent"], "kernel 'wgmma_persistent' is a hand-written kernel, "
                                                                "which needs a CUDA GPU")]))
def test_cli_usage_errors_are_one_line(argv, message, tmp_path, capsys):
    assert main(["model", "--out", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m compare model: error: ") and message in err and err.count("\n") == 1


def test_unknown_entry_names_the_choices():
    with pytest.raises(ValueError, match=r"unknown kernel 'wgmma_fast': 'triton' or one of .*wgmma_persistent"):
        M.resolve_entries(["triton", "wgmma_fast"], "fp16", 90)
    with pytest.raises(ValueError, match=r"kernel 'wmma_naive' does not run bf16 on sm_90"):
        M.resolve_entries(["wmma_naive"], "bf16", 90)
    assert [e.name for e in M.resolve_entries(["torch", "triton", "triton"], "fp16", None)] == ["triton"]
    assert M.default_entries(90) == ["triton", "mma_stmatrix", "wgmma_persistent"]
    assert M.default_entries(80) == ["triton", "mma_stmatrix"]


def _timed_rows():
    rows = []
    for d in ("fp16", "bf16"):
        for mode, ms in (("prefill", 20.0), ("decode", 1.0), ("decode_graph", 0.8)):
            for entry, x in (("torch", 1.0), ("triton", 1.05), ("wgmma_persistent", 0.97)):
                tokens = 8 * (1 if mode.startswith("decode") else 512)
                rows.append(M.ModelRow("hf-llama", "4L", d, mode, entry, "ok", err=1e-3, err_torch=1e-3, bound=3e-3,
                                       tokens=tokens, ms=ms / x, wall_ms=ms / x, samples=9,
                                       tokens_per_s=tokens / (ms / x * 1e-3), ratio_to_torch=x,
                                       wall_ratio_to_torch=x))
    return rows


def test_table_markdown_and_plot_of_timed_rows(tmp_path):
    rows = _timed_rows()
    rows.append(M.ModelRow("hf-llama", "4L", "fp16", "decode_compile", "triton", "error",
                           detail="RuntimeError: capture failed"))
    facts = {"model": "hf-llama", "size_label": "4L", "rounds": 5, "bound": "b", "error_metric": "e"}
    table = M.format_table(rows)
    assert "decode_graph     bf16  wgmma_persistent" in table and "   0.970 " in table
    assert "error: RuntimeError: capture failed" in table
    md = M.markdown(rows, facts)
    assert "| prefill | fp16 | `triton` | 19.048 | 1.050 |" in md and "1.00e-03 (3.00e-03)" in md
    files = M.write(tmp_path, rows, facts, {"gpu": "test"})
    assert [f.name for f in files] == ["model.json", "model.csv", "model.png"]
    assert (tmp_path / "model.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.skipif(HAS_CUDA, reason="the CPU path (the interpreter; a GPU runs the GPU tests below)")
def test_timing_path_bookkeeping_with_fake_clocks(monkeypatch):
    """The timing path on the CPU, its clocks replaced (torch's forward 2 ms on the device clock, 4 ms on the host's;
    the routed one 1 ms on both) and the graph capture by the eager step: ratios, tokens/s and samples follow,
    and a mode that fails to capture is marked with its reason while the others are timed."""
    from itertools import cycle

    device_ms, host_us = cycle([2.0, 1.0]), cycle([4000.0, 1000.0])  # the candidates' calls alternate: torch first
    monkeypatch.setattr(M, "event_ms", lambda fn, calls: [next(device_ms)] * calls)
    monkeypatch.setattr(M, "wall_us", lambda fn, calls: next(host_us))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)

    def capture(run, token, pos):
        if isinstance(run.model.lm_head, nn.Linear):
            raise RuntimeError("operation not permitted when stream is capturing\nsecond line")
        return (lambda: run.decode(token, pos)), run.decode(token, pos)

    monkeypatch.setattr(M, "_graph_call", capture)
    rows, _ = M.run(TINY, impl="builtin", dtypes=("fp16",), modes=("prefill", "decode_graph"), gpu=True,
                    entries=["triton"], rounds=2, budget_ms=1.0, device="cpu")
    prefill = {r.entry: r for r in rows if r.mode == "prefill"}
    assert prefill["torch"].status == prefill["triton"].status == "ok"
    assert prefill["torch"].ratio_to_torch == 1.0 and prefill["triton"].ratio_to_torch == 2.0
    assert prefill["triton"].wall_ratio_to_torch == 4.0 and prefill["triton"].ms == 1.0
    assert prefill["triton"].tokens == TINY.batch * TINY.prefill and prefill["triton"].samples == 4
    assert prefill["triton"].tokens_per_s == pytest.approx(TINY.batch * TINY.prefill / 1e-3)
    graph = {r.entry: r for r in rows if r.mode == "decode_graph"}
    assert graph["torch"].status == "error" and graph["torch"].detail == ("RuntimeError: operation not permitted when "
                                                                          "stream is capturing")
    assert graph["triton"].status == "skipped" and "torch's own run of this mode failed" in graph["triton"].detail


# ---------------------------------------------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("impl", IMPLS)
def test_cuda_graph_decode_replays_the_eager_step(impl):
    """The decode step captured on static buffers and replayed gives the eager step's logits: bit for bit on the
    routed model (the project's kernels are deterministic and launch the same plan), within fp16 rounding on
    torch's (cuBLAS may pick another algorithm under capture)."""
    size = M.SIZES["small"]
    base = M.build(size, impl, "cuda")
    tokens = torch.randint(0, size.vocab, (size.batch, size.prefill), device="cuda")
    token = torch.randint(0, size.vocab, (size.batch, 1), device="cuda")
    pos = torch.tensor([size.prefill], device="cuda")
    torch_model = base.to(torch.float16)
    for entry in ("torch", "triton"):
        run = M.Runner(M.Entry(entry).make(torch_model, torch.float16), size, "cuda")
        with torch.no_grad():
            run.prefill(tokens)
            eager = run.decode(token, pos).clone()
            replay, logits = M._graph_call(run, token, pos)
            logits.zero_()
            replay()
            torch.cuda.synchronize()
        if entry == "torch":
            torch.testing.assert_close(logits, eager, rtol=2e-3, atol=2e-3)
        else:
            assert torch.equal(logits, eager), entry


@pytest.mark.gpu
def test_quick_run_times_every_family_on_the_gpu(tmp_path):
    """The main job's short version on the small size: every row checked and timed, ratios against torch."""
    rows, md = M.run_model(tmp_path, gpu=True, quick=True, size=M.SIZES["small"])
    assert {r.mode for r in rows} == set(M.QUICK_MODES) and {r.dtype for r in rows} == {"fp16"}
    assert {r.entry for r in rows} == {"torch", *M.default_entries(M._arch())}
    for r in rows:
        assert r.status == "ok" and r.ms > 0 and r.samples >= 6 and r.ratio_to_torch > 0, r
    assert all(r.ratio_to_torch == 1.0 for r in rows if r.entry == "torch")
    assert "| decode_graph | fp16 | `triton` |" in md and (tmp_path / "model.png").exists()


@pytest.mark.gpu
def test_training_step_and_compile_on_the_gpu():
    """A training step through the operators' autograd, and torch.compile'd (Inductor) prefill and decode: every
    row checked and timed. A mode that errors (a compile that raised, as the operator's `kernel` argument once made
    Inductor's lowering raise) fails this test with its reason."""
    rows, _ = M.run(M.SIZES["small"], dtypes=("bf16",), entries=["triton"],
                    modes=("train", "prefill_compile", "decode_compile"), gpu=True, rounds=2, budget_ms=50.0)
    assert {(r.mode, r.entry) for r in rows} == {(m, e) for m in ("train", "prefill_compile", "decode_compile")
                                                 for e in ("torch", "triton")}, rows
    bad = [f"{r.mode} {r.entry}: {r.status} {r.detail}" for r in rows if r.status != "ok" or not r.ms > 0]
    assert not bad, bad
