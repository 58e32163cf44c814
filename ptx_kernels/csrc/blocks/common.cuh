// blocks/common.cuh — index arithmetic the blocks and the host launchers share: ceil-division,
// compile-time loops, 16-byte alignment, the grouped block order.
// Device building blocks (csrc/blocks/, one file per concern: smem layouts, copies, stage sync, fragments,
// epilogues), shared by the kernels in sm80/ and by the sweeps and tests that instantiate them.
#pragma once
#include <cstdint>
#include <type_traits>
#include <utility>

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

// Grouped (swizzled) block order: GROUP tile-rows are walked down one tile-column before moving right, so
// consecutive blocks share B tiles in L2 (the Triton tutorial's GROUP_M).
__device__ __forceinline__ void grouped_tile(int pid, int tiles_m, int tiles_n, int group, int& tm, int& tn) {
  const int per_group = group * tiles_n;
  const int first_m = (pid / per_group) * group;
  const int rows = min(tiles_m - first_m, group);
  tm = first_m + (pid % per_group) % rows;
  tn = (pid % per_group) / rows;
}

}  // namespace tile
