// blocks/element.cuh — what changes with the element type E of A, B and C (half or __nv_bfloat16) besides the
// tensor-core instruction: fp32 -> E conversions for the epilogues (round to nearest even), one element or a packed
// pair, the pair's vector type. Both types are 2 bytes, so tiles, swizzles, copies and ldmatrix/stmatrix are the
// same bytes for both; the MMA wrappers are chosen where the accumulators live (blocks/fragments.cuh MmaAcc,
// blocks/wgmma_tile.cuh wgmma_ss).
// Device building blocks (csrc/blocks/, one file per concern: smem layouts, copies, stage sync, fragments,
// epilogues), shared by the kernels in sm80/ and by the sweeps and tests that instantiate them.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace tile {

template <typename E>
struct Element;

template <>
struct Element<half> {
  using Pair = half2;  // two consecutive elements, as one 32-bit register of an mma fragment holds them
  __device__ __forceinline__ static half from_float(float x) { return __float2half_rn(x); }
  __device__ __forceinline__ static Pair pair(float lo, float hi) { return __floats2half2_rn(lo, hi); }
};

template <>
struct Element<__nv_bfloat16> {
  using Pair = __nv_bfloat162;
  __device__ __forceinline__ static __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
  __device__ __forceinline__ static Pair pair(float lo, float hi) { return __float22bfloat162_rn(make_float2(lo, hi)); }
};

static_assert(sizeof(half) == 2 && sizeof(__nv_bfloat16) == 2, "both element types are 2 bytes: one tile layout");

template <typename E>
constexpr bool is_bf16 = std::is_same<E, __nv_bfloat16>::value;

// The 32-bit word of an fp32 pair rounded to E (lo in the low half: the lower address).
template <typename E>
__device__ __forceinline__ uint32_t pair_bits(float lo, float hi) {
  const typename Element<E>::Pair v = Element<E>::pair(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// x as an element of E: a copy when it is one already, else rounded from fp32.
template <typename E, typename Src>
__device__ __forceinline__ E to_element(Src x) {
  if constexpr (std::is_same<Src, E>::value) return x;
  else return Element<E>::from_float(float(x));
}

}  // namespace tile
