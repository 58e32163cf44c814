// lab/lab.h — launchers of the lab kernels (lab/*.cu): not GEMM variants, but the instruction ceiling the
// harness scores against and the probes the fragment-layout tests read. binding.cpp calls them by name.
#pragma once
#include <cstdint>

#include "hgemm.cuh"

// The mma.sync instruction ceiling (mma_ceiling.cu): blocks x 4 warps x iters x 8 chains of m16n8k16.
constexpr int kMmaCeilingWarpsPerBlock = 4, kMmaCeilingChains = 8;
cudaError_t launch_mma_ceiling(int blocks, int iters, Acc acc, float* sink, cudaStream_t stream);
// The FLOPs one launch_mma_ceiling(blocks, iters, ...) performs.
inline double mma_ceiling_flops(long long blocks, long long iters) {
  return double(blocks) * kMmaCeilingWarpsPerBlock * double(iters) * kMmaCeilingChains * (2.0 * 16 * 8 * 16);
}

// The wgmma instruction ceiling (wgmma_ceiling.cu, sm_90a only): blocks x 2 warpgroups x iters k-blocks of 4
// chained m64n256k16, operands in shared memory.
constexpr int kWgmmaCeilingWarpgroups = 2;
cudaError_t launch_wgmma_ceiling(int blocks, int iters, Acc acc, float* sink, cudaStream_t stream);
// The same loop on random operands ("wgmma.random"; the same FLOPs per launch).
cudaError_t launch_wgmma_random_ceiling(int blocks, int iters, Acc acc, float* sink, cudaStream_t stream);
inline double wgmma_ceiling_flops(long long blocks, long long iters) {
  return double(blocks) * kWgmmaCeilingWarpgroups * double(iters) * 4 * (2.0 * 64 * 256 * 16);
}

// The sparse mma.sync ceiling (mma_sp_ceiling.cu): the same grid and chains as mma_ceiling, mma.sp.m16n8k32,
// counted as the dense work it does (2 x 16 x 8 x 32 per instruction).
cudaError_t launch_mma_sp_ceiling(int blocks, int iters, Acc acc, float* sink, cudaStream_t stream);
inline double mma_sp_ceiling_flops(long long blocks, long long iters) {
  return 2.0 * mma_ceiling_flops(blocks, iters);
}

// The sparse wgmma ceiling (wgmma_sp_ceiling.cu, sm_90a only): blocks x 2 warpgroups x iters stages of two chained
// wgmma.mma_async.sp m64n256k32, counted as the dense work they do (2 x 64 x 256 x 32 each).
constexpr int kWgmmaSpCeilingWarpgroups = 2;
cudaError_t launch_wgmma_sp_ceiling(int blocks, int iters, Acc acc, float* sink, cudaStream_t stream);
inline double wgmma_sp_ceiling_flops(long long blocks, long long iters) {
  return double(blocks) * kWgmmaSpCeilingWarpgroups * double(iters) * 2 * (2.0 * 64 * 256 * 32);
}

// Fragment-layout probes (probes.cu): one warp each; see ptx_kernels/probes.py.
cudaError_t launch_probe_ldmatrix(int num, bool trans, uint16_t* out, cudaStream_t stream);
cudaError_t launch_probe_stmatrix(int num, bool trans, uint16_t* out, cudaStream_t stream);
cudaError_t launch_probe_mma(bool fp16, const uint32_t* a, const uint32_t* b, const void* c, void* d,
                             cudaStream_t stream);
cudaError_t launch_probe_wmma(int which, uint32_t* out, int* out_n, cudaStream_t stream);
cudaError_t launch_probe_asm(uint32_t* out, uint64_t* out64, double* outd, cudaStream_t stream);
// The mma.sp.m16n8k32 probe (sparse_probes.cu): registers in, D out, sparsity selector sel (0 or 1).
cudaError_t launch_probe_mma_sp(bool fp16, int sel, const uint32_t* a, const uint32_t* b, const uint32_t* e,
                                const void* c, void* d, cudaStream_t stream);
// The wgmma.mma_async.sp probe (wgmma_sp_probe.cu, sm_90a only): one stage of wgmma_sp's MMAs on operands placed as
// its TMA boxes place them; a (64, 32) compressed values, b (256, 64) (n, k), e (128, 2) metadata registers, d the
// accumulators per thread in register order.
// Built for sm_90a only, so the binding reaches it through this pointer, set when the library loads (null otherwise).
using WgmmaSpProbe = cudaError_t (*)(bool fp16, bool b_col, int sel, const uint16_t* a, const uint16_t* b,
                                     const uint32_t* e, uint32_t* d, cudaStream_t stream);
inline WgmmaSpProbe& wgmma_sp_probe() {
  static WgmmaSpProbe probe = nullptr;
  return probe;
}
