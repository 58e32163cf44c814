// blocks/stage_sync.cuh — how a pipelined main loop keeps its stage ring safe: one block barrier per
// tile (BlockSync) or a full and an empty mbarrier per stage (StageBarriers).
// Device building blocks (csrc/blocks/, one file per concern: smem layouts, copies, stage sync, fragments,
// epilogues), shared by the kernels in sm80/ and by the sweeps and tests that instantiate them.
#pragma once
#include <type_traits>
#include "ptx/cp_async.cuh"
#include "ptx/mbarrier.cuh"

namespace tile {

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

}  // namespace tile
