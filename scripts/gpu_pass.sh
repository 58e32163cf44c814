#!/usr/bin/env bash
# The whole GPU pass (for a lent GPU machine with no network), in parts run one per command:
#   bash scripts/gpu_pass.sh tests  OUTDIR   # build the extension, run the test suite file by file (timeouts)
#   bash scripts/gpu_pass.sh report OUTDIR   # the main job: python -m compare --out OUTDIR/report
#   bash scripts/gpu_pass.sh lab OUTDIR      # layout probes (hardware vs model) and ncu bank conflicts
#   bash scripts/gpu_pass.sh sanitize OUTDIR # compute-sanitizer memcheck + racecheck over every kernel
#   bash scripts/gpu_pass.sh wall OUTDIR     # per-call wall time (operators too), the PTX call's host pieces, and
#                                             # where the host time goes (cProfile) for the small shapes
#   bash scripts/gpu_pass.sh sustained OUTDIR # back to back under the power cap (scripts/sustained.py; SHAPES=...,
#                                             # KIND=sparse for the 2:4 sparse kernels, CEILINGS="wgmma wgmma.random"
#                                             # for the instruction loops beside them, LAYOUTS="NN" for one layout)
#   bash scripts/gpu_pass.sh sparse OUTDIR    # the 2:4 sparse kernels: GPU tests, the bench
#                                             # (LAYOUTS="NN NT" for both B layouts)
#   bash scripts/gpu_pass.sh triton OUTDIR    # the Triton tests, then every pinned configuration beside torch.matmul
#                                             # (python -m compare bench --all; SHAPES=...)
#   bash scripts/gpu_pass.sh triton-bench OUTDIR  # kernel="auto" on the mixed suite, NN and NT, and the
#                                             # per-call wall times of hgemm and the operator
#   bash scripts/gpu_pass.sh yardsticks OUTDIR    # what cuBLAS and cuSPARSELt launch per shape, how they accumulate
#                                             # (scripts/library_kernels.py), and ncu of torch.matmul, the Triton
#                                             # plan and wgmma_persistent at 1024^3 and 128x4096x4096
#   bash scripts/gpu_pass.sh plans OUTDIR    # a fresh build (timed), the plan-table and dispatch tests, first calls of
#                                             # new shapes in two fresh processes (python -m compare.first_call)
#   bash scripts/gpu_pass.sh plan-table OUTDIR  # python -m compare tune: the plan table of this GPU, into OUTDIR
#   bash scripts/gpu_pass.sh classes OUTDIR  # the recommended entries on every shape class the floor of 0.95x is
#                                             # judged on (mixed, small_out_large_k, m_sweep in NN and NT; training in
#                                             # its own layouts), fp16 and bf16 per shape back to back (SUITES=..., KERNELS=...)
#                                             # (GRID=quick for a short try; ACCS=fp32 to skip fp16 accumulation)
# Set HGEMM_GIT_COMMIT to the commit being run when the tree is a copy without .git.
set -uo pipefail
cd "$(dirname "$0")/.."
PART=${1:?tests or report}; OUTDIR=${2:-gpu_out}; LAYOUT=${3:-NN}
mkdir -p "$OUTDIR"
export PYTHONPATH=. PYTHONUNBUFFERED=1
export TENSORCORE_HGEMM_BUILD_DIR=${TENSORCORE_HGEMM_BUILD_DIR:-/tmp/tensorcore_hgemm_build}
# a fresh build prints each translation unit's nvcc seconds, longest first (ptx_kernels/build.py)
export TENSORCORE_HGEMM_BUILD_TIMES=${TENSORCORE_HGEMM_BUILD_TIMES:-1}
unset TRITON_INTERPRET
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv | tee "$OUTDIR/gpu.txt"
case "$PART" in
  tests)
    # one pytest per test file, each under a timeout: a kernel that waits on an mbarrier that never completes hangs
    # instead of failing (TESTING.md), and must cost one file's budget, not the whole pass (TEST_FILES=... to pick)
    /usr/bin/time -f "build %e s" python -c "import ptx_kernels; ptx_kernels.load()" 2>&1 | tee "$OUTDIR/build.log"
    for f in ${TEST_FILES:-tests/test_*.py}; do
      timeout "${TEST_TIMEOUT:-420}" python -m pytest -q -p no:cacheprovider "$f" > "$OUTDIR/pytest_$(basename "$f" .py).log" 2>&1
      rc=$?
      echo "$f rc=$rc $(tail -1 "$OUTDIR/pytest_$(basename "$f" .py).log")" | tee -a "$OUTDIR/pytest.log"
    done
    ;;
  plans)
    rm -rf "$TENSORCORE_HGEMM_BUILD_DIR" "${TRITON_CACHE_DIR:-$HOME/.triton/cache}"
    /usr/bin/time -f "fresh build %e s" python -c "import ptx_kernels; ptx_kernels.load()" 2>&1 | tee "$OUTDIR/build.log"
    /usr/bin/time -f "cached build %e s" python -c "import ptx_kernels; ptx_kernels.load()" 2>&1 | tee -a "$OUTDIR/build.log"
    for f in ${TEST_FILES:-tests/test_plan_table.py tests/test_dispatch.py}; do
      timeout "${TEST_TIMEOUT:-300}" python -m pytest -q -p no:cacheprovider "$f" > "$OUTDIR/pytest_$(basename "$f" .py).log" 2>&1
      echo "$f rc=$? $(tail -1 "$OUTDIR/pytest_$(basename "$f" .py).log")" | tee -a "$OUTDIR/pytest.log"
    done
    python -m compare.first_call --out "$OUTDIR" 2>&1 | tee "$OUTDIR/first_call.log"
    ;;
  plan-table)
    python -m compare tune --grid "${GRID:-default}" --accs "${ACCS:-fp32,fp16}" --out "$OUTDIR/plan_table.json" 2>&1 \
      | tee "$OUTDIR/tune.log" | grep -v "^tune: \[" | tail -20
    ;;
  report)
    # FRESH=1: empty build, Triton and plan caches first (what a new user's first run meets)
    [ "${FRESH:-0}" = 1 ] && rm -rf "$TENSORCORE_HGEMM_BUILD_DIR" "${TRITON_CACHE_DIR:-$HOME/.triton/cache}" \
      "$HOME/.cache/tensorcore_hgemm"
    /usr/bin/time -f "main job %e s" python -m compare --out "$OUTDIR/report" ${FULL:+--full} 2>&1 \
      | tee "$OUTDIR/main.log" | grep -E "^(phase|main job|report|FAILED|not run)"
    ;;
  lab)
    python -m compare layouts --hardware --out "$OUTDIR/layouts" 2>&1 | tee "$OUTDIR/layouts.log" | tail -5
    bash scripts/bank_conflicts.sh "$OUTDIR" 2>&1 | tail -20
    ;;
  sanitize)
    bash scripts/sanitize.sh "$OUTDIR"
    ;;
  wall)
    W="--shapes ${SHAPES:-16x4096x4096,128x4096x4096}"
    python scripts/wall_time.py $W --kernels torch.matmul triton wgmma_persistent --ops 2>&1 | tee "$OUTDIR/wall.log"
    python scripts/wall_time.py --breakdown wgmma_persistent --breakdown-shape 16x4096x4096 2>&1 \
      | tee "$OUTDIR/wall_breakdown.log"
    python scripts/wall_time.py $W --kernels torch.matmul triton wgmma_persistent --profile --calls 500 2>&1 \
      | tee "$OUTDIR/wall_profile.log"
    ;;
  triton)
    for f in tests/test_triton_hgemm.py tests/test_dispatch.py; do
      timeout 300 python -m pytest -q -p no:cacheprovider "$f" > "$OUTDIR/pytest_$(basename "$f" .py).log" 2>&1
      echo "$f rc=$? $(tail -1 "$OUTDIR/pytest_$(basename "$f" .py).log")" | tee -a "$OUTDIR/pytest.log"
    done
    python -m compare bench --all --kernels 'triton_*' --shapes "${SHAPES:-1x4096x4096,16x4096x4096,128x4096x4096,1024x1024x1024}" \
      --out "$OUTDIR/configs" 2>&1 | tee "$OUTDIR/configs.log" | tail -5
    ;;
  triton-bench)
    # the plan tables beside per-shape timing (triton_exact) on the mixed suite, NN and NT
    for L in NN NT; do
      python -m compare bench --suite mixed --layout $L --kernels torch.matmul triton ${EXACT:-triton_exact} --rounds 3 \
        --out "$OUTDIR/$L" 2>&1 | tail -40 > "$OUTDIR/bench_$L.log"
      grep -A3 geomean "$OUTDIR/bench_$L.log"
    done
    python scripts/wall_time.py --shapes 16x4096x4096,128x4096x4096 --kernels torch.matmul triton --ops 2>&1 \
      | tee "$OUTDIR/wall.log"
    ;;
  yardsticks)
    python -c "import ptx_kernels; ptx_kernels.load()" 2>&1 | tail -3
    python scripts/library_kernels.py 2>&1 | tee "$OUTDIR/library_kernels.log"
    for c in small1024 small128; do
      timeout 300 ncu --profile-from-start off --section SpeedOfLight --section LaunchStats --section Occupancy \
        --section MemoryWorkloadAnalysis python -m compare bench --shapes "$( [ $c = small1024 ] && echo 1024x1024x1024 || echo 128x4096x4096 )" --kernels torch.matmul triton wgmma_persistent --rounds 1 --out /tmp/ncu_$c > "$OUTDIR/ncu_$c.txt" 2>&1
      echo "ncu $c rc=$?"
    done
    ;;
  sustained)
    # back to back under the power cap: throughput, SM clock, power and TFLOPS per watt per kernel, NN and NT
    # (KIND=sparse: the 2:4 sparse kernels beside cuSPARSELt and dense torch.matmul on the same pruned A)
    K=(torch.matmul wgmma_persistent wgmma_cluster triton)
    [ "${KIND:-dense}" = sparse ] && K=(torch.matmul torch.sparse_semi_structured "wgmma_sp*")
    [ -n "${KERNELS:-}" ] && read -ra K <<< "$KERNELS"  # KERNELS="torch.matmul wgmma_persistent": these instead
    for L in ${LAYOUTS:-NN NT}; do
      python scripts/sustained.py --kind "${KIND:-dense}" --layout $L --kernels "${K[@]}" ${CEILINGS:+--ceilings $CEILINGS} \
        --shapes "${SHAPES:-4096x4096x4096,8192x8192x8192,8192x28672x4096}" 2>&1 \
        | tee "$OUTDIR/sustained_${KIND:-dense}_$L.log"
    done
    ;;
  sparse)
    python -c "import ptx_kernels; ptx_kernels.load()" 2>&1 | tail -3
    timeout 300 python -m pytest -q -p no:cacheprovider tests/test_sparse_gpu.py 2>&1 | tee "$OUTDIR/pytest_sparse.log" | tail -2
    for L in ${LAYOUTS:-NN}; do  # LAYOUTS="NN NT": B row-major, then column-major
      python -m compare bench --kind sparse --layout "$L" \
        --shapes ${SHAPES:-4096x4096x4096,8192x8192x8192,8192x28672x4096} --rounds 3 --out "$OUTDIR/sparse_$L" 2>&1 \
        | tee "$OUTDIR/sparse_$L.log" | tail -14
    done
    ;;
  classes)
    python -c "import ptx_kernels; ptx_kernels.load()" 2>&1 | tail -3
    KS=${KERNELS:-torch.matmul triton wgmma_persistent}
    for S in ${SUITES:-mixed small_out_large_k m_sweep training}; do
      for L in $( [ "$S" = training ] && echo own || echo ${LAYOUTS:-NN NT} ); do
        python -m compare bench --suite "$S" $( [ "$L" = own ] || echo --layout "$L" ) --dtype fp16,bf16 \
          --kernels $KS --rounds "${ROUNDS:-3}" --out "$OUTDIR/${S}_$L" > "$OUTDIR/${S}_$L.log" 2>&1
        echo "$S $L rc=$?"; grep -A4 -i "geomean\|worst" "$OUTDIR/${S}_$L.log" | head -20
      done
    done
    ;;
  *) echo "unknown part $PART (tests, report, lab, sanitize, wall, triton, triton-bench, yardsticks, sustained, sparse, plans, plan-table, classes)"; exit 2 ;;
esac
