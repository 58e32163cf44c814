// wgmma_persistent.cu — Hopper ladder, step 3: a persistent grid of warp-specialized blocks.
//
// At most one block per SM walks the output tiles t = blockIdx.x, blockIdx.x + gridDim.x, ... in an L2-friendly
// grouped order (hopper::tile_coords); as many blocks as keep the rounds full (hopper::persistent_blocks). The
// producer warpgroup's one issuing thread runs ahead across tile boundaries, so the next tile's first k-blocks load
// while the consumers are still storing the last tile's accumulators: the epilogue overlaps the loads, and no
// block launches or fills its pipeline from empty more than once.
//
// Roles (3 warpgroups, 384 threads), as in wgmma_ws.cu:
//   warpgroup 0 — producer: gives its registers away (setmaxnreg.dec to 40), one thread issues the TMA loads of
//                 each k-block into the STAGES-deep ring, waiting on empty[s] before refilling stage s.
//   warpgroups 1, 2 — consumers: grow to 232 registers, each computes 64 rows x BN of the 128 x BN tile (128 rows,
//                 two 64-row slabs, of the 256-row tiles) with m64nBNk16 wgmma from shared memory, keeps one wgmma
//                 group in flight and releases a stage (one arrival on empty[s] per warpgroup) as soon as the group
//                 that read it has completed. A warpgroup whose rows of the tile all lie past M (M <= 64 on 128-row
//                 tiles, M <= 128 on 256-row ones, or the last band's spare slab) issues no wgmma and stores
//                 nothing: it only hands each stage back once it has landed (hopper::pass_tile), and the other
//                 warpgroup has the tensor cores to itself.
// Epilogue: where C is TMA-describable, each consumer converts its slab to C's type in a swizzled staging buffer and
// one thread stores it with TMA in 64 x 64 boxes (hopper::store_accumulators_tma), 128 columns at a time (the
// 256 x 152 tile: unswizzled 32 x 152 boxes); the stores drain while the next tile's main loop runs. Otherwise the
// accumulators go straight to global memory.
// Edges: TMA reads zeros outside A and B (M, N and the K tail); TMA stores drop what falls outside C, and the
// register-store fallback masks to M x N.
// Skinny outputs, small outputs with a long K and B with rows not 32-byte aligned go to wgmma_splitk.cu,
// wgmma_splitk_grid.cu and wgmma_cluster.cu instead: see the launcher.
// Element types: fp16 (fp32 or fp16 accumulation) and bf16 (fp32), the template parameter E. Layouts: A row- or
// column-major (A_COL: M-major stages, read through wgmma's transpose bit, as row-major B is) and B row- or
// column-major, all four in place, here and in wgmma_splitk.cu and wgmma_cluster.cu; wgmma_splitk_grid.cu reads
// row-major A only, so a column-major A never takes the grid split.
// Built in parts (host/parts.h): its 178 kernels would keep one core busy far longer than any other file of the
// build, so each tile's launches for each A layout are a unit (launch_persistent_tile, launch_swapped_tile), and the
// units are spread over parts at the end of the file.
#include <algorithm>
#include <tuple>

#include "blocks/splitk_reduce.cuh"
#include "blocks/wgmma_tile.cuh"
#include "host/parts.h"
#include "host/registry.h"
#include "ptx/cluster.cuh"
#include "sm90/handoff.h"

namespace {

constexpr int kConsumers = 2, kThreads = (1 + kConsumers) * hopper::kWarpgroup;

// Tiles: 128 x BN, BN from the launcher's choice (tile_bn): 256 on large outputs; narrower tiles where 128 x 256
// tiles would leave SMs idle (skinny M, small N), so that more SMs stream B; 192 where its tiles fill the last round
// of the persistent grid better than 256's (hopper::choose_plan).
// Narrower tiles take more stages in the same shared memory (each stage holds 128 x 64 A + BN x 64 B).
// MT = 2 makes the tile 256 rows tall: each consumer warpgroup owns two 64-row slabs (two m64nBNk16 per k16 step
// on the same B). With BN = 152 (column-major B only: a row-major B stage is whole 64-column boxes) that is the tile
// cuBLAS runs on 3000 x 5000 x 2000 NT, whose 12 x 33 = 396 tiles are exactly 3 rounds of 132 SMs; its 152-column
// rows are no whole number of 64 x 64 swizzled boxes, so C is staged unswizzled, EPI_COLS columns a round.
template <int BN_, int STAGES_, int MT_ = 1, int EPI_COLS_ = (BN_ % 128 == 0 ? 128 : 64), int EPI_ROWS_ = 64>
struct Tile {
  static constexpr int MT = MT_, BM = 128 * MT_, BN = BN_, STAGES = STAGES_, EPI_COLS = EPI_COLS_;
  [[maybe_unused]] static constexpr bool kCut = false;  // one of hopper::cut_tile (below), built in one form
  template <typename E>
  using Staging = hopper::EpilogueStaging<E, EPI_COLS, EPI_ROWS_>;  // EPI_ROWS_ x EPI_COLS a round
  template <typename E>
  struct Storage {
    hopper::SharedStorage<E, BM, BN, STAGES> ring;
    Staging<E> out[kConsumers];  // one per consumer warpgroup
  };
  static_assert(hopper::smem_request<Storage<half>>() <= 227 * 1024, "the ring and the staging fit in 227 KB");
};
using Wide = Tile<256, 4>;    // 4 x 48 KB + 2 x 16 KB staging
using Wide192 = Tile<192, 5>;  // 5 x 40 KB + 2 x 8 KB
using Medium = Tile<128, 6>;  // 6 x 32 KB + 2 x 16 KB
using Narrow = Tile<64, 8>;   // 8 x 24 KB + 2 x 8 KB
using Tall = Tile<152, 4, 2, 152, 32>;  // 256 x 152: 4 x 51 KB + 2 x 9.5 KB (32-row rounds)
using Tall3 = Tile<152, 3, 2, 152>;     // the same in 3 stages, 64-row rounds (the A/B of GemmArgs::plan_tile 6)
// The cut tiles (hopper::cut_tile, GemmArgs::plan_tile codes 7-16): each with the deepest ring (up to 8 stages)
// that fits beside the staging of C. C is staged swizzled where BN is whole 64-column boxes, else unswizzled in
// rounds of EPI_COLS = BN halved until it is an odd multiple of 8: a round's rows are then an odd multiple of 4
// words apart, so a warp's stores (8 rows x 4 words) hit 32 banks. Built in one form: fp32 accumulation, A
// row-major, C stored with TMA (launch_tile; the launcher offers them only there).
constexpr int cut_epi_cols(int bn) {
  return bn % 64 == 0 ? (bn % 128 == 0 ? 128 : 64) : bn % 16 == 8 ? bn : cut_epi_cols(bn / 2);
}
constexpr int cut_stages(int bm, int bn) {
  const int staging = 2 * ((64 * cut_epi_cols(bn) * 2 + 1023) / 1024 * 1024);  // two 64-row buffers, whole KB
  const int fit = (227 * 1024 - 2048 - staging) / ((bm + bn) * hopper::BK * 2);  // 2 KB: barriers, alignment
  return fit < 8 ? fit : 8;
}
template <int I>
struct Cut : Tile<hopper::cut_tile(I).bn, cut_stages(hopper::cut_tile(I).bm, hopper::cut_tile(I).bn),
                  hopper::cut_tile(I).bm / 128, cut_epi_cols(hopper::cut_tile(I).bn)> {
  [[maybe_unused]] static constexpr bool kCut = true;
};
static_assert(cut_epi_cols(144) == 72 && cut_epi_cols(160) == 40 && cut_epi_cols(224) == 56 &&
                  cut_epi_cols(240) == 120 && cut_stages(128, 144) == 6 && cut_stages(128, 160) == 5 &&
                  cut_stages(128, 240) == 4 && cut_stages(256, 128) == 4 && cut_stages(256, 176) == 3,
              "worked cases: 144 and 240 columns staged in one or two rounds, 160 in four of 40, 224 in four of 56; "
              "6 stages of 128 x 144, 5 of 128 x 160, 4 of 128 x 240 and 256 x 128, 3 of 256 x 176");
using Tiles = std::tuple<Wide, Medium, Narrow, Wide192, Tall, Tall3, Cut<0>, Cut<1>, Cut<2>, Cut<3>, Cut<4>, Cut<5>,
                         Cut<6>, Cut<7>, Cut<8>, Cut<9>>;  // GemmArgs::plan_tile's codes 1-16
static_assert(std::tuple_size<Tiles>::value == hopper::kCutFirstCode - 1 + hopper::kCutTileCount,
              "a Tiles entry per plan_tile code");

constexpr int GROUP_M = 8;
// 128 x 192's speed relative to 128 x 256 at equal fill, for hopper::choose_plan: at 0.96 it is taken only where its
// rounds are >= 4% fuller. Offered only when A's and B's rows are 128-byte aligned: misaligned rows cost this tile
// far more than 128 x 256 (the H100 sweep behind both choices: docs/design/hopper.md).
constexpr double kSpeed192 = 0.96;
// 40 + 2 x 232 registers x 128 threads = 64,512 <= 65,536: a consumer's 128 fp32 accumulators plus addressing.
constexpr int kProducerRegs = 40, kConsumerRegs = 232;

// A K split over the grid (the cut tiles only: launch_tile, launch_swapped): each tile's k-blocks cut in `parts`
// near-equal slices, a work unit per (tile, slice); a unit's fp32 partial tile goes to slice `slice` of `ws` (parts
// slices of C's M x ldw, ldw = C's N rounded up to 4, in C's orientation also for a swapped tile), and a second
// launch adds the slices in a fixed order into C (blocks/splitk_reduce.cuh), as wgmma_splitk_grid.cu does. parts = 1
// (ws null): the tiles themselves, C stored by the epilogue.
struct GridSplit {
  float* ws = nullptr;
  int ldw = 0, parts = 1;
};

// The fp32 accumulators of slab i of a consumer warpgroup (MT slabs of 64 rows).
template <int MT, typename D>
__device__ __forceinline__ auto& acc_slab(D& d, [[maybe_unused]] int i) {
  if constexpr (MT == 1) return d;
  else return d[i];
}

// A consumer warpgroup's 64 x BN fp32 accumulators (rows row0.., columns col0.. of the kernel's M x N problem) into
// a workspace slice `out` (row stride ldw), masked to M x N: a thread's pair of columns c, c + 1 in rows r and
// r + 8 of each 8-column block (the fragment of ptx/wgmma.cuh). C_T: the kernel's problem is C's transpose (a
// swapped tile), so element (r, c) lands at out[c][r], C's own orientation, through one pointer stepped 8 columns a
// block (the 256-row swapped tiles keep 176 accumulators live: an address per element would spill); else each pair
// in one 8-byte store (c is even and ldw a multiple of 4, so c + 1 < ldw).
template <int BN, bool C_T>
__device__ __forceinline__ void store_partial(const float (&d)[BN / 2], float* out, int ldw, int M, int N, int row0,
                                              int col0) {
  const int t = threadIdx.x % hopper::kWarpgroup, warp = t / 32, lane = t % 32;
  const int r = row0 + warp * 16 + lane / 4, c0 = col0 + 2 * (lane % 4);
  if constexpr (C_T) {
    float* p = out + int64_t(c0) * ldw + r;
    const int64_t step = int64_t(8) * ldw;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j, p += step) {
      const int c = c0 + 8 * j;
      if (c >= N) break;
      const bool pair = c + 1 < N;
      if (r < M) {
        p[0] = d[4 * j];
        if (pair) p[ldw] = d[4 * j + 1];
      }
      if (r + 8 < M) {
        p[8] = d[4 * j + 2];
        if (pair) p[ldw + 8] = d[4 * j + 3];
      }
    }
  } else {
    float* p = out + int64_t(r) * ldw + c0;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      if (c0 + 8 * j >= N) break;
      if (r < M) *reinterpret_cast<float2*>(p + 8 * j) = hopper::fragment_float2(d, j, 0);
      if (r + 8 < M) *reinterpret_cast<float2*>(p + 8 * ldw + 8 * j) = hopper::fragment_float2(d, j, 1);
    }
  }
}

// C_T: a swapped cut tile's launch (launch_swapped): the kernel computes C^T = B^T A^T of the swapped problem and
// stores each slab transposed into C (hopper::store_accumulators_tma_t).
// CL = 2: the paired swapped tiles (launch_swapped's CL): clusters of two blocks take two tiles of one column of
// tiles (rows 2p and 2p + 1: C's tiles side by side along N, over the same rows of C), which share their B' = A^T
// box; each block loads its own A' box and half of the B' box, multicast to both (hopper::load_kblock_multicast),
// as wgmma_cluster.cu pairs its tiles. A stage is then written in both blocks by either producer, so it is released
// to both (each consumer warpgroup arrives on its own block's empty barrier and on its peer's), and the barriers are
// initialised and the blocks end under a cluster barrier. Split over the grid (GridSplit), a unit is a pair of
// tiles over one K slice: both blocks load the same k-blocks.
template <typename E, typename T, Acc ACC, bool B_COL, bool TMA_STORE, bool A_COL, bool C_T = false, int CL = 1>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_persistent_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                            const __grid_constant__ CUtensorMap tma_c, E* __restrict__ C, int64_t ldc, int M,
                            int N, int K, bool pairs, GridSplit gs) {
  constexpr int BM = T::BM, BN = T::BN, MT = T::MT;
  static_assert(BM == kConsumers * 64 * MT, "each consumer warpgroup owns 64 MT rows of the tile");
  static_assert(CL == 1 || (CL == 2 && C_T && B_COL && T::kCut), "pairs: the swapped cut tiles only");
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  auto& storage = hopper::aligned_storage<typename T::template Storage<E>>(smem_raw);
  auto& ss = storage.ring;
  const int wg = threadIdx.x / hopper::kWarpgroup, tid = threadIdx.x % hopper::kWarpgroup;
  const int tiles_m = hopper::cdiv(M, BM), tiles_n = hopper::cdiv(N, BN), tiles = tiles_m * tiles_n;
  const int kblocks = hopper::cdiv(K, hopper::BK), a_rows = hopper::a_box_rows(M, BM);  // A box: see load_kblock
  // work units: tile u % tiles, K slice u / tiles (slices of the same tile far apart: the blocks resident together
  // read the same k-range, as in wgmma_splitk_grid.cu); one slice unless the grid splits K (GridSplit: the cut
  // tiles only, so the other tiles' instances compile with parts = 1 and none of the divisions below; a cut tile
  // unsplit takes the same branch at run time)
  const int parts = T::kCut ? gs.parts : 1;  // <= kblocks (plan_grid_split): every slice has a k-block
  // CL > 1: a unit is a cluster's CL tiles of one column of tiles (over one K slice); block `rank` takes tile row
  // CL p + rank
  const int tiles_cl = hopper::cdiv(tiles_m, CL), groups = CL == 1 ? tiles : tiles_cl * tiles_n;
  const int units = groups * parts;
  const uint32_t rank = CL == 1 ? 0u : ptx::cluster_ctarank();
  const int first = int(blockIdx.x) / CL, stride = int(gridDim.x) / CL;
  const auto k_first = [&](int slice) { return parts == 1 ? slice * kblocks : int(int64_t(kblocks) * slice / parts); };
  const auto unit_tile = [&](int u) { return parts == 1 ? u : u % groups; };  // a tile (CL > 1: a pair of tiles)
  const auto unit_slice = [&](int u) { return parts == 1 ? 0 : u / groups; };
  // the tile of unit u (tm, tn)
  const auto coords = [&](int u, int& tm, int& tn) {
    if constexpr (CL == 1) {
      hopper::tile_coords<GROUP_M>(unit_tile(u), tiles_m, tiles_n, tm, tn);
    } else {
      hopper::tile_coords<GROUP_M>(unit_tile(u), tiles_cl, tiles_n, tm, tn);
      tm = tm * CL + int(rank);
    }
  };

  // ---- PROLOGUE: barriers ----
  if (threadIdx.x == 0) {
    ptx::prefetch_tensormap(&tma_a);
    ptx::prefetch_tensormap(&tma_b);
    hopper::init_ring(ss, kConsumers * CL);
    if constexpr (CL > 1) ptx::fence_mbarrier_init_cluster();
  }
  if constexpr (CL > 1) ptx::cluster_sync();  // no peer copies or arrives into an uninitialised barrier
  else __syncthreads();

  if (wg == 0) {
    // ---- PRODUCER ----
    ptx::setmaxnreg_dec<kProducerRegs>();
    if (tid == 0) {
      int s = 0;
      uint32_t phase = 0;
      for (int u = first; u < units; u += stride) {
        int tm, tn;
        coords(u, tm, tn);
        const int slice = unit_slice(u);
        if constexpr (CL == 1) {
          hopper::produce_tile<BM, BN, B_COL, A_COL>(ss, &tma_a, &tma_b, tm * BM, tn * BN, k_first(slice),
                                                     k_first(slice + 1), a_rows, s, phase);
        } else {
          for (int kb = k_first(slice); kb < k_first(slice + 1); ++kb) {
            ptx::mbarrier_wait_parity(ptx::smem_u32(&ss.empty[s]), phase ^ 1);  // both blocks' consumers are done
            hopper::load_kblock_multicast<BM, BN, B_COL, A_COL, CL>(ss, s, &tma_a, &tma_b, tm * BM, tn * BN,
                                                                    kb * hopper::BK, a_rows, rank);
            if (++s == T::STAGES) s = 0, phase ^= 1;
          }
        }
      }
    }
  } else {
    // ---- CONSUMERS: MAIN LOOP per tile, then EPILOGUE ----
    ptx::setmaxnreg_inc<kConsumerRegs>();
    hopper::Accum<BN, ACC, MT> acc;
    const int slab = (wg - 1) * 64 * MT;  // this warpgroup's rows of the tile
    int s = 0;
    uint32_t phase = 0;
    for (int u = first; u < units; u += stride) {
      int tm, tn;
      coords(u, tm, tn);
      const int slice = unit_slice(u), kb = k_first(slice + 1) - k_first(slice);
      auto release = [&](int stage) {  // one arrival per warpgroup on each block's empty[stage]: lane r signals block r
        if constexpr (CL == 1) {
          if (tid == 0) ptx::mbarrier_arrive(ptx::smem_u32(&ss.empty[stage]));
        } else if (tid < CL) {
          ptx::mbarrier_arrive_cluster(ptx::mapa_shared(ptx::smem_u32(&ss.empty[stage]), uint32_t(tid)));
        }
      };
      if (tm * BM + slab >= M) {  // every row of this warpgroup's slab lies past M: nothing to compute or store
        hopper::pass_tile(ss, kb, s, phase, release);
        continue;
      }
      hopper::mma_tile<BN, B_COL, MT, A_COL>(ss, acc.d, slab, kb, s, phase, release);
      if constexpr (T::kCut) {
        if (gs.ws != nullptr) {  // the partial tile into slice `slice` of the workspace, in C's orientation
          float* out = gs.ws + int64_t(slice) * (C_T ? N : M) * gs.ldw;
#pragma unroll
          for (int i = 0; i < MT; ++i)
            store_partial<BN, C_T>(acc_slab<MT>(acc.d, i), out, gs.ldw, M, N, tm * BM + slab + 64 * i, tn * BN);
          continue;
        }
      }
      auto store = [&](const auto& d, int row0) {  // one 64-row slab of accumulators
        if constexpr (C_T) {
          static_assert(TMA_STORE && T::kCut, "swapped: a cut tile, C stored with TMA");
          hopper::store_accumulators_tma_t<BN>(d, storage.out[wg - 1], &tma_c, row0, tn * BN, /*bar_id=*/wg);
        } else if constexpr (TMA_STORE) {
          hopper::store_accumulators_tma<BN>(d, storage.out[wg - 1], &tma_c, row0, tn * BN, /*bar_id=*/wg);
        } else {
          hopper::store_accumulators<BN>(d, C, ldc, M, N, row0, tn * BN, pairs);
        }
      };
      if constexpr (MT == 1) {
        store(acc.d, tm * BM + slab);
      } else {
#pragma unroll
        for (int i = 0; i < MT; ++i) store(acc.d[i], tm * BM + slab + 64 * i);
      }
    }
    if (T::kCut && gs.ws != nullptr) ptx::griddepcontrol_launch_dependents();  // the reduction may be queued now
    if (TMA_STORE && tid == 0) ptx::bulk_wait_group_read<0>();  // the staging buffer outlives the last stores
  }
  if constexpr (CL > 1) ptx::cluster_sync();  // no block leaves while its peer may still copy or arrive into it
}

// A cut tile's grid split (GridSplit) on a problem whose C is c_rows x c_cols: GemmArgs::split's parts (0 or 1:
// none), cut to the k-blocks there are and to a workspace of splitk::kMaxWorkspaceBytes; its fp32 workspace from
// GemmArgs::workspace (kWorkspaceNeeded, LaunchInfo::workspace_bytes filled, where that is smaller).
template <typename E>
cudaError_t plan_grid_split(const GemmArgsOf<E>& p, int c_rows, int c_cols, LaunchInfo* info, GridSplit* gs) {
  int parts = std::max(1, std::min(p.split, hopper::cdiv(p.K, hopper::BK)));
  const int ldw = (c_cols + 3) / 4 * 4;
  const int64_t slice_bytes = int64_t(c_rows) * ldw * int64_t(sizeof(float));
  parts = splitk::cap_split(parts, slice_bytes);
  if (parts == 1) return cudaSuccess;
  if (info) info->workspace_bytes = parts * slice_bytes;
  if (p.workspace_bytes < parts * slice_bytes) return kWorkspaceNeeded;
  *gs = GridSplit{static_cast<float*>(p.workspace), ldw, parts};
  return cudaSuccess;
}

// After a grid-split launch (`err` its status): the reduction of the workspace's slices into C (c_rows x c_cols, row
// stride ldc), a programmatic dependent of the product; nothing where K was not split.
template <typename E>
cudaError_t finish_grid_split(cudaError_t err, const GridSplit& gs, E* C, int64_t ldc, int c_rows, int c_cols,
                              cudaStream_t stream, LaunchInfo* info) {
  if (err != cudaSuccess || gs.ws == nullptr) return err;
  if (info) info->workspace_bytes = int64_t(gs.parts) * c_rows * gs.ldw * int64_t(sizeof(float));
  return splitk::launch_reduce(static_cast<const float*>(gs.ws), gs.parts, gs.ldw, C, ldc, c_rows, c_cols, stream);
}

template <typename T, bool A_COL, typename E>
cudaError_t launch_tile(const GemmArgsOf<E>& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  using Storage = typename T::template Storage<E>;
  constexpr bool kRowMajorB = T::BN % 64 == 0;  // a row-major B stage is whole 64-column boxes
  hopper::Operands ops;
  using Staging = typename T::template Staging<E>;
  const cudaError_t err = hopper::make_operands(p, T::BM, T::BN, &ops, 0, Staging::kBoxCols, Staging::kRows);
  if (err != cudaSuccess) return err;
  const int tiles = hopper::cdiv(p.M, T::BM) * hopper::cdiv(p.N, T::BN);
  if constexpr (T::kCut) {  // one form: fp32 accumulation, A row-major (the only unit built), C stored with TMA
    if (acc != Acc::F32 || !ops.tma_store || (!p.b_col_major && !kRowMajorB)) return cudaErrorInvalidValue;
    GridSplit gs;
    const cudaError_t planned = plan_grid_split(p, p.M, p.N, info, &gs);
    if (planned != cudaSuccess) return planned;
    const dim3 grid(hopper::persistent_blocks(tiles * gs.parts, hopper::sm_count(), p.grid));
    const int reported = gs.parts > 1 ? gs.parts : 0;
    cudaError_t err = cudaErrorInvalidValue;
    if (p.b_col_major) {
      err = hopper::launch<wgmma_persistent_kernel<E, T, Acc::F32, true, true, false>, Storage>(
          grid, kThreads, T::BM, T::BN, p, ops, stream, info, 1, reported, gs);
    } else if constexpr (kRowMajorB) {
      err = hopper::launch<wgmma_persistent_kernel<E, T, Acc::F32, false, true, false>, Storage>(
          grid, kThreads, T::BM, T::BN, p, ops, stream, info, 1, reported, gs);
    }
    return finish_grid_split(err, gs, p.C, p.ldc, p.M, p.N, stream, info);
  } else {
    const dim3 grid(hopper::persistent_blocks(tiles, hopper::sm_count(), p.grid));
    return tile::dispatch<E>(acc, p.b_col_major, [&](auto acc_c, auto b_col_c) {
      if constexpr (!kRowMajorB && !b_col_c.value) {
        return cudaErrorInvalidValue;
      } else {
        constexpr Acc kAcc = acc_c.value;
        constexpr bool kBCol = b_col_c.value;
        if (ops.tma_store)
          return hopper::launch<wgmma_persistent_kernel<E, T, kAcc, kBCol, true, A_COL>, Storage>(
              grid, kThreads, T::BM, T::BN, p, ops, stream, info, 1, 0, GridSplit{});
        return hopper::launch<wgmma_persistent_kernel<E, T, kAcc, kBCol, false, A_COL>, Storage>(
            grid, kThreads, T::BM, T::BN, p, ops, stream, info, 1, 0, GridSplit{});
      }
    });
  }
}

// The swapped problem of p: C^T = B^T A^T, with A' = B^T (N x K), B' = A^T (K x M) and C' = C^T (N x M), which
// the swapped launches store into C transposed. A' is row-major where B is column-major; B' is column-major where A
// is row-major (the only case the swapped tiles take).
template <typename E>
GemmArgsOf<E> swapped(const GemmArgsOf<E>& p) {
  GemmArgsOf<E> q = p;
  q.A = p.B, q.B = p.A;
  q.M = p.N, q.N = p.M;
  q.sam = p.sbn, q.sak = p.sbk;  // A'[n][k] = B[k][n]
  q.sbk = p.sak, q.sbn = p.sam;  // B'[k][m] = A[m][k]
  q.a_col_major = !p.b_col_major, q.b_col_major = !p.a_col_major;
  return q;
}

// A cut tile T on the swapped problem q = swapped(p), in its one form: fp32 accumulation, B' = A^T column-major
// (A row-major), C stored transposed with TMA (C's own map, boxes of T::EPI_COLS rows x 64 columns), K split over
// the grid where q.split asks (GridSplit). The launch reports C's tile: T::BN rows x T::BM columns. CL = 2: the
// tiles paired in clusters of two blocks (the kernel's CL), on as many clusters as fit at once
// (cudaOccupancyMaxActiveClusters) and keep the rounds of pairs full.
template <typename T, bool A_COL, int CL = 1, typename E>
cudaError_t launch_swapped(const GemmArgsOf<E>& q, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  static_assert(T::kCut, "the swapped tiles are the cut tiles");
  using Storage = typename T::template Storage<E>;
  constexpr auto kernel = wgmma_persistent_kernel<E, T, Acc::F32, true, true, A_COL, true, CL>;
  if (acc != Acc::F32 || !q.b_col_major || q.a_col_major != A_COL) return cudaErrorInvalidValue;
  hopper::Operands ops;
  const cudaError_t err =
      hopper::make_operands(q, T::BM, T::BN, &ops, T::BN / CL, 64, T::EPI_COLS, /*c_transposed=*/true);
  if (err != cudaSuccess) return err;
  if (!ops.tma_store) return cudaErrorInvalidValue;
  GridSplit gs;  // C is q.N x q.M
  const cudaError_t planned = plan_grid_split(q, q.N, q.M, info, &gs);
  if (planned != cudaSuccess) return planned;
  // work units: tiles (CL > 1: clusters' pairs of tiles) x K parts, over the blocks (clusters) that fit at once
  const int groups = hopper::cdiv(hopper::cdiv(q.M, T::BM), CL) * hopper::cdiv(q.N, T::BN);
  int slots = hopper::sm_count();
  if constexpr (CL > 1) {
    const int smem = hopper::smem_request<Storage>();
    cudaError_t prepared = tile::prepare_smem(kernel, smem, info);
    if (prepared == cudaSuccess)  // clusters that fit at once (the GPCs decide, not SMs / CL)
      prepared = hopper::max_active_clusters<kernel>(kThreads, smem, CL, stream, &slots);
    if (prepared != cudaSuccess) return prepared;
  }
  const dim3 grid(CL * hopper::persistent_blocks(groups * gs.parts, slots, q.grid));
  const cudaError_t launched = hopper::launch<kernel, Storage>(grid, kThreads, T::BN, T::BM, q, ops, stream, info,
                                                               CL, gs.parts > 1 ? gs.parts : 0, gs);
  return finish_grid_split(launched, gs, q.C, q.ldc, q.N, q.M, stream, info);
}

}  // namespace

// The launches of tile CODE (GemmArgs::plan_tile's codes, 1-6) for one layout of A: a unit of the build's parts
// (host/parts.h), so outside the anonymous namespace; declared here, so that the calls below do not instantiate
// it, and instantiated in its part at the end of the file. TILE_UNIT(extern, ...) declares a unit, TILE_UNIT(, ...)
// instantiates it.
template <int CODE, bool A_COL, typename E>
cudaError_t launch_persistent_tile(const GemmArgsOf<E>& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  return launch_tile<std::tuple_element_t<CODE - 1, Tiles>, A_COL>(p, acc, stream, info);
}
#define LAUNCH_UNIT(EXTERN, LAUNCH, CODE, A_COL)                                                          \
  HGEMM_UNIT(HGEMM_UNIT_HALF, HGEMM_UNIT(HGEMM_UNIT_A_COL_##A_COL, EXTERN))                               \
  template cudaError_t LAUNCH<CODE, A_COL, half>(const GemmArgsOf<half>&, Acc, cudaStream_t, LaunchInfo*); \
  HGEMM_UNIT(HGEMM_UNIT_BF16, HGEMM_UNIT(HGEMM_UNIT_A_COL_##A_COL, EXTERN))                               \
  template cudaError_t LAUNCH<CODE, A_COL, __nv_bfloat16>(const GemmArgsOf<__nv_bfloat16>&, Acc, cudaStream_t, \
                                                         LaunchInfo*)
#define TILE_UNIT(EXTERN, CODE, A_COL) LAUNCH_UNIT(EXTERN, launch_persistent_tile, CODE, A_COL)
#define TILE_UNITS(EXTERN, CODE) \
  TILE_UNIT(EXTERN, CODE, false); \
  TILE_UNIT(EXTERN, CODE, true)
TILE_UNITS(extern, 1);
TILE_UNITS(extern, 2);
TILE_UNITS(extern, 3);
TILE_UNITS(extern, 4);
TILE_UNITS(extern, 5);
TILE_UNITS(extern, 6);
TILE_UNIT(extern, 7, false);  // the cut tiles: A row-major only
TILE_UNIT(extern, 8, false);
TILE_UNIT(extern, 9, false);
TILE_UNIT(extern, 10, false);
TILE_UNIT(extern, 11, false);
TILE_UNIT(extern, 12, false);
TILE_UNIT(extern, 13, false);
TILE_UNIT(extern, 14, false);
TILE_UNIT(extern, 15, false);
TILE_UNIT(extern, 16, false);

// The swapped cut tile I's launch (I: its index in hopper::cut_tile) on the swapped problem, A' = B^T of layout
// A_COL: a unit of the build's parts, as TILE_UNIT.
template <int I, bool A_COL, typename E>
cudaError_t launch_swapped_tile(const GemmArgsOf<E>& q, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  return launch_swapped<Cut<I>, A_COL>(q, acc, stream, info);
}
#define SWAP_UNIT(EXTERN, I, A_COL) LAUNCH_UNIT(EXTERN, launch_swapped_tile, I, A_COL)
#define SWAP_UNITS(EXTERN, I) \
  SWAP_UNIT(EXTERN, I, false); \
  SWAP_UNIT(EXTERN, I, true)
SWAP_UNITS(extern, 0);
SWAP_UNITS(extern, 1);
SWAP_UNITS(extern, 2);
SWAP_UNITS(extern, 3);
SWAP_UNITS(extern, 4);
SWAP_UNITS(extern, 5);
SWAP_UNITS(extern, 7);  // (cut tile 6, 256 x 128, is not swapped: hopper::swappable)
SWAP_UNITS(extern, 8);
SWAP_UNITS(extern, 9);

// The paired swapped tile I's launch (hopper::pairable: clusters of two blocks sharing the A^T box) on the swapped
// problem, A' = B^T of layout A_COL: a unit of the build's parts, as TILE_UNIT.
template <int I, bool A_COL, typename E>
cudaError_t launch_paired_tile(const GemmArgsOf<E>& q, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  return launch_swapped<Cut<I>, A_COL, 2>(q, acc, stream, info);
}
#define PAIR_UNIT(EXTERN, I, A_COL) LAUNCH_UNIT(EXTERN, launch_paired_tile, I, A_COL)
#define PAIR_UNITS(EXTERN, I) \
  PAIR_UNIT(EXTERN, I, false); \
  PAIR_UNIT(EXTERN, I, true)
PAIR_UNITS(extern, 0);
PAIR_UNITS(extern, 1);
PAIR_UNITS(extern, 2);
PAIR_UNITS(extern, 3);
PAIR_UNITS(extern, 4);
PAIR_UNITS(extern, 5);

// Tile CODE's launches for A's layout (a cut tile's for row-major A only).
template <int CODE, typename E>
cudaError_t launch_plan_tile(const GemmArgsOf<E>& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  if constexpr (CODE >= hopper::kCutFirstCode)
    return p.a_col_major ? cudaErrorInvalidValue : launch_persistent_tile<CODE, false>(p, acc, stream, info);
  else
    return p.a_col_major ? launch_persistent_tile<CODE, true>(p, acc, stream, info)
                         : launch_persistent_tile<CODE, false>(p, acc, stream, info);
}

// The cut tile of plan_tile code `code` (hopper::kCutFirstCode + I).
template <typename E, int... I>
cudaError_t launch_cut_code(int code, const GemmArgsOf<E>& p, Acc acc, cudaStream_t stream, LaunchInfo* info,
                            std::integer_sequence<int, I...>) {
  cudaError_t err = cudaErrorInvalidValue;
  ((code == hopper::kCutFirstCode + I ? (err = launch_plan_tile<hopper::kCutFirstCode + I>(p, acc, stream, info))
                                      : err),
   ...);
  return err;
}

// The swapped cut tile of plan_tile code `code` (hopper::kSwapFirstCode + I; CL = 2: the paired one,
// hopper::kPairFirstCode + I) on p: the swapped problem's launch, A' = B^T row-major where B is column-major, else
// M-major. A column-major A (B' row-major) is not a swapped form.
template <int CL, typename E, int... I>
cudaError_t launch_swap_code(int code, const GemmArgsOf<E>& p, Acc acc, cudaStream_t stream, LaunchInfo* info,
                             std::integer_sequence<int, I...>) {
  if (p.a_col_major) return cudaErrorInvalidValue;
  const GemmArgsOf<E> q = swapped(p);
  cudaError_t err = cudaErrorInvalidValue;
  auto one = [&](auto i_c) {
    constexpr int kI = decltype(i_c)::value;
    if constexpr (CL == 1 && hopper::swappable(kI)) {
      err = q.a_col_major ? launch_swapped_tile<kI, true>(q, acc, stream, info)
                          : launch_swapped_tile<kI, false>(q, acc, stream, info);
    } else if constexpr (CL == 2 && hopper::pairable(kI)) {
      err = q.a_col_major ? launch_paired_tile<kI, true>(q, acc, stream, info)
                          : launch_paired_tile<kI, false>(q, acc, stream, info);
    }
  };
  const int first = CL == 1 ? hopper::kSwapFirstCode : hopper::kPairFirstCode;
  ((code == first + I ? one(std::integral_constant<int, I>{}) : void()), ...);
  return err;
}

// ---- HOST: choose the tile (or another kernel) -> tensor maps -> launch ----
// Where nothing pins the plan, A is row-major and N or K is not a multiple of 64, a time model plans
// (plan_by_model, blocks/plan_model.cuh): every tile below, split or not, and the kernels it hands problems to are
// candidates, each one's time predicted from the sizes and the GPU, the fastest predicted taken. Elsewhere (column-
// major A; N and K whole 64-element boxes, where the rule was measured and the model's random sweeps have next to no
// data, but for the rule's grid splits and M part-filling its last of a few 128-row bands, which the model plans:
// hopper::model_plans) the rule:
// hopper::choose_plan scores 128 x 256, 128 x 128 and 128 x 64 tiles (128 x 192 where A's and B's rows are
// 128-byte aligned, 256 x 152 where B is column-major, the cut tiles and the swapped ones in their one form) by how
// many SMs they keep busy. Some kinds of problem go to another step of the ladder, as a library's heuristic would
// send them (last_launch()["kernel"] names it):
//   - a few rows of A against a B whose rows are off 16 bytes, which the TMA would copy first, or of a
//     column-major A against a large B (hands_to_stream, sm90/handoff.h): mma_stream.cu streams B, in place;
//   - outputs that even narrow tiles cannot spread over the SMs, with K long enough to share (skinny M or N; the
//     plan's split > 1): wgmma_splitk.cu splits K over a cluster;
//   - outputs that even a cluster's split leaves mostly idle (fewer than hopper::kGridBelow of the SMs: 128 x 128,
//     256 x 256, 512 x 512 outputs), with K long enough to cut in slices of hopper::kGridSliceKblocks k-blocks,
//     and outputs that are not skinny whose tiles leave SMs idle over a long K (hopper::prefer_grid_split):
//     wgmma_splitk_grid.cu splits K over the whole grid (hopper::choose_grid_split);
//   - a B whose rows in storage order are not 32-byte aligned (row-major B on 3000 x 5000 x 2000: rows 10,000 bytes
//     apart; column-major B with K not a multiple of 16), planned on 128 x 256 or 256 x 152 tiles or on an output
//     that 128 x 256 tiles cover in at least one whole round of the SMs, with M > 128 (hands_to_cluster, sm90/
//     handoff.h: the cluster pairs tile rows, and one band of them has no pair): every 128-byte box row then straddles
//     five 32-byte sectors, not four, which costs each of the persistent kernel's tiles much of its speed against
//     the same B on 128-byte aligned rows (measured: docs/design/hopper.md); wgmma_cluster.cu multicasts each
//     256 x 64 B box to two blocks, halving those reads, which recovers most of it. (A's rows off the sectors cost
//     nothing measurable: its box has half as many rows. The narrow tiles of small outputs stay: the cluster's
//     128 x 256 tiles would leave SMs idle there.)
// The swapped cut tiles (hopper::kSwapFirstCode: C^T = B^T A^T, a tile's columns at steps of 16 along M) are
// choose_plan's candidates beside the cut tiles where their form holds (swap_form).
// GemmArgs::plan_tile (1/2/3/4: 128 x 256/128/64/192; 5/6: 256 x 152 in 4/3 stages; 7-16: the cut tiles, 17-26:
// the swapped cut tiles, 27-32: the 128-row ones paired in clusters of two) and ::split (1 = never; 2 and 4 over a
// cluster, other counts over the grid; with a cut, swapped or paired tile any count over the grid, inside this
// kernel: GridSplit) pin the plan. The model offers a cut tile split over the grid only where its fit has timed one,
// and the paired tiles whole (hopper::model_plan).
// `how` gets how the plan was chosen (PlanSource).
template <typename E>
cudaError_t launch_planned(const GemmArgsOf<E>& p, Acc acc, cudaStream_t stream, LaunchInfo* info, int* how) {
  *how = p.plan_tile != 0 || p.split != 0 ? kPlanPinned : kPlanRule;
  const int64_t row_bytes_a = (p.a_col_major ? p.sak : p.sam) * int64_t(sizeof(E));
  const int64_t row_bytes_b = (p.b_col_major ? p.sbn : p.sbk) * int64_t(sizeof(E));
  const bool b_rows_off16 = !tile::aligned16(p.B) || row_bytes_b % 16 != 0;
  if (p.plan_tile == 0 && p.split == 0 && hands_to_stream(p.M, p.N, p.K, b_rows_off16, p.a_col_major))
    return launch_mma_stream(p, acc, stream, info);
  const auto cut_codes = std::make_integer_sequence<int, hopper::kCutTileCount>();
  if (p.plan_tile >= hopper::kPairFirstCode) return launch_swap_code<2>(p.plan_tile, p, acc, stream, info, cut_codes);
  if (p.plan_tile >= hopper::kSwapFirstCode) return launch_swap_code<1>(p.plan_tile, p, acc, stream, info, cut_codes);
  if (p.plan_tile >= hopper::kCutFirstCode) return launch_cut_code(p.plan_tile, p, acc, stream, info, cut_codes);
  const bool rows_128b = row_bytes_a % 128 == 0 && row_bytes_b % 128 == 0;
  const bool b_rows_straddle = row_bytes_b % 32 != 0;
  // the cut tiles' one form (launch_tile), on B rows the 32-byte sectors hold (the others go to the cluster kernel)
  const bool cut_form = acc == Acc::F32 && !p.a_col_major && !b_rows_straddle &&
                        host::tma_describable(p.C, uint64_t(p.ldc));
  const int cut_menu = !cut_form ? hopper::kNoCut : p.b_col_major ? hopper::kCutAll : hopper::kCutWholeBoxes;
  // the swapped cut tiles' one form (launch_swapped): B' = A^T loaded as the cut tiles load column-major B, so A's
  // rows on the 32-byte sectors; A' = B^T in 16-byte rows (off the sectors costs A nothing measurable)
  const bool swap_form = acc == Acc::F32 && !p.a_col_major && row_bytes_a % 32 == 0 && !b_rows_off16 &&
                         host::tma_describable(p.C, uint64_t(p.ldc));
  const bool unpinned = p.plan_tile == 0 && p.split == 0;
  // the rule's plan, where it may stand: pinned, column-major A, whole boxes (hopper::model_plans)
  hopper::Plan plan = !unpinned || p.a_col_major || hopper::whole_boxes(p.N, p.K)
                          ? plan_wgmma(p, rows_128b ? kSpeed192 : 0.0, p.b_col_major ? hopper::kSpeedTall : 0.0,
                                       /*grid=*/!p.a_col_major, cut_menu, swap_form)
                          : hopper::Plan{256, 1};
  const bool by_model = unpinned && hopper::model_plans(p.M, p.N, p.K, p.a_col_major, plan.grid, cut_form);
  if (by_model) {
    hopper::ModelCall call;
    call.M = p.M, call.N = p.N, call.K = p.K, call.a_col = p.a_col_major, call.b_col = p.b_col_major;
    call.a_row_bytes = row_bytes_a, call.b_row_bytes = row_bytes_b, call.f32 = acc == Acc::F32;
    call.c_tma = host::tma_describable(p.C, uint64_t(p.ldc));
    plan = plan_by_model(call);
    if (plan.term >= 0) *how = kPlanModel + plan.term;
  }
  if (plan.cluster) return launch_wgmma_cluster(p, acc, stream, info);
  if (plan.grid) return launch_wgmma_splitk_grid_plan(p, acc, stream, info, plan);
  if (plan.cut) {  // a cut or swapped tile, split over the grid in this kernel where plan.split > 1 (GridSplit)
    GemmArgsOf<E> q = p;
    q.split = plan.split;
    if (plan.cut >= hopper::kPairFirstCode) return launch_swap_code<2>(plan.cut, q, acc, stream, info, cut_codes);
    return plan.swap ? launch_swap_code<1>(plan.cut, q, acc, stream, info, cut_codes)
                     : launch_cut_code(plan.cut, q, acc, stream, info, cut_codes);
  }
  if (plan.split > 1) return launch_wgmma_splitk_plan(p, acc, stream, info, plan);
  if (!by_model && p.plan_tile == 0 && hands_to_cluster(p.M, p.N, plan.bn, b_rows_straddle, hopper::sm_count()))
    return launch_wgmma_cluster(p, acc, stream, info);
  if (plan.bn == 152 && p.plan_tile == 6) return launch_plan_tile<6>(p, acc, stream, info);
  if (plan.bn == 152) return launch_plan_tile<5>(p, acc, stream, info);
  if (plan.bn == 256) return launch_plan_tile<1>(p, acc, stream, info);
  if (plan.bn == 192) return launch_plan_tile<4>(p, acc, stream, info);
  if (plan.bn == 128) return launch_plan_tile<2>(p, acc, stream, info);
  return launch_plan_tile<3>(p, acc, stream, info);
}

// The launch, and how its plan was chosen into LaunchInfo::plan (the launches above overwrite the rest of *info).
template <typename E>
cudaError_t launch_wgmma_persistent(const GemmArgsOf<E>& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  int how = kPlanUnreported;
  const cudaError_t err = launch_planned(p, acc, stream, info, &how);
  if (info) info->plan = how;
  return err;
}

// ---- PARTS (host/parts.h): part 0 the choice above, the registration and the narrow tile; the others one or
// two units each, the widest tiles' kernels (the slowest to compile) one A layout a part ----
#if HGEMM_IN_PART(0)
HGEMM_VARIANT_FP16_BF16(wgmma_persistent, launch_wgmma_persistent, AnyMajor);
TILE_UNITS(, 3);
#endif
#if HGEMM_IN_PART(1)
TILE_UNIT(, 1, false);
#endif
#if HGEMM_IN_PART(2)
TILE_UNIT(, 1, true);
#endif
#if HGEMM_IN_PART(3)
TILE_UNIT(, 4, false);
#endif
#if HGEMM_IN_PART(4)
TILE_UNIT(, 4, true);
#endif
#if HGEMM_IN_PART(5)
TILE_UNITS(, 2);
#endif
#if HGEMM_IN_PART(6)
TILE_UNIT(, 5, false);
TILE_UNIT(, 6, false);
#endif
#if HGEMM_IN_PART(7)
TILE_UNIT(, 5, true);
TILE_UNIT(, 6, true);
#endif
#if HGEMM_IN_PART(8)
TILE_UNIT(, 7, false);
TILE_UNIT(, 8, false);
TILE_UNIT(, 9, false);
#endif
#if HGEMM_IN_PART(9)
TILE_UNIT(, 10, false);
TILE_UNIT(, 11, false);
TILE_UNIT(, 12, false);
#endif
#if HGEMM_IN_PART(10)
TILE_UNIT(, 13, false);
TILE_UNIT(, 14, false);
#endif
#if HGEMM_IN_PART(11)
TILE_UNIT(, 15, false);
TILE_UNIT(, 16, false);
#endif
#if HGEMM_IN_PART(12)
SWAP_UNITS(, 0);
#endif
#if HGEMM_IN_PART(13)
SWAP_UNITS(, 1);
#endif
#if HGEMM_IN_PART(14)
SWAP_UNITS(, 2);
#endif
#if HGEMM_IN_PART(15)
SWAP_UNITS(, 3);
#endif
#if HGEMM_IN_PART(16)
SWAP_UNITS(, 4);
#endif
#if HGEMM_IN_PART(17)
SWAP_UNITS(, 5);
#endif
#if HGEMM_IN_PART(18)
SWAP_UNITS(, 7);
#endif
#if HGEMM_IN_PART(19)
SWAP_UNITS(, 8);
SWAP_UNITS(, 9);
#endif
#if HGEMM_IN_PART(20)
PAIR_UNITS(, 0);
PAIR_UNITS(, 1);
#endif
#if HGEMM_IN_PART(21)
PAIR_UNITS(, 2);
PAIR_UNITS(, 3);
#endif
#if HGEMM_IN_PART(22)
PAIR_UNITS(, 4);
PAIR_UNITS(, 5);
#endif
