// mma_sp.cu — the mma.sync ladder's pipeline with A 2:4 sparse: mma.sp::ordered_metadata.m16n8k32 does a dense
// m16n8k32 step's work from half of A (the two kept elements of every 4-wide chunk along K) and a metadata word
// that says where each kept element sits. Same machinery as mma_pipeline.cuh: cp.async stages with zero-fill at the
// edges, XOR-swizzled shared memory, ldmatrix fragments, one block barrier per tile, grouped block order.
//
// Adds over the dense ladder: a k32 step reads a 16 x 16 compressed A fragment (one ldmatrix.x4, the dense k16
// layout over the compressed tile), a 32 x 8 B fragment (two k16 fragments, loaded in the instruction's register
// order by one ldmatrix.x4 over the tile's four k chunks, tile::ldsm_b_k32: an ldmatrix per k16 pair of tiles puts
// them in another order, which the compiler fixes with register moves) and one 32-bit metadata word per lane from a
// third per-stage buffer, copied with cp.async beside A and B. The metadata arrives in global memory already in the
// lanes' order (ptx_kernels/sparse.py), so a lane's word is one 4-byte shared load: lanes 4g and 4g + 1 read words
// 2g and 2g + 1 of the fragment's 16 (selector 0; lanes 4g + 2 and 4g + 3 read the same two, which the instruction
// ignores).
//
// Tiles (SpTile): 128 x 256 x 64 (dense K per stage), 2 x 4 warps of 64 x 64 (4 x 8 m16n8 accumulators), 4 stages:
// the dense ladder's fp32 tile, with one more stage: a stage is smaller (A is half as wide) and a sparse k-step
// finishes twice the work of a dense one, so more copies must be in flight. fp16 accumulation also has 256 x 256,
// 4 x 2 warps of 64 x 128, where it fills the GPU (tile::dispatch_tiles; 200 KB, so sm_90 only).
// Fragments are loaded one step ahead of the MMAs that read them, at a finer grain than the dense ladder's two full
// buffers (which, at A 16 + B 32 + metadata 4 registers a buffer beside 128 fp32 accumulators, do not fit): B one
// pair of n8 tiles ahead (2 x 8 registers), A and the metadata one k32 step ahead (2 x 20), no spills. With the
// whole step's fragments loaded after its MMAs the warps waited on their own ldmatrix (the profiles:
// docs/design/sparse.md).
// K: the values and metadata are padded to Kp = K rounded up to 32 by compress. Where no metadata exists (a
// stage's second k32 step past Kp, row blocks past M) the copy reads kValidChunk instead of zero-filling (a zero
// nibble is no valid index pair), so those steps' MMAs multiply zeros (A and B zero-fill there) and the main loop
// needs no branch around them: with one, each pair's MMAs sat in their own basic block and ptxas could not spread
// the stage copies' address arithmetic among them. Rows past M read zeros and are not stored.
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
#include "ptx/mma_sparse.cuh"

namespace mma_sp {

constexpr int BK = 64, GROUP_M = 8;
constexpr int BKC = BK / 2;      // compressed A halves per row of a stage
constexpr int KSTEPS = BK / 32;  // mma.sp k32 steps per stage
using LA = tile::Xor<BKC / 8>;
// Positions (0, 1) in every chunk: the metadata copied where none exists (ptx_kernels/sparse.py VALID_WORD).
__device__ __align__(16) const uint32_t kValidChunk[4] = {0x44444444u, 0x44444444u, 0x44444444u, 0x44444444u};

// Block tile BM x BN x BK (dense K), WARPS_M x WARPS_N warps of (BM / WARPS_M) x (BN / WARPS_N), STAGES stages.
// COPY_AT: where in a tile's first k32 step the copies of a later tile are issued: -1 before its MMAs, q >= 0 after
// the MMAs of its pair of n8 tiles q. Only the SASS schedule changes: ptxas keeps the copies' address arithmetic
// near that point and interleaves it with the MMAs around it. Chosen per tile by measurement (docs/design/sparse.md).
template <int BM_, int BN_, int WARPS_M_, int WARPS_N_, int STAGES_, int COPY_AT_>
struct SpTile {
  static constexpr int BM = BM_, BN = BN_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_, STAGES = STAGES_;
  static constexpr int COPY_AT = COPY_AT_;
  static constexpr int THREADS = 32 * WARPS_M * WARPS_N, MI = BM / WARPS_M / 16, NI = BN / WARPS_N / 8;
  static constexpr int E_WORDS = KSTEPS * (BM / 16) * 16;  // metadata words per stage: (k32 step, 16-row block, word)
  static_assert(NI % 2 == 0, "B fragments are loaded by pairs of n8 tiles");
  static_assert(COPY_AT >= -1 && COPY_AT < NI / 2, "copies before the first pair or after one of the pairs");
  static_assert(E_WORDS * 4 / 16 <= THREADS, "one 16-byte metadata chunk per thread at most");
  using Sync = tile::BlockSync<STAGES, WARPS_M * WARPS_N>;
};
// fp32 accumulation: 128 x 256, 2 x 4 warps of 64 x 64 (128 fp32 accumulator registers). fp16 accumulation, where it
// fills the GPU (tile::dispatch_tiles): 256 x 256, 4 x 2 warps of 64 x 128 (the same 128 registers hold twice the
// outputs), so each B fragment feeds 4 MMAs per A fragment's 16 instead of 8 (the dense ladder's fp16 tile did 8%
// better than its fp32 one on the same instruction, docs/design/mma.md). 4 stages: 164 KB and 200 KB. The copies go
// before the first pair's MMAs in the 128 x 256 tile and after pair 6 of 8 in the 256 x 256 one (both spill-free).
using TileF32 = SpTile<128, 256, 2, 4, 4, -1>;
using TileF16 = SpTile<256, 256, 4, 2, 4, 6>;

template <class T, bool B_COL>
struct Smem {
  static constexpr int LDB = B_COL ? BK : T::BN;
  static constexpr int A_STAGE = T::BM * BKC, B_STAGE = (B_COL ? T::BN : BK) * LDB;  // halves
  static constexpr int E_STAGE = T::E_WORDS * 4;                                      // bytes
  static constexpr int BYTES = T::STAGES * ((A_STAGE + B_STAGE) * 2 + E_STAGE);
};
template <class T, bool B_COL>
using LB = tile::Xor<Smem<T, B_COL>::LDB / 8>;

// Copies of one stage: compressed A (BM x BKC), B (as the dense pipeline: (n, k) or (k, n)) with the dense
// pipeline's loader, and the stage's metadata: KSTEPS rows of BM / 16 blocks x 64 bytes, each row contiguous in
// global memory (K block kb's words of row blocks row0 / 16 ..), one 16-byte cp.async per thread.
template <class T, bool B_COL>
struct SparseLoads {
  using S = Smem<T, B_COL>;
  static constexpr int BM = T::BM, BN = T::BN, THREADS = T::THREADS, STAGES = T::STAGES, E_WORDS = T::E_WORDS;
  using LoadB = typename std::conditional<B_COL, tile::CpAsyncLoader<BN, BK, THREADS, S::LDB, LB<T, B_COL>, false>,
                                          tile::CpAsyncLoader<BK, BN, THREADS, S::LDB, LB<T, B_COL>, true>>::type;
  tile::CpAsyncLoader<BM, BKC, THREADS, BKC, LA, false> a;
  LoadB b;
  uint32_t sA, sB, sE;  // shared addresses of stage 0
  const uint32_t* e;    // this thread's metadata chunk in the next tile's K blocks (when it copies one)
  bool e_row_ok;        // its 16-row blocks lie inside the metadata's rows

  __device__ __forceinline__ SparseLoads(const GemmArgs& p, int row0, int col0, unsigned char* smem)
      : a(p.A + row0 * p.sam, p.sam, p.M - row0),
        b(B_COL ? p.B + col0 * p.sbn : p.B + col0, B_COL ? p.sbn : p.sbk, p.N - col0) {
    sA = ptx::smem_u32(smem);
    sB = sA + STAGES * S::A_STAGE * 2;
    sE = sB + STAGES * S::B_STAGE * 2;
    const int mblocks = tile::cdiv(p.M, 16);
    const int t = threadIdx.x, row = t / (BM / 4), word = (t % (BM / 4)) * 4;  // (k32 step, word of the row)
    e = p.E + row * e_kstride(p) + (row0 / 16) * 16 + word;
    e_row_ok = row0 / 16 + word / 16 < mblocks;
  }

  // Words between K blocks of the metadata, ceil(M / 16) * 16 (worked out from the kernel parameters where needed
  // rather than kept in registers).
  __device__ __forceinline__ static int64_t e_kstride(const GemmArgs& p) {
    return int64_t(tile::cdiv(p.M, 16)) * 16;
  }

  // Tile kt into stage s: A and B zero-filled past their edges, metadata past Kp and past the row blocks read from
  // kValidChunk.
  __device__ __forceinline__ void copy_stage(const GemmArgs& p, int kt) {
    const int s = kt % STAGES, kp = tile::cdiv(p.K, 32) * 32;
    a.copy_next(sA + s * S::A_STAGE * 2, p.sam, kp / 2 - kt * BKC, BKC);
    if (B_COL) b.copy_next(sB + s * S::B_STAGE * 2, p.sbn, p.K - kt * BK, BK);
    else b.copy_next(sB + s * S::B_STAGE * 2, p.sbk, p.K - kt * BK, BK * p.sbk);
    if (threadIdx.x < E_WORDS / 4) {
      const int kb = kt * KSTEPS + int(threadIdx.x) / (BM / 4);
      const bool inside = e_row_ok && kb * 32 < kp;
      ptx::cp_async_16B(sE + s * S::E_STAGE + threadIdx.x * 16, inside ? e : kValidChunk);
      e += KSTEPS * e_kstride(p);
    }
    ptx::cp_async_commit();
  }
};

template <Acc ACC>
__device__ __forceinline__ void mma_sp(tile::MmaAcc<ACC>& c, const uint32_t (&a)[4], const uint32_t (&b)[4],
                                       uint32_t e) {
  if constexpr (ACC == Acc::F32) ptx::mma_sp_m16n8k32_f32<0>(c.v, a, b, c.v, e);
  else ptx::mma_sp_m16n8k32_f16<0>(c.v, a, b, c.v, e);
}

template <class T, Acc ACC, bool B_COL>
__global__ void __launch_bounds__(T::THREADS, 1) kernel(GemmArgs p) {
  using S = Smem<T, B_COL>;
  using Sync = typename T::Sync;
  constexpr int BM = T::BM, BN = T::BN, WARPS_N = T::WARPS_N, STAGES = T::STAGES, MI = T::MI, NI = T::NI;
  constexpr int E_WORDS = T::E_WORDS;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const half* sA = reinterpret_cast<const half*>(smem_raw);  // (stage, m, compressed k)
  const half* sB = sA + STAGES * S::A_STAGE;                  // (stage, k, n), or (stage, n, k) when B is column-major
  const uint32_t* sE = reinterpret_cast<const uint32_t*>(sB + STAGES * S::B_STAGE);  // (stage, k32, m16 block, word)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, wm = warp / WARPS_N, wn = warp % WARPS_N;
  int tm, tn;
  tile::grouped_tile(blockIdx.x, tile::cdiv(p.M, BM), tile::cdiv(p.N, BN), GROUP_M, tm, tn);
  const int row0 = tm * BM, col0 = tn * BN;
  const int kp = tile::cdiv(p.K, 32) * 32, kt_count = tile::cdiv(kp, BK);
  SparseLoads<T, B_COL> loads(p, row0, col0, smem_raw);
  const Sync sync(0);
  constexpr int AHEAD = Sync::AHEAD;
  const int e_lane = 2 * (lane / 4) + lane % 2;  // the metadata word this lane passes (ptx_kernels/sparse.py)
  tile::MmaAcc<ACC> c[MI][NI];

  // Fragment buffers, loaded one step ahead of the MMAs that read them: A and metadata per k32 step (this step's and
  // the next's), B per pair of n8 tiles (this pair's and the next's: (buffer, tile of the pair, register)).
  constexpr int NP = NI / 2;  // pairs of n8 tiles a warp covers
  uint32_t a[2][MI][4], e[2][MI], b[2][2][4];
  auto load_ae = [&](uint32_t (&af)[MI][4], uint32_t (&ef)[MI], const half* tA, const uint32_t* tE, int ks) {
#pragma unroll
    for (int i = 0; i < MI; ++i) {
      tile::ldsm_a<LA>(af[i], tA, wm * MI * 16 + i * 16, ks * 16, BKC);
      ef[i] = tE[(ks * (BM / 16) + wm * MI + i) * 16 + e_lane];
    }
  };
  auto load_b = [&](uint32_t (&bf)[2][4], const half* tB, int ks, int q) {
#pragma unroll
    for (int jj = 0; jj < 2; ++jj)
      tile::ldsm_b_k32<B_COL, LB<T, B_COL>>(bf[jj], tB, ks * 32, wn * NI * 8 + (2 * q + jj) * 8, S::LDB);
  };

  // PROLOGUE: AHEAD tiles in flight; wait for tile 0 and load its first step's A, metadata and first B pair.
#pragma unroll
  for (int s = 0; s < AHEAD; ++s) loads.copy_stage(p, s);
  sync.wait_filled(0);
  load_ae(a[0], e[0], sA, sE, 0);
  load_b(b[0], sB, 0, 0);

  // MAIN LOOP: a k32 step runs its MMAs pair of n8 tiles by pair; before each pair's MMAs the next pair's B
  // fragments are loaded, and before the last pair's the next step's A, metadata and first B pair (across the tile
  // boundary too: the wait for tile kt + 1, a block barrier, sits before the last step's last pair). The refill of
  // the stage read last tile is issued at the first step (that barrier ended its reads).
  for (int kt = 0; kt < kt_count; ++kt) {
    const int stage = kt % STAGES, next = (kt + 1) % STAGES;
    const half* tA = sA + stage * S::A_STAGE;
    const half* tB = sB + stage * S::B_STAGE;
    const uint32_t* tE = sE + stage * E_WORDS;
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks) {
      const int cur = ks % 2;  // KSTEPS is even: step ks of every tile uses A / metadata buffer ks % 2
      if (ks == 0 && T::COPY_AT < 0) {
        sync.wait_consumed(kt + AHEAD);
        loads.copy_stage(p, kt + AHEAD);
        sync.filled(kt + AHEAD);
      }
#pragma unroll
      for (int q = 0; q < NP; ++q) {
        if (q + 1 < NP) {
          load_b(b[(q + 1) % 2], tB, ks, q + 1);
        } else if (ks + 1 < KSTEPS) {
          load_ae(a[cur ^ 1], e[cur ^ 1], tA, tE, ks + 1);
          load_b(b[0], tB, ks + 1, 0);
        } else {
          sync.wait_filled(kt + 1);  // (a block barrier: every warp is also done reading tile kt)
          load_ae(a[cur ^ 1], e[cur ^ 1], sA + next * S::A_STAGE, sE + next * E_WORDS, 0);
          load_b(b[0], sB + next * S::B_STAGE, 0, 0);
        }
#pragma unroll
        for (int i = 0; i < MI; ++i)
#pragma unroll
          for (int jj = 0; jj < 2; ++jj) mma_sp(c[i][2 * q + jj], a[cur][i], b[q % 2][jj], e[cur][i]);
        if (ks == 0 && q == T::COPY_AT) {
          sync.wait_consumed(kt + AHEAD);
          loads.copy_stage(p, kt + AHEAD);
          sync.filled(kt + AHEAD);
        }
      }
    }
    sync.consumed(kt);
  }

  // EPILOGUE: accumulators straight to C, masked to M x N.
  ptx::cp_async_wait<0>();
  tile::store_warp_acc(c, p, row0 + wm * MI * 16, col0 + wn * NI * 8);
}

template <class T, Acc A, bool BC>
cudaError_t launch_tile(const GemmArgs& p, cudaStream_t stream, LaunchInfo* info) {
  constexpr int bytes = Smem<T, BC>::BYTES;
  auto k = kernel<T, A, BC>;
  cudaError_t err = tile::prepare_smem(k, bytes, info);
  if (err != cudaSuccess) return err;
  const dim3 block(T::THREADS), grid(tile::cdiv(p.M, T::BM) * tile::cdiv(p.N, T::BN));
  tile::fill_info(info, grid, block, bytes, T::BM, T::BN);
  k<<<grid, block, bytes, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace mma_sp

// ---- HOST: check -> launch. p.A: compressed values, p.E: metadata (hgemm.cuh), p.K: the dense K ----
cudaError_t launch_mma_sp(const GemmArgs& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  if (!p.E) return cudaErrorInvalidValue;
  if (!tile::rows_aligned16(p) || !tile::aligned16(p.E)) return cudaErrorMisalignedAddress;
  // The fp16 tile's 200 KB fit sm_90's 227 KB but not sm_80's 163 KB: there the fp32 tile runs (unless pinned, which
  // then reports the shared memory it lacks).
  GemmArgs q = p;
  int dev = 0, optin = 0;
  if (q.tile == 0 && cudaGetDevice(&dev) == cudaSuccess &&
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) == cudaSuccess &&
      optin < mma_sp::Smem<mma_sp::TileF16, false>::BYTES)
    q.tile = 2;
  return tile::dispatch_tiles<mma_sp::TileF32, mma_sp::TileF16>(q, acc, [&](auto tile_c, auto acc_c, auto b_col_c) {
    using T = typename decltype(tile_c)::type;
    return mma_sp::launch_tile<T, decltype(acc_c)::value, decltype(b_col_c)::value>(q, stream, info);
  });
}

HGEMM_VARIANT(mma_sp, launch_mma_sp, RowMajorA);
