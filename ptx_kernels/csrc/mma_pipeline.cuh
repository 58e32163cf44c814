// mma_pipeline.cuh — the pipelined mma.sync kernel shared by the last three steps of the ladder. Each step's file
// instantiates it with what that step adds: mma_multistage.cu (plain shared-memory tiles, direct stores),
// mma_swizzle.cu (XOR-swizzled tiles), mma_stmatrix.cu (plus an stmatrix epilogue).
//
// Block tile 128x128x32, 8 warps (2 x 4) of 64x32 (4 x 4 m16n8 accumulators), STAGES-deep cp.async pipeline with
// one barrier per K step and zero-fill at the edges, fragments double-buffered in registers, grouped block order.
#pragma once
#include "hgemm.cuh"
#include "tile_io.cuh"

namespace mma_pipeline {

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

// The epilogue every step before mma_stmatrix uses: each lane stores its accumulators straight to global memory.
struct DirectStore {
  static constexpr int SMEM_BYTES = 0;
  template <Acc ACC>
  __device__ __forceinline__ static void store(const tile::MmaAcc<ACC> (&c)[MI][NI], const GemmArgs& p, int row0,
                                               int col0, int wm, int wn, unsigned char*) {
    tile::store_warp_acc(c, p, row0 + wm * MI * 16, col0 + wn * NI * 8);
  }
};

template <bool B_COL, class LA, class LB>
__device__ __forceinline__ void load_frags(uint32_t (&a)[MI][4], uint32_t (&b)[NI][2], const half* sA,
                                           const half* sB, int wm, int wn, int kk) {
#pragma unroll
  for (int i = 0; i < MI; ++i) tile::ldsm_a<LA>(a[i], sA, wm * MI * 16 + i * 16, kk, BK);
#pragma unroll
  for (int j = 0; j < NI; j += 2)
    tile::ldsm_b2<B_COL, LB>(b[j], b[j + 1], sB, kk, wn * NI * 8 + j * 8, Smem<B_COL>::LDB);
}

// LA, LB: layouts of the A and B tiles in shared memory (tile::Plain or tile::Xor<chunks per row>).
template <Acc ACC, bool B_COL, class LA, class LB, class Epilogue>
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
      tile::cp_async_tile<BM, BK, THREADS, BK, LA>(sA + s * S::A_STAGE, p.A + row0 * p.sam + k0, p.sam,
                                                   p.M - row0, p.K - k0, p.A);
      if (B_COL)
        tile::cp_async_tile<BN, BK, THREADS, BK, LB>(sB + s * S::B_STAGE, p.B + col0 * ldb + k0, ldb,
                                                     p.N - col0, p.K - k0, p.B);
      else
        tile::cp_async_tile<BK, BN, THREADS, BN, LB>(sB + s * S::B_STAGE, p.B + k0 * ldb + col0, ldb, p.K - k0,
                                                     p.N - col0, p.B);
    }
    ptx::cp_async_commit();  // an empty group past the end keeps the wait count uniform
  };
  tile::MmaAcc<ACC> c[MI][NI];
  uint32_t a[2][MI][4], b[2][NI][2];  // (buffer, fragment, register)

  // PROLOGUE: STAGES - 1 tiles in flight
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) load_stage(s);

  // MAIN LOOP
  for (int kt = 0; kt < kt_count; ++kt) {
    ptx::cp_async_wait<STAGES - 2>();  // tile kt has landed (this thread's copies) ...
    __syncthreads();                   // ... and everyone's; tile kt - 1's stage is free
    load_stage(kt + STAGES - 1);
    const half* tA = sA + (kt % STAGES) * S::A_STAGE;
    const half* tB = sB + (kt % STAGES) * S::B_STAGE;
    load_frags<B_COL, LA, LB>(a[0], b[0], tA, tB, wm, wn, 0);
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks) {
      if (ks + 1 < KSTEPS) load_frags<B_COL, LA, LB>(a[(ks + 1) % 2], b[(ks + 1) % 2], tA, tB, wm, wn, (ks + 1) * 16);
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j) c[i][j].mma(a[ks % 2][i], b[ks % 2][j]);
    }
  }

  // EPILOGUE
  ptx::cp_async_wait<0>();
  if (Epilogue::SMEM_BYTES) __syncthreads();  // the epilogue reuses the pipeline's shared memory
  Epilogue::store(c, p, row0, col0, wm, wn, smem_raw);
}

template <bool B_COL>
using PlainB = tile::Plain;

// The swizzled layouts mma_swizzle introduces (and mma_stmatrix keeps): A (m, k) and column-major B (n, k) have
// 32-half rows = 4 chunks; row-major B (k, n) 128-half rows = 16 chunks.
using SwizzledA = tile::Xor<BK / 8>;
template <bool B_COL>
using SwizzledB = tile::Xor<(B_COL ? BK : BN) / 8>;

// LB<B_COL>: the B tile's layout for each B storage order.
template <class LA, template <bool> class LB, class Epilogue>
cudaError_t launch(const GemmArgs& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  if (!tile::rows_aligned16(p)) return cudaErrorMisalignedAddress;
  return tile::dispatch(acc, p.b_col_major, [&](auto acc_c, auto b_col_c) {
    constexpr Acc A = decltype(acc_c)::value;
    constexpr bool BC = decltype(b_col_c)::value;
    constexpr int bytes = Smem<BC>::BYTES > Epilogue::SMEM_BYTES ? Smem<BC>::BYTES : Epilogue::SMEM_BYTES;
    auto k = kernel<A, BC, LA, LB<BC>, Epilogue>;
    cudaError_t err = tile::prepare_smem(k, bytes, info);
    if (err != cudaSuccess) return err;
    const dim3 block(THREADS), grid(tile::cdiv(p.M, BM) * tile::cdiv(p.N, BN));
    tile::fill_info(info, grid, block, bytes);
    k<<<grid, block, bytes, stream>>>(p);
    return cudaGetLastError();
  });
}

}  // namespace mma_pipeline
