// mma_pipeline.cuh — the pipelined mma.sync kernel shared by the last three steps of the ladder. Each step's file
// instantiates it with what that step adds: mma_multistage.cu (plain shared-memory tiles, direct stores),
// mma_swizzle.cu (XOR-swizzled tiles), mma_stmatrix.cu (plus an stmatrix epilogue).
//
// A STAGES-deep cp.async pipeline with one barrier per K step and zero-fill at the edges, fragments
// double-buffered in registers, grouped block order; the tile shape is a template parameter (Tile below).
#pragma once
#include "hgemm.cuh"
#include "tile_io.cuh"

namespace mma_pipeline {

// Block tile BM x BN x BK, WARPS_M x WARPS_N warps (each a (BM / WARPS_M) x (BN / WARPS_N) warp tile of MI x NI
// m16n8 accumulators), a STAGES-deep pipeline; MIN_BLOCKS resident blocks per SM asked of the compiler
// (__launch_bounds__), which caps registers at 64K / (MIN_BLOCKS * THREADS).
template <int BM_, int BN_, int BK_, int WARPS_M_, int WARPS_N_, int STAGES_, int MIN_BLOCKS_ = 1>
struct Tile {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_, STAGES = STAGES_;
  static constexpr int MIN_BLOCKS = MIN_BLOCKS_;
  static constexpr int MI = BM / WARPS_M / 16, NI = BN / WARPS_N / 8;
  static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
  static constexpr int KSTEPS = BK / 16;
  static_assert(BM % (16 * WARPS_M) == 0 && BN % (16 * WARPS_N) == 0 && BK % 16 == 0, "whole m16n8k16 steps");
  static_assert(NI % 2 == 0, "B fragments come in pairs (ldmatrix.x4)");
  static_assert(KSTEPS % 2 == 0, "the two fragment buffers alternate across tiles: an even number of k-steps");
};
constexpr int GROUP_M = 8;

// The tile the ladder's pipelined steps share (mma_multistage, mma_swizzle, mma_stmatrix): 128x256x64, 2 x 4 warps
// of 64x64 (4 x 8 m16n8 accumulators: every A fragment feeds 8 MMAs, every B fragment 4), 3 stages (144 KB), one
// block per SM. Chosen by scripts/tune_mma.cu on the H100 (swizzled, stmatrix epilogue, NN, TFLOPS and ratio to
// cuBLAS in the same process), fp32 accumulation at 4096^3 / 8192^3: 128x256x64 s3 449 / 455 (0.60x / 0.60x);
// 256x128x64 s3 431 / 438; 128x256x64 s4 423 / 428; 128x128x64 2x2 warps s3 (two blocks per SM) 428 / 404;
// 128x256x32 s4 359 / 355; the earlier 128x128x32 with 2 x 4 warps of 64x32, 323 / 303.
using LadderTile = Tile<128, 256, 64, 2, 4, 3>;

template <class T, bool B_COL>
struct Smem {
  static constexpr int B_ROWS = B_COL ? T::BN : T::BK, LDB = B_COL ? T::BK : T::BN;
  static constexpr int A_STAGE = T::BM * T::BK, B_STAGE = B_ROWS * LDB;  // halves
  static constexpr int BYTES = T::STAGES * (A_STAGE + B_STAGE) * 2;
};

// The epilogue every step before mma_stmatrix uses: each lane stores its accumulators straight to global memory.
struct DirectStore {
  template <class T>
  __host__ __device__ static constexpr int smem_bytes() { return 0; }
  template <class T, Acc ACC>
  __device__ __forceinline__ static void store(const tile::MmaAcc<ACC> (&c)[T::MI][T::NI], const GemmArgs& p,
                                               int row0, int col0, int wm, int wn, unsigned char*) {
    tile::store_warp_acc(c, p, row0 + wm * T::MI * 16, col0 + wn * T::NI * 8);
  }
};

// Shared-memory layouts of the A and B tiles: plain (mma_multistage) or XOR-swizzled (mma_swizzle onwards).
// A (m, k) and column-major B (n, k) rows hold BK halves; row-major B (k, n) rows hold BN.
struct PlainLayouts {
  template <class T>
  using A = tile::Plain;
  template <class T, bool B_COL>
  using B = tile::Plain;
};
struct SwizzledLayouts {
  template <class T>
  using A = tile::Xor<T::BK / 8>;
  template <class T, bool B_COL>
  using B = tile::Xor<(B_COL ? T::BK : T::BN) / 8>;
};

template <class T, bool B_COL, class LA, class LB>
__device__ __forceinline__ void load_frags(uint32_t (&a)[T::MI][4], uint32_t (&b)[T::NI][2], const half* sA,
                                           const half* sB, int wm, int wn, int kk) {
#pragma unroll
  for (int i = 0; i < T::MI; ++i) tile::ldsm_a<LA>(a[i], sA, wm * T::MI * 16 + i * 16, kk, T::BK);
#pragma unroll
  for (int j = 0; j < T::NI; j += 2)
    tile::ldsm_b2<B_COL, LB>(b[j], b[j + 1], sB, kk, wn * T::NI * 8 + j * 8, Smem<T, B_COL>::LDB);
}

// LA, LB: layouts of the A and B tiles in shared memory (tile::Plain or tile::Xor<chunks per row>).
template <class T, Acc ACC, bool B_COL, class LA, class LB, class Epilogue>
__global__ void __launch_bounds__(T::THREADS, T::MIN_BLOCKS) kernel(GemmArgs p) {
  using S = Smem<T, B_COL>;
  constexpr int BM = T::BM, BN = T::BN, BK = T::BK, STAGES = T::STAGES, MI = T::MI, NI = T::NI;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  half* sA = reinterpret_cast<half*>(smem_raw);  // (stage, m, k)
  half* sB = sA + STAGES * S::A_STAGE;            // (stage, k, n), or (stage, n, k) when B is column-major
  const int warp = threadIdx.x / 32, wm = warp / T::WARPS_N, wn = warp % T::WARPS_N;
  int tm, tn;
  tile::grouped_tile(blockIdx.x, tile::cdiv(p.M, BM), tile::cdiv(p.N, BN), GROUP_M, tm, tn);
  const int row0 = tm * BM, col0 = tn * BN;
  const int kt_count = tile::cdiv(p.K, BK);
  tile::OperandLoads<BM, BN, BK, T::THREADS, BK, S::LDB, LA, LB, B_COL, STAGES> loads(p, row0, col0, sA, sB);
  static_assert(decltype(loads)::A_STAGE_BYTES == S::A_STAGE * 2 && decltype(loads)::B_STAGE_BYTES == S::B_STAGE * 2,
                "the loader's stages are the kernel's");
  tile::MmaAcc<ACC> c[MI][NI];
  uint32_t a[2][MI][4], b[2][NI][2];  // (buffer, fragment, register)

  // PROLOGUE: STAGES - 1 tiles in flight; wait for tile 0 and load its first k-step's fragments.
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) loads.copy_stage(p, s);
  ptx::cp_async_wait<STAGES - 2>();
  __syncthreads();
  load_frags<T, B_COL, LA, LB>(a[0], b[0], sA, sB, wm, wn, 0);

  // MAIN LOOP. Fragments are double-buffered: k-step ks's MMAs run while the next k-step's ldmatrix are in flight,
  // across tile boundaries too — the one barrier per tile sits before the last k-step's MMAs, so the next tile's
  // first fragments are loaded under them.
  for (int kt = 0; kt < kt_count; ++kt) {
    const int stage = kt % STAGES, next = (kt + 1) % STAGES;
#pragma unroll
    for (int ks = 0; ks < T::KSTEPS; ++ks) {
      if (ks == T::KSTEPS - 1) {
        ptx::cp_async_wait<STAGES - 2>();  // tile kt + 1 has landed (this thread's copies) ...
        __syncthreads();                   // ... and everyone's; every warp is done reading tile kt's stage
      }
      const bool last = ks + 1 == T::KSTEPS;
      load_frags<T, B_COL, LA, LB>(a[(ks + 1) % 2], b[(ks + 1) % 2], sA + (last ? next : stage) * S::A_STAGE,
                                   sB + (last ? next : stage) * S::B_STAGE, wm, wn, last ? 0 : (ks + 1) * 16);
      if (ks == 0) loads.copy_stage(p, kt + STAGES - 1);  // refills tile kt - 1's stage, free since the barrier
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j) c[i][j].mma(a[ks % 2][i], b[ks % 2][j]);
    }
  }

  // EPILOGUE
  ptx::cp_async_wait<0>();
  if (Epilogue::template smem_bytes<T>()) __syncthreads();  // the epilogue reuses the pipeline's shared memory
  Epilogue::template store<T>(c, p, row0, col0, wm, wn, smem_raw);
}

// Launch the tile T with shared-memory layouts L (PlainLayouts or SwizzledLayouts) and the given epilogue.
template <class T, class L, class Epilogue>
cudaError_t launch(const GemmArgs& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  if (!tile::rows_aligned16(p)) return cudaErrorMisalignedAddress;
  return tile::dispatch(acc, p.b_col_major, [&](auto acc_c, auto b_col_c) {
    constexpr Acc A = decltype(acc_c)::value;
    constexpr bool BC = decltype(b_col_c)::value;
    constexpr int pipe = Smem<T, BC>::BYTES, epi = Epilogue::template smem_bytes<T>();
    constexpr int bytes = pipe > epi ? pipe : epi;
    auto k = kernel<T, A, BC, typename L::template A<T>, typename L::template B<T, BC>, Epilogue>;
    cudaError_t err = tile::prepare_smem(k, bytes, info);
    if (err != cudaSuccess) return err;
    const dim3 block(T::THREADS), grid(tile::cdiv(p.M, T::BM) * tile::cdiv(p.N, T::BN));
    tile::fill_info(info, grid, block, bytes);
    k<<<grid, block, bytes, stream>>>(p);
    return cudaGetLastError();
  });
}

}  // namespace mma_pipeline
