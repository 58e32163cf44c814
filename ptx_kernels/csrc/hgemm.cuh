// hgemm.cuh — what every hand-written HGEMM variant shares with the binding layer: the problem description and
// the launcher signature. No Torch headers: kernel files compile with plain nvcc.
#pragma once
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

// The element types of A, B and C (one for all three): fp16 (`half`) and bf16 (`__nv_bfloat16`). Kernels take the
// type as a template parameter E; DType names it as a value where the type is not at hand (tensor maps).
enum class DType : int { F16 = 0, BF16 = 1 };
template <typename E>
struct DTypeOf;
template <>
struct DTypeOf<half> {
  static constexpr DType value = DType::F16;
};
template <>
struct DTypeOf<__nv_bfloat16> {
  static constexpr DType value = DType::BF16;
};

// C[M, N] = A[M, K] @ B[K, N], elements of type T in and out (GemmArgs: fp16; GemmArgsOf<__nv_bfloat16>: bf16).
// Strides in elements. Tensor-core variants need sak == 1 (A row-major) and either sbn == 1 (B row-major, "NN") or
// sbk == 1 (B column-major, "NT"); those registered with Operands::AnyMajor (host/registry.h) take sam == 1 (A
// column-major, "TN", "TT") too, as a_col_major says; the simt variant takes any strides. C is written with unit
// column stride and row stride ldc.
template <typename T>
struct GemmArgsOf {
  const T* A;
  const T* B;
  T* C;
  int M, N, K;
  int64_t sam, sak;
  int64_t sbk, sbn;
  int64_t ldc;
  bool b_col_major;
  // A column-major (sam == 1; its leading dimension is sak): read in place only by the variants registered with
  // Operands::AnyMajor; false for the others (the wrapper copies such an A to row-major first).
  bool a_col_major = false;
  // Two host-side choices, one byte each, in the padding after the layout flags.
  // Persistent sparse variants (wgmma_sp): the order of the tiles, sparse_hgemm(schedule=): 0 lets the launcher
  // choose, 1 / 2 single blocks walking bands of 8 / 16 tile rows, 3 clusters of two blocks sharing B by multicast.
  int8_t schedule = 0;
  // Hopper plans (hopper::choose_plan: wgmma_persistent, wgmma_splitk, wgmma_splitk_grid): 0 lets the plan choose
  // the block tile; 1/2/3/4 pin 128 x 256/128/64/192, 5/6 256 x 152 in 4/3 stages, 7-16 the cut tiles, 17-26 the
  // swapped cut tiles (hopper::cut_tile, hopper::kSwapFirstCode). No Python keyword sets it; the binding's
  // hgemm_launch(tile=1-26) does (tests and experiments pin plans so).
  int8_t plan_tile = 0;
  // The block tile, where a variant has two for an accumulation (the pipelined ones and mma_sp with fp16
  // accumulation: a large tile and the fp32 one): 0 lets the launcher pick by wave count (tile::prefer_large), 1
  // forces the large, 2 the other (hgemm(tile="auto" | "large" | "base")).
  int tile = 0;
  // Where a variant splits K (wgmma_splitk over a cluster, wgmma_splitk_grid over the grid, wgmma_persistent on
  // outputs with too few tiles to fill the GPU, and over the grid itself on a pinned cut or swapped tile): 0 lets
  // the launcher choose, 1 forbids splitting, S > 1 forces S parts (which kernel takes them: the variant's
  // launcher).
  int split = 0;
  // Variants that add partial tiles through global memory (wgmma_splitk_grid): an fp32 workspace of
  // workspace_bytes, on the launch's stream. A launcher that needs more than it was given fills
  // LaunchInfo::workspace_bytes and returns kWorkspaceNeeded without launching; the binding allocates that much
  // through Torch's caching allocator and calls it again.
  void* workspace = nullptr;
  int64_t workspace_bytes = 0;
  // Persistent variants (wgmma_persistent, wgmma_cluster, wgmma_sp): how many blocks walk the tiles when there are
  // more tiles than fit at once. 0 lets the launcher choose (today: as 2); 1 = as many as fit (one per SM); 2 = the
  // fewest that keep the same number of rounds, cdiv(tiles, rounds) (hopper::persistent_blocks).
  int grid = 0;
  // Stream-K (wgmma_streamk): the SM count its schedule sees (hopper::stream_k_cut); 0, or more than the device
  // has, is the device's. Tests lower it so that small problems take the schedule's cut tiles (hgemm(sms=...)).
  int sms = 0;
  // 2:4 sparse variants (problem kind "sparse"): A is the compressed values (M x Kp/2, Kp = K rounded up to 32) and E
  // the metadata, (Kp/32, ceil(M/16), 16) 32-bit words in the order the sparse instructions' lanes read them
  // (ptx_kernels/sparse.py). Unused (null) for dense variants.
  const uint32_t* E = nullptr;
};
using GemmArgs = GemmArgsOf<half>;
static_assert(sizeof(GemmArgs) == 128, "GemmArgs is passed to the sm_80 kernels by value: a new field goes into padding "
              "or after the kernels' other parameters move (a_col_major, schedule, plan_tile)");

// Accumulation. bf16 operands accumulate in fp32 only (mma.sync and wgmma have no bf16 or fp16 accumulator for
// them): launchers instantiate Acc::F16 for half alone.
enum class Acc : int { F32 = 0, F16 = 1 };

// Filled by a launcher so the binding can explain a failure and the harness can show what was launched.
struct LaunchInfo {
  unsigned grid_x = 0, grid_y = 0, block = 0;
  int smem_bytes = 0;  // dynamic + static shared memory per block
  int smem_limit = 0;  // the device's opt-in limit per block
  int tile_m = 0, tile_n = 0;  // the block tile launched, where the variant chooses between two (else 0)
  int split = 0;               // the K parts one output tile was split into (split-K launches; else 0)
  const char* kernel = nullptr;  // the variant whose kernel ran, where a launcher handed the problem to another's
  int64_t workspace_bytes = 0;   // the global workspace the launch needs (GemmArgs::workspace)
  int plan = 0;                  // how the launcher chose its plan (PlanSource), where it reports it (else 0)
};

// How a launcher that plans (wgmma_persistent) chose the plan it launched, LaunchInfo::plan: pinned by the call
// (GemmArgs::plan_tile or ::split), by a rule, or by the time model (blocks/plan_model.cuh), as kPlanModel + the
// hopper::ModelTerm that contributed most to the winner's predicted time. ptx_kernels.call.PLAN_SOURCES and
// MODEL_TERMS name them in this order.
enum PlanSource : int { kPlanUnreported = 0, kPlanPinned = 1, kPlanRule = 2, kPlanModel = 3 };

// A launcher's answer when GemmArgs::workspace is smaller than LaunchInfo::workspace_bytes: nothing was launched.
// (cudaErrorNotReady is never a launch's own error: it reports an unfinished asynchronous operation.)
constexpr cudaError_t kWorkspaceNeeded = cudaErrorNotReady;

// A variant's host launcher, defined in its kernel file (sm80/<variant>.cu, or sm90/ for an sm_90a-only kernel) and
// registered there with HGEMM_VARIANT (host/registry.h): nothing else names it. A variant that takes bf16 too has a
// launcher template, instantiated for half and __nv_bfloat16 (HGEMM_VARIANT_FP16_BF16).
template <typename E>
using LauncherOf = cudaError_t (*)(const GemmArgsOf<E>&, Acc, cudaStream_t, LaunchInfo*);
using Launcher = LauncherOf<half>;
