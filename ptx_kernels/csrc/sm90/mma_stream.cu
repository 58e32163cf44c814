// mma_stream.cu — the bandwidth path: C = A @ B for a few rows of A (16 or 32 a unit; more run in 32-row units), B
// streamed from memory once per unit row, straight into mma.sync fragments, the K splits added in a fixed order.
//
// At M <= 16 a GEMM is a read of B (K x N x 2 bytes) with a few flops per byte: its speed is the bytes of B in
// flight. The tile kernels (wgmma_persistent and the split-K kernels it hands skinny outputs to) stage 128-row tiles
// of A, of which such an output fills an eighth, and B through a TMA ring of a few stages per SM. Here:
//   - Roles swapped: C^T = B^T A^T with mma.sync.m16n8k16, N the MMA's M dimension (16 columns of C per MMA row
//     block) and the 16 rows of A its two n8 tiles. The MMA's A fragment is a piece of B, its B fragment one of A.
//     Past 16 rows a unit takes 32 (ROWS): four n8 tiles against each piece of B loaded, so 17-32 rows read B once,
//     not once per 16-row block.
//   - No shared memory on B's way in: each lane loads 16 bytes of B (8 elements) per instruction into the registers
//     the MMA reads (ld.global.nc, no L1 allocation: B is read once). A dot product does not care in which order it
//     visits k, so a lane's 8 consecutive k are assigned to the k slots its fragment registers hold (slots 2t, 2t+1,
//     2t+8, 2t+9 of the k16 step h take k 8t + 4h + 0..3 of the lane's chunk), and A's fragment, loaded the same way,
//     takes the same assignment: no shuffle. Column-major B (NT) then is two row loads per MMA row block; row-major B
//     (NN) is loaded as 8 rows of 8 consecutive columns a lane, and a byte permute (PRMT) pairs rows k and k + 1 of
//     each column into one register: the MMA rows (columns of C) are permuted instead of k (Warp<false> below).
//   - Bytes in flight: a warp issues its whole step, 8 loads a lane (4 KB a warp), before the first MMA that reads it,
//     and two blocks of 8 warps share an SM (the launch bounds), so most warps wait on loads at any time; the
//     dependency chain of a step is loads -> PRMT -> MMA, nothing else. The 32-row units hold twice the accumulators:
//     row-major B's take one block an SM (up to 255 registers a thread); column-major B's keep two, at 128 registers,
//     by loading A's fragments 16 rows x one k32 chunk at a time (the step's 8 loads of B still go first).
//   - Work units: a unit is kCols columns x ROWS rows of C over one slice of K (S slices of near-equal k-steps); a
//     block's 8 warps split the unit's columns (WN) and each k-step (WK): warp wk takes k-step chunk wk of every
//     kStepK of the slice, so the block reads kCols x kStepK of B together. The warps' partial sums meet in shared
//     memory and are added in warp order. A persistent grid (the blocks that fit at once) walks the units; the split
//     S is chosen so that the units fill the grid in as few rounds of as few k-steps as possible (plan_stream).
//   - The K splits: one slice (S = 1) stores C from the block; otherwise each unit writes its fp32 partial into slice
//     s of a workspace (Torch's caching allocator, GemmArgs::workspace) and blocks/splitk_reduce.cuh adds the slices
//     in a fixed order, a programmatic dependent launch as in wgmma_splitk_grid.cu. No atomics: the bits do not
//     depend on timing.
// Edges: loads past N or K read zeros (per element where a lane's 8 are cut), rows of A past M are zeros, and the
// stores are masked. B's rows (of its storage order) are read in place at any alignment: where its base or leading
// dimension is off 16 bytes, the instance B_SHIFT loads the aligned 16-byte chunks that cover each row and every lane
// rebuilds its 8 elements from its own chunk and the next one (a shuffle from the lane that loaded it), shifted by
// the row's offset (realign); the chunk past a warp's run is one extra load a lane, no chunk without an element of B
// is read, and on B's last row (storage order) nothing past its end either (load_chunk_head). A is read in place
// through its strides: row-major A in 16-byte loads (its rows off 16 bytes as two aligned chunks a lane, realigned, no
// shuffle; its last row element by element near its end); column-major A (layouts TN and TT) with 16-byte aligned
// columns in 16-byte loads of 8 rows at one k, turned by ldmatrix.trans through a small staging buffer of each warp's
// (the one shared-memory trip on the way in, load_a_columns), where B's rows need no rebuild; other A element by
// element.
// Element types: fp16 (fp32 or fp16 accumulation) and bf16 (fp32), the template parameter E; the partials are fp32
// either way (fp16 accumulators are widened exactly). wgmma_persistent.cu hands it the shapes of hands_to_stream
// (sm90/handoff.h).
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "blocks/common.cuh"
#include "blocks/element.cuh"
#include "blocks/fragments.cuh"
#include "blocks/splitk_reduce.cuh"
#include "host/launch.h"
#include "host/registry.h"
#include "ptx/griddepcontrol.cuh"
#include "ptx/ld_global.cuh"
#include "sm90/handoff.h"

namespace {

constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr int kRows = 16;  // rows of C in the MMA's two n8 tiles; a unit's rows (ROWS) are 16 or 32: 2 or 4 n8 tiles
// Blocks of an instance resident on an SM: 2 x 256 threads x <= 128 registers (the register file, full), but for
// the 32-row units of row-major B: one block of up to 255 registers a thread (at 128 they spill).
template <int ROWS, bool B_COL>
constexpr int kBlocksPerSM = ROWS == kRows || B_COL ? 2 : 1;
// The rows of the units a problem of M rows runs in: 16 where one block of them covers M, else 32 (17-32 rows in one
// pass over B instead of two; more in as few passes as 32-row blocks take).
__host__ __device__ constexpr int stream_rows(int M) { return M > kRows ? 2 * kRows : kRows; }
constexpr int kCols = 128;       // columns of C a unit covers
constexpr int kStepK = 128;      // k a block's warps cover together in one step
constexpr int kPad = 4;          // floats after each row of the partial sums in shared memory (rows stay 16-byte aligned)
constexpr int kMaxSplit = 256;

// A warp's step: N columns x K of B, 8 16-byte loads a lane (g = lane / 4, t = lane % 4), in RB MMA row blocks of 16
// columns and KS k32 chunks (two k16 MMAs each); col(j, hh): the column (from the warp's first) of MMA row block j's
// row g (hh = 0) or g + 8 (hh = 1).
template <bool B_COL>
struct Warp;
template <>
struct Warp<false> {  // B row-major: lane (g, t) loads rows k0 + 8t + r (r < 8) at columns n0 + 8g .. n0 + 8g + 7
  static constexpr int N = 64, K = 32, RB = 4, KS = 1;
  __device__ __forceinline__ static int col(int j, int hh, int g) { return 8 * g + 2 * j + hh; }
};
template <>
struct Warp<true> {  // B column-major: lane (g, t) loads columns n0 + 16j + 8hh + g at k0 + 32s + 8t .. + 7
  static constexpr int N = 32, K = 64, RB = 2, KS = 2;
  __device__ __forceinline__ static int col(int j, int hh, int g) { return 16 * j + 8 * hh + g; }
};
template <bool B_COL>
constexpr int kWN = kCols / Warp<B_COL>::N;  // warps across a unit's columns
template <bool B_COL>
constexpr int kWK = kStepK / Warp<B_COL>::K;  // warps across a step's k
static_assert(kWN<false> * kWK<false> == kWarps && kWN<true> * kWK<true> == kWarps, "8 warps tile a block's step");

// ---- plan: the K split --------------------------------------------------------------------------------------------
// S slices of K for an output of `tiles` units of `rows` x kCols, `steps` k-steps of kStepK, on `slots` resident
// blocks: the S (1 .. min(steps, kMaxSplit)) whose busiest block finishes first, counting a unit's epilogue (its
// partial sums through shared memory, the stores) as half a step, and with S > 1 the partial's trip through the
// workspace and the reduction as another half; ties go to the smaller S.
// force_split (GemmArgs::split) pins S, cut to the steps there are.
struct StreamPlan {
  int split, units, grid;
};
__host__ __device__ constexpr StreamPlan plan_stream(int M, int N, int K, int slots, int force_split = 0,
                                                     int rows = kRows) {
  const int tiles = tile::cdiv(N, kCols) * tile::cdiv(M, rows);
  const int steps = K > 0 ? tile::cdiv(K, kStepK) : 1;
  int split = 1;
  if (force_split > 0) {
    split = force_split < steps ? force_split : steps;
  } else {
    long best = -1;
    for (int s = 1; s <= steps && s <= kMaxSplit; ++s) {
      const long units = long(tiles) * s, grid = units < slots ? units : slots;
      const long cost = (units + grid - 1) / grid * (2L * tile::cdiv(steps, s) + (s > 1 ? 2 : 1));  // half steps
      if (best < 0 || cost < best) best = cost, split = s;
    }
  }
  const long units = long(tiles) * split;
  return StreamPlan{split, int(units), int(units < slots ? units : slots)};
}
static_assert(plan_stream(1, 8192, 8192, 264).split == 4 && plan_stream(1, 8192, 8192, 264).grid == 256 &&
                  plan_stream(16, 4096, 4096, 264).split == 8 && plan_stream(16, 28672, 4096, 264).split == 1 &&
                  plan_stream(8, 4096, 14336, 264).split == 8 && plan_stream(13, 5000, 7001, 264).split == 6 &&
                  plan_stream(1, 128256, 4096, 264).split == 1 && plan_stream(1, 128256, 4096, 264).grid == 264 &&
                  plan_stream(33, 300, 50, 264).split == 1 && plan_stream(16, 4096, 4096, 264, 1000).split == 32 &&
                  plan_stream(4, 64, 0, 264).split == 1,
              "worked cases (two 256-thread blocks on each of 132 SMs): 1 x 8192 x 8192 in 4 slices (256 units of 16 "
              "steps: one round); 16 x 4096 x 4096 in 8; 16 x 28672 x 4096 unsplit (224 units fill a round); 1 x "
              "128256 x 4096 unsplit, 4 rounds of the 264 blocks; a short K stays whole; forced splits are cut to the "
              "steps; K = 0 is one slice of no steps (zeros)");
static_assert(stream_rows(1) == 16 && stream_rows(16) == 16 && stream_rows(17) == 32 && stream_rows(48) == 32 &&
                  plan_stream(24, 1630, 31754, 132, 0, 32).units == 130 &&
                  plan_stream(24, 1630, 31754, 264).units == 260,
              "worked cases: past 16 rows, 32-row units (row-major B: one block an SM): 24 x 1630 x 31754 in 13 "
              "units of 10 slices, half the 16-row units' 2 x 13 x 10");

// ---- loads ----------------------------------------------------------------------------------------------------------
// 8 elements of E at p, stride apart, the first `valid` of them (any count, <= 0 included), zeros after: one element a
// load (a lane's chunk cut by an edge, A read through its strides).
template <typename E>
__device__ __forceinline__ uint4 load8_elements(const E* p, int64_t stride, int valid) {
  uint32_t h[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) h[e] = e < valid ? ptx::ld_global_nc_b16(p + e * stride) : 0u;
  return make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16);
}

// 8 consecutive elements of a row of B at p (16-byte aligned), the first `valid` of them: one streaming load where
// all 8 are inside.
template <typename E>
__device__ __forceinline__ uint4 load_b8(const E* p, int valid) {
  return valid >= 8 ? ptx::ld_global_nc_na_v4_b32(p) : load8_elements(p, 1, valid);
}

// threadIdx.x through an opaque read (asm volatile): what derives from it is computed again where this is read,
// not kept in a register from an earlier read.
__device__ __forceinline__ int opaque_thread_index() {
  int tid;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tid));
  return tid;
}

__device__ __forceinline__ void unpack(uint4 v, uint32_t (&r)[4]) { r[0] = v.x, r[1] = v.y, r[2] = v.z, r[3] = v.w; }

// ---- B rows off 16-byte boundaries (B_SHIFT) ----------------------------------------------------------------------
// A lane's 8 elements of a row start `shift` (0..7) elements past a 16-byte boundary: the lane loads the aligned
// chunk at or below them (its "own", a full 16-byte load), takes the next chunk from the neighbouring lane (whose own
// it is) or, at the end of the lanes' run, from the lane that loaded the chunk past it, and keeps elements shift ..
// shift + 7 of the 16.
__device__ __forceinline__ int shift_of(const void* p) { return int(reinterpret_cast<uintptr_t>(p) >> 1) & 7; }

// own[] := elements shift .. shift + 7 of (own, next) (element e in word e / 2, half e % 2): a barrel shifter of
// selects by 4 and 2 elements (whole words), then a byte permute by 1 (half words). No indexing by a run-time value
// (it would put the registers in local memory).
__device__ __forceinline__ void realign(uint32_t (&own)[4], const uint32_t (&next)[4], int shift) {
  const uint32_t w[8] = {own[0], own[1], own[2], own[3], next[0], next[1], next[2], next[3]};
  uint32_t u[6], v[5];
#pragma unroll
  for (int i = 0; i < 6; ++i) u[i] = (shift & 4) ? w[i + 2] : w[i];
#pragma unroll
  for (int i = 0; i < 5; ++i) v[i] = (shift & 2) ? u[i + 1] : u[i];
  const uint32_t sel = (shift & 1) ? 0x5432u : 0x3210u;
#pragma unroll
  for (int i = 0; i < 4; ++i) own[i] = __byte_perm(v[i], v[i + 1], sel);
}

// The first `valid` (any count) of a lane's 8 elements, zeros after (what a chunk holds past an edge may be padding).
__device__ __forceinline__ void keep_first(uint32_t (&r)[4], int valid) {
#pragma unroll
  for (int i = 0; i < 4; ++i) r[i] = 2 * i >= valid ? 0u : 2 * i + 1 >= valid ? r[i] & 0xffffu : r[i];
}

// The first `inside` (1 .. 7) elements of the aligned chunk at `chunk`, zeros after, in the widest aligned pieces that
// stay inside them (8, 4 and 2 bytes): nothing past the last of them is read.
template <typename E>
__device__ __forceinline__ uint4 load_chunk_head(const E* chunk, int inside) {
  const uint2 four = inside >= 4 ? ptx::ld_global_nc_v2_b32(chunk) : make_uint2(0u, 0u);
  const int at = inside & 4;  // the elements the 8-byte piece read (0 or 4)
  const uint32_t two = inside & 2 ? ptx::ld_global_nc_b32(chunk + at) : 0u;
  const uint32_t one = inside & 1 ? ptx::ld_global_nc_b16(chunk + at + (inside & 2)) : 0u;
  const uint32_t lo = inside & 2 ? two : one, hi = inside & 2 ? one : 0u;  // the words after the 8-byte piece
  return at ? make_uint4(four.x, four.y, lo, hi) : make_uint4(lo, hi, 0u, 0u);
}

// The aligned chunk at or below p (p `shift` elements past it) when it holds one of the `valid` elements from p on,
// or one of the `shift` before p (which the neighbouring lane keeps); zeros otherwise. `extra`: the chunk after it,
// when that holds one of the valid ones. Never a chunk with no element of the row, but a chunk may run past the
// row's end: on B's last row in storage order (`last`, in EDGE steps: its end may be the allocation's) such a chunk
// is read only up to that end (load_chunk_head).
template <typename E>
__device__ __forceinline__ uint4 load_chunk(const E* p, int shift, int valid, bool extra, bool last) {
  const int inside = shift + valid - (extra ? 8 : 0);  // the chunk's elements up to the row's end
  const E* chunk = p - shift + (extra ? 8 : 0);
  if (inside <= 0) return make_uint4(0u, 0u, 0u, 0u);
  return last && inside < 8 ? load_chunk_head(chunk, inside) : ptx::ld_global_nc_na_v4_b32(chunk);
}

// The next chunk of a lane's segment: the lane `down` lanes on loaded it (own[]), unless the lane is the last of its
// run (`last`), which takes `far` (that lane's register) from lane `holder`. Both shuffles run on every lane.
__device__ __forceinline__ void next_chunk(uint32_t (&next)[4], const uint32_t (&own)[4], const uint32_t (&far)[4],
                                           int down, int holder, bool last) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t near = __shfl_down_sync(0xffffffffu, own[i], down), away = __shfl_sync(0xffffffffu, far[i], holder);
    next[i] = last ? away : near;
  }
}

// How a lane reads its 8 elements of a row of A: kVector (A row-major with 16-byte aligned rows: one 16-byte load),
// kShifted (row-major with rows off 16 bytes: the aligned chunks under them, rebuilt as B_SHIFT rebuilds B's),
// kColumns (column-major with 16-byte aligned columns: 8 rows at one k a load, turned by ldmatrix.trans through the
// warp's staging buffer, load_a_columns), kElements (other strides: one load an element). A launch picks one
// (launch_mma_stream).
enum class ARead : int { kElements, kVector, kShifted, kColumns };

// The warp's staging buffer of column-major A: per (k32 chunk s, n8 tile i) 32 slots of 16 bytes, slot r holding
// rows m0 + 8i .. + 7 of A at k = k0 + 32s + r, placed at a_slot(r): within each 8 slots, rotated by 2 per group
// of 8, so that the 8 rows one ldmatrix.trans matrix reads (2p + e + 8q, e < 2, q < 4) fall in 8 different 16-byte
// bank groups, as do the 8 rows a quarter-warp stores.
__device__ __forceinline__ int a_slot(int r) { return (r & ~7) | ((r + 2 * (r >> 3)) & 7); }

// 8 consecutive elements of a row of row-major A at p, off 16 bytes, the first `valid` of them (any count), zeros
// after: the aligned chunk at or below p and, where one of the valid elements lies in it, the next, cached in L1 as
// A's aligned loads are, then realign. No chunk without a valid element is read, but the chunks may run past the
// row's end: A's last row is read element by element where its end is near (load_a's EDGE).
template <typename E>
__device__ __forceinline__ uint4 load_a8_shifted(const E* p, int valid) {
  if (valid <= 0) return make_uint4(0u, 0u, 0u, 0u);
  const int shift = shift_of(p);
  uint32_t own[4], next[4] = {0u, 0u, 0u, 0u};
  unpack(ptx::ld_global_nc_v4_b32(p - shift), own);
  if (shift > 0 && valid > 8 - shift) unpack(ptx::ld_global_nc_v4_b32(p - shift + 8), next);
  realign(own, next, shift);
  keep_first(own, valid);
  return make_uint4(own[0], own[1], own[2], own[3]);
}

// A's part of a warp step for column-major A with 16-byte aligned columns (ARead::kColumns), two n8 tiles at a time
// through the warp's staging buffer `stage`: per (s, i) lane r loads rows m0 + 8i .. + 7 at k = k0 + 32s + r (one
// 16-byte load; zeros past M and K) into slot a_slot(r), and ldmatrix.x4.trans gives lane (g, t) rows g at k0 + 32s +
// 8t .. + 7, the order the other reads give: matrix p's row c is slot k = 8 (c / 2) + 2p + c % 2, so its transposed
// fragment puts k = 8t + 2p and 8t + 2p + 1 of row g in lane (g, t)'s register p. One load, one store and a quarter
// of an ldmatrix a lane where the element reads take eight loads.
template <int KS, int MT, typename E>
__device__ __forceinline__ void load_a_columns(uint32_t (&a)[KS][MT][4], const E* A, int64_t lda, int M, int K, int m0,
                                               int k0, uint4* stage) {
  const int lane = threadIdx.x % 32, c = lane % 8, p = lane / 8;
  const int tiles = tile::cdiv(M - m0, 8);  // n8 tiles with a row inside M (warp-uniform); those after are zeros
  const uint32_t base = ptx::smem_u32(stage + a_slot(8 * (c / 2) + 2 * p + c % 2));
#pragma unroll
  for (int i0 = 0; i0 < MT; i0 += 2) {
    __syncwarp();  // the last ldmatrix reads are done before their slots are written again
#pragma unroll
    for (int s = 0; s < KS; ++s)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int mb = m0 + 8 * (i0 + i), k = k0 + 32 * s + lane;
        if (i0 + i < tiles) {
          uint4 v = make_uint4(0u, 0u, 0u, 0u);
          if (k < K) {
            const E* q = A + int64_t(k) * lda + mb;
            v = M - mb >= 8 ? ptx::ld_global_nc_v4_b32(q) : load8_elements(q, 1, M - mb);
          }
          stage[(2 * s + i) * 32 + a_slot(lane)] = v;
        }
      }
    __syncwarp();
#pragma unroll
    for (int s = 0; s < KS; ++s)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        uint32_t(&r)[4] = a[s][i0 + i];
        if (i0 + i < tiles)
          ptx::ldmatrix_x4_trans(r[0], r[1], r[2], r[3], base + (2 * s + i) * 32 * int(sizeof(uint4)));
        else
          r[0] = r[1] = r[2] = r[3] = 0u;
      }
  }
}

// A's part of a warp step: rows m0 + 8i + g (i < MT: the MMA's n8 tiles, two or four) at k0 + 32s + 8t .. + 7
// (s < KS), zeros past M and K, read as `a_read` says (16-byte loads cached in L1: every warp of the block working on
// this k reads them; column-major A through `stage`, load_a_columns, in the instances compiled with COLUMNS: those
// that do not rebuild B's rows, which have no registers to spare for it). EDGE: the step may hold the end of A's last
// row, which is then read element by element (a shifted read's chunks could run past it, past A's allocation).
template <int KS, bool COLUMNS, bool EDGE, int MT, typename E>
__device__ __forceinline__ void load_a(uint32_t (&a)[KS][MT][4], const E* A, int64_t sam, int64_t sak, int M, int K,
                                       int m0, int k0, ARead a_read, uint4* stage) {
  if constexpr (COLUMNS) {
    if (a_read == ARead::kColumns) {
      load_a_columns<KS>(a, A, sak, M, K, m0, k0, stage);
      return;
    }
  }
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int s = 0; s < KS; ++s)
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      const int m = m0 + 8 * i + g, k = k0 + 32 * s + 8 * t;
      uint4 v = make_uint4(0u, 0u, 0u, 0u);
      if (m < M) {
        const E* p = A + int64_t(m) * sam + int64_t(k) * sak;
        if (a_read == ARead::kVector && K - k >= 8)
          v = ptx::ld_global_nc_v4_b32(p);
        else if (a_read == ARead::kShifted && !(EDGE && m == M - 1))
          v = load_a8_shifted(p, K - k);
        else
          v = load8_elements(p, sak, K - k);
      }
      unpack(v, a[s][i]);
    }
}

// ---- one warp step: loads, then MMAs --------------------------------------------------------------------------------
// acc[j][i]: MMA row block j (columns Warp::col(j, ..)) x n8 tile i (rows m0 + 8i ..; MT of them: the unit's rows
// over 8) of the warp's part of C^T.
// EDGE: some of the step's loads fall past N or K (each lane tests its own); otherwise none does. B_SHIFT: B's rows
// are not all 16-byte aligned (each lane rebuilds its 8 elements of a row from two aligned chunks: load_chunk,
// next_chunk, realign).
template <bool EDGE, bool B_COL, bool B_SHIFT, Acc ACC, int MT, typename E>
__device__ __forceinline__ void warp_step(tile::MmaAcc<ACC, E> (&acc)[Warp<B_COL>::RB][MT], const E* A, const E* B,
                                          int64_t sam, int64_t sak, int64_t ldb, int M, int N, int K, int m0, int n0,
                                          int k0, ARead a_read, uint4* stage) {
  using W = Warp<B_COL>;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  if constexpr (!B_COL) {
    // ---- B row-major: 8 rows x 8 columns a lane; registers q[r][j] hold columns 8g + 2j, 8g + 2j + 1 of row r ----
    uint32_t a[W::KS][MT][4];
    uint32_t q[8][4];
    int sh[8];  // B_SHIFT: row r's shift
    const int n = n0 + 8 * g, k = k0 + 8 * t;
#pragma unroll
    for (int r = 0; r < 8; ++r) {
      const E* p = B + int64_t(k + r) * ldb + n;
      uint4 v = make_uint4(0u, 0u, 0u, 0u);
      if constexpr (B_SHIFT) {
        sh[r] = shift_of(p);
        if (!EDGE || k + r < K) v = load_chunk(p, sh[r], EDGE ? N - n : 8, false, EDGE && k + r == K - 1);
      } else {
        if (!EDGE) v = ptx::ld_global_nc_na_v4_b32(p);
        else if (k + r < K) v = load_b8(p, N - n);
      }
      unpack(v, q[r]);
    }
    if constexpr (B_SHIFT) {
      // the 8 lanes of a t run along a row: lane g's next chunk is lane g + 1's own; the run's last (g = 7) takes the
      // chunk past the warp's 64 columns, which lane (r, t) loaded for row r (`far`: one extra load a lane)
      uint32_t far[4];
      const E* px = B + int64_t(k + g) * ldb + n0 + 56;
      unpack(!EDGE || k + g < K ? load_chunk(px, shift_of(px), N - (n0 + 56), true, EDGE && k + g == K - 1)
                                 : make_uint4(0u, 0u, 0u, 0u),
             far);
#pragma unroll
      for (int r = 0; r < 8; ++r) {
        uint32_t next[4];
        next_chunk(next, q[r], far, 4, 4 * r + t, g == 7);
        realign(q[r], next, sh[r]);
        if (EDGE) keep_first(q[r], k + r < K ? N - n : 0);
      }
    }
    load_a<W::KS, !B_SHIFT, EDGE>(a, A, sam, sak, M, K, m0, k0, a_read, stage);
    // ---- MMAs: row block j's rows g / g + 8 are columns 8g + 2j / 8g + 2j + 1 (the low / high halves of q[.][j]);
    // k16 step h's slots 2t, 2t+1 are rows 4h, 4h + 1 of the lane's 8, slots 2t + 8, 2t + 9 rows 4h + 2, 4h + 3 ----
#pragma unroll
    for (int j = 0; j < W::RB; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t f[4] = {__byte_perm(q[4 * h][j], q[4 * h + 1][j], 0x5410),
                               __byte_perm(q[4 * h][j], q[4 * h + 1][j], 0x7632),
                               __byte_perm(q[4 * h + 2][j], q[4 * h + 3][j], 0x5410),
                               __byte_perm(q[4 * h + 2][j], q[4 * h + 3][j], 0x7632)};
#pragma unroll
        for (int i = 0; i < MT; ++i) acc[j][i].mma(f, {a[0][i][2 * h], a[0][i][2 * h + 1]});
      }
  } else {
    // ---- B column-major: per row block j, columns g and g + 8 (hh), k chunks s: q[j][hh][s] ----
    uint32_t q[W::RB][2][W::KS][4];
#pragma unroll
    for (int j = 0; j < W::RB; ++j)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh)
#pragma unroll
        for (int s = 0; s < W::KS; ++s) {
          const int n = n0 + W::col(j, hh, g), k = k0 + 32 * s + 8 * t;
          const E* p = B + int64_t(n) * ldb + k;
          uint4 v = make_uint4(0u, 0u, 0u, 0u);
          if constexpr (B_SHIFT) {
            if (!EDGE || n < N) v = load_chunk(p, shift_of(p), EDGE ? K - k : 8, false, EDGE && n == N - 1);
          } else {
            if (!EDGE) v = ptx::ld_global_nc_na_v4_b32(p);
            else if (n < N) v = load_b8(p, K - k);
          }
          unpack(v, q[j][hh][s]);
        }
    if constexpr (B_SHIFT) {
      // the 4 lanes of a g run along a column's 32 k of chunk s: lane t's next chunk is lane t + 1's own; the run's
      // last (t = 3) takes, for s = 0, lane t = 0's own chunk of s = 1, and for s = 1 the chunk past the warp's 64 k,
      // which lane (g, 2j + hh) loaded for row block j's column hh (`far`: one extra load a lane)
      static_assert(W::RB * 2 == 4 && W::KS == 2, "4 lanes hold the far chunks of a g's 4 columns, 2 k32 chunks each");
      uint32_t far[4];
      const int nx = n0 + W::col(t / 2, t % 2, g);
      const E* px = B + int64_t(nx) * ldb + k0 + 56;
      unpack(!EDGE || nx < N ? load_chunk(px, shift_of(px), K - (k0 + 56), true, EDGE && nx == N - 1)
                              : make_uint4(0u, 0u, 0u, 0u),
             far);
#pragma unroll
      for (int j = 0; j < W::RB; ++j)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh)
#pragma unroll
          for (int s = 0; s < W::KS; ++s) {  // s = 0 first: it reads s = 1's own chunk before that is rebuilt
            uint32_t next[4];
            next_chunk(next, q[j][hh][s], s == 0 ? q[j][hh][1] : far, 1, s == 0 ? 4 * g : 4 * g + 2 * j + hh, t == 3);
            // the column's shift, the same for all its chunks (they start 8 elements apart)
            realign(q[j][hh][s], next, shift_of(B + int64_t(n0 + W::col(j, hh, g)) * ldb + k0));
            if (EDGE) keep_first(q[j][hh][s], n0 + W::col(j, hh, g) < N ? K - (k0 + 32 * s + 8 * t) : 0);
          }
    }
    // ---- MMAs: k16 step h of chunk s takes registers 2h (slots 2t, 2t+1) and 2h + 1 (slots 2t + 8, 2t + 9). A's
    // fragments in batches of SB k32 chunks x IB n8 tiles: the whole step at 16 rows (one batch, its loads together),
    // one chunk x 16 rows at a time at 32 (the registers of two blocks an SM hold no more) ----
    constexpr int SB = MT > 2 ? 1 : W::KS, IB = MT > 2 ? 2 : MT;
#pragma unroll
    for (int s0 = 0; s0 < W::KS; s0 += SB)
#pragma unroll
      for (int i0 = 0; i0 < MT; i0 += IB) {
        uint32_t as[SB][IB][4];
        load_a<SB, !B_SHIFT, EDGE>(as, A, sam, sak, M, K, m0 + 8 * i0, k0 + 32 * s0, a_read, stage);
#pragma unroll
        for (int j = 0; j < W::RB; ++j)
#pragma unroll
          for (int s = 0; s < SB; ++s)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const uint32_t f[4] = {q[j][0][s0 + s][2 * h], q[j][1][s0 + s][2 * h], q[j][0][s0 + s][2 * h + 1],
                                     q[j][1][s0 + s][2 * h + 1]};
#pragma unroll
              for (int i = 0; i < IB; ++i) acc[j][i0 + i].mma(f, {as[s][i][2 * h], as[s][i][2 * h + 1]});
            }
      }
  }
}

// An accumulator's row half hh (MMA row g or g + 8) as two floats: MMA columns 2t, 2t + 1 (rows 2t, 2t + 1 of C's
// n8 tile).
template <typename E>
__device__ __forceinline__ float2 acc_pair(const tile::MmaAcc<Acc::F32, E>& c, int hh) {
  return make_float2(c.v[2 * hh], c.v[2 * hh + 1]);
}
__device__ __forceinline__ float2 acc_pair(const tile::MmaAcc<Acc::F16, half>& c, int hh) {
  return __half22float2(c.pair(hh));
}

// ---- the kernel ---------------------------------------------------------------------------------------------------
// Units u = blockIdx.x, blockIdx.x + gridDim.x, ...: slice u / tiles; within a slice the ROWS-row blocks of a column
// block are adjacent (they read the same B, which the first brings into L2), then the column blocks. ROWS: a unit's
// rows, 16 or 32 (two or four n8 tiles of the MMA on each piece of B loaded; the partial sums meet in shared memory
// 16 rows at a time). ws: the
// workspace (S > 1: slice s at ws + s M ldw, M x ldw fp32), or null (S = 1: the blocks store C). `a_read`: how A's
// rows are read (ARead); `c_vec`: C takes 8-byte stores of 4 elements. B_SHIFT: B's base or leading
// dimension is not 16-byte aligned (warp_step).
template <typename E, Acc ACC, bool B_COL, bool B_SHIFT, int ROWS>
__global__ void __launch_bounds__(kThreads, kBlocksPerSM<ROWS, B_COL>)
    mma_stream_kernel(const E* __restrict__ A, const E* __restrict__ B, E* __restrict__ C, float* __restrict__ ws,
                      int M, int N, int K, int64_t sam, int64_t sak, int64_t ldb, int64_t ldc, int ldw, int split,
                      ARead a_read, bool c_vec) {
  using W = Warp<B_COL>;
  constexpr int WN = kWN<B_COL>, WK = kWK<B_COL>, MT = ROWS / 8;
  static_assert(ROWS == kRows || ROWS == 2 * kRows, "16- or 32-row units");
  // the warps' partial sums (warp's k share, row of C, column of the unit), then each warp's staging of column-major
  // A (load_a_columns: 2 KS x 32 slots of 16 bytes a warp), in one array, so that every instance has the same
  // static shared memory (the B_SHIFT ones stage nothing)
  constexpr int kPartial = WK * kRows * (kCols + kPad), kStage = kWarps * 2 * W::KS * 32;
  __shared__ __align__(16) float smem[kPartial + 4 * kStage];
  auto& partial = *reinterpret_cast<float(*)[WK][kRows][kCols + kPad]>(smem);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  uint4* const a_stage = reinterpret_cast<uint4*>(smem + kPartial) + warp * 2 * W::KS * 32;
  const int wn = warp % WN, wk = warp / WN;
  const int mblocks = tile::cdiv(M, ROWS), tiles = tile::cdiv(N, kCols) * mblocks;
  const int steps = tile::cdiv(K, kStepK), units = tiles * split;

  for (int u = blockIdx.x; u < units; u += gridDim.x) {
    const int slice = u / tiles, tile_id = u % tiles;
    const int m0 = (tile_id % mblocks) * ROWS, c0 = (tile_id / mblocks) * kCols;
    // slice s: steps / split steps, one more for the first steps % split slices (32-bit: no 64-bit division call)
    const int per = steps / split, extra = steps % split;
    const int step0 = slice * per + min(slice, extra), step1 = step0 + per + (slice < extra);
    const int n0 = c0 + wn * W::N;  // the warp's columns

    // ---- MAIN LOOP: the warp's k chunk of each step of the slice ----
    tile::MmaAcc<ACC, E> acc[W::RB][MT];
    if (n0 < N) {
      // B_SHIFT's chunks (and a shifted read of A's) may run past a row's end, past the allocation where the row is
      // the operand's last: interior steps end a chunk (8 elements) short of K (and with row-major B_SHIFT of N), and
      // EDGE steps read the operands' last rows only up to their ends (load_chunk's and load_a's `last`)
      constexpr int kTailN = B_SHIFT && !B_COL ? 8 : 0;
      const bool full_n = n0 + W::N + kTailN <= N;
      for (int step = step0; step < step1; ++step) {
        const int k0 = step * kStepK + wk * W::K;
        if (k0 >= K) break;
        if (full_n && k0 + W::K + 8 <= K)
          warp_step<false, B_COL, B_SHIFT>(acc, A, B, sam, sak, ldb, M, N, K, m0, n0, k0, a_read, a_stage);
        else
          warp_step<true, B_COL, B_SHIFT>(acc, A, B, sam, sak, ldb, M, N, K, m0, n0, k0, a_read, a_stage);
      }
    }

    // ---- EPILOGUE: per 16 rows of the unit, the warps' partial sums into shared memory, added in warp order,
    // stored. The unit's first column from n0 and the warp's offset, read afresh (a 32-row unit of column-major B
    // has no register to keep them in across the main loop) ----
    const int warp_cols = opaque_thread_index() / 32 % WN * W::N, u0 = n0 - warp_cols;
#pragma unroll
    for (int h = 0; h < MT / 2; ++h) {
      if (h > 0) {
        if (m0 + kRows * h >= M) break;  // block-uniform: the rest of the unit lies below M
        __syncthreads();                 // the last 16 rows' partial sums are read before these are written
      }
#pragma unroll
      for (int j = 0; j < W::RB; ++j)
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            const float2 v = acc_pair(acc[j][2 * h + i], hh);
            const int col = warp_cols + W::col(j, hh, g), row = 8 * i + 2 * t;
            partial[wk][row][col] = v.x;
            partial[wk][row + 1][col] = v.y;
          }
      __syncthreads();
      // (the loop's start read afresh too: ptxas then keeps a whole step of B in flight in every instance)
      for (int idx = opaque_thread_index(); idx < kRows * kCols / 4; idx += kThreads) {
        const int row = idx / (kCols / 4), col = idx % (kCols / 4) * 4;
        float4 sum = *reinterpret_cast<const float4*>(&partial[0][row][col]);
#pragma unroll
        for (int w = 1; w < WK; ++w) {
          const float4 v = *reinterpret_cast<const float4*>(&partial[w][row][col]);
          sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
        }
        const int m = m0 + kRows * h + row, n = u0 + col;
        if (m >= M || n >= N) continue;
        if (ws != nullptr)  // n + 3 < ldw: n is a multiple of 4 below N, and ldw is N rounded up to 4
          *reinterpret_cast<float4*>(ws + (int64_t(slice) * M + m) * ldw + n) = sum;
        else
          splitk::store4(C + int64_t(m) * ldc + n, sum, N - n, c_vec);
      }
    }
    __syncthreads();  // the partial sums are read before the next unit writes them
  }
  ptx::griddepcontrol_launch_dependents();  // the reduction (S > 1) may be scheduled as the last units finish
}

// Blocks of `kernel` resident at once on this device (the persistent grid's size), asked once per device.
template <auto KERNEL>
int resident_blocks() {
  static std::atomic<int> cache[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 0;
  int blocks = dev < 64 ? cache[dev].load(std::memory_order_relaxed) : 0;
  if (blocks > 0) return blocks;
  int per_sm = 0, sms = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, KERNEL, kThreads, 0) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || per_sm * sms <= 0) {
    cudaGetLastError();  // not sticky: the plan falls back to one block per SM
    return sms > 0 ? sms : 1;
  }
  blocks = per_sm * sms;
  if (dev < 64) cache[dev].store(blocks, std::memory_order_relaxed);
  return blocks;
}

}  // namespace

// ---- HOST: check -> plan -> workspace -> launches ----
// GemmArgs::split pins S (1 .. kMaxSplit, cut to the k-steps there are and to a workspace of
// splitk::kMaxWorkspaceBytes); GemmArgs::plan_tile and ::tile are not read (one tile).
template <typename E>
cudaError_t launch_mma_stream(const GemmArgsOf<E>& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  const int64_t ldb = p.b_col_major ? p.sbn : p.sbk;
  if (reinterpret_cast<uintptr_t>(p.B) % sizeof(E) != 0) return cudaErrorMisalignedAddress;  // whole elements
  // rows off 16-byte boundaries: the instance that rebuilds them from aligned chunks (one flag a launch, not a load)
  const bool b_shift = !tile::aligned16(p.B) || ldb % 8 != 0;
  if (p.M <= 0 || p.N <= 0) return cudaSuccess;
  const bool a_rows_aligned = (p.sam % 8 == 0 || p.M == 1) && tile::aligned16(p.A);
  const bool a_cols_aligned = p.sam == 1 && p.sak % 8 == 0 && tile::aligned16(p.A) && !b_shift;  // load_a
  const ARead a_read = p.sak == 1      ? (a_rows_aligned ? ARead::kVector : ARead::kShifted)
                       : a_cols_aligned ? ARead::kColumns
                                        : ARead::kElements;
  const bool c_vec = p.ldc % 4 == 0 && reinterpret_cast<uintptr_t>(p.C) % 8 == 0;
  const int ldw = (p.N + 3) / 4 * 4;
  auto launch = [&](auto acc_c, auto b_col_c, auto shift_c, auto rows_c) -> cudaError_t {
    constexpr int rows = rows_c.value;
    constexpr auto kernel = mma_stream_kernel<E, acc_c.value, b_col_c.value, shift_c.value, rows>;
    StreamPlan plan = plan_stream(p.M, p.N, p.K, resident_blocks<kernel>(), p.split, rows);
    const int64_t slice_bytes = int64_t(p.M) * ldw * int64_t(sizeof(float));
    if (const int capped = splitk::cap_split(plan.split, slice_bytes); capped != plan.split)
      plan = plan_stream(p.M, p.N, p.K, resident_blocks<kernel>(), capped, rows);
    const int64_t bytes = plan.split > 1 ? plan.split * slice_bytes : 0;
    if (info) info->workspace_bytes = bytes;
    if (p.workspace_bytes < bytes) return kWorkspaceNeeded;
    float* ws = plan.split > 1 ? static_cast<float*>(p.workspace) : nullptr;
    constexpr int smem = int(sizeof(float)) * kWK<b_col_c.value> * kRows * (kCols + kPad) +  // the kernel's static
                         int(sizeof(uint4)) * kWarps * 2 * Warp<b_col_c.value>::KS * 32;
    if (info) {
      const int limit = info->smem_limit;
      *info = LaunchInfo{unsigned(plan.grid), 1, unsigned(kThreads), smem, limit, rows, kCols, plan.split};
      info->kernel = "mma_stream";
      info->workspace_bytes = bytes;
    }
    kernel<<<plan.grid, kThreads, 0, stream>>>(p.A, p.B, p.C, ws, p.M, p.N, p.K, p.sam, p.sak, ldb, p.ldc, ldw,
                                               plan.split, a_read, c_vec);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess || ws == nullptr) return err;
    return splitk::launch_reduce<E>(ws, plan.split, ldw, p.C, p.ldc, p.M, p.N, stream);
  };
  using Rows16 = std::integral_constant<int, kRows>;
  using Rows32 = std::integral_constant<int, 2 * kRows>;
  return tile::dispatch<E>(acc, p.b_col_major, [&](auto acc_c, auto b_col_c) {
    auto with_rows = [&](auto shift_c) {
      return stream_rows(p.M) == kRows ? launch(acc_c, b_col_c, shift_c, Rows16{})
                                       : launch(acc_c, b_col_c, shift_c, Rows32{});
    };
    return b_shift ? with_rows(std::true_type{}) : with_rows(std::false_type{});
  });
}

HGEMM_VARIANT_FP16_BF16(mma_stream, launch_mma_stream, AnyMajor);
