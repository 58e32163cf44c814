// simt_naive.cu — the CUDA-core baseline of the seed: one thread per output element, no tensor cores.
//
// Adds: nothing; it is the floor the ladder climbs from. Any strides (no copies), any shape.
// Expect ~1-2% of torch.matmul: every thread reads a row of A and a column of B straight from global memory.
// Measured: docs/design/wmma.md.
#include "blocks/common.cuh"
#include "hgemm.cuh"
#include "host/launch.h"

namespace simt_naive {

constexpr int BLOCK_X = 16;  // threads along N: lanes of a warp read consecutive B columns and write consecutive C
constexpr int BLOCK_Y = 16;

template <Acc ACC>
__global__ void __launch_bounds__(BLOCK_X* BLOCK_Y) kernel(GemmArgs p) {
  const int col = blockIdx.x * BLOCK_X + threadIdx.x;
  const int row = blockIdx.y * BLOCK_Y + threadIdx.y;
  if (row >= p.M || col >= p.N) return;
  const half* a = p.A + row * p.sam;
  const half* b = p.B + col * p.sbn;
  if constexpr (ACC == Acc::F32) {
    float acc = 0.f;
    for (int k = 0; k < p.K; ++k) acc = fmaf(__half2float(a[k * p.sak]), __half2float(b[k * p.sbk]), acc);
    p.C[row * p.ldc + col] = __float2half_rn(acc);
  } else {
    half acc = __float2half(0.f);
    for (int k = 0; k < p.K; ++k) acc = __hfma(a[k * p.sak], b[k * p.sbk], acc);
    p.C[row * p.ldc + col] = acc;
  }
}

}  // namespace simt_naive

cudaError_t launch_simt_naive(const GemmArgs& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  using namespace simt_naive;
  const dim3 block(BLOCK_X, BLOCK_Y), grid(tile::cdiv(p.N, BLOCK_X), tile::cdiv(p.M, BLOCK_Y));
  tile::fill_info(info, grid, block, 0);
  if (acc == Acc::F32)
    kernel<Acc::F32><<<grid, block, 0, stream>>>(p);
  else
    kernel<Acc::F16><<<grid, block, 0, stream>>>(p);
  return cudaGetLastError();
}

HGEMM_VARIANT(simt_naive, launch_simt_naive, AnyStrides);
