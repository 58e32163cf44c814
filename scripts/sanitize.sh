#!/usr/bin/env bash
# compute-sanitizer memcheck, racecheck and synccheck (the mbarrier/TMA kernels) over every kernel at small odd shapes (GPU only):
#   bash scripts/sanitize.sh OUTDIR [PATTERN]
# Runs scripts/sanitize_cases.py under each tool with PYTORCH_NO_CUDA_MEMORY_CACHING=1 (so the caching allocator
# cannot hide an out-of-bounds access inside a cached block); exits non-zero on any sanitizer report or wrong
# result. PATTERN (fnmatch, default *) limits the run to matching variants ("triton" for the Triton kernels,
# "gluon_persistent" for the Gluon kernel alone, "gluon_streamk" for its stream-K mode; "ws_probe",
# "ws_probe_bar0" and the other WS_PATTERNS, named exactly and comma-separated, run the minimal warp_specialize
# kernel, its control and its variants in the Gluon kernel's partition layouts instead: sanitize_cases.py's
# header). TOOLS="racecheck" runs some of the
# tools (default: all three); SANITIZE_QUICK=1 runs the Gluon kernel's configurations at one shape each.
# Logs: OUTDIR/sanitize_memcheck.txt, OUTDIR/sanitize_racecheck.txt, OUTDIR/sanitize_synccheck.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
OUTDIR=${1:-gpu_out}; PATTERN=${2:-*}; mkdir -p "$OUTDIR"
export PYTHONPATH=. PYTORCH_NO_CUDA_MEMORY_CACHING=1
export TENSORCORE_HGEMM_BUILD_DIR=${TENSORCORE_HGEMM_BUILD_DIR:-/tmp/tensorcore_hgemm_build}
unset TRITON_INTERPRET
# build outside the sanitizer (the on-demand kernels too), where the pattern names a hand-written variant
if python -c "import fnmatch, sys, ptx_kernels
sys.exit(not any(fnmatch.fnmatch(v.name, sys.argv[1]) for k in ('dense', 'sparse') for v in ptx_kernels.variants(k)))" \
    "$PATTERN"; then
  python -c "import ptx_kernels; ptx_kernels.load(on_demand=True)" || exit 1
fi
status=0
for tool in ${TOOLS:-memcheck racecheck synccheck}; do
  log="$OUTDIR/sanitize_$tool.txt"
  compute-sanitizer --tool "$tool" --error-exitcode 3 --print-limit 50 python scripts/sanitize_cases.py "$PATTERN" > "$log" 2>&1
  rc=$?
  echo "$tool: exit $rc; $(grep -E '^========= (ERROR SUMMARY|RACECHECK SUMMARY)' "$log" | tail -1)"
  grep -E "^sanitize_cases" "$log"
  [ "$rc" -eq 0 ] || status=1
done
exit $status
