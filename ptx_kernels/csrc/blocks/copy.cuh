// blocks/copy.cuh — global -> shared tile copies: synchronous (edge-safe, vectorised where aligned)
// and cp.async (one-shot, and the loader of a pipelined main loop).
// Device building blocks (csrc/blocks/, one file per concern: smem layouts, copies, stage sync, fragments,
// epilogues), shared by the kernels in sm80/ and by the sweeps and tests that instantiate them.
#pragma once
#include <type_traits>
#include "hgemm.cuh"
#include "blocks/common.cuh"
#include "blocks/swizzle.cuh"
#include "ptx/cp_async.cuh"
#include "ptx/cvta.cuh"

namespace tile {

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
// E: the element type (2 bytes: half or __nv_bfloat16), which only the pointer arithmetic sees.
template <int ROWS, int COLS, int THREADS, int LDS, class Layout, bool K_ALONG_ROWS, typename E = half>
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

  const E* src;           // this thread's chunk of pass 0 in the next tile
  uint32_t dst[OFFSETS];  // its byte offset inside a stage in passes 0 .. OFFSETS - 1
  uint32_t mask;          // bit i: pass i's row lies inside the fixed extent (rows; all ones when K runs along rows)
  uint32_t bytes;         // bytes of this thread's column inside the fixed extent (16 when K runs along columns)
  int row;                // this thread's row in pass 0

  // g: the first tile's origin, row stride ld; fixed_left: rows (K along columns) or columns (K along rows) left
  // from the origin in the dimension that does not advance.
  __device__ __forceinline__ CpAsyncLoader(const E* g, int64_t ld, int fixed_left) {
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
    const E* s = src;
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
// pointers); tiles past K zero-fill. E: the element type of A and B.
template <int BM, int BN, int BK, int THREADS, int LDA, int LDB, class LA, class LB, bool B_COL, int STAGES,
          typename E = half>
struct OperandLoads {
  using LoadB = typename std::conditional<B_COL, CpAsyncLoader<BN, BK, THREADS, LDB, LB, false, E>,
                                          CpAsyncLoader<BK, BN, THREADS, LDB, LB, true, E>>::type;
  static constexpr int A_STAGE_BYTES = BM * LDA * 2, B_STAGE_BYTES = (B_COL ? BN : BK) * LDB * 2;
  CpAsyncLoader<BM, BK, THREADS, LDA, LA, false, E> a;
  LoadB b;
  uint32_t sA, sB;  // shared addresses of stage 0

  __device__ __forceinline__ OperandLoads(const GemmArgsOf<E>& p, int row0, int col0, const E* sA_, const E* sB_)
      : a(p.A + row0 * p.sam, p.sam, p.M - row0),
        b(B_COL ? p.B + col0 * p.sbn : p.B + col0, B_COL ? p.sbn : p.sbk, p.N - col0),
        sA(ptx::smem_u32(sA_)),
        sB(ptx::smem_u32(sB_)) {}

  // Copy tile kt into stage kt % STAGES and commit it as one cp.async group: no branch, the same count of groups
  // every time.
  __device__ __forceinline__ void copy_stage(const GemmArgsOf<E>& p, int kt) { copy_stage(p, kt, kt % STAGES); }
  // The same with the stage given (s == kt % STAGES), for main loops unrolled over the stages.
  __device__ __forceinline__ void copy_stage(const GemmArgsOf<E>& p, int kt, int s) {
    const int k_left = p.K - kt * BK;
    const uint32_t a_stage = sA + s * A_STAGE_BYTES, b_stage = sB + s * B_STAGE_BYTES;
    a.copy_next(a_stage, p.sam, k_left, BK);
    if (B_COL) b.copy_next(b_stage, p.sbn, k_left, BK);
    else b.copy_next(b_stage, p.sbk, k_left, BK * p.sbk);
    ptx::cp_async_commit();
  }
};

}  // namespace tile
