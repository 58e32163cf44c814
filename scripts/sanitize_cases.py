"""The workload scripts/sanitize.sh runs under compute-sanitizer: every hand-written variant (the 2:4 sparse ones on
pruned inputs too), both accumulations
(fp16 on both of its tiles where it has two), B row- and column-major, and A column-major (TN: read in place by the
records that list it, copied by the wrapper for the others), at small odd shapes that leave partial tiles in M, N and K; then the Triton kernels with pinned small
configurations (autotuning under the sanitizer would only time instrumented code), the Gluon kernel on Hopper
in each kind of configuration (pattern "triton" or "gluon_persistent": `gluon_cases`). Each result is also checked
exactly, so a wrong answer fails the run too."""
import fnmatch
import sys

import torch

import ptx_kernels
import triton_kernels
from ptx_kernels import sparse
from compare.reference import make_inputs, reference

SHAPES = [(7, 9, 15), (33, 17, 100), (129, 257, 72)]


def gluon_cases() -> tuple:
    """The Gluon kernel (triton_kernels/gluon_persistent.py), one configuration of each kind, as (kernel, shapes,
    config, accumulations, layouts): two consumers on the smallest ring (128x128, 4 stages: partial tiles, K past
    the ring's depth, both accumulations, B both ways, operands with no dimension a multiple of 8, which the
    dispatcher stages), the 128x256 tile's two-round epilogue, one consumer (64x32, 16 stages, K past them) and
    split-K (the partial kernel's plain stores, then the reduction)."""
    cfgs = triton_kernels.configs("gluon_persistent")
    ring4 = next(c for c in cfgs if c.block_n == 128 and c.num_stages == 4)
    wide = next(c for c in cfgs if c.block_n == 256 and c.epilogue_split == 2)
    one = next(c for c in cfgs if c.block_m == 64 and c.block_n == 32 and c.split_k == 1)
    split = next(c for c in cfgs if c.split_k > 1 and c.block_m == 64)
    return (("gluon_persistent", [(40, 72, 48), (136, 264, 88), (136, 264, 328), (33, 61, 70)], ring4,
             ("fp32", "fp16"), ("NN", "NT")),
            ("gluon_persistent", [(136, 264, 88)], wide, ("fp32",), ("NN",)),
            ("gluon_persistent", [(17, 40, 1100)], one, ("fp32",), ("NN", "NT")),
            ("gluon_persistent", [(17, 40, 1100)], split, ("fp32",), ("NN",)))


def main(pattern: str = "*") -> int:
    """pattern: fnmatch pattern of the kernels to run (hand-written variant names; "triton" for the Triton ones)."""
    bad = []
    variants = [v for v in ptx_kernels.variants() if fnmatch.fnmatch(v.name, pattern)]
    for v in variants:
        # fp16 accumulation picks its large tile only on problems that fill the GPU: force it here too
        runs = [(acc, "auto") for acc in v.accs] + ([("fp16", "large")] if v.block_fp16 else [])
        for acc, tile in runs:
            for layout in ("NN", "NT", "TN"):
                for i, (m, n, k) in enumerate(SHAPES):
                    a, b = make_inputs(m, n, k, layout, device="cuda", seed=i)
                    c = ptx_kernels.hgemm(a, b, kernel=v.name, acc=acc, tile=tile)
                    if not torch.equal(c, reference(a, b).half()):
                        bad.append(f"{v.name} {acc} {tile} {layout} {m}x{n}x{k}")
    major, minor = torch.cuda.get_device_capability()
    sparse_variants = [v for v in ptx_kernels.variants("sparse") if fnmatch.fnmatch(v.name, pattern)
                       and v.offered_on(10 * major + minor)]
    for v in sparse_variants:  # 2:4 sparse A (pruned integers), B row- and column-major; every tile and schedule
        runs = [(acc, {}) for acc in v.accs] + [("fp16", {"tile": t}) for t in ("large", "base")
                                                 if v.block_fp16 and major >= 9]
        runs += [(acc, {"schedule": s}) for acc in v.accs for s in ptx_kernels.SCHEDULES
                 if s != "auto" and v.name in ptx_kernels.call.SCHEDULED]
        for acc, pin in runs:
            for layout in ("NN", "NT"):
                for i, (m, n, k) in enumerate(SHAPES):
                    a, b = make_inputs(m, n, k, layout, device="cuda", seed=20 + i)
                    a = sparse.prune_2to4(a)
                    values, meta = sparse.compress(a)
                    c = ptx_kernels.sparse_hgemm(values, meta, b, kernel=v.name, acc=acc, **pin)
                    if not torch.equal(c, reference(a, b).half()):
                        bad.append(f"{v.name} {acc} {pin} {layout} {m}x{n}x{k}")
    variants = variants + sparse_variants
    small = triton_kernels.Config(32, 32, 32, group_m=4, num_warps=4, num_stages=2)
    both = ("fp32", "fp16")
    tritons = (("triton_blocked", SHAPES, small, both, ("NN",)),
               ("triton_tma", [(40, 72, 48), (136, 264, 88)], small, both, ("NN",)))
    tritons = tritons if fnmatch.fnmatch("triton", pattern) else ()
    if major == 9 and (fnmatch.fnmatch("triton", pattern) or fnmatch.fnmatch("gluon_persistent", pattern)):
        tritons += gluon_cases()
    for kernel, shapes, cfg, accs, layouts in tritons:
        for acc in accs:
            for i, (m, n, k) in enumerate(shapes):
                for layout in layouts:
                    a, b = make_inputs(m, n, k, layout, device="cuda", seed=10 + i)
                    c = triton_kernels.hgemm(a, b, acc=acc, config=cfg, kernel=kernel)
                    if not torch.equal(c, reference(a, b).half()):
                        bad.append(f"triton {kernel} {cfg.name} {acc} {layout} {m}x{n}x{k}")
    torch.cuda.synchronize()
    print(f"sanitize_cases: {len(variants)} variants and {len(tritons)} Triton kernels run; "
          f"{len(bad)} wrong results" + (": " + ", ".join(bad) if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:2]))
