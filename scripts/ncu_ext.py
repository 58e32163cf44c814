"""Launch one kernel of the extension a few times for Nsight Compute (GPU only), on operands a case names:
    ncu --kernel-name regex:NAME --launch-skip 2 --launch-count 1 ... python scripts/ncu_ext.py CASE
CASE: sparse8192 (wgmma_sp at 8192^3), mma_sp8192 / mma_sp8192_f16 (mma_sp at 8192^3, fp32 / fp16 accumulation),
nt3000 (wgmma_persistent, 3000x5000x2000 NT, rows of 4,000 bytes), nt3000_aligned (the same with rows padded to
4,096 bytes); small1024 / small128 (1024^3 / 128x4096x4096 NN: torch.matmul, the Triton plan kernel="auto" chose there
at c4f0df6 pinned, wgmma_persistent; each warmed up first, then two calls each inside cudaProfilerStart/Stop, for
`ncu --profile-from-start off` without a kernel-name filter)."""
import sys

import torch

import ptx_kernels
from ptx_kernels import sparse

case = sys.argv[1]
torch.manual_seed(0)
dev = "cuda"
if case in ("sparse8192", "mma_sp8192", "mma_sp8192_f16"):
    n = 8192
    w = sparse.prune_2to4(torch.randn(n, n, device=dev, dtype=torch.float16))
    values, meta = sparse.compress(w)
    x = torch.randn(n, n, device=dev, dtype=torch.float16)
    for _ in range(4):
        ptx_kernels.sparse_hgemm(values, meta, x, variant="wgmma_sp" if case == "sparse8192" else "mma_sp",
                                 acc="fp16" if case.endswith("_f16") else "fp32")
elif case in ("small1024", "small128"):
    import triton_kernels
    from triton_kernels import Config
    m, nn, k = (1024, 1024, 1024) if case == "small1024" else (128, 4096, 4096)
    plan = (("blocked", Config(64, 128, 64, group_m=8, num_warps=4, num_stages=5)) if case == "small1024" else
            ("splitk", Config(128, 64, 128, group_m=8, num_warps=4, num_stages=4, split_k=2)))
    a = torch.randn(m, k, device=dev, dtype=torch.float16)
    b = torch.randn(k, nn, device=dev, dtype=torch.float16)
    calls = [lambda: a @ b, lambda: triton_kernels.hgemm(a, b, kernel=plan[0], config=plan[1]),
             lambda: ptx_kernels.hgemm(a, b, variant="wgmma_persistent")]
    for fn in calls:
        fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for fn in calls:
        fn()
        fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
else:
    m, nn, k = 3000, 5000, 2000
    pitch = 2048 if case == "nt3000_aligned" else k
    a = torch.randn(m, pitch, device=dev, dtype=torch.float16)[:, :k]
    b = torch.randn(nn, pitch, device=dev, dtype=torch.float16)[:, :k].t()
    for _ in range(4):
        ptx_kernels.hgemm(a, b, variant="wgmma_persistent")
    print(ptx_kernels.last_launch())
torch.cuda.synchronize()
