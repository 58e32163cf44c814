// Instantiates every wrapper of csrc/ptx/ once, so the compile tests can see each instruction in the SASS and
// check that the arch guard rejects stmatrix below sm_90. Not a kernel anyone runs.
#include <cuda_fp16.h>

#include "ptx/cp_async.cuh"
#include "ptx/cvta.cuh"
#include "ptx/ldmatrix.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/mma_sync.cuh"
#include "ptx/wmma.cuh"
#ifdef WITH_STMATRIX
#include "ptx/stmatrix.cuh"  // its guard rejects a pre-sm_90 target
#endif

__global__ void every_wrapper(const half* g, half* out, float* fout) {
  __shared__ __align__(128) half s[32 * 8 * 4];
  const uint32_t base = ptx::smem_u32(s + (threadIdx.x % 32) * 8);
  ptx::cp_async_16B(base, g + threadIdx.x * 8, 16);
  ptx::cp_async_16B(base, g, 4);  // the zero-fill form
  ptx::cp_async_commit();
  ptx::cp_async_wait<0>();
  // mbarrier: one phase of 2 arrivals per thread (its cp.async landing, then a plain arrival), then wait for it
  __shared__ __align__(8) uint64_t bar;
  const uint32_t mbar = ptx::smem_u32(&bar);
  if (threadIdx.x == 0) ptx::mbarrier_init(mbar, 2 * blockDim.x);
  __syncthreads();
  ptx::cp_async_16B(base, g, 16);
  ptx::cp_async_mbarrier_arrive_noinc(mbar);
  ptx::mbarrier_arrive(mbar);
  ptx::mbarrier_wait_parity(mbar, 0);
  __syncthreads();
  uint32_t r[16];
  ptx::ldmatrix_x1(r[0], base);
  ptx::ldmatrix_x2(r[1], r[2], base);
  ptx::ldmatrix_x4(r[3], r[4], r[5], r[6], base);
  ptx::ldmatrix_x1_trans(r[7], base);
  ptx::ldmatrix_x2_trans(r[8], r[9], base);
  ptx::ldmatrix_x4_trans(r[10], r[11], r[12], r[13], base);
  uint32_t w[3][8];  // wmma.load: A row-major, B row-major, B column-major (16x16, leading dimension 16)
  ptx::wmma_load_a_row_m16n16k16<16, 0>(w[0], ptx::smem_u32(s));
  ptx::wmma_load_b_m16n16k16<false, 16, 512>(w[1], ptx::smem_u32(s));
  ptx::wmma_load_b_m16n16k16<true, 16, 1024>(w[2], ptx::smem_u32(s));
  const uint32_t a[4] = {r[0], r[1], r[2], r[3]}, b[2] = {r[4], r[5]}, c16[2] = {r[6], r[7]};
  float d[4];
  const float c[4] = {0.f, 0.f, 0.f, 0.f};
  ptx::mma_m16n8k16_f32(d, a, b, c);
  float dbf[4];
  ptx::mma_m16n8k16_f32_bf16(dbf, a, b, c);
  uint32_t d16[2];
  ptx::mma_m16n8k16_f16(d16, a, b, c16);
#ifdef WITH_STMATRIX
  ptx::stmatrix_x1(base, d16[0]);
  ptx::stmatrix_x2(base, d16[0], d16[1]);
  ptx::stmatrix_x4(base, r[8], r[9], r[10], r[11]);
  ptx::stmatrix_x1_trans(base, r[12]);
  ptx::stmatrix_x2_trans(base, r[12], r[13]);
  ptx::stmatrix_x4_trans(base, r[8], r[9], r[10], r[11]);
  __syncthreads();
#endif
  // Consume every register, or ptxas drops the loads whose results are dead.
  uint32_t x = d16[0] ^ d16[1];
  for (int i = 0; i < 14; ++i) x ^= r[i];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 8; ++j) x ^= w[i][j];
  for (int i = 0; i < 4; ++i) fout[threadIdx.x * 4 + i] = d[i] + dbf[i];
  out[threadIdx.x] = s[threadIdx.x];
  reinterpret_cast<uint32_t*>(fout)[128 + threadIdx.x] = x;
}
