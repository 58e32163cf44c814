// wgmma_splitk.cu — Hopper ladder, step 5: split-K over a thread block cluster, the partial sums added through
// distributed shared memory.
//
// A 16 x 4096 output is 64 tiles of 128 x 64 (32 of 128 x 128): half of the 132 SMs stream B while the rest idle,
// and a decode-sized GEMM is all B streaming (16 x 4096 x 4096: 32 MB of B for 0.5 GFLOP). Here the S blocks of
// a cluster (S = 2 or 4, %cluster_nctarank) share one output tile and each takes 1/S of its k-blocks, so
// tiles x S blocks stream B. The partial sums never leave the chip and the result does not depend on timing:
//   1. each block runs the warp-specialized pipeline of wgmma_ws.cu over its k-blocks (producer warpgroup + two
//      consumer warpgroups, full/empty mbarriers);
//   2. the consumers write their fp32 accumulators into the block's own shared memory (over the operand ring,
//      whose last stage has been read by then);
//   3. cluster barrier; block r then adds, for its 1/S of the tile's columns, the S partial tiles in rank order
//      0, 1, .., S-1 (ld.shared::cluster from each peer's shared memory), and stores them to C (fp16 or bf16);
//   4. a second cluster barrier keeps every block alive until its peers have read its partials.
// Fixed order, no atomics: the same inputs give the same bits on every run (tests/test_ptx_hgemm.py checks). One
// tile per cluster, one wave: the launcher splits only when tiles x S clusters run at once (hopper::choose_plan), and
// wgmma_persistent.cu hands such outputs to this kernel.
// Edges as in the other Hopper kernels: TMA reads zeros past M, N and K; the stores are masked to M x N.
// Element types: fp16 (fp32 or fp16 accumulation) and bf16 (fp32), the template parameter E; A and B each row- or
// column-major in place (A_COL, B_COL), as wgmma_persistent.cu takes them.
// Built in two parts (host/parts.h): the 128 x 256 tile's kernels in one, the rest of the file in the other; its 36
// kernels would keep one core busy far longer than most files of the build.
#include <algorithm>
#include <atomic>

#include "blocks/wgmma_tile.cuh"
#include "host/parts.h"
#include "host/registry.h"
#include "ptx/cluster.cuh"
#include "sm90/handoff.h"

namespace {

// Tiles 128 x BN in STAGES stages, as wgmma_persistent.cu's (without the TMA-store staging: the partial tile
// reuses the ring). The partial tile is 128 rows of BN fp32, rows padded by 8 floats (a warp's float2 stores of one
// fragment column block then fall in 2 wavefronts, not 8).
template <int BN_, int STAGES_>
struct Tile {
  static constexpr int BM = 128, BN = BN_, STAGES = STAGES_, LDP = BN + 8;
  template <typename E>
  using Storage = hopper::SharedStorage<E, BM, BN, STAGES>;
  static_assert(offsetof(Storage<half>, B) == sizeof(Storage<half>::A),
                "the ring's A and B stages are one contiguous region");
  static_assert(BM * LDP * sizeof(float) <= sizeof(Storage<half>::A) + sizeof(Storage<half>::B),
                "the partial tile fits the ring");
  static_assert(hopper::smem_request<Storage<half>>() <= 227 * 1024, "the ring fits in 227 KB");
};
using Wide = Tile<256, 4>;
using Medium = Tile<128, 6>;
using Narrow = Tile<64, 8>;

constexpr int GROUP_M = 8;
constexpr int kConsumers = 2, kThreads = (1 + kConsumers) * hopper::kWarpgroup;
constexpr int kProducerRegs = 40, kConsumerRegs = 232;  // as wgmma_persistent.cu
constexpr uint32_t kConsumersBarrier = 1;               // named barrier of the 256 consumer threads

// Block `rank`'s share of the reduction: columns rank * BN / S .. of the tile's first min(BM, M - tm BM) rows, in
// float4 chunks, each the sum of the cluster's S partial tiles in rank order, stored as fp16. A thread takes
// chunks first, first + stride, ...; the S loads of a chunk are in flight together. (Batching several chunks' loads
// spilled at the kernel's 168 registers; a split output has at most 64 rows, so a thread has about one chunk.)
// The sums are rounded to C's element type E.
template <int S, typename T, typename E>
__device__ __forceinline__ void add_partials(uint32_t local, E* C, int64_t ldc, int M, int N, int tm, int tn,
                                             int rank, bool pairs, int first, int stride) {
  constexpr int kChunks = T::BN / S / 4;
  static_assert(T::BN % (4 * S) == 0, "a block's columns are whole float4 chunks");
  uint32_t peer[S];  // the partial tile's address in each block of the cluster
#pragma unroll
  for (int q = 0; q < S; ++q) peer[q] = ptx::mapa_shared(local, uint32_t(q));
  const int items = min(T::BM, M - tm * T::BM) * kChunks;
  for (int i = first; i < items; i += stride) {
    const int row = i / kChunks, col = rank * (T::BN / S) + 4 * (i % kChunks);
    const uint32_t offset = uint32_t((row * T::LDP + col) * sizeof(float));
    float4 v[S];
#pragma unroll
    for (int q = 0; q < S; ++q) v[q] = ptx::ld_shared_cluster_v4_f32(peer[q] + offset);
    float4 sum = v[0];
#pragma unroll
    for (int q = 1; q < S; ++q) sum.x += v[q].x, sum.y += v[q].y, sum.z += v[q].z, sum.w += v[q].w;
    const int grow = tm * T::BM + row, gcol = tn * T::BN + col;
    hopper::store_pair(C, ldc, M, N, grow, gcol, tile::pair_bits<E>(sum.x, sum.y), pairs);
    hopper::store_pair(C, ldc, M, N, grow, gcol + 2, tile::pair_bits<E>(sum.z, sum.w), pairs);
  }
}

template <typename E, typename T, Acc ACC, bool B_COL, bool A_COL>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_splitk_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                        const __grid_constant__ CUtensorMap tma_c, E* __restrict__ C, int64_t ldc, int M, int N,
                        int K, bool pairs) {
  constexpr int BM = T::BM, BN = T::BN, LDP = T::LDP;
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  auto& ss = hopper::aligned_storage<typename T::template Storage<E>>(smem_raw);
  float* partial = reinterpret_cast<float*>(ss.A);  // (BM, LDP) fp32, over the ring once the main loop is done
  const int wg = threadIdx.x / hopper::kWarpgroup, tid = threadIdx.x % hopper::kWarpgroup;
  const int split = int(ptx::cluster_nctarank()), rank = int(ptx::cluster_ctarank());
  const int tiles_m = hopper::cdiv(M, BM), tiles_n = hopper::cdiv(N, BN);
  int tm, tn;
  hopper::tile_coords<GROUP_M>(int(blockIdx.x) / split, tiles_m, tiles_n, tm, tn);
  // This block's k-blocks: part `rank` of S near-equal parts (each non-empty: the launcher keeps S <= k-blocks).
  const int kblocks = hopper::cdiv(K, hopper::BK), a_rows = hopper::a_box_rows(M, BM);  // A box: see load_kblock
  const int kb0 = kblocks * rank / split, kb1 = kblocks * (rank + 1) / split;

  // ---- PROLOGUE: barriers ----
  if (threadIdx.x == 0) {
    ptx::prefetch_tensormap(&tma_a);
    ptx::prefetch_tensormap(&tma_b);
    hopper::init_ring(ss, kConsumers);
  }
  __syncthreads();

  if (wg == 0) {
    // ---- PRODUCER ----
    ptx::setmaxnreg_dec<kProducerRegs>();
    if (tid == 0) {
      int s = 0;
      uint32_t phase = 0;
      hopper::produce_tile<BM, BN, B_COL, A_COL>(ss, &tma_a, &tma_b, tm * BM, tn * BN, kb0, kb1, a_rows, s,
                                                 phase);
    }
  } else {
    // ---- CONSUMERS: MAIN LOOP over this block's k-blocks, then the partial tile into shared memory ----
    ptx::setmaxnreg_inc<kConsumerRegs>();
    hopper::Accum<BN, ACC> acc;
    const int slab = (wg - 1) * 64;
    int s = 0;
    uint32_t phase = 0;
    auto release = [&](int stage) {
      if (tid == 0) ptx::mbarrier_arrive(ptx::smem_u32(&ss.empty[stage]));
    };
    const bool idle = tm * BM + slab >= M;  // the slab's rows all lie past M: no partial rows to add (add_partials)
    if (idle) {
      hopper::pass_tile(ss, kb1 - kb0, s, phase, release);
    } else if (kb1 > kb0) {
      hopper::mma_tile<BN, B_COL, 1, A_COL>(ss, acc.d, slab, kb1 - kb0, s, phase, release);
    } else {
#pragma unroll
      for (auto& x : acc.d) x = 0;
    }
    // Both consumers' wgmma have read their last stage (wait_group 0 in mma_tile) and every TMA load has landed
    // (each was waited for on full[]): the ring is free to hold the partial tile.
    ptx::named_barrier_sync(kConsumersBarrier, kConsumers * hopper::kWarpgroup);
    const int warp = tid / 32, lane = tid % 32, r = slab + warp * 16 + lane / 4;
    if (!idle) {
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const int c = 8 * j + 2 * (lane % 4);
        *reinterpret_cast<float2*>(&partial[r * LDP + c]) = hopper::fragment_float2(acc.d, j, 0);
        *reinterpret_cast<float2*>(&partial[(r + 8) * LDP + c]) = hopper::fragment_float2(acc.d, j, 1);
      }
    }
  }
  // ---- EPILOGUE: the cluster's partial tiles, added in rank order ----
  ptx::cluster_sync();  // every block's partial tile is written (release/acquire across the cluster)
  if (wg > 0) {
    const int first = threadIdx.x - hopper::kWarpgroup, stride = kConsumers * hopper::kWarpgroup;
    const uint32_t local = ptx::smem_u32(partial);
    if (split == 4) add_partials<4, T>(local, C, ldc, M, N, tm, tn, rank, pairs, first, stride);
    else if (split == 2) add_partials<2, T>(local, C, ldc, M, N, tm, tn, rank, pairs, first, stride);
    else add_partials<1, T>(local, C, ldc, M, N, tm, tn, rank, pairs, first, stride);
  }
  ptx::cluster_sync();  // no block leaves (freeing its shared memory) while a peer may still read its partials
}

template <typename T, typename E>
cudaError_t launch_tile(const GemmArgsOf<E>& p, Acc acc, int split, cudaStream_t stream, LaunchInfo* info) {
  hopper::Operands ops;
  const cudaError_t err = hopper::make_operands(p, T::BM, T::BN, &ops);
  if (err != cudaSuccess) return err;
  const dim3 grid(hopper::cdiv(p.M, T::BM) * hopper::cdiv(p.N, T::BN) * split);
  const cudaError_t launched =
      tile::dispatch_ab<E>(acc, p.a_col_major, p.b_col_major, [&](auto acc_c, auto a_col_c, auto b_col_c) {
        constexpr auto kernel = wgmma_splitk_kernel<E, T, acc_c.value, b_col_c.value, a_col_c.value>;
        return hopper::launch<kernel, typename T::template Storage<E>>(grid, kThreads, T::BM, T::BN, p, ops, stream,
                                                                       info, /*cluster=*/split, /*split=*/split);
      });
  if (info) info->kernel = "wgmma_splitk";
  return launched;
}

// Blocks of one split launch that run at once in clusters of `split`: cudaOccupancyMaxActiveClusters x split.
// Clusters are placed inside a GPC, so fewer run than SMs / split (a 4-block cluster launch of 128 blocks took two
// waves on the 132-SM H100, docs/design/hopper.md). Asked once per device and size; every instantiation has the
// same shared memory and block (bf16's too), so one stands for all. Defined in part 0 only (host/parts.h): it
// names a 128 x 128 kernel, which part 0 holds.
int wave_blocks(int split);
#if HGEMM_IN_PART(0)
int wave_blocks(int split) {
  static std::atomic<int> cache[64][3] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev >= 64) return 0;
  const int slot = split == 2 ? 1 : split == 4 ? 2 : 0;
  int blocks = cache[dev][slot].load(std::memory_order_relaxed);
  if (blocks > 0) return blocks;
  constexpr auto kernel = wgmma_splitk_kernel<half, Medium, Acc::F32, true, false>;
  const int smem = hopper::smem_request<typename Medium::template Storage<half>>();
  if (tile::prepare_smem(kernel, smem, nullptr) != cudaSuccess) return 0;
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = hopper::cluster_config(dim3(split * hopper::sm_count()), kThreads, smem, split,
                                                        nullptr, &attr);
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg) != cudaSuccess || clusters <= 0) {
    cudaGetLastError();  // not sticky: the plan falls back to the SM count
    return 0;
  }
  blocks = clusters * split;
  cache[dev][slot].store(blocks, std::memory_order_relaxed);
  return blocks;
}
#endif

}  // namespace

// The 128 x 256 tile's launches: a unit of the build's parts (host/parts.h), so outside the anonymous namespace;
// declared here, so that the call below does not instantiate it, and instantiated in its part at the end.
template <typename E>
cudaError_t launch_splitk_wide(const GemmArgsOf<E>& p, Acc acc, int split, cudaStream_t stream, LaunchInfo* info) {
  return launch_tile<Wide>(p, acc, split, stream, info);
}
#define WIDE_UNIT(EXTERN)                                                                                         \
  HGEMM_UNIT(HGEMM_UNIT_HALF, EXTERN)                                                                            \
  template cudaError_t launch_splitk_wide<half>(const GemmArgsOf<half>&, Acc, int, cudaStream_t, LaunchInfo*);    \
  HGEMM_UNIT(HGEMM_UNIT_BF16, EXTERN)                                                                            \
  template cudaError_t launch_splitk_wide<__nv_bfloat16>(const GemmArgsOf<__nv_bfloat16>&, Acc, int,              \
                                                         cudaStream_t, LaunchInfo*)
WIDE_UNIT(extern);

// ---- HOST: the plan -> tensor maps -> launch ----
template <typename E>
hopper::Plan plan_wgmma(const GemmArgsOf<E>& p, double speed192, double speed_tall, bool grid, int cut_menu,
                        bool swap) {
  const int force_bn = p.plan_tile == 1   ? 256
                       : p.plan_tile == 2 ? 128
                       : p.plan_tile == 3 ? 64
                       : p.plan_tile == 4 ? 192
                       : p.plan_tile == 5 || p.plan_tile == 6 ? 152
                                     : 0;
  const int sms = hopper::sm_count();
  if (p.split == 3 || p.split > 4) return hopper::choose_grid_split(p.M, p.N, p.K, sms, force_bn, p.split);
  hopper::Plan plan = hopper::choose_plan(p.M, p.N, p.K, sms, force_bn, p.split, 4, wave_blocks(2), wave_blocks(4),
                                          speed192, speed_tall, cut_menu, swap);
  if (grid && p.split == 0 && p.plan_tile <= 3) plan = hopper::prefer_grid_split(plan, p.M, p.N, p.K, sms, force_bn);
  return plan;
}

#if HGEMM_IN_PART(0)
// A prediction of every candidate costs microseconds of host time, so each thread keeps its last few plans, by what
// the plan depends on: the sizes, the layouts, the rows' alignment classes, C, the accumulation and the device.
hopper::Plan plan_by_model(hopper::ModelCall call) {
  int dev = 0;
  cudaGetDevice(&dev);
  const auto bits = [](int64_t row) { return (row % 16 == 0) | (row % 32 == 0) << 1 | (row % 128 == 0) << 2; };
  const int64_t key[4] = {call.M, call.N, call.K,
                          int64_t(dev) << 16 | bits(call.a_row_bytes) << 7 | bits(call.b_row_bytes) << 4 |
                              int64_t(call.a_col) << 3 | int64_t(call.b_col) << 2 | int64_t(call.c_tma) << 1 |
                              int64_t(call.f32)};
  struct Entry {
    int64_t key[4];
    hopper::Plan plan;
  };
  constexpr int kEntries = 8;
  thread_local Entry cache[kEntries] = {};
  thread_local int next = 0;
  for (const Entry& e : cache)
    if (std::equal(key, key + 4, e.key) && e.plan.bn) return e.plan;
  int clock_khz = 0, bus_bits = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, dev);
  cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev);
  call.sms = hopper::sm_count();
  call.wave2 = wave_blocks(2) > 0 ? wave_blocks(2) : call.sms;
  call.wave4 = wave_blocks(4) > 0 ? wave_blocks(4) : call.sms;
  call.cluster_slots = call.wave2 / 2;
  call.hbm_bytes_per_us = 2.0 * clock_khz * 1e3 * (bus_bits / 8) / 1e6;  // double data rate
  if (call.hbm_bytes_per_us <= 0.0) call.hbm_bytes_per_us = 3.35e6;     // a device that does not say: an H100's
  const hopper::Plan plan = hopper::model_plan(call);
  Entry& e = cache[next];
  next = (next + 1) % kEntries;
  std::copy(key, key + 4, e.key);
  e.plan = plan;
  return plan;
}
#endif

template <typename E>
cudaError_t launch_wgmma_splitk_plan(const GemmArgsOf<E>& p, Acc acc, cudaStream_t stream, LaunchInfo* info,
                                     hopper::Plan plan) {
  if (plan.bn == 192 || plan.bn == 152 || plan.grid)
    return cudaErrorInvalidValue;  // the persistent kernel's own tiles (GemmArgs::plan_tile 4-6), the grid's splits
  if (plan.bn == 256) return launch_splitk_wide(p, acc, plan.split, stream, info);
  if (plan.bn == 128) return launch_tile<Medium>(p, acc, plan.split, stream, info);
  return launch_tile<Narrow>(p, acc, plan.split, stream, info);
}

// As a variant of its own: the same plan as wgmma_persistent's, but unsplit plans run here too (one block per
// tile, not persistent); GemmArgs::plan_tile (1/2/3: 128 x 256/128/64) and ::split (1/2/4) pin it.
template <typename E>
cudaError_t launch_wgmma_splitk(const GemmArgsOf<E>& p, Acc acc, cudaStream_t stream, LaunchInfo* info) {
  if (p.split > 4 || p.split == 3) return cudaErrorInvalidValue;  // a cluster holds 1, 2 or 4 parts
  if (p.plan_tile >= hopper::kCutFirstCode) return cudaErrorInvalidValue;  // the persistent kernel's cut tiles
  return launch_wgmma_splitk_plan(p, acc, stream, info, plan_wgmma(p));
}

// ---- PARTS (host/parts.h): part 0 the host code above with the 128 x 128 and 128 x 64 tiles' kernels, and the
// registration; part 1 the 128 x 256 tile's kernels ----
#if HGEMM_IN_PART(0)
// The hand-off's entry points (sm90/handoff.h), for wgmma_persistent.cu's translation unit (not where `compare
// inspect` compiles this file for one element type: host/registry.h, HGEMM_ONLY_ELEMENT).
#ifndef HGEMM_ONLY_ELEMENT
template hopper::Plan plan_wgmma<half>(const GemmArgsOf<half>&, double, double, bool, int, bool);
template hopper::Plan plan_wgmma<__nv_bfloat16>(const GemmArgsOf<__nv_bfloat16>&, double, double, bool, int,
                                                    bool);
template cudaError_t launch_wgmma_splitk_plan<half>(const GemmArgsOf<half>&, Acc, cudaStream_t, LaunchInfo*,
                                                    hopper::Plan);
template cudaError_t launch_wgmma_splitk_plan<__nv_bfloat16>(const GemmArgsOf<__nv_bfloat16>&, Acc, cudaStream_t,
                                                             LaunchInfo*, hopper::Plan);
#endif

HGEMM_VARIANT_FP16_BF16(wgmma_splitk, launch_wgmma_splitk, AnyMajor);
#endif
#if HGEMM_IN_PART(1)
WIDE_UNIT();
#endif
