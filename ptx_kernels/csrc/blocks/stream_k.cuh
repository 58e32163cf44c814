// blocks/stream_k.cuh — stream-K for the last rounds of a persistent grid: whole tiles while every block has one,
// then the remaining tiles' k-blocks cut into one contiguous range per block, so no SM idles in a last round.
//
// With T tiles on P blocks, T % P != 0 leaves a last round of T % P tiles while the other SMs wait (480 tiles of
// 3000 x 5000 x 2000 on 132 SMs: 4 rounds, the last 64% full; the balanced grid makes every round full on 120
// blocks but still takes 4 tile-times where 3.64 would do). Here the first (T / P - 1) * P tiles go whole to the
// blocks in rounds (data-parallel); the last S = T - dp_tiles tiles (P <= S < 2P) are laid out as S * kblocks
// k-iterations, tile after tile, and block b takes iterations [S kblocks b / P, S kblocks (b + 1) / P): about
// S / P >= 1 tiles' worth. A range then begins with the tail of one tile (k0 > 0), may hold whole tiles, and ends
// with the head of another (k1 < kblocks); a tile is cut at most once, between the head in block b and the tail in
// block b + 1 (each range is at least one tile long).
//
// Fix-up, deterministic: the tail's warpgroups store their partial accumulators (fp32, or fp16 pairs) to slot b of
// a global workspace and raise flag (b, warpgroup) to this launch's token; the head's warpgroups, when their own
// k-blocks are done (a block's last unit), wait for the flag, add the partial and store the tile as usual. Every
// tile's sum is head + tail in that order, whatever the timing. Waits only run from block b to b + 1, whose tail is
// the first unit of its range: no cycle, and no chain through a block's whole range. (It relies on the blocks being
// co-resident, as a persistent grid of at most one block per SM is when the GEMM has the GPU; a kernel that held
// SMs forever beside it would stall it, as it would any persistent kernel's last blocks.)
//
// The workspace comes from a stream-ordered pool of this library's own (host side below), so concurrent launches
// on different streams never share one; flags hold the token of the launch that raised them, and tokens only grow,
// so a reused workspace needs no clearing.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <mutex>

#include "blocks/wgmma_tile.cuh"
#include "ptx/barrier.cuh"
#include "ptx/flag.cuh"

namespace hopper {

// Kernel argument: the split of the tiles and the fix-up buffers (sk_iters = 0: every tile whole).
struct StreamK {
  int dp_tiles = 0;              // tiles [0, dp_tiles): whole, in rounds of gridDim.x blocks
  int64_t sk_iters = 0;          // k-blocks of tiles [dp_tiles, tiles), cut into gridDim.x contiguous ranges
  uint32_t* partials = nullptr;  // slot b: a tail's accumulators, (warpgroup, word / 4, thread) x 4 words
  uint64_t* flags = nullptr;     // slot b, warpgroup w: `token` once the tail's partial for slot b is stored
  uint64_t token = 0;            // this launch's mark
};

// Every unit of work of this block in order: f(tile, k0, k1) with k-blocks [k0, k1) of the tile. The producer and
// the consumers walk the same sequence, so the ring's stages and phases line up.
template <typename F>
__device__ __forceinline__ void for_each_unit(const StreamK& sk, int kblocks, F&& f) {
  for (int t = blockIdx.x; t < sk.dp_tiles; t += gridDim.x) f(t, 0, kblocks);
  int64_t it = sk.sk_iters * blockIdx.x / gridDim.x;
  const int64_t end = sk.sk_iters * (blockIdx.x + 1) / gridDim.x;
  while (it < end) {
    const int t = sk.dp_tiles + int(it / kblocks), k0 = int(it % kblocks);
    const int k1 = int(k0 + (end - it) < kblocks ? k0 + (end - it) : kblocks);
    f(t, k0, k1);
    it += k1 - k0;
  }
}

// 32-bit words of a warpgroup's partial per thread (fp32: BN / 2, fp16 pairs: BN / 4) and per slot (host side:
// the workspace's size; the device side takes the words per thread from the accumulator array).
template <int BN, Acc ACC>
__host__ __device__ constexpr int partial_words() {
  return ACC == Acc::F32 ? BN / 2 : BN / 4;
}
template <int BN, Acc ACC>
__host__ __device__ constexpr int64_t slot_words() {
  return int64_t(2) * partial_words<BN, ACC>() * kWarpgroup;  // two consumer warpgroups
}

// A thread's accumulator words go 16 bytes per access, thread-contiguous (a warp moves 512 bytes), bypassing L1
// (st.global.cg / ld.global.cg): fp32 accumulators as float4, fp16 pairs as uint4.
template <typename W>
struct Words4;
template <>
struct Words4<float> {
  using V = float4;
  __device__ __forceinline__ static V pack(float a, float b, float c, float d) { return make_float4(a, b, c, d); }
  __device__ __forceinline__ static float add(float a, float b) { return a + b; }
};
template <>
struct Words4<uint32_t> {
  using V = uint4;
  __device__ __forceinline__ static V pack(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
    return make_uint4(a, b, c, d);
  }
  __device__ __forceinline__ static uint32_t add(uint32_t a, uint32_t b) {  // two fp16 lanes
    const __half2 s = __hadd2(*reinterpret_cast<const __half2*>(&a), *reinterpret_cast<const __half2*>(&b));
    return *reinterpret_cast<const uint32_t*>(&s);
  }
};

// Where warpgroup wg's part of slot `slot` starts, for R words per thread.
template <typename W, int R>
__device__ __forceinline__ typename Words4<W>::V* partial_slot(const StreamK& sk, int slot, int wg) {
  static_assert(R % 4 == 0, "whole 16-byte accesses");
  return reinterpret_cast<typename Words4<W>::V*>(sk.partials + int64_t(slot) * 2 * R * kWarpgroup) +
         wg * (R / 4) * kWarpgroup;
}

// The tail's side: this warpgroup's accumulators into its part of slot `slot`, then (once every thread of the
// warpgroup has stored, bar_id being its named barrier) the flag.
template <typename W, int R>
__device__ __forceinline__ void give_partial(const W (&d)[R], const StreamK& sk, int slot, int wg, uint32_t bar_id) {
  const int t = threadIdx.x % kWarpgroup;
  auto* p = partial_slot<W, R>(sk, slot, wg);
#pragma unroll
  for (int j = 0; j < R / 4; ++j)
    __stcg(p + j * kWarpgroup + t, Words4<W>::pack(d[4 * j], d[4 * j + 1], d[4 * j + 2], d[4 * j + 3]));
  ptx::named_barrier_sync(bar_id, kWarpgroup);  // every thread's stores precede thread 0's release
  if (t == 0) {
    __threadfence();
    ptx::st_release_gpu(sk.flags + 2 * slot + wg, sk.token);
  }
}

// The head's side: thread 0 waits for the tail's flag, the warpgroup meets it at its named barrier, and every
// thread adds the tail's words to its accumulators (head + tail, always in that order).
template <typename W, int R>
__device__ __forceinline__ void take_partial(W (&d)[R], const StreamK& sk, int slot, int wg, uint32_t bar_id) {
  const int t = threadIdx.x % kWarpgroup;
  if (t == 0)
    while (ptx::ld_acquire_gpu(sk.flags + 2 * slot + wg) != sk.token) ptx::nanosleep(64);
  ptx::named_barrier_sync(bar_id, kWarpgroup);
  const auto* p = partial_slot<W, R>(sk, slot, wg);
#pragma unroll
  for (int j = 0; j < R / 4; ++j) {
    const auto v = __ldcg(p + j * kWarpgroup + t);
    d[4 * j] = Words4<W>::add(d[4 * j], v.x), d[4 * j + 1] = Words4<W>::add(d[4 * j + 1], v.y);
    d[4 * j + 2] = Words4<W>::add(d[4 * j + 2], v.z), d[4 * j + 3] = Words4<W>::add(d[4 * j + 3], v.w);
  }
}

// ---- host -----------------------------------------------------------------------------------------------------
// The split for `tiles` tiles of `kblocks` k-blocks on `blocks` blocks: none (every tile whole) where the tiles
// fill whole rounds, where there are fewer than two rounds' worth, or where K is too short for a cut tile to pay
// for its exchange (fewer than 8 k-blocks).
struct StreamKPlan {
  int dp_tiles;
  int64_t sk_iters;
};
__host__ __device__ constexpr StreamKPlan streamk_plan(int tiles, int kblocks, int blocks) {
  return (tiles % blocks == 0 || tiles < 2 * blocks || kblocks < 8)
             ? StreamKPlan{tiles, 0}
             : StreamKPlan{(tiles / blocks - 1) * blocks, int64_t(tiles - (tiles / blocks - 1) * blocks) * kblocks};
}
static_assert(streamk_plan(512, 64, 132).dp_tiles == 264 && streamk_plan(512, 64, 132).sk_iters == 248 * 64 &&
                  streamk_plan(480, 32, 132).dp_tiles == 264 && streamk_plan(480, 32, 132).sk_iters == 216 * 32 &&
                  streamk_plan(528, 64, 132).sk_iters == 0 && streamk_plan(200, 64, 132).sk_iters == 0,
              "worked cases: 4096^3 (512 tiles of 128 x 256) keeps 2 whole rounds and cuts 248 tiles over 132 blocks "
              "(1.88 tiles each); 3000 x 5000 x 2000 (480 tiles) 2 rounds and 216; whole rounds and fewer than two "
              "rounds' worth are not cut");

// The fix-up workspace of one launch: `bytes` from this library's stream-ordered pool on `stream`'s device, freed
// on the stream after the launch. The pool keeps its memory (release threshold: all of it), so after the first
// calls a launch's allocation is a pool lookup, not a driver mapping. Only this code allocates from it, so a
// reused block holds flags of earlier launches (smaller tokens) or the zeros of fresh memory.
inline cudaError_t streamk_workspace(size_t bytes, cudaStream_t stream, void** out) {
  static std::mutex mu;
  static cudaMemPool_t pools[64] = {};
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  if (dev >= 64) return cudaErrorInvalidDevice;
  cudaMemPool_t pool;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (pools[dev] == nullptr) {
      cudaMemPoolProps props = {};
      props.allocType = cudaMemAllocationTypePinned;
      props.location.type = cudaMemLocationTypeDevice;
      props.location.id = dev;
      cudaMemPool_t created;
      if ((err = cudaMemPoolCreate(&created, &props)) != cudaSuccess) return err;
      uint64_t keep = UINT64_MAX;
      if ((err = cudaMemPoolSetAttribute(created, cudaMemPoolAttrReleaseThreshold, &keep)) != cudaSuccess) return err;
      pools[dev] = created;
    }
    pool = pools[dev];
  }
  return cudaMallocFromPoolAsync(out, bytes, pool, stream);
}

// Tokens: one per launch and device, increasing (64 bits: no wrap in practice).
inline uint64_t streamk_token() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace hopper
