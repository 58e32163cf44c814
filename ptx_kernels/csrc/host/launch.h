// host/launch.h — the host side of a kernel file: the grid, the shared-memory opt-in, the choice among a
// kernel's instantiations (element type x accumulation x B layout, A layout where the variant reads both, and a
// second tile where there is one), what the binding is told about the launch, and the registration
// (host/registry.h). Included by the kernel files (nvcc).
#pragma once
#include <atomic>
#include <map>
#include <mutex>
#include <type_traits>
#include <utility>

#include "blocks/common.cuh"
#include "hgemm.cuh"
#include "host/registry.h"

namespace tile {

// True when every row of A and B starts on a 16-byte boundary: the condition for uint4 loads and cp.async.
template <typename E>
inline bool rows_aligned16(const GemmArgsOf<E>& p) {
  const int64_t ldb = p.b_col_major ? p.sbn : p.sbk;
  return aligned16(p.A) && aligned16(p.B) && p.sam % 8 == 0 && ldb % 8 == 0;
}

// Raise the kernel's dynamic shared-memory limit when it needs more than the default 48 KB; fail with
// cudaErrorInvalidValue (and info->smem_limit filled) when the device cannot give that much. Both the device's
// limit and the attribute are set up once per kernel and device: they sat on every call's host path (a
// cudaFuncSetAttribute per launch), which is what a model's forward pass pays per GEMM.
inline cudaError_t smem_optin_limit(int dev, int* limit) {
  static std::atomic<int> limits[64] = {};
  *limit = dev >= 0 && dev < 64 ? limits[dev].load(std::memory_order_relaxed) : 0;
  if (*limit > 0) return cudaSuccess;
  const cudaError_t err = cudaDeviceGetAttribute(limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  if (err == cudaSuccess && dev >= 0 && dev < 64) limits[dev].store(*limit, std::memory_order_relaxed);
  return err;
}

template <typename Kernel>
inline cudaError_t prepare_smem(Kernel kernel, int bytes, LaunchInfo* info) {
  int dev = 0, limit = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = smem_optin_limit(dev, &limit);
  if (err != cudaSuccess) return err;
  if (info) {
    info->smem_bytes = bytes;
    info->smem_limit = limit;
  }
  if (bytes > limit) return cudaErrorInvalidValue;
  if (bytes <= 48 * 1024) return cudaSuccess;
  // (kernel, device) -> the largest size already granted; a kernel's size is fixed, so this is set once.
  static std::mutex mu;
  static std::map<std::pair<const void*, int>, int> granted;
  const auto key = std::make_pair(reinterpret_cast<const void*>(kernel), dev);
  {
    std::lock_guard<std::mutex> lock(mu);
    const auto it = granted.find(key);
    if (it != granted.end() && it->second >= bytes) return cudaSuccess;
  }
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (err == cudaSuccess) {
    std::lock_guard<std::mutex> lock(mu);
    int& g = granted[key];
    g = g > bytes ? g : bytes;
  }
  return err;
}

// The instantiations a translation unit builds: every one (the extension), or, where `compare inspect` compiles a
// kernel file for the one instantiation it shows (ptx_kernels/toolchain.py: only_flags), those of one accumulation
// and operand layout, as -DHGEMM_ONLY_ACC=0|1 (Acc), -DHGEMM_ONLY_B_COL=0|1 and -DHGEMM_ONLY_A_COL=0|1 name them
// (each optional; host/registry.h: HGEMM_ONLY_ELEMENT): a few of wgmma_persistent's 120 kernels instead of all.
// A launch of one left out returns cudaErrorNotSupported.
constexpr bool builds(Acc acc, bool b_col) {
  return true
#ifdef HGEMM_ONLY_ACC
         && int(acc) == HGEMM_ONLY_ACC
#endif
#ifdef HGEMM_ONLY_B_COL
         && b_col == bool(HGEMM_ONLY_B_COL)
#endif
      ;
}
constexpr bool builds_a(bool a_col) {
  return true
#ifdef HGEMM_ONLY_A_COL
         && a_col == bool(HGEMM_ONLY_A_COL)
#endif
      ;
}

// Call launch(acc, b_col) with both as compile-time constants (std::integral_constant), so one host-side lambda
// launches whichever of a kernel's instantiations (accumulation x B layout) the problem needs: four for fp16
// operands (E = half), two for bf16 (E = __nv_bfloat16: fp32 accumulation only, so no bf16 x fp16-accumulation
// kernel is ever instantiated; asking for one returns cudaErrorNotSupported, which Python's check_acc prevents).
template <typename E = half, class F>
inline cudaError_t dispatch(Acc acc, bool b_col_major, F&& launch) {
  using F32 = std::integral_constant<Acc, Acc::F32>;
  using F16 = std::integral_constant<Acc, Acc::F16>;
  auto built = [&](auto acc_c, auto b_col_c) -> cudaError_t {
    if constexpr (builds(decltype(acc_c)::value, decltype(b_col_c)::value)) {
      return launch(acc_c, b_col_c);
    } else {
      return cudaErrorNotSupported;
    }
  };
  if (acc == Acc::F32) return b_col_major ? built(F32{}, std::true_type{}) : built(F32{}, std::false_type{});
  if constexpr (std::is_same<E, half>::value) {
    return b_col_major ? built(F16{}, std::true_type{}) : built(F16{}, std::false_type{});
  } else {
    return cudaErrorNotSupported;
  }
}

// dispatch with A's layout as well: launch(acc, a_col, b_col), all three compile-time constants, for the launchers
// of variants that read column-major A in place (Operands::AnyMajor): twice dispatch's instantiations.
template <typename E = half, class F>
inline cudaError_t dispatch_ab(Acc acc, bool a_col_major, bool b_col_major, F&& launch) {
  return dispatch<E>(acc, b_col_major, [&](auto acc_c, auto b_col_c) -> cudaError_t {
    if (a_col_major) {
      if constexpr (builds_a(true)) return launch(acc_c, std::true_type{}, b_col_c);
    } else {
      if constexpr (builds_a(false)) return launch(acc_c, std::false_type{}, b_col_c);
    }
    return cudaErrorNotSupported;
  });
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
template <typename E>
inline bool prefer_large(const GemmArgsOf<E>& p, int BM, int BN, int SM, int SN) {
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
// T32. Only the combinations that can run are instantiated (bf16: T32 with fp32 accumulation, see dispatch).
template <class T32, class T16, typename E, class F>
inline cudaError_t dispatch_tiles(const GemmArgsOf<E>& p, Acc acc, F&& launch) {
  const bool large = acc == Acc::F16 && prefer_large(p, T16::BM, T16::BN, T32::BM, T32::BN);
  return dispatch<E>(acc, p.b_col_major, [&](auto acc_c, auto b_col_c) {
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
