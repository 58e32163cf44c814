#!/usr/bin/env bash
# Build the tile sweeps (GPU machine: needs cuBLAS), in parallel, into DIR (default /tmp):
#   bash scripts/build_tune.sh [DIR] [wgmma]     (wgmma: only the Hopper ladder's driver)
# DIR/tune_mma_f32, tune_mma_f16 (scripts/tune_mma.cu), tune_wmma_f32, tune_wmma_f16
# (scripts/tune_wmma_multistage.cu), tune_wgmma (scripts/tune_wgmma.cu: the Hopper ladder); -lineinfo so Nsight Compute can attribute stalls to source lines.
set -uo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-/tmp}; ONLY=${2:-}; mkdir -p "$DIR"
NVCC="nvcc -std=c++17 -O3 -lineinfo -gencode=arch=compute_90a,code=sm_90a -I ptx_kernels/csrc -I scripts"
status=0
pids=()
sweeps=()
if [ "$ONLY" != wgmma ]; then
  $NVCC scripts/tune_mma.cu -lcublas -ldl -o "$DIR/tune_mma_f32" & sweeps+=($!)
  $NVCC -DTUNE_ACC_F16 scripts/tune_mma.cu -lcublas -ldl -o "$DIR/tune_mma_f16" & sweeps+=($!)
  $NVCC scripts/tune_wmma_multistage.cu -lcublas -ldl -o "$DIR/tune_wmma_f32" & sweeps+=($!)
  $NVCC -DTUNE_ACC_F16 scripts/tune_wmma_multistage.cu -lcublas -ldl -o "$DIR/tune_wmma_f16" & sweeps+=($!)
fi
# the Hopper ladder's driver links the kernel files themselves (one object each, as the extension builds them)
mkdir -p "$DIR/wgmma_obj"
objs=()
for f in sm90/wgmma_tma sm90/wgmma_ws sm90/wgmma_persistent sm90/wgmma_splitk sm90/wgmma_cluster lab/wgmma_ceiling; do
  o="$DIR/wgmma_obj/$(basename $f).o"; objs+=("$o")
  $NVCC -c "ptx_kernels/csrc/$f.cu" -o "$o" & pids+=($!)
done
for p in "${pids[@]}"; do wait $p || status=1; done
$NVCC scripts/tune_wgmma.cu "${objs[@]}" -lcublas -o "$DIR/tune_wgmma" & sweeps+=($!)
for p in "${sweeps[@]}"; do wait $p || status=1; done
exit $status
