#!/usr/bin/env bash
# The whole GPU pass (for a lent GPU machine with no network), in parts run one per command:
#   bash scripts/gpu_pass.sh tests  OUTDIR   # build the extension, run the test suite file by file (timeouts)
#   bash scripts/gpu_pass.sh report OUTDIR   # the main job: python -m compare --out OUTDIR/report
#   bash scripts/gpu_pass.sh lab OUTDIR      # layout probes (hardware vs model) and ncu bank conflicts
#   bash scripts/gpu_pass.sh sanitize OUTDIR # compute-sanitizer memcheck + racecheck over every kernel
#   bash scripts/gpu_pass.sh ws-races OUTDIR # racecheck's reports on warp_specialize (issue 48): racecheck over the
#                                             # minimal warp_specialize kernel, its barrier-0 control, the same add
#                                             # in the Gluon kernel's partition layouts (one process) and the Gluon
#                                             # kernel (one shape per configuration kind; each report under the
#                                             # "launch:" line of its configuration), each log under
#                                             # OUTDIR/ws_races/PATTERN/; the SASS of the cubins that ran and the
#                                             # entry protocol (sanitize_cases.py --ws-entry) beside them
#                                             # (WS_RUNS="P1,P2 P3": those patterns, a process per word;
#                                             # WS_ENTRY=0: no --ws-entry)
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
#   bash scripts/gpu_pass.sh random OUTDIR    # the random suite per seed and dtype (SEEDS="S1 S2 S3", DTYPES="fp16 bf16",
#                                             # COUNT=200, KERNELS=...): OUTDIR/random-SEED-DTYPE/
#   bash scripts/gpu_pass.sh sweep OUTDIR     # a chunk of the cost model's data (SEEDS=S1,S2, COUNT, DTYPES, GLUON=0/1,
#                                             # PTX=0/1/only, SCORED_BY=KERNEL, MAX_MACS=2**30, MAX_M=N,
#                                             # NK_MULTIPLE=64, START=I, BLOCK=N, BUDGET_S=470): appended to
#                                             # OUTDIR/sweep.jsonl; fit on a CPU
#   bash scripts/gpu_pass.sh yardsticks OUTDIR    # what cuBLAS and cuSPARSELt launch per shape, how they accumulate
#                                             # (scripts/library_kernels.py), and ncu of torch.matmul, the Triton
#                                             # plan and wgmma_persistent at 1024^3 and 128x4096x4096
#   bash scripts/gpu_pass.sh plans OUTDIR    # a fresh build (timed), the plan-table and dispatch tests, first calls of
#                                             # new shapes in two fresh processes (python -m compare.first_call)
#   bash scripts/gpu_pass.sh plan-table OUTDIR  # python -m compare tune: the plan table of this GPU, into OUTDIR
#   bash scripts/gpu_pass.sh gate1 OUTDIR    # the GPU gate, part 1 (one command, within 10 minutes): a fresh
#                                             # build alone (timed), the on-demand kernels' build after it (timed),
#                                             # then the main job from empty caches (as report
#                                             # with FRESH=1) into OUTDIR/gate/raw/report: its time, exit status and
#                                             # study page
#   bash scripts/gpu_pass.sh gate2 OUTDIR    # part 2 (within 10 minutes): the build (cached where part 1 ran), then
#                                             # every GPU test file whole, in the GATE_SHARDS pytest processes side by
#                                             # side on the one GPU, each under a timeout (GATE_ONLY="ptx triton1"
#                                             # runs those shards alone)
#   bash scripts/gpu_pass.sh gate OUTDIR     # both parts in one command
#                                             # Each writes as it goes: OUTDIR/PART.txt (each phase's seconds and exit
#                                             # status as it ends, failed tests, the verdict table last) and
#                                             # OUTDIR/PART_logs.tar.gz (every log, re-packed as each phase ends and
#                                             # every 30 s), PART = gate1, gate2 or gate; the raw files lie under
#                                             # OUTDIR/gate/raw. Exit status 0 only when every phase passed.
#   bash scripts/gpu_pass.sh classes OUTDIR  # the recommended entries on every shape class the floor of 0.95x is
#                                             # judged on (mixed, small_out_large_k, m_sweep in NN and NT; training in
#                                             # its own layouts), fp16 and bf16 per shape back to back (SUITES=..., KERNELS=...)
#                                             # (GRID=quick for a short try; ACCS=fp32 to skip fp16 accumulation)
# Set HGEMM_GIT_COMMIT to the commit being run when the tree is a copy without .git.
set -uo pipefail
cd "$(dirname "$0")/.."
PART=${1:?a part: tests, report, gate1, gate2, ...}; OUTDIR=${2:-gpu_out}; LAYOUT=${3:-NN}
mkdir -p "$OUTDIR"
export PYTHONPATH=. PYTHONUNBUFFERED=1
export TENSORCORE_HGEMM_BUILD_DIR=${TENSORCORE_HGEMM_BUILD_DIR:-/tmp/tensorcore_hgemm_build}
# a fresh build prints each translation unit's nvcc seconds, longest first (ptx_kernels/build.py)
export TENSORCORE_HGEMM_BUILD_TIMES=${TENSORCORE_HGEMM_BUILD_TIMES:-1}
unset TRITON_INTERPRET
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv | tee "$OUTDIR/gpu.txt"

# What a new user's first run meets: no build, no Triton cache, no plan caches.
empty_caches() {
  rm -rf "$TENSORCORE_HGEMM_BUILD_DIR" "${TRITON_CACHE_DIR:-$HOME/.triton/cache}" "$HOME/.cache/tensorcore_hgemm"
}

# ---- the GPU gate (gate1, gate2, gate) ----
# The test files that run on a GPU, each whole, in pytest processes side by side on the one GPU: "NAME SPLIT FILES",
# SPLIT J/K = the J-th of K disjoint shares of the files' tests (HGEMM_TEST_SHARD, tests/conftest.py), - = all of
# them. Grouped so that each process needs about the same time (the Triton file's compiles take four); the verdict
# table gives every shard's seconds to rebalance by. tests/test_scripts.py checks that every file with a GPU test is
# here, whole, once.
GATE_SHARDS=(
  "triton1 1/4 tests/test_triton_hgemm.py"
  "triton2 2/4 tests/test_triton_hgemm.py"
  "triton3 3/4 tests/test_triton_hgemm.py"
  "triton4 4/4 tests/test_triton_hgemm.py"
  "gluon - tests/test_gluon.py tests/test_streamk.py tests/test_error_bound.py"
  "inputs - tests/test_realign.py tests/test_linear.py tests/test_errors.py tests/test_validation.py"
  "operators - tests/test_torch_integration.py"
  "ptx - tests/test_ptx_hgemm.py tests/test_ptx_stream.py tests/test_ptx_bf16.py tests/test_sparse_gpu.py tests/test_layouts_gpu.py tests/test_dispatch.py tests/test_plan_table.py"
  "harness - tests/test_harness.py tests/test_bf16_model.py tests/test_cli.py tests/test_random_suite.py tests/test_sweep.py"
  "model - tests/test_model.py"
  "compile1 1/2 tests/test_ptx_compile.py"
  "compile2 2/2 tests/test_ptx_compile.py"
  "records - tests/test_records.py tests/test_study.py tests/test_docs.py tests/test_history.py tests/test_sparse_harness.py"
  "docs - tests/test_doc_blocks.py tests/test_template_args.py"
)
# The raw files lie in GATE_RAW's folders (logs/, report/), three folders below OUTDIR, whose top keeps only the
# gate's summary and tarball: a machine that copies back a few files from the top folders brings back those two.
GATE_RAW="$OUTDIR/gate/raw"
GATE_SUMMARY="$OUTDIR/$PART.txt" GATE_TAR="$OUTDIR/${PART}_logs.tar.gz" GATE_PHASES="$GATE_RAW/logs/phases_$PART.tsv"

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

gate_snapshot() {  # every log so far into GATE_TAR (written aside, then renamed: never half a file)
  local tmp="$GATE_RAW/.snap/logs.$BASHPID.tar.gz"
  mkdir -p "$GATE_RAW/.snap"
  tar -czf "$tmp" -C "$GATE_RAW" --exclude=./.snap --exclude='*.png' --exclude='*.cubin' --exclude='*.sass' \
    --exclude='*.ptx' . 2>/dev/null
  if [ "$(stat -c %s "$tmp")" -gt 15000000 ]; then tar -czf "$tmp" -C "$GATE_RAW" logs 2>/dev/null; fi
  mv -f "$tmp" "$GATE_TAR"
}

gate_phase() {  # NAME SECONDS RC [DETAIL]: one row of the verdict table, recorded as the phase ends
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:-}" >> "$GATE_PHASES"
  printf 'phase %s: %s s, rc=%s %s\n' "$1" "$2" "$3" "${4:-}" | tee -a "$GATE_SUMMARY"
  gate_snapshot
}

gate_build() {  # NAME [on_demand=True]: ptx_kernels.load() (or the on-demand kernels' build) under a timeout, timed
  local t0 rc
  t0=$(now)
  timeout -s INT -k 20 "${GATE_BUILD_LIMIT:-120}" python -c "import ptx_kernels; ptx_kernels.load(${2:-})" \
    >> "$GATE_RAW/logs/build.log" 2>&1
  rc=$?
  gate_phase "$1" "$(since "$t0")" "$rc" "$(tail -1 "$GATE_RAW/logs/build.log")"
}

gate_part1() {
  rm -rf "$GATE_RAW/report"
  rm -rf "$TENSORCORE_HGEMM_BUILD_DIR"
  gate_build "build alone (fresh)"
  gate_build "on-demand kernels' build (after it)" on_demand=True
  empty_caches
  local t0 rc
  t0=$(now)
  timeout -s INT -k 20 "${GATE_MAIN_LIMIT:-360}" python -m compare --out "$GATE_RAW/report" \
    > "$GATE_RAW/logs/main.log" 2>&1
  rc=$?
  grep -E "^(phase|report|FAILED|not run)" "$GATE_RAW/logs/main.log" | sed 's/^/  main: /' >> "$GATE_SUMMARY"
  gate_phase "main job (FRESH=1)" "$(since "$t0")" "$rc" "$(grep -E '^report' "$GATE_RAW/logs/main.log" | tail -1)"
  [ -s "$GATE_RAW/report/study/index.html" ]
  gate_phase "study page written" - $? "$GATE_RAW/report/study/index.html"
}

gate_shard() {  # NAME SPLIT FILE...: one pytest process of part 2
  local name=$1 split=$2 t0 rc log="$GATE_RAW/logs/pytest_$1.log"
  shift 2
  t0=$(now)
  # SIGINT first: pytest stops and still prints its summary and durations; KILL 20 s later if it does not
  HGEMM_TEST_SHARD="${split#-}" OMP_NUM_THREADS="${GATE_THREADS:-2}" timeout -s INT -k 20 "${GATE_SHARD_LIMIT:-420}" \
    python -m pytest -q -p no:cacheprovider -rfEsxXp --durations=25 --durations-min=1 "$@" > "$log" 2>&1
  rc=$?
  gate_phase "tests $name" "$(since "$t0")" "$rc" "$(grep -E '(passed|failed|error|no tests ran)' "$log" | tail -1)"
}

gate_part2() {
  gate_build "build (as part 2 found it)" on_demand=True
  local entry name split files pids=() tick
  (while sleep 30; do gate_snapshot; done) &
  tick=$!
  for entry in "${GATE_SHARDS[@]}"; do
    read -r name split files <<< "$entry"
    if [ -n "${GATE_ONLY:-}" ] && [[ " $GATE_ONLY " != *" $name "* ]]; then continue; fi
    # shellcheck disable=SC2086  # the file list splits into arguments
    gate_shard "$name" "$split" $files &
    pids+=($!)
  done
  if [ "${#pids[@]}" -gt 0 ]; then wait "${pids[@]}"; else gate_phase "tests: no shard named $GATE_ONLY" - 2; fi
  kill "$tick" 2>/dev/null
  grep -hsE "^(FAILED|ERROR) " "$GATE_RAW"/logs/pytest_*.log | head -60 | sed 's/^/  /' >> "$GATE_SUMMARY"
}

gate_verdict() {  # the verdict table, last; exit status 1 if any phase failed
  local bad
  {
    echo
    printf '%-30s %9s %4s\n' phase seconds rc
    awk -F '\t' '{ printf "%-30s %9s %4s\n", $1, $2, $3 }' "$GATE_PHASES"
    bad=$(awk -F '\t' '$3 != 0' "$GATE_PHASES" | wc -l)
    if [ "$bad" = 0 ]; then echo "$PART: PASS"; else echo "$PART: FAIL ($bad of the phases)"; fi
  } | tee -a "$GATE_SUMMARY"
  gate_snapshot
  [ "$(awk -F '\t' '$3 != 0' "$GATE_PHASES" | wc -l)" = 0 ]
}

case "$PART" in
  tests)
    # one pytest per test file, each under a timeout: a kernel that waits on an mbarrier that never completes hangs
    # instead of failing (TESTING.md), and must cost one file's budget, not the whole pass (TEST_FILES=... to pick)
    /usr/bin/time -f "build %e s" python -c "import ptx_kernels; ptx_kernels.load(on_demand=True)" 2>&1 \
      | tee "$OUTDIR/build.log"
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
    [ "${FRESH:-0}" = 1 ] && empty_caches
    /usr/bin/time -f "main job %e s" python -m compare --out "$OUTDIR/report" ${FULL:+--full} 2>&1 \
      | tee "$OUTDIR/main.log" | grep -E "^(phase|main job|report|failed phases|FAILED|not run)"
    ;;
  lab)
    python -m compare layouts --hardware --out "$OUTDIR/layouts" 2>&1 | tee "$OUTDIR/layouts.log" | tail -5
    bash scripts/bank_conflicts.sh "$OUTDIR" 2>&1 | tail -20
    ;;
  sanitize)
    bash scripts/sanitize.sh "$OUTDIR"
    ;;
  ws-races)
    # the Triton cache under OUTDIR keeps the cubins racecheck ran, disassembled below with their source lines
    W="$OUTDIR/ws_races"; export TRITON_CACHE_DIR="$W/triton_cache" SANITIZE_QUICK=1 TOOLS=racecheck
    st=0
    for p in ${WS_RUNS:-ws_probe ws_probe_bar0 ws_probe_sync ws_probe_gemm,ws_probe_1w,ws_probe_2w,ws_probe_flat \
              ws_probe_mbar ws_probe_ld ws_probe_tma ws_probe_loop ws_probe_big gluon_persistent}; do
      echo "== $p"; d="$W/${p//,/+}"
      bash scripts/sanitize.sh "$d" "$p"
      # each launch, then the first lines of each report after it (the pairs it names)
      grep -E -A2 "^launch:|Race reported|hazard detected" "$d/sanitize_racecheck.txt" \
        | grep -E "^launch:|Race reported|hazard detected|and (Read|Write) access" | head -40
      grep -q "sanitize_cases: .* 0 wrong results" "$d/sanitize_racecheck.txt" || st=1  # a run must be right
    done
    mkdir -p "$W/sass"
    nvdisasm=$(python -c "from triton_kernels.triton_internals import nvdisasm_path; print(nvdisasm_path())")
    for c in $(find "$TRITON_CACHE_DIR" -name "*.cubin" 2>/dev/null); do
      "$nvdisasm" -c -g "$c" > "$W/sass/$(basename "$(dirname "$c")")_$(basename "$c" .cubin).sass"
    done
    [ "${WS_ENTRY:-1}" = 0 ] || python scripts/sanitize_cases.py --ws-entry > "$W/ws_entry.txt" 2>&1 || st=1
    grep -E "^\S|<-|control" "$W/ws_entry.txt" 2>/dev/null
    exit $st
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
  random)
    # the random suite's acceptance runs: for each seed of SEEDS and dtype of DTYPES, COUNT shapes (NN and NT
    # drawn per shape) with KERNELS, into OUTDIR/random-SEED-DTYPE/ (bench.csv, bench.json) and its log
    K=(torch.matmul triton wgmma_persistent gluon_persistent)
    [ -n "${KERNELS:-}" ] && read -ra K <<< "$KERNELS"
    for S in ${SEEDS:?SEEDS=\"S1 S2 S3\": seeds of your own, none the model was fitted on}; do
      for D in ${DTYPES:-fp16}; do
        python -m compare bench --suite random --seed "$S" --count "${COUNT:-200}" --layout NN,NT --dtype "$D" \
          --kernels "${K[@]}" --budget-ms "${BUDGET_MS:-8}" --out "$OUTDIR/random-$S-$D" > "$OUTDIR/random-$S-$D.log" 2>&1
        echo "random seed $S $D: rc=$?"
        grep -A8 "^random suite, seed" "$OUTDIR/random-$S-$D.log" | head -9
      done
    done
    ;;
  sweep)
    # a chunk of the cost model's data (python -m compare sweep): SEEDS as a comma list, every staging timed, the
    # Gluon kernel's configurations with GLUON=1 (GLUON=only: those alone), the hand-written side's plans with
    # PTX=1 (PTX=only: those alone; the extension is built first, outside the budget's cases), only the shapes one
    # Triton kernel is scored on with SCORED_BY=KERNEL, only problems of at most MAX_MACS multiply-adds with
    # MAX_MACS=2**30 (tiny ones), M up to MAX_M with MAX_M=N (skinny ones), the rounded half's N and K in multiples of
    # NK_MULTIPLE (64: whole boxes), from shape START of each seed's draw (default 0: a later chunk of one seed goes
    # on where the last stopped), compiled BLOCK cases at a time (default: the sweep's); appended to
    # OUTDIR/sweep.jsonl within BUDGET_S seconds
    [ "${PTX:-0}" != 0 ] && { python -c "import ptx_kernels; ptx_kernels.load()" 2>&1 | tail -3; }
    python -m compare sweep --seeds "${SEEDS:?SEEDS=S1,S2: seeds of your own}" --start "${START:-0}" --count "${COUNT:-100}" \
      --layout NN,NT --dtypes "${DTYPES:-fp16}" $([ "${GLUON:-0}" = 1 ] && echo --gluon) \
      $([ "${GLUON:-0}" = only ] && echo --gluon-only) \
      $([ "${PTX:-0}" = 1 ] && echo --ptx) $([ "${PTX:-0}" = only ] && echo --ptx-only) \
      ${SCORED_BY:+--scored-by "$SCORED_BY"} ${MAX_MACS:+--max-macs "$MAX_MACS"} ${MAX_M:+--max-m "$MAX_M"} ${NK_MULTIPLE:+--nk-multiple "$NK_MULTIPLE"} ${BLOCK:+--block "$BLOCK"} --budget-s "${BUDGET_S:-470}" \
      --workers "${WORKERS:-15}" --out "$OUTDIR/sweep.jsonl" > "$OUTDIR/sweep.log" 2>&1
    echo "sweep rc=$?"; tail -3 "$OUTDIR/sweep.log"
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
  gate|gate1|gate2)
    mkdir -p "$GATE_RAW/logs"
    rm -f "$GATE_PHASES"
    commit=${HGEMM_GIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
    echo "$PART at $commit, $(date -u +%FT%TZ), $(tail -1 "$OUTDIR/gpu.txt")" | tee "$GATE_SUMMARY"
    [ "$PART" = gate2 ] || gate_part1
    [ "$PART" = gate1 ] || gate_part2
    gate_verdict
    ;;
  *) echo "unknown part $PART (tests, report, gate, gate1, gate2, lab, sanitize, ws-races, wall, triton, triton-bench, random, sweep, yardsticks, sustained, sparse, plans, plan-table, classes)"; exit 2 ;;
esac
