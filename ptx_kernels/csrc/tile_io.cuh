// tile_io.cuh — device helpers shared by the kernels: edge-safe tile loads into shared memory, the fragment
// epilogue, block rasterization, and the host-side launch helpers.
#pragma once
#include <mma.h>

#include <type_traits>
#include <utility>

#include "hgemm.cuh"
#include "ptx.cuh"

namespace tile {

__host__ __device__ constexpr int cdiv(int a, int b) { return (a + b - 1) / b; }

// f(std::integral_constant<int, 0>{}), ..., f(std::integral_constant<int, N - 1>{}): a loop whose index is a
// compile-time constant in the body (for template arguments such as an instruction's immediate offset).
template <class F, int... I>
__device__ __forceinline__ void static_for_impl(F&& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}
template <int N, class F>
__device__ __forceinline__ void static_for(F&& f) {
  static_for_impl(f, std::make_integer_sequence<int, N>{});
}

__host__ __device__ inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// True when every row of A and B starts on a 16-byte boundary: the condition for uint4 loads and cp.async.
inline bool rows_aligned16(const GemmArgs& p) {
  const int64_t ldb = p.b_col_major ? p.sbn : p.sbk;
  return aligned16(p.A) && aligned16(p.B) && p.sam % 8 == 0 && ldb % 8 == 0;
}

// Shared-memory tile layouts: element offset of (row, col) in a tile with row stride ld halves.
struct Plain {
  __host__ __device__ static constexpr int chunk(int, int c) { return c; }
  __host__ __device__ static constexpr int off(int r, int c, int ld) { return r * ld + c; }
};
// XOR swizzle of 16-byte chunks: chunk c of row r is stored at chunk c ^ f(r), so the 8 rows an ldmatrix reads
// (same logical chunk) and the chunks a warp's cp.async writes land in 8 different bank groups (of 4 banks).
// CH = chunks per row: rows of 8+ chunks XOR with r % 8; narrower rows share a 128-byte bank line between
// 8 / CH rows, so the XOR uses the row bits above those.
template <int CH>
struct Xor {
  static_assert(CH == 2 || CH == 4 || CH % 8 == 0, "chunks per row: 2, 4 or a multiple of 8");
  __host__ __device__ static constexpr int chunk(int r, int c) {
    return CH >= 8 ? (c ^ (r % 8)) : (c ^ ((r / (8 / CH)) % CH));
  }
  __host__ __device__ static constexpr int off(int r, int c, int ld) { return r * ld + chunk(r, c / 8) * 8 + c % 8; }
};

// Copy a ROWS x COLS tile whose origin is `g` (row stride `ld`, unit column stride) into shared memory
// (row stride LDS), synchronously. Elements at or past rows_left / cols_left read as zero. Chunks of 8 halves:
// one 16-byte load when the chunk is inside and rows are 16-byte aligned, else element by element.
template <int ROWS, int COLS, int THREADS, int LDS>
__device__ __forceinline__ void load_tile_sync(half* s, const half* g, int64_t ld, int rows_left, int cols_left,
                                               bool vec_ok) {
  static_assert(COLS % 8 == 0, "tiles are moved in chunks of 8 halves");
  constexpr int CHUNKS = ROWS * COLS / 8;
  for (int c = threadIdx.x; c < CHUNKS; c += THREADS) {
    const int r = c / (COLS / 8), k = (c % (COLS / 8)) * 8;
    half* dst = s + r * LDS + k;
    const half* src = g + r * ld + k;
    if (vec_ok && r < rows_left && k + 8 <= cols_left) {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) dst[e] = (r < rows_left && k + e < cols_left) ? src[e] : __float2half(0.f);
    }
  }
}

// The A and B tiles of K step k0 of block (row0, col0), synchronously, unpadded: A (m, k) into sA (row stride BK);
// B into sB as (n, k) rows of BK when B_COL, else (k, n) rows of BN. ldb: B's row stride in global memory.
template <int BM, int BN, int BK, int THREADS, bool B_COL>
__device__ __forceinline__ void load_operands_sync(half* sA, half* sB, const GemmArgs& p, int64_t ldb, int row0,
                                                   int col0, int k0, bool vec_ok) {
  load_tile_sync<BM, BK, THREADS, BK>(sA, p.A + row0 * p.sam + k0, p.sam, p.M - row0, p.K - k0, vec_ok);
  if (B_COL)
    load_tile_sync<BN, BK, THREADS, BK>(sB, p.B + col0 * ldb + k0, ldb, p.N - col0, p.K - k0, vec_ok);
  else
    load_tile_sync<BK, BN, THREADS, BN>(sB, p.B + k0 * ldb + col0, ldb, p.K - k0, p.N - col0, vec_ok);
}

// True when the layout repeats every `rows` rows: off(r + rows, c) = off(r, c) + rows * ld (Plain always; the
// XOR swizzles have a period of 8 rows).
template <class Layout, int ROWS_STEP, int COLS, int LDS>
__host__ __device__ constexpr bool repeats_every() {
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < COLS; c += 8)
      if (Layout::off(r + ROWS_STEP, c, LDS) != Layout::off(r, c, LDS) + ROWS_STEP * LDS) return false;
  return true;
}

// The same tile with cp.async: 16-byte copies, the src-size operand zero-filling whatever lies past the edges.
// Needs 16-byte aligned rows (rows_aligned16). `base` is any valid address, used when a chunk reads nothing.
// Thread t always copies column chunk t % (COLS / 8) of rows t / (COLS / 8) + i * ROWS_PER_PASS: its column's
// byte count and its shared-memory offset are worked out once, and each pass only adds a row stride — a few
// integer instructions per cp.async instead of a full (row, column, swizzle, edge) computation.
template <int ROWS, int COLS, int THREADS, int LDS, class Layout = Plain>
__device__ __forceinline__ void cp_async_tile(half* s, const half* g, int64_t ld, int rows_left, int cols_left,
                                              const half* base) {
  static_assert(COLS % 8 == 0 && LDS % 8 == 0, "16-byte chunks need 8-half multiples");
  constexpr int CPR = COLS / 8, CHUNKS = ROWS * CPR;
  static_assert(CHUNKS % THREADS == 0, "every thread copies the same number of chunks");
  static_assert(THREADS % CPR == 0, "a pass of THREADS chunks covers whole rows");
  constexpr int ROWS_PER_PASS = THREADS / CPR, PASSES = CHUNKS / THREADS;
  static_assert(repeats_every<Layout, ROWS_PER_PASS, COLS, LDS>(), "the layout repeats from pass to pass");
  const int r = threadIdx.x / CPR, k = (threadIdx.x % CPR) * 8;
  const int left = cols_left - k;
  const uint32_t col_bytes = left >= 8 ? 16u : (left > 0 ? 2u * left : 0u);
  const uint32_t dst = ptx::smem_u32(s + Layout::off(r, k, LDS));
  const half* src = g + r * ld + k;
#pragma unroll
  for (int i = 0; i < PASSES; ++i) {
    const uint32_t bytes = r + i * ROWS_PER_PASS < rows_left ? col_bytes : 0u;
    ptx::cp_async_16B(dst + i * ROWS_PER_PASS * LDS * 2, bytes ? src + i * ROWS_PER_PASS * ld : base, bytes);
  }
}

// cp_async_tile for a pipelined main loop, where one dimension of the tile advances with K and the other stays
// fixed. The same copy (thread t owns column chunk t % (COLS / 8) of rows t / (COLS / 8) + i * ROWS_PER_PASS),
// with what does not change from tile to tile worked out once: the source pointer advances, the fixed
// dimension's edge is a bit mask and a byte count. Each tile then costs a few instructions to place the K edge
// plus a select and a pointer add per cp.async, and there is no branch: tiles past K (k_left <= 0) zero-fill, so
// the pipeline can issue copies unconditionally and the compiler can interleave them with the MMAs. Chunks that
// read nothing (src-size 0) are not dereferenced (PTX ISA, cp.async: only src-size bytes are read).
// K_ALONG_ROWS: the tile is (k, n) (row-major B); otherwise (rows, k) (A, and column-major B as (n, k)).
template <int ROWS, int COLS, int THREADS, int LDS, class Layout, bool K_ALONG_ROWS>
struct CpAsyncLoader {
  static constexpr int CPR = COLS / 8, ROWS_PER_PASS = THREADS / CPR, PASSES = ROWS * CPR / THREADS;
  static_assert(COLS % 8 == 0 && LDS % 8 == 0 && THREADS % CPR == 0 && (ROWS * CPR) % THREADS == 0,
                "whole 16-byte chunks, whole rows per pass, the same number of chunks per thread");
  static_assert(PASSES <= 32, "one mask bit per pass");
  // A swizzle repeats every 8 rows; when a pass covers fewer, the thread's shared-memory offset cycles through
  // PERIOD values (kept in registers) before it becomes a plain row stride again.
  static constexpr int period() {
    return repeats_every<Layout, ROWS_PER_PASS, COLS, LDS>()     ? 1
           : repeats_every<Layout, 2 * ROWS_PER_PASS, COLS, LDS>() ? 2
           : repeats_every<Layout, 4 * ROWS_PER_PASS, COLS, LDS>() ? 4
           : repeats_every<Layout, 8 * ROWS_PER_PASS, COLS, LDS>() ? 8
                                                                    : 0;
  }
  static_assert(period() > 0, "the layout repeats within 8 passes");
  static constexpr int OFFSETS = period() < PASSES ? period() : PASSES;
  static_assert(PASSES % OFFSETS == 0, "whole periods of passes");

  const half* src;        // this thread's chunk of pass 0 in the next tile
  uint32_t dst[OFFSETS];  // its byte offset inside a stage in passes 0 .. OFFSETS - 1
  uint32_t mask;          // bit i: pass i's row lies inside the fixed extent (rows; all ones when K runs along rows)
  uint32_t bytes;         // bytes of this thread's column inside the fixed extent (16 when K runs along columns)
  int row;                // this thread's row in pass 0

  // g: the first tile's origin, row stride ld; fixed_left: rows (K along columns) or columns (K along rows) left
  // from the origin in the dimension that does not advance.
  __device__ __forceinline__ CpAsyncLoader(const half* g, int64_t ld, int fixed_left) {
    row = threadIdx.x / CPR;
    const int k = (threadIdx.x % CPR) * 8;
    src = g + row * ld + k;
#pragma unroll
    for (int j = 0; j < OFFSETS; ++j) dst[j] = Layout::off(row + j * ROWS_PER_PASS, k, LDS) * 2;
    mask = K_ALONG_ROWS ? ~0u : 0u;
    bytes = 16u;
    if (K_ALONG_ROWS) {
      bytes = chunk_bytes(fixed_left - k);
    } else {
#pragma unroll
      for (int i = 0; i < PASSES; ++i) mask |= (row + i * ROWS_PER_PASS < fixed_left ? 1u : 0u) << i;
    }
  }

  __device__ __forceinline__ static uint32_t chunk_bytes(int left) {
    return left >= 8 ? 16u : (left > 0 ? 2u * left : 0u);
  }

  // Copy the next tile into the stage at shared address `stage`; k_left = K elements left from its origin (<= 0
  // past the end: everything zero-fills). Then advance to the tile after it (k_step elements).
  __device__ __forceinline__ void copy_next(uint32_t stage, int64_t ld, int k_left, int64_t k_step) {
    const uint32_t col_bytes = K_ALONG_ROWS ? bytes : chunk_bytes(k_left - (threadIdx.x % CPR) * 8);
    const half* s = src;
#pragma unroll
    for (int i = 0; i < PASSES; ++i) {
      const bool inside = K_ALONG_ROWS ? row + i * ROWS_PER_PASS < k_left : ((mask >> i) & 1u);
      ptx::cp_async_16B(stage + dst[i % OFFSETS] + (i / OFFSETS) * OFFSETS * ROWS_PER_PASS * LDS * 2, s,
                        inside ? col_bytes : 0u);
      s += ROWS_PER_PASS * ld;
    }
    src += k_step;
  }
};

// The A and B tile copies of a STAGES-deep pipelined GEMM main loop: A is (m, k) with row stride LDA in shared
// memory; B is (n, k) with row stride LDB when column-major, else (k, n). The stages of each operand lie back to
// back from sA / sB. copy_stage(p, kt) must be called for kt = 0, 1, 2, ... in order (it advances the source
// pointers); tiles past K zero-fill.
template <int BM, int BN, int BK, int THREADS, int LDA, int LDB, class LA, class LB, bool B_COL, int STAGES>
struct OperandLoads {
  using LoadB = typename std::conditional<B_COL, CpAsyncLoader<BN, BK, THREADS, LDB, LB, false>,
                                          CpAsyncLoader<BK, BN, THREADS, LDB, LB, true>>::type;
  static constexpr int A_STAGE_BYTES = BM * LDA * 2, B_STAGE_BYTES = (B_COL ? BN : BK) * LDB * 2;
  CpAsyncLoader<BM, BK, THREADS, LDA, LA, false> a;
  LoadB b;
  uint32_t sA, sB;  // shared addresses of stage 0

  __device__ __forceinline__ OperandLoads(const GemmArgs& p, int row0, int col0, const half* sA_, const half* sB_)
      : a(p.A + row0 * p.sam, p.sam, p.M - row0),
        b(B_COL ? p.B + col0 * p.sbn : p.B + col0, B_COL ? p.sbn : p.sbk, p.N - col0),
        sA(ptx::smem_u32(sA_)),
        sB(ptx::smem_u32(sB_)) {}

  // Copy tile kt into stage kt % STAGES and commit it as one cp.async group: no branch, the same count of groups
  // every time.
  __device__ __forceinline__ void copy_stage(const GemmArgs& p, int kt) { copy_stage(p, kt, kt % STAGES); }
  // The same with the stage given (s == kt % STAGES), for main loops unrolled over the stages.
  __device__ __forceinline__ void copy_stage(const GemmArgs& p, int kt, int s) {
    const int k_left = p.K - kt * BK;
    const uint32_t a_stage = sA + s * A_STAGE_BYTES, b_stage = sB + s * B_STAGE_BYTES;
    a.copy_next(a_stage, p.sam, k_left, BK);
    if (B_COL) b.copy_next(b_stage, p.sbn, k_left, BK);
    else b.copy_next(b_stage, p.sbk, k_left, BK * p.sbk);
    ptx::cp_async_commit();
  }
};

// How a pipelined main loop keeps its stage ring safe: tile kt must have landed before any warp reads it
// (read-after-write), and every warp must be done reading a stage before it is refilled (write-after-read). Two
// policies with one interface, called at the same points of the loop:
//   AHEAD tiles are copied ahead of the one computed (copy_stage(kt + AHEAD) at tile kt);
//   filled(kt)          after copy_stage(kt) has issued its copies;
//   wait_filled(kt)     before the first fragment load from tile kt;
//   consumed(kt)        after the MMAs that use tile kt's last fragments have issued (so its loads are done);
//   wait_consumed(kt)   before copy_stage(kt) overwrites the stage that tile kt - STAGES used.
// BAR_BYTES is the shared memory the policy needs (8-byte aligned, placed after everything else).
//
// BlockSync: cp.async.wait_group + __syncthreads once per tile. The barrier serves both purposes: after it every
// thread's copies of tile kt + 1 are visible, and every warp has finished the fragment loads issued before it.
// All warps meet once per tile, so they run in lockstep. wait_filled's group count assumes copy_stage(kt + AHEAD)
// was issued (in tile kt) before wait_filled(kt + 1), as the kernels do.
template <int STAGES, int WARPS>
struct BlockSync {
  static constexpr int AHEAD = STAGES - 1, BAR_BYTES = 0;
  __device__ __forceinline__ explicit BlockSync(uint32_t) {}
  __device__ __forceinline__ void filled(int) const {}
  __device__ __forceinline__ void wait_filled(int) const {
    ptx::cp_async_wait<AHEAD - 1>();
    __syncthreads();
  }
  __device__ __forceinline__ void consumed(int) const {}
  __device__ __forceinline__ void wait_consumed(int) const {}
};

// StageBarriers: no block-wide barrier in the main loop. Each stage has a "full" mbarrier, on which every
// thread's cp.async arrive as they land (cp.async.mbarrier.arrive.noinc; THREADS arrivals per fill), and an
// "empty" one, on which each warp arrives once it is done with the stage (WARPS arrivals per use). A refill waits
// only for the stage it overwrites, and copies run one tile less ahead (AHEAD = STAGES - 2) so that stage was
// last read two tiles before: a warp may run up to a tile ahead of the slowest without waiting, and the warps
// sharing a scheduler drift out of phase, so one's fragment loads and barrier waits hide under another's MMAs.
// Phases: fill number n of stage s (tile kt = n * STAGES + s) completes full[s]'s phase n, parity n & 1; a warp
// cannot fall two phases behind, since a refill waits for every warp's use of the fill before.
template <int STAGES, int WARPS>
struct StageBarriers {
  static_assert(STAGES >= 3, "one stage of slack needs three stages");
  static constexpr int AHEAD = STAGES - 2, BAR_BYTES = 2 * STAGES * 8;
  uint32_t full, empty;  // shared addresses of full[0] and empty[0]

  // bars: BAR_BYTES of 8-byte aligned shared memory. Every thread of the block must construct it (a barrier).
  __device__ __forceinline__ explicit StageBarriers(uint32_t bars) : full(bars), empty(bars + STAGES * 8) {
    if (threadIdx.x == 0) {
#pragma unroll
      for (int s = 0; s < STAGES; ++s) {
        ptx::mbarrier_init(full + 8 * s, 32 * WARPS);
        ptx::mbarrier_init(empty + 8 * s, WARPS);
      }
    }
    __syncthreads();
  }
  __device__ __forceinline__ void filled(int kt) const { ptx::cp_async_mbarrier_arrive_noinc(full + 8 * (kt % STAGES)); }
  __device__ __forceinline__ void wait_filled(int kt) const {
    ptx::mbarrier_wait_parity(full + 8 * (kt % STAGES), (kt / STAGES) & 1);
  }
  __device__ __forceinline__ void consumed(int kt) const {
    __syncwarp();  // every lane's loads are done (they fed issued MMAs); one arrival for the warp
    if (threadIdx.x % 32 == 0) ptx::mbarrier_arrive(empty + 8 * (kt % STAGES));
  }
  __device__ __forceinline__ void wait_consumed(int kt) const {
    if (kt >= STAGES) ptx::mbarrier_wait_parity(empty + 8 * (kt % STAGES), (kt / STAGES - 1) & 1);
  }
};

// The policy a Tile's MBARRIERS flag selects.
template <bool MBARRIERS, int STAGES, int WARPS>
using StageSync =
    typename std::conditional<MBARRIERS, StageBarriers<STAGES, WARPS>, BlockSync<STAGES, WARPS>>::type;

// Store one 16x16 accumulator fragment at C[row0.., col0..], guarded at the edges: through a per-warp 16x16
// scratch in shared memory (fragment layouts are opaque), then each lane writes 8 consecutive halves of one row.
template <typename AccT, typename Frag>
__device__ __forceinline__ void store_fragment(const Frag& frag, AccT* scratch, half* C, int64_t ldc, int row0,
                                               int col0, int M, int N, bool c_vec_ok) {
  using namespace nvcuda;
  wmma::store_matrix_sync(scratch, frag, 16, wmma::mem_row_major);
  __syncwarp();
  const int lane = threadIdx.x % 32;
  const int r = lane / 2, c = (lane % 2) * 8;
  const int row = row0 + r, col = col0 + c;
  if (row < M) {
    alignas(16) half v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = static_cast<half>(scratch[r * 16 + c + e]);
    half* dst = C + row * ldc + col;
    if (c_vec_ok && col + 8 <= N) {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(v);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if (col + e < N) dst[e] = v[e];
    }
  }
  __syncwarp();
}

// A warp's FM x FN grid of 16x16 fragments, one BK=16 step: its FM A and FN B operand fragments.
template <int FM, int FN, bool B_COL>
struct WmmaOperands {
  using BLayout = typename std::conditional<B_COL, nvcuda::wmma::col_major, nvcuda::wmma::row_major>::type;
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, half, nvcuda::wmma::row_major> a[FM];
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, half, BLayout> b[FN];

  // Load from shared memory: sA points at the warp's first row and the step's k (row stride lda); sB at the
  // warp's first column and the step's k: (k, n) storage with row stride ldb, or (n, k) storage when B_COL.
  __device__ __forceinline__ void load(const half* sA, int lda, const half* sB, int ldb) {
#pragma unroll
    for (int i = 0; i < FM; ++i) nvcuda::wmma::load_matrix_sync(a[i], sA + i * 16 * lda, lda);
#pragma unroll
    for (int j = 0; j < FN; ++j) nvcuda::wmma::load_matrix_sync(b[j], B_COL ? sB + j * 16 * ldb : sB + j * 16, ldb);
  }
  // The same from shared addresses known up to a constant: sA / sB are the shared addresses of the warp's
  // operands of the stage at offset 0 (as in load's pointers), A_OFF / B_OFF (bytes) the stage and k-step; row
  // strides LDA / LDB halves. Through ptx::wmma_load_*, so every offset is an immediate of the LDSM.
  template <int LDA, int LDB, int A_OFF, int B_OFF>
  __device__ __forceinline__ void load_shared(uint32_t sA, uint32_t sB) {
    load_a_shared<LDA, A_OFF>(sA);
    static_for<FN>([&](auto j) { load_b_shared<decltype(j)::value, LDB, B_OFF>(sB); });
  }
  // The A fragments alone, and B fragment J alone (same addressing).
  template <int LDA, int A_OFF>
  __device__ __forceinline__ void load_a_shared(uint32_t sA) {
    static_for<FM>([&](auto i) {
      ptx::wmma_load_a_row_m16n16k16<LDA, A_OFF + decltype(i)::value * 16 * LDA * 2>(
          reinterpret_cast<uint32_t(&)[8]>(a[decltype(i)::value].x), sA);
    });
  }
  template <int J, int LDB, int B_OFF>
  __device__ __forceinline__ void load_b_shared(uint32_t sB) {
    ptx::wmma_load_b_m16n16k16<B_COL, LDB, B_OFF + (B_COL ? J * 16 * LDB : J * 16) * 2>(
        reinterpret_cast<uint32_t(&)[8]>(b[J].x), sB);
  }
  // c[i][j] += a[i] b[j]: FM * FN wmma::mma_sync.
  // Column J of the grid: c[i][J] += a[i] b[J] for every i (A fragments from `as`, which may be another buffer).
  template <int J, typename AccFrag>
  __device__ __forceinline__ void mma_column(AccFrag (&c)[FM][FN], const WmmaOperands& as) const {
#pragma unroll
    for (int i = 0; i < FM; ++i) nvcuda::wmma::mma_sync(c[i][J], as.a[i], b[J], c[i][J]);
  }
  template <typename AccFrag>
  __device__ __forceinline__ void mma(AccFrag (&c)[FM][FN]) const {
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
      for (int j = 0; j < FN; ++j) nvcuda::wmma::mma_sync(c[i][j], a[i], b[j], c[i][j]);
  }
};

// One BK=16 step of a warp's FM x FN grid of 16x16 fragments: load, then FM*FN wmma::mma_sync.
template <int FM, int FN, bool B_COL, typename AccFrag>
__device__ __forceinline__ void wmma_warp_step(AccFrag (&c)[FM][FN], const half* sA, int lda, const half* sB,
                                               int ldb) {
  WmmaOperands<FM, FN, B_COL> ops;
  ops.load(sA, lda, sB, ldb);
  ops.mma(c);
}

template <int FM, int FN, typename AccFrag>
__device__ __forceinline__ void fill_warp_tile(AccFrag (&c)[FM][FN]) {
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j) nvcuda::wmma::fill_fragment(c[i][j], 0);
}

// Epilogue of a warp's FM x FN fragment grid whose top-left output element is (row0, col0).
template <int FM, int FN, typename AccT, typename AccFrag>
__device__ __forceinline__ void store_warp_tile(const AccFrag (&c)[FM][FN], AccT* scratch, const GemmArgs& p,
                                                int row0, int col0) {
  const bool c_vec_ok = aligned16(p.C) && p.ldc % 8 == 0;
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j)
      if (row0 + i * 16 < p.M && col0 + j * 16 < p.N)
        store_fragment(c[i][j], scratch, p.C, p.ldc, row0 + i * 16, col0 + j * 16, p.M, p.N, c_vec_ok);
}

// The last step of an epilogue that stages the block's BM x BN output tile in shared memory (sC, row stride ldc
// elements of SrcT: half, or float converted here): the block copies it to C[row0.., col0..] in rows of 8 halves,
// 16-byte loads and stores where C allows (consecutive threads take consecutive chunks of a row, so 8 threads
// write a full 128-byte line), element by element at the right and bottom edges. sC rows must be 16-byte aligned.
template <int BM, int BN, int THREADS, typename SrcT>
__device__ __forceinline__ void copy_out_tile(const SrcT* sC, int ldc, const GemmArgs& p, int row0, int col0) {
  static_assert(BN % 8 == 0, "rows of 8-half chunks");
  const bool vec = aligned16(p.C) && p.ldc % 8 == 0;
  for (int ch = threadIdx.x; ch < BM * BN / 8; ch += THREADS) {
    const int rr = ch / (BN / 8), cc = (ch % (BN / 8)) * 8;
    const int row = row0 + rr, col = col0 + cc;
    if (row >= p.M || col >= p.N) continue;
    const SrcT* src = sC + rr * ldc + cc;
    half* dst = p.C + row * p.ldc + col;
    if (vec && col + 8 <= p.N) {
      uint4 v;
      if constexpr (std::is_same<SrcT, half>::value) {
        v = *reinterpret_cast<const uint4*>(src);
      } else {
        const float4 lo = reinterpret_cast<const float4*>(src)[0], hi = reinterpret_cast<const float4*>(src)[1];
        auto bits = [](float x, float y) {
          const half2 h = __floats2half2_rn(x, y);
          return *reinterpret_cast<const uint32_t*>(&h);
        };
        v = make_uint4(bits(lo.x, lo.y), bits(lo.z, lo.w), bits(hi.x, hi.y), bits(hi.z, hi.w));
      }
      *reinterpret_cast<uint4*>(dst) = v;
    } else {
      for (int e = 0; e < 8 && col + e < p.N; ++e) dst[e] = static_cast<half>(src[e]);
    }
  }
}

// ---- mma.sync fragments (m16n8k16); addressing proved against the ISA in tests/test_layouts.py -------------

// Offset (halves) of chunk c_lane + c_step of row r0 + r in a tile of layout L with row stride ld, for the
// ldmatrix addressing below: r0 is a multiple of 8 (a swizzle's row period) and c_step is even while c_lane is 0
// or 1, so the sum is c_lane ^ c_step and the swizzle, an XOR of r's bits, splits into a per-lane part the
// compiler hoists out of the loop and one XOR with the k-step's constant.
template <class L>
__device__ __forceinline__ int ldsm_off(int r0, int r, int c_lane, int c_step, int ld) {
  return (r0 + r) * ld + L::chunk(r, c_lane ^ c_step) * 8;
}

// A fragment of the 16x16 block at (m0, k0) of the tile sA (row stride lda halves, layout L): lane l points at
// row m0 + l % 16, column k0 + 8 * (l / 16). m0 and k0 are multiples of 16.
template <class L = Plain>
__device__ __forceinline__ void ldsm_a(uint32_t (&a)[4], const half* sA, int m0, int k0, int lda) {
  const int l = threadIdx.x % 32;
  ptx::ldmatrix_x4(a[0], a[1], a[2], a[3], ptx::smem_u32(sA + ldsm_off<L>(m0, l % 16, l / 16, k0 / 8, lda)));
}

// One B fragment (k16 x n8). B_COL=false: sB is (k, n) with row stride ldb, at (k0, n0): ldmatrix.x2.trans, lane
// l < 16 points at row k0 + l. B_COL=true: sB is (n, k) at (n0, k0): ldmatrix.x2, lane l < 16 points at
// (n0 + l % 8, k0 + 8 * (l / 8)).
template <bool B_COL>
__device__ __forceinline__ void ldsm_b(uint32_t (&b)[2], const half* sB, int ldb) {
  const int l = threadIdx.x % 32;
  if (B_COL)
    ptx::ldmatrix_x2(b[0], b[1], ptx::smem_u32(sB + (l % 8) * ldb + 8 * ((l / 8) % 2)));
  else
    ptx::ldmatrix_x2_trans(b[0], b[1], ptx::smem_u32(sB + (l % 16) * ldb));
}

// Two B fragments at once (k16 x n16 at (k0, n0): n8 tiles n0 and n0 + 8) with one ldmatrix.x4; matrix
// q = l / 8 covers k-half q % 2 of n8-tile q / 2. The tile sB is (n, k) when B_COL, else (k, n); layout L.
// k0 and n0 are multiples of 16.
template <bool B_COL, class L = Plain>
__device__ __forceinline__ void ldsm_b2(uint32_t (&b0)[2], uint32_t (&b1)[2], const half* sB, int k0, int n0,
                                        int ldb) {
  const int l = threadIdx.x % 32, q = l / 8, r = l % 8;
  if (B_COL)  // row n0 + 8 (q / 2) + r, column k0 + 8 (q % 2)
    ptx::ldmatrix_x4(b0[0], b0[1], b1[0], b1[1],
                     ptx::smem_u32(sB + ldsm_off<L>(n0, 8 * (q / 2) + r, q % 2, k0 / 8, ldb)));
  else  // row k0 + 8 (q % 2) + r, column n0 + 8 (q / 2)
    ptx::ldmatrix_x4_trans(b0[0], b0[1], b1[0], b1[1],
                           ptx::smem_u32(sB + ldsm_off<L>(k0, 8 * (q % 2) + r, q / 2, n0 / 8, ldb)));
}

// Accumulator of one m16n8 tile: fp32 = 4 floats, fp16 = 2 registers of two halves.
template <Acc ACC>
struct MmaAcc {
  float v[4] = {0.f, 0.f, 0.f, 0.f};
  __device__ __forceinline__ void mma(const uint32_t (&a)[4], const uint32_t (&b)[2]) { ptx::mma_m16n8k16_f32(v, a, b, v); }
  __device__ __forceinline__ half2 pair(int i) const { return __floats2half2_rn(v[2 * i], v[2 * i + 1]); }
};
template <>
struct MmaAcc<Acc::F16> {
  uint32_t v[2] = {0u, 0u};
  __device__ __forceinline__ void mma(const uint32_t (&a)[4], const uint32_t (&b)[2]) { ptx::mma_m16n8k16_f16(v, a, b, v); }
  __device__ __forceinline__ half2 pair(int i) const { return *reinterpret_cast<const half2*>(&v[i]); }
};

// Store one m16n8 accumulator at C[row0.., col0..], guarded: lane (g, t) holds rows g and g + 8, columns 2t and
// 2t + 1 — one 4-byte half2 store each when both columns are inside and C allows it.
template <Acc ACC>
__device__ __forceinline__ void store_acc(const MmaAcc<ACC>& c, const GemmArgs& p, int row0, int col0,
                                          bool c_pair_ok) {
  const int l = threadIdx.x % 32, g = l / 4, t = l % 4;
  const int col = col0 + 2 * t;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = row0 + g + 8 * i;
    if (row >= p.M || col >= p.N) continue;
    const half2 v = c.pair(i);
    half* dst = p.C + row * p.ldc + col;
    if (c_pair_ok && col + 1 < p.N) {
      *reinterpret_cast<half2*>(dst) = v;
    } else {
      dst[0] = __low2half(v);
      if (col + 1 < p.N) dst[1] = __high2half(v);
    }
  }
}

// C allows half2 stores: 4-byte aligned base and an even row stride (columns 2t are even).
__host__ __device__ inline bool c_pairs_aligned(const GemmArgs& p) { return (reinterpret_cast<uintptr_t>(p.C) & 3) == 0 && p.ldc % 2 == 0; }

// Store a warp's MI x NI grid of m16n8 accumulators whose top-left element is C[row0, col0].
template <int MI, int NI, Acc ACC>
__device__ __forceinline__ void store_warp_acc(const MmaAcc<ACC> (&c)[MI][NI], const GemmArgs& p, int row0,
                                               int col0) {
  const bool pairs = c_pairs_aligned(p);
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j) store_acc(c[i][j], p, row0 + i * 16, col0 + j * 8, pairs);
}

// Grouped (swizzled) block order: GROUP tile-rows are walked down one tile-column before moving right, so
// consecutive blocks share B tiles in L2 (the Triton tutorial's GROUP_M).
__device__ __forceinline__ void grouped_tile(int pid, int tiles_m, int tiles_n, int group, int& tm, int& tn) {
  const int per_group = group * tiles_n;
  const int first_m = (pid / per_group) * group;
  const int rows = min(tiles_m - first_m, group);
  tm = first_m + (pid % per_group) % rows;
  tn = (pid % per_group) / rows;
}

// Raise the kernel's dynamic shared-memory limit when it needs more than the default 48 KB; fail with
// cudaErrorInvalidValue (and info->smem_limit filled) when the device cannot give that much.
template <typename Kernel>
inline cudaError_t prepare_smem(Kernel kernel, int bytes, LaunchInfo* info) {
  int dev = 0, limit = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  if (err != cudaSuccess) return err;
  if (info) {
    info->smem_bytes = bytes;
    info->smem_limit = limit;
  }
  if (bytes > limit) return cudaErrorInvalidValue;
  if (bytes > 48 * 1024) return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  return cudaSuccess;
}

// Call launch(acc, b_col) with both as compile-time constants (std::integral_constant), so one host-side lambda
// launches whichever of a kernel's four instantiations (accumulation x B layout) the problem needs.
template <class F>
inline cudaError_t dispatch(Acc acc, bool b_col_major, F&& launch) {
  using F32 = std::integral_constant<Acc, Acc::F32>;
  using F16 = std::integral_constant<Acc, Acc::F16>;
  if (acc == Acc::F32) return b_col_major ? launch(F32{}, std::true_type{}) : launch(F32{}, std::false_type{});
  return b_col_major ? launch(F16{}, std::true_type{}) : launch(F16{}, std::false_type{});
}

// Whether a large BM x BN tile beats the smaller SM x SN one on this problem (GemmArgs::tile = 0): the grid runs
// in waves of one block per SM, so time ~ waves x tile area; the large tile wins ties and up to 10% more of it
// (its per-flop efficiency is higher: fewer shared-memory bytes per MMA). At 4096^3 on 132 SMs 256x256 and
// 128x256 both take 8 units (2 and 4 waves): the large tile; at 2048^3 one 256x256 wave (64 blocks, half the
// SMs idle) costs 4 against 2: the small tile.
__host__ __device__ constexpr bool large_tile_wins(int M, int N, int BM, int BN, int SM, int SN, int sms) {
  return 10 * int64_t(cdiv(cdiv(M, BM) * cdiv(N, BN), sms)) * BM * BN <=
         11 * int64_t(cdiv(cdiv(M, SM) * cdiv(N, SN), sms)) * SM * SN;
}
static_assert(large_tile_wins(4096, 4096, 256, 256, 128, 256, 132) &&
                  large_tile_wins(8192, 8192, 256, 256, 128, 256, 132) &&
                  !large_tile_wins(2048, 2048, 256, 256, 128, 256, 132),
              "the cases the comment above works through");
inline bool prefer_large(const GemmArgs& p, int BM, int BN, int SM, int SN) {
  if (p.tile != 0) return p.tile == 1;
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms <= 0)
    return true;
  return large_tile_wins(p.M, p.N, BM, BN, SM, SN, sms);
}

template <class T>
struct TileTag {
  using type = T;
};

// The launch of a variant with two tiles: call launch(TileTag<T>{}, acc_c, b_col_c) (see dispatch) with T = T32
// for fp32 accumulation and, for fp16, T16 where it fills the GPU (prefer_large, or as GemmArgs::tile says), else
// T32. Only the combinations that can run are instantiated.
template <class T32, class T16, class F>
inline cudaError_t dispatch_tiles(const GemmArgs& p, Acc acc, F&& launch) {
  const bool large = acc == Acc::F16 && prefer_large(p, T16::BM, T16::BN, T32::BM, T32::BN);
  return dispatch(acc, p.b_col_major, [&](auto acc_c, auto b_col_c) {
    if constexpr (decltype(acc_c)::value == Acc::F16) {
      if (large) return launch(TileTag<T16>{}, acc_c, b_col_c);
    }
    return launch(TileTag<T32>{}, acc_c, b_col_c);
  });
}

// tile_m, tile_n: the block tile, where the variant chooses between two (dispatch_tiles).
inline void fill_info(LaunchInfo* info, dim3 grid, dim3 block, int smem, int tile_m = 0, int tile_n = 0) {
  if (!info) return;
  info->tile_m = tile_m;
  info->tile_n = tile_n;
  info->grid_x = grid.x;
  info->grid_y = grid.y;
  info->block = block.x * block.y * block.z;
  if (smem) info->smem_bytes = smem;
}

// Launch one of the synchronous tiled kernels (wmma_smem, wmma_regtile, mma_tiled): a 2-D grid of BM x BN tiles,
// static shared memory, kernel(p, vec_ok). kernel_for(acc_c, b_col_c) names the instantiation (see dispatch).
template <int BM, int BN, int THREADS, class KernelFor>
inline cudaError_t launch_tiled(const GemmArgs& p, Acc acc, cudaStream_t stream, LaunchInfo* info,
                                KernelFor kernel_for) {
  const bool vec_ok = rows_aligned16(p);
  const dim3 block(THREADS), grid(cdiv(p.N, BN), cdiv(p.M, BM));
  fill_info(info, grid, block, 0);
  return dispatch(acc, p.b_col_major, [&](auto acc_c, auto b_col_c) {
    kernel_for(acc_c, b_col_c)<<<grid, block, 0, stream>>>(p, vec_ok);
    return cudaGetLastError();
  });
}

}  // namespace tile
