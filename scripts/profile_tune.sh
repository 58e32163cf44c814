#!/usr/bin/env bash
# Nsight Compute look at one tile shape of a tune sweep (GPU only): speed of light, shared-memory and tensor-pipe
# use, SM clock, warp stall reasons (cycles per issued instruction), for the first launch of each kernel whose
# mangled name matches REGEX.
#   bash scripts/profile_tune.sh tune_mma_f32 'TileILi128ELi256ELi64ELi2ELi4ELi3ELi1ELi2ELb0EEEL3Acc0' OUTDIR [TAG]
# (binaries of scripts/build_tune.sh; mangled tile arguments: BM, BN, BK, WARPS_M, WARPS_N, STAGES, MIN_BLOCKS,
# FRAG_BUFS, MBARRIERS (Lb0 / Lb1), then Acc0 = fp32, Acc1 = fp16 accumulation). The first launch is the sweep's 4096^3 correctness run.
# Writes OUTDIR/profile_<tune><TAG>.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
TUNE=${1:?tune_mma_f32, tune_mma_f16, tune_wmma_f32 or tune_wmma_f16}; REGEX=${2:?kernel name regex}
OUTDIR=${3:-gpu_out}; TAG=${4:-}
mkdir -p "$OUTDIR"
[ -x "/tmp/$TUNE" ] || bash scripts/build_tune.sh /tmp || exit 1
METRICS=sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
METRICS+=,sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active
METRICS+=,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed
METRICS+=,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum
METRICS+=,smsp__inst_executed_op_ldsm.sum,sm__cycles_elapsed.avg.per_second,lts__throughput.avg.pct_of_peak_sustained_elapsed
# warp stall reasons: cycles per issued instruction that an average warp spends in each state
for r in barrier long_scoreboard short_scoreboard math_pipe_throttle mio_throttle wait not_selected selected \
         dispatch_stall lg_throttle no_instruction branch_resolving membar sleeping drain misc; do
  METRICS+=,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio
done
ncu --kernel-name-base mangled --kernel-name "regex:$REGEX" --launch-count 1 \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SchedulerStats --section Occupancy \
  --section LaunchStats --metrics "$METRICS" "/tmp/$TUNE" > "$OUTDIR/profile_$TUNE$TAG.txt" 2>&1
grep -E "^  [a-z_]+.*Tile|stalled|Duration|Throughput|Tensor|hmma|Stall|Warp Cycles|Issued|Eligible|bank|wavefronts|ldsm|per_second|lts__|Shared|Registers|Achieved Occ|Block Limit" \
  "$OUTDIR/profile_$TUNE$TAG.txt" | head -120
