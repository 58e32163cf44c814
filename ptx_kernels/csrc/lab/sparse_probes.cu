// sparse_probes.cu — a one-warp probe of mma.sp.m16n8k32's fragments and metadata, for the sparsity lab
// (ptx_kernels/sparse.py is the model; ptx_kernels/probes.py `mma_sp` scatters operands into registers by the model
// and gathers D back; tests/test_layouts_gpu.py compares D with the pruned product). Both selectors.
#include "hgemm.cuh"
#include "lab/lab.h"
#include "ptx/mma_sparse.cuh"

namespace sparse_probes {

// a: (32, 4) u32 compressed A registers, b: (32, 4) u32, e: (32,) u32 metadata; fp32: c/d (32, 4) f32, fp16: (32, 2).
template <int SEL>
__global__ void mma_sp_f32_kernel(const uint32_t* a, const uint32_t* b, const uint32_t* e, const float* c, float* d) {
  const int l = threadIdx.x;
  const uint32_t ra[4] = {a[4 * l], a[4 * l + 1], a[4 * l + 2], a[4 * l + 3]};
  const uint32_t rb[4] = {b[4 * l], b[4 * l + 1], b[4 * l + 2], b[4 * l + 3]};
  const float rc[4] = {c[4 * l], c[4 * l + 1], c[4 * l + 2], c[4 * l + 3]};
  float rd[4];
  ptx::mma_sp_m16n8k32_f32<SEL>(rd, ra, rb, rc, e[l]);
  for (int i = 0; i < 4; ++i) d[4 * l + i] = rd[i];
}

template <int SEL>
__global__ void mma_sp_f16_kernel(const uint32_t* a, const uint32_t* b, const uint32_t* e, const uint32_t* c,
                                  uint32_t* d) {
  const int l = threadIdx.x;
  const uint32_t ra[4] = {a[4 * l], a[4 * l + 1], a[4 * l + 2], a[4 * l + 3]};
  const uint32_t rb[4] = {b[4 * l], b[4 * l + 1], b[4 * l + 2], b[4 * l + 3]};
  const uint32_t rc[2] = {c[2 * l], c[2 * l + 1]};
  uint32_t rd[2];
  ptx::mma_sp_m16n8k32_f16<SEL>(rd, ra, rb, rc, e[l]);
  d[2 * l] = rd[0];
  d[2 * l + 1] = rd[1];
}

}  // namespace sparse_probes

cudaError_t launch_probe_mma_sp(bool fp16, int sel, const uint32_t* a, const uint32_t* b, const uint32_t* e,
                                const void* c, void* d, cudaStream_t stream) {
  using namespace sparse_probes;
  if (sel != 0 && sel != 1) return cudaErrorInvalidValue;
  if (fp16) {
    auto k = sel ? mma_sp_f16_kernel<1> : mma_sp_f16_kernel<0>;
    k<<<1, 32, 0, stream>>>(a, b, e, static_cast<const uint32_t*>(c), static_cast<uint32_t*>(d));
  } else {
    auto k = sel ? mma_sp_f32_kernel<1> : mma_sp_f32_kernel<0>;
    k<<<1, 32, 0, stream>>>(a, b, e, static_cast<const float*>(c), static_cast<float*>(d));
  }
  return cudaGetLastError();
}
