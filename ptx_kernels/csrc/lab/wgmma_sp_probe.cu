// wgmma_sp_probe.cu — a one-warpgroup probe of wgmma.mma_async.sp m64n256k32 as wgmma_sp issues it, for the
// sparsity lab: one stage (64 rows x 64 dense K, two k32 steps) through hopper_sp::mma_stage, with the operands
// placed in shared memory where the kernel's TMA boxes put them (hopper_sp::a_offset, b_*_offset) and the metadata
// registers given per thread by the CPU model (ptx_kernels/sparse.py; ptx_kernels/probes.py `wgmma_sp` fills them
// and gathers D by the model of the accumulator fragment). Equal to the pruned product only if the metadata map,
// the 64-byte-swizzle descriptors with their 32-byte k32 step and the B steps are what the hardware does.
#include "blocks/wgmma_sp_tile.cuh"
#include "lab/lab.h"

namespace {

struct ProbeStage {
  alignas(1024) half A[64 * hopper_sp::BKC];  // (m, compressed k), 64-byte swizzled
  alignas(1024) half B[256 * hopper::BK];     // K-major or N-major, 128-byte swizzled
};

// a: (64, 32) compressed values (fp16 bits), b: (256, 64) (n, k) fp16 bits, e: (128, 2) metadata registers per
// thread and k32 step; d: (128, 128) fp32 or (128, 64) fp16 pairs per thread, in register order.
template <Acc ACC, bool B_COL, int SEL>
__global__ void __launch_bounds__(hopper::kWarpgroup, 1)
    wgmma_sp_probe_kernel(const uint16_t* a, const uint16_t* b, const uint32_t* e, uint32_t* d) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  ProbeStage& st = hopper::aligned_storage<ProbeStage>(smem_raw);
  uint8_t* sa = reinterpret_cast<uint8_t*>(st.A);
  uint8_t* sb = reinterpret_cast<uint8_t*>(st.B);
  const int t = threadIdx.x;
  for (int i = t; i < 64 * hopper_sp::BKC; i += hopper::kWarpgroup)
    *reinterpret_cast<uint16_t*>(sa + hopper_sp::a_offset(i / hopper_sp::BKC, i % hopper_sp::BKC)) = a[i];
  for (int i = t; i < 256 * hopper::BK; i += hopper::kWarpgroup) {
    const int n = i / hopper::BK, k = i % hopper::BK;
    *reinterpret_cast<uint16_t*>(sb + (B_COL ? hopper_sp::b_kmajor_offset(n, k) : hopper_sp::b_nmajor_offset(n, k))) =
        b[i];
  }
  ptx::fence_proxy_async_shared();
  __syncthreads();
  const uint32_t regs[hopper_sp::KSTEPS] = {e[2 * t], e[2 * t + 1]};
  hopper::Accum<256, ACC> acc;
  ptx::wgmma_fence();
  hopper_sp::mma_stage<B_COL, SEL>(acc.d, st.A, st.B, regs, true);
  ptx::wgmma_commit_group();
  ptx::wgmma_wait_group<0>();
  ptx::fence_operands(acc.d);
  constexpr int R = sizeof(acc.d) / 4;
  for (int i = 0; i < R; ++i) d[t * R + i] = reinterpret_cast<const uint32_t*>(acc.d)[i];
}

template <Acc ACC, bool B_COL, int SEL>
cudaError_t launch(const uint16_t* a, const uint16_t* b, const uint32_t* e, uint32_t* d, cudaStream_t stream) {
  auto kernel = wgmma_sp_probe_kernel<ACC, B_COL, SEL>;
  const int smem = hopper::smem_request<ProbeStage>();
  const cudaError_t err = tile::prepare_smem(kernel, smem, nullptr);
  if (err != cudaSuccess) return err;
  kernel<<<1, hopper::kWarpgroup, smem, stream>>>(a, b, e, d);
  return cudaGetLastError();
}

}  // namespace

namespace {
cudaError_t launch_probe_wgmma_sp(bool fp16, bool b_col, int sel, const uint16_t* a, const uint16_t* b,
                                  const uint32_t* e, uint32_t* d, cudaStream_t stream) {
  if (sel != 0 && sel != 1) return cudaErrorInvalidValue;
  const Acc acc = fp16 ? Acc::F16 : Acc::F32;
  return tile::dispatch(acc, b_col, [&](auto acc_c, auto b_col_c) {
    return sel ? launch<acc_c.value, b_col_c.value, 1>(a, b, e, d, stream)
               : launch<acc_c.value, b_col_c.value, 0>(a, b, e, d, stream);
  });
}
const bool registered = (wgmma_sp_probe() = launch_probe_wgmma_sp, true);
}  // namespace
