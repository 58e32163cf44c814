// probes.cu — tiny one-warp kernels that record what the hardware does, for the fragment-layout lab
// (ptx_kernels/layouts.py is the model; tests/test_layouts_gpu.py compares the two).
//
// Values are 16-bit indices carried as raw fp16 bit patterns, so nothing is rounded: what a lane holds tells
// exactly which element (or which lane's register) it came from.
#include <mma.h>

#include "hgemm.cuh"
#include "lab/asm_examples.cuh"
#include "lab/lab.h"
#include "ptx/cvta.cuh"
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900  // stmatrix exists from sm_90 (its guard rejects older targets)
#include "ptx/stmatrix.cuh"
#endif
#include "ptx/ldmatrix.cuh"
#include "ptx/mma_sync.cuh"

namespace probes {

// ldmatrix .x{NUM}{.trans}: shared memory holds NUM 8x8 matrices of indices m*64 + r*8 + c; lane 8i + r supplies
// the address of matrix i's row r. out: (32, 2*NUM) uint16: lane, (register, half).
template <int NUM, bool TRANS>
__global__ void ldmatrix_kernel(uint16_t* out) {
  __shared__ __align__(16) uint16_t s[NUM * 64];
  const int lane = threadIdx.x;
  for (int e = lane; e < NUM * 64; e += 32) s[e] = static_cast<uint16_t>(e);
  __syncwarp();
  const int row = lane % (8 * NUM);  // lanes past 8*NUM give valid (ignored) addresses
  const uint32_t addr = ptx::smem_u32(s + row * 8);
  uint32_t r[4] = {0, 0, 0, 0};
  if constexpr (NUM == 1) {
    if constexpr (TRANS) ptx::ldmatrix_x1_trans(r[0], addr); else ptx::ldmatrix_x1(r[0], addr);
  } else if constexpr (NUM == 2) {
    if constexpr (TRANS) ptx::ldmatrix_x2_trans(r[0], r[1], addr); else ptx::ldmatrix_x2(r[0], r[1], addr);
  } else {
    if constexpr (TRANS) ptx::ldmatrix_x4_trans(r[0], r[1], r[2], r[3], addr);
    else ptx::ldmatrix_x4(r[0], r[1], r[2], r[3], addr);
  }
  for (int i = 0; i < NUM; ++i) {
    out[lane * 2 * NUM + 2 * i] = static_cast<uint16_t>(r[i] & 0xffff);
    out[lane * 2 * NUM + 2 * i + 1] = static_cast<uint16_t>(r[i] >> 16);
  }
}

// stmatrix .x{NUM}{.trans}: lane l's register i holds (l*8 + 2i) and (l*8 + 2i + 1) in its halves; lane 8i + r
// supplies matrix i's row r. out: (NUM*64) uint16, the matrices as stored.
template <int NUM, bool TRANS>
__global__ void stmatrix_kernel(uint16_t* out) {
#if __CUDA_ARCH__ >= 900
  __shared__ __align__(16) uint16_t s[NUM * 64];
  const int lane = threadIdx.x;
  for (int e = lane; e < NUM * 64; e += 32) s[e] = 0xffff;
  __syncwarp();
  const uint32_t addr = ptx::smem_u32(s + (lane % (8 * NUM)) * 8);
  uint32_t r[4];
  for (int i = 0; i < 4; ++i) r[i] = uint32_t(lane * 8 + 2 * i) | (uint32_t(lane * 8 + 2 * i + 1) << 16);
  if constexpr (NUM == 1) {
    if constexpr (TRANS) ptx::stmatrix_x1_trans(addr, r[0]); else ptx::stmatrix_x1(addr, r[0]);
  } else if constexpr (NUM == 2) {
    if constexpr (TRANS) ptx::stmatrix_x2_trans(addr, r[0], r[1]); else ptx::stmatrix_x2(addr, r[0], r[1]);
  } else {
    if constexpr (TRANS) ptx::stmatrix_x4_trans(addr, r[0], r[1], r[2], r[3]);
    else ptx::stmatrix_x4(addr, r[0], r[1], r[2], r[3]);
  }
  __syncwarp();
  for (int e = lane; e < NUM * 64; e += 32) out[e] = s[e];
#else
  __trap();  // stmatrix is sm_90+: the launcher refuses older GPUs before launching
#endif
}

// mma.m16n8k16: registers in, accumulator out. a: (32, 4) u32, b: (32, 2) u32; fp32: c/d (32, 4) f32;
// fp16: c/d (32, 2) u32.
__global__ void mma_f32_kernel(const uint32_t* a, const uint32_t* b, const float* c, float* d) {
  const int l = threadIdx.x;
  const uint32_t ra[4] = {a[4 * l], a[4 * l + 1], a[4 * l + 2], a[4 * l + 3]}, rb[2] = {b[2 * l], b[2 * l + 1]};
  const float rc[4] = {c[4 * l], c[4 * l + 1], c[4 * l + 2], c[4 * l + 3]};
  float rd[4];
  ptx::mma_m16n8k16_f32(rd, ra, rb, rc);
  for (int i = 0; i < 4; ++i) d[4 * l + i] = rd[i];
}
__global__ void mma_f16_kernel(const uint32_t* a, const uint32_t* b, const uint32_t* c, uint32_t* d) {
  const int l = threadIdx.x;
  const uint32_t ra[4] = {a[4 * l], a[4 * l + 1], a[4 * l + 2], a[4 * l + 3]}, rb[2] = {b[2 * l], b[2 * l + 1]};
  const uint32_t rc[2] = {c[2 * l], c[2 * l + 1]};
  uint32_t rd[2];
  ptx::mma_m16n8k16_f16(rd, ra, rb, rc);
  d[2 * l] = rd[0];
  d[2 * l + 1] = rd[1];
}

// WMMA m16n16k16 fragments as the compiler lays them out: load_matrix_sync from shared memory holding indices
// r*16 + c (as raw fp16 bits) and record x[i] per lane. which: 0 = matrix_a row_major, 1 = matrix_b row_major,
// 2 = matrix_b col_major, 3 = accumulator (float, values r*16 + c). out: (32, 16) uint16 (or float bits for 3),
// and num_elements in out_n.
__global__ void wmma_kernel(int which, uint32_t* out, int* out_n) {
  using namespace nvcuda;
  __shared__ __align__(32) uint16_t s[256];
  __shared__ __align__(32) float sf[256];
  const int lane = threadIdx.x;
  for (int e = lane; e < 256; e += 32) {
    s[e] = static_cast<uint16_t>(e);
    sf[e] = static_cast<float>(e);
  }
  __syncwarp();
  const half* h = reinterpret_cast<const half*>(s);
  auto record = [&](const auto& frag, auto bits) {
    for (int i = 0; i < frag.num_elements; ++i) out[lane * 16 + i] = bits(frag.x[i]);
    if (lane == 0) *out_n = frag.num_elements;
  };
  auto hbits = [](half v) { return uint32_t(__half_as_ushort(v)); };
  if (which == 0) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> f;
    wmma::load_matrix_sync(f, h, 16);
    record(f, hbits);
  } else if (which == 1) {
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> f;
    wmma::load_matrix_sync(f, h, 16);
    record(f, hbits);
  } else if (which == 2) {
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> f;
    wmma::load_matrix_sync(f, h, 16);
    record(f, hbits);
  } else {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> f;
    wmma::load_matrix_sync(f, sf, 16, wmma::mem_row_major);
    record(f, [](float v) { return __float_as_uint(v); });
  }
}

// The inline-asm examples, one value each. out (u32 words): [lane*16 + k].
__global__ void asm_kernel(uint32_t* out, uint64_t* out64, double* outd) {
  const uint32_t l = threadIdx.x;
  uint32_t* o = out + l * 16;
  o[0] = asm_ex::cube(l);
  o[1] = static_cast<uint32_t>(asm_ex::min_predicated(int32_t(l) - 16, 16 - int32_t(l)));
  o[2] = asm_ex::laneid();
  const uint32_t t0 = asm_ex::clock32();
  const uint32_t t1 = asm_ex::clock32();
  o[3] = t1 - t0;
  o[4] = asm_ex::add_u16(uint16_t(l), uint16_t(65535));
  o[5] = __float_as_uint(asm_ex::fma_f32(float(l), 0.5f, 1.0f));
  o[6] = asm_ex::shl_imm<3>(l);
  asm_ex::store_u32(o + 7, l ^ 0x5a5a5a5au);
  out64[l] = asm_ex::add_u64(uint64_t(l) << 40, 7);
  outd[l] = asm_ex::add_f64(double(l), 0.25);
}

}  // namespace probes

cudaError_t launch_probe_ldmatrix(int num, bool trans, uint16_t* out, cudaStream_t stream) {
  using namespace probes;
  if (num == 1) trans ? ldmatrix_kernel<1, true><<<1, 32, 0, stream>>>(out) : ldmatrix_kernel<1, false><<<1, 32, 0, stream>>>(out);
  else if (num == 2) trans ? ldmatrix_kernel<2, true><<<1, 32, 0, stream>>>(out) : ldmatrix_kernel<2, false><<<1, 32, 0, stream>>>(out);
  else if (num == 4) trans ? ldmatrix_kernel<4, true><<<1, 32, 0, stream>>>(out) : ldmatrix_kernel<4, false><<<1, 32, 0, stream>>>(out);
  else return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t launch_probe_stmatrix(int num, bool trans, uint16_t* out, cudaStream_t stream) {
  using namespace probes;
  int dev = 0, major = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  if (major < 9) return cudaErrorInvalidDeviceFunction;
  if (num == 1) trans ? stmatrix_kernel<1, true><<<1, 32, 0, stream>>>(out) : stmatrix_kernel<1, false><<<1, 32, 0, stream>>>(out);
  else if (num == 2) trans ? stmatrix_kernel<2, true><<<1, 32, 0, stream>>>(out) : stmatrix_kernel<2, false><<<1, 32, 0, stream>>>(out);
  else if (num == 4) trans ? stmatrix_kernel<4, true><<<1, 32, 0, stream>>>(out) : stmatrix_kernel<4, false><<<1, 32, 0, stream>>>(out);
  else return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t launch_probe_mma(bool fp16, const uint32_t* a, const uint32_t* b, const void* c, void* d,
                             cudaStream_t stream) {
  if (fp16)
    probes::mma_f16_kernel<<<1, 32, 0, stream>>>(a, b, static_cast<const uint32_t*>(c), static_cast<uint32_t*>(d));
  else
    probes::mma_f32_kernel<<<1, 32, 0, stream>>>(a, b, static_cast<const float*>(c), static_cast<float*>(d));
  return cudaGetLastError();
}

cudaError_t launch_probe_wmma(int which, uint32_t* out, int* out_n, cudaStream_t stream) {
  if (which < 0 || which > 3) return cudaErrorInvalidValue;
  probes::wmma_kernel<<<1, 32, 0, stream>>>(which, out, out_n);
  return cudaGetLastError();
}

cudaError_t launch_probe_asm(uint32_t* out, uint64_t* out64, double* outd, cudaStream_t stream) {
  probes::asm_kernel<<<1, 32, 0, stream>>>(out, out64, outd);
  return cudaGetLastError();
}
