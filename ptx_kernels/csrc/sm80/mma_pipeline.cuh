// mma_pipeline.cuh — the pipelined mma.sync kernel shared by the last three steps of the ladder. Each step's file
// instantiates it with what that step adds: mma_multistage.cu (plain shared-memory tiles, direct stores),
// mma_swizzle.cu (XOR-swizzled tiles), mma_stmatrix.cu (plus an stmatrix epilogue).
//
// A STAGES-deep cp.async pipeline with one barrier per K step and zero-fill at the edges, fragments
// double-buffered in registers, grouped block order; the tile shape is a template parameter (Tile below), and so is
// the element type E of A, B and C: half, or __nv_bfloat16 (mma.sync .bf16 with fp32 accumulation: the fp32 tile;
// ldmatrix, stmatrix and cp.async move the same 16-bit elements).
#pragma once
#include "blocks/common.cuh"
#include "blocks/copy.cuh"
#include "blocks/epilogue.cuh"
#include "blocks/fragments.cuh"
#include "blocks/stage_sync.cuh"
#include "blocks/swizzle.cuh"
#include "hgemm.cuh"
#include "host/launch.h"
#include "ptx/cp_async.cuh"
#include "ptx/cvta.cuh"

namespace mma_pipeline {

// Block tile BM x BN x BK, WARPS_M x WARPS_N warps (each a (BM / WARPS_M) x (BN / WARPS_N) warp tile of MI x NI
// m16n8 accumulators), a STAGES-deep pipeline; MIN_BLOCKS resident blocks per SM asked of the compiler
// (__launch_bounds__), which caps registers at 64K / (MIN_BLOCKS * THREADS); FRAG_BUFS register buffers of
// operand fragments: 2 loads the next k-step's fragments while this one's MMAs run, 1 leaves that overlap to the
// compiler and saves the registers (for warp tiles whose accumulators leave no room for a second buffer);
// MBARRIERS: how the stage ring is kept safe (blocks/stage_sync.cuh): false, a block barrier per tile (tile::BlockSync);
// true, per-stage mbarriers and no block barrier in the main loop (tile::StageBarriers).
template <int BM_, int BN_, int BK_, int WARPS_M_, int WARPS_N_, int STAGES_, int MIN_BLOCKS_ = 1, int FRAG_BUFS_ = 2,
          bool MBARRIERS_ = false>
struct Tile {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_, STAGES = STAGES_;
  static constexpr int MIN_BLOCKS = MIN_BLOCKS_, FRAG_BUFS = FRAG_BUFS_;
  static constexpr bool MBARRIERS = MBARRIERS_;
  static constexpr int MI = BM / WARPS_M / 16, NI = BN / WARPS_N / 8;
  static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
  using Sync = tile::StageSync<MBARRIERS, STAGES, WARPS_M * WARPS_N>;
  static constexpr int KSTEPS = BK / 16;
  static_assert(BM % (16 * WARPS_M) == 0 && BN % (16 * WARPS_N) == 0 && BK % 16 == 0, "whole m16n8k16 steps");
  static_assert(NI % 2 == 0, "B fragments come in pairs (ldmatrix.x4)");
  static_assert(FRAG_BUFS == 1 || FRAG_BUFS == 2, "one or two fragment buffers");
  static_assert(FRAG_BUFS == 1 || KSTEPS % 2 == 0,
                "two fragment buffers alternate across tiles: an even number of k-steps");
};
constexpr int GROUP_M = 8;

// The tiles the ladder's pipelined steps share (mma_multistage, mma_swizzle, mma_stmatrix), one per accumulation,
// chosen by a tile sweep on the H100 (swizzled, stmatrix epilogue, against cuBLAS in the same process; the sweep
// and its logs: docs/design/mma.md, "Old logs"):
// - fp32: 128x256x64, 2 x 4 warps of 64x64 (4 x 8 m16n8 accumulators, 128 registers: every A fragment feeds 8
//   MMAs, every B fragment 4), 3 stages (144 KB), fragments double-buffered, one block per SM.
// - fp16: 256x256x32, 4 x 2 warps of 64x128 (4 x 16 m16n8 accumulators in 128 registers — half of fp32's per
//   element, so the warp tile doubles and each k16-step reads 12 ldmatrix.x4 for 64 MMAs instead of 8 for 32),
//   4 stages (128 KB), one fragment buffer (two do not fit in 255 registers).
// The alternatives the sweep timed (other warp and block tiles, one fragment buffer, per-stage mbarriers instead
// of the block barrier: Tile<..., MBARRIERS = true>, tile::StageBarriers; a main loop unrolled over the stages),
// their figures and the Nsight Compute profile of the tensor pipe: docs/design/mma.md.
using LadderTileF32 = Tile<128, 256, 64, 2, 4, 3>;
using LadderTileF16 = Tile<256, 256, 32, 4, 2, 4, 1, 1>;

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
  template <class T, Acc ACC, typename E>
  __device__ __forceinline__ static void store(const tile::MmaAcc<ACC, E> (&c)[T::MI][T::NI],
                                               const GemmArgsOf<E>& p, int row0, int col0, int wm, int wn,
                                               unsigned char*) {
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

template <class T, bool B_COL, class LA, class LB, typename E>
__device__ __forceinline__ void load_frags(uint32_t (&a)[T::MI][4], uint32_t (&b)[T::NI][2], const E* sA,
                                           const E* sB, int wm, int wn, int kk) {
#pragma unroll
  for (int i = 0; i < T::MI; ++i) tile::ldsm_a<LA>(a[i], sA, wm * T::MI * 16 + i * 16, kk, T::BK);
#pragma unroll
  for (int j = 0; j < T::NI; j += 2)
    tile::ldsm_b2<B_COL, LB>(b[j], b[j + 1], sB, kk, wn * T::NI * 8 + j * 8, Smem<T, B_COL>::LDB);
}

// Shared memory of a launch: the pipeline's stages (or the epilogue's staging, which reuses them, if larger),
// then the stage ring's barriers (T::Sync::BAR_BYTES, none for a block barrier).
template <class T, bool B_COL, class Epilogue>
struct LaunchSmem {
  static constexpr int PIPE = Smem<T, B_COL>::BYTES, EPI = Epilogue::template smem_bytes<T>();
  static constexpr int BARS_AT = ((PIPE > EPI ? PIPE : EPI) + 7) / 8 * 8;
  static constexpr int BYTES = BARS_AT + T::Sync::BAR_BYTES;
};

// E: the element type (half or __nv_bfloat16; bf16 with Acc::F32 only). LA, LB: layouts of the A and B tiles in
// shared memory (tile::Plain or tile::Xor<chunks per row>).
template <typename E, class T, Acc ACC, bool B_COL, class LA, class LB, class Epilogue>
__global__ void __launch_bounds__(T::THREADS, T::MIN_BLOCKS) kernel(GemmArgsOf<E> p) {
  using S = Smem<T, B_COL>;
  constexpr int BM = T::BM, BN = T::BN, BK = T::BK, STAGES = T::STAGES, MI = T::MI, NI = T::NI;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  E* sA = reinterpret_cast<E*>(smem_raw);  // (stage, m, k)
  E* sB = sA + STAGES * S::A_STAGE;         // (stage, k, n), or (stage, n, k) when B is column-major
  const int warp = threadIdx.x / 32, wm = warp / T::WARPS_N, wn = warp % T::WARPS_N;
  int tm, tn;
  tile::grouped_tile(blockIdx.x, tile::cdiv(p.M, BM), tile::cdiv(p.N, BN), GROUP_M, tm, tn);
  const int row0 = tm * BM, col0 = tn * BN;
  const int kt_count = tile::cdiv(p.K, BK);
  tile::OperandLoads<BM, BN, BK, T::THREADS, BK, S::LDB, LA, LB, B_COL, STAGES, E> loads(p, row0, col0, sA, sB);
  static_assert(decltype(loads)::A_STAGE_BYTES == S::A_STAGE * 2 && decltype(loads)::B_STAGE_BYTES == S::B_STAGE * 2,
                "the loader's stages are the kernel's");
  const typename T::Sync sync(ptx::smem_u32(smem_raw + LaunchSmem<T, B_COL, Epilogue>::BARS_AT));
  constexpr int AHEAD = T::Sync::AHEAD;  // tiles copied ahead of the one computed
  tile::MmaAcc<ACC, E> c[MI][NI];
  constexpr int FB = T::FRAG_BUFS;
  uint32_t a[FB][MI][4], b[FB][NI][2];  // (buffer, fragment, register)

  // PROLOGUE: AHEAD tiles in flight; wait for tile 0 and load its first k-step's fragments.
#pragma unroll
  for (int s = 0; s < AHEAD; ++s) {
    loads.copy_stage(p, s);
    sync.filled(s);
  }
  sync.wait_filled(0);
  load_frags<T, B_COL, LA, LB>(a[0], b[0], sA, sB, wm, wn, 0);

  // MAIN LOOP. With two fragment buffers, k-step ks's MMAs run while the next k-step's ldmatrix are in flight,
  // across tile boundaries too — the wait for tile kt + 1 sits before the last k-step's MMAs, so the next tile's
  // first fragments are loaded under them. With one buffer the next fragments are loaded after the MMAs (and
  // after that wait at a tile's end): the compiler overlaps what its free registers allow.
  for (int kt = 0; kt < kt_count; ++kt) {
    const int stage = kt % STAGES, next = (kt + 1) % STAGES;
#pragma unroll
    for (int ks = 0; ks < T::KSTEPS; ++ks) {
      const bool last = ks + 1 == T::KSTEPS;
      const E* nA = sA + (last ? next : stage) * S::A_STAGE;
      const E* nB = sB + (last ? next : stage) * S::B_STAGE;
      const int nk = last ? 0 : (ks + 1) * 16;
      if (FB == 2) {
        if (last) sync.wait_filled(kt + 1);  // (a block barrier: every warp is also done reading tile kt)
        load_frags<T, B_COL, LA, LB>(a[(ks + 1) % FB], b[(ks + 1) % FB], nA, nB, wm, wn, nk);
      }
      if (ks == 0) {  // refill the stage of tile kt + AHEAD - STAGES
        sync.wait_consumed(kt + AHEAD);
        loads.copy_stage(p, kt + AHEAD);
        sync.filled(kt + AHEAD);
      }
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j) c[i][j].mma(a[ks % FB][i], b[ks % FB][j]);
      if (FB == 1) {
        if (last) sync.wait_filled(kt + 1);
        load_frags<T, B_COL, LA, LB>(a[0], b[0], nA, nB, wm, wn, nk);
      }
    }
    sync.consumed(kt);
  }

  // EPILOGUE
  ptx::cp_async_wait<0>();
  if (Epilogue::template smem_bytes<T>()) __syncthreads();  // the epilogue reuses the pipeline's shared memory
  Epilogue::template store<T>(c, p, row0, col0, wm, wn, smem_raw);
}

// Launch tile T with accumulation A, B layout BC, shared-memory layouts L and the given epilogue, on p's element
// type E.
template <class T, Acc A, bool BC, class L, class Epilogue, typename E>
cudaError_t launch_tile(const GemmArgsOf<E>& p, cudaStream_t stream, LaunchInfo* info) {
  constexpr int bytes = LaunchSmem<T, BC, Epilogue>::BYTES;
  auto k = kernel<E, T, A, BC, typename L::template A<T>, typename L::template B<T, BC>, Epilogue>;
  cudaError_t err = tile::prepare_smem(k, bytes, info);
  if (err != cudaSuccess) return err;
  const dim3 block(T::THREADS), grid(tile::cdiv(p.M, T::BM) * tile::cdiv(p.N, T::BN));
  tile::fill_info(info, grid, block, bytes, T::BM, T::BN);
  k<<<grid, block, bytes, stream>>>(p);
  return cudaGetLastError();
}

// Launch with shared-memory layouts L (PlainLayouts or SwizzledLayouts) and the given epilogue: tile T32 for fp32
// accumulation; for fp16, T16 where it fills the GPU, else T32 (tile::dispatch_tiles). bf16 operands: T32 with fp32
// accumulation, the only instantiations made for them.
template <class T32, class T16, class L, class Epilogue, typename E>
cudaError_t launch(const GemmArgsOf<E>& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  if (!tile::rows_aligned16(p)) return cudaErrorMisalignedAddress;
  return tile::dispatch_tiles<T32, T16>(p, acc, [&](auto tile_c, auto acc_c, auto b_col_c) {
    using T = typename decltype(tile_c)::type;
    return launch_tile<T, decltype(acc_c)::value, decltype(b_col_c)::value, L, Epilogue>(p, stream, info);
  });
}

}  // namespace mma_pipeline
