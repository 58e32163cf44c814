#!/usr/bin/env bash
# The whole GPU pass in one command (for a lent GPU machine with no network): build, tests, check, bench.
# Usage: bash scripts/gpu_pass.sh [OUTDIR] [bench args...]   (logs and results land in OUTDIR, default ./gpu_out)
set -uo pipefail
cd "$(dirname "$0")/.."
OUTDIR=${1:-gpu_out}; shift || true
mkdir -p "$OUTDIR"
export PYTHONPATH=. PYTHONUNBUFFERED=1
export TENSORCORE_HGEMM_BUILD_DIR=${TENSORCORE_HGEMM_BUILD_DIR:-/tmp/tensorcore_hgemm_build}
unset TRITON_INTERPRET
status=0
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv | tee "$OUTDIR/gpu.txt"
python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUTDIR/gpu.txt"
echo "== build"
/usr/bin/time -f "build %e s" python -c "import ptx_kernels; ptx_kernels.load()" 2>&1 | tee "$OUTDIR/build.log" || status=1
echo "== tests"
python -m pytest -q -p no:cacheprovider --durations=15 tests 2>&1 | tee "$OUTDIR/pytest.log" | tail -25 || status=1
echo "== check"
python -m compare check --out "$OUTDIR" 2>&1 | tee "$OUTDIR/check.log" | tail -40 || status=1
echo "== bench"
python -m compare bench --out "$OUTDIR" "$@" 2>&1 | tee "$OUTDIR/bench.log" | tail -60 || status=1
exit $status
