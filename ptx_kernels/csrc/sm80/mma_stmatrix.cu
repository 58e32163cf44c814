// mma_stmatrix.cu — mma_swizzle with an stmatrix epilogue (sm_90): each warp writes its accumulators, converted
// to C's element type (fp16 or bf16), into a shared-memory C tile with stmatrix.x4 (two m16n8 tiles per instruction: the accumulator layout
// is ldmatrix's, so stmatrix inverts it), then the whole block copies the 128x256 tile out with 16-byte stores:
// full 128-byte lines per 8 threads instead of 4-byte stores scattered over 8 rows.
//
// Adds over mma_swizzle: a coalesced epilogue (STSM + STG.128 in SASS instead of 2-byte/4-byte STG). On GPUs
// before sm_90 (no stmatrix) it compiles to mma_swizzle's direct stores. Grouped block order (L2 reuse) has
// been on since mma_multistage.
// Measured: docs/design/mma.md.
#include "blocks/epilogue.cuh"
#include "blocks/fragments.cuh"
#include "hgemm.cuh"
#include "ptx/cvta.cuh"
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900  // stmatrix exists from sm_90 (its guard rejects older targets)
#include "ptx/stmatrix.cuh"
#endif
#include "sm80/mma_pipeline.cuh"

namespace mma_stmatrix {
using namespace mma_pipeline;

struct StmatrixStore {
  // Rows of BN + 8 halves: the 8 rows one stmatrix matrix covers start 16 bytes apart mod 128, in 8 bank groups.
  template <class T>
  __host__ __device__ static constexpr int ldc() { return T::BN + 8; }
  template <class T>
  __host__ __device__ static constexpr int smem_bytes() { return T::BM * ldc<T>() * 2; }

  template <class T, Acc ACC, typename E>
  __device__ __forceinline__ static void store(const tile::MmaAcc<ACC, E> (&c)[T::MI][T::NI],
                                               const GemmArgsOf<E>& p, int row0, int col0, int wm, int wn,
                                               unsigned char* smem) {
#ifdef PTX_HAS_STMATRIX
    constexpr int BM = T::BM, BN = T::BN, MI = T::MI, NI = T::NI, LDC = ldc<T>(), THREADS = T::THREADS;
    E* sC = reinterpret_cast<E*>(smem);  // (m, n), row stride LDC
    const int l = threadIdx.x % 32, q = l / 8, r = l % 8;
    auto bits = [](typename tile::Element<E>::Pair v) { return *reinterpret_cast<const uint32_t*>(&v); };
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int j = 0; j < NI; j += 2) {
        const int m0 = wm * MI * 16 + i * 16, n0 = wn * NI * 8 + j * 8;
        // matrix q: rows m0 + 8 (q % 2), columns n0 + 8 (q / 2) <- register q
        ptx::stmatrix_x4(ptx::smem_u32(sC + (m0 + 8 * (q % 2) + r) * LDC + n0 + 8 * (q / 2)), bits(c[i][j].pair(0)),
                         bits(c[i][j].pair(1)), bits(c[i][j + 1].pair(0)), bits(c[i][j + 1].pair(1)));
      }
    __syncthreads();
    tile::copy_out_tile<BM, BN, THREADS>(sC, LDC, p, row0, col0);
#else
    DirectStore::store<T>(c, p, row0, col0, wm, wn, smem);
#endif
  }
};

}  // namespace mma_stmatrix

template <typename E>
cudaError_t launch_mma_stmatrix(const GemmArgsOf<E>& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  using namespace mma_stmatrix;
  return launch<LadderTileF32, LadderTileF16, SwizzledLayouts, StmatrixStore>(p, acc, stream, info);
}

HGEMM_VARIANT_FP16_BF16(mma_stmatrix, launch_mma_stmatrix, RowMajorA);
