// blocks/stream_k.cuh — the stream-K schedule of a persistent Hopper kernel and the fix-up of its cut tiles.
//
// The schedule is hgemm_common/schedules.py's `stream_k_cut`, the rule the Triton stream-K kernel
// (triton_kernels/streamk.py) runs and the cost model prices, with the same names and constants: T output tiles of
// I k-iterations (k-blocks) each on G = min(SMs, T x I) programs run T // G whole rounds data-parallel, and the
// R = T % G tiles of the partial round are each cut into S k-slices, S = min(kMaxSlices, G // R, I //
// kMinSliceIters); slice j of every cut tile covers k-blocks [j I / S, (j + 1) I / S), so the programs of one row
// or column of cut tiles read the same A and B blocks at the same time and share them in L2. Where S < 2 nothing is
// cut. tests/test_hopper_cpu.py compares the two rules over many (T, I, SMs).
//
// The fix-up, in a second launch as the Triton kernel's (triton_kernels/streamk.py, `streamk_fixup_kernel`): each
// consumer warpgroup of a slice's program writes its 64 x BN fp32 partial into workspace slot (tile, j)
// (stream_k_write_slot) and goes straight on to its data-parallel tiles; stream_k_fix_up_kernel, queued behind the
// GEMM on the stream, adds each cut tile's S slots in slot order j = 0, 1, ..., S - 1 and stores C. The order of
// the sum is fixed, so the bits never depend on which slice finished first; no atomic and no counter is involved.
// (Until then the warpgroup that arrived last at its tile half's counter added the S slots itself, on its one SM,
// before it could start its data-parallel tiles: the Triton kernel's profile in docs/design/triton.md, "The fix-up
// in a second launch", shows what that cost.)
#pragma once
#include "blocks/wgmma_tile.cuh"

namespace hopper {

// Slices per cut tile at most, and k-blocks per slice at least: hgemm_common/schedules.py's MAX_SLICES and
// MIN_SLICE_ITERS, for the reasons given there (the fix-up reads S fp32 blocks one after another; a slice shorter
// than the TMA ring's depth never fills it).
constexpr int kMaxSlices = 8, kMinSliceIters = 4;

struct StreamKCut {
  int programs;  // G
  int sk_tiles;  // R: the cut tiles, the first R in the grouped tile order (0 where nothing is cut)
  int slices;    // S (1 where nothing is cut)
};

// (G, R, S) of `tiles` output tiles of `iters` k-blocks each on `sms` SMs: R = 0 and S = 1 where cutting is not
// worth it (no partial round, one more than half full, or a K too short to slice).
__host__ __device__ constexpr StreamKCut stream_k_cut(int tiles, int iters, int sms) {
  const int64_t work = int64_t(tiles) * iters;
  const int g = sms < work ? (sms > 1 ? sms : 1) : (work > 1 ? int(work) : 1);
  const int rest = tiles % g;
  int slices = 1;
  if (rest) {
    slices = kMaxSlices < g / rest ? kMaxSlices : g / rest;
    slices = slices < iters / kMinSliceIters ? slices : iters / kMinSliceIters;
  }
  return slices >= 2 ? StreamKCut{g, rest, slices} : StreamKCut{g, 0, 1};
}
static_assert(stream_k_cut(64, 128, 132).sk_tiles == 64 && stream_k_cut(64, 128, 132).slices == 2 &&
                  stream_k_cut(512, 64, 132).sk_tiles == 0 && stream_k_cut(512, 64, 132).slices == 1 &&
                  stream_k_cut(400, 64, 132).sk_tiles == 4 && stream_k_cut(400, 64, 132).slices == 8 &&
                  stream_k_cut(264, 64, 132).sk_tiles == 0 && stream_k_cut(10, 7, 132).slices == 1 &&
                  stream_k_cut(3, 30, 7).sk_tiles == 3 && stream_k_cut(3, 30, 7).slices == 2,
              "worked cases: 200 x 8192 x 8192 (64 tiles of 128 x 256 on 132 SMs) cuts every tile in two; 4096^2 "
              "(512 tiles: a partial round of 116, more than half full) is not cut; 400 tiles leave 4, cut in 8; "
              "whole rounds and short K are not cut; 3 tiles on 7 programs in 2 slices");

// The launch of a stream-K schedule: the grid, and which tiles are cut into how many slices. Where nothing is cut
// the grid is the persistent kernel's (`persistent_blocks` with `policy`, GemmArgs::grid); with whole rounds it is
// G (their stride); without, one program per slice.
struct StreamKLaunch {
  int programs, sk_tiles, slices;
};
constexpr StreamKLaunch stream_k_launch(int tiles, int iters, int sms, int policy) {
  const StreamKCut cut = stream_k_cut(tiles, iters, sms);
  if (cut.slices < 2) return {persistent_blocks(tiles, sms, policy), 0, 1};
  return {tiles >= cut.programs ? cut.programs : cut.sk_tiles * cut.slices, cut.sk_tiles, cut.slices};
}
static_assert(stream_k_launch(64, 128, 132, 0).programs == 128 && stream_k_launch(400, 64, 132, 0).programs == 132 &&
                  stream_k_launch(512, 64, 132, 0).programs == 128 && stream_k_launch(3, 30, 7, 0).programs == 6,
              "worked cases: 64 tiles in 2 slices on 128 programs; 400 tiles on 132 (3 whole rounds, then 4 tiles in "
              "8 slices); 512 tiles data-parallel on the persistent kernel's 128 blocks; 3 tiles x 2 slices");

// k-blocks [first, end) of slice j of a cut tile (the same range for every cut tile): lengths differ by at most one.
__host__ __device__ constexpr int slice_first(int j, int iters, int slices) {
  return int(int64_t(j) * iters / slices);
}

// The workspace of a stream-K launch: one slot of BM x BN fp32 per (cut tile, slice). A slot holds each consumer
// warpgroup's half in its fragment order (float2 q of thread t at q x 128 + t: a warp's stores and loads are 256
// contiguous bytes); the fix-up's thread t of that half reads the same positions back.
template <int BM, int BN>
struct StreamKWorkspace {
  static constexpr int kHalves = BM / 64, kPairs = BN / 4;  // float2 per thread and half: BN / 8 blocks x 2 rows
  static constexpr int64_t kSlotBytes = int64_t(BM) * BN * 4;
  static constexpr int64_t kSlotPairs = int64_t(kHalves) * kPairs * kWarpgroup;  // float2 from slot j to j + 1
  static constexpr int64_t bytes(int sk_tiles, int slices) { return sk_tiles * slices * kSlotBytes; }
  // thread t's first float2 of half `half` in slot (tile, 0)
  __host__ __device__ static constexpr int64_t first(int tile, int slices, int half, int t) {
    return int64_t(tile) * slices * kSlotPairs + int64_t(half) * kPairs * kWarpgroup + t;
  }
};

// ---- a slice's partial into its slot ---------------------------------------------------------------------------
// A consumer warpgroup holding accumulators d of slice j of cut tile `tile` (`half`: its 64-row half) writes them
// into slot (tile, j), bypassing L1 (the fix-up kernel reads them on other SMs).
template <int BM, int BN, typename AccRegs>
__device__ __forceinline__ void stream_k_write_slot(const AccRegs& d, float2* slots, int tile, int j, int slices,
                                                    int half) {
  using W = StreamKWorkspace<BM, BN>;
  float2* mine = slots + W::first(tile, slices, half, threadIdx.x % kWarpgroup) + j * W::kSlotPairs;
#pragma unroll
  for (int q = 0; q < W::kPairs; ++q) __stcg(mine + q * kWarpgroup, fragment_float2(d, q / 2, q % 2));
}

// ---- the fix-up: a second launch -------------------------------------------------------------------------------
// Block (tile, half, part) of grid (cut tiles, BM / 64, kFixUpParts), one warpgroup: thread t adds its float2s
// q = part x kPairs / kFixUpParts .. of the S slots of its half in slot order and stores each sum, as the
// warpgroup's own epilogue would have stored that fragment pair, masked to M x N (register stores: a cut tile may
// lie on an edge).
constexpr int kFixUpParts = 4;

template <int BM, int BN, int GROUP_M, typename E>
__global__ void __launch_bounds__(kWarpgroup)
    stream_k_fix_up_kernel(const float2* __restrict__ slots, E* __restrict__ C, int64_t ldc, int M, int N,
                           int slices, bool pairs) {
  using W = StreamKWorkspace<BM, BN>;
  static_assert(W::kPairs % kFixUpParts == 0, "the parts split a thread's float2s evenly");
  constexpr int kPerPart = W::kPairs / kFixUpParts;
  const int tile = blockIdx.x, half = blockIdx.y, q0 = blockIdx.z * kPerPart, t = threadIdx.x;
  int tm, tn;
  tile_coords<GROUP_M>(tile, cdiv(M, BM), cdiv(N, BN), tm, tn);
  const float2* first = slots + W::first(tile, slices, half, t);
  const int warp = t / 32, lane = t % 32, r = tm * BM + half * 64 + warp * 16 + lane / 4;
#pragma unroll 4
  for (int q = q0; q < q0 + kPerPart; ++q) {
    float2 sum = __ldcg(first + q * kWarpgroup);
    for (int s = 1; s < slices; ++s) {  // slot order
      const float2 v = __ldcg(first + s * W::kSlotPairs + q * kWarpgroup);
      sum.x += v.x, sum.y += v.y;
    }
    const int c = tn * BN + 8 * (q / 2) + 2 * (lane % 4);
    store_pair(C, ldc, M, N, r + 8 * (q % 2), c, tile::pair_bits<E>(sum.x, sum.y), pairs);
  }
}

}  // namespace hopper
