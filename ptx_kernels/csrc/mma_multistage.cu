// mma_multistage.cu — mma_tiled's tiles fed by a STAGES-deep cp.async pipeline: STAGES-1 tiles in flight while
// one is computed, one barrier per K step, zero-fill at the edges (src-size operand). Fragments are
// double-buffered in registers: the ldmatrix for k-step kk+16 is issued before the MMAs of k-step kk.
//
// Adds over mma_tiled: overlap of global loads with tensor-core work, and of shared-memory loads with MMAs.
// Shared memory stays unpadded (mma_swizzle removes the conflicts). Needs 16-byte aligned rows (cp.async).
#include "hgemm.cuh"
#include "tile_io.cuh"

namespace mma_multistage {

constexpr int BM = 128, BN = 128, BK = 32, STAGES = 4;
constexpr int WARPS_M = 2, WARPS_N = 4;
constexpr int MI = BM / WARPS_M / 16, NI = BN / WARPS_N / 8;
constexpr int THREADS = 32 * WARPS_M * WARPS_N;
constexpr int GROUP_M = 8;
constexpr int KSTEPS = BK / 16;

template <bool B_COL>
struct Smem {
  static constexpr int B_ROWS = B_COL ? BN : BK, LDB = B_COL ? BK : BN;
  static constexpr int A_STAGE = BM * BK, B_STAGE = B_ROWS * LDB;  // halves
  static constexpr int BYTES = STAGES * (A_STAGE + B_STAGE) * 2;
};

template <bool B_COL>
__device__ __forceinline__ void load_frags(uint32_t (&a)[MI][4], uint32_t (&b)[NI][2], const half* sA,
                                           const half* sB, int wm, int wn, int kk) {
  constexpr int LDB = Smem<B_COL>::LDB;
#pragma unroll
  for (int i = 0; i < MI; ++i) tile::ldsm_a(a[i], sA + (wm * MI * 16 + i * 16) * BK + kk, BK);
#pragma unroll
  for (int j = 0; j < NI; j += 2) {
    const int n = wn * NI * 8 + j * 8;
    tile::ldsm_b2<B_COL>(b[j], b[j + 1], B_COL ? sB + n * LDB + kk : sB + kk * LDB + n, LDB);
  }
}

template <Acc ACC, bool B_COL>
__global__ void __launch_bounds__(THREADS, 1) kernel(GemmArgs p) {
  using S = Smem<B_COL>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  half* sA = reinterpret_cast<half*>(smem_raw);  // (stage, m, k)
  half* sB = sA + STAGES * S::A_STAGE;            // (stage, k, n), or (stage, n, k) when B is column-major
  const int warp = threadIdx.x / 32, wm = warp / WARPS_N, wn = warp % WARPS_N;
  int tm, tn;
  tile::grouped_tile(blockIdx.x, tile::cdiv(p.M, BM), tile::cdiv(p.N, BN), GROUP_M, tm, tn);
  const int row0 = tm * BM, col0 = tn * BN;
  const int64_t ldb = B_COL ? p.sbn : p.sbk;
  const int kt_count = tile::cdiv(p.K, BK);
  auto load_stage = [&](int kt) {
    const int k0 = kt * BK, s = kt % STAGES;
    if (kt < kt_count) {
      tile::cp_async_tile<BM, BK, THREADS, BK>(sA + s * S::A_STAGE, p.A + row0 * p.sam + k0, p.sam, p.M - row0,
                                               p.K - k0, p.A);
      if (B_COL)
        tile::cp_async_tile<BN, BK, THREADS, BK>(sB + s * S::B_STAGE, p.B + col0 * ldb + k0, ldb, p.N - col0,
                                                 p.K - k0, p.B);
      else
        tile::cp_async_tile<BK, BN, THREADS, BN>(sB + s * S::B_STAGE, p.B + k0 * ldb + col0, ldb, p.K - k0,
                                                 p.N - col0, p.B);
    }
    ptx::cp_async_commit();
  };
  tile::MmaAcc<ACC> c[MI][NI];
  uint32_t a[2][MI][4], b[2][NI][2];  // (buffer, fragment, register)

  // PROLOGUE
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) load_stage(s);

  // MAIN LOOP
  for (int kt = 0; kt < kt_count; ++kt) {
    ptx::cp_async_wait<STAGES - 2>();
    __syncthreads();
    load_stage(kt + STAGES - 1);
    const half* tA = sA + (kt % STAGES) * S::A_STAGE;
    const half* tB = sB + (kt % STAGES) * S::B_STAGE;
    load_frags<B_COL>(a[0], b[0], tA, tB, wm, wn, 0);
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks) {
      if (ks + 1 < KSTEPS) load_frags<B_COL>(a[(ks + 1) % 2], b[(ks + 1) % 2], tA, tB, wm, wn, (ks + 1) * 16);
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j) c[i][j].mma(a[ks % 2][i], b[ks % 2][j]);
    }
  }
  ptx::cp_async_wait<0>();

  // EPILOGUE
  const bool pairs = tile::c_pairs_aligned(p);
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j)
      tile::store_acc(c[i][j], p, row0 + wm * MI * 16 + i * 16, col0 + wn * NI * 8 + j * 8, pairs);
}

}  // namespace mma_multistage

cudaError_t launch_mma_multistage(const GemmArgs& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  using namespace mma_multistage;
  if (!tile::rows_aligned16(p)) return cudaErrorMisalignedAddress;
  return tile::dispatch(acc, p.b_col_major, [&](auto acc_c, auto b_col_c) {
    constexpr Acc A = decltype(acc_c)::value;
    constexpr bool BC = decltype(b_col_c)::value;
    constexpr int bytes = Smem<BC>::BYTES;
    cudaError_t err = tile::prepare_smem(kernel<A, BC>, bytes, info);
    if (err != cudaSuccess) return err;
    const dim3 block(THREADS), grid(tile::cdiv(p.M, BM) * tile::cdiv(p.N, BN));
    tile::fill_info(info, grid, block, bytes);
    kernel<A, BC><<<grid, block, bytes, stream>>>(p);
    return cudaGetLastError();
  });
}
