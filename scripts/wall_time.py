"""Per-call wall time, back to back from Python, as a model's forward pass pays it (GPU only, but --linears).

    python scripts/wall_time.py [--shapes 16x4096x4096,128x4096x4096] [--kernels 'torch*' 'wgmma_persistent']
                                [--ops] [--host] [--rounds 5] [--calls 200]
    python scripts/wall_time.py --breakdown wgmma_persistent [--breakdown-shape 128x128x128]
    python scripts/wall_time.py --linears [--size issue] [--tokens 1] [--entries triton,wgmma_persistent]
                                [--dtype fp16] [--profile]

For each shape and kernel (names as in the harness's tables): warm up, then time `calls` back-to-back calls with
the host clock between two synchronizations (`hgemm_common.timing.wall_us`, the same measurement the bench reports),
so validation, dispatch, descriptor/tensor-map work and launch latency count, and the GPU queue never drains in
between. Host time on a shared machine moves by tens of percent from one pass to the next, so every kernel is
timed in --rounds rounds, interleaved (round 1 of every kernel, then round 2, ...), and the median of its rounds is
printed with the range, and the ratio of medians to its baseline's (> 1: slower): torch.matmul(a, b, out=out) for
the kernels (they are called with out= too). --ops also times the Triton operator
`torch.ops.tensorcore_hgemm.triton_hgemm`, which allocates its output, eagerly against torch.matmul(a, b) (no out=)
and inside a torch.compile'd function against torch.matmul compiled the same way, and `triton_kernels.hgemm(a, b)`
(allocating, no operator) beside them: the operator's own cost is the difference.

--breakdown VARIANT times the pieces of one PTX call on a small shape (device time far below the host's, so each
line is host time): output allocation, validation, the binding + launcher + launch alone, the whole
`ptx_kernels.hgemm` with and without `out=`, and torch.matmul beside them. --breakdown triton does the same for
the Triton path: allocation, plan-cache key and lookup, the cached runner's launches, `api.run`, `hgemm`, and the
eager operator.

--profile runs the chosen kernels' back-to-back calls under cProfile instead of timing them, and prints, per shape
and kernel, the Python functions (and the C functions they call) that take the most host time per call.

--linears calls the nn.Linear layers of `python -m compare model`'s Llama (`compare.model.SIZES[--size]`: per
decoder layer q, k, v, o, gate, up, down, then the LM head) one after another under no_grad, as a forward pass
does, on inputs of (batch, --tokens, in_features): torch's nn.Linear, then each entry's `compare.nn.HGEMMLinear`
(triton or a hand-written variant). It prints wall and enqueue microseconds per Linear call, the mean over the
layers (median of --rounds interleaved rounds), against nn.Linear's; with --profile, the routed layers' Python
functions per call instead. Without a GPU the launches are stubbed (each layer's package plan made up-front with a
launch that does nothing, on CPU tensors; nn.Linear, which would compute, is left out): the host path of a routed
call above its kernel launch, measurable on any machine.

--host adds each runner's enqueue time per call: the host loop's own time before the closing synchronization. Where
it is close to the wall time the calls are host-bound; where the wall time is the larger, the GPU is the bound, or
the host path waits on the GPU somewhere (which then shows in the enqueue time too).
"""
from __future__ import annotations

import argparse
import statistics

import torch

from compare import registry
from compare.bench import parse_shapes, wall_us
from hgemm_common.timing import wall_and_enqueue_us
from compare.reference import make_inputs


def per_call_us(run, a, b, out, calls: int) -> float:
    for _ in range(10):
        run(a, b, out)
    return wall_us(lambda: run(a, b, out), calls)


MATMUL, MATMUL_ALLOC, MATMUL_COMPILED = "torch.matmul", "torch.matmul (allocating)", "torch.matmul (torch.compile)"


def operator_runners() -> list[tuple[str, object, str]]:
    """(name, run, baseline name) for the Triton operator eagerly and compiled, and their baselines: torch.matmul
    allocating its output, as the operator does, and torch.matmul compiled the same way as the operator."""
    import triton_kernels.ops  # noqa: F401  registers torch.ops.tensorcore_hgemm.triton_hgemm

    op = torch.ops.tensorcore_hgemm.triton_hgemm
    compiled_op = torch.compile(lambda x, y: op(x, y, "fp32"), fullgraph=True)
    compiled_mm = torch.compile(lambda x, y: torch.matmul(x, y), fullgraph=True)
    import triton_kernels

    return [(MATMUL_ALLOC, lambda a, b, out: torch.matmul(a, b), MATMUL_ALLOC),
            ("triton hgemm (allocating)", lambda a, b, out: triton_kernels.hgemm(a, b), MATMUL_ALLOC),
            ("triton_hgemm op (eager)", lambda a, b, out: op(a, b, "fp32"), MATMUL_ALLOC),
            (MATMUL_COMPILED, lambda a, b, out: compiled_mm(a, b), MATMUL_COMPILED),
            ("triton_hgemm op (torch.compile)", lambda a, b, out: compiled_op(a, b), MATMUL_COMPILED)]


def timed_rounds(runners: list, a, b, out, calls: int, rounds: int) -> tuple[dict, dict]:
    """Microseconds per call of each runner in each of `rounds` interleaved rounds (warm-up before the first):
    ({name: wall times}, {name: enqueue times}) (`hgemm_common.timing.wall_and_enqueue_us`)."""
    for _, run, _ in runners:
        per_call_us(run, a, b, out, 10)
    times = {name: [] for name, _, _ in runners}
    enqueue = {name: [] for name, _, _ in runners}
    for _ in range(rounds):
        for name, run, _ in runners:
            wall, host = wall_and_enqueue_us(lambda: run(a, b, out), calls)
            times[name].append(wall)
            enqueue[name].append(host)
    return times, enqueue


def breakdown(variant: str, shape: tuple[int, int, int], calls: int) -> None:
    import ptx_kernels
    from ptx_kernels import build
    from hgemm_common.validation import validate

    m, n, k = shape
    a, b = make_inputs(m, n, k, "NN", device="cuda", seed=0, kind="randn")
    out = torch.empty(m, n, dtype=torch.float16, device="cuda")
    ext = build.load_for(ptx_kernels.check_variant(variant, "fp16"))  # wgmma_streamk: its library too
    pieces = {
        "torch.empty((m, n))": lambda: torch.empty((m, n), dtype=torch.float16, device="cuda"),
        "validate(a, b, out)": lambda: validate(a, b, out, allow_cpu=False),
        "validate(a, b) (allocates)": lambda: validate(a, b, None, allow_cpu=False),
        "ext.hgemm_launch (binding, launcher, launch)": lambda: ext.hgemm_launch(variant, a, b, out, False, False,
                                                                                  False, 0, 0),
        f"ptx_kernels.hgemm(kernel={variant!r}, out=out)": lambda: ptx_kernels.hgemm(a, b, kernel=variant,
                                                                                       out=out),
        f"ptx_kernels.hgemm(kernel={variant!r})": lambda: ptx_kernels.hgemm(a, b, kernel=variant),
        "torch.matmul(a, b, out=out)": lambda: torch.matmul(a, b, out=out),
        "torch.matmul(a, b)": lambda: torch.matmul(a, b),
    }
    print_pieces(f"host time per call, {m}x{n}x{k}, {calls} calls back to back:", pieces, a, b, out, calls)


def print_pieces(title: str, pieces: dict, a, b, out, calls: int) -> None:
    print(title)
    for label, fn in pieces.items():
        us = per_call_us(lambda a_, b_, o_: fn(), a, b, out, calls)
        print(f"  {us:8.2f} us  {label}")


def triton_breakdown(shape: tuple[int, int, int], calls: int) -> None:
    """The host pieces of one Triton call on a small shape, from the operator down to the cached runner."""
    import triton_kernels
    import triton_kernels.ops  # noqa: F401  registers the operator
    from triton_kernels import api, dispatch

    m, n, k = shape
    a, b = make_inputs(m, n, k, "NN", device="cuda", seed=0, kind="randn")
    out = torch.empty(m, n, dtype=torch.float16, device="cuda")
    op = torch.ops.tensorcore_hgemm.triton_hgemm
    triton_kernels.hgemm(a, b, out=out), triton_kernels.hgemm(a, b)  # the plans of both kinds of call
    key = dispatch.key_of(a, b, None, "fp32", "auto", None, None)
    runner = dispatch.PLANS.get(key)
    pieces = {
        "a.new_empty(m, n)": lambda: a.new_empty(m, n),
        "dispatch.key_of(a, b, None, ...)": lambda: dispatch.key_of(a, b, None, "fp32", "auto", None, None),
        "dispatch.PLANS.get(key)": lambda: dispatch.PLANS.get(key),
        "runner(a, b, out) (the cached plan's launches)": lambda: runner(a, b, out),
        "api.run(a, b) (allocates)": lambda: api.run(a, b),
        "triton_kernels.hgemm(a, b, out=out)": lambda: triton_kernels.hgemm(a, b, out=out),
        "triton_kernels.hgemm(a, b)": lambda: triton_kernels.hgemm(a, b),
        "op(a, b, 'fp32') (the eager operator)": lambda: op(a, b, "fp32"),
        "op.default(a, b, 'fp32')": lambda: op.default(a, b, "fp32"),
        "torch.matmul(a, b, out=out)": lambda: torch.matmul(a, b, out=out),
        "torch.matmul(a, b)": lambda: torch.matmul(a, b),
    }
    print_pieces(f"host time per call, {m}x{n}x{k}, {calls} calls back to back; plan: {runner.plan.name}", pieces,
                 a, b, out, calls)


def profile(name: str, run, a, b, out, calls: int, top: int = 12) -> None:
    """Where one kind of call spends its host time: cProfile over `calls` back-to-back calls (after warm-up), the
    `top` functions by their own time, in microseconds per call."""
    import cProfile
    import pstats

    per_call_us(run, a, b, out, 10)  # warm-up: the first call's choice and compiles stay out
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        run(a, b, out)
    prof.disable()
    torch.cuda.synchronize()
    stats = pstats.Stats(prof).stats
    rows = sorted(stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    print(f"  {name}: own / cumulative us per call, top {top} by own time")
    for (file, line, fn), (_, ncalls, tottime, cumtime, _) in rows:
        where = fn if file == "~" else f"{file.rsplit('/', 1)[-1]}:{line}({fn})"
        print(f"    {tottime / calls * 1e6:8.2f} {cumtime / calls * 1e6:8.2f}  x{ncalls / calls:<4.1f} {where}")


class _StubExt:
    """The PTX extension's launch, doing nothing (--linears without a GPU)."""

    def hgemm_launch(self, *args):
        return [1, 1, 128, 0, 0, 0, 0, 0], ""


def _stub_plans(layer, x: torch.Tensor) -> None:
    """A routed layer's package plan for input x, made up-front with a launch that does nothing: the kinds of call
    the layer's first call makes then find it, on CPU tensors, without a GPU or the interpreter."""
    from hgemm_common.plans import byte_extents, call_key

    x2, wt = x.reshape(-1, layer.in_features), layer.weight.t()
    if layer.package == "ptx":
        import ptx_kernels

        out = x2.new_empty(x2.shape[0], wt.shape[1])
        ptx_kernels._PLANS.put(call_key(x2, wt, None, layer.variant, layer.acc, "auto", None, None),
                               (_StubExt(), True, byte_extents(x2, wt, out)))
    else:
        from triton_kernels import dispatch
        from triton_kernels.plan_table import Plan

        runner = dispatch.Runner(Plan("triton_tma", None, (False, False, False)), layer.acc == "fp16")
        runner.direct = [lambda ptrs, stream: None]
        dispatch.PLANS.put(dispatch.key_of(x2, wt, None, layer.acc, "auto", None, None), runner)


def model_linears(size, entry: str, dtype: torch.dtype, device: str) -> list:
    """The Llama's nn.Linear layers in forward order (`compare.model`): torch's ("torch") or routed."""
    from torch import nn

    from compare.nn import HGEMMLinear

    shapes = [(size.hidden, size.heads * size.head_dim), (size.hidden, size.kv_heads * size.head_dim),
              (size.hidden, size.kv_heads * size.head_dim), (size.heads * size.head_dim, size.hidden),
              (size.hidden, size.intermediate), (size.hidden, size.intermediate), (size.intermediate, size.hidden)]
    layers = []
    for in_f, out_f in shapes * size.layers + [(size.hidden, size.vocab)]:
        lin = nn.Linear(in_f, out_f, bias=False, device=device, dtype=dtype)
        if entry != "torch":
            kw = {"package": "triton"} if entry == "triton" else {"package": "ptx", "variant": entry}
            lin = HGEMMLinear.from_linear(lin, dtype=dtype, **kw)
        layers.append(lin)
    return layers


def linears(args) -> int:
    """--linears: wall (and enqueue) microseconds per routed Linear call in the model's order (module docstring)."""
    import cProfile
    import pstats
    import time

    from compare.model import SIZES

    gpu = torch.cuda.is_available()
    device = "cuda" if gpu else "cpu"
    if not gpu:  # the direct launch asks the current device and stream: the CPU build has neither
        torch._C._cuda_getDevice = lambda: None
        torch._C._cuda_getCurrentRawStream = lambda index: 0
    size = SIZES[args.size]
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    entries = (["torch"] if gpu else []) + args.entries.split(",")
    inputs = {}
    runs = {}

    def forward(layers):
        return lambda: [lin(inputs[lin.in_features]) for lin in layers]

    for entry in entries:
        layers = model_linears(size, entry, dtype, device)
        for lin in layers:
            if lin.in_features not in inputs:
                inputs[lin.in_features] = torch.randn(size.batch, args.tokens, lin.in_features, device=device,
                                                      dtype=dtype)
            if not gpu:
                _stub_plans(lin, inputs[lin.in_features])
        runs[entry] = forward(layers)
    n = len(layers)
    print(f"{n} Linear layers of {size.label()} at {args.tokens} token(s) per sequence, {args.dtype}, "
          f"{'on ' + torch.cuda.get_device_name() if gpu else 'CPU, launches stubbed'}, no_grad")
    with torch.no_grad():
        for run in runs.values():
            for _ in range(3):
                run()
        if args.profile:
            for entry, run in runs.items():
                if entry == "torch":
                    continue
                passes = max(1, args.calls // n)
                prof = cProfile.Profile()
                prof.enable()
                for _ in range(passes):
                    run()
                prof.disable()
                stats = pstats.Stats(prof).stats
                calls = passes * n
                frames = sum(v[1] for v in stats.values()) / calls
                print(f"  {entry}: {frames:.0f} profiled calls (Python functions and C functions) per Linear call; "
                      "own / cumulative us per Linear call, top 14 by own time")
                for (file, line, fn), (_, ncalls, tottime, cumtime, _) in sorted(
                        stats.items(), key=lambda kv: kv[1][2], reverse=True)[:14]:
                    where = fn if file == "~" else f"{file.rsplit('/', 1)[-1]}:{line}({fn})"
                    print(f"    {tottime / calls * 1e6:8.2f} {cumtime / calls * 1e6:8.2f}  x{ncalls / calls:<4.1f} "
                          f"{where}")
            return 0
        passes = max(2, args.calls // n)
        walls = {e: [] for e in runs}
        hosts = {e: [] for e in runs}
        for _ in range(args.rounds):
            for entry, run in runs.items():
                if gpu:
                    wall, host = wall_and_enqueue_us(run, passes)
                else:
                    t0 = time.perf_counter()
                    for _ in range(passes):
                        run()
                    wall = host = (time.perf_counter() - t0) / passes * 1e6
                walls[entry].append(wall / n)
                hosts[entry].append(host / n)
    base = statistics.median(walls["torch"]) if gpu else None
    for entry in runs:
        wall, host = statistics.median(walls[entry]), statistics.median(hosts[entry])
        ratio = f"  {wall / base:5.2f}x nn.Linear's" if base else ""
        print(f"  {entry:20s} wall {wall:7.2f} us/Linear ({min(walls[entry]):.2f}-{max(walls[entry]):.2f}), "
              f"enqueue {host:7.2f}{ratio}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="16x4096x4096,128x4096x4096,4096x4096x4096")
    ap.add_argument("--kernels", nargs="*", default=["torch.matmul", "triton", "wgmma_persistent", "wgmma_cluster",
                                                      "mma_stmatrix"])
    ap.add_argument("--calls", type=int, default=200, help="back-to-back calls per round")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds per kernel (the median is printed)")
    ap.add_argument("--ops", action="store_true", help="also the Triton operator, eager and torch.compile'd")
    ap.add_argument("--layout", default="NN", choices=["NN", "NT", "TN", "TT"])
    ap.add_argument("--breakdown", metavar="VARIANT", help="time the pieces of one PTX call instead")
    ap.add_argument("--breakdown-shape", default="128x128x128")
    ap.add_argument("--profile", action="store_true", help="cProfile the calls instead of timing them")
    ap.add_argument("--host", action="store_true",
                    help="also print each runner's enqueue time per call (the host loop before the closing sync)")
    ap.add_argument("--linears", action="store_true",
                    help="the model's nn.Linear layers back to back, torch's and routed (CPU: launches stubbed)")
    ap.add_argument("--size", default="issue", help="--linears: compare.model's size (issue, small, tiny)")
    ap.add_argument("--tokens", type=int, default=1, help="--linears: tokens per sequence (1: a decode step)")
    ap.add_argument("--entries", default="triton,wgmma_persistent",
                    help="--linears: routed entries, comma list: triton and hand-written variants")
    ap.add_argument("--dtype", default="fp16", choices=["fp16", "bf16"], help="--linears: the layers' dtype")
    args = ap.parse_args()
    if args.linears:
        return linears(args)
    if args.breakdown == "triton":
        triton_breakdown(parse_shapes(args.breakdown_shape)[0], max(args.calls, 1000))
        return 0
    if args.breakdown:
        breakdown(args.breakdown, parse_shapes(args.breakdown_shape)[0], max(args.calls, 1000))
        return 0
    runners = [(k.name, k.run, MATMUL) for k in registry.select(args.kernels)]
    if args.ops:
        runners += operator_runners()
    for m, n, k in parse_shapes(args.shapes):
        a, b = make_inputs(m, n, k, args.layout, device="cuda", seed=0, kind="randn")
        out = torch.empty(m, n, dtype=torch.float16, device="cuda")
        if args.profile:
            for name, run, _ in runners:
                print(f"{m}x{n}x{k} {args.layout}:")
                profile(name, run, a, b, out, args.calls)
            continue
        times, enqueue = timed_rounds(runners, a, b, out, args.calls, args.rounds)
        med = {name: statistics.median(ts) for name, ts in times.items()}
        for name, _, base in runners:
            ratio = f"{med[name] / med[base]:5.2f}x {base}'s" if base in med else "    -"
            host = f"  host {statistics.median(enqueue[name]):6.1f} us/call" if args.host else ""
            print(f"{m}x{n}x{k} {args.layout} {name:32s} {med[name]:9.1f} us/call "
                  f"({min(times[name]):6.1f}-{max(times[name]):6.1f})  {ratio}{host}")
        if any(name.startswith("triton") for name, _, _ in runners):  # each kind of call has its own plan
            import triton_kernels
            print(f"{m}x{n}x{k} {args.layout} plans: hgemm(out=) {triton_kernels.plan(a, b, out=out).name}; "
                  f"allocating (the operator's) {triton_kernels.plan(a, b).name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
