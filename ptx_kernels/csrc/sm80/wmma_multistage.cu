// wmma_multistage.cu — beyond the seed: the best WMMA kernel we could make.
//
// Adds over wmma_async_dbuf: a STAGES-deep cp.async pipeline (STAGES-1 tiles in flight while one is computed,
// one barrier per tile) whose copies cost a few instructions each (tile::OperandLoads: pointers advance, edges
// are masks, no branch), large warp tiles — 64x64 (4x4 fragments) with fp32 accumulators, 64x128 (4x8) with fp16
// ones, which take half the registers — fragments loaded a k-step ahead of their MMAs (fp32: two whole buffers;
// fp16: two of A and one of B, MMAs column by column, FRAGS_A2B1), across tiles too, dynamic shared memory above
// 48 KB and grouped block rasterization so that neighbouring blocks share operand tiles in L2, and an epilogue
// that stages the block's C tile in shared memory (store_matrix_sync) and copies it out along full rows with
// 16-byte stores (tile::copy_out_tile, as mma_stmatrix does). The fragments are loaded with the PTX form of
// load_matrix_sync (ptx::wmma_load_*: the same wmma.load instruction, addressed [base + immediate]), so no
// integer instruction forms a fragment's address beyond one base per tile (see the main loop for its two shapes).
//
// Tiles chosen by measurement (a tile sweep on the H100, NN and NT, against cuBLAS in the same process; the
// sweep and its logs: docs/design/wmma.md, "Old logs"):
// - fp32: 128x256x64, 2x4 warps, 3 stages, two fragment buffers, the main loop unrolled over the stages.
// - fp16: 256x256x32, 4x2 warps of 64x128, 4 stages, FRAGS_A2B1, rolled loop; the stage copies issued after
//   column FN / 2 of a tile's first k-step.
// The alternatives the sweep timed (other tiles, stage counts, fragment buffers, per-stage mbarriers instead of
// a block barrier per tile: tile::StageBarriers), their figures and the Nsight Compute profile of the tensor pipe:
// docs/design/wmma.md.
// WMMA compiles to the same HMMA.16816 and LDSM as the mma.sync ladder; what it cannot do is choose the
// shared-memory layout wmma.load reads (rows are padded instead of swizzled) or shape the fragments' registers.
// Edges: cp.async zero-fill as in wmma_async_dbuf; needs 16-byte aligned rows.
// Measured: docs/design/wmma.md.
#include <mma.h>

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

namespace wmma_multistage {
using namespace nvcuda;

// A tile configuration: block tile BM x BN x BK, a WARPS_M x WARPS_N grid of warps, STAGES-deep pipeline,
// MIN_BLOCKS resident blocks per SM asked of the compiler (__launch_bounds__: registers <= 64K / (MIN_BLOCKS *
// THREADS)), FRAG_BUFS register buffers of operand fragments (as in mma_pipeline.cuh's Tile: 2 loads the next
// k-step's under this one's MMAs, 1 saves the registers; or FRAGS_A2B1, below), MBARRIERS: a block barrier per
// tile or per-stage mbarriers (tile::BlockSync / tile::StageBarriers), ROLLED: the main loop's shape (see the
// kernel).
//
// FRAGS_A2B1: two buffers of A fragments and one of B — 16 registers more than one buffer, where two whole
// buffers (48 more) do not fit beside 64x128 fp16 accumulators. The MMAs go column by column (B fragment j meets
// every A fragment), so B fragment j is free for the next k-step's as soon as column j is done, while the next
// k-step's A fragments are loaded, into the other buffer, before the MMAs start. No MMA then waits for an LDSM
// issued just before it, as the one-buffer loop's first MMAs do (they need the fragments its last MMAs freed).
// The next stage's copies go in the middle of a tile's first k-step, after column FN / 2: issued before the
// MMAs (as the other loops do) they kept ptxas from hoisting the B loads behind them when B is column-major
// (an MMA 5 instructions behind its LDSM; 30 now, toolchain.operand_lead), and NT ran slower than this
// (docs/design/wmma.md).
constexpr int FRAGS_A2B1 = 3;
template <int BM_, int BN_, int BK_, int WARPS_M_, int WARPS_N_, int STAGES_, int MIN_BLOCKS_ = 1, int FRAG_BUFS_ = 2,
          bool MBARRIERS_ = false, bool ROLLED_ = false>
struct Tile {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_, STAGES = STAGES_;
  static constexpr int MIN_BLOCKS = MIN_BLOCKS_, FRAG_BUFS = FRAG_BUFS_;
  static constexpr bool MBARRIERS = MBARRIERS_, ROLLED = ROLLED_;
  using Sync = tile::StageSync<MBARRIERS, STAGES, WARPS_M * WARPS_N>;
  static constexpr int FM = BM / (WARPS_M * 16), FN = BN / (WARPS_N * 16);  // fragments per warp
  static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
  static constexpr int PAD = 8;  // halves: rows skewed by 16 bytes, so ldmatrix's 8 row reads hit distinct banks
  static constexpr int LDA = BK + PAD;
  static_assert(FM * WARPS_M * 16 == BM && FN * WARPS_N * 16 == BN && BK % 16 == 0, "tiles of 16x16 fragments");
  static_assert(STAGES >= 2, "a pipeline needs two stages");
  static constexpr int KSTEPS = BK / 16;
  static_assert(FRAG_BUFS == 1 || FRAG_BUFS == 2 || FRAG_BUFS == FRAGS_A2B1, "1, 2 or FRAGS_A2B1 buffers");
  static_assert(FRAG_BUFS != FRAGS_A2B1 || ROLLED, "FRAGS_A2B1 comes with the rolled loop");
  static_assert(FRAG_BUFS == 1 || KSTEPS % 2 == 0,
                "two fragment buffers alternate across tiles: an even number of k-steps");
};

// The configurations the variant ships, one per accumulation (chosen by the sweep in
// docs/design/wmma.md, see the header).
using ShippedF32 = Tile<128, 256, 64, 2, 4, 3, 1, 2>;
using ShippedF16 = Tile<256, 256, 32, 4, 2, 4, 1, FRAGS_A2B1, false, true>;
constexpr int GROUP_M = 8;

template <class T, bool B_COL, Acc ACC>
struct Smem {
  static constexpr int B_ROWS = B_COL ? T::BN : T::BK, LDB = (B_COL ? T::BK : T::BN) + T::PAD;
  static constexpr int A_STAGE = T::BM * T::LDA, B_STAGE = B_ROWS * LDB;  // halves
  static constexpr int PIPE_BYTES = T::STAGES * (A_STAGE + B_STAGE) * 2;
  // The epilogue's C tile (accumulator type, rows skewed by 16 bytes) reuses the stages.
  static constexpr int ACC_BYTES = ACC == Acc::F32 ? 4 : 2, LDC = T::BN + 16 / ACC_BYTES;
  static constexpr int EPI_BYTES = T::BM * LDC * ACC_BYTES;
  static constexpr int BARS_AT = PIPE_BYTES > EPI_BYTES ? PIPE_BYTES : EPI_BYTES;
  static constexpr int BYTES = BARS_AT + T::Sync::BAR_BYTES;  // the stage ring's barriers (if any) last
  // Byte offsets of k-step kk of stage st inside a warp's A and B operands.
  __host__ __device__ static constexpr int a_off(int st, int kk) { return (st * A_STAGE + kk) * 2; }
  __host__ __device__ static constexpr int b_off(int st, int kk) {
    return (st * B_STAGE + (B_COL ? kk : kk * LDB)) * 2;
  }
  static_assert((A_STAGE * 2) % 128 == 0 && (B_STAGE * 2) % 128 == 0, "stages stay 128-byte aligned");
  static_assert(BARS_AT % 8 == 0, "mbarriers are 8-byte aligned");
};

template <class T, Acc ACC, bool B_COL>
__global__ void __launch_bounds__(T::THREADS, T::MIN_BLOCKS) kernel(GemmArgs p) {
  using AccT = typename std::conditional<ACC == Acc::F32, float, half>::type;
  using S = Smem<T, B_COL, ACC>;
  constexpr int BM = T::BM, BN = T::BN, BK = T::BK, FM = T::FM, FN = T::FN, LDA = T::LDA, STAGES = T::STAGES;
  constexpr int KSTEPS = T::KSTEPS;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  half* sA = reinterpret_cast<half*>(smem_raw);  // (stage, m, k)
  half* sB = sA + STAGES * S::A_STAGE;            // (stage, k, n), or (stage, n, k) when B is column-major

  const int warp = threadIdx.x / 32, wm = warp / T::WARPS_N, wn = warp % T::WARPS_N;
  int tm, tn;
  tile::grouped_tile(blockIdx.x, tile::cdiv(p.M, BM), tile::cdiv(p.N, BN), GROUP_M, tm, tn);
  const int row0 = tm * BM, col0 = tn * BN;
  const int kt_count = tile::cdiv(p.K, BK);
  tile::OperandLoads<BM, BN, BK, T::THREADS, LDA, S::LDB, tile::Plain, tile::Plain, B_COL, STAGES> loads(
      p, row0, col0, sA, sB);
  static_assert(decltype(loads)::A_STAGE_BYTES == S::A_STAGE * 2 && decltype(loads)::B_STAGE_BYTES == S::B_STAGE * 2,
                "the loader's stages are the kernel's");
  wmma::fragment<wmma::accumulator, 16, 16, 16, AccT> c[FM][FN];
  tile::fill_warp_tile(c);

  // Shared addresses of the warp's operands in stage 0; a stage and k-step add a constant (Smem::a_off, b_off).
  const uint32_t a_warp = ptx::smem_u32(sA + wm * FM * 16 * LDA);
  const uint32_t b_warp = ptx::smem_u32(sB + (B_COL ? wn * FN * 16 * S::LDB : wn * FN * 16));
  constexpr bool A2B1 = T::FRAG_BUFS == FRAGS_A2B1;
  constexpr int FB = A2B1 ? 2 : T::FRAG_BUFS;
  tile::WmmaOperands<FM, FN, B_COL> ops[FB];  // in registers: ops[1].b unused with FRAGS_A2B1

  const typename T::Sync sync(ptx::smem_u32(smem_raw + S::BARS_AT));
  constexpr int AHEAD = T::Sync::AHEAD;  // tiles copied ahead of the one computed

  // PROLOGUE: AHEAD tiles in flight; wait for tile 0 and load its first k-step's fragments.
#pragma unroll
  for (int s = 0; s < AHEAD; ++s) {
    loads.copy_stage(p, s);
    sync.filled(s);
  }
  sync.wait_filled(0);
  ops[0].template load_shared<LDA, S::LDB, 0, 0>(a_warp, b_warp);

  // MAIN LOOP: with two buffers, k-step ks's MMAs run while the next k-step's fragments load, across tile
  // boundaries too (the wait for tile kt + 1 sits before the last k-step's MMAs); with one, the next fragments
  // load after the MMAs (and after that wait at a tile's end); with FRAGS_A2B1 the next A fragments load as with
  // two buffers and B fragment j after column j's MMAs. Each fragment's address is a base register plus a
  // compile-time constant that folds into its LDSM (see ptx::wmma_load_a_row_m16n16k16), in one of two shapes:
  // ROLLED, one iteration per tile with the stage's base computed per tile (two adds) and the k-step's offset
  // constant; else unrolled over the STAGES stages of the ring too, so the stage's offset is a constant as well
  // (no adds, but a loop body STAGES times larger: 977 instructions instead of 256 for the fp16 tile).
  // With one buffer the fp16 tile measured faster per clock rolled, the fp32 tile no different
  // (docs/design/wmma.md). FRAGS_A2B1 (the shipped fp16 tile) comes with the rolled loop only.
  if constexpr (T::ROLLED) {
    for (int kt = 0; kt < kt_count; ++kt) {
      const int stage = kt % STAGES, next = (kt + 1) % STAGES;
      const uint32_t a_cur = a_warp + stage * (S::A_STAGE * 2), b_cur = b_warp + stage * (S::B_STAGE * 2);
      const uint32_t a_nxt = a_warp + next * (S::A_STAGE * 2), b_nxt = b_warp + next * (S::B_STAGE * 2);
      tile::static_for<KSTEPS>([&](auto ks_c) {
        constexpr int ks = decltype(ks_c)::value;
        constexpr bool last = ks + 1 == KSTEPS;
        constexpr int kk = last ? 0 : (ks + 1) * 16;
        constexpr int A_OFF = S::a_off(0, kk), B_OFF = S::b_off(0, kk);
        const uint32_t a_base = last ? a_nxt : a_cur, b_base = last ? b_nxt : b_cur;
        if constexpr (FB == 2) {
          if constexpr (last) sync.wait_filled(kt + 1);
          if constexpr (A2B1)
            ops[(ks + 1) % FB].template load_a_shared<LDA, A_OFF>(a_base);
          else
            ops[(ks + 1) % FB].template load_shared<LDA, S::LDB, A_OFF, B_OFF>(a_base, b_base);
        }
        auto refill = [&] {  // the stage of tile kt + AHEAD - STAGES
          sync.wait_consumed(kt + AHEAD);
          loads.copy_stage(p, kt + AHEAD);
          sync.filled(kt + AHEAD);
        };
        if constexpr (ks == 0 && !A2B1) refill();
        if constexpr (A2B1) {  // column j's MMAs, then B fragment j of the next k-step into the same registers
          tile::static_for<FN>([&](auto j_c) {
            constexpr int j = decltype(j_c)::value;
            ops[0].template mma_column<j>(c, ops[ks % FB]);
            ops[0].template load_b_shared<j, S::LDB, B_OFF>(b_base);
            if constexpr (ks == 0 && j == FN / 2) refill();  // amid the MMAs, behind the B loads before it
          });
        } else {
          ops[ks % FB].mma(c);
        }
        if constexpr (FB == 1) {
          if constexpr (last) sync.wait_filled(kt + 1);
          ops[0].template load_shared<LDA, S::LDB, A_OFF, B_OFF>(a_base, b_base);
        }
      });
      sync.consumed(kt);
    }
  } else
  for (int kt0 = 0; kt0 < kt_count; kt0 += STAGES) {
    tile::static_for<STAGES>([&](auto stage_c) {
      constexpr int stage = decltype(stage_c)::value, next = (stage + 1) % STAGES;
      const int kt = kt0 + stage;
      if (kt >= kt_count) return;
      tile::static_for<KSTEPS>([&](auto ks_c) {
        constexpr int ks = decltype(ks_c)::value;
        constexpr bool last = ks + 1 == KSTEPS;
        constexpr int st = last ? next : stage, kk = last ? 0 : (ks + 1) * 16;
        constexpr int A_OFF = S::a_off(st, kk), B_OFF = S::b_off(st, kk);
        if constexpr (FB == 2) {
          if constexpr (last) sync.wait_filled(kt + 1);  // (a block barrier: every warp is also done with tile kt)
          ops[(ks + 1) % FB].template load_shared<LDA, S::LDB, A_OFF, B_OFF>(a_warp, b_warp);
        }
        if constexpr (ks == 0) {  // refill the stage of tile kt + AHEAD - STAGES
          sync.wait_consumed(kt + AHEAD);
          loads.copy_stage(p, kt + AHEAD, (stage + AHEAD) % STAGES);
          sync.filled(kt + AHEAD);
        }
        ops[ks % FB].mma(c);
        if constexpr (FB == 1) {
          if constexpr (last) sync.wait_filled(kt + 1);
          ops[0].template load_shared<LDA, S::LDB, A_OFF, B_OFF>(a_warp, b_warp);
        }
      });
      sync.consumed(kt);
    });
  }

  // EPILOGUE: the block's C tile is staged in the pipeline's shared memory — through store_matrix_sync, as
  // fragment layouts are opaque — then copied out by the whole block along full rows with 16-byte stores (fp32
  // accumulators are converted in the copy).
  ptx::cp_async_wait<0>();
  __syncthreads();
  AccT* sC = reinterpret_cast<AccT*>(smem_raw);  // (m, n), row stride S::LDC
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j)
      wmma::store_matrix_sync(sC + (wm * FM + i) * 16 * S::LDC + (wn * FN + j) * 16, c[i][j], S::LDC,
                              wmma::mem_row_major);
  __syncthreads();
  tile::copy_out_tile<BM, BN, T::THREADS>(sC, S::LDC, p, row0, col0);
}

template <class T, Acc ACC, bool B_COL>
cudaError_t launch(const GemmArgs& p, cudaStream_t stream, LaunchInfo* info) {
  constexpr int bytes = Smem<T, B_COL, ACC>::BYTES;
  cudaError_t err = tile::prepare_smem(kernel<T, ACC, B_COL>, bytes, info);
  if (err != cudaSuccess) return err;
  const dim3 block(T::THREADS), grid(tile::cdiv(p.M, T::BM) * tile::cdiv(p.N, T::BN));
  tile::fill_info(info, grid, block, bytes, T::BM, T::BN);
  kernel<T, ACC, B_COL><<<grid, block, bytes, stream>>>(p);
  return cudaGetLastError();
}

// Tile T32 for fp32 accumulation; for fp16, T16 where it fills the GPU, else T32 (tile::dispatch_tiles).
template <class T32, class T16>
cudaError_t launch_tiles(const GemmArgs& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  if (!tile::rows_aligned16(p)) return cudaErrorMisalignedAddress;
  return tile::dispatch_tiles<T32, T16>(p, acc, [&](auto tile_c, auto acc_c, auto b_col_c) {
    return launch<typename decltype(tile_c)::type, decltype(acc_c)::value, decltype(b_col_c)::value>(p, stream,
                                                                                                      info);
  });
}

}  // namespace wmma_multistage

cudaError_t launch_wmma_multistage(const GemmArgs& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  using namespace wmma_multistage;
  return launch_tiles<ShippedF32, ShippedF16>(p, acc, stream, info);
}

HGEMM_VARIANT(wmma_multistage, launch_wmma_multistage, RowMajorA);
