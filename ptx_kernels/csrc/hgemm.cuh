// hgemm.cuh — what every hand-written HGEMM variant shares with the binding layer: the problem description and
// the launcher signature. No Torch headers: kernel files compile with plain nvcc.
#pragma once
#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

// C[M, N] = A[M, K] @ B[K, N], fp16 in and out. Strides in elements. Tensor-core variants need sak == 1
// (A row-major) and either sbn == 1 (B row-major, "NN") or sbk == 1 (B column-major, "NT"); the simt variant
// takes any strides. C is written with unit column stride and row stride ldc.
struct GemmArgs {
  const half* A;
  const half* B;
  half* C;
  int M, N, K;
  int64_t sam, sak;
  int64_t sbk, sbn;
  int64_t ldc;
  bool b_col_major;
  // Where a variant has two tiles for an accumulation (the pipelined ones with fp16 accumulation: a large tile and
  // the fp32 one), 0 lets the launcher pick by wave count (tile::prefer_large), 1 forces the large, 2 the other.
  int tile = 0;
};

enum class Acc : int { F32 = 0, F16 = 1 };

// Filled by a launcher so the binding can explain a failure and the harness can show what was launched.
struct LaunchInfo {
  unsigned grid_x = 0, grid_y = 0, block = 0;
  int smem_bytes = 0;  // dynamic + static shared memory per block
  int smem_limit = 0;  // the device's opt-in limit per block
  int tile_m = 0, tile_n = 0;  // the block tile launched, where the variant chooses between two (else 0)
};

using Launcher = cudaError_t (*)(const GemmArgs&, Acc, cudaStream_t, LaunchInfo*);

// One launcher per variant (defined in <variant>.cu).
cudaError_t launch_simt_naive(const GemmArgs&, Acc, cudaStream_t, LaunchInfo*);
cudaError_t launch_wmma_naive(const GemmArgs&, Acc, cudaStream_t, LaunchInfo*);
cudaError_t launch_wmma_smem(const GemmArgs&, Acc, cudaStream_t, LaunchInfo*);
cudaError_t launch_wmma_regtile(const GemmArgs&, Acc, cudaStream_t, LaunchInfo*);
cudaError_t launch_wmma_async_dbuf(const GemmArgs&, Acc, cudaStream_t, LaunchInfo*);
cudaError_t launch_wmma_multistage(const GemmArgs&, Acc, cudaStream_t, LaunchInfo*);
cudaError_t launch_mma_naive(const GemmArgs&, Acc, cudaStream_t, LaunchInfo*);
cudaError_t launch_mma_tiled(const GemmArgs&, Acc, cudaStream_t, LaunchInfo*);
cudaError_t launch_mma_multistage(const GemmArgs&, Acc, cudaStream_t, LaunchInfo*);
cudaError_t launch_mma_swizzle(const GemmArgs&, Acc, cudaStream_t, LaunchInfo*);
cudaError_t launch_mma_stmatrix(const GemmArgs&, Acc, cudaStream_t, LaunchInfo*);

// The mma.sync instruction ceiling (mma_ceiling.cu): blocks x 4 warps x iters x 8 chains of m16n8k16.
constexpr int kMmaCeilingWarpsPerBlock = 4, kMmaCeilingChains = 8;
cudaError_t launch_mma_ceiling(int blocks, int iters, Acc acc, float* sink, cudaStream_t stream);
// The FLOPs one launch_mma_ceiling(blocks, iters, ...) performs.
inline double mma_ceiling_flops(long long blocks, long long iters) {
  return double(blocks) * kMmaCeilingWarpsPerBlock * double(iters) * kMmaCeilingChains * (2.0 * 16 * 8 * 16);
}

// Fragment-layout probes (probes.cu): one warp each; see ptx_kernels/probes.py.
cudaError_t launch_probe_ldmatrix(int num, bool trans, uint16_t* out, cudaStream_t stream);
cudaError_t launch_probe_stmatrix(int num, bool trans, uint16_t* out, cudaStream_t stream);
cudaError_t launch_probe_mma(bool fp16, const uint32_t* a, const uint32_t* b, const void* c, void* d,
                             cudaStream_t stream);
cudaError_t launch_probe_wmma(int which, uint32_t* out, int* out_n, cudaStream_t stream);
cudaError_t launch_probe_asm(uint32_t* out, uint64_t* out64, double* outd, cudaStream_t stream);
