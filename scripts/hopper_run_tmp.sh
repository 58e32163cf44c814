set -o pipefail
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.sm,clocks.max.sm --format=csv
mkdir -p /tmp/tw
F="-std=c++17 -O3 -lineinfo -gencode=arch=compute_90a,code=sm_90a -I ptx_kernels/csrc"
for f in wgmma_tma wgmma_ws wgmma_persistent wgmma_cluster wgmma_ceiling; do nvcc $F -c ptx_kernels/csrc/sm90/$f.cu -o /tmp/tw/$f.o & done; wait
nvcc $F scripts/tune_wgmma.cu /tmp/tw/*.o -lcublas -o /tmp/tw/tune_wgmma || exit 1
timeout 120 /tmp/tw/tune_wgmma check 2>&1 | tee $OUT/check.log | tail -20
timeout 300 /tmp/tw/tune_wgmma bench 2>&1 | tee $OUT/bench.log
