#!/usr/bin/env bash
# Shared-memory bank conflicts of the mma ladder, before and after the swizzle (Nsight Compute, GPU only):
#   bash scripts/bank_conflicts.sh OUTDIR
# Profiles one 4096^3 NN call of each variant below and writes OUTDIR/bank_conflicts.csv (one row per kernel).
set -uo pipefail
cd "$(dirname "$0")/.."
OUTDIR=${1:-gpu_out}; mkdir -p "$OUTDIR"
export PYTHONPATH=. TENSORCORE_HGEMM_BUILD_DIR=${TENSORCORE_HGEMM_BUILD_DIR:-/tmp/tensorcore_hgemm_build}
python -c "import ptx_kernels; ptx_kernels.load()"  # build outside the profiler
METRICS=l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,smsp__inst_executed_op_ldsm.sum
ncu --metrics "$METRICS" --csv --kernel-name-base mangled --kernel-name regex:'mma_|wmma_' --launch-count 6 \
  python - <<'PY' > "$OUTDIR/bank_conflicts.csv"
import torch, ptx_kernels
a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
for v in ("mma_tiled", "mma_multistage", "mma_swizzle", "mma_stmatrix", "wmma_async_dbuf", "wmma_multistage"):
    ptx_kernels.hgemm(a, b, kernel=v)
torch.cuda.synchronize()
PY
grep -E "bank_conflicts|wavefronts|ldsm" "$OUTDIR/bank_conflicts.csv" | cut -d, -f5,13- | head -40
