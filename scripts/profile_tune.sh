#!/usr/bin/env bash
# Nsight Compute look at one tile shape of a tune sweep (GPU only): speed of light, shared memory and L2,
# tensor-pipe use, warp stall reasons, for the first launch of each kernel whose mangled name matches REGEX.
#   bash scripts/profile_tune.sh tune_mma 'TileILi128ELi256ELi32ELi2ELi4ELi3ELi1EEEL3Acc0' OUTDIR [TAG]
# (mangled tile arguments: BM, BN, BK, WARPS_M, WARPS_N, STAGES, MIN_BLOCKS, then Acc0 = fp32, Acc1 = fp16
# accumulation). The first launch is the sweep's 4096^3 correctness run. Writes OUTDIR/profile_<tune><TAG>.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
TUNE=${1:?tune_mma or tune_wmma_multistage}; REGEX=${2:?kernel name regex}; OUTDIR=${3:-gpu_out}; TAG=${4:-}
mkdir -p "$OUTDIR"
[ -x "/tmp/$TUNE" ] || nvcc -std=c++17 -O3 -lineinfo -gencode=arch=compute_90a,code=sm_90a -I ptx_kernels/csrc \
  -I scripts "scripts/$TUNE.cu" -lcublas -o "/tmp/$TUNE" || exit 1
ncu --kernel-name-base mangled --kernel-name "regex:$REGEX" --launch-count 1 \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SchedulerStats --section Occupancy \
  --section LaunchStats --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,lts__t_sectors_srcunit_tex.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed \
  "/tmp/$TUNE" > "$OUTDIR/profile_$TUNE$TAG.txt" 2>&1
grep -E "^  [a-z_]+.*Tile|Duration|Throughput|Tensor|hmma|Stall|Warp Cycles|Issued|Eligible|bank|wavefronts|lts__|Registers|Achieved Occ|Block Limit" \
  "$OUTDIR/profile_$TUNE$TAG.txt" | head -120
